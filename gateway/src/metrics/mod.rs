//! Prometheus metrics: the recorder, and a middleware that counts and times every request by
//! its route template (never by raw path, which would leak names and explode cardinality) and
//! its method (unknown ones as `other`): no label takes a value a client chooses freely.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::{OnceLock, RwLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::response::Response;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

pub mod history;

/// How often histogram samples are folded into their summaries when nobody reads /metrics.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

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
            // Histograms keep every sample until they are drained: by a scrape of /metrics, or
            // by upkeep. Without this, a gateway nobody scrapes grows by 8 bytes per request
            // forever (`build_recorder` leaves upkeep to its caller).
            let upkeep = handle.clone();
            let spawned = std::thread::Builder::new().name("metrics-upkeep".into()).spawn(move || {
                loop {
                    std::thread::sleep(UPKEEP_EVERY);
                    upkeep.run_upkeep();
                }
            });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start the metrics upkeep thread; histograms grow until /metrics is read");
            }
            handle
        })
        .clone()
}

/// The layer that counts and times every request: [`Track::ROUTES`] on the main listener's
/// routes (by route template, `unmatched` for paths no route matches), [`Track::S3`] on the
/// S3 door. A service of its own rather than `from_fn` middleware, which clones a boxed
/// service per request.
#[derive(Clone, Copy)]
pub struct Track {
    s3: bool,
}

impl Track {
    pub const ROUTES: Track = Track { s3: false };
    pub const S3: Track = Track { s3: true };
}

impl<S> tower::Layer<S> for Track {
    type Service = Tracked<S>;

    fn layer(&self, inner: S) -> Tracked<S> {
        Tracked { inner, s3: self.s3 }
    }
}

#[derive(Clone)]
pub struct Tracked<S> {
    inner: S,
    s3: bool,
}

impl<S> tower::Service<Request> for Tracked<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let route = if self.s3 {
            s3_route(req.uri().path())
        } else {
            req.extensions().get::<MatchedPath>().map_or("unmatched", |m| intern(m.as_str()))
        };
        let method = method_label(req.method().as_str());
        let start = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            record(method, route, resp.status().as_u16(), start);
            Ok(resp)
        })
    }
}

/// Counts and times a request that a service ahead of the router answered
/// (`api::shortcut`), under the template of the route the router would have matched.
pub(crate) fn observe(method: &str, route: &'static str, status: u16, start: Instant) {
    record(method_label(method), route, status, start);
}

/// The S3 door's route of a path: one per shape of path-style address (the door has no route
/// table; bucket names and keys would be unbounded).
fn s3_route(path: &str) -> &'static str {
    let path = path.trim_start_matches('/');
    match path.split_once('/') {
        _ if path.is_empty() => "s3:/",
        None | Some((_, "")) => "s3:/{bucket}",
        Some(_) => "s3:/{bucket}/{*key}",
    }
}

/// A route template as a `&'static str`: templates are few and fixed (the router's), so each is
/// kept once for the life of the process, and its series can be found by address.
fn intern(route: &str) -> &'static str {
    static ROUTES: OnceLock<RwLock<HashSet<&'static str>>> = OnceLock::new();
    let routes = ROUTES.get_or_init(Default::default);
    if let Some(r) = routes.read().unwrap_or_else(|p| p.into_inner()).get(route) {
        return r;
    }
    let mut w = routes.write().unwrap_or_else(|p| p.into_inner());
    if let Some(r) = w.get(route) {
        return r;
    }
    let r: &'static str = Box::leak(route.to_owned().into_boxed_str());
    w.insert(r);
    r
}

/// The request counter and duration histogram of one method, route and status.
type Series = (metrics::Counter, metrics::Histogram);

