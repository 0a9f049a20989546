//! The VFS core: every file-system operation, in terms of the inode table, the local block
//! cache, the write-back staging area and the gateway. Adapters (FUSE, WinFsp) call these
//! methods and translate the results; all Windows semantics live here so both behave alike.
//!
//! This module holds the core's state and what every operation shares (connectivity, cache
//! freshness); the operations are split by concern, each an `impl Vfs` of its own:
//! `attrs` (getattr, lookup, setattr), `dirs` (listings), `handles` (open, create, flush,
//! fsync, release), `read`, `write` (staging copies), `writeback` (commits, conflict copies,
//! the uploader, retries), `namespace` (mkdir, unlink, rmdir, rename, delete disposition) and
//! `feed` (the gateway's change feed). The gateway is behind [`Remote`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use super::blocks::BlockCache;
use super::dirty::{MoveLog, Staged};
use super::problems::Problems;
use super::remote::{Remote, RemoteError};
use super::status::Activity;
use super::tree::{Content, Tree};
use super::types::*;

/// How long attributes fetched from the gateway are trusted when the change feed is not
/// running (with the feed they stay valid until a change says otherwise).
pub(super) const ATTR_TTL: Duration = Duration::from_secs(2);
/// How long a "no such name" answer is trusted without the change feed.
pub(super) const NEGATIVE_TTL: Duration = Duration::from_secs(2);
/// Entries asked per directory page.
pub(super) const PAGE: u32 = 1000;
/// Blocks uploaded concurrently by one commit.
pub(super) const UPLOADS_IN_FLIGHT: usize = 4;

pub struct VfsConfig {
    pub staging_dir: PathBuf,
    pub block_size: u64,
    /// Used in conflict copy names.
    pub host: String,
    /// Write-back: `close` journals the changes and hands them to the uploader
    /// ([`Vfs::run_uploads`]) instead of waiting for the gateway. `fsync` always waits.
    pub async_close: bool,
    /// Write-back: how long a closed file waits in the queue before its upload starts. A
    /// file saved again meanwhile (editors save often; installers and copies rewrite) goes
    /// up once, and a burst of small files is written at local speed first. fsync and
    /// unmount don't wait.
    pub upload_delay: std::time::Duration,
}

/// Commits the uploader runs at once.
pub(super) const COMMITS_IN_FLIGHT: usize = 4;

/// A sequential reader's read-ahead state.
#[derive(Default)]
pub(super) struct ReadAhead {
    pub(super) next_off: u64,
    pub(super) window: u64,
    /// Blocks below this were already asked for.
    pub(super) until: u64,
}

/// An open handle: a file (its mode, and the version it reads if it opened a clean file) or a
/// directory (the listing as far as it was read).
pub(super) enum Handle {
    /// `content`: the version a reader opened, which it keeps reading whatever another device
    /// does meanwhile (close-to-open consistency), but only until this mount changes the file
    /// (`local_changes` moved on): local writes are seen by every handle at once.
    File {
        ino: Ino,
        write: bool,
        content: Option<Arc<Content>>,
        local_changes: u64,
        ra: ReadAhead,
    },
    Dir {
        ino: Ino,
        entries: Vec<(Ino, String)>,
        cursor: Option<String>,
        done: bool,
        generation: u64,
    },
}

pub struct DirEntry {
    pub offset: u64,
    pub name: String,
    pub attr: Attr,
}

pub struct Vfs {
    pub(super) remote: Arc<dyn Remote>,
    pub(super) cache: Arc<BlockCache>,
    pub(super) tree: Mutex<Tree>,
    pub(super) handles: Mutex<HashMap<Fh, Handle>>,
    pub(super) next_fh: AtomicU64,
    pub(super) cfg: VfsConfig,
    pub(super) online: AtomicBool,
    pub(super) feed_ok: AtomicBool,
    pub(crate) activity: Activity,
    /// Changes the gateway refused, until they go up or the user resolves them.
    pub(super) problems: Problems,
    /// Journal records of an earlier run (or of files no longer in the tree) still to upload.
    pub(super) orphans: tokio::sync::Mutex<Vec<Staged>>,
    /// Folder moves the journal records below them do not reflect yet (appended, like the
    /// inode table's renames, under the inode table's lock).
    pub(super) moves: Arc<MoveLog>,
    /// Files closed with changes, waiting for the uploader.
    pub(super) queue: Mutex<std::collections::VecDeque<(Ino, Instant)>>,
    pub(super) queued: tokio::sync::Notify,
    /// The permissions of the shares given to the user (see shares.rs).
    pub(super) shares: Mutex<ShareRights>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Office and similar editors keep an owner file `~$name.docx` next to an open document; it
/// means nothing to any other device, so it lives only in this mount (never uploaded).
pub fn is_local_only(name: &str) -> bool {
    name.starts_with("~$")
}

/// `name (conflict YYYY-MM-DD HHMM host).ext`: where this device's version of a file another
/// device changed meanwhile is kept.
pub fn conflict_name(name: &str, host: &str, now: SystemTime) -> String {
    copy_name(name, "conflict", host, now)
}

/// `name (LABEL YYYY-MM-DD HHMM host).ext`
pub fn copy_name(name: &str, label: &str, host: &str, now: SystemTime) -> String {
    let t = time::OffsetDateTime::from(now);
    let stamp = format!("{:04}-{:02}-{:02} {:02}{:02}", t.year(), u8::from(t.month()), t.day(), t.hour(), t.minute());
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i..]),
        _ => (name, ""),
    };
    let host: String = host.chars().filter(|c| c.is_alphanumeric() || *c == '-').collect();
    format!("{stem} ({label} {stamp} {host}){ext}")
}

