//! Latency histograms (HDR, microseconds, 3 significant digits) and the figures of a step.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latency percentiles in microseconds. `p99.9` is also written as `p999` for readers that
/// cannot address a key with a dot.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Latency {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    #[serde(rename = "p99.9")]
    pub p99_9: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

/// Counts of one worker, merged at the end of a step.
#[derive(Debug, Clone)]
pub struct Recorder {
    pub hist: Histogram<u64>,
    pub ops: u64,
    pub bytes: u64,
    pub errors: u64,
    pub verified: u64,
}

/// Latencies up to an hour fit; anything above is clamped to the top.
const MAX_US: u64 = 3_600_000_000;

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        // 3 significant digits over 1 µs..1 h: a constant this crate owns, cannot fail.
        #[allow(clippy::expect_used)]
        let hist = Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds");
        Self { hist, ops: 0, bytes: 0, errors: 0, verified: 0 }
    }

    pub fn record(&mut self, micros: u64, bytes: u64) {
        self.hist.saturating_record(micros.clamp(1, MAX_US));
        self.ops += 1;
        self.bytes += bytes;
    }

    pub fn merge(&mut self, other: &Recorder) {
        // Same bounds on both sides, so adding cannot fail; saturate rather than panic anyway.
        let _ = self.hist.add(&other.hist);
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.errors += other.errors;
        self.verified += other.verified;
    }

    pub fn latency(&self) -> Latency {
        if self.hist.is_empty() {
            return Latency::default();
        }
        let q = |p: f64| self.hist.value_at_quantile(p);
        let p999 = q(0.999);
        Latency {
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            p99_9: p999,
            p999,
            max: self.hist.max(),
            mean: self.hist.mean(),
        }
    }
}

/// CPU time (user + system) this process has used, in seconds, when the OS tells us.
pub fn process_cpu_seconds() -> Option<f64> {
    // /proc/self/stat fields 14 and 15 (utime, stime) in clock ticks; 100 Hz on Linux.
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Sums of the gateway's cache counters from its Prometheus text.
pub fn cache_counters(metrics: &str) -> (f64, f64) {
    let mut hits = 0.0;
    let mut misses = 0.0;
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, value)) = line.rsplit_once(' ') else { continue };
        let Ok(v) = value.trim().parse::<f64>() else { continue };
        let metric = name.split('{').next().unwrap_or_default();
        match metric {
            "nimbus_cache_hits_total" => hits += v,
            "nimbus_cache_misses_total" => misses += v,
            _ => {}
        }
    }
    (hits, misses)
}

/// Hit ratio between two readings of [`cache_counters`]; `None` when nothing was looked up.
pub fn hit_ratio(before: (f64, f64), after: (f64, f64)) -> Option<f64> {
    let hits = after.0 - before.0;
    let misses = after.1 - before.1;
    (hits + misses > 0.0).then(|| hits / (hits + misses))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut r = Recorder::new();
        for us in 1..=1000u64 {
            r.record(us, 10);
        }
        let l = r.latency();
        // 3 significant digits: within 0.1 % of the exact order statistics.
        let near = |got: u64, want: u64| got.abs_diff(want) <= want / 1000 + 1;
        assert!(near(l.p50, 500), "p50 {}", l.p50);
        assert!(near(l.p90, 900), "p90 {}", l.p90);
        assert!(near(l.p99, 990), "p99 {}", l.p99);
        assert!(near(l.p99_9, 999), "p99.9 {}", l.p99_9);
        assert_eq!(l.p99_9, l.p999);
        assert!(near(l.max, 1000));
        assert!((l.mean - 500.5).abs() < 1.0, "mean {}", l.mean);
        assert_eq!((r.ops, r.bytes), (1000, 10_000));
    }

    #[test]
    fn merge_adds_workers_and_tail_is_kept() {
        let mut a = Recorder::new();
        let mut b = Recorder::new();
        for _ in 0..999 {
            a.record(100, 1);
        }
        b.record(50_000, 1);
        b.errors = 2;
        a.merge(&b);
        let l = a.latency();
        assert_eq!(a.ops, 1000);
        assert_eq!(a.errors, 2);
        assert!(l.p50.abs_diff(100) <= 1);
        assert!(l.max.abs_diff(50_000) <= 50, "max {}", l.max);
        assert!(l.p99_9 >= 100);
        assert_eq!(Recorder::new().latency(), Latency::default());
    }

    #[test]
    fn cache_ratio_from_prometheus_text() {
        let before =
            cache_counters("# TYPE x counter\nnimbus_cache_hits_total{tier=\"mem\"} 5\nnimbus_cache_misses_total 5\n");
        let after = cache_counters(
            "nimbus_cache_hits_total{tier=\"mem\"} 12\nnimbus_cache_hits_total{tier=\"disk\"} 2\nnimbus_cache_misses_total 6\nother 9\n",
        );
        assert_eq!(before, (5.0, 5.0));
        assert_eq!(hit_ratio(before, after), Some(0.9));
        assert_eq!(hit_ratio(after, after), None);
    }
}
