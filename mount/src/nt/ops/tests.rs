//! The callbacks' work against the core on the in-memory gateway: what Windows would see.

use std::sync::Arc;

use crate::core::blocks::BlockCache;
use crate::core::fake::FakeGateway;
use crate::core::remote::Remote;
use crate::core::{Vfs, VfsConfig};

use super::super::info::{FILE_ATTRIBUTE_ARCHIVE, FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_READONLY};
use super::super::request::{
    FILE_DELETE_ON_CLOSE, FILE_DIRECTORY_FILE, FILE_NON_DIRECTORY_FILE, FILE_WRITE_DATA, GENERIC_WRITE,
};
use super::super::status::{ntstatus, ntstatus::*};
use super::*;

const GENERIC_READ: u32 = 0x8000_0000;
const BS: u64 = 16;

struct Rig {
    fake: FakeGateway,
    vfs: Arc<Vfs>,
    _dir: tempfile::TempDir,
}

fn rig() -> Rig {
    let fake = FakeGateway::new(BS);
    let dir = tempfile::tempdir().expect("temp dir");
    let remote: Arc<dyn Remote> = Arc::new(fake.clone());
    let cache = BlockCache::open(remote.clone(), None, 0, 1 << 20, BS).expect("memory-only cache");
    let vfs = Vfs::new(
        remote,
        Arc::new(cache),
        VfsConfig {
            staging_dir: dir.path().join("staging"),
            block_size: BS,
            host: "testhost".into(),
            async_close: false,
            upload_delay: std::time::Duration::ZERO,
        },
    );
    Rig { fake, vfs, _dir: dir }
}

fn w(path: &str) -> Vec<u16> {
    path.encode_utf16().collect()
}

/// The NTSTATUS a failed call answers with.
fn status<T: std::fmt::Debug>(r: VfsResult<T>) -> i32 {
    ntstatus(&r.expect_err("the call should fail"))
}

/// Creates `path` with `body` and closes it (the core uploads at the last release).
async fn put(vfs: &Vfs, path: &str, body: &[u8]) -> Node {
    let (node, _) = create(vfs, &w(path), 0, 0).await.expect("create");
    let (n, _) = write(vfs, node, body, 0, false, false).await.expect("write");
    assert_eq!(n as usize, body.len());
    vfs.release(node.fh).await.expect("release");
    node
}

async fn open_rw(vfs: &Vfs, path: &str) -> Node {
    open(vfs, &w(path), FILE_NON_DIRECTORY_FILE, FILE_WRITE_DATA | GENERIC_READ).await.expect("open").0
}

