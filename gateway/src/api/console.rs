//! The two front ends of admin-ui: the admin console (admin-ui/dist) at `/admin` and the users'
//! web app (admin-ui/dist-web) at `/`: static files, with index.html for any client-side
//! route. The files are inside the binary (build.rs builds admin-ui, rust-embed embeds both
//! dists); `--admin-ui-dir` / `--web-ui-dir` serve a directory instead, for working on them.
//! A binary built without npm has neither: the page then says how to get it.

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
struct AdminFiles;

/// admin-ui/dist-web (the users' web app), likewise.
#[derive(rust_embed::RustEmbed)]
#[folder = "$OUT_DIR/web-ui"]
#[allow_missing = true]
struct WebFiles;

/// One front end the gateway serves: where its files are and what to say without them.
pub struct Front {
    /// The URL prefix its files are under (`/admin`; empty for the web app at `/`).
    prefix: &'static str,
    embedded: fn(&str) -> Option<rust_embed::EmbeddedFile>,
    /// The page of a binary built without npm, and of an override directory without index.html.
    not_embedded: &'static str,
    dir_not_built: &'static str,
    csp: &'static str,
}

impl Front {
    /// Whether this binary carries it.
    pub fn embedded(&self) -> bool {
        (self.embedded)("index.html").is_some()
    }
}

pub const ADMIN: Front = Front {
    prefix: "/admin",
    embedded: AdminFiles::get,
    not_embedded: ADMIN_NOT_EMBEDDED,
    dir_not_built: ADMIN_DIR_NOT_BUILT,
    csp: crate::browser::CONSOLE_CSP,
};

pub const WEB: Front = Front {
    prefix: "",
    embedded: WebFiles::get,
    not_embedded: WEB_NOT_EMBEDDED,
    dir_not_built: WEB_DIR_NOT_BUILT,
    csp: crate::browser::WEB_APP_CSP,
};

const ADMIN_NOT_EMBEDDED: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Nimbus admin</title></head>\
<body><h1>This gateway was built without its admin console</h1><p>npm was not installed when \
<code>nimbus-gateway</code> was compiled. Install Node.js 20.19 or newer with npm \
(<code>infra/install-deps.sh</code> does) and run <code>cargo build -p nimbus-gateway</code> again: \
it builds the console and puts it inside the binary. Or serve a built copy \
(<code>cd admin-ui &amp;&amp; npm ci &amp;&amp; npm run build</code>) with <code>--admin-ui-dir admin-ui/dist</code>.</p></body></html>";

const ADMIN_DIR_NOT_BUILT: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Nimbus admin</title></head>\
<body><h1>The admin console directory holds no console</h1><p>The directory given with \
<code>--admin-ui-dir</code> has no <code>index.html</code>. Build the console there with \
<code>cd admin-ui &amp;&amp; npm ci &amp;&amp; npm run build</code> (it writes admin-ui/dist), \
or leave out <code>--admin-ui-dir</code> to serve the console built into the gateway.</p></body></html>";

const WEB_NOT_EMBEDDED: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Nimbus</title></head>\
<body><h1>This gateway was built without its web app</h1><p>npm was not installed when \
<code>nimbus-gateway</code> was compiled. Install Node.js 20.19 or newer with npm \
(<code>infra/install-deps.sh</code> does) and run <code>cargo build -p nimbus-gateway</code> again: \
it builds the web app and puts it inside the binary. Or serve a built copy \
(<code>cd admin-ui &amp;&amp; npm ci &amp;&amp; npm run build</code>) with <code>--web-ui-dir admin-ui/dist-web</code>. \
Your files are reachable meanwhile through WebDAV (<code>/dav/</code>), the drive and the CLI.</p></body></html>";

const WEB_DIR_NOT_BUILT: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Nimbus</title></head>\
<body><h1>The web app directory holds no web app</h1><p>The directory given with \
<code>--web-ui-dir</code> has no <code>index.html</code>. Build the web app there with \
<code>cd admin-ui &amp;&amp; npm ci &amp;&amp; npm run build</code> (it writes admin-ui/dist-web), \
or leave out <code>--web-ui-dir</code> to serve the web app built into the gateway.</p></body></html>";

pub async fn redirect_root() -> Redirect {
    Redirect::permanent("/admin/")
}

/// Where a front end's files come from: a directory, or files compiled in.
enum Source<'a> {
    Dir(&'a Path),
    Embedded,
}

