//! The console's "over time" charts: every interval, one sample of this gateway's request
//! rate, 5xx rate, cache hit ratio and cache size; the last hour stays in memory. Prometheus
//! (`/metrics`) is the place for longer history; this is what an admin sees without one.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cache::BlockCache;
use nimbus_proto::wire::{StatsHistory, StatsSample};

/// How much history is kept, whatever the interval.
const KEEP: Duration = Duration::from_secs(3600);

static REQUESTS: AtomicU64 = AtomicU64::new(0);
static SERVER_ERRORS: AtomicU64 = AtomicU64::new(0);

/// Counts one answered request (every listener of this process).
pub fn count(status: u16) {
    REQUESTS.fetch_add(1, Ordering::Relaxed);
    if status >= 500 {
        SERVER_ERRORS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Cumulative counters at one instant; a sample is the difference of two.
#[derive(Debug, Clone, Copy)]
pub struct Totals {
    pub at: Instant,
    pub requests: u64,
    pub server_errors: u64,
    pub cache_hits: u64,
    pub cache_lookups: u64,
}

impl Totals {
    fn from_stats(c: &nimbus_proto::wire::CacheStats) -> Totals {
        Totals {
            at: Instant::now(),
            requests: REQUESTS.load(Ordering::Relaxed),
            server_errors: SERVER_ERRORS.load(Ordering::Relaxed),
            cache_hits: c.hits_mem + c.hits_disk,
            cache_lookups: c.hits_mem + c.hits_disk + c.misses,
        }
    }
}

pub struct History {
    interval: Duration,
    inner: Mutex<Inner>,
}

struct Inner {
    samples: VecDeque<StatsSample>,
    last: Option<Totals>,
}

impl History {
    pub fn new(interval: Duration) -> History {
        History { interval, inner: Mutex::new(Inner { samples: VecDeque::new(), last: None }) }
    }

    fn capacity(&self) -> usize {
        (KEEP.as_secs_f64() / self.interval.as_secs_f64().max(1.0)).ceil() as usize
    }

    /// Adds the sample between the previous totals and `now` (the first call only sets the
    /// baseline). `at_ms` is the wall-clock time of `now` (Unix milliseconds).
    pub fn record(&self, now: Totals, cache_used_bytes: u64, at_ms: i64) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(prev) = inner.last {
            let secs = now.at.saturating_duration_since(prev.at).as_secs_f64().max(1e-3);
            let lookups = now.cache_lookups.saturating_sub(prev.cache_lookups);
            let hits = now.cache_hits.saturating_sub(prev.cache_hits);
            let sample = StatsSample {
                at: crate::timefmt::rfc3339(at_ms),
                requests_per_sec: now.requests.saturating_sub(prev.requests) as f64 / secs,
                server_errors_per_sec: now.server_errors.saturating_sub(prev.server_errors) as f64 / secs,
                cache_hit_ratio: (lookups > 0).then(|| hits as f64 / lookups as f64),
                cache_used_bytes,
            };
            if inner.samples.len() >= self.capacity() {
                inner.samples.pop_front();
            }
            inner.samples.push_back(sample);
        }
        inner.last = Some(now);
    }

    pub fn snapshot(&self) -> StatsHistory {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        StatsHistory { interval_secs: self.interval.as_secs(), samples: inner.samples.iter().cloned().collect() }
    }

    /// Samples `cache` and the request counters every interval, for as long as the process runs.
    pub fn spawn_sampler(self: &Arc<Self>, cache: Arc<BlockCache>) {
        let history = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(history.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let stats = cache.stats();
                history.record(
                    Totals::from_stats(&stats),
                    stats.mem_used_bytes + stats.disk_used_bytes,
                    crate::meta::now_ms(),
                );
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(at: Instant, requests: u64, errors: u64, hits: u64, lookups: u64) -> Totals {
        Totals { at, requests, server_errors: errors, cache_hits: hits, cache_lookups: lookups }
    }

    #[test]
    fn samples_are_rates_between_two_totals() {
        let h = History::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let wall = 0;
        h.record(totals(t0, 100, 1, 10, 20), 0, wall);
        assert!(h.snapshot().samples.is_empty(), "the first call is only the baseline");
        h.record(totals(t0 + Duration::from_secs(10), 300, 3, 40, 60), 4096, wall);
        let s = h.snapshot();
        assert_eq!(s.interval_secs, 10);
        assert_eq!(s.samples.len(), 1);
        let x = &s.samples[0];
        assert!((x.requests_per_sec - 20.0).abs() < 1e-9);
        assert!((x.server_errors_per_sec - 0.2).abs() < 1e-9);
        assert_eq!(x.cache_hit_ratio, Some(0.75));
        assert_eq!(x.cache_used_bytes, 4096);
        // No lookups in an interval: no ratio, rather than a made-up 0 or 100 %.
        h.record(totals(t0 + Duration::from_secs(20), 300, 3, 40, 60), 4096, wall);
        assert_eq!(h.snapshot().samples[1].cache_hit_ratio, None);
        assert_eq!(h.snapshot().samples[1].requests_per_sec, 0.0);
    }

    #[test]
    fn keeps_one_hour() {
        let h = History::new(Duration::from_secs(60));
        let t0 = Instant::now();
        for i in 0..200u64 {
            h.record(totals(t0 + Duration::from_secs(60 * i), i, 0, 0, 0), 0, 0);
        }
        let s = h.snapshot();
        assert_eq!(s.samples.len(), 60);
        assert!((s.samples[59].requests_per_sec - 1.0 / 60.0).abs() < 1e-9);
    }
}
