//! `nimbus-gateway fsck`: checks that every registered block is in the store with the size
//! and BLAKE3 hash the registry says, that every block a version references is registered,
//! and (full runs) that every block object in the store is registered.
//!
//! `--repair` fixes what can be fixed without the lost bytes, and never deletes anything that
//! is merely unreadable or that an upload may still need:
//! - a block the store lost or damaged is marked unstored (its row stays, and so does a damaged
//!   object): the next client that still has the data is told "missing" and uploads it, which
//!   writes the object again, and the files heal; the affected files are listed;
//! - a block referenced by a version, or an object nobody registered, found intact in the store
//!   is registered again (a stray one is then reclaimed by GC after its grace period);
//! - a damaged object with no registry row at all is deleted only once it is older than the
//!   GC grace period (`--gc-grace`): younger, it may belong to an upload that has not
//!   registered it yet;
//! - anything the store could not read (an error, a timeout) is reported `unreadable` and left;
//! - a block's outboard (`<hash>.tags`, its pieces' tags for ranged reads) belongs to the
//!   block's registry row or object; one with neither is `stray_outboard`, deleted once older
//!   than the grace period (it is derived data: a read of its block, if that ever comes back,
//!   writes it again).
//!
//! Every change is made under the space's lock (the one uploads, commits and garbage
//! collection take) after checking the store again, so a block that an upload or GC changed
//! since it was first read is left as it now is.

use std::collections::HashSet;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use serde::Serialize;

use crate::blocks::{DynStore, ObjectKind, StoreError, StoredBlock};
use crate::meta::{BlockRow, Meta, MetaResult, SpaceId, now_ms};

/// Blocks read and hashed at a time.
const PARALLEL: usize = 8;

#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// `missing`, `corrupt`, `size_mismatch`, `unregistered`, `orphan`, `stray_outboard`,
    /// `unreadable`.
    pub kind: &'static str,
    pub space: i64,
    pub hash: String,
    pub detail: String,
    /// Files with a version that uses this block.
    pub files: Vec<String>,
    pub repaired: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct FsckReport {
    pub blocks_checked: u64,
    pub bytes_checked: u64,
    /// `full` or `sample`.
    pub mode: &'static str,
    pub problems: Vec<Problem>,
    /// Problems still there after this run (`--repair` fixes some).
    pub problems_remaining: u64,
    /// Files that reference a block whose data is gone: they read with an error until a
    /// client uploads the block again.
    pub damaged_files: Vec<String>,
}

pub async fn run(
    meta: &Meta,
    store: &DynStore,
    sample: Option<u64>,
    repair: bool,
    grace: Duration,
) -> MetaResult<FsckReport> {
    let mut report = FsckReport { mode: if sample.is_some() { "sample" } else { "full" }, ..Default::default() };
    let rows = meta.registered_blocks(sample.map(|n| n.min(i64::MAX as u64) as i64)).await?;
    let checked: Vec<(BlockRow, Option<Verdict>)> = stream::iter(rows)
        .map(|b| async move {
            let verdict = check_block(store, &b).await;
            (b, verdict)
        })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    // Blocks marked unstored below are not reported a second time as unregistered.
    let mut marked: HashSet<(i64, String)> = HashSet::new();
    for (b, verdict) in checked {
        report.blocks_checked += 1;
        report.bytes_checked += b.size.max(0) as u64;
        let Some(Verdict { kind, detail }) = verdict else { continue };
        let files = meta.files_using(b.space(), &b.hash).await?;
        let mut repaired = false;
        if repair && kind != "unreadable" {
            // Only if the store still says so, now, under the space lock.
            let still_bad = || async { check_block(store, &b).await.is_some_and(|v| v.kind != "unreadable") };
            if meta.mark_block_damaged(b.space(), &b.hash, still_bad).await? {
                marked.insert((b.space_id, b.hash.clone()));
                // Unreferenced, the block is simply gone; referenced, its files stay damaged
                // until a client uploads the block again.
                repaired = files.is_empty();
            }
        }
        report.problems.push(Problem { kind, space: b.space_id, hash: b.hash, detail, files, repaired });
    }

    for b in meta.unregistered_references().await? {
        if marked.contains(&(b.space_id, b.hash.clone())) {
            continue;
        }
        let files = meta.files_using(b.space(), &b.hash).await?;
        let verdict = check_block(store, &b).await;
        let mut repaired = false;
        if repair && verdict.is_none() {
            let intact = || async { check_block(store, &b).await.is_none() };
            repaired = meta.register_found(b.space(), &b.hash, b.size, intact).await?;
        }
        let detail = match &verdict {
            None => "referenced by a version but not registered; the store has it intact".to_string(),
            Some(v) => format!("referenced by a version but not registered, and {}", v.detail),
        };
        report.problems.push(Problem {
            kind: "unregistered",
            space: b.space_id,
            hash: b.hash,
            detail,
            files,
            repaired,
        });
    }

    if sample.is_none() {
        orphans(meta, store, repair, grace, &mut report).await?;
    }

    report.problems_remaining = report.problems.iter().filter(|p| !p.repaired).count() as u64;
    let mut damaged: Vec<String> = report
        .problems
        .iter()
        .filter(|p| !p.repaired && !matches!(p.kind, "orphan" | "stray_outboard"))
        .flat_map(|p| p.files.iter().map(|f| format!("space {}: {f}", p.space)))
        .collect();
    damaged.sort();
    damaged.dedup();
    report.damaged_files = damaged;
    metrics::gauge!("nimbus_fsck_problems").set(report.problems_remaining as f64);
    Ok(report)
}

