//! A lean GetObject for block reads: one pooled HTTP client, a SigV4 header signed with the
//! AWS SDK's own signer (`aws-sigv4`), and the body read straight into one buffer of the
//! announced length.
//!
//! Why not the SDK here: a cache miss or a bypassed read is a store GET per block, and on the
//! cold path the gateway's per-request CPU competes with the store's own (see the cache
//! benchmark in docs/BENCHMARKS.md). The SDK runs its whole orchestrator per call (interceptors,
//! endpoint resolution, retry classification) and collects the body into segments before
//! copying them into one buffer. Block GETs need none of that: a fixed path-style URL, static
//! credentials, and a body whose length is known. Everything else (puts, listings, bucket
//! set-up) stays on the SDK. Used only when the store has an explicit endpoint, path-style
//! addressing and static credentials; otherwise the SDK path serves reads too.

use std::ops::Range;
use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings, UriPathNormalizationMode,
    sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::{Bytes, BytesMut};

use super::{BlockStream, StoreError, StoreResult};

/// Largest body accepted for one block object: a block is at most 4 MiB, and a store that
/// announces more is not answering for a block.
const MAX_BLOCK_BODY: u64 = 64 << 20;

/// Attempts per GET: a second one covers a pooled connection the store closed under us, or
/// one dropped reply; more would only delay the 503 a down store deserves.
const ATTEMPTS: u32 = 2;

/// A pooled HTTP client for block GETs.
fn client(timeout: Duration) -> StoreResult<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        // An idle timeout, not a total one: a slow store that keeps sending is not cut off.
        .read_timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(30))
        // A block's object is at its one address: a redirect is an error, not a detour.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| StoreError::Remote(format!("building the store HTTP client: {e}")))
}

/// Clients by store id, per thread; a few stores per process at most (tests make more, hence
/// the bound).
const MAX_STORES: usize = 8;

