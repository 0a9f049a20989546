//! The job: data set sizes, how long each step runs, and the workload matrix. Presets
//! `quick` and `full`, or a JSON job file (`--job FILE`, format in docs/BENCH-REPORT.md).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::workload::{Layout, Op, Pattern, Workload};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub name: String,
    /// Size of the large file the range workloads read from.
    pub file_size: u64,
    /// How many small files the `layout = files` workloads read (each `block_size` bytes).
    #[serde(default = "default_small_files")]
    pub small_files: u64,
    /// Operations per step; the step ends at `ops` or `duration_ms`, whichever comes first.
    #[serde(default)]
    pub ops: Option<u64>,
    #[serde(default)]
    pub duration_ms: Option<u64>,
    pub workloads: Vec<Workload>,
}

fn default_small_files() -> u64 {
    64
}

const MAX_FILE_SIZE: u64 = 4 << 30;

impl Job {
    /// A JSON job file.
    pub fn parse(text: &str) -> Result<Job> {
        let job: Job = serde_json::from_str(text).map_err(|e| Error::Job(e.to_string()))?;
        job.validate()?;
        Ok(job)
    }

    pub fn preset(name: &str) -> Result<Job> {
        match name {
            "quick" => Ok(quick()),
            "full" => Ok(full()),
            other => Err(Error::Job(format!("unknown preset `{other}` (use quick or full)"))),
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.workloads.is_empty() {
            return Err(Error::Job("no workloads".into()));
        }
        if self.ops.is_none() && self.duration_ms.is_none() {
            return Err(Error::Job("give `ops`, `duration_ms` or both".into()));
        }
        if self.ops == Some(0) || self.duration_ms == Some(0) {
            return Err(Error::Job("`ops` and `duration_ms` must be positive".into()));
        }
        if self.file_size == 0 || self.file_size > MAX_FILE_SIZE {
            return Err(Error::Job(format!("file_size must be 1 B..{MAX_FILE_SIZE} B")));
        }
        if self.small_files == 0 || self.small_files > 100_000 {
            return Err(Error::Job("small_files must be 1..100000".into()));
        }
        for (i, w) in self.workloads.iter().enumerate() {
            w.validate().map_err(|e| Error::Job(format!("workload {}: {e}", i + 1)))?;
            if w.layout == Layout::Range && w.block_size > self.file_size {
                return Err(Error::Job(format!("workload {}: block_size exceeds file_size", i + 1)));
            }
        }
        Ok(())
    }

    /// Block sizes of the small-file workloads (each needs its own set of files).
    pub fn small_file_sizes(&self) -> Vec<u64> {
        let mut sizes: Vec<u64> =
            self.workloads.iter().filter(|w| w.layout == Layout::Files).map(|w| w.block_size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }
}

fn w(op: Op, read_pct: Option<u8>, block_size: u64, pattern: Pattern, queue_depth: u32, layout: Layout) -> Workload {
    Workload { op, read_pct, block_size, pattern, queue_depth, layout }
}

/// Under a minute against a local gateway: a few reads, a write and a mix, small counts.
fn quick() -> Job {
    use {Layout::*, Op::*, Pattern::*};
    Job {
        name: "quick".into(),
        file_size: 8 << 20,
        small_files: 64,
        ops: Some(200),
        duration_ms: Some(3_000),
        workloads: vec![
            w(Read, None, 4 << 10, Random, 8, Range),
            w(Read, None, 64 << 10, Sequential, 4, Range),
            w(Read, None, 1 << 20, Sequential, 4, Range),
            w(Read, None, 4 << 10, Zipf, 8, Files),
            w(Write, None, 64 << 10, Sequential, 4, Range),
            w(Mixed, Some(75), 8 << 10, Random, 8, Range),
        ],
    }
}

/// The matrix: 2 KiB..1 MiB, sequential/random/zipf, QD 1..32, reads, writes, 75/25.
fn full() -> Job {
    use {Layout::*, Op::*, Pattern::*};
    let mut workloads = Vec::new();
    for bs in [2 << 10, 4 << 10, 8 << 10, 64 << 10, 1 << 20] {
        for (pattern, qd) in [(Random, 1), (Random, 32), (Sequential, 8)] {
            workloads.push(w(Read, None, bs, pattern, qd, Range));
        }
        workloads.push(w(Write, None, bs, Random, 8, Range));
        workloads.push(w(Mixed, Some(75), bs, Random, 16, Range));
    }
    workloads.push(w(Read, None, 4 << 10, Zipf, 16, Range));
    workloads.push(w(Read, None, 4 << 10, Random, 16, Files));
    workloads.push(w(Read, None, 4 << 10, Zipf, 16, Files));
    Job {
        name: "full".into(),
        file_size: 64 << 20,
        small_files: 512,
        ops: Some(5_000),
        duration_ms: Some(10_000),
        workloads,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        for name in ["quick", "full"] {
            let job = Job::preset(name).expect("preset");
            job.validate().expect("valid");
        }
        assert!(Job::preset("slow").is_err());
        assert_eq!(Job::preset("quick").expect("quick").small_file_sizes(), vec![4096]);
    }

    #[test]
    fn parses_a_job_file() {
        let job = Job::parse(
            r#"{"name":"mine","file_size":1048576,"ops":50,
                "workloads":[{"op":"mixed","read_pct":75,"block_size":2048,"pattern":"zipf","queue_depth":32},
                             {"op":"read","block_size":4096,"pattern":"random","queue_depth":1,"layout":"files"}]}"#,
        )
        .expect("parses");
        assert_eq!(job.small_files, 64);
        assert_eq!(job.duration_ms, None);
        assert_eq!(job.workloads[0].read_pct, Some(75));
        assert_eq!(job.workloads[0].layout, Layout::Range);
        assert_eq!(job.workloads[1].layout, Layout::Files);
    }

    #[test]
    fn rejects_bad_job_files() {
        let bad = [
            r#"{"name":"x","file_size":1048576,"workloads":[]}"#,
            r#"{"name":"x","file_size":1048576,"ops":5,"workloads":[]}"#,
            r#"{"name":"x","file_size":1024,"ops":5,"workloads":[{"op":"read","block_size":4096,"pattern":"random","queue_depth":1}]}"#,
            r#"{"name":"x","file_size":1048576,"ops":5,"workloads":[{"op":"read","block_size":4096,"pattern":"diagonal","queue_depth":1}]}"#,
            r#"{"name":"x","file_size":1048576,"ops":5,"workloads":[{"op":"mixed","block_size":4096,"pattern":"random","queue_depth":1}]}"#,
            r#"{"name":"x","file_size":1048576,"ops":5,"bogus":1,"workloads":[{"op":"read","block_size":4096,"pattern":"random","queue_depth":1}]}"#,
            "not json",
        ];
        for text in bad {
            assert!(Job::parse(text).is_err(), "accepted {text}");
        }
    }
}
