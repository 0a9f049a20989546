//! The product's hot path, file reads (`GET`/`HEAD /api/v1/files/{*path}`), dispatched ahead of
//! the router. Through the router a hot 4 KiB read paid for two route tables, the per-route
//! metrics layer's boxed service clones and the extractors' copies of the URI and headers
//! (with the other savings of the same change, a quarter of its user CPU: docs/BENCHMARKS.md,
//! 2026-11-27 18:43). Only the dispatch differs: the handler's code and extractors are the
//! route's own (`files::get_file_direct`), and the request is counted under the route's
//! template, as the router's metrics layer would. It sits outside the request-body timeout,
//! which a read does not need: its body is never read.

use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, header};
use axum::response::Response;
use futures::future::{BoxFuture, Either};

use crate::state::AppState;

/// The router's template for the route served here (the metrics label).
const ROUTE: &str = "/api/v1/files/{*path}";

/// The router `inner` with file reads served ahead of it.
#[derive(Clone)]
pub struct Shortcut<S> {
    state: AppState,
    inner: S,
}

impl<S> Shortcut<S> {
    pub fn new(state: AppState, inner: S) -> Self {
        Shortcut { state, inner }
    }
}

/// Whether the router would send `req` to `files::get_file`: `GET` or `HEAD` (axum's `get`
/// answers both) of a path with something after the prefix (`{*path}` needs a segment).
fn is_file_read(req: &Request) -> bool {
    matches!(*req.method(), Method::GET | Method::HEAD)
        && req.uri().path().strip_prefix(super::files::FILES).is_some_and(|rest| !rest.is_empty())
}

impl<S> tower::Service<Request> for Shortcut<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<BoxFuture<'static, Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        if !is_file_read(&req) {
            return Either::Right(self.inner.call(req));
        }
        let state = self.state.clone();
        let head = req.method() == Method::HEAD;
        let method = req.method().clone();
        let start = Instant::now();
        Either::Left(Box::pin(async move {
            let mut resp = super::files::get_file_direct(state, req).await;
            crate::metrics::observe(method.as_str(), ROUTE, resp.status().as_u16(), start);
            // As the router does: the length of a body of known size in the headers, and for
            // HEAD the length of what GET would send, without the body.
            if !resp.headers().contains_key(header::CONTENT_LENGTH)
                && let Some(n) = http_body::Body::size_hint(resp.body()).exact()
            {
                resp.headers_mut().insert(header::CONTENT_LENGTH, n.into());
            }
            if head {
                *resp.body_mut() = Body::empty();
            }
            Ok(resp)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: Method, path: &str) -> Request {
        Request::builder().method(method).uri(path).body(Body::empty()).expect("request")
    }

    #[test]
    fn only_reads_of_a_file_path_take_the_shortcut() {
        assert!(is_file_read(&req(Method::GET, "/api/v1/files/a.txt")));
        assert!(is_file_read(&req(Method::HEAD, "/api/v1/files/d/a.txt?version=3")));
        assert!(is_file_read(&req(Method::GET, "/api/v1/files//x")));
        for (m, p) in [
            (Method::GET, "/api/v1/files/"),
            (Method::GET, "/api/v1/files"),
            (Method::PUT, "/api/v1/files/a.txt"),
            (Method::DELETE, "/api/v1/files/a.txt"),
            (Method::OPTIONS, "/api/v1/files/a.txt"),
            (Method::GET, "/api/v1/filesx/a.txt"),
            (Method::GET, "/api/v1/dirs/a"),
            (Method::GET, "/dav/api/v1/files/a"),
        ] {
            assert!(!is_file_read(&req(m.clone(), p)), "{m} {p}");
        }
    }
}
