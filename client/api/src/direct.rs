//! Reading blocks straight from the object store (`--s3-direct-reads` on the gateway): the
//! gateway answers a block GET that carries [`ACCEPT_REDIRECT_HEADER`] with `307` and a URL
//! signed for that one block, and the bytes then never pass through the gateway. Only callers
//! that check each block against its hash ask for it; the URL is the only credential sent to
//! the store (never the gateway's token).
//!
//! A store this client cannot use (unreachable from here, a certificate it does not trust, a
//! refused or expired URL) turns direct reads off for [`PAUSE`]: blocks come through the
//! gateway meanwhile, as they do from a gateway without the option.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use reqwest::{Response, StatusCode, header};

pub use nimbus_proto::ACCEPT_REDIRECT_HEADER;

use crate::error::{Error, Result};
use nimbus_blockcache::buf::BlockBuf;

/// How long direct reads stay off after one failed.
pub const PAUSE: Duration = Duration::from_secs(300);

/// Whether direct reads are on (shared by a client's clones).
#[derive(Debug, Default)]
pub struct DirectReads {
    /// Unix ms until which direct reads are off; 0: on.
    paused_until_ms: AtomicU64,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl DirectReads {
    pub fn on(&self) -> bool {
        now_ms() >= self.paused_until_ms.load(Ordering::Relaxed)
    }

    pub fn pause(&self) {
        self.paused_until_ms.store(now_ms() + PAUSE.as_millis() as u64, Ordering::Relaxed);
    }
}

/// The `Location` of a `307` from the gateway, if that is what `resp` is.
pub fn redirect_target(resp: &Response) -> Option<reqwest::Url> {
    if resp.status() != StatusCode::TEMPORARY_REDIRECT {
        return None;
    }
    let loc = resp.headers().get(header::LOCATION)?.to_str().ok()?;
    let url = reqwest::Url::parse(loc).ok()?;
    matches!(url.scheme(), "http" | "https").then_some(url)
}

/// A block's body into one buffer of the announced size as the chunks arrive (`bytes()`
/// keeps every chunk until the end and then copies them: twice the block in memory), at most
/// `limit` bytes; with `idle`, a body that stalls that long is an error.
pub async fn read_block(mut resp: Response, limit: u64, idle: Option<Duration>) -> Result<Bytes> {
    let announced = resp.content_length().unwrap_or(0);
    if announced > limit {
        return Err(Error::Protocol(format!("a block of {announced} bytes, more than any block may hold")));
    }
    let mut buf = BlockBuf::with_capacity(announced as usize);
    loop {
        let chunk = match idle {
            // From the store: its URL carries the signature, so it stays out of the error.
            Some(idle) => tokio::time::timeout(idle, resp.chunk())
                .await
                .map_err(|_| stalled(idle))?
                .map_err(|e| e.without_url())?,
            None => resp.chunk().await?,
        };
        let Some(chunk) = chunk else { break };
        if (buf.len() + chunk.len()) as u64 > limit {
            return Err(Error::Protocol("a block body longer than any block may be".into()));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

fn stalled(idle: Duration) -> Error {
    Error::Protocol(format!("the object store sent nothing for {} s", idle.as_secs()))
}

/// The block at the store's URL `url` (no credential but the URL's own signature). A store
/// that sends nothing for `idle` is given up: the gateway is there to read the block instead.
pub async fn fetch(http: &reqwest::Client, url: reqwest::Url, limit: u64, idle: Duration) -> Result<Bytes> {
    let sent = tokio::time::timeout(idle, http.get(url).send()).await.map_err(|_| stalled(idle))?;
    // The URL carries its signature: never in an error (they get logged).
    let resp = sent.map_err(|e| e.without_url())?;
    if resp.status() != StatusCode::OK {
        return Err(Error::Protocol(format!("the object store answered HTTP {} to a block read", resp.status())));
    }
    read_block(resp, limit, Some(idle)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A gateway that sends every block read that accepts a redirect to `target`, and answers
    /// the others itself; counts the redirects.
    async fn gateway(target: String, redirects: Arc<AtomicUsize>) -> std::io::Result<String> {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", l.local_addr()?);
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let (target, redirects) = (target.clone(), redirects.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        let mut chunk = [0u8; 4096];
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                        buf.drain(..end + 4);
                        let answer = if head.contains(ACCEPT_REDIRECT_HEADER) {
                            redirects.fetch_add(1, Ordering::SeqCst);
                            format!(
                                "HTTP/1.1 307 Temporary Redirect\r\nlocation: {target}\r\ncontent-length: 0\r\n\r\n"
                            )
                        } else {
                            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello".to_string()
                        };
                        if s.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Ok(url)
    }

    /// A store nobody can reach: the block comes through the gateway, and the next reads do
    /// not ask for a redirect again.
    #[tokio::test]
    async fn an_unreachable_store_falls_back_to_the_gateway() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await?.local_addr()?;
        let redirects = Arc::new(AtomicUsize::new(0));
        let url = gateway(format!("http://{dead}/bucket/block?X-Amz-Signature=x"), redirects.clone()).await?;
        let client = crate::Client::new(crate::ClientOptions { base_url: url, ..Default::default() })?;
        let hash = "ab".repeat(32);
        for _ in 0..3 {
            assert_eq!(client.get_block_checked(&hash, None).await?.as_ref(), b"hello");
        }
        assert_eq!(redirects.load(Ordering::SeqCst), 1, "asked again after the store failed");
        assert!(!client.direct.on());
        // A redirect to nowhere usable is a failure too.
        let odd = crate::Client::new(crate::ClientOptions {
            base_url: gateway("ftp://store/x".into(), redirects.clone()).await?,
            ..Default::default()
        })?;
        assert_eq!(odd.get_block_checked(&hash, None).await?.as_ref(), b"hello");
        assert!(!odd.direct.on());
        assert_eq!(redirects.load(Ordering::SeqCst), 2);
        // The plain read never asks.
        client.direct.paused_until_ms.store(0, Ordering::Relaxed);
        let block = client.get_block_for(&hash, None).await?;
        assert_eq!(block.as_ref(), b"hello");
        assert_eq!(redirects.load(Ordering::SeqCst), 2);
        // Received page-aligned: the drive writes it to disk from where it is (`O_DIRECT`).
        assert_eq!(block.as_ptr().align_offset(nimbus_blockcache::buf::PAGE), 0);
        Ok(())
    }

    /// A store that accepts the connection and then says nothing, or stops halfway, is given up.
    #[tokio::test]
    async fn a_silent_store_is_given_up() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let store = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = store.local_addr()?;
        tokio::spawn(async move {
            let mut held = Vec::new();
            let mut n = 0;
            while let Ok((mut s, _)) = store.accept().await {
                n += 1;
                if n == 2 {
                    // Announces 10 bytes, sends 3.
                    let mut req = [0u8; 4096];
                    let _ = s.read(&mut req).await;
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc").await;
                }
                held.push(s);
            }
        });
        let http = reqwest::Client::new();
        let idle = Duration::from_millis(300);
        for what in ["no answer", "a body cut short"] {
            let url = reqwest::Url::parse(&format!("http://{addr}/b?X-Amz-Signature=secret"))?;
            let err = fetch(&http, url, 1 << 20, idle).await.expect_err(what);
            assert!(err.to_string().contains("sent nothing for"), "{what}: {err}");
        }
        // Nobody listening: an error that does not show the signed URL.
        let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await?.local_addr()?;
        let url = reqwest::Url::parse(&format!("http://{dead}/b?X-Amz-Signature=secret"))?;
        let err = fetch(&http, url, 1 << 20, idle).await.expect_err("nobody listening");
        assert!(!err.to_string().contains("secret"), "{err}");
        Ok(())
    }

    /// A store that refuses the URL (expired, say) is a failure too.
    #[tokio::test]
    async fn a_refusing_store_falls_back_to_the_gateway() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let store = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let store_url = format!("http://{}/bucket/block", store.local_addr()?);
        tokio::spawn(async move {
            while let Ok((mut s, _)) = store.accept().await {
                let mut chunk = [0u8; 4096];
                let _ = s.read(&mut chunk).await;
                let _ = s.write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n").await;
            }
        });
        let redirects = Arc::new(AtomicUsize::new(0));
        let url = gateway(store_url, redirects.clone()).await?;
        let client = crate::Client::new(crate::ClientOptions { base_url: url, ..Default::default() })?;
        assert_eq!(client.get_block_checked(&"cd".repeat(32), None).await?.as_ref(), b"hello");
        assert_eq!(redirects.load(Ordering::SeqCst), 1);
        assert!(!client.direct.on());
        Ok(())
    }
}