/// (method, route's address and length, status).
type SeriesKey = (&'static str, (usize, usize), u16);

thread_local! {
    /// Handles already registered, by (method, route's address and length, status): a request then costs
    /// two atomic updates instead of building and looking up two labelled keys in the registry.
    /// Bounded: methods, routes and statuses are all from fixed sets.
    static SERIES: RefCell<HashMap<SeriesKey, Series>> = RefCell::new(HashMap::new());
}

fn record(method: &'static str, route: &'static str, status: u16, start: Instant) {
    let elapsed = start.elapsed().as_secs_f64();
    SERIES.with_borrow_mut(|series| {
        let (requests, duration) = series.entry((method, (route.as_ptr() as usize, route.len()), status)).or_insert_with(|| {
            let status = status.to_string();
            let requests =
                metrics::counter!("nimbus_http_requests_total", "method" => method, "route" => route, "status" => status);
            let duration = metrics::histogram!("nimbus_http_request_duration_seconds", "method" => method, "route" => route);
            (requests, duration)
        });
        requests.increment(1);
        duration.record(elapsed);
    });
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

/// The kind of a metric, as the `metrics` macro that records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricKind {
    Counter,
    Gauge,
    /// Exported as a Prometheus summary (quantiles, `_sum`, `_count`): no buckets are configured.
    Histogram,
}

/// One metric the gateway exports on `/metrics`.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct MetricInfo {
    pub name: &'static str,
    pub kind: MetricKind,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

const fn metric(
    name: &'static str,
    kind: MetricKind,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricInfo {
    MetricInfo { name, kind, labels, help }
}

/// Every metric the code records, for `nimbus-gateway describe` (the deployment validator checks
/// alert rules against it). The test `table_matches_the_code` keeps it equal to the macro calls.
pub const METRICS: &[MetricInfo] = {
    use MetricKind::{Counter, Gauge, Histogram};
    &[
        metric(
            "nimbus_http_requests_total",
            Counter,
            &["method", "route", "status"],
            "answers by route template, method and status",
        ),
        metric(
            "nimbus_http_request_duration_seconds",
            Histogram,
            &["method", "route"],
            "request latency by route template and method",
        ),
        metric("nimbus_store_fetch_seconds", Histogram, &[], "block fetches from the store (cold reads)"),
        metric("nimbus_store_bytes_read_total", Counter, &[], "bytes read from the store"),
        metric(
            "nimbus_store_range_fetches_total",
            Counter,
            &[],
            "ranged GETs of a block's pieces (a read of part of a block, verified against its outboard)",
        ),
        metric("nimbus_store_outboard_fetches_total", Counter, &[], "block outboards (piece tags) read from the store"),
        metric(
            "nimbus_store_outboards_written_total",
            Counter,
            &[],
            "outboards written for blocks stored without one (found by a ranged read)",
        ),
        metric(
            "nimbus_block_redirects_total",
            Counter,
            &[],
            "block reads sent straight to the store (`--s3-direct-reads`): the gateway carried none of their bytes",
        ),
        metric("nimbus_store_bytes_written_total", Counter, &[], "bytes written to the store"),
        metric("nimbus_store_corrupt_blocks_total", Counter, &[], "blocks from the store that failed their hash check"),
        metric(
            "nimbus_store_blocks_repaired_total",
            Counter,
            &[],
            "blocks whose missing or damaged object an upload wrote again",
        ),
        metric("nimbus_thumbnails_made_total", Counter, &[], "thumbnails made (decoded, scaled, kept)"),
        metric("nimbus_thumbnails_served_kept_total", Counter, &[], "thumbnails served from the kept ones (no decode)"),
        metric(
            "nimbus_thumbnails_refused_total",
            Counter,
            &[],
            "thumbnail requests refused for their content (not an image, damaged, too large)",
        ),
        metric(
            "nimbus_thumbnails_kept",
            Gauge,
            &[],
            "thumbnails kept in the metadata database (as of this gateway's last one)",
        ),
        metric(
            "nimbus_thumbnails_kept_bytes",
            Gauge,
            &[],
            "bytes of the thumbnails kept in the metadata database (as of this gateway's last one)",
        ),
        metric("nimbus_cache_hits_total", Counter, &["tier"], "cache hits by tier (mem, disk)"),
        metric("nimbus_cache_misses_total", Counter, &[], "cache misses (a store fetch)"),
        metric("nimbus_cache_bypassed_total", Counter, &[], "reads that asked to bypass the cache"),
        metric("nimbus_cache_bytes_served_total", Counter, &["tier"], "bytes served from the cache by tier"),
        metric("nimbus_cache_size_bytes", Gauge, &["tier"], "bytes held by each cache tier"),
        metric("nimbus_cache_evictions_total", Counter, &["tier"], "entries evicted by tier"),
        metric("nimbus_cache_admission_rejects_total", Counter, &["tier"], "blocks a tier did not admit"),
        metric("nimbus_cache_errors_total", Counter, &[], "SSD cache failures (the read goes to the store)"),
        metric("nimbus_cache_corrupt_total", Counter, &[], "SSD cache entries that failed verification"),
        metric("nimbus_cache_fetches_in_flight", Gauge, &[], "store fetches registered now"),
        metric("nimbus_logins_total", Counter, &["result"], "sign-ins by result: success, failure, throttled"),
        metric(
            "nimbus_password_checks_refused_total",
            Counter,
            &[],
            "sign-ins turned away while the password hash queue was full",
        ),
        metric(
            "nimbus_quota_room_made_bytes_total",
            Counter,
            &[],
            "bytes of older history expired to make room for a write",
        ),
        metric(
            "nimbus_retention_versions_expired_total",
            Counter,
            &[],
            "older versions expired by the retention policy",
        ),
        metric("nimbus_retention_trash_expired_total", Counter, &[], "trash items expired by the retention policy"),
        metric("nimbus_gc_blocks_freed_total", Counter, &[], "blocks deleted by garbage collection"),
        metric(
            "nimbus_upload_blocks_discarded_total",
            Counter,
            &[],
            "blocks of failed or aborted uploads deleted at once (not left for garbage collection)",
        ),
        metric("nimbus_fsck_problems", Gauge, &[], "problems the last fsck left"),
    ]
};

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

    /// The metric macro calls in gateway/src, read from the source: (name, kind, label keys).
    fn recorded_metrics() -> std::collections::BTreeSet<(String, &'static str, Vec<String>)> {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).expect("read gateway/src") {
                let p = e.expect("dir entry").path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let mut files = Vec::new();
        walk(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
        let mut found = std::collections::BTreeSet::new();
        for f in files {
            let text = std::fs::read_to_string(&f).expect("read source");
            for kind in ["counter", "gauge", "histogram"] {
                let pat = format!("{kind}!(");
                let mut rest = text.as_str();
                while let Some(i) = rest.find(&pat) {
                    rest = &rest[i + pat.len()..];
                    let call = rest.trim_start();
                    // The table itself and this test name metrics without a macro call.
                    let Some(call) = call.strip_prefix("\"nimbus_") else { continue };
                    let name = format!("nimbus_{}", &call[..call.find('"').expect("closing quote")]);
                    let stmt = &call[..call.find(';').unwrap_or(call.len())];
                    let labels = stmt
                        .split("=>")
                        .collect::<Vec<_>>()
                        .split_last()
                        .map(|(_, keys)| {
                            keys.iter()
                                .filter_map(|k| k.trim_end().strip_suffix('"')?.rsplit('"').next())
                                .map(String::from)
                                .collect()
                        })
                        .unwrap_or_default();
                    found.insert((name, kind, labels));
                }
            }
        }
        found
    }

    #[test]
    fn table_matches_the_code() {
        let kind = |k: MetricKind| match k {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        };
        let table: std::collections::BTreeSet<_> = METRICS
            .iter()
            .map(|m| (m.name.to_owned(), kind(m.kind), m.labels.iter().map(|l| (*l).to_owned()).collect::<Vec<_>>()))
            .collect();
        let code = recorded_metrics();
        assert!(code.len() > 10, "found only {} metric calls: {code:?}", code.len());
        let missing: Vec<_> = code.difference(&table).collect();
        let stale: Vec<_> = table.difference(&code).collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "METRICS is out of date; recorded but not in the table: {missing:?}; in the table but never recorded so: {stale:?}"
        );
        let mut names: Vec<_> = METRICS.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METRICS.len(), "a metric is listed twice");
    }
}
