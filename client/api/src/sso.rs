//! Single sign-on for native clients (the CLI's `nimbus login --sso`, the desktop app) through
//! the system browser with a loopback redirect (RFC 8252): listen on 127.0.0.1 at a random
//! port, send the browser to the gateway's `/api/v1/auth/oidc/start` with that address and a
//! PKCE challenge, wait for the gateway's redirect carrying a one-time code, and trade the code
//! (with the PKCE verifier, which never left this process) for an ordinary device token.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use nimbus_proto::wire::LoginResponse;
use rand::RngCore;
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::{Client, Error, Result};

/// How long the browser step may take (signing in at the provider included).
pub const BROWSER_TIMEOUT: Duration = Duration::from_secs(300);
/// The loopback path the gateway redirects to.
const CALLBACK_PATH: &str = "/nimbus-sso";

/// Signs in through the browser and returns the gateway's answer (the device token is not
/// kept in `client`). `open` is given the URL to show the user; it opens a browser or prints
/// the URL (it returns whether a browser was started, for the caller's messages only).
pub async fn sign_in(client: &Client, device: &str, open: impl FnOnce(&str) -> bool) -> Result<LoginResponse> {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| Error::Io { context: "cannot listen on 127.0.0.1 for the browser's answer".into(), err: e })?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::Io { context: "cannot read the loopback port".into(), err: e })?
        .port();
    let (verifier, challenge) = pkce_pair();
    let redirect = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
    let url = start_url(client.base_url(), &redirect, &challenge, device);
    let _ = open(&url);
    let code = tokio::time::timeout(BROWSER_TIMEOUT, wait_for_code(&listener))
        .await
        .map_err(|_| Error::Invalid("the browser sign-in did not finish within 5 minutes".into()))??;
    client.oidc_token(&code, &verifier).await
}

/// Starts the system's browser on `url` (`open` on macOS, the URL handler on Windows,
/// `xdg-open` elsewhere); false when there is none to start. The CLI and the desktop app pass
/// it to [`sign_in`].
pub fn open_browser(url: &str) -> bool {
    let mut cmd = if cfg!(target_os = "macos") {
        std::process::Command::new("open")
    } else if cfg!(windows) {
        let mut c = std::process::Command::new("rundll32");
        c.arg("url.dll,FileProtocolHandler");
        c
    } else {
        std::process::Command::new("xdg-open")
    };
    cmd.arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}

/// The gateway's start URL for a client flow.
pub fn start_url(base: &str, redirect: &str, challenge: &str, device: &str) -> String {
    let enc = |s: &str| percent_encode(s);
    format!(
        "{base}/api/v1/auth/oidc/start?cli_redirect={}&cli_challenge={}&device={}",
        enc(redirect),
        enc(challenge),
        enc(device)
    )
}

/// A PKCE verifier (43 characters of base64url) and its S256 challenge (RFC 7636).
pub fn pkce_pair() -> (String, String) {
    let mut raw = [0u8; 32];
    rand::rng().fill_bytes(&mut raw);
    let verifier = URL_SAFE_NO_PAD.encode(raw);
    let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// Answers loopback requests until one brings the gateway's redirect: `?code=` or `?error=`.
/// Anything else (a favicon request, a stray connection) gets a 404 and the wait goes on.
async fn wait_for_code(listener: &TcpListener) -> Result<String> {
    loop {
        let (mut conn, _) = listener
            .accept()
            .await
            .map_err(|e| Error::Io { context: "the loopback listener failed".into(), err: e })?;
        let Some(target) = read_request_target(&mut conn).await else { continue };
        let Some(query) = target.strip_prefix(CALLBACK_PATH).and_then(|r| r.strip_prefix('?')) else {
            let _ = respond(&mut conn, "404 Not Found", "Not found.").await;
            continue;
        };
        let param = |name: &str| {
            query.split('&').find_map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (k == name).then(|| percent_decode(v))
            })
        };
        if let Some(code) = param("code").filter(|c| !c.is_empty()) {
            let _ = respond(&mut conn, "200 OK", "Signed in to Nimbus. You can close this window.").await;
            return Ok(code);
        }
        if let Some(err) = param("error") {
            let _ = respond(&mut conn, "200 OK", &format!("Sign-in failed: {err}")).await;
            return Err(Error::Invalid(format!("single sign-on failed: {err}")));
        }
        let _ = respond(&mut conn, "400 Bad Request", "No sign-in result in this request.").await;
    }
}

/// The request target of an HTTP/1 request line (`GET /path?query HTTP/1.1`), reading at most
/// 8 KiB of head within 10 seconds.
async fn read_request_target(conn: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let read = async {
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
            let n = conn.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        Some(())
    };
    tokio::time::timeout(Duration::from_secs(10), read).await.ok()??;
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next()?.split(' ');
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) => Some(target.to_string()),
        _ => None,
    }
}

async fn respond(conn: &mut tokio::net::TcpStream, status: &str, text: &str) -> std::io::Result<()> {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Nimbus</title></head><body><p>{}</p></body></html>",
        text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
    );
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(resp.as_bytes()).await?;
    conn.shutdown().await
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes.get(i..i + 3) {
            Some([b'%', h, l]) => hex(*h).zip(hex(*l)).map(|(h, l)| h * 16 + l),
            _ => None,
        };
        match (escaped, bytes[i]) {
            (Some(v), _) => {
                out.push(v);
                i += 3;
                continue;
            }
            (None, b'+') => out.push(b' '),
            (None, b) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_challenge_is_s256_of_the_verifier() {
        let (v, c) = pkce_pair();
        assert_eq!(v.len(), 43);
        assert_eq!(c, URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(v.as_bytes())));
        assert_ne!(pkce_pair().0, v);
    }

    #[test]
    fn query_values_round_trip() {
        for s in ["plain", "a b&c=d/é", "100%"] {
            assert_eq!(percent_decode(&percent_encode(s)), s);
        }
        assert_eq!(percent_decode("a+b%2"), "a b%2");
    }

    #[tokio::test]
    async fn the_loopback_takes_the_code_and_ignores_the_rest() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let waiter = tokio::spawn(async move { wait_for_code(&listener).await });
        async fn get(port: u16, target: &str) -> std::io::Result<String> {
            let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
            c.write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await?;
            let mut out = String::new();
            c.read_to_string(&mut out).await?;
            Ok(out)
        }
        assert!(get(port, "/favicon.ico").await?.starts_with("HTTP/1.1 404"));
        assert!(get(port, "/nimbus-sso?code=abc%2Bd&x=1").await?.starts_with("HTTP/1.1 200"));
        assert_eq!(waiter.await??, "abc+d");
        Ok(())
    }
}
