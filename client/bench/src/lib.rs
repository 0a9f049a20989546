//! The engine of `nimbus bench`: one matrix of workloads (job.rs, workload.rs) run against
//! every target (targets.rs) on the same data, every read checked against what was written
//! (verify.rs), latencies in HDR histograms (stats.rs), and a report as a terminal table,
//! versioned JSON and self-contained HTML (report.rs). run.rs drives the steps.
//!
//! The JSON schema is documented in docs/BENCH-REPORT.md.

pub mod error;
pub mod job;
pub mod report;
pub mod run;
pub mod stats;
pub mod targets;
pub mod verify;
pub mod workload;

pub use error::{Error, Result};
pub use job::Job;
pub use report::Report;
pub use run::{Options, S3Options, run};
