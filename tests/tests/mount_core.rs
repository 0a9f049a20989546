//! The drive's VFS core driven directly (no FUSE, no WinFsp) against a real gateway: the
//! Windows semantics both adapters rely on, checked on Linux. Each test also looks at what the
//! server holds, through the REST API.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, ensure};
use nimbus_e2e::{Gateway, backend_test};
use nimbus_mount::core::blocks::BlockCache;
use nimbus_mount::core::{OpenMode, ROOT, Remote, SetAttr, Vfs, VfsConfig, VfsError, conflict_name};

const WRITE: OpenMode = OpenMode { write: true, truncate: false, delete_on_close: false };
const READ: OpenMode = OpenMode { write: false, truncate: false, delete_on_close: false };

/// A VFS core for a new user of `gw`, with its own cache dir. Returns the user's REST client
/// too, to look at the server side.
async fn core(gw: &Gateway, user: &str) -> anyhow::Result<(Arc<Vfs>, nimbus_e2e::http::Api, tempfile::TempDir)> {
    let (_, api) = gw.user(user, None).await?;
    let client = nimbus_client::Client::new(nimbus_client::ClientOptions {
        base_url: api.base().to_string(),
        token: api.token().map(str::to_string),
        ..Default::default()
    })?;
    let info = client.info().await?;
    let dir = tempfile::tempdir()?;
    let remote: Arc<dyn Remote> = Arc::new(client);
    let cache = BlockCache::open(remote.clone(), Some(&dir.path().join("blocks")), 1 << 30, 64 << 20, info.block_size)
        .map_err(anyhow::Error::msg)?;
    let vfs = Vfs::new(
        remote,
        Arc::new(cache),
        VfsConfig {
            staging_dir: dir.path().join("staging"),
            block_size: info.block_size,
            host: "testhost".into(),
            async_close: false,
            upload_delay: std::time::Duration::ZERO,
        },
    );
    Ok((vfs, api, dir))
}

async fn write_file(vfs: &Vfs, name: &str, body: &[u8]) -> anyhow::Result<u64> {
    let (attr, fh) = vfs.create(ROOT, name, WRITE, false).await?;
    vfs.write(fh, 0, body).await?;
    vfs.release(fh).await?;
    Ok(attr.ino)
}

async fn read_all(vfs: &Vfs, ino: u64) -> anyhow::Result<Vec<u8>> {
    let (fh, _) = vfs.open(ino, READ).await?;
    let mut out = Vec::new();
    loop {
        let chunk = vfs.read(fh, out.len() as u64, 1 << 20).await?;
        if chunk.is_empty() {
            break;
        }
        out.extend_from_slice(&chunk);
    }
    vfs.release(fh).await?;
    Ok(out)
}

async fn names(vfs: &Vfs, dir: u64) -> anyhow::Result<Vec<String>> {
    let fh = vfs.opendir(dir)?;
    let entries = vfs.readdir(fh, 0, 10_000).await?;
    vfs.releasedir(fh);
    Ok(entries.into_iter().map(|e| e.name).collect())
}

backend_test!(
    case_insensitive_lookup_preserves_case,
    only = sqlite_local,
    opts = Default::default(),
    |gw| async move {
        let (vfs, api, _dir) = core(&gw, "alice").await?;
        let ino = write_file(&vfs, "Report.DOCX", b"quarterly").await?;
        for spelling in ["report.docx", "REPORT.docx", "Report.DOCX"] {
            let a = vfs.lookup(ROOT, spelling).await.with_context(|| format!("lookup {spelling}"))?;
            ensure!(a.ino == ino, "{spelling} resolved to another inode");
        }
        ensure!(names(&vfs, ROOT).await? == vec!["Report.DOCX".to_string()], "listing shows the stored spelling");
        // A second file whose name differs only in case is the same name.
        let err = vfs.create(ROOT, "REPORT.docx", WRITE, false).await.err();
        ensure!(matches!(err, Some(VfsError::Exists)), "create of a case variant: {err:?}");
        api.get_file("/Report.DOCX").await?.check(200)?;
        ensure!(api.get_file("/report.docx").await?.body[..] == *b"quarterly", "server matches case-insensitively too");
        // Renaming to another case of the same name keeps one file with the new spelling.
        vfs.rename(ROOT, "Report.DOCX", ROOT, "report.docx", true).await?;
        ensure!(names(&vfs, ROOT).await? == vec!["report.docx".to_string()], "case-only rename");
        ensure!(read_all(&vfs, vfs.lookup(ROOT, "REPORT.DOCX").await?.ino).await? == b"quarterly", "content kept");
        Ok(())
    }
);

