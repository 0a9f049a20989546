//! `nimbus-gateway gc` (and the gateway's maintenance worker): applies the retention policy
//! (older versions, trash), then removes blocks no version references (purged files, expired
//! versions, uploads never committed) once nobody touched them for the grace period.
//! Safe to run while gateways serve: see [`crate::meta`]'s `gc` module for why.

use std::time::Duration;

use serde::Serialize;

use crate::blocks::DynStore;
use crate::meta::{Meta, MetaResult, Retention, now_ms};

/// Candidates fetched (and rows deleted per transaction) at a time.
const BATCH: i64 = 500;

#[derive(Debug, Default, Serialize)]
pub struct GcReport {
    /// Older versions and trash items removed by the retention policy, and the bytes they held.
    pub versions_expired: u64,
    pub trash_expired: u64,
    pub bytes_expired: u64,
    /// Spaces whose usage counts were recounted and found different (repaired).
    pub usage_repaired: u64,
    /// Blocks removed from the registry and the store.
    pub blocks_freed: u64,
    pub bytes_freed: u64,
    /// The grace period used, in seconds.
    pub grace_secs: u64,
    /// Unfinished S3 multipart uploads aborted for being older than the upload expiry.
    pub uploads_expired: u64,
    /// Blocks whose rows went but whose objects the store refused to delete (stray objects
    /// that fsck reports and re-registers; a later run removes them).
    pub object_delete_errors: u64,
    pub errors: Vec<String>,
}

/// What a run does besides collecting blocks.
#[derive(Debug, Clone)]
pub struct GcOptions {
    pub grace: Duration,
    pub upload_expiry: Duration,
    pub retention: Retention,
    /// Recount every space's usage (repairing drift); otherwise only spaces never counted.
    pub recount_all: bool,
}

pub async fn run(meta: &Meta, store: &DynStore, opts: &GcOptions) -> MetaResult<GcReport> {
    let ago = |d: Duration| now_ms().saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut report = GcReport { grace_secs: opts.grace.as_secs(), ..Default::default() };
    let recount = if opts.recount_all { meta.space_ids().await? } else { meta.uncounted_spaces().await? };
    for space in recount {
        let (before, after) = meta.recount_usage(space).await?;
        if before != after {
            report.usage_repaired += 1;
        }
    }
    // Retention first: what it expires becomes garbage for the collection below (once past
    // the grace period, as any other unreferenced block).
    for space in meta.space_ids().await? {
        let e = meta.apply_retention(space, &opts.retention).await?;
        report.versions_expired += e.versions;
        report.trash_expired += e.trash_items;
        report.bytes_expired += e.bytes;
    }
    let (grace, upload_expiry) = (opts.grace, opts.upload_expiry);
    let cutoff = ago(grace);
    // Abandoned multipart uploads first: their parts then count as unreferenced below.
    report.uploads_expired = meta.expire_uploads(ago(upload_expiry)).await?;
    // A candidate that is still garbage is deleted; one that a commit or touch saved stays
    // and would be listed again, so stop once a batch frees nothing.
    loop {
        let candidates = meta.gc_candidates(cutoff, BATCH).await?;
        if candidates.is_empty() {
            break;
        }
        let mut freed_this_batch = 0u64;
        let mut i = 0;
        while i < candidates.len() {
            let space = candidates[i].space();
            let j = candidates[i..].iter().position(|b| b.space() != space).map_or(candidates.len(), |n| i + n);
            let hashes: Vec<String> = candidates[i..j].iter().map(|b| b.hash.clone()).collect();
            let (gone, failed) = meta
                .gc_remove(space, &hashes, cutoff, |hs| async move {
                    store.delete_blocks(space.get(), &hs).await.map_err(|e| e.to_string())
                })
                .await?;
            if let Some(e) = failed {
                report.object_delete_errors += gone.len() as u64;
                report.errors.push(format!("space {space}: {e}"));
            }
            freed_this_batch += gone.len() as u64;
            report.blocks_freed += gone.len() as u64;
            report.bytes_freed += gone.iter().map(|b| b.size.max(0) as u64).sum::<u64>();
            i = j;
        }
        if freed_this_batch == 0 || (candidates.len() as i64) < BATCH {
            break;
        }
    }
    metrics::counter!("nimbus_gc_blocks_freed_total").increment(report.blocks_freed);
    tracing::info!(
        versions_expired = report.versions_expired,
        trash_expired = report.trash_expired,
        blocks = report.blocks_freed,
        bytes = report.bytes_freed,
        "garbage collection done"
    );
    Ok(report)
}

pub fn human(r: &GcReport) -> String {
    let mut s = format!(
        "expired {} older version(s) and {} trash item(s), {} byte(s); freed {} block(s), {} byte(s) (grace period {} s)",
        r.versions_expired, r.trash_expired, r.bytes_expired, r.blocks_freed, r.bytes_freed, r.grace_secs
    );
    if r.usage_repaired > 0 {
        s.push_str(&format!("; repaired the usage counts of {} space(s)", r.usage_repaired));
    }
    if r.uploads_expired > 0 {
        s.push_str(&format!("; aborted {} abandoned S3 multipart upload(s)", r.uploads_expired));
    }
    for e in &r.errors {
        s.push_str(&format!("\nerror: {e}"));
    }
    s
}