impl Vfs {
    pub fn new(remote: Arc<dyn Remote>, cache: Arc<BlockCache>, cfg: VfsConfig) -> Arc<Self> {
        let moves = MoveLog::open(&cfg.staging_dir);
        let orphans = Staged::recover(&cfg.staging_dir, &moves);
        if !orphans.is_empty() {
            tracing::info!(count = orphans.len(), "found writes of an earlier run; uploading them");
        }
        Arc::new(Self {
            remote,
            cache,
            tree: Mutex::new(Tree::default()),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            cfg,
            online: AtomicBool::new(true),
            feed_ok: AtomicBool::new(false),
            activity: Activity::default(),
            problems: Problems::default(),
            orphans: tokio::sync::Mutex::new(orphans),
            moves,
            queue: Mutex::new(Default::default()),
            queued: tokio::sync::Notify::new(),
            shares: Mutex::new(Default::default()),
        })
    }

    /// The gateway this core talks to.
    pub fn remote(&self) -> &Arc<dyn Remote> {
        &self.remote
    }

    pub fn cache(&self) -> &Arc<BlockCache> {
        &self.cache
    }

    pub fn connectivity(&self) -> Connectivity {
        if self.is_online() { Connectivity::Online } else { Connectivity::Offline }
    }

    pub(super) fn is_online(&self) -> bool {
        self.online.load(Ordering::Relaxed)
    }

    /// Whether the change feed is followed (then the cache is trusted until a change says
    /// otherwise).
    pub(super) fn feed_running(&self) -> bool {
        self.feed_ok.load(Ordering::Relaxed)
    }

    pub(super) fn new_fh(&self) -> Fh {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    pub fn set_feed_ok(&self, ok: bool) {
        self.feed_ok.store(ok, Ordering::Relaxed);
    }

    /// Notes the outcome of a gateway call: transport failures flip the mount offline.
    pub(super) fn seen<T>(&self, r: Result<T, RemoteError>) -> VfsResult<T> {
        match r {
            Ok(v) => {
                self.online.store(true, Ordering::Relaxed);
                Ok(v)
            }
            Err(e) => {
                let e = VfsError::from(e);
                if matches!(e, VfsError::Offline) && self.online.swap(false, Ordering::Relaxed) {
                    tracing::warn!("the gateway cannot be reached; serving from the local cache");
                }
                Err(e)
            }
        }
    }

    /// Checks the gateway answers; flips back online when it does.
    pub async fn probe(&self) -> bool {
        let ok = self.remote.info().await.is_ok();
        if ok && !self.online.swap(true, Ordering::Relaxed) {
            tracing::info!("the gateway is reachable again");
        }
        ok
    }

    pub(super) fn fresh(&self, fetched: Option<Instant>) -> bool {
        !self.is_online() || fetched.is_some_and(|t| self.feed_running() || t.elapsed() < ATTR_TTL)
    }

    pub async fn statfs(&self) -> (u64, u64) {
        match self.seen(self.remote.me().await) {
            // Free is what can still be written: older versions and the trash give way to new
            // data (the gateway expires them to make room), so they do not count as taken.
            Ok(me) => {
                let taken = me.usage.current.saturating_add(me.usage.pending);
                match me.quota_bytes {
                    Some(q) => (q, q.saturating_sub(taken)),
                    None => (1 << 50, (1u64 << 50).saturating_sub(taken)),
                }
            }
            Err(_) => (1 << 50, 1 << 49),
        }
    }
}

/// The permissions of the shares given to the user, by the name key of their entry (kept and
/// refreshed by shares.rs).
#[derive(Default)]
pub(super) struct ShareRights {
    pub(super) writable: HashMap<String, bool>,
    pub(super) read_at: Option<Instant>,
}
