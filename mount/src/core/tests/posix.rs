//! POSIX behaviour programs rely on (issue 18 part 6), checked on the core: link counts of
//! open files that lost their name, directory time stamps, over-long names, and how many
//! gateway calls a folder move costs while its files still wait for upload.

use super::*;
use crate::core::VfsError;
use crate::core::fake::FakeGateway;

#[tokio::test]
async fn an_open_file_unlinked_reports_no_link_but_stays_usable() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "f.txt", b"hello").await?;
    assert!(!rig.vfs.getattr(ino).await?.unlinked);
    let (fh, _) = rig.vfs.open(ino, WRITE).await?;
    rig.vfs.unlink(ROOT, "f.txt").await?;
    // fstat on the descriptor: st_nlink 0.
    let a = rig.vfs.getattr(ino).await?;
    assert!(a.unlinked, "{a:?}");
    // Still readable and writable through the descriptor until the last close.
    rig.vfs.write(fh, 5, b" world").await?;
    assert_eq!(read_fh(&rig.vfs, fh).await?, b"hello world");
    rig.vfs.release(fh).await?;
    assert!(rig.fake.tree().is_empty(), "{:?}", rig.fake.tree());
    Ok(())
}

#[tokio::test]
async fn an_open_file_replaced_by_a_rename_reports_no_link() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let old = write_file(&rig.vfs, ROOT, "doc.txt", b"old").await?;
    write_file(&rig.vfs, ROOT, "doc.txt.new", b"new").await?;
    let (fh, _) = rig.vfs.open(old, READ).await?;
    rig.vfs.rename(ROOT, "doc.txt.new", ROOT, "doc.txt", true).await?;
    assert!(rig.vfs.getattr(old).await?.unlinked);
    assert_eq!(read_fh(&rig.vfs, fh).await?, b"old");
    rig.vfs.release(fh).await?;
    let now = rig.vfs.lookup(ROOT, "doc.txt").await?;
    assert!(!now.unlinked && now.ino != old, "{now:?}");
    Ok(())
}

/// Enough for two `SystemTime::now()` to differ wherever the tests run.
async fn tick() {
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
}

#[tokio::test]
async fn entries_created_removed_or_renamed_move_their_folders_times() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let vfs = rig.vfs.clone();
    let d = vfs.mkdir(ROOT, "d").await?.ino;
    let e = vfs.mkdir(ROOT, "e").await?.ino;
    let before = vfs.getattr(d).await?;

    // A new file: the folder's mtime and ctime move, together.
    tick().await;
    let f = write_file(&vfs, d, "f.txt", b"x").await?;
    let after_create = vfs.getattr(d).await?;
    assert!(after_create.mtime > before.mtime, "{before:?} -> {after_create:?}");
    assert_eq!(after_create.ctime, after_create.mtime);

    // mkdir and rmdir inside.
    tick().await;
    vfs.mkdir(d, "sub").await?;
    let after_mkdir = vfs.getattr(d).await?;
    assert!(after_mkdir.mtime > after_create.mtime);
    tick().await;
    vfs.rmdir(d, "sub").await?;
    let after_rmdir = vfs.getattr(d).await?;
    assert!(after_rmdir.mtime > after_mkdir.mtime);

    // A move to another folder: both folders move, the file keeps its mtime (its ctime moves).
    let file_before = vfs.getattr(f).await?;
    let e_before = vfs.getattr(e).await?;
    tick().await;
    vfs.rename(d, "f.txt", e, "g.txt", false).await?;
    let (d_now, e_now, file_now) = (vfs.getattr(d).await?, vfs.getattr(e).await?, vfs.getattr(f).await?);
    assert!(d_now.mtime > after_rmdir.mtime && d_now.ctime == d_now.mtime, "{d_now:?}");
    assert!(e_now.mtime > e_before.mtime && e_now.ctime == e_now.mtime, "{e_now:?}");
    assert_eq!(file_now.mtime, file_before.mtime, "a rename keeps the file's mtime");
    assert!(file_now.ctime > file_before.ctime);

    // The gateway's answers (the feed echoing these changes, fresh listings) keep them.
    rig.feed().await;
    assert_eq!(names(&vfs, ROOT).await?, vec!["d", "e"]);
    assert_eq!(vfs.getattr(e).await?.mtime, e_now.mtime);
    assert_eq!(vfs.getattr(f).await?.mtime, file_before.mtime);

    // Unlink.
    tick().await;
    vfs.unlink(e, "g.txt").await?;
    let e_unlinked = vfs.getattr(e).await?;
    assert!(e_unlinked.mtime > e_now.mtime);

    // Failed operations change no time stamp.
    write_file(&vfs, e, "keep.txt", b"k").await?;
    let keep = vfs.lookup(e, "keep.txt").await?;
    let (d_fixed, e_fixed) = (vfs.getattr(d).await?, vfs.getattr(e).await?);
    tick().await;
    assert!(matches!(vfs.create(e, "keep.txt", WRITE, false).await, Err(VfsError::Exists)));
    assert!(matches!(vfs.mkdir(e, "keep.txt").await, Err(VfsError::Exists)));
    assert!(matches!(vfs.unlink(e, "missing").await, Err(VfsError::NotFound)));
    assert!(matches!(vfs.rmdir(e, "keep.txt").await, Err(VfsError::NotDir)));
    assert!(matches!(vfs.rmdir(ROOT, "e").await, Err(VfsError::NotEmpty)));
    assert!(matches!(vfs.rename(e, "missing", d, "x", true).await, Err(VfsError::NotFound)));
    vfs.rename(e, "keep.txt", d, "keep.txt", true).await?;
    vfs.rename(d, "keep.txt", e, "keep.txt", true).await?;
    let (d_moved, e_moved) = (vfs.getattr(d).await?, vfs.getattr(e).await?);
    assert!(d_moved.mtime > d_fixed.mtime && e_moved.mtime > e_fixed.mtime, "the two renames that worked");
    let (d_fixed, e_fixed) = (d_moved, e_moved);
    tick().await;
    assert!(matches!(vfs.rename(ROOT, "d", e, "keep.txt", true).await, Err(VfsError::NotDir)));
    assert!(matches!(vfs.rename(e, "keep.txt", ROOT, "d", true).await, Err(VfsError::IsDir)));
    rig.fake.set_unreachable(true);
    assert!(vfs.mkdir(d, "offline").await.is_err());
    assert!(vfs.rename(e, "keep.txt", d, "keep.txt", false).await.is_err());
    rig.fake.set_unreachable(false);
    assert!(vfs.probe().await);
    let (d_after, e_after) = (vfs.getattr(d).await?, vfs.getattr(e).await?);
    assert_eq!((d_after.mtime, d_after.ctime), (d_fixed.mtime, d_fixed.ctime));
    assert_eq!((e_after.mtime, e_after.ctime), (e_fixed.mtime, e_fixed.ctime));
    assert_eq!(vfs.getattr(keep.ino).await?.mtime, keep.mtime);
    Ok(())
}

