//! Operator commands run beside (or instead of) `serve` on the same database and store:
//! `gc` (reclaim unreferenced blocks), `fsck` (check and repair the registry against the
//! store), `migrate` (bring the schema up to date).

pub mod fsck;
pub mod gc;
pub mod maintenance;

use std::process::ExitCode;
use std::time::Duration;

use crate::config::{FsckArgs, GcArgs, MigrateArgs, ServeArgs};
use crate::server::{open_meta, open_store};

fn init_logs(args: &ServeArgs) {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

pub async fn gc_command(args: &GcArgs) -> anyhow::Result<ExitCode> {
    init_logs(&args.serve);
    let meta = open_meta(&args.serve).await?;
    let store = open_store(&args.serve).await?;
    let opts = gc::GcOptions {
        grace: args.serve.gc_grace,
        upload_expiry: args.serve.gc_upload_expiry,
        retention: args.serve.retention(),
        recount_all: true,
    };
    let report = gc::run(&meta, &store, &opts).await?;
    meta.close().await;
    print_report(args.json, &report, gc::human);
    Ok(if report.errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

pub async fn fsck_command(args: &FsckArgs) -> anyhow::Result<ExitCode> {
    init_logs(&args.serve);
    let meta = open_meta(&args.serve).await?;
    let store = open_store(&args.serve).await?;
    let report = fsck::run(&meta, &store, args.sample, args.repair, args.serve.gc_grace).await?;
    meta.close().await;
    print_report(args.json, &report, fsck::human);
    Ok(if report.problems_remaining == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

pub async fn migrate_command(args: &MigrateArgs) -> anyhow::Result<ExitCode> {
    init_logs(&args.serve);
    let meta = open_meta(&args.serve).await?;
    println!("database schema is up to date ({})", meta.engine());
    meta.close().await;
    Ok(ExitCode::SUCCESS)
}

/// `90s`, `30m`, `24h`, `7d`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("`{s}` is not a duration (e.g. 90s, 30m, 24h, 7d)"))?;
    let mult = match unit.trim() {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        other => return Err(format!("unknown unit `{other}` in `{s}`: use s, m, h or d")),
    };
    n.checked_mul(mult).map(Duration::from_secs).ok_or_else(|| format!("`{s}` is too long"))
}

/// Prints a report as JSON or as the lines a person reads.
pub(crate) fn print_report<T: serde::Serialize>(json: bool, report: &T, human: impl FnOnce(&T) -> String) {
    if json {
        match serde_json::to_string_pretty(report) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("error: cannot encode the report: {e}"),
        }
    } else {
        println!("{}", human(report));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("5y").is_err());
    }
}