thread_local! {
    static CLIENTS: std::cell::RefCell<Vec<(u64, reqwest::Client)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Keeps `c` as this thread's client of store `id`, and returns it.
fn remember(clients: &mut Vec<(u64, reqwest::Client)>, id: u64, c: reqwest::Client) -> reqwest::Client {
    if clients.len() >= MAX_STORES {
        clients.remove(0);
    }
    clients.push((id, c.clone()));
    c
}

pub(super) struct FastGet {
    /// Tells this store's clients from other stores' in a thread's list.
    id: u64,
    timeout: Duration,
    /// `{endpoint}/{bucket}/`, already URL-safe: bucket names and our keys are `[a-z0-9./-]`.
    /// Parsed once: a block's URL only sets its path (parsing a whole URL per GET, host and
    /// all, cost about 5 % of a small bypassed read's CPU).
    base: reqwest::Url,
    identity: Identity,
    region: String,
}

impl FastGet {
    pub(super) fn new(
        endpoint: &str,
        bucket: &str,
        region: &str,
        access_key: &str,
        secret_key: &str,
        timeout: Duration,
    ) -> StoreResult<Self> {
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let identity = aws_sdk_s3::config::Credentials::new(access_key, secret_key, None, None, "nimbus-config").into();
        // Built now, so that a client that cannot be built is a start-up error.
        let first = client(timeout)?;
        CLIENTS.with_borrow_mut(|clients| remember(clients, id, first));
        Ok(Self {
            id,
            timeout,
            base: reqwest::Url::parse(&format!("{}/{}/", endpoint.trim_end_matches('/'), bucket))
                .map_err(|e| StoreError::Remote(format!("the store endpoint {endpoint:?} is not a URL: {e}")))?,
            identity,
            region: region.to_string(),
        })
    }

    /// The calling thread's client for this store. Each request thread runs a runtime of its
    /// own (server.rs), and a pooled connection is driven by the runtime that opened it: a
    /// thread sending on another's connections would wake that thread for every read.
    fn http(&self) -> StoreResult<reqwest::Client> {
        CLIENTS.with_borrow_mut(|clients| match clients.iter().find(|(id, _)| *id == self.id) {
            Some((_, c)) => Ok(c.clone()),
            None => client(self.timeout).map(|c| remember(clients, self.id, c)),
        })
    }

    /// The URL of object `key`.
    fn url(&self, key: &str) -> reqwest::Url {
        let mut url = self.base.clone();
        let path = format!("{}{key}", self.base.path());
        url.set_path(&path);
        url
    }

    /// The whole object `key`, or bytes `range` of it (fewer where the object ends first);
    /// `NotFound` when the store has no such object. A body shorter or longer than announced is
    /// an error, never a short block.
    pub(super) async fn get(&self, key: &str, hash: &str, range: Option<&Range<u64>>) -> StoreResult<Bytes> {
        let url = self.url(key);
        let mut last = StoreError::Remote("no attempt made".into());
        for attempt in 0..ATTEMPTS {
            match self.attempt(&url, hash, range).await {
                Ok(b) => return Ok(b),
                Err(e @ (StoreError::NotFound(_) | StoreError::Corrupt(_))) => return Err(e),
                Err(e) => {
                    tracing::debug!(attempt, error = %e, "block GET failed");
                    last = e;
                }
            }
        }
        Err(last)
    }

    /// Bytes `range` of object `key` as they arrive, unchecked (the caller checks them piece by
    /// piece), or `None` when the store answers with the whole object instead (ignoring the
    /// range): then the caller reads the block whole. Retried only before the body starts.
    pub(super) async fn get_stream(
        &self,
        key: &str,
        hash: &str,
        range: &Range<u64>,
    ) -> StoreResult<Option<BlockStream>> {
        let url = self.url(key);
        let mut last = StoreError::Remote("no attempt made".into());
        for attempt in 0..ATTEMPTS {
            let resp = match self.send(&url, hash, Some(range)).await {
                Ok(r) => r,
                Err(e @ (StoreError::NotFound(_) | StoreError::Corrupt(_))) => return Err(e),
                Err(e) => {
                    tracing::debug!(attempt, error = %e, "streamed block GET failed");
                    last = e;
                    continue;
                }
            };
            if resp.status() != reqwest::StatusCode::PARTIAL_CONTENT {
                return Ok(None);
            }
            // The response ends the stream at its first error: nothing is read after one.
            let chunks = futures::stream::unfold(Some(resp), |resp| async move {
                let mut resp = resp?;
                match resp.chunk().await {
                    Ok(Some(chunk)) => Some((Ok(chunk), Some(resp))),
                    Ok(None) => None,
                    Err(e) => Some((Err(http_err(e)), None)),
                }
            });
            return Ok(Some(Box::pin(chunks)));
        }
        Err(last)
    }

    /// A signed GET sent, its status checked (404, 416 and other failures as errors).
    async fn send(&self, url: &reqwest::Url, hash: &str, range: Option<&Range<u64>>) -> StoreResult<reqwest::Response> {
        let mut req = self.http()?.get(url.clone());
        for (name, value) in self.sign(url.as_str())? {
            req = req.header(name, value);
        }
        if let Some(r) = range {
            // Not signed: S3 accepts unsigned standard headers.
            req = req.header(reqwest::header::RANGE, format!("bytes={}-{}", r.start, r.end.saturating_sub(1)));
        }
        let resp = req.send().await.map_err(http_err)?;
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(StoreError::NotFound(hash.to_string()));
        }
        if status == reqwest::StatusCode::RANGE_NOT_SATISFIABLE {
            // The object ends before the range starts: shorter than the block it names.
            return Err(StoreError::Corrupt(hash.to_string()));
        }
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            return Err(StoreError::Remote(format!("GET block: {status}: {}", s3_error_code(&body))));
        }
        Ok(resp)
    }

    async fn attempt(&self, url: &reqwest::Url, hash: &str, range: Option<&Range<u64>>) -> StoreResult<Bytes> {
        let mut resp = self.send(url, hash, range).await?;
        let status = resp.status();
        let expected = resp.content_length();
        if expected.is_some_and(|n| n > MAX_BLOCK_BODY) {
            return Err(StoreError::Remote(format!("GET block: the store announced {expected:?} bytes")));
        }
        // Chunks are copied into one buffer as they arrive and dropped, so a block costs its
        // own size once, not twice.
        let mut buf = BytesMut::with_capacity(expected.unwrap_or(0) as usize);
        while let Some(chunk) = resp.chunk().await.map_err(http_err)? {
            if buf.len() as u64 + chunk.len() as u64 > MAX_BLOCK_BODY {
                return Err(StoreError::Remote("GET block: body larger than any block".into()));
            }
            buf.extend_from_slice(&chunk);
        }
        if let Some(n) = expected
            && buf.len() as u64 != n
        {
            return Err(StoreError::Remote(format!("GET block: body cut short ({} of {n} bytes)", buf.len())));
        }
        let body = buf.freeze();
        match range {
            // A store that ignored the range sent the whole object.
            Some(r) if status != reqwest::StatusCode::PARTIAL_CONTENT => {
                let len = body.len() as u64;
                Ok(body.slice(r.start.min(len) as usize..r.end.min(len) as usize))
            }
            _ => Ok(body),
        }
    }

    /// SigV4 headers for an unsigned-payload GET of `url` (S3 signs paths as they are sent).
    fn sign(&self, url: &str) -> StoreResult<Vec<(String, String)>> {
        let mut settings = SigningSettings::default();
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        let params = v4::SigningParams::builder()
            .identity(&self.identity)
            .region(&self.region)
            .name("s3")
            .time(SystemTime::now())
            .settings(settings)
            .build()
            .map_err(|e| StoreError::Remote(format!("signing a block GET: {e}")))?
            .into();
        let signable = SignableRequest::new("GET", url, std::iter::empty(), SignableBody::UnsignedPayload)
            .map_err(|e| StoreError::Remote(format!("signing a block GET: {e}")))?;
        let (instructions, _) =
            sign(signable, &params).map_err(|e| StoreError::Remote(format!("signing a block GET: {e}")))?.into_parts();
        Ok(instructions.headers().map(|(n, v)| (n.to_string(), v.to_string())).collect())
    }
}

