//! What every request and answer of a listener gets, in one service: a request id (kept from
//! the client's `X-Request-Id`, else made here) echoed in the answer, the request's tracing
//! span, `Authorization` and `Cookie` marked sensitive, a panic turned into a 500, a log line
//! for every 5xx, the browser headers (`browser::apply`), a count for the console's charts,
//! `Connection: close` after a refused upload, and the JSON error body on every error answer of
//! the REST API (`error::as_json_error`: the framework's own rejections are text).
//!
//! One service instead of a stack of tower-http layers and `from_fn` middleware: each of
//! those cost a service clone, a boxed future and a response-body wrapper per request, and
//! together about a third of the CPU of a hot 4 KiB read (docs/BENCHMARKS.md, 2026-11-27 15:00).

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, Version, header};
use axum::response::IntoResponse;
use futures::FutureExt;
use futures::future::BoxFuture;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Request ids: this process's random 64-bit prefix and a counter (`3f2a9c0d1e4b5a67-1b`).
/// Unique across gateways and restarts like a UUID, without asking the kernel for randomness
/// on every request (a profile of hot 4 KiB reads showed that cost).
#[derive(Clone)]
struct RequestIds {
    prefix: u64,
    next: Arc<AtomicU64>,
}

impl RequestIds {
    fn new() -> Self {
        Self { prefix: uuid::Uuid::new_v4().as_u64_pair().0, next: Default::default() }
    }

    fn make(&self) -> HeaderValue {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        // Written by hand: `format!` and a checked parse were a visible share of a hot read.
        let mut buf = [0u8; 33];
        for (i, b) in buf[..16].iter_mut().enumerate() {
            *b = HEX[(self.prefix >> (60 - 4 * i) & 0xf) as usize];
        }
        buf[16] = b'-';
        let digits = (64 - n.leading_zeros()).div_ceil(4).max(1) as usize;
        for (i, b) in buf[17..17 + digits].iter_mut().enumerate() {
            *b = HEX[(n >> (4 * (digits - 1 - i)) & 0xf) as usize];
        }
        // Hex digits and a dash only: always a valid header value.
        HeaderValue::from_bytes(&buf[..17 + digits]).unwrap_or_else(|_| HeaderValue::from_static("-"))
    }
}

/// The envelope around a listener's router; `tls`: the listener serves HTTPS.
#[derive(Clone)]
pub struct Envelope<S> {
    inner: S,
    ids: RequestIds,
    tls: bool,
    /// The listener serves the REST API under `/api/` (not the S3 door, whose errors are
    /// XML and whose paths are buckets).
    rest_api: bool,
}

impl<S> Envelope<S> {
    pub fn new(inner: S, tls: bool) -> Self {
        Envelope { inner, ids: RequestIds::new(), tls, rest_api: false }
    }

    /// Error answers under `/api/` get the JSON error body ([`crate::error::as_json_error`]).
    pub fn rest_api(mut self) -> Self {
        self.rest_api = true;
        self
    }
}