#[tokio::test]
async fn another_devices_changes_move_the_folders_times_too() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let d = rig.vfs.mkdir(ROOT, "d").await?.ino;
    let before = rig.vfs.getattr(d).await?;
    tick().await;
    rig.fake.other_write("/d/theirs.txt", b"from the phone")?;
    rig.feed().await;
    let after = rig.vfs.getattr(d).await?;
    assert!(after.mtime > before.mtime && after.ctime == after.mtime, "{before:?} -> {after:?}");
    Ok(())
}

#[tokio::test]
async fn a_name_over_255_bytes_is_too_long_for_every_call() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let vfs = &rig.vfs;
    let d = vfs.mkdir(ROOT, "d").await?.ino;
    let max = "m".repeat(255);
    write_file(vfs, d, &max, b"the longest name there may be").await?;
    assert_eq!(vfs.lookup(d, &max).await?.size, 29);
    let too_long = |r: VfsResult<()>| matches!(r, Err(VfsError::NameTooLong));
    // 256 ASCII bytes, and 130 two-byte characters (260 bytes, 130 characters).
    for long in ["n".repeat(256), "é".repeat(130)] {
        // `d` is fully known (made here): a lookup still says too long, not "no such name".
        assert!(too_long(vfs.lookup(d, &long).await.map(drop)), "lookup");
        assert!(too_long(vfs.lookup(ROOT, &long).await.map(drop)), "lookup in the root");
        assert!(too_long(vfs.create(d, &long, WRITE, false).await.map(drop)), "create");
        assert!(too_long(vfs.mkdir(d, &long).await.map(drop)), "mkdir");
        assert!(too_long(vfs.unlink(d, &long).await), "unlink");
        assert!(too_long(vfs.rmdir(d, &long).await), "rmdir");
        assert!(too_long(vfs.rename(d, &long, d, "x", true).await), "rename from");
        assert!(too_long(vfs.rename(d, &max, d, &long, true).await), "rename to");
        assert!(too_long(vfs.rename(d, &max, ROOT, &long, false).await), "move to");
    }
    // Nothing changed anywhere.
    assert_eq!(names(vfs, d).await?, vec![max.clone()]);
    assert_eq!(rig.fake.tree().len(), 2, "{:?}", rig.fake.tree().keys());
    Ok(())
}

/// A write-back core whose uploader is not running: closed files stay queued.
async fn pending_rig() -> anyhow::Result<(FakeGateway, tempfile::TempDir, std::sync::Arc<Vfs>)> {
    let fake = FakeGateway::new(BS);
    let dir = tempfile::tempdir()?;
    let vfs = core_on(&fake, dir.path(), true);
    Ok((fake, dir, vfs))
}

const PENDING_FILES: usize = 200;

