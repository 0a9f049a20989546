//! Request headers that more than one door reads. A leaf, so that the doors and the REST API
//! share it without depending on each other.

/// The header with which a REST client that holds a WebDAV lock sends its token(s).
pub const LOCK_TOKEN_HEADER: &str = "x-nimbus-lock-token";

/// The lock tokens a request holds: every `X-Nimbus-Lock-Token` value, comma-separated lists
/// allowed, with or without the `<...>` of WebDAV's Coded-URL form.
pub fn lock_tokens(headers: &axum::http::HeaderMap) -> Vec<String> {
    headers
        .get_all(LOCK_TOKEN_HEADER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches('<').trim_end_matches('>').trim().to_string())
        .filter(|t| !t.is_empty() && t.len() <= 256)
        .take(16)
        .collect()
}
