//! Refused changes reach the person: each is a problem naming the file and the reason, with
//! retry, save a copy and discard; fsync returns the refusal to the program.

use anyhow::{Context, ensure};
use nimbus_proto::drive::{DriveProblem, ProblemAction, ProblemReason};

use super::*;
use crate::core::VfsError;
use crate::core::fake::{Call, Item};
use crate::core::problems::backoff;

fn only_problem(vfs: &Vfs) -> anyhow::Result<DriveProblem> {
    let mut all = vfs.problems();
    ensure!(all.len() == 1, "expected one problem, got {all:?}");
    all.pop().context("one problem")
}

/// The files the fake holds whose name starts with `prefix` (a copy's name has a date in it).
fn files_starting(rig: &Rig, prefix: &str) -> Vec<(String, Item)> {
    rig.fake.tree().into_iter().filter(|(p, _)| p.starts_with(prefix)).collect()
}

#[tokio::test]
async fn a_full_space_is_a_problem_until_room_is_made() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    rig.fake.set_full(true);
    let (_, fh) = rig.vfs.create(ROOT, "big.bin", WRITE, false).await?;
    rig.vfs.write(fh, 0, &[7u8; 40]).await?;
    // The program hears it at fsync.
    assert!(matches!(rig.vfs.fsync(fh).await, Err(VfsError::Quota)));
    rig.vfs.release(fh).await?;
    let p = only_problem(&rig.vfs)?;
    assert_eq!(p.path, "/big.bin");
    assert_eq!(p.reason, ProblemReason::Quota);
    assert!(p.message.contains("full"), "{p:?}");
    assert!(p.detail.contains("quota"), "{p:?}");
    assert_eq!(p.actions, vec![ProblemAction::Retry, ProblemAction::SaveCopy, ProblemAction::Discard]);
    assert!(p.attempts >= 2, "fsync and close both tried: {p:?}");
    // The status snapshot carries it.
    assert_eq!(rig.vfs.activity_snapshot().problems, vec![p.clone()]);
    // A retry while still full fails the same way and keeps the problem.
    let err = rig.vfs.resolve("/big.bin", ProblemAction::Retry).await.err().context("retry went through")?;
    assert!(matches!(err, VfsError::Quota), "{err:?}");
    ensure!(only_problem(&rig.vfs)?.attempts > p.attempts);
    // Room made: retry uploads it and the problem is gone.
    rig.fake.set_full(false);
    let done = rig.vfs.resolve("/big.bin", ProblemAction::Retry).await?;
    assert!(done.contains("uploaded"), "{done}");
    assert_eq!(rig.fake.read("/big.bin")?, vec![7u8; 40]);
    assert!(rig.vfs.problems().is_empty());
    assert_eq!(rig.vfs.pending_count().await, 0);
    Ok(())
}

#[tokio::test]
async fn a_new_file_refused_for_quota_can_be_discarded() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    rig.fake.set_full(true);
    write_file(&rig.vfs, ROOT, "new.bin", b"0123456789").await?;
    assert_eq!(only_problem(&rig.vfs)?.reason, ProblemReason::Quota);
    // Saving a copy needs room too: refused, the problem stays.
    let err = rig.vfs.resolve("/new.bin", ProblemAction::SaveCopy).await.err().context("copy went through")?;
    assert!(matches!(err, VfsError::Quota), "{err:?}");
    assert_eq!(rig.vfs.problems().len(), 1);
    let done = rig.vfs.resolve("/new.bin", ProblemAction::Discard).await?;
    assert!(done.contains("discarded"), "{done}");
    assert!(rig.vfs.problems().is_empty());
    assert_eq!(rig.vfs.pending_count().await, 0);
    // Never on the server, so it is gone from the drive too.
    assert!(matches!(lookup_path(&rig.vfs, "/new.bin").await, Err(VfsError::NotFound)));
    assert!(rig.fake.tree().is_empty());
    // Nothing comes back at the next retry round.
    rig.fake.set_full(false);
    rig.vfs.upload_pending().await?;
    assert!(rig.fake.tree().is_empty());
    Ok(())
}

