//! The gateway's failures, one at a time, and what the core makes of each: unreachable, slow,
//! 409, 423, 413, 5xx, an answer lost after the server acted, and another device's changes.

use std::time::Duration;

use anyhow::Context;

use super::*;
use crate::core::VfsError;
use crate::core::fake::{Call, Fault, Item};

fn file(body: &[u8]) -> Item {
    Item::File(body.to_vec())
}

#[tokio::test]
async fn writes_reach_the_gateway_and_read_back_through_another_core() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let body: Vec<u8> = (0..100u8).collect();
    let d = rig.vfs.mkdir(ROOT, "Docs").await?.ino;
    write_file(&rig.vfs, d, "a.bin", &body).await?;
    assert_eq!(rig.fake.tree().get("/Docs/a.bin"), Some(&file(&body)));
    // Another core with an empty cache reads it from the gateway, in any spelling.
    let other = tempfile::tempdir()?;
    let vfs2 = core_on(&rig.fake, other.path(), false);
    let ino = lookup_path(&vfs2, "/docs/A.BIN").await?;
    assert_eq!(read_all(&vfs2, ino).await?, body);
    assert_eq!(names(&vfs2, ROOT).await?, vec!["Docs"]);
    Ok(())
}

#[tokio::test]
async fn unreachable_gateway_keeps_writes_in_the_journal() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "f.txt", b"first version").await?;
    assert_eq!(read_all(&rig.vfs, ino).await?, b"first version");

    rig.fake.set_unreachable(true);
    // Cached content and listings stay readable.
    assert_eq!(read_all(&rig.vfs, ino).await?, b"first version");
    assert_eq!(names(&rig.vfs, ROOT).await?, vec!["f.txt"]);
    // A write is taken; close succeeds and keeps it; fsync says it is not on the server.
    let (fh, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.write(fh, 0, b"SECOND").await?;
    assert!(matches!(rig.vfs.fsync(fh).await, Err(VfsError::Offline)));
    rig.vfs.release(fh).await?;
    assert_eq!(rig.vfs.connectivity(), crate::core::Connectivity::Offline);
    assert_eq!(rig.vfs.pending_count().await, 1);
    assert!(matches!(rig.vfs.mkdir(ROOT, "new").await, Err(VfsError::Offline)));
    assert_eq!(read_all(&rig.vfs, ino).await?, b"SECONDversion");

    rig.fake.set_unreachable(false);
    assert!(rig.vfs.probe().await);
    rig.vfs.upload_pending().await?;
    assert_eq!(rig.vfs.pending_count().await, 0);
    assert_eq!(rig.fake.read("/f.txt")?, b"SECONDversion");
    Ok(())
}

#[tokio::test]
async fn server_errors_count_as_unreachable() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    rig.fake.fail_next(Call::Commit, Fault::Server);
    // The close keeps the write (5xx is the gateway being unwell, not a refusal).
    write_file(&rig.vfs, ROOT, "f.txt", b"data").await?;
    assert_eq!(rig.vfs.pending_count().await, 1);
    assert!(rig.vfs.activity.snapshot().errors.is_empty(), "a 5xx is not reported as a refusal");
    rig.vfs.upload_pending().await?;
    assert_eq!(rig.fake.read("/f.txt")?, b"data");
    Ok(())
}

#[tokio::test]
async fn quota_refusal_is_reported_and_kept_for_a_retry() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let (_, fh) = rig.vfs.create(ROOT, "big.bin", WRITE, false).await?;
    rig.vfs.write(fh, 0, &[7u8; 40]).await?;
    // Refused at fsync and again at close.
    rig.fake.fail_next(Call::PutBlock, Fault::Quota);
    rig.fake.fail_next(Call::PutBlock, Fault::Quota);
    assert!(matches!(rig.vfs.fsync(fh).await, Err(VfsError::Quota)));
    let snap = rig.vfs.activity.snapshot();
    assert!(snap.errors.iter().any(|e| e.contains("/big.bin") && e.contains("quota")), "{snap:?}");
    rig.vfs.release(fh).await?;
    assert!(!rig.fake.tree().contains_key("/big.bin"), "nothing committed");
    // Room was made: the retry goes through.
    rig.vfs.upload_pending().await?;
    assert_eq!(rig.fake.read("/big.bin")?, vec![7u8; 40]);
    Ok(())
}

