//! A lean GetObject for block reads: hyper's pooled HTTP client (over TLS for an `https://`
//! store, with the system's roots as the SDK's client), a SigV4 header signed with the AWS
//! SDK's own signer (`aws-sigv4`), and the body read straight into one buffer of the announced
//! length.
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
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningInstructions, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use axum::http::{HeaderName, HeaderValue, Request, Response, StatusCode, Uri, header};
use bytes::{Bytes, BytesMut};
use http_body::Body as _;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::{BlockStream, StoreError, StoreResult};

/// Largest body accepted for one block object: a block is at most 4 MiB, and a store that
/// announces more is not answering for a block.
const MAX_BLOCK_BODY: u64 = 64 << 20;

/// Largest error body read, for its `<Code>`.
const MAX_ERROR_BODY: usize = 64 << 10;

/// Attempts per GET: a second one covers a pooled connection the store closed under us, or
/// one dropped reply; more would only delay the 503 a down store deserves.
const ATTEMPTS: u32 = 2;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// hyper's pooled client, straight: reqwest's layers around it (redirect policy, retries,
/// URL parsing, a connector clone per request) cost about a tenth of a small bypassed read's
/// CPU, and a block GET needs none of them. `http://` and `https://` endpoints alike.
type Http = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

fn client(tls: &rustls::ClientConfig) -> Http {
    let mut tcp = HttpConnector::new();
    tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
    tcp.set_nodelay(true);
    // The TLS layer above takes https:// URLs.
    tcp.enforce_http(false);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls.clone())
        .https_or_http()
        .enable_http1()
        .wrap_connector(tcp);
    // No redirects (hyper follows none): a block's object is at its one address.
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .pool_timer(TokioTimer::new())
        .build(connector)
}

/// TLS to an https:// store: the system's roots, as the SDK's client uses for every other call
/// (none to load for an http:// one).
fn tls_config(https: bool) -> StoreResult<rustls::ClientConfig> {
    let roots = if https { crate::tls_client::native_roots() } else { rustls::RootCertStore::empty() };
    crate::tls_client::config(roots).map_err(|e| StoreError::Remote(format!("TLS configuration for block GETs: {e}")))
}

/// Clients by store id, per thread; a few stores per process at most (tests make more, hence
/// the bound).
const MAX_STORES: usize = 8;

thread_local! {
    static CLIENTS: std::cell::RefCell<Vec<(u64, Http)>> = const { std::cell::RefCell::new(Vec::new()) };
}