#[tokio::test]
async fn a_locked_file_keeps_the_holders_version_and_ours_goes_to_a_copy() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "shared.docx", b"v1").await?;
    rig.fake.lock_path("/shared.docx", true);
    let (fh, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.write(fh, 0, b"mine").await?;
    assert!(matches!(rig.vfs.fsync(fh).await, Err(VfsError::Locked)));
    // Open for writing: neither a copy nor a discard yet.
    let err = rig.vfs.resolve("/shared.docx", ProblemAction::Discard).await.err().context("discarded while open")?;
    assert!(err.to_string().contains("close it first"), "{err}");
    rig.vfs.release(fh).await?;
    let p = only_problem(&rig.vfs)?;
    assert_eq!((p.path.as_str(), p.reason), ("/shared.docx", ProblemReason::Locked));
    assert!(p.message.contains("locked"), "{p:?}");
    let done = rig.vfs.resolve("/shared.docx", ProblemAction::SaveCopy).await?;
    assert!(done.contains("(copy "), "{done}");
    assert_eq!(rig.fake.read("/shared.docx")?, b"v1", "the lock holder's file is untouched");
    let copies = files_starting(&rig, "/shared (copy ");
    ensure!(copies.len() == 1, "one copy: {:?}", rig.fake.tree());
    assert_eq!(copies[0].1, Item::File(b"mine".to_vec()));
    assert!(copies[0].0.ends_with(" testhost).docx"), "{copies:?}");
    // The drive shows the server's version again, and the copy.
    assert!(rig.vfs.problems().is_empty());
    assert_eq!(read_all(&rig.vfs, lookup_path(&rig.vfs, "/shared.docx").await?).await?, b"v1");
    assert!(names(&rig.vfs, ROOT).await?.iter().any(|n| n.starts_with("shared (copy ")));
    assert_eq!(rig.vfs.pending_count().await, 0);
    Ok(())
}

#[tokio::test]
async fn discard_gives_back_the_servers_version() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "plan.txt", b"theirs").await?;
    rig.fake.lock_path("/plan.txt", true);
    let (fh, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.write(fh, 0, b"MINE!!").await?;
    rig.vfs.release(fh).await?;
    assert_eq!(only_problem(&rig.vfs)?.reason, ProblemReason::Locked);
    rig.vfs.resolve("/PLAN.txt", ProblemAction::Discard).await.context("names compare as the gateway's")?;
    assert!(rig.vfs.problems().is_empty());
    assert_eq!(read_all(&rig.vfs, lookup_path(&rig.vfs, "/plan.txt").await?).await?, b"theirs");
    rig.fake.lock_path("/plan.txt", false);
    rig.vfs.upload_pending().await?;
    assert_eq!(rig.fake.read("/plan.txt")?, b"theirs", "the discarded change never goes up");
    Ok(())
}

#[tokio::test]
async fn a_file_whose_folder_went_elsewhere_is_saved_at_the_top() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let docs = rig.vfs.mkdir(ROOT, "docs").await?.ino;
    let (_, fh) = rig.vfs.create(docs, "a.txt", WRITE, false).await?;
    rig.vfs.write(fh, 0, b"draft").await?;
    // Another device replaces the folder with a file before this one's close reaches the
    // gateway (a deleted folder alone would be made again by the commit).
    rig.fake.other_delete("/docs")?;
    rig.fake.other_write("/docs", b"a file now")?;
    rig.vfs.release(fh).await?;
    let p = only_problem(&rig.vfs)?;
    assert_eq!((p.path.as_str(), p.reason), ("/docs/a.txt", ProblemReason::NameConflict));
    rig.vfs.resolve("/docs/a.txt", ProblemAction::SaveCopy).await?;
    let copies = files_starting(&rig, "/a (copy ");
    ensure!(copies.len() == 1, "the copy is at the top: {:?}", rig.fake.tree());
    assert_eq!(copies[0].1, Item::File(b"draft".to_vec()));
    assert!(rig.vfs.problems().is_empty());
    assert_eq!(rig.vfs.pending_count().await, 0);
    Ok(())
}

#[tokio::test]
async fn a_refused_edit_whose_folder_was_deleted_elsewhere_is_a_problem() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let docs = rig.vfs.mkdir(ROOT, "docs").await?.ino;
    let ino = write_file(&rig.vfs, docs, "a.txt", b"base").await?;
    rig.feed().await;
    let (fh, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.write(fh, 0, b"draft").await?;
    rig.fake.other_delete("/docs")?;
    rig.feed().await;
    rig.fake.set_full(true);
    // Not pending unseen: the program hears it, and the person sees it under its old path.
    assert!(matches!(rig.vfs.fsync(fh).await, Err(VfsError::Quota)));
    rig.vfs.release(fh).await?;
    let p = only_problem(&rig.vfs)?;
    assert_eq!((p.path.as_str(), p.reason), ("/docs/a.txt", ProblemReason::Quota));
    rig.fake.set_full(false);
    rig.vfs.resolve("/docs/a.txt", ProblemAction::SaveCopy).await?;
    let copies = files_starting(&rig, "/a (copy ");
    ensure!(copies.len() == 1, "the copy is at the top: {:?}", rig.fake.tree());
    assert_eq!(copies[0].1, Item::File(b"draft".to_vec()));
    assert!(!rig.fake.tree().contains_key("/docs"), "the deleted folder is not made again");
    assert!(rig.vfs.problems().is_empty());
    assert_eq!(rig.vfs.pending_count().await, 0);
    Ok(())
}

