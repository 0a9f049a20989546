//! The admin web console (admin-ui/dist) at `/admin`: static files, with index.html for any
//! client-side route. The files are inside the binary (build.rs builds admin-ui, rust-embed
//! embeds its dist); `--admin-ui-dir` serves a directory instead, for working on the console.
//! A binary built without npm has no console: the page then says how to get it.

use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};

use crate::state::AppState;

/// admin-ui/dist as build.rs left it (its copy in OUT_DIR); empty when npm was missing.
#[derive(rust_embed::RustEmbed)]
#[folder = "$OUT_DIR/admin-ui"]
#[allow_missing = true]
struct Embedded;

/// Whether this binary carries the console.
pub fn embedded() -> bool {
    Embedded::get("index.html").is_some()
}

const NOT_EMBEDDED: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Nimbus admin</title></head>\
<body><h1>This gateway was built without its admin console</h1><p>npm was not installed when \
<code>nimbus-gateway</code> was compiled. Install Node.js 20.19 or newer with npm \
(<code>infra/install-deps.sh</code> does) and run <code>cargo build -p nimbus-gateway</code> again: \
it builds the console and puts it inside the binary. Or serve a built copy \
(<code>cd admin-ui &amp;&amp; npm ci &amp;&amp; npm run build</code>) with <code>--admin-ui-dir admin-ui/dist</code>.</p></body></html>";

const DIR_NOT_BUILT: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Nimbus admin</title></head>\
<body><h1>The admin console directory holds no console</h1><p>The directory given with \
<code>--admin-ui-dir</code> has no <code>index.html</code>. Build the console there with \
<code>cd admin-ui &amp;&amp; npm ci &amp;&amp; npm run build</code> (it writes admin-ui/dist), \
or leave out <code>--admin-ui-dir</code> to serve the console built into the gateway.</p></body></html>";

pub async fn redirect_root() -> Redirect {
    Redirect::permanent("/admin/")
}

/// Where the console's files come from: a directory, or files compiled in (`Embedded::get`).
enum Source<'a> {
    Dir(&'a Path),
    Embedded(fn(&str) -> Option<rust_embed::EmbeddedFile>),
}

impl Source<'_> {
    async fn file(&self, rel: &Path, hashed: bool) -> Option<Response> {
        let body = match self {
            Source::Dir(dir) => Body::from(tokio::fs::read(dir.join(rel)).await.ok()?),
            Source::Embedded(get) => match get(rel.to_str()?)?.data {
                Cow::Borrowed(b) => Body::from(b),
                Cow::Owned(v) => Body::from(v),
            },
        };
        Some(with_headers(body, rel, hashed))
    }

    fn not_built(&self) -> &'static str {
        match self {
            Source::Dir(_) => DIR_NOT_BUILT,
            Source::Embedded(_) => NOT_EMBEDDED,
        }
    }
}

pub async fn serve(State(st): State<AppState>, uri: Uri) -> Response {
    let source = match &st.settings.admin_ui_dir {
        Some(dir) => Source::Dir(dir),
        None => Source::Embedded(Embedded::get),
    };
    serve_from(&source, uri.path()).await
}

async fn serve_from(source: &Source<'_>, path: &str) -> Response {
    let rel = path.strip_prefix("/admin").unwrap_or("").trim_start_matches('/');
    match safe_relative(rel) {
        Some(p) if !rel.is_empty() => {
            if let Some(resp) = source.file(&p, rel.starts_with("assets/")).await {
                return resp;
            }
            // A missing asset is a 404; anything else is a client-side route.
            if rel.starts_with("assets/") || Path::new(rel).extension().is_some() {
                return (StatusCode::NOT_FOUND, "no such file").into_response();
            }
        }
        Some(_) => {}
        None => return (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
    match source.file(Path::new("index.html"), false).await {
        Some(resp) => resp,
        None => {
            (StatusCode::SERVICE_UNAVAILABLE, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], source.not_built())
                .into_response()
        }
    }
}

/// The request path as a relative path with only normal components (no `..`, no root).
fn safe_relative(rel: &str) -> Option<PathBuf> {
    let p = Path::new(rel);
    p.components().all(|c| matches!(c, Component::Normal(_))).then(|| p.to_path_buf())
}

fn with_headers(body: Body, path: &Path, hashed: bool) -> Response {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(ext)));
    // Vite puts a content hash in every name under assets/; index.html must be revalidated.
    let cache = if hashed { "public, max-age=31536000, immutable" } else { "no-cache" };
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // The console's own policy instead of the sandbox every other answer gets (browser.rs);
    // X-Frame-Options for browsers without CSP's frame-ancestors.
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(crate::browser::CONSOLE_CSP));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    resp
}

fn content_type(ext: &str) -> &'static str {
    match ext {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_traversal() {
        assert!(safe_relative("../etc/passwd").is_none());
        assert!(safe_relative("assets/../../x").is_none());
        assert!(safe_relative("/etc/passwd").is_none());
        assert!(safe_relative("assets/index-abc.js").is_some());
    }

    /// What a binary built without npm embeds.
    #[derive(rust_embed::RustEmbed)]
    #[folder = "src/api/no-such-console"]
    #[allow_missing = true]
    struct Nothing;

    async fn text(resp: Response) -> String {
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap_or_default();
        String::from_utf8_lossy(&body).into_owned()
    }

    #[tokio::test]
    async fn without_a_console_says_how_to_get_it() {
        for path in ["/admin/", "/admin/users/3"] {
            let resp = serve_from(&Source::Embedded(Nothing::get), path).await;
            assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(text(resp).await.contains("cargo build -p nimbus-gateway"));
        }
        assert_eq!(
            serve_from(&Source::Embedded(Nothing::get), "/admin/assets/x.js").await.status(),
            StatusCode::NOT_FOUND
        );
        let empty = tempfile::tempdir().expect("tempdir");
        let resp = serve_from(&Source::Dir(empty.path()), "/admin/").await;
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(text(resp).await.contains("--admin-ui-dir"));
    }

    #[test]
    fn types() {
        assert_eq!(content_type("js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("css"), "text/css; charset=utf-8");
    }
}
