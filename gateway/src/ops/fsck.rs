//! `nimbus-gateway fsck`: checks that every registered block is in the store with the size
//! and BLAKE3 hash the registry says, that every block a version references is registered,
//! and (full runs) that every block object in the store is registered.
//!
//! `--repair` fixes what can be fixed without the lost bytes: a missing or corrupt block's
//! row is dropped (and a corrupt object deleted), so the next client that still has the data
//! is told "missing", uploads it and the file heals; the affected files are listed. An
//! unregistered block found intact in the store, or a stray object, is registered again
//! (a stray one is then reclaimed by GC after its grace period).

use std::collections::HashSet;

use futures::stream::{self, StreamExt};
use serde::Serialize;

use crate::blocks::{DynStore, StoreError};
use crate::meta::{BlockEntry, BlockRow, Meta, MetaResult};

/// Blocks read and hashed at a time.
const PARALLEL: usize = 8;

#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// `missing`, `corrupt`, `size_mismatch`, `unregistered`, `orphan`, `unreadable`.
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

pub async fn run(meta: &Meta, store: &DynStore, sample: Option<u64>, repair: bool) -> MetaResult<FsckReport> {
    let mut report = FsckReport { mode: if sample.is_some() { "sample" } else { "full" }, ..Default::default() };
    let rows = meta.registered_blocks(sample.map(|n| n.min(i64::MAX as u64) as i64)).await?;
    let checked: Vec<(BlockRow, Option<(&'static str, String)>)> = stream::iter(rows)
        .map(|b| async move {
            let verdict = check_block(store, &b).await;
            (b, verdict)
        })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    for (b, verdict) in checked {
        report.blocks_checked += 1;
        report.bytes_checked += b.size.max(0) as u64;
        let Some((kind, detail)) = verdict else { continue };
        let files = meta.files_using(b.space_id, &b.hash).await?;
        let mut repaired = false;
        if repair && kind != "unreadable" {
            if kind == "corrupt"
                && let Err(e) = store.delete_blocks(b.space_id, std::slice::from_ref(&b.hash)).await
            {
                tracing::warn!(hash = %b.hash, error = %e, "cannot delete a bad block object");
            }
            meta.drop_block_rows(b.space_id, std::slice::from_ref(&b.hash)).await?;
            // Unreferenced, the block is simply gone; referenced, its files stay damaged.
            repaired = files.is_empty();
        }
        report.problems.push(Problem { kind, space: b.space_id, hash: b.hash, detail, files, repaired });
    }

    for b in meta.unregistered_references().await? {
        let files = meta.files_using(b.space_id, &b.hash).await?;
        let verdict = check_block(store, &b).await;
        let mut repaired = false;
        if repair && verdict.is_none() {
            meta.register_found(b.space_id, &[BlockEntry { hash: b.hash.clone(), size: b.size }]).await?;
            repaired = true;
        }
        let detail = match &verdict {
            None => "referenced by a version but not registered; the store has it intact".to_string(),
            Some((_, d)) => format!("referenced by a version but not registered, and {d}"),
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
        orphans(meta, store, repair, &mut report).await?;
    }

    report.problems_remaining = report.problems.iter().filter(|p| !p.repaired).count() as u64;
    let mut damaged: Vec<String> = report
        .problems
        .iter()
        .filter(|p| !p.repaired && p.kind != "orphan")
        .flat_map(|p| p.files.iter().map(|f| format!("space {}: {f}", p.space)))
        .collect();
    damaged.sort();
    damaged.dedup();
    report.damaged_files = damaged;
    metrics::gauge!("nimbus_fsck_problems").set(report.problems_remaining as f64);
    Ok(report)
}

/// Store objects with no registry row.
async fn orphans(meta: &Meta, store: &DynStore, repair: bool, report: &mut FsckReport) -> MetaResult<()> {
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
    // The registry as of now (after the repairs above).
    let known: HashSet<(i64, String)> =
        meta.registered_blocks(None).await?.into_iter().map(|b| (b.space_id, b.hash)).collect();
    for o in listed {
        if known.contains(&(o.space, o.hash.clone())) {
            continue;
        }
        let row = BlockRow { space_id: o.space, hash: o.hash.clone(), size: o.size as i64 };
        let verdict = check_block(store, &row).await;
        let mut repaired = false;
        if repair {
            if verdict.is_none() {
                meta.register_found(o.space, &[BlockEntry { hash: o.hash.clone(), size: o.size as i64 }]).await?;
            } else {
                let _ = store.delete_blocks(o.space, std::slice::from_ref(&o.hash)).await;
            }
            repaired = true;
        }
        let detail = match verdict {
            None => format!("{} byte(s) in the store, not registered", o.size),
            Some((_, d)) => format!("not registered, and {d}"),
        };
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

/// None if the store holds the block intact with the registered size.
async fn check_block(store: &DynStore, b: &BlockRow) -> Option<(&'static str, String)> {
    match store.get(b.space_id, &b.hash).await {
        Ok(data) => {
            if blake3::hash(&data).to_hex().as_str() != b.hash {
                Some(("corrupt", "the stored bytes do not hash to the block's name".into()))
            } else if data.len() as i64 != b.size {
                Some(("size_mismatch", format!("the store has {} byte(s), the registry says {}", data.len(), b.size)))
            } else {
                None
            }
        }
        Err(StoreError::NotFound(_)) => Some(("missing", "the store does not have it".into())),
        Err(e) => Some(("unreadable", format!("cannot read it: {e}"))),
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
