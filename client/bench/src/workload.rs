//! One workload: what each operation does (op, block size, layout) and which block it picks
//! (sequential, uniform random, or a zipf hot set), with how many in flight.

use rand::Rng;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
    Mixed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Sequential,
    Random,
    Zipf,
}

/// Where the blocks live: ranges of one large file, or many whole small files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    #[default]
    Range,
    Files,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub op: Op,
    /// Percentage of reads in a `mixed` workload (e.g. 75 for 75/25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_pct: Option<u8>,
    /// Bytes per operation. With `layout = files`, the size of each small file.
    pub block_size: u64,
    pub pattern: Pattern,
    pub queue_depth: u32,
    #[serde(default)]
    pub layout: Layout,
}

impl Workload {
    /// Short label for tables and chart legends: `read 4KiB random qd8`.
    pub fn label(&self) -> String {
        let op = match (self.op, self.read_pct) {
            (Op::Mixed, Some(p)) => format!("mixed {p}/{}", 100 - u32::from(p)),
            (op, _) => format!("{op:?}").to_lowercase(),
        };
        let files = if self.layout == Layout::Files { " files" } else { "" };
        format!("{op} {}{files} {:?} qd{}", human_size(self.block_size), self.pattern, self.queue_depth).to_lowercase()
    }

    /// Reads in percent: 100 for read, 0 for write.
    pub fn read_percent(&self) -> u8 {
        match self.op {
            Op::Read => 100,
            Op::Write => 0,
            Op::Mixed => self.read_pct.unwrap_or(50).min(100),
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(512..=64 * 1024 * 1024).contains(&self.block_size) {
            return Err(format!("block_size {} is outside 512 B..64 MiB", self.block_size));
        }
        if !(1..=256).contains(&self.queue_depth) {
            return Err(format!("queue_depth {} is outside 1..256", self.queue_depth));
        }
        if self.op == Op::Mixed && self.read_pct.is_none_or(|p| p > 100) {
            return Err("a mixed workload needs read_pct between 0 and 100".into());
        }
        if self.op != Op::Mixed && self.read_pct.is_some() {
            return Err("read_pct only applies to op = mixed".into());
        }
        Ok(())
    }
}

/// `4KiB`, `1MiB`, `1536B`.
pub fn human_size(n: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if n >= size && n.is_multiple_of(size) {
            return format!("{}{unit}", n / size);
        }
    }
    format!("{n}B")
}

/// Picks slot indices (blocks of a file, or files) out of `slots`.
#[derive(Debug, Clone)]
pub enum Picker {
    Sequential {
        slots: u64,
    },
    Random {
        slots: u64,
    },
    /// Cumulative distribution over ranks; rank r is slot r (the hot set is the first slots).
    Zipf {
        cdf: Vec<f64>,
    },
}

/// Skew of the hot set: s = 1.1 puts about 40 % of reads on the hottest 1 % of 10 000 slots.
pub const ZIPF_EXPONENT: f64 = 1.1;

impl Picker {
    pub fn new(pattern: Pattern, slots: u64) -> Self {
        let slots = slots.max(1);
        match pattern {
            Pattern::Sequential => Picker::Sequential { slots },
            Pattern::Random => Picker::Random { slots },
            Pattern::Zipf => Picker::Zipf { cdf: zipf_cdf(slots, ZIPF_EXPONENT) },
        }
    }

    /// The slot of the `n`th operation of the step (`n` only matters for sequential).
    pub fn pick(&self, n: u64, rng: &mut impl Rng) -> u64 {
        match self {
            Picker::Sequential { slots } => n % slots,
            Picker::Random { slots } => rng.random_range(0..*slots),
            Picker::Zipf { cdf } => {
                let u: f64 = rng.random();
                cdf.partition_point(|&c| c < u).min(cdf.len().saturating_sub(1)) as u64
            }
        }
    }
}

fn zipf_cdf(n: u64, s: f64) -> Vec<f64> {
    let weights: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64).powf(s)).collect();
    let total: f64 = weights.iter().sum();
    let mut acc = 0.0;
    weights
        .iter()
        .map(|w| {
            acc += w / total;
            acc
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn sequential_wraps_and_random_stays_in_range() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let p = Picker::new(Pattern::Sequential, 4);
        assert_eq!((0..6).map(|n| p.pick(n, &mut rng)).collect::<Vec<_>>(), vec![0, 1, 2, 3, 0, 1]);
        let p = Picker::new(Pattern::Random, 10);
        assert!((0..1000).all(|n| p.pick(n, &mut rng) < 10));
    }

    #[test]
    fn zipf_prefers_the_hot_set() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let p = Picker::new(Pattern::Zipf, 1000);
        let picks: Vec<u64> = (0..20_000).map(|n| p.pick(n, &mut rng)).collect();
        assert!(picks.iter().all(|&s| s < 1000));
        let hot = picks.iter().filter(|&&s| s < 10).count();
        // Uniform would put 1 % there; zipf(1.1) puts well over a third.
        assert!(hot > 20_000 / 3, "hot set got {hot}");
    }

    #[test]
    fn labels_and_validation() {
        let w = Workload {
            op: Op::Mixed,
            read_pct: Some(75),
            block_size: 4096,
            pattern: Pattern::Random,
            queue_depth: 8,
            layout: Layout::Range,
        };
        assert_eq!(w.label(), "mixed 75/25 4kib random qd8");
        assert!(w.validate().is_ok());
        assert!(Workload { read_pct: None, ..w.clone() }.validate().is_err());
        assert!(Workload { block_size: 100, ..w.clone() }.validate().is_err());
        assert!(Workload { queue_depth: 0, ..w }.validate().is_err());
        assert_eq!(human_size(1536), "1536B");
        assert_eq!(human_size(2048), "2KiB");
    }
}
