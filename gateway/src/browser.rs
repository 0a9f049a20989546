//! What browsers may do with the gateway's answers (docs/API.md, "Browser safety").
//!
//! Users' files are served from the gateway's own origin (`/api/v1/files`, `/dav/`), the one
//! the admin console runs on, and from the S3 door's. A stored `.html` or `.svg` opened in a
//! browser must never run as a page of that origin: it could call the API with the console's
//! token. So every answer of every listener carries `X-Content-Type-Options: nosniff` and,
//! unless it set its own policy (the console's pages), a CSP that sandboxes the document
//! (an opaque origin, no scripts, no forms, no plugins); file bodies are sent as attachments
//! unless their type is one a browser shows passively; over TLS every answer carries HSTS.

use axum::http::{HeaderMap, HeaderValue, header};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// The policy of everything that is not the console: a document shown from here gets an
/// opaque origin and may load nothing but inline styles (what GitHub's raw files send).
pub const SANDBOX_CSP: &str = "sandbox; default-src 'none'; style-src 'unsafe-inline'";

/// The console's pages (admin-ui/dist): its own scripts and styles only (Mantine injects
/// `<style>` elements, hence `'unsafe-inline'` for styles, never for scripts), API calls to
/// this origin only, and no framing by anyone (clickjacking).
pub const CONSOLE_CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
form-action 'self'; frame-ancestors 'none'";

/// The users' web app's pages (admin-ui/dist-web): the console's policy, plus what it needs to
/// hash uploads and show previews: WebAssembly compiled from its own script (BLAKE3 in
/// hash-wasm, `'wasm-unsafe-eval'`, which allows no JavaScript eval) and `blob:` URLs the app
/// makes from files it downloaded with its token, for images, audio/video and a PDF frame.
pub const WEB_APP_CSP: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; media-src 'self' blob:; frame-src blob:; \
font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
frame-ancestors 'none'";

/// One year; no `includeSubDomains`: the gateway does not speak for sibling hosts.
pub const HSTS: &str = "max-age=31536000";

/// The headers every answer of every listener gets (server.rs's last layer): `tls` says whether
/// it serves HTTPS. Set only where a handler did not (a download's sandbox CSP stays).
pub fn apply(h: &mut HeaderMap, tls: bool) {
    h.entry(header::X_CONTENT_TYPE_OPTIONS).or_insert(HeaderValue::from_static("nosniff"));
    h.entry(header::CONTENT_SECURITY_POLICY).or_insert(HeaderValue::from_static(SANDBOX_CSP));
    if tls {
        h.entry(header::STRICT_TRANSPORT_SECURITY).or_insert(HeaderValue::from_static(HSTS));
    }
}

/// Whether a browser may show a body of this `Content-Type` inline: types it only displays
/// (raster images, audio, video, plain text). Everything else (HTML, SVG, XML, scripts, PDF,
/// unknown or missing types) is sent as an attachment, an allowlist so that a type nobody
/// thought of is not rendered.
pub fn shows_inline(content_type: Option<&str>) -> bool {
    let Some(ct) = content_type else { return false };
    let essence = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let Some((kind, sub)) = essence.split_once('/') else { return false };
    match kind {
        "image" => !sub.contains("svg") && !sub.contains("xml"),
        "audio" | "video" => true,
        "text" => sub == "plain",
        _ => false,
    }
}

/// RFC 8187 `attr-char`s stay, everything else is percent-encoded.
const ATTR: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'!')
    .remove(b'#')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b'-')
    .remove(b'.')
    .remove(b'^')
    .remove(b'_')
    .remove(b'`')
    .remove(b'|')
    .remove(b'~');

/// `Content-Disposition: attachment` naming the file (RFC 6266): an ASCII `filename` for old
/// clients and the exact UTF-8 name in `filename*`.
pub fn attachment(name: &str) -> HeaderValue {
    // Written into one buffer that becomes the value: every download sends this header.
    let mut v = String::with_capacity(48 + 4 * name.len());
    v.push_str("attachment; filename=\"");
    v.extend(name.chars().map(|c| if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' { c } else { '_' }));
    v.push_str("\"; filename*=UTF-8''");
    v.extend(utf8_percent_encode(name, ATTR));
    HeaderValue::try_from(v).unwrap_or_else(|_| HeaderValue::from_static("attachment"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passive_types_only_inline() {
        for t in ["image/png", "image/jpeg", "video/mp4", "audio/ogg", "text/plain; charset=utf-8", "IMAGE/GIF"] {
            assert!(shows_inline(Some(t)), "{t}");
        }
        for t in [
            "text/html",
            "text/html; charset=utf-8",
            "application/xhtml+xml",
            "image/svg+xml",
            "text/xml",
            "application/xml",
            "application/rss+xml",
            "text/javascript",
            "application/javascript",
            "application/pdf",
            "application/octet-stream",
            "multipart/byteranges; boundary=x",
            "text/xsl",
            "garbage",
            "",
        ] {
            assert!(!shows_inline(Some(t)), "{t}");
        }
        assert!(!shows_inline(None));
    }

    #[test]
    fn attachment_names() {
        assert_eq!(attachment("a.html"), "attachment; filename=\"a.html\"; filename*=UTF-8''a.html");
        assert_eq!(
            attachment("ünï \"q\".svg"),
            "attachment; filename=\"_n_ _q_.svg\"; filename*=UTF-8''%C3%BCn%C3%AF%20%22q%22.svg"
        );
        // Header injection is impossible: control characters are encoded.
        let v = attachment("a\r\nSet-Cookie: x");
        assert!(!v.as_bytes().contains(&b'\r') && !v.as_bytes().contains(&b'\n'));
    }
}
