//! The write-back journal round-tripped: records written, the mount killed, and what the next
//! one recovers: records lagging behind their staging files (grown or shrunk since), staging
//! files never journaled, half-written records, records of another format, and commits that
//! were interrupted before or after the gateway took them.

use std::fs;
use std::path::Path;

use anyhow::{Context, ensure};
use nimbus_proto::wire::BlockRef;

use super::*;
use crate::core::dirty::{MoveLog, RECORD_VERSION, Record, Staged};
use crate::core::fake::{Call, Fault, Item};

fn record(path: &str, base: Option<(i64, Vec<BlockRef>)>, size: u64) -> Record {
    let (base_version, base_blocks) = base.unzip();
    Record {
        format: RECORD_VERSION,
        path: path.into(),
        base_version,
        base_blocks: base_blocks.unwrap_or_default(),
        block_size: BS,
        size,
        present: Default::default(),
        dirty: Default::default(),
        changed: true,
        moves_seen: 0,
    }
}

/// The staging directory's folder-move log (none yet in most tests).
fn moves(dir: &Path) -> std::sync::Arc<MoveLog> {
    MoveLog::open(dir)
}

fn files(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut v: Vec<String> =
        fs::read_dir(dir)?.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    Ok(v)
}

fn recover_one(dir: &Path) -> anyhow::Result<Staged> {
    let mut all = Staged::recover(dir, &moves(dir));
    ensure!(all.len() == 1, "recovered {} records", all.len());
    all.pop().context("one record")
}

#[test]
fn a_record_round_trips() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let base = vec![BlockRef { hash: "ab".repeat(32), size: BS }, BlockRef { hash: "cd".repeat(32), size: 4 }];
    let mut st =
        Staged::create(dir.path(), record("/Docs/a.txt", Some((7, base.clone())), BS + 4), &moves(dir.path()))?;
    st.mark_present(0);
    st.write(2, b"xyz")?;
    st.persist(false)?;
    let want = st.rec.clone();
    drop(st);

    let st = recover_one(dir.path())?;
    ensure!(st.rec.path == "/Docs/a.txt" && st.rec.base_version == Some(7), "{:?}", st.rec);
    ensure!(st.rec.base_blocks == base && st.rec.size == want.size, "{:?}", st.rec);
    ensure!(st.rec.dirty == want.dirty && st.rec.present == want.present, "{:?}", st.rec);
    ensure!(st.read_at(2, 3)? == b"xyz", "staged bytes kept");
    Ok(())
}

#[test]
fn a_record_lagging_a_grown_staging_file_takes_its_size() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut st = Staged::create(dir.path(), record("/a", None, 0), &moves(dir.path()))?;
    st.write(0, &[1u8; 10])?;
    st.persist(false)?;
    // Written after the last record: rewrites of a dirty block and growth within it journal
    // nothing, and a killed mount may not have rewritten the record for a new block yet.
    st.write(10, &[2u8; 30])?;
    drop(st);
    let st = recover_one(dir.path())?;
    ensure!(st.rec.size == 40, "size from the staging file: {:?}", st.rec);
    ensure!(st.rec.dirty.iter().copied().collect::<Vec<_>>() == vec![0, 1, 2], "{:?}", st.rec.dirty);
    ensure!(st.rec.changed && st.has_changes());
    let mut want = vec![1u8; 10];
    want.extend([2u8; 30]);
    ensure!(st.read_at(0, 40)? == want);
    Ok(())
}

#[test]
fn a_record_lagging_a_shrunk_staging_file_takes_its_size() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut st = Staged::create(dir.path(), record("/a", None, 0), &moves(dir.path()))?;
    st.write(0, &[3u8; 3 * BS as usize])?;
    st.persist(false)?;
    // Shrinking never grows the dirty set: the record is not rewritten.
    ensure!(!st.resize(BS + 5)?, "a shrink journals nothing");
    drop(st);
    let st = recover_one(dir.path())?;
    ensure!(st.rec.size == BS + 5, "{:?}", st.rec);
    ensure!(st.rec.dirty.contains(&1), "the new edge block is dirty: {:?}", st.rec.dirty);
    ensure!(st.read_at(0, (BS + 5) as usize)? == vec![3u8; (BS + 5) as usize]);
    Ok(())
}