backend_test!(windows_name_rules_are_clear_errors, only = sqlite_local, opts = Default::default(), |gw| async move {
    let (vfs, api, _dir) = core(&gw, "alice").await?;
    for bad in ["a:b.txt", "CON", "lpt1.txt", "trailing.", "trailing ", "what?.txt", "pipe|name", "star*", "quote\"d"] {
        match vfs.create(ROOT, bad, WRITE, false).await {
            Err(VfsError::InvalidName(msg)) => ensure!(!msg.is_empty(), "{bad}: empty message"),
            other => anyhow::bail!("create {bad:?}: expected InvalidName, got {:?}", other.map(|(a, _)| a)),
        }
        ensure!(matches!(vfs.mkdir(ROOT, bad).await, Err(VfsError::InvalidName(_))), "mkdir {bad:?}");
        // Lookups of such names simply find nothing (never a mangled name).
        ensure!(matches!(vfs.lookup(ROOT, bad).await, Err(VfsError::NotFound)), "lookup {bad:?}");
    }
    write_file(&vfs, "ok.txt", b"x").await?;
    ensure!(
        matches!(vfs.rename(ROOT, "ok.txt", ROOT, "bad:name", true).await, Err(VfsError::InvalidName(_))),
        "rename to an invalid name"
    );
    ensure!(names(&vfs, ROOT).await? == vec!["ok.txt".to_string()], "nothing else was created");
    let listing = api.get("/api/v1/dirs/").await?;
    let v: serde_json::Value = serde_json::from_slice(&listing.check(200)?.body)?;
    ensure!(v["entries"].as_array().map(Vec::len) == Some(1), "server holds only ok.txt: {v}");
    Ok(())
});

backend_test!(delete_on_close, only = sqlite_local, opts = Default::default(), |gw| async move {
    let (vfs, api, _dir) = core(&gw, "alice").await?;
    // A temp file opened delete-on-close never reaches the server and is gone after close.
    let (a, fh) = vfs.create(ROOT, "scratch.tmp", OpenMode { delete_on_close: true, ..WRITE }, false).await?;
    vfs.write(fh, 0, b"temporary").await?;
    ensure!(vfs.lookup(ROOT, "scratch.tmp").await?.ino == a.ino, "visible while open");
    vfs.release(fh).await?;
    ensure!(matches!(vfs.lookup(ROOT, "scratch.tmp").await, Err(VfsError::NotFound)), "gone after close");
    api.stat("/scratch.tmp").await?.check_error(404, "not_found")?;
    // An existing file marked for deletion goes when its last handle closes, not before.
    let ino = write_file(&vfs, "old.txt", b"old").await?;
    let (fh1, _) = vfs.open(ino, READ).await?;
    let (fh2, _) = vfs.open(ino, READ).await?;
    vfs.set_delete_pending(ino, true)?;
    vfs.release(fh1).await?;
    api.stat("/old.txt").await?.check(200)?;
    vfs.release(fh2).await?;
    api.stat("/old.txt").await?.check_error(404, "not_found")?;
    // Read-only files refuse the delete disposition (Windows STATUS_CANNOT_DELETE).
    let ro = write_file(&vfs, "keep.txt", b"keep").await?;
    vfs.setattr(ro, None, SetAttr { readonly: Some(true), ..Default::default() }).await?;
    ensure!(matches!(vfs.set_delete_pending(ro, true), Err(VfsError::ReadOnly)), "read-only refuses deletion");
    Ok(())
});

backend_test!(rename_replace, only = sqlite_local, opts = Default::default(), |gw| async move {
    let (vfs, api, _dir) = core(&gw, "alice").await?;
    write_file(&vfs, "a.txt", b"new content").await?;
    write_file(&vfs, "b.txt", b"old content").await?;
    ensure!(
        matches!(vfs.rename(ROOT, "a.txt", ROOT, "b.txt", false).await, Err(VfsError::Exists)),
        "no-replace rename onto an existing file"
    );
    vfs.rename(ROOT, "a.txt", ROOT, "b.txt", true).await?;
    ensure!(names(&vfs, ROOT).await? == vec!["b.txt".to_string()], "one file left");
    ensure!(api.get_file("/b.txt").await?.check(200)?.body[..] == *b"new content", "server has the renamed content");
    // Directories: onto an empty directory replaces it, onto a non-empty one is refused.
    let d1 = vfs.mkdir(ROOT, "d1").await?.ino;
    vfs.mkdir(ROOT, "d2").await?;
    let (_, fh) = vfs.create(d1, "inside.txt", WRITE, false).await?;
    vfs.write(fh, 0, b"in d1").await?;
    vfs.release(fh).await?;
    vfs.rename(ROOT, "d1", ROOT, "d2", true).await?;
    ensure!(api.get_file("/d2/inside.txt").await?.check(200)?.body[..] == *b"in d1", "dir replaced an empty dir");
    vfs.mkdir(ROOT, "d3").await?;
    ensure!(
        matches!(vfs.rename(ROOT, "d3", ROOT, "d2", true).await, Err(VfsError::NotEmpty)),
        "rename onto a non-empty directory"
    );
    Ok(())
});

