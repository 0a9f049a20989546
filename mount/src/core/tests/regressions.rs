//! Bugs the model test (`model`) found, one focused test each: the shrunk sequence of calls
//! that showed it, written out.

use super::*;
use crate::core::fake::Item;
use crate::core::{SetAttr, VfsError};

async fn listing(vfs: &Vfs, dir: Ino) -> VfsResult<Vec<(String, u64)>> {
    let fh = vfs.opendir(dir)?;
    let entries = vfs.readdir(fh, 0, 10_000).await;
    vfs.releasedir(fh);
    Ok(entries?.into_iter().map(|e| (e.name, e.attr.size)).collect())
}

#[tokio::test]
async fn a_file_another_device_moved_keeps_its_inode_number() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "a.txt", b"body").await?;
    let d = rig.vfs.mkdir(ROOT, "d").await?.ino;
    rig.fake.other_move("/a.txt", "/d/a.txt")?;
    rig.feed().await;
    // The old place is found empty first (a listing), then the file at its new place.
    assert_eq!(names(&rig.vfs, ROOT).await?, vec!["d"]);
    assert_eq!(rig.vfs.lookup(d, "a.txt").await?.ino, ino);
    assert_eq!(read_all(&rig.vfs, ino).await?, b"body");
    Ok(())
}

#[tokio::test]
async fn truncate_by_path_while_the_gateway_is_away_is_journaled_not_an_error() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "f.txt", b"hello").await?;
    rig.fake.set_unreachable(true);
    // truncate(2): the file is truncated here, so the call succeeded; the upload waits.
    let attr = rig.vfs.setattr(ino, None, SetAttr { size: Some(1), ..Default::default() }).await?;
    assert_eq!(attr.size, 1);
    assert_eq!(rig.vfs.pending_count().await, 1);
    rig.fake.set_unreachable(false);
    assert!(rig.vfs.probe().await);
    rig.vfs.upload_pending().await?;
    assert_eq!(rig.fake.read("/f.txt")?, b"h");
    Ok(())
}

#[tokio::test]
async fn a_listing_shows_the_size_another_device_wrote() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    write_file(&rig.vfs, ROOT, "a.txt", b"x").await?;
    assert_eq!(listing(&rig.vfs, ROOT).await?, vec![("a.txt".to_string(), 1)]);
    rig.fake.other_write("/a.txt", b"other device")?;
    rig.feed().await;
    assert_eq!(listing(&rig.vfs, ROOT).await?, vec![("a.txt".to_string(), 12)]);
    Ok(())
}

#[tokio::test]
async fn moving_a_folder_into_itself_is_refused_before_anything_changes() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let e = rig.vfs.mkdir(ROOT, "e").await?.ino;
    rig.vfs.mkdir(e, "d").await?;
    // Onto an empty folder inside itself, replacing: EINVAL, and that folder stays.
    let r = rig.vfs.rename(ROOT, "e", e, "d", true).await;
    assert!(matches!(r, Err(VfsError::Invalid(_))), "{r:?}");
    let r = rig.vfs.rename(ROOT, "e", e, "x", false).await;
    assert!(matches!(r, Err(VfsError::Invalid(_))), "{r:?}");
    assert_eq!(rig.fake.tree().get("/e/d"), Some(&Item::Dir));
    assert_eq!(names(&rig.vfs, e).await?, vec!["d"]);
    Ok(())
}

#[tokio::test]
async fn an_owner_file_renamed_onto_an_uploaded_file_replaces_it() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    write_file(&rig.vfs, ROOT, "doc.docx", b"old").await?;
    // Never uploaded (an Office owner file), then given the real file's name.
    write_file(&rig.vfs, ROOT, "~$doc.docx", b"new").await?;
    rig.vfs.rename(ROOT, "~$doc.docx", ROOT, "doc.docx", true).await?;
    assert_eq!(rig.fake.read("/doc.docx")?, b"new");
    assert_eq!(rig.fake.tree().len(), 1, "no conflict copy: {:?}", rig.fake.tree());
    assert_eq!(names(&rig.vfs, ROOT).await?, vec!["doc.docx"]);
    Ok(())
}