#[tokio::test]
async fn a_refused_file_does_not_hold_up_the_others() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    rig.fake.set_unreachable(true);
    write_file(&rig.vfs, ROOT, "a-locked.txt", b"1").await?;
    write_file(&rig.vfs, ROOT, "b.txt", b"2").await?;
    write_file(&rig.vfs, ROOT, "c.txt", b"3").await?;
    assert!(rig.vfs.problems().is_empty(), "unreachable is not a problem");
    rig.fake.set_unreachable(false);
    rig.fake.lock_path("/a-locked.txt", true);
    let err = rig.vfs.upload_pending().await.err().context("the locked file went up")?;
    assert!(matches!(err, VfsError::Locked), "{err:?}");
    assert_eq!(rig.fake.read("/b.txt")?, b"2");
    assert_eq!(rig.fake.read("/c.txt")?, b"3");
    assert_eq!(only_problem(&rig.vfs)?.path, "/a-locked.txt");
    // Unmounting flushes the others too and reports the refusal.
    assert!(matches!(rig.vfs.flush_all().await, Err(VfsError::Locked)));
    Ok(())
}

#[tokio::test]
async fn the_background_round_waits_before_asking_again() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    rig.fake.set_full(true);
    write_file(&rig.vfs, ROOT, "x.bin", b"abc").await?;
    let tried = rig.fake.calls(Call::PutBlock);
    // Not due yet: the background round leaves it alone ...
    rig.vfs.upload_due().await?;
    assert_eq!(rig.fake.calls(Call::PutBlock), tried);
    // ... while an explicit retry asks at once.
    assert!(rig.vfs.upload_pending().await.is_err());
    assert!(rig.fake.calls(Call::PutBlock) > tried);
    Ok(())
}

#[test]
fn the_pause_grows_and_is_capped() {
    let secs: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs()).collect();
    assert_eq!(secs, vec![5, 10, 20, 40, 60, 60, 60, 60]);
    assert_eq!(backoff(0).as_secs(), 5);
    assert_eq!(backoff(u32::MAX).as_secs(), 60);
}

#[tokio::test]
async fn a_problem_follows_its_file_and_goes_with_it() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let d = rig.vfs.mkdir(ROOT, "d").await?.ino;
    rig.fake.set_full(true);
    write_file(&rig.vfs, d, "x.txt", b"x").await?;
    // Its folder moves (a file with a refused change cannot: its change goes first).
    rig.vfs.rename(ROOT, "d", ROOT, "e", false).await?;
    assert_eq!(only_problem(&rig.vfs)?.path, "/e/x.txt");
    let err = rig.vfs.resolve("/d/x.txt", ProblemAction::Discard).await.err().context("resolved by its old path")?;
    assert!(err.to_string().contains("nimbus status"), "{err}");
    let e = lookup_path(&rig.vfs, "/e").await?;
    rig.vfs.unlink(e, "x.txt").await?;
    assert!(rig.vfs.problems().is_empty(), "{:?}", rig.vfs.problems());
    Ok(())
}

#[tokio::test]
async fn an_earlier_runs_refused_write_is_a_problem_too() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    rig.fake.set_unreachable(true);
    write_file(&rig.vfs, ROOT, "kept.txt", b"from before").await?;
    write_file(&rig.vfs, ROOT, "dropped.txt", b"from before").await?;
    rig.fake.set_unreachable(false);
    rig.fake.set_full(true);
    rig.remount().await;
    assert!(rig.vfs.upload_pending().await.is_err());
    let paths: Vec<String> = rig.vfs.problems().into_iter().map(|p| p.path).collect();
    assert_eq!(paths, vec!["/dropped.txt".to_string(), "/kept.txt".to_string()]);
    rig.vfs.resolve("/dropped.txt", ProblemAction::Discard).await?;
    rig.fake.set_full(false);
    rig.vfs.resolve("/kept.txt", ProblemAction::Retry).await?;
    assert!(rig.vfs.problems().is_empty());
    assert_eq!(rig.vfs.pending_count().await, 0);
    assert_eq!(rig.fake.read("/kept.txt")?, b"from before");
    assert!(!rig.fake.tree().contains_key("/dropped.txt"));
    Ok(())
}

#[tokio::test]
async fn an_owner_file_renamed_into_a_full_space_is_renamed_and_its_upload_a_problem() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    // Never uploaded (an Office owner file), then given a real name while the space is full.
    write_file(&rig.vfs, ROOT, "~$draft.docx", b"saved by the editor").await?;
    rig.fake.set_full(true);
    rig.vfs.rename(ROOT, "~$draft.docx", ROOT, "draft.docx", false).await.context("the rename itself is made")?;
    assert_eq!(names(&rig.vfs, ROOT).await?, vec!["draft.docx".to_string()]);
    let p = only_problem(&rig.vfs)?;
    assert_eq!((p.path.as_str(), p.reason), ("/draft.docx", ProblemReason::Quota));
    rig.fake.set_full(false);
    rig.vfs.resolve("/draft.docx", ProblemAction::Retry).await?;
    assert_eq!(rig.fake.read("/draft.docx")?, b"saved by the editor");
    Ok(())
}