fn http_err(e: reqwest::Error) -> StoreError {
    if e.is_timeout() {
        return StoreError::Timeout;
    }
    // reqwest's message hides the cause (refused, reset, ...): the log needs it.
    let mut msg = format!("GET block: {e}");
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        msg.push_str(&format!(": {s}"));
        source = s.source();
    }
    StoreError::Remote(msg)
}

/// The `<Code>` of an S3 XML error body, for the log; the body itself may be long.
fn s3_error_code(body: &str) -> &str {
    body.split_once("<Code>").and_then(|(_, rest)| rest.split_once("</Code>")).map_or("error", |(code, _)| code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_code_from_xml() {
        let body = "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>x</Message></Error>";
        assert_eq!(s3_error_code(body), "AccessDenied");
        assert_eq!(s3_error_code("garbage"), "error");
    }

    #[test]
    fn signs_with_the_s3_headers() {
        let g = FastGet::new("http://127.0.0.1:9000/", "b", "us-east-1", "AK", "SK", Duration::from_secs(5))
            .expect("client");
        assert_eq!(g.base.as_str(), "http://127.0.0.1:9000/b/");
        assert_eq!(g.url("spaces/1/blocks/ab").as_str(), "http://127.0.0.1:9000/b/spaces/1/blocks/ab");
        let prefixed = FastGet::new("https://s3.example:9000/store", "b", "r", "AK", "SK", Duration::from_secs(5))
            .expect("client");
        assert_eq!(prefixed.url("spaces/2/x").as_str(), "https://s3.example:9000/store/b/spaces/2/x");
        let headers = g.sign("http://127.0.0.1:9000/b/spaces/1/blocks/ab").expect("signed");
        let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"authorization"), "{names:?}");
        assert!(names.contains(&"x-amz-date"), "{names:?}");
        let content = headers.iter().find(|(n, _)| n == "x-amz-content-sha256").map(|(_, v)| v.as_str());
        assert_eq!(content, Some("UNSIGNED-PAYLOAD"));
        let auth = headers.iter().find(|(n, _)| n == "authorization").map(|(_, v)| v.as_str()).unwrap_or("");
        assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=AK/"), "{auth}");
        assert!(auth.contains("/us-east-1/s3/aws4_request"), "{auth}");
    }
}