#[tokio::test]
async fn locked_file_refuses_and_keeps_the_write() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "shared.docx", b"v1").await?;
    let (fh, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.write(fh, 0, b"v2").await?;
    // Refused at fsync and again at close.
    rig.fake.fail_next(Call::Commit, Fault::Locked);
    rig.fake.fail_next(Call::Commit, Fault::Locked);
    let err = rig.vfs.fsync(fh).await.err().context("fsync went through")?;
    assert!(matches!(&err, VfsError::Locked), "{err:?}");
    rig.vfs.release(fh).await?;
    assert_eq!(rig.fake.read("/shared.docx")?, b"v1", "the lock holder's file is untouched");
    assert_eq!(rig.vfs.pending_count().await, 1);
    // Unlocked: the retry commits.
    rig.vfs.upload_pending().await?;
    assert_eq!(rig.fake.read("/shared.docx")?, b"v2");
    Ok(())
}

#[tokio::test]
async fn another_devices_save_makes_a_conflict_copy() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "notes.txt", b"base").await?;
    let (fh, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.write(fh, 0, b"MINE").await?;
    rig.fake.other_write("/notes.txt", b"theirs")?;
    rig.feed().await;
    // Until the commit, this device keeps showing its own edit.
    assert_eq!(read_fh(&rig.vfs, fh).await?, b"MINE");
    rig.vfs.release(fh).await?;
    let tree = rig.fake.tree();
    assert_eq!(tree.get("/notes.txt"), Some(&file(b"theirs")));
    let copies: Vec<_> = tree.iter().filter(|(p, _)| p.starts_with("/notes (conflict ")).collect();
    assert_eq!(copies.len(), 1, "{tree:?}");
    assert!(copies[0].0.ends_with(" testhost).txt"));
    assert_eq!(copies[0].1, &file(b"MINE"));
    let snap = rig.vfs.activity.snapshot();
    assert_eq!(snap.conflicts.len(), 1);
    // The file now reads as the other device's version.
    rig.feed().await;
    assert_eq!(read_all(&rig.vfs, ino).await?, b"theirs");
    Ok(())
}

#[tokio::test]
async fn an_edit_of_a_file_another_device_deletes_goes_to_a_conflict_copy() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "notes.txt", b"base").await?;
    rig.feed().await;
    // O_WRONLY|O_TRUNC, new bytes; meanwhile the file is deleted elsewhere and the feed says so.
    let (fh, _) = rig.vfs.open(ino, OpenMode { write: true, truncate: true, delete_on_close: false }).await?;
    rig.vfs.write(fh, 0, b"MINE").await?;
    rig.fake.other_delete("/notes.txt")?;
    rig.feed().await;
    // fsync's 0 means the server has this content: as a conflict copy next to where it was.
    rig.vfs.fsync(fh).await?;
    rig.vfs.release(fh).await?;
    let tree = rig.fake.tree();
    assert!(!tree.contains_key("/notes.txt"), "the delete stands: {tree:?}");
    let copies: Vec<_> = tree.iter().filter(|(p, _)| p.starts_with("/notes (conflict ")).collect();
    assert_eq!(copies.len(), 1, "{tree:?}");
    assert_eq!(copies[0].1, &file(b"MINE"));
    assert_eq!(rig.vfs.activity.snapshot().conflicts.len(), 1);
    assert_eq!(rig.vfs.pending_count().await, 0);
    // Nothing comes back from the journal either.
    rig.remount().await;
    rig.vfs.upload_pending().await?;
    assert_eq!(rig.fake.tree(), tree);
    Ok(())
}

