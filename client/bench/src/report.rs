//! The report: versioned JSON (schema in docs/BENCH-REPORT.md), a terminal table, and a
//! self-contained HTML page with inline SVG charts (no scripts, no external resources).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::stats::Latency;
use crate::workload::{Layout, Op, Pattern, Workload};

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub tool: String,
    pub run_id: String,
    pub job: String,
    pub started_at: String,
    pub finished_at: String,
    pub gateway: String,
    pub targets: Vec<String>,
    pub skipped: Vec<Skipped>,
    pub results: Vec<StepResult>,
    pub speedups: Vec<Speedup>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Skipped {
    pub target: String,
    pub reason: String,
}

/// One step: one workload against one target. The workload fields are both nested and
/// repeated flat, so readers can use either form.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepResult {
    pub target: String,
    pub label: String,
    pub workload: Workload,
    pub op: Op,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_pct: Option<u8>,
    pub block_size: u64,
    pub pattern: Pattern,
    pub queue_depth: u32,
    pub layout: Layout,
    pub iops: f64,
    pub mb_per_s: f64,
    pub latency_us: Latency,
    pub ops: u64,
    pub bytes: u64,
    pub errors: u64,
    pub verified: u64,
    pub duration_s: f64,
    /// Client CPU used during the step, in percent of one core.
    pub cpu_pct: Option<f64>,
    /// The gateway's cache hit ratio during the step (gateway targets only).
    pub cache_hit_ratio: Option<f64>,
}

impl StepResult {
    pub fn new(target: &str, w: &Workload, rec: &crate::stats::Recorder, duration_s: f64) -> Self {
        let secs = duration_s.max(1e-9);
        StepResult {
            target: target.into(),
            label: w.label(),
            workload: w.clone(),
            op: w.op,
            read_pct: w.read_pct,
            block_size: w.block_size,
            pattern: w.pattern,
            queue_depth: w.queue_depth,
            layout: w.layout,
            iops: rec.ops as f64 / secs,
            mb_per_s: rec.bytes as f64 / secs / 1e6,
            latency_us: rec.latency(),
            ops: rec.ops,
            bytes: rec.bytes,
            errors: rec.errors,
            verified: rec.verified,
            duration_s,
            cpu_pct: None,
            cache_hit_ratio: None,
        }
    }
}

/// How much faster `fast` was than `slow` on one workload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Speedup {
    pub workload: String,
    pub fast: String,
    pub slow: String,
    pub iops_ratio: f64,
    pub mb_per_s_ratio: f64,
    /// slow p50 / fast p50: above 1 means lower latency.
    pub p50_latency_ratio: f64,
}

/// Cached over uncached, warm over cold, per workload present on both sides.
pub fn speedups(results: &[StepResult]) -> Vec<Speedup> {
    let mut out = Vec::new();
    for (fast, slow) in [("gateway-cached", "gateway-uncached"), ("mount-warm", "mount-cold")] {
        for f in results.iter().filter(|r| r.target == fast) {
            let Some(s) = results.iter().find(|r| r.target == slow && r.label == f.label) else { continue };
            let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
            out.push(Speedup {
                workload: f.label.clone(),
                fast: fast.into(),
                slow: slow.into(),
                iops_ratio: ratio(f.iops, s.iops),
                mb_per_s_ratio: ratio(f.mb_per_s, s.mb_per_s),
                p50_latency_ratio: ratio(s.latency_us.p50 as f64, f.latency_us.p50 as f64),
            });
        }
    }
    out
}

