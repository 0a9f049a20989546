//! WebDAV requests as a client sends them to `/dav/` (bearer token of an [`Api`]).

use anyhow::Context;
use reqwest::Method;

use crate::{Api, Resp};

/// An exclusive write lock's body.
pub const LOCKINFO: &str = r#"<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>e2e</D:owner></D:lockinfo>"#;

/// A WebDAV request `m` on `path` (starting with `/dav/`) as `api`'s user.
pub async fn dav(api: &Api, m: &str, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> anyhow::Result<Resp> {
    let mut r = api.req(Method::from_bytes(m.as_bytes()).context("method")?, path);
    for (k, v) in headers {
        r = r.header(k, v);
    }
    r.body(body).send().await
}

/// LOCKs `path` and returns the token (without the angle brackets).
pub async fn lock(api: &Api, path: &str, headers: &[(&str, &str)]) -> anyhow::Result<String> {
    let r = dav(api, "LOCK", path, headers, LOCKINFO.as_bytes().to_vec()).await?;
    r.check_any(&[200, 201])?;
    let t = r.header("lock-token").with_context(|| format!("no Lock-Token: {r}"))?;
    Ok(t.trim_matches(|c| c == '<' || c == '>').to_string())
}
