//! In-process tests of the core against the in-memory gateway (`core::fake`): no server, no
//! FUSE. `faults` injects the gateway's failures one at a time, `journal` round-trips the
//! write-back journal and its recovery, `model` is the reference-model property test,
//! `regressions` holds one focused test for each bug it found, and `posix` the POSIX behaviour
//! programs rely on, `problems` the refused changes shown to the person.

mod faults;
mod journal;
mod model;
mod posix;
mod problems;
mod regressions;

use std::path::Path;
use std::sync::Arc;

use super::blocks::BlockCache;
use super::fake::FakeGateway;
use super::feed::FeedCursor;
use super::remote::Remote;
use super::{Ino, OpenMode, ROOT, Vfs, VfsConfig, VfsResult};

/// Small blocks, so a few bytes make a file of several blocks.
pub(crate) const BS: u64 = 16;

pub(crate) const WRITE: OpenMode = OpenMode { write: true, truncate: false, delete_on_close: false };
pub(crate) const READ: OpenMode = OpenMode { write: false, truncate: false, delete_on_close: false };

/// A core on `fake` with its staging area in `dir` and a memory-only block cache.
/// `async_close`: closes queue their uploads for [`Vfs::run_uploads`] instead of committing.
pub(crate) fn core_on(fake: &FakeGateway, dir: &Path, async_close: bool) -> Arc<Vfs> {
    core_with_delay(fake, dir, async_close, std::time::Duration::ZERO)
}

/// [`core_on`] with closed files waiting `upload_delay` in the uploader's queue.
pub(crate) fn core_with_delay(
    fake: &FakeGateway,
    dir: &Path,
    async_close: bool,
    upload_delay: std::time::Duration,
) -> Arc<Vfs> {
    let remote: Arc<dyn Remote> = Arc::new(fake.clone());
    let cache = BlockCache::open(remote.clone(), None, 0, 1 << 20, BS).expect("memory-only cache");
    Vfs::new(
        remote,
        Arc::new(cache),
        VfsConfig {
            staging_dir: dir.join("staging"),
            block_size: BS,
            host: "testhost".into(),
            async_close,
            upload_delay,
        },
    )
}

/// A fake gateway, a core on it and its feed cursor.
pub(crate) struct Rig {
    pub fake: FakeGateway,
    pub dir: tempfile::TempDir,
    pub vfs: Arc<Vfs>,
    pub feed: FeedCursor,
}

impl Rig {
    pub async fn new() -> Rig {
        let fake = FakeGateway::new(BS);
        let dir = tempfile::tempdir().expect("temp dir");
        let vfs = core_on(&fake, dir.path(), false);
        let mut rig = Rig { fake, dir, vfs, feed: FeedCursor::default() };
        rig.feed().await;
        rig
    }

    /// Applies what the change feed has (the first call only takes the cursor).
    pub async fn feed(&mut self) -> usize {
        self.vfs.poll_changes(&mut self.feed, 0).await.unwrap_or(0)
    }

    /// A new core on the same staging area and gateway (the old one is dropped as a killed
    /// mount would be: nothing flushed), with an empty block cache.
    pub async fn remount(&mut self) {
        self.vfs = core_on(&self.fake, self.dir.path(), false);
        self.feed = FeedCursor::default();
        self.feed().await;
    }
}

pub(crate) async fn write_file(vfs: &Vfs, parent: Ino, name: &str, body: &[u8]) -> VfsResult<Ino> {
    let (attr, fh) = vfs.create(parent, name, WRITE, false).await?;
    vfs.write(fh, 0, body).await?;
    vfs.release(fh).await?;
    Ok(attr.ino)
}

pub(crate) async fn read_all(vfs: &Vfs, ino: Ino) -> VfsResult<Vec<u8>> {
    let (fh, _) = vfs.open(ino, READ).await?;
    let out = read_fh(vfs, fh).await;
    vfs.release(fh).await?;
    out
}

pub(crate) async fn read_fh(vfs: &Vfs, fh: u64) -> VfsResult<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let chunk = vfs.read(fh, out.len() as u64, 40).await?;
        if chunk.is_empty() {
            return Ok(out);
        }
        out.extend_from_slice(&chunk);
    }
}

pub(crate) async fn names(vfs: &Vfs, dir: Ino) -> VfsResult<Vec<String>> {
    let fh = vfs.opendir(dir)?;
    let entries = vfs.readdir(fh, 0, 10_000).await;
    vfs.releasedir(fh);
    Ok(entries?.into_iter().map(|e| e.name).collect())
}

pub(crate) async fn lookup_path(vfs: &Vfs, path: &str) -> VfsResult<Ino> {
    let mut ino = ROOT;
    for c in path.split('/').filter(|c| !c.is_empty()) {
        ino = vfs.lookup(ino, c).await?.ino;
    }
    Ok(ino)
}