/// Store objects with no registry row.
async fn orphans(
    meta: &Meta,
    store: &DynStore,
    repair: bool,
    grace: Duration,
    report: &mut FsckReport,
) -> MetaResult<()> {
    let listed = match store.list_blocks().await {
        Ok(l) => l,
        Err(e) => {
            report.problems.push(Problem {
                kind: "unreadable",
                space: 0,
                hash: String::new(),
                detail: format!("cannot list the store: {e}"),
                files: Vec::new(),
                repaired: false,
            });
            return Ok(());
        }
    };
    // Every row, stored or not: an unstored row is an upload in progress (its object may be
    // written already) or a damaged block waiting for its bytes.
    let known: HashSet<(i64, String)> = meta.block_rows().await?.into_iter().map(|b| (b.space_id, b.hash)).collect();
    let young_after = now_ms().saturating_sub(i64::try_from(grace.as_millis()).unwrap_or(i64::MAX));
    let (outboards, listed): (Vec<StoredBlock>, Vec<StoredBlock>) =
        listed.into_iter().partition(|o| o.kind == ObjectKind::Outboard);
    let objects: HashSet<(i64, String)> = listed.iter().map(|o| (o.space, o.hash.clone())).collect();
    stray_outboards(store, outboards, |k| known.contains(k) || objects.contains(k), repair, young_after, report).await;
    for o in listed {
        if known.contains(&(o.space, o.hash.clone())) {
            continue;
        }
        // The object's own length counts (it may have been rewritten since the listing).
        let verdict = check_object(store, o.space, &o.hash).await;
        // No modification time known: treat it as young (never delete on a guess).
        let young = o.modified_ms.is_none_or(|t| t >= young_after);
        let mut repaired = false;
        let mut detail = match &verdict {
            Ok(len) => format!("{len} byte(s) in the store, not registered"),
            Err(v) => format!("not registered, and {}", v.detail),
        };
        match &verdict {
            // Listed, then gone: garbage collection (or a deletion) got there first.
            Err(v) if v.kind == "missing" => continue,
            Ok(len) if repair => {
                let intact = || async { check_object(store, o.space, &o.hash).await.is_ok() };
                repaired = meta.register_found(SpaceId::authenticated(o.space), &o.hash, *len as i64, intact).await?;
            }
            Err(v) if repair && v.kind == "corrupt" && young => {
                detail.push_str("; younger than the GC grace period (an upload may still register it): left alone");
            }
            Err(v) if repair && v.kind == "corrupt" => {
                let remove = || async {
                    if !check_object(store, o.space, &o.hash).await.is_err_and(|v| v.kind == "corrupt") {
                        return false;
                    }
                    match store.delete_blocks(o.space, std::slice::from_ref(&o.hash)).await {
                        Ok(()) => true,
                        Err(e) => {
                            tracing::warn!(hash = %o.hash, error = %e, "cannot delete a damaged stray object");
                            false
                        }
                    }
                };
                repaired = meta.remove_unregistered_object(SpaceId::authenticated(o.space), &o.hash, remove).await?;
            }
            _ => {}
        }
        report.problems.push(Problem {
            kind: "orphan",
            space: o.space,
            hash: o.hash,
            detail,
            files: Vec::new(),
            repaired,
        });
    }
    Ok(())
}

