//! Operator commands run beside (or instead of) `serve` on the same database and store:
//! `gc` (reclaim unreferenced blocks), `fsck` (check and repair the registry against the
//! store), `migrate` (bring the schema up to date), `ldap-sync` (accounts from the directory).

pub mod fsck;
pub mod gc;
pub mod maintenance;

use crate::backends::{open_meta, open_store};
use crate::config::{FsckArgs, GcArgs, LdapSyncArgs, MigrateArgs, ServeArgs};
use std::process::ExitCode;

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

pub async fn ldap_sync_command(args: &LdapSyncArgs) -> anyhow::Result<ExitCode> {
    init_logs(&args.serve);
    let cfg = crate::ldap::client::LdapConfig::from_args(&args.serve.ldap)?
        .ok_or_else(|| anyhow::anyhow!("ldap-sync needs --ldap-url (and the other --ldap-* flags `serve` gets)"))?;
    let dir = crate::ldap::LdapDirectory::new(cfg);
    let meta = open_meta(&args.serve).await?;
    let opts = crate::ldap::sync::SyncOptions { default_quota: args.serve.default_quota(), dry_run: args.dry_run };
    let report = crate::ldap::sync::run(&meta, &dir, &opts).await;
    meta.close().await;
    print_report(args.json, &report?, crate::ldap::sync::human);
    Ok(ExitCode::SUCCESS)
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