impl Report {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The terminal table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<17} {:<34} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>6} {:>5}",
            "target", "workload", "IOPS", "MB/s", "p50 µs", "p99 µs", "p99.9", "max µs", "errors", "hit%"
        );
        for r in &self.results {
            let hit = r.cache_hit_ratio.map(|h| format!("{:.0}", h * 100.0)).unwrap_or_else(|| "-".into());
            let l = &r.latency_us;
            let _ = writeln!(
                s,
                "{:<17} {:<34} {:>9.0} {:>9.1} {:>8} {:>8} {:>8} {:>8} {:>6} {:>5}",
                r.target, r.label, r.iops, r.mb_per_s, l.p50, l.p99, l.p99_9, l.max, r.errors, hit
            );
        }
        for sp in &self.speedups {
            let _ = writeln!(
                s,
                "speed-up {} over {} on {}: {:.2}x IOPS, {:.2}x MB/s",
                sp.fast, sp.slow, sp.workload, sp.iops_ratio, sp.mb_per_s_ratio
            );
        }
        for sk in &self.skipped {
            let _ = writeln!(s, "skipped {}: {}", sk.target, sk.reason);
        }
        s
    }

    /// A self-contained page: inline CSS and SVG only, viewable offline.
    pub fn html(&self) -> String {
        let targets: Vec<&str> = self.targets.iter().map(String::as_str).collect();
        let mut labels: Vec<&str> = Vec::new();
        for r in &self.results {
            if !labels.contains(&r.label.as_str()) {
                labels.push(&r.label);
            }
        }
        let value = |label: &str, target: &str, f: &dyn Fn(&StepResult) -> f64| {
            self.results.iter().find(|r| r.label == label && r.target == target).map(f)
        };
        let chart = |title: &str, unit: &str, f: &dyn Fn(&StepResult) -> f64| {
            let groups: Vec<(String, Vec<Option<f64>>)> =
                labels.iter().map(|l| (l.to_string(), targets.iter().map(|t| value(l, t, f)).collect())).collect();
            bar_chart(title, unit, &targets.iter().map(|t| t.to_string()).collect::<Vec<_>>(), &groups)
        };
        let mut body = String::new();
        body.push_str(&chart("Throughput by workload and target", "MB/s", &|r| r.mb_per_s));
        body.push_str(&chart("IOPS by workload and target", "IOPS", &|r| r.iops));
        body.push_str(&chart("p50 latency", "µs", &|r| r.latency_us.p50 as f64));
        body.push_str(&chart("p99 latency", "µs", &|r| r.latency_us.p99 as f64));
        body.push_str(&chart("p99.9 latency", "µs", &|r| r.latency_us.p99_9 as f64));
        if !self.speedups.is_empty() {
            let series = vec!["IOPS ratio".to_string(), "MB/s ratio".to_string()];
            let groups: Vec<(String, Vec<Option<f64>>)> = self
                .speedups
                .iter()
                .map(|s| {
                    (
                        format!("{} vs {}: {}", s.fast, s.slow, s.workload),
                        vec![Some(s.iops_ratio), Some(s.mb_per_s_ratio)],
                    )
                })
                .collect();
            body.push_str(&bar_chart("Speed-up (fast over slow)", "×", &series, &groups));
        }
        let mut rows = String::new();
        for r in &self.results {
            let l = &r.latency_us;
            let hit = r.cache_hit_ratio.map(|h| format!("{:.0} %", h * 100.0)).unwrap_or_else(|| "-".into());
            let _ = write!(
                rows,
                "<tr><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&r.target),
                esc(&r.label),
                r.iops,
                r.mb_per_s,
                l.p50,
                l.p90,
                l.p99,
                l.p99_9,
                l.max,
                r.errors,
                r.verified,
                hit
            );
        }
        let skipped: String =
            self.skipped.iter().map(|s| format!("<li><b>{}</b>: {}</li>", esc(&s.target), esc(&s.reason))).collect();
        format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>nimbus bench {job}</title>\
             <style>body{{font-family:sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse;font-size:13px}}\
             td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}}td:first-child,td:nth-child(2){{text-align:left}}\
             svg{{display:block;margin:16px 0}}</style></head><body>\
             <h1>nimbus bench: {job}</h1><p>Run {run} against {gw}, {start} to {end}. Schema version {ver}.</p>\
             {body}<h2>All results</h2><table><tr><th>target</th><th>workload</th><th>IOPS</th><th>MB/s</th><th>p50 µs</th>\
             <th>p90 µs</th><th>p99 µs</th><th>p99.9 µs</th><th>max µs</th><th>errors</th><th>verified</th><th>cache hits</th></tr>{rows}</table>\
             <h2>Skipped targets</h2><ul>{skipped}</ul></body></html>\n",
            job = esc(&self.job),
            run = esc(&self.run_id),
            gw = esc(&self.gateway),
            start = esc(&self.started_at),
            end = esc(&self.finished_at),
            ver = self.schema_version,
        )
    }
}

const COLORS: [&str; 6] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];