#[tokio::test]
async fn a_refused_change_outlives_another_devices_delete() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "big.bin", b"base").await?;
    rig.feed().await;
    rig.fake.set_full(true);
    let (fh, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.write(fh, 0, &[7u8; 40]).await?;
    assert!(matches!(rig.vfs.fsync(fh).await, Err(VfsError::Quota)));
    rig.vfs.release(fh).await?;
    rig.fake.other_delete("/big.bin")?;
    rig.feed().await;
    // Still kept on this device, still listed, still journaled.
    assert_eq!(rig.vfs.problems().len(), 1, "{:?}", rig.vfs.problems());
    assert_eq!(rig.vfs.pending_count().await, 1);
    rig.remount().await;
    assert_eq!(rig.vfs.pending_count().await, 1, "the journal record is gone");
    // Room made: it goes up, as a conflict copy since the file is gone there.
    rig.fake.set_full(false);
    rig.vfs.upload_pending().await?;
    let tree = rig.fake.tree();
    let copies: Vec<_> = tree.iter().filter(|(p, _)| p.starts_with("/big (conflict ")).collect();
    assert_eq!(copies.len(), 1, "{tree:?}");
    assert_eq!(copies[0].1, &file(&[7u8; 40]));
    Ok(())
}

#[tokio::test]
async fn an_edit_in_a_folder_another_device_deletes_is_saved_at_the_top() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let docs = rig.vfs.mkdir(ROOT, "docs").await?.ino;
    let ino = write_file(&rig.vfs, docs, "a.txt", b"base").await?;
    rig.feed().await;
    let (fh, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.write(fh, 0, b"MINE").await?;
    rig.fake.other_delete("/docs")?;
    rig.feed().await;
    rig.vfs.fsync(fh).await?;
    rig.vfs.release(fh).await?;
    let tree = rig.fake.tree();
    assert!(!tree.contains_key("/docs"), "the deleted folder is not made again: {tree:?}");
    let copies: Vec<_> = tree.iter().filter(|(p, _)| p.starts_with("/a (conflict ")).collect();
    assert_eq!(copies.len(), 1, "{tree:?}");
    assert_eq!(copies[0].1, &file(b"MINE"));
    let snap = rig.vfs.activity.snapshot();
    assert_eq!(snap.conflicts.len(), 1, "{snap:?}");
    assert_eq!(snap.conflicts[0].path, "/docs/a.txt");
    assert_eq!(rig.vfs.pending_count().await, 0, "nothing left pending");
    Ok(())
}

#[tokio::test]
async fn injected_conflict_on_commit_keeps_both_versions() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    rig.fake.fail_next(Call::Commit, Fault::Conflict);
    write_file(&rig.vfs, ROOT, "a.txt", b"mine").await?;
    // Nothing is lost: with the path refused, this device's version went to a conflict copy.
    let tree = rig.fake.tree();
    assert_eq!(tree.len(), 1, "{tree:?}");
    let (path, item) = tree.iter().next().context("empty")?;
    assert!(path.starts_with("/a (conflict "), "{path}");
    assert_eq!(item, &file(b"mine"));
    Ok(())
}

/// The gateway commits but its answer never arrives (a timeout after the server acted): the
/// retry finds its own version there and must not call it a conflict.
#[tokio::test]
async fn a_commit_whose_answer_was_lost_is_not_a_conflict() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "report.txt", b"one").await?;
    let (fh, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.write(fh, 0, b"two").await?;
    rig.fake.fail_next(Call::Commit, Fault::AnswerLost);
    assert!(matches!(rig.vfs.fsync(fh).await, Err(VfsError::Offline)));
    assert!(rig.vfs.probe().await);
    rig.vfs.fsync(fh).await?;
    rig.vfs.release(fh).await?;
    let tree = rig.fake.tree();
    assert_eq!(tree.len(), 1, "no conflict copy: {tree:?}");
    assert_eq!(tree.get("/report.txt"), Some(&file(b"two")));
    assert!(rig.vfs.activity.snapshot().conflicts.is_empty());
    // The same for a new file, and after a restart from the journal.
    let (_, fh) = rig.vfs.create(ROOT, "new.txt", WRITE, false).await?;
    rig.vfs.write(fh, 0, b"fresh").await?;
    rig.fake.fail_next(Call::Commit, Fault::AnswerLost);
    assert!(rig.vfs.fsync(fh).await.is_err());
    drop(rig.vfs.clone());
    let mut rig = rig;
    rig.remount().await;
    rig.vfs.upload_pending().await?;
    let tree = rig.fake.tree();
    assert_eq!(tree.get("/new.txt"), Some(&file(b"fresh")));
    assert_eq!(tree.len(), 2, "no conflict copy: {tree:?}");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn slow_gateway_fetches_a_block_once_for_concurrent_readers() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    rig.fake.other_write("/big.bin", &[5u8; 4 * BS as usize])?;
    let ino = lookup_path(&rig.vfs, "/big.bin").await?;
    rig.fake.set_latency(Duration::from_millis(300));
    let before = rig.fake.calls(Call::GetBlock);
    let (a, _) = rig.vfs.open(ino, READ).await?;
    let (b, _) = rig.vfs.open(ino, READ).await?;
    let (x, y) = tokio::join!(rig.vfs.read(a, 0, BS as u32), rig.vfs.read(b, 0, BS as u32));
    assert_eq!(x?, vec![5u8; BS as usize]);
    assert_eq!(y?, vec![5u8; BS as usize]);
    assert_eq!(rig.fake.calls(Call::GetBlock) - before, 1, "one fetch for both readers");
    Ok(())
}