#[tokio::test]
async fn renaming_an_owner_file_while_the_gateway_is_away_succeeds_and_uploads_later() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    write_file(&rig.vfs, ROOT, "~$doc.docx", b"kept").await?;
    rig.fake.set_unreachable(true);
    // The rename is made here (the file was never on the gateway): no error.
    rig.vfs.rename(ROOT, "~$doc.docx", ROOT, "doc.docx", true).await?;
    assert_eq!(names(&rig.vfs, ROOT).await?, vec!["doc.docx"]);
    rig.fake.set_unreachable(false);
    assert!(rig.vfs.probe().await);
    rig.vfs.upload_pending().await?;
    assert_eq!(rig.fake.read("/doc.docx")?, b"kept");
    Ok(())
}

#[tokio::test]
async fn changes_to_an_open_file_moved_with_its_folder_survive_a_crash_at_the_new_path() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let a = rig.vfs.mkdir(ROOT, "a").await?.ino;
    let (_, fh) = rig.vfs.create(a, "f.txt", WRITE, false).await?;
    rig.vfs.write(fh, 0, b"one").await?;
    // The rename uploads the open file first, then moves the folder; writes go on.
    rig.vfs.rename(ROOT, "a", ROOT, "b", true).await?;
    rig.vfs.write(fh, 3, b"two").await?;
    // Killed with the file still open; the next mount uploads the journal.
    rig.remount().await;
    rig.vfs.upload_pending().await?;
    let tree = rig.fake.tree();
    assert_eq!(tree.get("/b/f.txt"), Some(&Item::File(b"onetwo".to_vec())), "{tree:?}");
    assert!(!tree.contains_key("/a"), "{tree:?}");
    Ok(())
}

#[tokio::test]
async fn a_handle_on_a_deleted_file_reads_what_the_mount_last_had() -> anyhow::Result<()> {
    let rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "f.txt", b"hello world").await?;
    let (fh, _) = rig.vfs.open(ino, READ).await?;
    // Truncated by path (a new version, committed at once), then deleted while still open.
    rig.vfs.setattr(ino, None, SetAttr { size: Some(4), ..Default::default() }).await?;
    rig.vfs.unlink(ROOT, "f.txt").await?;
    assert_eq!(read_fh(&rig.vfs, fh).await?, b"hell");
    rig.vfs.release(fh).await?;
    Ok(())
}

#[tokio::test]
async fn an_open_with_o_trunc_survives_a_crash() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let ino = write_file(&rig.vfs, ROOT, "f.txt", b"old content").await?;
    // O_RDONLY|O_TRUNC: truncated at the open, nothing written, never closed.
    rig.vfs.open(ino, OpenMode { write: false, truncate: true, delete_on_close: false }).await?;
    rig.remount().await;
    rig.vfs.upload_pending().await?;
    assert_eq!(rig.fake.read("/f.txt")?, b"");
    Ok(())
}

#[tokio::test]
async fn a_block_rewritten_after_a_truncation_survives_a_crash() -> anyhow::Result<()> {
    let mut rig = Rig::new().await;
    let (attr, fh) = rig.vfs.create(ROOT, "f.bin", WRITE, false).await?;
    let old: Vec<u8> = (0..17).collect();
    rig.vfs.write(fh, 0, &old).await?;
    rig.vfs.fsync(fh).await?;
    // Block 1 changes (journaled), then the file shrinks into block 0, which is then rewritten
    // whole: block 0 is dirty now, block 1 gone, and the journal must say so.
    rig.vfs.write(fh, 17, b"x").await?;
    rig.vfs.setattr(attr.ino, Some(fh), SetAttr { size: Some(1), ..Default::default() }).await?;
    let new = [9u8; 16];
    rig.vfs.write(fh, 0, &new).await?;
    // Killed with the file open: the next mount uploads what the journal and staging file hold.
    rig.remount().await;
    rig.vfs.upload_pending().await?;
    assert_eq!(rig.fake.read("/f.bin")?, new, "the old block 0 came back");
    Ok(())
}