#[tokio::test]
async fn create_and_open_by_path() {
    let r = rig();
    let (d, info) = create(&r.vfs, &w("\\Docs"), FILE_DIRECTORY_FILE, 0).await.expect("mkdir");
    assert!(d.is_dir);
    assert_eq!(info.file_attributes, FILE_ATTRIBUTE_DIRECTORY);
    put(&r.vfs, "\\Docs\\a.txt", b"hello").await;
    assert_eq!(r.fake.read("/Docs/a.txt").expect("uploaded"), b"hello");

    // Case-insensitive, and the information is the file's.
    let (f, info) = open(&r.vfs, &w("\\DOCS\\A.TXT"), 0, GENERIC_READ).await.expect("open");
    assert!(!f.is_dir);
    assert_eq!((info.file_size, info.allocation_size, info.file_attributes), (5, 4096, FILE_ATTRIBUTE_ARCHIVE));
    assert_eq!(info.index_number, f.ino);
    // Opened without write access: writes are refused.
    assert_eq!(status(write(&r.vfs, f, b"x", 0, false, false).await), STATUS_ACCESS_DENIED);

    let table: [(&str, u32, u32, i32); 5] = [
        ("\\Docs\\a.txt", FILE_DIRECTORY_FILE, GENERIC_READ, STATUS_NOT_A_DIRECTORY),
        ("\\Docs", FILE_NON_DIRECTORY_FILE, GENERIC_READ, STATUS_FILE_IS_A_DIRECTORY),
        ("\\Docs\\missing.txt", 0, GENERIC_READ, STATUS_OBJECT_NAME_NOT_FOUND),
        ("\\missing\\a.txt", 0, GENERIC_READ, STATUS_OBJECT_NAME_NOT_FOUND),
        // Through a file as if it were a directory.
        ("\\Docs\\a.txt\\x", 0, GENERIC_READ, STATUS_NOT_A_DIRECTORY),
    ];
    for (path, options, access, want) in table {
        let got = open(&r.vfs, &w(path), options, access).await.map(|(n, _)| n);
        assert_eq!(got.as_ref().map_err(ntstatus), Err(want), "{path} options={options:#x}: {got:?}");
    }

    // The root opens as a directory and cannot be created.
    let (root, info) = open(&r.vfs, &w("\\"), FILE_DIRECTORY_FILE, GENERIC_READ).await.expect("open root");
    assert!(root.is_dir && info.file_attributes & FILE_ATTRIBUTE_DIRECTORY != 0);
    let table: [(&str, u32, i32); 6] = [
        ("\\", FILE_DIRECTORY_FILE, STATUS_OBJECT_NAME_COLLISION),
        // Names Windows refuses (the core's rule).
        ("\\Docs\\CON", 0, STATUS_OBJECT_NAME_INVALID),
        ("\\Docs\\a?.txt", FILE_DIRECTORY_FILE, STATUS_OBJECT_NAME_INVALID),
        ("\\", 0, STATUS_OBJECT_NAME_COLLISION),
        ("\\docs\\A.txt", 0, STATUS_OBJECT_NAME_COLLISION),
        ("\\docs", FILE_DIRECTORY_FILE, STATUS_OBJECT_NAME_COLLISION),
    ];
    for (path, options, want) in table {
        assert_eq!(status(create(&r.vfs, &w(path), options, 0).await), want, "{path}");
    }
    let bad = [u16::from(b'\\'), 0xDC00];
    assert_eq!(status(create(&r.vfs, &bad, 0, 0).await), STATUS_OBJECT_NAME_INVALID);
}

#[tokio::test]
async fn read_only_from_the_attributes() {
    let r = rig();
    let (f, info) = create(&r.vfs, &w("\\ro.txt"), 0, FILE_ATTRIBUTE_READONLY | FILE_ATTRIBUTE_ARCHIVE)
        .await
        .expect("create read-only");
    // The creating handle still writes (as on NTFS).
    assert_eq!(info.file_attributes, FILE_ATTRIBUTE_ARCHIVE | FILE_ATTRIBUTE_READONLY);
    write(&r.vfs, f, b"data", 0, false, false).await.expect("the creator writes");
    r.vfs.release(f.fh).await.expect("release");
    assert_eq!(
        security_attributes(&r.vfs, &w("\\RO.TXT")).await.expect("attributes"),
        FILE_ATTRIBUTE_ARCHIVE | FILE_ATTRIBUTE_READONLY
    );
    // Opening it for writing, emptying it, deleting it: refused.
    assert_eq!(status(open(&r.vfs, &w("\\ro.txt"), 0, GENERIC_WRITE).await), STATUS_CANNOT_DELETE);
    let (ro, _) = open(&r.vfs, &w("\\ro.txt"), 0, GENERIC_READ).await.expect("open for reading");
    assert_eq!(status(set_delete(&r.vfs, ro, true).await), STATUS_CANNOT_DELETE);
    // Clearing the attribute (SetBasicInfo) lets it be written again.
    let info = set_basic_info(&r.vfs, ro, FILE_ATTRIBUTE_ARCHIVE, 0).await.expect("clear read-only");
    assert_eq!(info.file_attributes, FILE_ATTRIBUTE_ARCHIVE);
    r.vfs.release(ro.fh).await.expect("release");
    let rw = open_rw(&r.vfs, "\\ro.txt").await;
    r.vfs.release(rw.fh).await.expect("release");
}