async fn write_pending(vfs: &Vfs, dir: Ino) -> anyhow::Result<()> {
    for i in 0..PENDING_FILES {
        write_file(vfs, dir, &format!("f{i:03}.txt"), format!("file {i}\n").as_bytes()).await?;
    }
    Ok(())
}

fn check_moved(fake: &FakeGateway, to: &str) -> anyhow::Result<()> {
    let tree = fake.tree();
    assert_eq!(tree.len(), PENDING_FILES + 1, "{:?}", tree.keys().take(5).collect::<Vec<_>>());
    for i in 0..PENDING_FILES {
        assert_eq!(fake.read(&format!("{to}/f{i:03}.txt"))?, format!("file {i}\n").as_bytes());
    }
    Ok(())
}

#[tokio::test]
async fn a_folder_of_files_waiting_for_upload_moves_with_one_call_and_no_upload() -> anyhow::Result<()> {
    use crate::core::fake::Call;
    let (fake, dir, vfs) = pending_rig().await?;
    let many = vfs.mkdir(ROOT, "many").await?.ino;
    write_pending(&vfs, many).await?;
    assert_eq!(vfs.pending_count().await, PENDING_FILES);
    let calls = |c| fake.calls(c);
    let before = [calls(Call::Commit), calls(Call::PutBlock), calls(Call::Move)];
    vfs.rename(ROOT, "many", ROOT, "moved", false).await?;
    // Before, each file was uploaded first: 200 blocks and 200 commits.
    assert_eq!([calls(Call::Commit), calls(Call::PutBlock), calls(Call::Move)], [before[0], before[1], before[2] + 1]);
    assert_eq!(vfs.pending_count().await, PENDING_FILES);
    // Nor was any journal record rewritten: the move log says it for all of them.
    let mut records = 0;
    for e in std::fs::read_dir(dir.path().join("staging"))? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "json") {
            assert!(std::fs::read_to_string(&p)?.contains("\"/many/f"), "{}", p.display());
            records += 1;
        }
    }
    assert_eq!(records, PENDING_FILES);
    // The uploads then go to the new place.
    vfs.upload_pending().await?;
    check_moved(&fake, "/moved")?;
    assert_eq!(names(&vfs, ROOT).await?, vec!["moved"]);
    Ok(())
}

#[tokio::test]
async fn a_moved_folders_waiting_files_survive_a_crash_at_their_new_place() -> anyhow::Result<()> {
    let (fake, dir, vfs) = pending_rig().await?;
    let d = vfs.mkdir(ROOT, "d").await?.ino;
    let many = vfs.mkdir(d, "many").await?.ino;
    write_pending(&vfs, many).await?;
    vfs.mkdir(ROOT, "e").await?;
    // Moved twice (the journal records follow), then the mount is killed before any upload.
    vfs.rename(d, "many", ROOT, "many", false).await?;
    let e = vfs.lookup(ROOT, "e").await?.ino;
    vfs.rename(ROOT, "many", e, "kept", false).await?;
    drop(vfs);
    let vfs = core_on(&fake, dir.path(), false);
    vfs.upload_pending().await?;
    let tree = fake.tree();
    assert!(tree.contains_key("/d") && tree.contains_key("/e"), "{:?}", tree.keys().take(5).collect::<Vec<_>>());
    let files: Vec<_> = tree.keys().filter(|k| k.ends_with(".txt")).collect();
    assert_eq!(files.len(), PENDING_FILES);
    assert!(files.iter().all(|k| k.starts_with("/e/kept/")), "{:?}", &files[..3]);
    for i in 0..PENDING_FILES {
        assert_eq!(fake.read(&format!("/e/kept/f{i:03}.txt"))?, format!("file {i}\n").as_bytes());
    }
    Ok(())
}

#[tokio::test]
async fn a_folder_move_waits_only_for_the_uploads_already_running() -> anyhow::Result<()> {
    use crate::core::fake::Call;
    let (fake, _dir, vfs) = pending_rig().await?;
    let many = vfs.mkdir(ROOT, "many").await?.ino;
    write_pending(&vfs, many).await?;
    // The uploader works through the queue (in the order the move locks the files) while
    // the move runs: the move must not wait for it to reach the end.
    fake.set_latency(std::time::Duration::from_millis(2));
    let uploader = tokio::spawn(vfs.clone().run_uploads());
    while fake.calls(Call::Commit) < 8 {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let before = fake.calls(Call::Commit);
    vfs.rename(ROOT, "many", ROOT, "moved", false).await?;
    let during = fake.calls(Call::Commit) - before;
    // The 4 running, and the few started while the move looks its names up (each gateway
    // call takes 2 ms here); not the 200 queued.
    assert!(during <= 20, "{during} uploads finished during the move");
    // What was queued goes up afterwards, at the new place.
    while vfs.pending_count().await > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    uploader.abort();
    check_moved(&fake, "/moved")?;
    Ok(())
}