#[test]
fn leftovers_are_cleaned_and_unreadable_records_kept_aside() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    // A staging file whose record was never written (nothing to recover), a half-written
    // record rewrite, a damaged record and one of a future format.
    fs::write(d.join("aaaa.data"), b"never journaled")?;
    fs::write(d.join("bbbb.tmp"), b"{\"format\":")?;
    fs::write(d.join("cccc.json"), b"{not json")?;
    fs::write(d.join("cccc.data"), b"kept")?;
    let mut future = serde_json::to_value(record("/f", None, 4))?;
    future["format"] = (RECORD_VERSION + 1).into();
    fs::write(d.join("dddd.json"), serde_json::to_vec(&future)?)?;
    fs::write(d.join("dddd.data"), b"kept")?;
    let mut good = Staged::create(d, record("/good", None, 0), &moves(d))?;
    good.write(0, b"ok")?;
    good.persist(false)?;
    let good_id = good.id.clone();
    drop(good);

    let got = Staged::recover(d, &moves(d));
    ensure!(got.len() == 1 && got[0].id == good_id, "only the good record comes back");
    let left = files(d)?;
    ensure!(!left.iter().any(|f| f.starts_with("aaaa") || f.starts_with("bbbb")), "{left:?}");
    ensure!(left.contains(&"cccc.broken".into()) && left.contains(&"dddd.broken".into()), "{left:?}");
    Ok(())
}

#[test]
fn discarded_staging_leaves_nothing_and_is_never_rewritten() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut st = Staged::create(dir.path(), record("/a", None, 0), &moves(dir.path()))?;
    st.write(0, b"abc")?;
    st.persist(false)?;
    st.discard();
    st.persist(true)?;
    ensure!(files(dir.path())?.is_empty(), "{:?}", files(dir.path())?);
    ensure!(Staged::recover(dir.path(), &moves(dir.path())).is_empty());
    Ok(())
}

/// The mount killed with writes journaled: the next mount uploads them, new files and edits
/// of existing ones alike, against the version each edit started from.
#[tokio::test]
async fn a_killed_mounts_writes_go_up_at_the_next_mount() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "old.txt", b"0123456789abcdef0123").await?;
    rig.fake.set_unreachable(true);
    write_file(&rig.vfs, ROOT, "new.txt", b"written offline").await?;
    let (fh, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.write(fh, 18, b"XYZ").await?;
    // Killed while the file is still open.
    rig.fake.set_unreachable(false);
    rig.remount().await;
    ensure!(rig.vfs.pending_count().await == 2, "two records");
    ensure!(rig.vfs.upload_pending().await? == 2);
    let tree = rig.fake.tree();
    ensure!(tree.get("/new.txt") == Some(&Item::File(b"written offline".to_vec())), "{tree:?}");
    ensure!(tree.get("/old.txt") == Some(&Item::File(b"0123456789abcdef01XYZ".to_vec())), "{tree:?}");
    ensure!(tree.len() == 2, "{tree:?}");
    ensure!(rig.vfs.pending_count().await == 0);
    Ok(())
}