#[tokio::test]
async fn another_devices_changes_arrive_through_the_feed() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "a.txt", b"mine").await?;
    rig.vfs.mkdir(ROOT, "dir").await?;
    assert_eq!(read_all(&rig.vfs, ino).await?, b"mine");
    rig.feed().await;

    rig.fake.other_write("/a.txt", b"edited elsewhere")?;
    rig.fake.other_write("/dir/new.txt", b"new")?;
    rig.fake.other_move("/dir", "/Folder")?;
    assert!(rig.feed().await >= 3);
    assert_eq!(read_all(&rig.vfs, ino).await?, b"edited elsewhere");
    let mut listed = names(&rig.vfs, ROOT).await?;
    listed.sort();
    assert_eq!(listed, vec!["Folder", "a.txt"]);
    let f = lookup_path(&rig.vfs, "/folder/NEW.txt").await?;
    assert_eq!(read_all(&rig.vfs, f).await?, b"new");

    rig.fake.other_delete("/a.txt")?;
    rig.feed().await;
    assert!(matches!(rig.vfs.lookup(ROOT, "a.txt").await, Err(VfsError::NotFound)));
    // Our own changes come back through the feed too and change nothing.
    write_file(&rig.vfs, ROOT, "b.txt", b"b").await?;
    rig.feed().await;
    let mut listed = names(&rig.vfs, ROOT).await?;
    listed.sort();
    assert_eq!(listed, vec!["Folder", "b.txt"]);
    Ok(())
}

#[tokio::test]
async fn a_closed_file_waits_its_upload_delay() -> anyhow::Result<()> {
    let fake = FakeGateway::new(BS);
    let dir = tempfile::tempdir()?;
    let vfs = core_with_delay(&fake, dir.path(), true, Duration::from_secs(3600));
    write_file(&vfs, ROOT, "later.txt", b"after the delay").await?;
    // The background round (every 2 s) leaves it to the uploader's queue ...
    vfs.upload_due().await?;
    assert!(!fake.tree().contains_key("/later.txt"), "went up before its delay");
    assert_eq!(vfs.pending_count().await, 1);
    // ... while fsync sends at once ...
    let (_, fh) = vfs.create(ROOT, "synced.txt", WRITE, false).await?;
    vfs.write(fh, 0, b"now").await?;
    vfs.fsync(fh).await?;
    vfs.release(fh).await?;
    assert_eq!(fake.read("/synced.txt")?, b"now");
    vfs.upload_due().await?;
    assert!(!fake.tree().contains_key("/later.txt"));
    // ... and so do a retry and the unmount.
    vfs.flush_all().await?;
    assert_eq!(fake.read("/later.txt")?, b"after the delay");
    Ok(())
}