/// The console at `/admin/...`.
pub async fn serve(State(st): State<AppState>, uri: Uri) -> Response {
    serve_front(&ADMIN, st.settings.admin_ui_dir.as_deref(), uri.path()).await
}

/// The web app at `/` and its client-side routes (api/mod.rs lists them).
pub async fn serve_web(State(st): State<AppState>, uri: Uri) -> Response {
    serve_front(&WEB, st.settings.web_ui_dir.as_deref(), uri.path()).await
}

async fn serve_front(front: &Front, dir: Option<&Path>, path: &str) -> Response {
    let source = match dir {
        Some(dir) => Source::Dir(dir),
        None => Source::Embedded,
    };
    serve_from(front, &source, path).await
}

async fn file(front: &Front, source: &Source<'_>, rel: &Path, hashed: bool) -> Option<Response> {
    let body = match source {
        Source::Dir(dir) => Body::from(tokio::fs::read(dir.join(rel)).await.ok()?),
        Source::Embedded => match (front.embedded)(rel.to_str()?)?.data {
            Cow::Borrowed(b) => Body::from(b),
            Cow::Owned(v) => Body::from(v),
        },
    };
    Some(with_headers(body, rel, hashed, front.csp))
}

async fn serve_from(front: &Front, source: &Source<'_>, path: &str) -> Response {
    let rel = path.strip_prefix(front.prefix).unwrap_or("").trim_start_matches('/');
    match safe_relative(rel) {
        Some(p) if !rel.is_empty() => {
            if let Some(resp) = file(front, source, &p, rel.starts_with("assets/")).await {
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
    match file(front, source, Path::new("index.html"), false).await {
        Some(resp) => resp,
        None => {
            let page = match source {
                Source::Dir(_) => front.dir_not_built,
                Source::Embedded => front.not_embedded,
            };
            (StatusCode::SERVICE_UNAVAILABLE, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], page)
                .into_response()
        }
    }
}

/// The request path as a relative path with only normal components (no `..`, no root).
fn safe_relative(rel: &str) -> Option<PathBuf> {
    let p = Path::new(rel);
    p.components().all(|c| matches!(c, Component::Normal(_))).then(|| p.to_path_buf())
}

fn with_headers(body: Body, path: &Path, hashed: bool, csp: &'static str) -> Response {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(ext)));
    // Vite puts a content hash in every name under assets/; index.html must be revalidated.
    let cache = if hashed { "public, max-age=31536000, immutable" } else { "no-cache" };
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // The front end's own policy instead of the sandbox every other answer gets (browser.rs);
    // X-Frame-Options for browsers without CSP's frame-ancestors.
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(csp));
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
    async fn without_a_front_end_says_how_to_get_it() {
        let admin = Front { embedded: Nothing::get, ..ADMIN };
        let web = Front { embedded: Nothing::get, ..WEB };
        for (front, path) in [(&admin, "/admin/"), (&admin, "/admin/users/3"), (&web, "/"), (&web, "/files/a/b")] {
            let resp = serve_from(front, &Source::Embedded, path).await;
            assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(text(resp).await.contains("cargo build -p nimbus-gateway"));
        }
        assert_eq!(serve_from(&admin, &Source::Embedded, "/admin/assets/x.js").await.status(), StatusCode::NOT_FOUND);
        assert_eq!(serve_from(&web, &Source::Embedded, "/assets/x.js").await.status(), StatusCode::NOT_FOUND);
        let empty = tempfile::tempdir().expect("tempdir");
        let resp = serve_from(&admin, &Source::Dir(empty.path()), "/admin/").await;
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(text(resp).await.contains("--admin-ui-dir"));
        let resp = serve_from(&web, &Source::Dir(empty.path()), "/").await;
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(text(resp).await.contains("--web-ui-dir"));
    }

    #[tokio::test]
    async fn each_front_end_has_its_own_policy() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("index.html"), "<!doctype html>app").expect("write");
        let web = serve_from(&WEB, &Source::Dir(dir.path()), "/files/Docs").await;
        assert_eq!(web.status(), StatusCode::OK);
        assert_eq!(web.headers()[header::CONTENT_SECURITY_POLICY], crate::browser::WEB_APP_CSP);
        let admin = serve_from(&ADMIN, &Source::Dir(dir.path()), "/admin/users").await;
        assert_eq!(admin.headers()[header::CONTENT_SECURITY_POLICY], crate::browser::CONSOLE_CSP);
    }

    #[test]
    fn types() {
        assert_eq!(content_type("js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("css"), "text/css; charset=utf-8");
    }
}