impl<S> tower::Service<Request<Body>> for Envelope<S>
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        let id = match req.headers().get(REQUEST_ID) {
            Some(v) => v.clone(),
            None => {
                let v = self.ids.make();
                req.headers_mut().insert(REQUEST_ID, v.clone());
                v
            }
        };
        mark_sensitive(req.headers_mut());
        let span = tracing::info_span!(
            "request",
            request_id = %id.to_str().unwrap_or("-"),
            method = %req.method(),
            path = %req.uri().path()
        );
        let has_body = matches!(*req.method(), Method::PUT | Method::POST | Method::PATCH);
        let api = self.rest_api && req.uri().path().starts_with("/api/");
        // Link pages answer browsers with pages of their own; only the framework's bare
        // rejections there (a wrong method: 405) become the JSON error programs get.
        let links = self.rest_api && req.uri().path().starts_with("/s/");
        let http1 = matches!(req.version(), Version::HTTP_10 | Version::HTTP_11);
        let tls = self.tls;
        let start = Instant::now();
        // The service that was polled ready serves this request; a clone takes its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            // The handler runs in the span, entered around each poll by reference rather than
            // through `Instrument`, which would hold a second handle to the span (a registry
            // reference taken and dropped per request). A handler dropped unfinished (the client
            // went away) is dropped outside it: what it drops logs only from spawned tasks,
            // which never carried the span.
            let mut handled = std::pin::pin!(async move {
                tracing::debug!("started processing request");
                // A panic in routing (`call`) or in the handler must not take the connection
                // down silently or leak a backtrace.
                match std::panic::catch_unwind(AssertUnwindSafe(|| inner.call(req))) {
                    Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await.map(|r| match r {
                        Ok(resp) => resp,
                        Err(never) => match never {},
                    }),
                    Err(p) => Err(p),
                }
            });
            let handled = std::future::poll_fn(|cx| {
                let _entered = span.enter();
                handled.as_mut().poll(cx)
            })
            .await;
            let mut resp = handled.unwrap_or_else(|_| {
                crate::error::ApiError::internal(anyhow::anyhow!("handler panicked")).into_response()
            });
            let status = resp.status();
            let ms = start.elapsed().as_millis() as u64;
            if status.is_server_error() {
                span.in_scope(|| tracing::error!(status = status.as_u16(), latency_ms = ms, "response failed"));
            } else if tracing::level_filters::LevelFilter::current() >= tracing::Level::DEBUG {
                // Entered only when a debug line can be logged at all (a filter may enable it
                // for this span alone): entering and leaving cost every request otherwise.
                span.in_scope(|| {
                    tracing::debug!(status = status.as_u16(), latency_ms = ms, "finished processing request")
                });
            }
            crate::metrics::history::count(status.as_u16());
            if (status.is_client_error() || status.is_server_error())
                && (api || (links && !resp.headers().contains_key(header::CONTENT_TYPE)))
            {
                resp = crate::error::as_json_error(resp).await;
            }
            let headers = resp.headers_mut();
            // A refused upload (quota, bad name, stale If-Match, ...) may leave unread bytes on an
            // HTTP/1 connection: closing it keeps the client's next request from being read as
            // garbage.
            if has_body && http1 && (status.is_client_error() || status.is_server_error()) {
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            crate::browser::apply(headers, tls);
            if !headers.contains_key(REQUEST_ID) {
                headers.insert(REQUEST_ID, id);
            }
            // What is logged while the body streams (a store read failing halfway) still
            // carries the request's id.
            Ok(resp.map(|body| Body::new(InSpan { inner: body, span })))
        })
    }
}

/// A response body whose frames are produced inside the request's span.
struct InSpan {
    inner: Body,
    span: tracing::Span,
}