backend_test!(office_owner_files_stay_local, only = sqlite_local, opts = Default::default(), |gw| async move {
    let (vfs, api, _dir) = core(&gw, "alice").await?;
    write_file(&vfs, "Budget.xlsx", b"sheet").await?;
    let owner = write_file(&vfs, "~$Budget.xlsx", b"owner: alice").await?;
    ensure!(read_all(&vfs, owner).await? == b"owner: alice", "readable locally");
    let mut listed = names(&vfs, ROOT).await?;
    listed.sort();
    ensure!(listed == vec!["Budget.xlsx".to_string(), "~$Budget.xlsx".to_string()], "listed: {listed:?}");
    // Never uploaded: no request, no version, no trash entry for other devices to see.
    api.stat("/~$Budget.xlsx").await?.check_error(404, "not_found")?;
    vfs.unlink(ROOT, "~$Budget.xlsx").await?;
    ensure!(matches!(vfs.lookup(ROOT, "~$Budget.xlsx").await, Err(VfsError::NotFound)), "deleted locally");
    let trash: serde_json::Value = serde_json::from_slice(&api.get("/api/v1/trash").await?.check(200)?.body)?;
    ensure!(trash["entries"].as_array().is_some_and(Vec::is_empty), "nothing went to the trash: {trash}");
    Ok(())
});

backend_test!(read_only_attribute, only = sqlite_local, opts = Default::default(), |gw| async move {
    let (vfs, api, _dir) = core(&gw, "alice").await?;
    let ino = write_file(&vfs, "contract.pdf", b"signed").await?;
    let a = vfs.setattr(ino, None, SetAttr { readonly: Some(true), ..Default::default() }).await?;
    ensure!(a.readonly, "attribute set");
    ensure!(matches!(vfs.open(ino, WRITE).await, Err(VfsError::ReadOnly)), "open for writing refused");
    ensure!(
        matches!(
            vfs.setattr(ino, None, SetAttr { size: Some(0), ..Default::default() }).await,
            Err(VfsError::ReadOnly)
        ),
        "truncate refused"
    );
    ensure!(vfs.getattr(ino).await?.readonly, "still read-only");
    ensure!(api.get_file("/contract.pdf").await?.body[..] == *b"signed", "content untouched");
    vfs.setattr(ino, None, SetAttr { readonly: Some(false), ..Default::default() }).await?;
    let (fh, _) = vfs.open(ino, WRITE).await?;
    vfs.write(fh, 0, b"SIGNED").await?;
    vfs.release(fh).await?;
    ensure!(api.get_file("/contract.pdf").await?.body[..] == *b"SIGNED", "writable again");
    Ok(())
});

backend_test!(timestamps, only = sqlite_local, opts = Default::default(), |gw| async move {
    let (vfs, _api, _dir) = core(&gw, "alice").await?;
    let before = SystemTime::now() - Duration::from_secs(5);
    let ino = write_file(&vfs, "t.txt", b"x").await?;
    let m = vfs.getattr(ino).await?.mtime;
    ensure!(m >= before, "a new file's modification time is now");
    let set = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    let a = vfs.setattr(ino, None, SetAttr { mtime: Some(set), ..Default::default() }).await?;
    ensure!(a.mtime == set, "setattr returns the time set");
    ensure!(vfs.getattr(ino).await?.mtime == set, "getattr keeps it");
    Ok(())
});

backend_test!(conflict_copy_keeps_both, only = sqlite_local, opts = Default::default(), |gw| async move {
    let (vfs, api, _dir) = core(&gw, "alice").await?;
    let ino = write_file(&vfs, "notes.txt", b"v1").await?;
    let (fh, _) = vfs.open(ino, WRITE).await?;
    vfs.write(fh, 0, b"mine").await?;
    // Another device saves first.
    api.put_file("/notes.txt", "theirs").await?.check(200)?;
    vfs.release(fh).await?;
    ensure!(api.get_file("/notes.txt").await?.body[..] == *b"theirs", "the other device's save stays");
    let listing: serde_json::Value = serde_json::from_slice(&api.get("/api/v1/dirs/").await?.check(200)?.body)?;
    let copy = listing["entries"]
        .as_array()
        .and_then(|e| e.iter().filter_map(|x| x["name"].as_str()).find(|n| n.starts_with("notes (conflict ")))
        .map(str::to_string)
        .with_context(|| format!("no conflict copy in {listing}"))?;
    ensure!(copy.ends_with(" testhost).txt"), "conflict copy name: {copy}");
    ensure!(api.get_file(&format!("/{copy}")).await?.body[..] == *b"mine", "this device's version kept");
    let snap = vfs.activity_snapshot();
    ensure!(snap.conflicts.len() == 1 && snap.conflicts[0].copy.ends_with(&copy), "reported: {snap:?}");
    Ok(())
});

#[test]
fn conflict_names() {
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000); // 2026-11-18 11:06 UTC
    assert_eq!(conflict_name("report.docx", "laptop", t), "report (conflict 2026-11-18 1106 laptop).docx");
    assert_eq!(conflict_name("Makefile", "pc-1", t), "Makefile (conflict 2026-11-18 1106 pc-1)");
    assert_eq!(conflict_name(".bashrc", "h", t), ".bashrc (conflict 2026-11-18 1106 h)");
    assert_eq!(conflict_name("a.tar.gz", "h", t), "a.tar (conflict 2026-11-18 1106 h).gz");
}