/// A grouped horizontal bar chart: one group per row label, one bar per series.
fn bar_chart(title: &str, unit: &str, series: &[String], groups: &[(String, Vec<Option<f64>>)]) -> String {
    let max = groups.iter().flat_map(|(_, v)| v.iter().flatten()).fold(0.0f64, |a, &b| a.max(b)).max(1e-9);
    let bar_h = 12.0;
    let group_h = bar_h * series.len().max(1) as f64 + 10.0;
    let left = 300.0;
    let width = 1100.0;
    let plot_w = width - left - 120.0;
    let legend_h = 24.0;
    let height = legend_h + group_h * groups.len() as f64 + 20.0;
    let mut s = format!(
        "<h2>{}</h2><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-size=\"11\">",
        esc(title)
    );
    for (i, name) in series.iter().enumerate() {
        let x = left + i as f64 * 140.0;
        let c = COLORS[i % COLORS.len()];
        let _ = write!(
            s,
            "<rect x=\"{x}\" y=\"4\" width=\"12\" height=\"12\" fill=\"{c}\"/><text x=\"{}\" y=\"14\">{}</text>",
            x + 16.0,
            esc(name)
        );
    }
    for (g, (label, values)) in groups.iter().enumerate() {
        let y0 = legend_h + g as f64 * group_h;
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            left - 6.0,
            y0 + group_h / 2.0,
            esc(label)
        );
        for (i, v) in values.iter().enumerate() {
            let Some(v) = v else { continue };
            let y = y0 + i as f64 * bar_h;
            let w = (v / max * plot_w).max(1.0);
            let c = COLORS[i % COLORS.len()];
            let _ = write!(
                s,
                "<rect x=\"{left}\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"{c}\"/><text x=\"{:.1}\" y=\"{}\">{v:.1} {}</text>",
                bar_h - 2.0,
                left + w + 4.0,
                y + bar_h - 3.0,
                esc(unit)
            );
        }
    }
    s.push_str("</svg>");
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Recorder;

    fn sample() -> Report {
        let w = Workload {
            op: Op::Read,
            read_pct: None,
            block_size: 4096,
            pattern: Pattern::Random,
            queue_depth: 4,
            layout: Layout::Range,
        };
        let mut fast = Recorder::new();
        let mut slow = Recorder::new();
        for _ in 0..100 {
            fast.record(100, 4096);
            slow.record(400, 4096);
        }
        fast.verified = 100;
        let results = vec![
            StepResult::new("gateway-uncached", &w, &slow, 1.0),
            StepResult::new("gateway-cached", &w, &fast, 0.25),
            StepResult::new("disk", &w, &fast, 0.1),
        ];
        let speedups = speedups(&results);
        Report {
            schema_version: SCHEMA_VERSION,
            tool: "nimbus bench".into(),
            run_id: "r1".into(),
            job: "quick <test>".into(),
            started_at: "a".into(),
            finished_at: "b".into(),
            gateway: "http://127.0.0.1:1".into(),
            targets: vec!["gateway-uncached".into(), "gateway-cached".into(), "disk".into()],
            skipped: vec![Skipped { target: "store".into(), reason: "no --s3-endpoint".into() }],
            results,
            speedups,
        }
    }

    #[test]
    fn json_has_the_contract_fields() {
        let v: serde_json::Value = serde_json::from_str(&sample().to_json()).expect("json");
        assert_eq!(v["schema_version"], 1);
        let r = &v["results"][1];
        assert_eq!(r["target"], "gateway-cached");
        for key in ["op", "block_size", "pattern", "queue_depth"] {
            assert_eq!(r[key], r["workload"][key], "{key}");
        }
        assert_eq!(r["op"], "read");
        assert_eq!(r["block_size"], 4096);
        assert_eq!(r["pattern"], "random");
        assert_eq!(r["iops"], 400.0);
        for p in ["p50", "p90", "p99", "p99.9", "p999", "max", "mean"] {
            assert!(r["latency_us"][p].is_number(), "{p}");
        }
        assert_eq!(v["speedups"][0]["iops_ratio"], 4.0);
        assert_eq!(v["skipped"][0]["target"], "store");
    }

    #[test]
    fn html_is_self_contained_and_escaped() {
        let html = sample().html();
        assert!(html.starts_with("<!doctype html>"));
        assert!(html.contains("<svg"));
        assert!(html.contains("quick &lt;test&gt;"));
        assert!(!html.contains("<script"));
        assert!(!html.contains("http://") || !html.contains("src=\"http"), "no external resources");
        assert!(!html.contains("href="));
        let table = sample().table();
        assert!(table.contains("gateway-cached"));
        assert!(table.contains("skipped store"));
        assert!(table.contains("4.00x IOPS"));
    }
}