impl http_body::Body for InSpan {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        std::pin::Pin::new(&mut this.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Credentials never show in a debug print of the request (logs, traces).
fn mark_sensitive(headers: &mut HeaderMap) {
    for name in [header::AUTHORIZATION, header::COOKIE] {
        if let header::Entry::Occupied(mut e) = headers.entry(name) {
            for v in e.iter_mut() {
                v.set_sensitive(true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logfmt::Captured;
    use axum::routing::get;
    use tower::{Service, ServiceExt};

    #[test]
    fn request_ids_are_distinct_and_share_the_process_prefix() {
        let ids = RequestIds::new();
        let (a, b) = (ids.make(), ids.clone().make());
        let (a, b) = (a.to_str().expect("ascii"), b.to_str().expect("ascii"));
        assert_ne!(a, b);
        assert_eq!(a.split('-').next(), b.split('-').next());
        assert_eq!(a.len(), 18);
        assert_ne!(RequestIds::new().prefix, ids.prefix);
    }

    #[test]
    fn request_ids_are_the_prefix_and_the_counter_in_hex() {
        let ids = RequestIds { prefix: 0x0123_4567_89ab_cdef, next: Default::default() };
        for n in [0u64, 1, 0xf, 0x10, 0xabc, u64::MAX] {
            ids.next.store(n, Ordering::Relaxed);
            assert_eq!(ids.make().to_str().expect("ascii"), format!("0123456789abcdef-{n:x}"));
        }
    }

    fn app() -> Envelope<axum::Router> {
        let router = axum::Router::new()
            .route("/ok", get(|| async { "ok" }))
            .route("/boom", get(boom))
            .route("/streamed", get(streamed))
            .route("/fail", get(|| async { (axum::http::StatusCode::SERVICE_UNAVAILABLE, "down") }))
            .route("/refuse", axum::routing::put(|| async { axum::http::StatusCode::FORBIDDEN }))
            .route(
                "/seen",
                get(|h: HeaderMap| async move {
                    let auth = h.get(header::AUTHORIZATION).map(|v| v.is_sensitive());
                    let id = h.get(REQUEST_ID).is_some();
                    format!("{auth:?} {id}")
                }),
            );
        Envelope::new(router, false)
    }

    /// A body whose one frame logs a warning when it is produced (a store read failing
    /// halfway through a download).
    async fn streamed() -> Body {
        let frame = futures::stream::once(async {
            tracing::warn!("mid-stream trouble");
            Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b"data"))
        });
        Body::from_stream(frame)
    }

    #[tokio::test]
    async fn what_is_logged_in_a_request_and_its_body_carries_its_id() {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let req = Request::get("/streamed").header(REQUEST_ID, "id-streamed").body(Body::empty()).expect("request");
        assert_eq!(text(send(req).await).await, "data");
        let req = Request::get("/fail").header(REQUEST_ID, "id-failed").body(Body::empty()).expect("request");
        assert_eq!(send(req).await.status(), 503);
        let log = out.text();
        let line = |needle: &str| log.lines().find(|l| l.contains(needle)).unwrap_or_default().to_string();
        let streamed = line("mid-stream trouble");
        assert!(streamed.contains("request_id=id-streamed") && streamed.contains("path=/streamed"), "{log}");
        let failed = line("response failed");
        assert!(failed.contains("request_id=id-failed") && failed.contains("status=503"), "{log}");
    }

    #[tokio::test]
    async fn error_answers_of_the_rest_api_are_json_and_keep_their_status_and_headers() {
        let router = axum::Router::new()
            .route("/api/v1/move", axum::routing::post(|| async { "moved" }))
            .route("/api/v1/shares/{id}", get(|axum::extract::Path(id): axum::extract::Path<String>| async move { id }))
            .route("/api/v1/json", get(|| async { crate::error::ApiError::Forbidden("no".into()) }))
            .route("/other", axum::routing::post(|| async { "x" }));
        let api = Envelope::new(router.clone(), false).rest_api();
        let send = |svc: Envelope<axum::Router>, method: Method, path: &str| {
            let req = Request::builder().method(method).uri(path).body(Body::empty()).expect("request");
            svc.oneshot(req)
        };
        let json = |r: Response<Body>| async move {
            assert_eq!(r.headers().get(header::CONTENT_TYPE).expect("a type"), "application/json");
            let v: serde_json::Value = serde_json::from_str(&text(r).await).expect("json");
            (
                v["error"]["code"].as_str().unwrap_or("").to_string(),
                v["error"]["message"].as_str().unwrap_or("").to_string(),
            )
        };
        // A method the route does not take: 405, Allow kept, a JSON body that says what to use.
        let r = send(api.clone(), Method::DELETE, "/api/v1/move").await.expect("infallible");
        assert_eq!(r.status(), 405);
        assert_eq!(r.headers().get(header::ALLOW).expect("allow"), "POST");
        assert!(r.headers().contains_key(REQUEST_ID));
        let (code, message) = json(r).await;
        assert_eq!(code, "bad_request");
        assert!(message.contains("POST"), "{message}");
        // A path parameter that is not UTF-8: the framework's text becomes the message.
        let r = send(api.clone(), Method::GET, "/api/v1/shares/%ff").await.expect("infallible");
        assert_eq!(r.status(), 400);
        let (code, message) = json(r).await;
        assert_eq!(code, "bad_request");
        assert!(message.contains("UTF-8"), "{message}");
        // Our own JSON errors pass as they are.
        let r = send(api.clone(), Method::GET, "/api/v1/json").await.expect("infallible");
        assert_eq!((r.status().as_u16(), json(r).await.0.as_str()), (403, "forbidden"));
        // Outside /api/, and on a listener that is not the REST API's, answers stay as they are.
        let r = send(api, Method::GET, "/other").await.expect("infallible");
        assert_eq!(r.status(), 405);
        assert!(r.headers().get(header::CONTENT_TYPE).is_none());
        let r = send(Envelope::new(router, false), Method::DELETE, "/api/v1/move").await.expect("infallible");
        assert_eq!(r.status(), 405);
        assert!(r.headers().get(header::CONTENT_TYPE).is_none());
    }

    #[tokio::test]
    async fn the_debug_lines_of_a_request_carry_its_id() {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let req = Request::get("/ok").header(REQUEST_ID, "id-debug").body(Body::empty()).expect("request");
        assert_eq!(text(send(req).await).await, "ok");
        let log = out.text();
        for needle in ["started processing request", "finished processing request"] {
            let line = log.lines().find(|l| l.contains(needle)).unwrap_or_default();
            assert!(line.contains("request_id=id-debug") && line.contains("path=/ok"), "{needle}: {log}");
        }
    }

    async fn boom() -> &'static str {
        panic!("boom")
    }

    async fn send(req: Request<Body>) -> Response<Body> {
        app().oneshot(req).await.expect("infallible")
    }

    /// A GET through one service that stays in use between requests.
    async fn call(svc: &mut Envelope<axum::Router>, path: &str) -> Response<Body> {
        let req = Request::get(path).body(Body::empty()).expect("request");
        svc.ready().await.expect("ready").call(req).await.expect("infallible")
    }

    async fn text(resp: Response<Body>) -> String {
        String::from_utf8(axum::body::to_bytes(resp.into_body(), 1 << 20).await.expect("body").to_vec()).expect("utf-8")
    }

    #[tokio::test]
    async fn answers_carry_a_request_id_the_browser_headers_and_keep_a_given_id() {
        let resp = send(Request::get("/ok").body(Body::empty()).expect("request")).await;
        assert_eq!(resp.status(), 200);
        let id = resp.headers().get(REQUEST_ID).expect("an id").to_str().expect("ascii").to_string();
        assert!(id.len() > 17 && id.contains('-'), "{id}");
        assert_eq!(resp.headers().get(header::X_CONTENT_TYPE_OPTIONS).expect("nosniff"), "nosniff");
        let other = send(Request::get("/ok").body(Body::empty()).expect("request")).await;
        assert_ne!(
            other.headers().get(REQUEST_ID).expect("an id").to_str().expect("ascii"),
            id,
            "ids differ per request"
        );

        let given = send(Request::get("/ok").header(REQUEST_ID, "abc-1").body(Body::empty()).expect("request")).await;
        assert_eq!(given.headers().get(REQUEST_ID).expect("an id"), "abc-1");
    }

    #[tokio::test]
    async fn the_handler_sees_the_id_and_credentials_marked_sensitive() {
        let req = Request::get("/seen").header(header::AUTHORIZATION, "Bearer x").body(Body::empty()).expect("request");
        assert_eq!(text(send(req).await).await, "Some(true) true");
    }

    #[tokio::test]
    async fn a_panic_becomes_a_json_500_and_the_service_keeps_serving() {
        let mut svc = app();
        let resp = call(&mut svc, "/boom").await;
        assert_eq!(resp.status(), 500);
        assert!(resp.headers().get(REQUEST_ID).is_some());
        let body = text(resp).await;
        assert!(body.contains("\"code\"") && !body.contains("boom"), "{body}");
        let again = call(&mut svc, "/ok").await;
        assert_eq!(again.status(), 200);
    }

    #[tokio::test]
    async fn a_refused_upload_closes_the_connection_a_refused_read_does_not() {
        let put = send(Request::put("/refuse").body(Body::from("data")).expect("request")).await;
        assert_eq!(put.status(), 403);
        assert_eq!(put.headers().get(header::CONNECTION).expect("Connection"), "close");
        let get = send(Request::get("/fail").body(Body::empty()).expect("request")).await;
        assert_eq!(get.status(), 503);
        assert!(get.headers().get(header::CONNECTION).is_none());
    }
}