/// Outboards that belong to no block (no registry row, no object): reported, and with
/// `repair` deleted once older than the grace period (younger, their upload may still be
/// writing the block).
async fn stray_outboards(
    store: &DynStore,
    outboards: Vec<StoredBlock>,
    belongs: impl Fn(&(i64, String)) -> bool,
    repair: bool,
    young_after: i64,
    report: &mut FsckReport,
) {
    for o in outboards {
        if belongs(&(o.space, o.hash.clone())) {
            continue;
        }
        let young = o.modified_ms.is_none_or(|t| t >= young_after);
        let mut detail =
            format!("an outboard ({} byte(s) of piece tags) whose block is neither registered nor stored", o.size);
        let mut repaired = false;
        if repair && young {
            detail.push_str("; younger than the GC grace period (its block may still be on its way): left alone");
        } else if repair {
            match store.delete_outboards(o.space, std::slice::from_ref(&o.hash)).await {
                Ok(()) => repaired = true,
                Err(e) => detail.push_str(&format!("; cannot delete it: {e}")),
            }
        }
        report.problems.push(Problem {
            kind: "stray_outboard",
            space: o.space,
            hash: o.hash,
            detail,
            files: Vec::new(),
            repaired,
        });
    }
}

/// What is wrong with a block in the store.
struct Verdict {
    /// `missing`, `corrupt`, `size_mismatch` or `unreadable`.
    kind: &'static str,
    detail: String,
}

/// None if the store holds the block intact with the registered size.
async fn check_block(store: &DynStore, b: &BlockRow) -> Option<Verdict> {
    match check_object(store, b.space_id, &b.hash).await {
        Ok(len) if len as i64 == b.size => None,
        Ok(len) => Some(Verdict {
            kind: "size_mismatch",
            detail: format!("the store has {len} byte(s), the registry says {}", b.size),
        }),
        Err(v) => Some(v),
    }
}

/// The length of the object if it holds the bytes its hash names. A read that fails for any
/// other reason than "no such object" is `unreadable`: not evidence that anything is lost.
async fn check_object(store: &DynStore, space: i64, hash: &str) -> Result<u64, Verdict> {
    match store.get(space, hash).await {
        Ok(data) if blake3::hash(&data).to_hex().as_str() == hash => Ok(data.len() as u64),
        Ok(_) => Err(Verdict { kind: "corrupt", detail: "the stored bytes do not hash to the block's name".into() }),
        Err(StoreError::NotFound(_)) => Err(Verdict { kind: "missing", detail: "the store does not have it".into() }),
        Err(e) => Err(Verdict { kind: "unreadable", detail: format!("cannot read it: {e}") }),
    }
}

pub fn human(r: &FsckReport) -> String {
    let mut s = format!(
        "checked {} block(s), {} byte(s) ({}); {} problem(s), {} remaining",
        r.blocks_checked,
        r.bytes_checked,
        r.mode,
        r.problems.len(),
        r.problems_remaining
    );
    for p in &r.problems {
        let state = if p.repaired { "repaired" } else { "not repaired" };
        s.push_str(&format!("\n{} space {} block {}: {} [{state}]", p.kind, p.space, p.hash, p.detail));
        for f in &p.files {
            s.push_str(&format!("\n    used by {f}"));
        }
    }
    for f in &r.damaged_files {
        s.push_str(&format!("\ndamaged: {f}"));
    }
    s
}