#[tokio::test]
async fn writes_append_and_constrained_io() {
    let r = rig();
    let f = put(&r.vfs, "\\f.bin", b"0123456789").await;
    let f = Node { fh: open_rw(&r.vfs, "\\f.bin").await.fh, ..f };
    // (offset, data, write_to_eof, constrained_io) → (written, size after, content after)
    type Case = (u64, &'static [u8], bool, bool, u32, &'static [u8]);
    let table: [Case; 6] = [
        // Append: at the end whatever the offset says.
        (0, b"AB", true, false, 2, b"0123456789AB"),
        // Constrained: cut at the end; at or past it nothing, and the size stays.
        (10, b"xyz", false, true, 2, b"0123456789xy"),
        (12, b"xyz", false, true, 0, b"0123456789xy"),
        (99, b"xyz", false, true, 0, b"0123456789xy"),
        // Both: the offset given, constrained.
        (0, b"abcdefghijklmnop", true, true, 12, b"abcdefghijkl"),
        // Plain: anywhere, growing the file.
        (14, b"!", false, false, 1, b"abcdefghijkl\0\0!"),
    ];
    for (offset, data, eof, constrained, n, after) in table {
        let (got, info) = write(&r.vfs, f, data, offset, eof, constrained).await.expect("write");
        assert_eq!(
            (got, info.file_size),
            (n, after.len() as u64),
            "offset={offset} eof={eof} constrained={constrained}"
        );
        let mut buf = vec![0u8; 64];
        let Read::Bytes(len) = read(&r.vfs, f, &mut buf, 0).await.expect("read") else { panic!("empty file") };
        assert_eq!(&buf[..len as usize], after);
    }
    r.vfs.release(f.fh).await.expect("release");
    assert_eq!(r.fake.read("/f.bin").expect("uploaded"), b"abcdefghijkl\0\0!");
}

#[tokio::test]
async fn reads_end_with_end_of_file() {
    let r = rig();
    put(&r.vfs, "\\f.txt", b"hello").await;
    let (f, _) = open(&r.vfs, &w("\\f.txt"), 0, GENERIC_READ).await.expect("open");
    let mut buf = [0u8; 3];
    let table: [(u64, usize, Read, &[u8]); 6] = [
        (0, 3, Read::Bytes(3), b"hel"),
        (3, 3, Read::Bytes(2), b"lo"),
        (4, 1, Read::Bytes(1), b"o"),
        (5, 3, Read::EndOfFile, b""),
        (500, 3, Read::EndOfFile, b""),
        // An empty buffer is no read past the end.
        (500, 0, Read::Bytes(0), b""),
    ];
    for (offset, len, want, data) in table {
        let got = read(&r.vfs, f, &mut buf[..len], offset).await.expect("read");
        assert_eq!(got, want, "offset={offset} len={len}");
        if let Read::Bytes(n) = got {
            assert_eq!(&buf[..n as usize], data);
        }
    }
}

#[tokio::test]
async fn file_size_allocation_and_overwrite() {
    let r = rig();
    put(&r.vfs, "\\f.txt", b"0123456789").await;
    let f = open_rw(&r.vfs, "\\f.txt").await;
    // (new size, allocation?, size after)
    let table = [
        (20, true, 10), // a bigger allocation is not a size
        (10, true, 10),
        (20, false, 20),
        (20, false, 20),
        (8, true, 8), // an allocation below the size truncates
        (4, false, 4),
        (0, false, 0),
    ];
    for (size, alloc, want) in table {
        let info = set_file_size(&r.vfs, f, size, alloc).await.expect("set_file_size");
        assert_eq!(info.file_size, want, "size={size} allocation={alloc}");
    }
    write(&r.vfs, f, b"abc", 0, false, false).await.expect("write");
    // Overwrite empties; supersede replaces the read-only bit, overwrite adds it.
    let info = overwrite(&r.vfs, f, FILE_ATTRIBUTE_ARCHIVE, false).await.expect("overwrite");
    assert_eq!((info.file_size, info.file_attributes), (0, FILE_ATTRIBUTE_ARCHIVE));
    write(&r.vfs, f, b"abc", 0, false, false).await.expect("write");
    let info = overwrite(&r.vfs, f, FILE_ATTRIBUTE_READONLY, true).await.expect("supersede");
    assert_eq!((info.file_size, info.file_attributes), (0, FILE_ATTRIBUTE_ARCHIVE | FILE_ATTRIBUTE_READONLY));
    let info = flush(&r.vfs, f).await.expect("flush");
    assert_eq!(info.file_size, 0);
    r.vfs.release(f.fh).await.expect("release");
    assert_eq!(r.fake.read("/f.txt").expect("uploaded"), b"");
}

