//! Bugs the model test (`model`) found, one focused test each: the shrunk sequence of calls
//! that showed it, written out.

use super::*;

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
