//! POSIX behaviour programs rely on (issue 18 part 6), checked on the core: link counts of
//! open files that lost their name, directory time stamps, over-long names, and how many
//! gateway calls a folder move costs while its files still wait for upload.

use super::*;

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