#[tokio::test]
async fn basic_info_sets_the_write_time() {
    let r = rig();
    let f = put(&r.vfs, "\\t.txt", b"x").await;
    let f = Node { fh: open_rw(&r.vfs, "\\t.txt").await.fh, ..f };
    let t = 133_444_736_000_000_000; // 2023-11-14T22:13:20Z
    let info = set_basic_info(&r.vfs, f, 0, t).await.expect("set time");
    assert_eq!((info.last_write_time, info.creation_time), (t, t));
    // Setting a time changes the file's metadata: ChangeTime is now, as on NTFS.
    assert!(info.change_time > t, "{}", info.change_time);
    // 0 and -1 leave it alone.
    for keep in [0, u64::MAX] {
        let info = set_basic_info(&r.vfs, f, 0, keep).await.expect("keep time");
        assert_eq!(info.last_write_time, t, "{keep}");
    }
    r.vfs.release(f.fh).await.expect("release");
}

#[tokio::test]
async fn listings() {
    let r = rig();
    create(&r.vfs, &w("\\d"), FILE_DIRECTORY_FILE, 0).await.expect("mkdir");
    let long = "a".repeat(255);
    put(&r.vfs, "\\d\\x.txt", b"12345").await;
    put(&r.vfs, &format!("\\d\\{long}"), b"").await;
    let names = |l: &[Listed]| l.iter().map(|e| String::from_utf16_lossy(&e.name)).collect::<Vec<_>>();

    // The root: no "." or "..".
    let (root, _) = open(&r.vfs, &w("\\"), 0, GENERIC_READ).await.expect("open root");
    let listed = list(&r.vfs, root).await.expect("list root");
    assert_eq!(names(&listed), ["d"]);
    assert_eq!(listed[0].info.file_attributes, FILE_ATTRIBUTE_DIRECTORY);

    // Elsewhere "." and ".." first, with the directory's own information; a name of exactly
    // 255 UTF-16 units is listed.
    let (d, d_info) = open(&r.vfs, &w("\\d"), 0, GENERIC_READ).await.expect("open dir");
    let listed = list(&r.vfs, d).await.expect("list");
    let mut got = names(&listed);
    got[2..].sort();
    assert_eq!(got, [".", "..", long.as_str(), "x.txt"]);
    assert_eq!((listed[0].info, listed[1].info), (d_info, d_info));
    let x = listed.iter().find(|e| e.name == w("x.txt")).expect("x.txt");
    assert_eq!((x.info.file_size, x.info.file_attributes), (5, FILE_ATTRIBUTE_ARCHIVE));
    r.vfs.releasedir(d.fh);

    // More entries than one page of the core's readdir.
    let (many, _) = create(&r.vfs, &w("\\many"), FILE_DIRECTORY_FILE, 0).await.expect("mkdir");
    r.vfs.releasedir(many.fh);
    for i in 0..DIR_PAGE + 3 {
        let (e, _) = create(&r.vfs, &w(&format!("\\many\\e{i:04}")), FILE_DIRECTORY_FILE, 0).await.expect("mkdir");
        r.vfs.releasedir(e.fh);
    }
    let (many, _) = open(&r.vfs, &w("\\many"), 0, GENERIC_READ).await.expect("open");
    let listed = list(&r.vfs, many).await.expect("list");
    let mut got = names(&listed);
    got.sort();
    got.dedup();
    assert_eq!(got.len(), DIR_PAGE + 3 + 2, "every entry once, plus . and ..");
}