pub(super) struct FastGet {
    /// Tells this store's clients from other stores' in a thread's list.
    id: u64,
    timeout: Duration,
    /// `{endpoint}/{bucket}/`, already URL-safe: bucket names and our keys are `[a-z0-9./-]`.
    base: String,
    tls: rustls::ClientConfig,
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
        let base = format!("{}/{}/", endpoint.trim_end_matches('/'), bucket);
        // Checked now, so that an endpoint that is not a URL is a start-up warning.
        let uri: Uri = base
            .parse()
            .map_err(|e| StoreError::Remote(format!("the store endpoint {endpoint:?} is not a URL: {e}")))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(StoreError::Remote(format!("the store endpoint {endpoint:?} is not an http(s) URL"))),
        };
        let tls = tls_config(https)?;
        Ok(Self { id, timeout, base, tls, identity, region: region.to_string() })
    }

    /// Sends `req` on the calling thread's client for this store. Each request thread runs a
    /// runtime of its own (server.rs), and a pooled connection is driven by the runtime that
    /// opened it: a thread sending on another's connections would wake that thread for every
    /// read.
    fn request(&self, req: Request<Empty<Bytes>>) -> hyper_util::client::legacy::ResponseFuture {
        CLIENTS.with_borrow_mut(|clients| {
            if let Some((_, c)) = clients.iter().find(|(id, _)| *id == self.id) {
                return c.request(req);
            }
            if clients.len() >= MAX_STORES {
                clients.remove(0);
            }
            let c = client(&self.tls);
            let fut = c.request(req);
            clients.push((self.id, c));
            fut
        })
    }

    /// The URL of object `key`, as text (what is signed) and parsed (what is sent).
    fn url(&self, key: &str) -> StoreResult<(String, Uri)> {
        let text = format!("{}{key}", self.base);
        let uri = Uri::try_from(text.as_str()).map_err(|e| StoreError::Remote(format!("block key {key:?}: {e}")))?;
        Ok((text, uri))
    }

    /// The whole object `key`, or bytes `range` of it (fewer where the object ends first);
    /// `NotFound` when the store has no such object. A body shorter or longer than announced is
    /// an error, never a short block.
    pub(super) async fn get(&self, key: &str, hash: &str, range: Option<&Range<u64>>) -> StoreResult<Bytes> {
        let url = self.url(key)?;
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
        let url = self.url(key)?;
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
            if resp.status() != StatusCode::PARTIAL_CONTENT {
                return Ok(None);
            }
            // The stream ends at the body's first error: nothing is read after one.
            let timeout = self.timeout;
            let chunks = futures::stream::unfold(Some(resp.into_body()), move |body| async move {
                let mut body = body?;
                match next_chunk(&mut body, timeout).await {
                    Ok(Some(chunk)) => Some((Ok(chunk), Some(body))),
                    Ok(None) => None,
                    Err(e) => Some((Err(e), None)),
                }
            });
            return Ok(Some(Box::pin(chunks)));
        }
        Err(last)
    }

    /// A signed GET sent, its status checked (404, 416 and other failures as errors).
    async fn send(
        &self,
        (text, uri): &(String, Uri),
        hash: &str,
        range: Option<&Range<u64>>,
    ) -> StoreResult<Response<Incoming>> {
        let mut req = Request::new(Empty::new());
        *req.uri_mut() = uri.clone();
        // Not the signer's own `apply_to_request_http1x`: it unwraps each header value, and a
        // configured key with a stray control character must be an error, not a panic.
        for (name, value) in self.sign(text)?.headers() {
            let (Ok(name), Ok(mut value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value))
            else {
                return Err(StoreError::Remote("signing a block GET: a header the signer made is not valid".into()));
            };
            value.set_sensitive(name == header::AUTHORIZATION);
            req.headers_mut().insert(name, value);
        }
        if let Some(r) = range {
            // Not signed: S3 accepts unsigned standard headers.
            let value = HeaderValue::try_from(format!("bytes={}-{}", r.start, r.end.saturating_sub(1)))
                .map_err(|e| StoreError::Remote(format!("GET block: range header: {e}")))?;
            req.headers_mut().insert(header::RANGE, value);
        }
        // Until the head has come: connecting, TLS, the request and the store's answer.
        let resp = tokio::time::timeout(self.timeout, self.request(req))
            .await
            .map_err(|_| StoreError::Timeout)?
            .map_err(|e| transport_err(&e))?;
        let status = resp.status();
        if status == StatusCode::NOT_FOUND {
            return Err(StoreError::NotFound(hash.to_string()));
        }
        if status == StatusCode::RANGE_NOT_SATISFIABLE {
            // The object ends before the range starts: shorter than the block it names.
            return Err(StoreError::Corrupt(hash.to_string()));
        }
        if !status.is_success() {
            let body = Limited::new(resp.into_body(), MAX_ERROR_BODY).collect();
            let body = match tokio::time::timeout(self.timeout, body).await {
                Ok(Ok(b)) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
                _ => String::new(),
            };
            return Err(StoreError::Remote(format!("GET block: {status}: {}", s3_error_code(&body))));
        }
        Ok(resp)
    }

    async fn attempt(&self, url: &(String, Uri), hash: &str, range: Option<&Range<u64>>) -> StoreResult<Bytes> {
        let resp = self.send(url, hash, range).await?;
        let status = resp.status();
        let mut body = resp.into_body();
        let expected = body.size_hint().exact();
        if expected.is_some_and(|n| n > MAX_BLOCK_BODY) {
            return Err(StoreError::Remote(format!("GET block: the store announced {expected:?} bytes")));
        }
        // Chunks are copied into one buffer as they arrive and dropped, so a block costs its
        // own size once, not twice.
        let mut buf = BytesMut::with_capacity(expected.unwrap_or(0) as usize);
        while let Some(chunk) = next_chunk(&mut body, self.timeout).await? {
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
            Some(r) if status != StatusCode::PARTIAL_CONTENT => {
                let len = body.len() as u64;
                Ok(body.slice(r.start.min(len) as usize..r.end.min(len) as usize))
            }
            _ => Ok(body),
        }
    }

    /// SigV4 headers for an unsigned-payload GET of `url` (S3 signs paths as they are sent).
    fn sign(&self, url: &str) -> StoreResult<SigningInstructions> {
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
        Ok(sign(signable, &params).map_err(|e| StoreError::Remote(format!("signing a block GET: {e}")))?.into_parts().0)
    }
}