/// A commit interrupted before the gateway took it is simply made again; one the gateway took
/// whose answer was lost is recognised (see `faults`); an owner file's record never goes up.
#[tokio::test]
async fn interrupted_commits_are_made_once() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    rig.fake.fail_next(Call::Commit, Fault::Unreachable);
    write_file(&rig.vfs, ROOT, "a.txt", b"first try").await?;
    write_file(&rig.vfs, ROOT, "~$a.txt", b"owner").await?;
    rig.fake.fail_next(Call::Commit, Fault::AnswerLost);
    write_file(&rig.vfs, ROOT, "b.txt", b"taken").await?;
    rig.remount().await;
    rig.vfs.upload_pending().await?;
    let tree = rig.fake.tree();
    ensure!(tree.get("/a.txt") == Some(&Item::File(b"first try".to_vec())), "{tree:?}");
    ensure!(tree.get("/b.txt") == Some(&Item::File(b"taken".to_vec())), "{tree:?}");
    ensure!(tree.len() == 2, "{tree:?}");
    ensure!(rig.fake.calls(Call::Commit) == 4, "commits: {}", rig.fake.calls(Call::Commit));
    ensure!(files(&rig.dir.path().join("staging"))?.is_empty(), "the journal is empty");
    Ok(())
}

/// A file deleted while still open, then the mount killed: the delete was acknowledged, so the
/// next mount must not bring the file back from its journal record (as a new file or as a
/// conflict copy).
#[tokio::test]
async fn a_file_deleted_while_open_stays_deleted_after_a_crash() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "old.txt", b"v1").await?;
    let (old_fh, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.write(old_fh, 0, b"v2").await?;
    let (_, new_fh) = rig.vfs.create(ROOT, "new.txt", WRITE, false).await?;
    rig.vfs.write(new_fh, 0, b"never closed").await?;
    rig.vfs.unlink(ROOT, "old.txt").await?;
    rig.vfs.unlink(ROOT, "new.txt").await?;
    // Still readable and writable through the open handles.
    rig.vfs.write(old_fh, 2, b"+").await?;
    ensure!(read_fh(&rig.vfs, old_fh).await? == b"v2+");
    rig.remount().await;
    rig.vfs.upload_pending().await?;
    let tree = rig.fake.tree();
    ensure!(tree.is_empty(), "deleted files came back: {tree:?}");
    ensure!(files(&rig.dir.path().join("staging"))?.is_empty(), "the journal is empty");
    Ok(())
}

#[test]
fn folder_moves_reach_the_records_below_them_at_recovery() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    let log = moves(d);
    let mut f = Staged::create(d, record("/A/f", None, 0), &log)?;
    f.write(0, b"f")?;
    f.persist(false)?;
    log.append("/A", "/B")?;
    // Made after the move, in a new folder called A: the move is not its.
    let mut g = Staged::create(d, record("/A/g", None, 0), &log)?;
    g.write(0, b"g")?;
    g.persist(false)?;
    // Case-insensitive like the gateway; a name that only starts like the folder is not in it.
    log.append("/b", "/C")?;
    let mut h = Staged::create(d, record("/Bee/h", None, 0), &log)?;
    h.write(0, b"h")?;
    h.persist(false)?;
    ensure!(fs::read_to_string(d.join(format!("{}.json", f.id)))?.contains("\"/A/f\""), "f's record was not rewritten");
    drop((f, g, h));

    let log = moves(d);
    let mut got: Vec<String> = Staged::recover(d, &log).into_iter().map(|s| s.rec.path).collect();
    got.sort();
    ensure!(got == ["/A/g", "/Bee/h", "/C/f"], "{got:?}");
    // Written again, a record names its path as of now and the moves it reflects.
    let mut all = Staged::recover(d, &log);
    for st in &mut all {
        st.rec.changed = true;
        st.persist(true)?;
    }
    let mut again: Vec<String> = Staged::recover(d, &moves(d)).into_iter().map(|s| s.rec.path).collect();
    again.sort();
    ensure!(again == got, "{again:?}");
    // No record left: the next mount starts a new log.
    for mut st in Staged::recover(d, &moves(d)) {
        st.discard();
    }
    ensure!(Staged::recover(d, &moves(d)).is_empty());
    ensure!(files(d)?.is_empty(), "{:?}", files(d)?);
    Ok(())
}
