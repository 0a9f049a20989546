//! Prometheus metrics: the recorder, and a middleware that counts and times every request by
//! its route template (never by raw path, which would leak names and explode cardinality) and
//! its method (unknown ones as `other`): no label takes a value a client chooses freely.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

pub mod history;

/// The process-wide recorder (installed once, even if several servers run in one process).
pub fn recorder() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics may be empty");
            }
            handle
        })
        .clone()
}

/// Counts and times a request of the main listener by its route template (`unmatched` for
/// paths no route matches).
pub async fn track(req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map_or("unmatched", |m| m.as_str()).to_owned();
    timed(route, req, next).await
}

/// The S3 door's requests: one route per shape of path-style address (the door has no route
/// table; bucket names and keys would be unbounded).
pub async fn track_s3(req: Request, next: Next) -> Response {
    let path = req.uri().path().trim_start_matches('/');
    let route = match path.split_once('/') {
        _ if path.is_empty() => "s3:/",
        None | Some((_, "")) => "s3:/{bucket}",
        Some(_) => "s3:/{bucket}/{*key}",
    };
    timed(route.to_owned(), req, next).await
}

async fn timed(route: String, req: Request, next: Next) -> Response {
    let method = method_label(req.method().as_str());
    let start = Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    metrics::counter!("nimbus_http_requests_total", "method" => method, "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("nimbus_http_request_duration_seconds", "method" => method, "route" => route)
        .record(start.elapsed().as_secs_f64());
    resp
}

/// A method as a label: those of HTTP and WebDAV; anything else a client makes up is `other`,
/// so that requests cannot add series (memory) at will.
fn method_label(m: &str) -> &'static str {
    const KNOWN: [&str; 16] = [
        "GET",
        "HEAD",
        "POST",
        "PUT",
        "DELETE",
        "PATCH",
        "OPTIONS",
        "TRACE",
        "CONNECT",
        "PROPFIND",
        "PROPPATCH",
        "MKCOL",
        "COPY",
        "MOVE",
        "LOCK",
        "UNLOCK",
    ];
    KNOWN.into_iter().find(|k| *k == m).unwrap_or("other")
}

/// Counts every answer of a listener for the console's request-rate chart (see [`history`]).
pub async fn count(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    history::count(resp.status().as_u16());
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_bounded() {
        assert_eq!(method_label("GET"), "GET");
        assert_eq!(method_label("PROPFIND"), "PROPFIND");
        assert_eq!(method_label("FOOBAR123"), "other");
        assert_eq!(method_label("get"), "other");
    }
}