/// The body's next data chunk, `None` at its end; `timeout` is how long the store may stay
/// silent (an idle timeout, not a total one: a slow store that keeps sending is not cut off).
async fn next_chunk(body: &mut Incoming, timeout: Duration) -> StoreResult<Option<Bytes>> {
    loop {
        match tokio::time::timeout(timeout, body.frame()).await {
            Err(_) => return Err(StoreError::Timeout),
            Ok(None) => return Ok(None),
            Ok(Some(Err(e))) => return Err(transport_err(&e)),
            // Trailers carry nothing a block needs.
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// A transport failure with its causes (refused, reset, ...: the log needs them); a connect
/// that timed out is a timeout.
fn transport_err(e: &(dyn std::error::Error + 'static)) -> StoreError {
    let mut msg = format!("GET block: {e}");
    let mut source = e.source();
    while let Some(s) = source {
        if s.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut) {
            return StoreError::Timeout;
        }
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

    /// A store on loopback that answers each GET by the last segment of its path (`ok`, `missing`,
    /// `short`, `huge`, `denied`, `unsatisfiable`, `silent`), one request per connection.
    async fn canned_store() -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                    let reply: &[u8] = match path.rsplit('/').next().unwrap_or("") {
                        "ok" => b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
                        "missing" => b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        "short" => b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\nconnection: close\r\n\r\nhello",
                        "huge" => b"HTTP/1.1 200 OK\r\ncontent-length: 100000000\r\nconnection: close\r\n\r\nhello",
                        "denied" => concat!(
                            "HTTP/1.1 403 Forbidden\r\ncontent-length: 41\r\nconnection: close\r\n\r\n",
                            "<Error><Code>AccessDenied</Code>x</Error>"
                        )
                        .as_bytes(),
                        "unsatisfiable" => {
                            b"HTTP/1.1 416 Range Not Satisfiable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        }
                        // `silent`: reads the request, never answers.
                        _ => {
                            tokio::time::sleep(Duration::from_secs(30)).await;
                            return;
                        }
                    };
                    let _ = sock.write_all(reply).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn store_answers_map_to_errors_that_say_what_happened() {
        let endpoint = canned_store().await;
        let g = FastGet::new(&endpoint, "b", "us-east-1", "AK", "SK", Duration::from_millis(300)).expect("client");
        assert_eq!(g.get("spaces/1/ok", "h", None).await.expect("ok").as_ref(), b"hello");
        // A store that ignores the range sends the whole object: the range is cut from it.
        assert_eq!(g.get("spaces/1/ok", "h", Some(&(1..3))).await.expect("ranged").as_ref(), b"el");
        assert!(matches!(g.get("spaces/1/missing", "h", None).await, Err(StoreError::NotFound(h)) if h == "h"));
        assert!(matches!(g.get("spaces/1/unsatisfiable", "h", Some(&(8..9))).await, Err(StoreError::Corrupt(_))));
        match g.get("spaces/1/short", "h", None).await {
            Err(StoreError::Remote(e)) => assert!(e.starts_with("GET block"), "{e}"),
            other => panic!("a body cut short: {other:?}"),
        }
        match g.get("spaces/1/huge", "h", None).await {
            Err(StoreError::Remote(e)) => assert!(e.contains("announced"), "{e}"),
            other => panic!("a body larger than any block: {other:?}"),
        }
        match g.get("spaces/1/denied", "h", None).await {
            Err(StoreError::Remote(e)) => assert!(e.contains("403") && e.contains("AccessDenied"), "{e}"),
            other => panic!("a refusal: {other:?}"),
        }
        assert!(matches!(g.get("spaces/1/silent", "h", None).await, Err(StoreError::Timeout)));
        // A whole object where a range was asked for: the caller reads the block whole instead.
        assert!(g.get_stream("spaces/1/ok", "h", &(1..3)).await.expect("answered").is_none());
        assert!(matches!(g.get_stream("spaces/1/missing", "h", &(1..3)).await, Err(StoreError::NotFound(_))));
        // A key with a control character (a stray newline from a file): an error, not a panic.
        let bad = FastGet::new(&endpoint, "b", "r", "AK\n", "SK", Duration::from_millis(300)).expect("client");
        assert!(matches!(bad.get("spaces/1/ok", "h", None).await, Err(StoreError::Remote(_))));
        // Nobody listening: a transport error, not a hang.
        let closed =
            FastGet::new("http://127.0.0.1:9", "b", "r", "AK", "SK", Duration::from_millis(300)).expect("client");
        assert!(matches!(closed.get("spaces/1/ok", "h", None).await, Err(StoreError::Remote(_) | StoreError::Timeout)));
    }

    #[test]
    fn signs_with_the_s3_headers() {
        let g = FastGet::new("http://127.0.0.1:9000/", "b", "us-east-1", "AK", "SK", Duration::from_secs(5))
            .expect("client");
        assert_eq!(g.base, "http://127.0.0.1:9000/b/");
        let (text, uri) = g.url("spaces/1/blocks/ab").expect("url");
        assert_eq!(text, "http://127.0.0.1:9000/b/spaces/1/blocks/ab");
        assert_eq!(uri.to_string(), text);
        let prefixed = FastGet::new("https://s3.example:9000/store", "b", "r", "AK", "SK", Duration::from_secs(5))
            .expect("client");
        let (_, uri) = prefixed.url("spaces/2/x").expect("url");
        assert_eq!((uri.host(), uri.port_u16(), uri.path()), (Some("s3.example"), Some(9000), "/store/b/spaces/2/x"));
        assert!(FastGet::new("ftp://h/", "b", "r", "AK", "SK", Duration::from_secs(5)).is_err());
        assert!(FastGet::new("not a url", "b", "r", "AK", "SK", Duration::from_secs(5)).is_err());
        let signed = g.sign("http://127.0.0.1:9000/b/spaces/1/blocks/ab").expect("signed");
        let headers: Vec<(String, String)> = signed.headers().map(|(n, v)| (n.to_string(), v.to_string())).collect();
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
