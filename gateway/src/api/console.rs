//! The admin web console (admin-ui/dist) at `/admin`: static files, with index.html for any
//! client-side route. The files come from `--admin-ui-dir`, or by default from the admin-ui/dist
//! of the source tree this binary was built from (what the README's run command builds).
//! Without a built console the page says how to build it instead of failing.

use std::path::{Component, Path, PathBuf};

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};

use crate::state::AppState;

/// admin-ui/dist next to the gateway's sources at build time.
pub fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../admin-ui/dist")
}

const NOT_BUILT: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Nimbus admin</title></head>\
<body><h1>The admin console is not built</h1><p>Build it with <code>cd admin-ui &amp;&amp; npm ci &amp;&amp; npm run build</code> \
(infra/run.sh does this), or point the gateway at a built copy with <code>--admin-ui-dir</code>.</p></body></html>";

pub async fn redirect_root() -> Redirect {
    Redirect::permanent("/admin/")
}

pub async fn serve(State(st): State<AppState>, uri: Uri) -> Response {
    let dir = st.settings.admin_ui_dir.clone().unwrap_or_else(default_dir);
    let rel = uri.path().strip_prefix("/admin").unwrap_or("").trim_start_matches('/');
    match safe_relative(rel) {
        Some(p) if !rel.is_empty() => {
            if let Some(resp) = file(&dir.join(&p), rel.starts_with("assets/")).await {
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
    match file(&dir.join("index.html"), false).await {
        Some(resp) => resp,
        None => (StatusCode::SERVICE_UNAVAILABLE, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], NOT_BUILT)
            .into_response(),
    }
}

/// The request path as a relative path with only normal components (no `..`, no root).
fn safe_relative(rel: &str) -> Option<PathBuf> {
    let p = Path::new(rel);
    p.components().all(|c| matches!(c, Component::Normal(_))).then(|| p.to_path_buf())
}

async fn file(path: &Path, hashed: bool) -> Option<Response> {
    let body = tokio::fs::read(path).await.ok()?;
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
    Some(resp)
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

    #[test]
    fn types() {
        assert_eq!(content_type("js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("css"), "text/css; charset=utf-8");
    }
}