#[tokio::test]
async fn delete_disposition_and_cleanup() {
    let r = rig();
    create(&r.vfs, &w("\\d"), FILE_DIRECTORY_FILE, 0).await.expect("mkdir");
    put(&r.vfs, "\\d\\f.txt", b"x").await;

    // A directory with something in it refuses its delete disposition.
    let (d, _) = open(&r.vfs, &w("\\d"), 0, GENERIC_READ).await.expect("open dir");
    assert_eq!(status(set_delete(&r.vfs, d, true).await), STATUS_DIRECTORY_NOT_EMPTY);
    set_delete(&r.vfs, d, false).await.expect("undoing is always fine");

    // A file: the name goes at cleanup, before close.
    let (f, _) = open(&r.vfs, &w("\\d\\F.TXT"), 0, GENERIC_READ).await.expect("open file");
    set_delete(&r.vfs, f, true).await.expect("set_delete");
    delete_at_cleanup(&r.vfs, f, &w("\\d\\F.TXT")).await.expect("cleanup");
    assert_eq!(status(open(&r.vfs, &w("\\d\\f.txt"), 0, GENERIC_READ).await), STATUS_OBJECT_NAME_NOT_FOUND);
    r.vfs.release(f.fh).await.expect("release");
    assert!(!r.fake.tree().contains_key("/d/f.txt"));

    // Now empty, the directory goes too.
    set_delete(&r.vfs, d, true).await.expect("empty now");
    delete_at_cleanup(&r.vfs, d, &w("\\d")).await.expect("cleanup dir");
    r.vfs.releasedir(d.fh);
    assert!(!r.fake.tree().contains_key("/d"));

    // FILE_DELETE_ON_CLOSE at create; meanwhile another file took the name: it stays.
    let (tmp, _) = create(&r.vfs, &w("\\tmp.txt"), FILE_DELETE_ON_CLOSE, 0).await.expect("create");
    rename(&r.vfs, &w("\\tmp.txt"), &w("\\moved.txt"), false).await.expect("rename");
    put(&r.vfs, "\\tmp.txt", b"other").await;
    delete_at_cleanup(&r.vfs, tmp, &w("\\tmp.txt")).await.expect("cleanup");
    r.vfs.release(tmp.fh).await.expect("release");
    assert_eq!(r.fake.read("/tmp.txt").expect("the other file"), b"other");
}

#[tokio::test]
async fn renames() {
    let r = rig();
    put(&r.vfs, "\\a.txt", b"a").await;
    put(&r.vfs, "\\b.txt", b"b").await;
    create(&r.vfs, &w("\\d"), FILE_DIRECTORY_FILE, 0).await.expect("mkdir");
    assert_eq!(status(rename(&r.vfs, &w("\\a.txt"), &w("\\b.txt"), false).await), STATUS_OBJECT_NAME_COLLISION);
    rename(&r.vfs, &w("\\a.txt"), &w("\\b.txt"), true).await.expect("replace");
    rename(&r.vfs, &w("\\b.txt"), &w("\\d\\c.txt"), false).await.expect("move");
    assert_eq!(r.fake.read("/d/c.txt").expect("moved"), b"a");
    let table: [(&str, &str, i32); 3] = [
        ("\\", "\\x", STATUS_INVALID_PARAMETER),
        ("\\d", "\\", STATUS_INVALID_PARAMETER),
        ("\\missing", "\\x", STATUS_OBJECT_NAME_NOT_FOUND),
    ];
    for (from, to, want) in table {
        assert_eq!(status(rename(&r.vfs, &w(from), &w(to), false).await), want, "{from} → {to}");
    }
}

#[tokio::test]
async fn close_releases_in_the_background() {
    let r = rig();
    let (f, _) = create(&r.vfs, &w("\\bg.txt"), 0, 0).await.expect("create");
    write(&r.vfs, f, b"later", 0, false, false).await.expect("write");
    close(&r.vfs, &tokio::runtime::Handle::current(), f);
    // The upload happens on the runtime, after close returned.
    for _ in 0..1000 {
        if r.fake.read("/bg.txt").is_ok() {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(r.fake.read("/bg.txt").expect("uploaded by the spawned release"), b"later");
    // A directory handle is released at once.
    let (d, _) = open(&r.vfs, &w("\\"), 0, GENERIC_READ).await.expect("open root");
    close(&r.vfs, &tokio::runtime::Handle::current(), d);
    assert_eq!(status(list(&r.vfs, d).await), STATUS_INVALID_HANDLE);
}