#[tokio::test]
async fn write_back_uploads_after_close() -> anyhow::Result<()> {
    let fake = FakeGateway::new(BS);
    let dir = tempfile::tempdir()?;
    let vfs = core_on(&fake, dir.path(), true);
    let uploader = tokio::spawn(vfs.clone().run_uploads());
    write_file(&vfs, ROOT, "w.txt", b"written back").await?;
    for _ in 0..100 {
        if fake.tree().contains_key("/w.txt") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(fake.read("/w.txt")?, b"written back");
    uploader.abort();
    Ok(())
}

/// A file the mount never read, while the gateway is away: opening it must say so, not show
/// an empty file (which a copy would take as the content, and a write would commit as the
/// whole new version once the gateway is back).
#[tokio::test]
async fn an_uncached_file_is_not_empty_while_offline() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    rig.fake.other_write("/f.txt", b"0123456789abcdefghij")?;
    let ino = lookup_path(&rig.vfs, "/f.txt").await?;
    rig.fake.set_unreachable(true);
    assert!(matches!(rig.vfs.open(ino, READ).await, Err(VfsError::Offline)));
    assert!(matches!(rig.vfs.open(ino, WRITE).await, Err(VfsError::Offline)));
    let set = crate::core::SetAttr { size: Some(5), ..Default::default() };
    assert!(matches!(rig.vfs.setattr(ino, None, set).await, Err(VfsError::Offline)));
    assert_eq!(rig.vfs.getattr(ino).await?.size, 20);
    // Truncating needs no old content: that works offline and goes up later.
    let (fh, _) = rig.vfs.open(ino, OpenMode { truncate: true, ..WRITE }).await?;
    rig.vfs.write(fh, 0, b"new").await?;
    rig.vfs.release(fh).await?;
    rig.fake.set_unreachable(false);
    rig.vfs.upload_pending().await?;
    assert_eq!(rig.fake.read("/f.txt")?, b"new");
    Ok(())
}

/// A reader opened before a local writer sees the writer's bytes while they are staged, and
/// keeps seeing them once they are committed: reads never go back to the older version.
#[tokio::test]
async fn a_reader_never_goes_back_to_the_version_before_a_local_write() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "f.txt", b"old content").await?;
    let (r, _) = rig.vfs.open(ino, READ).await?;
    assert_eq!(read_fh(&rig.vfs, r).await?, b"old content");
    let (w, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.write(w, 0, b"NEW").await?;
    assert_eq!(read_fh(&rig.vfs, r).await?, b"NEW content", "staged bytes are visible");
    rig.vfs.release(w).await?;
    assert_eq!(rig.fake.read("/f.txt")?, b"NEW content");
    assert_eq!(read_fh(&rig.vfs, r).await?, b"NEW content", "and stay visible once committed");
    rig.vfs.release(r).await?;
    Ok(())
}

/// Inside `/Shared with me` the blocks are the share owner's: the core asks for each as a
/// block of the file it reads or writes (the gateway gives no other), and for the user's own
/// files without a scope.
#[tokio::test]
async fn blocks_inside_shares_are_asked_for_with_their_file() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    rig.fake.other_write("/Shared with me/Plan/a.txt", b"shared")?;
    rig.fake.other_write("/own.txt", b"mine")?;
    let shared = lookup_path(&rig.vfs, "/Shared with me/Plan/a.txt").await?;
    assert_eq!(read_all(&rig.vfs, shared).await?, b"shared");
    let own = lookup_path(&rig.vfs, "/own.txt").await?;
    assert_eq!(read_all(&rig.vfs, own).await?, b"mine");
    assert_eq!(rig.fake.block_scopes(), vec![Some("/Shared with me/Plan/a.txt".to_string()), None]);
    // Written through the share: the new block goes up as a block of that file.
    let plan = lookup_path(&rig.vfs, "/Shared with me/Plan").await?;
    write_file(&rig.vfs, plan, "b.txt", b"from the drive").await?;
    assert_eq!(rig.fake.tree().get("/Shared with me/Plan/b.txt"), Some(&file(b"from the drive")));
    assert_eq!(rig.fake.block_scopes().last(), Some(&Some("/Shared with me/Plan/b.txt".to_string())));
    Ok(())
}
