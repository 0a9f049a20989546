//! The VFS core: every file-system operation, in terms of the inode table, the local block
//! cache, the write-back staging area and the gateway. Adapters (FUSE, WinFsp) call these
//! methods and translate the results; all Windows semantics live here so both behave alike.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use nimbus_proto::names::{RemotePath, name_key, validate_name};
use nimbus_proto::wire::{BlockRef, ChangeOp, CommitRequest, Entry};

use super::blocks::{BlockCache, parse_hash};
use super::dirty::{RECORD_VERSION, Record, Staged};
use super::remote::{Remote, RemoteError};
use super::status::{Activity, Conflict};
use super::tree::{Content, Tree, parse_time};
use super::types::*;

/// How long attributes fetched from the gateway are trusted when the change feed is not
/// running (with the feed they stay valid until a change says otherwise).
const ATTR_TTL: Duration = Duration::from_secs(2);
/// How long a "no such name" answer is trusted without the change feed.
const NEGATIVE_TTL: Duration = Duration::from_secs(2);
/// Entries asked per directory page.
const PAGE: u32 = 1000;
/// Blocks uploaded concurrently by one commit.
const UPLOADS_IN_FLIGHT: usize = 4;

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
const COMMITS_IN_FLIGHT: usize = 4;

struct ReadAhead {
    next_off: u64,
    window: u64,
    /// Blocks below this were already asked for.
    until: u64,
}

enum Handle {
    File { ino: Ino, write: bool, content: Option<Arc<Content>>, ra: ReadAhead },
    Dir { ino: Ino, entries: Vec<(Ino, String)>, cursor: Option<String>, done: bool, generation: u64 },
}

pub struct DirEntry {
    pub offset: u64,
    pub name: String,
    pub attr: Attr,
}

pub struct Vfs {
    remote: Arc<dyn Remote>,
    cache: Arc<BlockCache>,
    tree: Mutex<Tree>,
    handles: Mutex<HashMap<Fh, Handle>>,
    next_fh: AtomicU64,
    cfg: VfsConfig,
    online: AtomicBool,
    feed_ok: AtomicBool,
    pub activity: Activity,
    /// Journal records of an earlier run (or of files no longer in the tree) still to upload.
    orphans: tokio::sync::Mutex<Vec<Staged>>,
    /// Files closed with changes, waiting for the uploader.
    queue: Mutex<std::collections::VecDeque<(Ino, Instant)>>,
    queued: tokio::sync::Notify,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Office and similar editors keep an owner file `~$name.docx` next to an open document; it
/// means nothing to any other device, so it lives only in this mount (never uploaded).
pub fn is_local_only(name: &str) -> bool {
    name.starts_with("~$")
}

/// `name (conflict YYYY-MM-DD HHMM host).ext`
pub fn conflict_name(name: &str, host: &str, now: SystemTime) -> String {
    let t = time::OffsetDateTime::from(now);
    let stamp = format!("{:04}-{:02}-{:02} {:02}{:02}", t.year(), u8::from(t.month()), t.day(), t.hour(), t.minute());
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i..]),
        _ => (name, ""),
    };
    let host: String = host.chars().filter(|c| c.is_alphanumeric() || *c == '-').collect();
    format!("{stem} (conflict {stamp} {host}){ext}")
}

impl Vfs {
    pub fn new(remote: Arc<dyn Remote>, cache: Arc<BlockCache>, cfg: VfsConfig) -> Arc<Self> {
        let orphans = Staged::recover(&cfg.staging_dir);
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
            orphans: tokio::sync::Mutex::new(orphans),
            queue: Mutex::new(Default::default()),
            queued: tokio::sync::Notify::new(),
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
        if self.online.load(Ordering::Relaxed) { Connectivity::Online } else { Connectivity::Offline }
    }

    pub fn set_feed_ok(&self, ok: bool) {
        self.feed_ok.store(ok, Ordering::Relaxed);
    }

    /// Notes the outcome of a gateway call: transport failures flip the mount offline.
    fn seen<T>(&self, r: Result<T, RemoteError>) -> VfsResult<T> {
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

    fn fresh(&self, fetched: Option<Instant>) -> bool {
        !self.online.load(Ordering::Relaxed)
            || fetched.is_some_and(|t| self.feed_ok.load(Ordering::Relaxed) || t.elapsed() < ATTR_TTL)
    }

    // ---- metadata ----

    pub async fn getattr(&self, ino: Ino) -> VfsResult<Attr> {
        let path = {
            let t = lock(&self.tree);
            let n = t.get(ino)?;
            let local = n.staged.is_some() || n.remote_id.is_none() || n.unlinked;
            if ino == ROOT || local || self.fresh(n.fetched) {
                return Ok(n.attr(ino));
            }
            t.path(ino)?
        };
        match self.seen(self.remote.stat(&path).await) {
            Ok(e) => {
                let mut t = lock(&self.tree);
                let parent = t.get(ino)?.parent;
                let got = t.upsert(parent, &e);
                if got != ino {
                    // The name now belongs to another node: this one is gone.
                    t.orphan(ino);
                    return Err(VfsError::NotFound);
                }
                Ok(t.get(ino)?.attr(ino))
            }
            Err(VfsError::Offline) => Ok(lock(&self.tree).get(ino)?.attr(ino)),
            Err(VfsError::NotFound) => {
                lock(&self.tree).orphan(ino);
                Err(VfsError::NotFound)
            }
            Err(e) => Err(e),
        }
    }

    pub async fn lookup(&self, parent: Ino, name: &str) -> VfsResult<Attr> {
        let key = name_key(name);
        let path = {
            let t = lock(&self.tree);
            let p = t.get(parent)?;
            if p.kind != Kind::Dir {
                return Err(VfsError::NotDir);
            }
            if let Some(&ino) = p.dir.children.get(&key) {
                let n = t.get(ino)?;
                if n.staged.is_some() || n.remote_id.is_none() || self.fresh(n.fetched) {
                    return Ok(n.attr(ino));
                }
            } else if (p.dir.complete && self.fresh(p.fetched))
                || p.dir.negative.get(&key).is_some_and(|t| {
                    !self.online.load(Ordering::Relaxed)
                        || self.feed_ok.load(Ordering::Relaxed)
                        || t.elapsed() < NEGATIVE_TTL
                })
            {
                return Err(VfsError::NotFound);
            }
            // Names the gateway would refuse cannot exist there.
            if validate_name(name).is_err() {
                return Err(VfsError::NotFound);
            }
            t.path(parent)?.join(name)?
        };
        match self.seen(self.remote.stat(&path).await) {
            Ok(e) => {
                let mut t = lock(&self.tree);
                let ino = t.upsert(parent, &e);
                Ok(t.get(ino)?.attr(ino))
            }
            Err(VfsError::NotFound) | Err(VfsError::NotDir) => {
                let mut t = lock(&self.tree);
                if let Some(old) = t.child(parent, name)
                    && t.get(old).is_ok_and(|n| n.remote_id.is_some() && n.staged.is_none())
                {
                    t.orphan(old);
                }
                if let Ok(p) = t.get_mut(parent) {
                    p.dir.negative.insert(key, Instant::now());
                }
                Err(VfsError::NotFound)
            }
            Err(VfsError::Offline) => {
                let t = lock(&self.tree);
                match t.child(parent, name) {
                    Some(ino) => Ok(t.get(ino)?.attr(ino)),
                    None => Err(VfsError::NotFound),
                }
            }
            Err(e) => Err(e),
        }
    }

    pub async fn setattr(&self, ino: Ino, fh: Option<Fh>, set: SetAttr) -> VfsResult<Attr> {
        if let Some(ro) = set.readonly {
            lock(&self.tree).get_mut(ino)?.readonly = ro;
        }
        if let Some(size) = set.size {
            let (kind, readonly, has_writer) = {
                let t = lock(&self.tree);
                let n = t.get(ino)?;
                (n.kind, n.readonly, n.writers > 0)
            };
            if kind == Kind::Dir {
                return Err(VfsError::IsDir);
            }
            let via_handle =
                fh.is_some_and(|fh| matches!(lock(&self.handles).get(&fh), Some(Handle::File { write: true, .. })));
            if readonly && !via_handle {
                return Err(VfsError::ReadOnly);
            }
            {
                let mut st = self.staged_locked(ino).await?;
                for b in st.needs_fill_for_resize(size) {
                    self.fill_from_base(&mut st, b).await?;
                }
                if st.resize(size)? {
                    st.persist(false)?;
                }
                let mut t = lock(&self.tree);
                let n = t.get_mut(ino)?;
                n.size = size;
                n.mtime = SystemTime::now();
                n.mtime_override = None;
            }
            // truncate(2) on a path that nobody has open for writing: commit now.
            if !has_writer && !via_handle {
                self.commit(ino, false).await?;
            }
        }
        let mut t = lock(&self.tree);
        let n = t.get_mut(ino)?;
        if let Some(m) = set.mtime {
            // Kept locally (the gateway stamps versions itself) for as long as the content
            // stays the version it was set on.
            n.mtime = m;
            n.mtime_override = Some(m);
        }
        Ok(n.attr(ino))
    }

    pub async fn mkdir(&self, parent: Ino, name: &str) -> VfsResult<Attr> {
        let name = validate_name(name)?;
        let path = {
            let t = lock(&self.tree);
            if t.child(parent, &name).is_some_and(|c| t.get(c).is_ok_and(|n| !n.unlinked)) {
                return Err(VfsError::Exists);
            }
            t.path(parent)?.join(&name)?
        };
        if self.lookup(parent, &name).await.is_ok() {
            return Err(VfsError::Exists);
        }
        let e = self.seen(self.remote.mkdir(&path).await)?;
        let mut t = lock(&self.tree);
        let ino = t.upsert(parent, &e);
        let n = t.get_mut(ino)?;
        // Just made here: known empty, so lookups inside need no gateway call.
        if n.dir.children.is_empty() {
            n.dir.complete = true;
        }
        Ok(n.attr(ino))
    }

    // ---- directories ----

    pub fn opendir(&self, ino: Ino) -> VfsResult<Fh> {
        let t = lock(&self.tree);
        let n = t.get(ino)?;
        if n.kind != Kind::Dir {
            return Err(VfsError::NotDir);
        }
        let use_cache = n.dir.complete && (self.fresh(n.fetched) || ino == ROOT && self.fresh(Some(Instant::now())));
        let offline = !self.online.load(Ordering::Relaxed);
        let (entries, done) = if use_cache || offline {
            let mut v: Vec<(Ino, String)> = n
                .dir
                .children
                .values()
                .filter_map(|c| t.nodes.get(c).filter(|n| !n.unlinked).map(|n| (*c, n.name.clone())))
                .collect();
            v.sort_by_cached_key(|(_, name)| name_key(name));
            (v, true)
        } else {
            (Vec::new(), false)
        };
        let generation = n.dir.generation;
        drop(t);
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, Handle::Dir { ino, entries, cursor: None, done, generation });
        Ok(fh)
    }

    /// Entries from `offset` on (`.` and `..` are the adapter's business), fetching further
    /// pages from the gateway as the reader gets to them.
    pub async fn readdir(&self, fh: Fh, offset: u64, max: usize) -> VfsResult<Vec<DirEntry>> {
        loop {
            let (ino, need_more, cursor) = {
                let h = lock(&self.handles);
                let Some(Handle::Dir { ino, entries, cursor, done, .. }) = h.get(&fh) else {
                    return Err(VfsError::BadHandle);
                };
                (*ino, !*done && (entries.len() as u64) < offset + max as u64, cursor.clone())
            };
            if !need_more {
                break;
            }
            let path = lock(&self.tree).path(ino)?;
            let page = match self.seen(self.remote.list_dir_page(&path, cursor.as_deref(), Some(PAGE)).await) {
                Ok(p) => p,
                Err(VfsError::Offline) => {
                    // Finish from what the cache knows.
                    let mut h = lock(&self.handles);
                    if let Some(Handle::Dir { entries, done, .. }) = h.get_mut(&fh) {
                        let t = lock(&self.tree);
                        if let Ok(n) = t.get(ino) {
                            let have: std::collections::HashSet<Ino> = entries.iter().map(|e| e.0).collect();
                            for c in n.dir.children.values().filter(|c| !have.contains(c)) {
                                if let Some(cn) = t.nodes.get(c) {
                                    entries.push((*c, cn.name.clone()));
                                }
                            }
                        }
                        *done = true;
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut t = lock(&self.tree);
            let new: Vec<(Ino, String)> = page.entries.iter().map(|e| (t.upsert(ino, e), e.name.clone())).collect();
            let mut h = lock(&self.handles);
            if let Some(Handle::Dir { entries, cursor, done, generation, .. }) = h.get_mut(&fh) {
                entries.extend(new);
                *cursor = page.next_cursor.clone();
                if page.next_cursor.is_none() {
                    *done = true;
                    // Files created here and not uploaded yet are part of the directory too.
                    let listed: std::collections::HashSet<Ino> = entries.iter().map(|e| e.0).collect();
                    if let Ok(n) = t.get(ino) {
                        let mut local: Vec<(Ino, String)> = n
                            .dir
                            .children
                            .values()
                            .filter(|c| !listed.contains(c))
                            .filter_map(|c| {
                                t.nodes
                                    .get(c)
                                    .filter(|n| n.remote_id.is_none() && !n.unlinked)
                                    .map(|n| (*c, n.name.clone()))
                            })
                            .collect();
                        entries.append(&mut local);
                    }
                    // Children the gateway no longer lists are gone.
                    let stale: Vec<Ino> = t
                        .get(ino)
                        .map(|n| n.dir.children.values().filter(|c| !listed.contains(c)).copied().collect())
                        .unwrap_or_default();
                    for c in stale {
                        if t.get(c).is_ok_and(|n| n.remote_id.is_some() && n.staged.is_none()) {
                            t.orphan(c);
                        }
                    }
                    if let Ok(n) = t.get_mut(ino)
                        && n.dir.generation == *generation
                    {
                        n.dir.complete = true;
                        n.dir.negative.clear();
                        n.fetched = Some(Instant::now());
                    }
                }
            }
        }
        let h = lock(&self.handles);
        let Some(Handle::Dir { entries, .. }) = h.get(&fh) else { return Err(VfsError::BadHandle) };
        let t = lock(&self.tree);
        Ok(entries
            .iter()
            .enumerate()
            .skip(offset as usize)
            .take(max)
            .filter_map(|(i, (ino, name))| {
                t.nodes.get(ino).map(|n| DirEntry { offset: i as u64 + 1, name: name.clone(), attr: n.attr(*ino) })
            })
            .collect())
    }

    pub fn releasedir(&self, fh: Fh) {
        lock(&self.handles).remove(&fh);
    }

    // ---- files ----

    async fn fill_from_base(&self, st: &mut Staged, b: u64) -> VfsResult<()> {
        let Some(base) = st.base_block(b).cloned() else {
            st.mark_present(b);
            return Ok(());
        };
        let hash = parse_hash(&base.hash)?;
        let data = self.cache.read(hash, base.size, 0, base.size as usize, true).await?;
        st.fill(b, &data)
    }

    /// The node's current content description (manifest), fetched if unknown or stale.
    async fn content(&self, ino: Ino) -> VfsResult<Option<Arc<Content>>> {
        let path = {
            let t = lock(&self.tree);
            let n = t.get(ino)?;
            if n.remote_id.is_none() {
                return Ok(None);
            }
            if let Some(c) = &n.content
                && (Some(c.version) == n.version && self.fresh(n.fetched))
            {
                return Ok(Some(c.clone()));
            }
            t.path(ino)?
        };
        let m = match self.seen(self.remote.get_manifest(&path).await) {
            Ok(m) => m,
            Err(VfsError::Offline) => return Ok(lock(&self.tree).get(ino)?.content.clone()),
            Err(e) => return Err(e),
        };
        let blocks = m.blocks.iter().map(|b| Ok((parse_hash(&b.hash)?, b.size))).collect::<VfsResult<Vec<_>>>()?;
        let c = Arc::new(Content { version: m.version, size: m.size, block_size: m.block_size, blocks });
        let mut t = lock(&self.tree);
        let n = t.get_mut(ino)?;
        if n.staged.is_none() {
            if n.mtime_override.is_none() || n.version != Some(m.version) {
                n.mtime_override = None;
                n.mtime = parse_time(&m.modified);
            }
            n.version = Some(m.version);
            n.size = m.size;
            n.fetched = Some(Instant::now());
        }
        n.content = Some(c.clone());
        Ok(Some(c))
    }

    /// The node's staging area, created from its current content if it has none.
    async fn stage(&self, ino: Ino, truncate: bool) -> VfsResult<Arc<tokio::sync::Mutex<Staged>>> {
        loop {
            if let Some(s) = self.stage_once(ino, truncate).await? {
                return Ok(s);
            }
        }
    }

    /// The node's staging area, locked. A commit may finish and discard the staging area
    /// while this waits for its lock (a truncate by path right as the uploader runs): then
    /// the change goes into a fresh one, never into the discarded copy.
    async fn staged_locked(&self, ino: Ino) -> VfsResult<tokio::sync::OwnedMutexGuard<Staged>> {
        loop {
            let g = self.stage(ino, false).await?.lock_owned().await;
            if !g.is_discarded() {
                return Ok(g);
            }
        }
    }

    /// One attempt of [`Self::stage`]; `None` when the existing staging area turned out to be
    /// discarded meanwhile.
    async fn stage_once(&self, ino: Ino, truncate: bool) -> VfsResult<Option<Arc<tokio::sync::Mutex<Staged>>>> {
        let existing = lock(&self.tree).get(ino)?.staged.clone();
        if let Some(s) = existing {
            if truncate {
                let mut st = s.lock().await;
                if st.is_discarded() {
                    return Ok(None);
                }
                st.resize(0)?;
                st.rec.changed = true;
                st.persist(false)?;
                lock(&self.tree).get_mut(ino)?.size = 0;
            }
            return Ok(Some(s));
        }
        let content = if truncate { None } else { self.content(ino).await? };
        let mut t = lock(&self.tree);
        let path = t.path(ino)?;
        let n = t.get_mut(ino)?;
        if let Some(s) = n.staged.clone() {
            return Ok(Some(s));
        }
        let base_blocks: Vec<BlockRef> = match &content {
            Some(c) => c
                .blocks
                .iter()
                .map(|(h, s)| BlockRef { hash: blake3::Hash::from_bytes(*h).to_hex().to_string(), size: *s })
                .collect(),
            None => Vec::new(),
        };
        let size = if truncate { 0 } else { content.as_ref().map_or(0, |c| c.size) };
        let rec = Record {
            format: RECORD_VERSION,
            path: path.to_string(),
            base_version: if truncate { n.version } else { content.as_ref().map(|c| c.version).or(n.version) },
            base_blocks,
            block_size: content.as_ref().map_or(self.cfg.block_size, |c| c.block_size),
            size,
            present: Default::default(),
            dirty: Default::default(),
            changed: truncate || n.remote_id.is_none(),
        };
        let st = Arc::new(tokio::sync::Mutex::new(Staged::create(&self.cfg.staging_dir, rec)?));
        n.size = size;
        n.staged = Some(st.clone());
        Ok(Some(st))
    }

    pub async fn open(&self, ino: Ino, mode: OpenMode) -> VfsResult<(Fh, bool)> {
        let (kind, readonly) = {
            let t = lock(&self.tree);
            let n = t.get(ino)?;
            (n.kind, n.readonly)
        };
        if kind == Kind::Dir {
            return Err(VfsError::IsDir);
        }
        if (mode.write || mode.truncate) && readonly {
            return Err(VfsError::ReadOnly);
        }
        let content = if mode.write || mode.truncate {
            self.stage(ino, mode.truncate).await?;
            None
        } else if lock(&self.tree).get(ino)?.staged.is_some() {
            None
        } else {
            self.content(ino).await?
        };
        let keep_cache = {
            let mut t = lock(&self.tree);
            let n = t.get_mut(ino)?;
            n.open += 1;
            if mode.write {
                n.writers += 1;
            }
            n.delete_pending |= mode.delete_on_close;
            let keep = n.staged.is_none() && n.version.is_some() && n.kernel_version == n.version;
            n.kernel_version = if n.staged.is_none() { n.version } else { None };
            keep
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(
            fh,
            Handle::File { ino, write: mode.write, content, ra: ReadAhead { next_off: 0, window: 0, until: 0 } },
        );
        Ok((fh, keep_cache))
    }

    pub async fn create(&self, parent: Ino, name: &str, mode: OpenMode, readonly: bool) -> VfsResult<(Attr, Fh)> {
        let name = validate_name(name)?;
        match self.lookup(parent, &name).await {
            Ok(_) => return Err(VfsError::Exists),
            Err(VfsError::NotFound) => {}
            Err(e) => return Err(e),
        }
        let ino = {
            let mut t = lock(&self.tree);
            if t.get(parent)?.kind != Kind::Dir {
                return Err(VfsError::NotDir);
            }
            t.alloc(parent, &name, Kind::File)
        };
        self.stage(ino, false).await?;
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let attr = {
            let mut t = lock(&self.tree);
            let n = t.get_mut(ino)?;
            n.open += 1;
            n.writers += 1;
            n.readonly = readonly;
            n.delete_pending = mode.delete_on_close;
            n.attr(ino)
        };
        lock(&self.handles).insert(
            fh,
            Handle::File { ino, write: true, content: None, ra: ReadAhead { next_off: 0, window: 0, until: 0 } },
        );
        Ok((attr, fh))
    }

    pub async fn read(&self, fh: Fh, off: u64, size: u32) -> VfsResult<Bytes> {
        let (ino, content) = match lock(&self.handles).get(&fh) {
            Some(Handle::File { ino, content, .. }) => (*ino, content.clone()),
            _ => return Err(VfsError::BadHandle),
        };
        let staged = lock(&self.tree).get(ino)?.staged.clone();
        if let Some(staged) = staged {
            return self.read_staged(&staged, off, size).await;
        }
        let content = match content {
            Some(c) => c,
            None => match self.content(ino).await? {
                Some(c) => c,
                None => return Ok(Bytes::new()),
            },
        };
        let end = (off + size as u64).min(content.size);
        if off >= end {
            return Ok(Bytes::new());
        }
        let bs = content.block_size;
        // Sequential readers get whole blocks into memory and a read-ahead window that
        // doubles up to the cache's read-ahead budget; random readers read just the chunks they need.
        let (sequential, prefetch) = {
            let mut h = lock(&self.handles);
            match h.get_mut(&fh) {
                Some(Handle::File { ra, .. }) => {
                    let seq = off == ra.next_off || (off == 0 && ra.next_off == 0);
                    ra.next_off = end;
                    if seq {
                        // No further ahead than the cache holds until the reader arrives.
                        ra.window = (ra.window * 2).clamp(1, self.cache.budget().ahead as u64);
                        let last = (end - 1) / bs;
                        let from = ra.until.max(last + 1);
                        let to = (last + 1 + ra.window).min(content.blocks.len() as u64);
                        ra.until = ra.until.max(to);
                        (true, from..to)
                    } else {
                        ra.window = 0;
                        ra.until = 0;
                        (false, 0..0)
                    }
                }
                _ => (false, 0..0),
            }
        };
        for b in prefetch {
            if let Some(&(hash, len)) = content.blocks.get(b as usize) {
                let cache = self.cache.clone();
                tokio::spawn(async move {
                    let _ = cache.prefetch(hash, len).await;
                });
            }
        }
        let parts = (off / bs..end.div_ceil(bs)).map(|b| {
            let cache = self.cache.clone();
            let blk = content.blocks.get(b as usize).copied();
            async move {
                let (hash, len) = blk.ok_or_else(|| VfsError::Io("manifest shorter than its size".into()))?;
                let start = b * bs;
                let from = off.max(start) - start;
                let to = end.min(start + len) - start;
                cache.read(hash, len, from as usize, to as usize, sequential).await
            }
        });
        let parts = futures::future::try_join_all(parts).await?;
        if parts.len() == 1 {
            return Ok(parts.into_iter().next().unwrap_or_default());
        }
        let mut out = Vec::with_capacity((end - off) as usize);
        for p in parts {
            out.extend_from_slice(&p);
        }
        Ok(out.into())
    }

    async fn read_staged(&self, staged: &tokio::sync::Mutex<Staged>, off: u64, size: u32) -> VfsResult<Bytes> {
        let st = staged.lock().await;
        let end = (off + size as u64).min(st.rec.size);
        if off >= end {
            return Ok(Bytes::new());
        }
        let bs = st.bs();
        let mut out = Vec::with_capacity((end - off) as usize);
        for b in off / bs..end.div_ceil(bs) {
            let start = b * bs;
            let (from, to) = (off.max(start), end.min(start + bs));
            if st.is_present(b) {
                out.extend_from_slice(&st.read_at(from, (to - from) as usize)?);
            } else {
                let base = st.base_block(b).cloned().ok_or_else(|| VfsError::Io("staged block without base".into()))?;
                let hash = parse_hash(&base.hash)?;
                let data =
                    self.cache.read(hash, base.size, (from - start) as usize, (to - start) as usize, false).await?;
                out.extend_from_slice(&data);
            }
        }
        Ok(out.into())
    }

    pub async fn write(&self, fh: Fh, off: u64, data: &[u8]) -> VfsResult<u32> {
        let ino = match lock(&self.handles).get(&fh) {
            Some(Handle::File { ino, write: true, .. }) => *ino,
            Some(Handle::File { .. }) => return Err(VfsError::Denied),
            _ => return Err(VfsError::BadHandle),
        };
        let mut st = self.staged_locked(ino).await?;
        for b in st.needs_fill(off, data.len() as u64) {
            self.fill_from_base(&mut st, b).await?;
        }
        if st.write(off, data)? {
            st.persist(false)?;
        }
        let size = st.rec.size;
        drop(st);
        let mut t = lock(&self.tree);
        let n = t.get_mut(ino)?;
        n.size = size;
        n.mtime = SystemTime::now();
        n.mtime_override = None;
        Ok(data.len() as u32)
    }

    /// close(2) of one descriptor: uploads what changed. If the gateway can't be reached the
    /// changes stay journaled and go up later; that is not an error for `close`.
    pub async fn flush(&self, fh: Fh) -> VfsResult<()> {
        let ino = match lock(&self.handles).get(&fh) {
            Some(Handle::File { ino, write: true, .. }) => *ino,
            _ => return Ok(()),
        };
        if self.cfg.async_close {
            // Write-back: the release after the last close queues the upload.
            let staged = lock(&self.tree).get(ino)?.staged.clone();
            if let Some(st) = staged {
                st.lock().await.persist(false)?;
            }
            return Ok(());
        }
        // `echo x > f` closes a duplicate descriptor right after the open/truncate: an empty
        // file with nothing written yet is committed by the release that follows, not twice.
        let staged = lock(&self.tree).get(ino)?.staged.clone();
        if let Some(st) = staged {
            let st = st.lock().await;
            if st.rec.size == 0 && st.rec.dirty.is_empty() {
                return Ok(());
            }
        }
        match self.commit(ino, false).await {
            Err(VfsError::Offline) => Ok(()),
            other => other,
        }
    }

    /// fsync(2): returns only once the data is on the server.
    pub async fn fsync(&self, fh: Fh) -> VfsResult<()> {
        let ino = match lock(&self.handles).get(&fh) {
            Some(Handle::File { ino, .. }) => *ino,
            _ => return Ok(()),
        };
        self.commit(ino, true).await
    }

    pub async fn release(&self, fh: Fh) -> VfsResult<()> {
        let Some(Handle::File { ino, write, .. }) = lock(&self.handles).remove(&fh) else {
            return Ok(());
        };
        let (last, last_writer, delete) = {
            let mut t = lock(&self.tree);
            let n = t.get_mut(ino)?;
            n.open = n.open.saturating_sub(1);
            if write {
                n.writers = n.writers.saturating_sub(1);
            }
            (n.open == 0, n.writers == 0, n.delete_pending && n.open == 0)
        };
        // A file deleted on close needs no upload.
        if write && last_writer && !delete && self.cfg.async_close {
            self.enqueue(ino).await?;
        } else if write && last_writer && !delete {
            let r = self.commit(ino, false).await;
            if let Err(e) = &r
                && !matches!(e, VfsError::Offline)
            {
                tracing::warn!(error = %e, "upload on close failed; kept in the journal");
            }
        }
        if delete {
            let (parent, name) = {
                let t = lock(&self.tree);
                let n = t.get(ino)?;
                (n.parent, n.name.clone())
            };
            if !lock(&self.tree).get(ino)?.unlinked {
                self.unlink(parent, &name).await?;
            }
        }
        if last {
            let gone = {
                let mut t = lock(&self.tree);
                let n = t.get_mut(ino)?;
                if n.unlinked { n.staged.take() } else { None }
            };
            if let Some(st) = gone {
                st.lock().await.discard();
            }
        }
        Ok(())
    }

    /// Journals a closed file's changes and queues its upload.
    async fn enqueue(&self, ino: Ino) -> VfsResult<()> {
        let staged = lock(&self.tree).get(ino)?.staged.clone();
        let Some(st) = staged else { return Ok(()) };
        {
            let mut st = st.lock().await;
            // The record already names every dirty block; this catches a size change the
            // last write didn't journal (a no-op otherwise: unchanged records aren't rewritten).
            st.persist(false)?;
        }
        lock(&self.queue).push_back((ino, Instant::now() + self.cfg.upload_delay));
        self.queued.notify_one();
        Ok(())
    }

    /// The uploader of a write-back mount: commits queued files, a few at a time, for as
    /// long as the mount runs. Failures stay journaled for [`Vfs::upload_pending`].
    pub async fn run_uploads(self: Arc<Self>) {
        let mut running = tokio::task::JoinSet::new();
        loop {
            // Entries wait the same delay, so the queue is in due order.
            let (next, wait) = {
                let mut q = lock(&self.queue);
                match q.front() {
                    Some(&(_, due)) if due > Instant::now() => (None, Some(due)),
                    _ => (q.pop_front().map(|(ino, _)| ino), None),
                }
            };
            if let Some(due) = wait {
                tokio::select! {
                    _ = tokio::time::sleep_until(due.into()) => {}
                    Some(_) = running.join_next(), if !running.is_empty() => {}
                }
                continue;
            }
            match next {
                Some(ino) => {
                    if lock(&self.tree).get(ino).is_ok_and(|n| n.writers > 0) {
                        // Opened for writing again: its next close queues it anew.
                        continue;
                    }
                    while running.len() >= COMMITS_IN_FLIGHT {
                        running.join_next().await;
                    }
                    let vfs = self.clone();
                    running.spawn(async move {
                        if let Err(e) = vfs.commit(ino, false).await
                            && !matches!(e, VfsError::Offline)
                        {
                            tracing::warn!(error = %e, "upload failed; kept in the journal, retried later");
                        }
                    });
                }
                None => {
                    tokio::select! {
                        _ = self.queued.notified() => {}
                        Some(_) = running.join_next(), if !running.is_empty() => {}
                    }
                }
            }
        }
    }

    /// Windows' delete disposition (FILE_DISPOSITION_INFORMATION / delete-on-close): the
    /// file or empty directory goes when its last handle closes. Read-only files refuse.
    pub fn set_delete_pending(&self, ino: Ino, delete: bool) -> VfsResult<()> {
        let mut t = lock(&self.tree);
        let n = t.get_mut(ino)?;
        if delete && n.readonly {
            return Err(VfsError::ReadOnly);
        }
        n.delete_pending = delete;
        Ok(())
    }

    /// Uploads the node's changed blocks and commits them against the base version. On a
    /// conflict the local content is saved next to the file as a conflict copy.
    async fn commit(&self, ino: Ino, durable: bool) -> VfsResult<()> {
        let (staged, path, local_only) = {
            let t = lock(&self.tree);
            let n = t.get(ino)?;
            let Some(s) = n.staged.clone() else { return Ok(()) };
            if n.unlinked {
                return Ok(());
            }
            (s, t.path(ino)?, is_local_only(&n.name))
        };
        if local_only {
            return Ok(());
        }
        let mut st = staged.lock().await;
        if st.is_discarded() {
            // Another commit got there first and finished.
            return Ok(());
        }
        // Renamed or deleted while waiting for the lock: go by what holds now.
        let path = {
            let t = lock(&self.tree);
            match t.get(ino) {
                Ok(n) if !n.unlinked => t.path(ino).unwrap_or(path),
                _ => return Ok(()),
            }
        };
        if !st.has_changes() {
            // Nothing new since the last commit; once nobody writes, the staging copy goes.
            let mut t = lock(&self.tree);
            if let Ok(n) = t.get_mut(ino)
                && n.writers == 0
            {
                n.staged = None;
                st.discard();
            }
            return Ok(());
        }
        st.rec.path = path.to_string();
        self.activity.pending_add(1);
        let result = self.upload(&mut st, &path).await;
        self.activity.pending_add(-1);
        match result {
            Ok(Committed::Same(entry, blocks)) => {
                let parent = lock(&self.tree).get(ino)?.parent;
                let writers = {
                    let mut t = lock(&self.tree);
                    let n = t.get_mut(ino)?;
                    let c = Arc::new(Content {
                        version: entry.version.unwrap_or_default(),
                        size: entry.size,
                        block_size: st.bs(),
                        blocks: blocks.iter().filter_map(|b| Some((parse_hash(&b.hash).ok()?, b.size))).collect(),
                    });
                    n.content = Some(c);
                    n.writers
                };
                st.rec.base_version = entry.version;
                st.rec.base_blocks = blocks;
                st.rec.dirty.clear();
                st.rec.changed = false;
                let mut t = lock(&self.tree);
                let staged_gone = writers == 0;
                if staged_gone {
                    st.discard();
                    if let Ok(n) = t.get_mut(ino) {
                        n.staged = None;
                    }
                } else {
                    st.persist(false)?;
                }
                if let Ok(n) = t.get_mut(ino) {
                    // Our own new version: a time set on it (utimens after close) stays.
                    n.version = entry.version;
                }
                t.upsert(parent, &entry);
                if let Ok(n) = t.get_mut(ino) {
                    n.kernel_version = None;
                }
                Ok(())
            }
            Ok(Committed::Conflict(copy)) => {
                st.discard();
                let mut t = lock(&self.tree);
                let parent = t.get(ino)?.parent;
                if let Ok(n) = t.get_mut(ino) {
                    n.staged = None;
                    n.content = None;
                    n.fetched = None;
                    n.kernel_version = None;
                }
                t.invalidate_dir(parent);
                drop(t);
                self.activity.conflict(Conflict { path: path.to_string(), copy });
                Ok(())
            }
            Err(e) => {
                st.persist(durable || matches!(e, VfsError::Offline))?;
                if !matches!(e, VfsError::Offline) {
                    self.activity.error(format!("{path}: {e}"));
                }
                Err(e)
            }
        }
    }

    /// Uploads a staged file's dirty blocks and commits. Used for live files and for journal
    /// records of an earlier run alike.
    async fn upload(&self, st: &mut Staged, path: &RemotePath) -> VfsResult<Committed> {
        use futures::{StreamExt, TryStreamExt};
        let bs = st.bs();
        let n = st.rec.size.div_ceil(bs);
        let mut blocks: Vec<Option<BlockRef>> = Vec::with_capacity(n as usize);
        let mut changed = Vec::new();
        for b in 0..n {
            let len = st.block_len(b);
            if st.rec.dirty.contains(&b) || st.base_block(b).is_none_or(|r| r.size != len) {
                if !st.is_present(b) {
                    return Err(VfsError::Io(format!("block {b} of {path} is neither staged nor in the base version")));
                }
                changed.push((b, len));
                blocks.push(None);
            } else {
                blocks.push(st.base_block(b).cloned());
            }
        }
        // Changed blocks are read, hashed, sent and cached a few at a time, so a big file is
        // never in memory whole. (Caching before the commit is harmless: blocks are keyed by
        // content, and an unreferenced one is just evicted some day.)
        let staged: &Staged = st;
        self.activity.in_flight_add(1);
        let sent: VfsResult<Vec<(u64, BlockRef)>> = futures::stream::iter(changed)
            .map(|(b, len)| async move {
                let data = Bytes::from(staged.read_at(b * bs, len as usize)?);
                let hash = blake3::hash(&data);
                let hex = hash.to_hex().to_string();
                self.seen(self.remote.put_block(&hex, data.clone()).await)?;
                self.cache.admit(*hash.as_bytes(), data).await;
                Ok((b, BlockRef { hash: hex, size: len }))
            })
            .buffer_unordered(UPLOADS_IN_FLIGHT)
            .try_collect()
            .await;
        self.activity.in_flight_add(-1);
        for (b, r) in sent? {
            blocks[b as usize] = Some(r);
        }
        let blocks: Vec<BlockRef> = blocks
            .into_iter()
            .collect::<Option<_>>()
            .ok_or_else(|| VfsError::Io(format!("{path}: a block is missing from the upload")))?;
        let req = CommitRequest { base_version: st.rec.base_version, blocks: blocks.clone(), force: false };
        match self.seen(self.remote.commit_manifest(path, &req).await) {
            Ok(entry) => Ok(Committed::Same(entry, blocks)),
            Err(VfsError::Conflict) | Err(VfsError::Exists) => match self.already_there(path, &blocks).await? {
                Some(entry) => Ok(Committed::Same(entry, blocks)),
                None => self.commit_conflict_copy(path, blocks).await.map(Committed::Conflict),
            },
            Err(e) => Err(e),
        }
    }

    /// After a refused commit: the entry at `path` if its current version is exactly `blocks`.
    /// That is this very commit when an earlier attempt reached the server but its answer did
    /// not come back (a timeout, a killed mount before it could drop its journal record); a
    /// conflict copy of identical content would be noise.
    async fn already_there(&self, path: &RemotePath, blocks: &[BlockRef]) -> VfsResult<Option<Entry>> {
        let m = match self.seen(self.remote.get_manifest(path).await) {
            Ok(m) => m,
            Err(VfsError::NotFound) | Err(VfsError::IsDir) => return Ok(None),
            Err(e) => return Err(e),
        };
        if m.blocks != blocks {
            return Ok(None);
        }
        let entry = self.seen(self.remote.stat(path).await)?;
        Ok((entry.version == Some(m.version)).then_some(entry))
    }

    async fn commit_conflict_copy(&self, path: &RemotePath, blocks: Vec<BlockRef>) -> VfsResult<String> {
        let parent = path.parent().unwrap_or_else(RemotePath::root);
        let name = path.name().unwrap_or("file");
        let base = conflict_name(name, &self.cfg.host, SystemTime::now());
        for i in 0..100 {
            let candidate = if i == 0 {
                base.clone()
            } else {
                match base.rfind(')') {
                    Some(p) => format!("{} {}{}", &base[..p], i + 1, &base[p..]),
                    None => format!("{base} {}", i + 1),
                }
            };
            let target = parent.join(&candidate)?;
            let req = CommitRequest { base_version: None, blocks: blocks.clone(), force: false };
            match self.seen(self.remote.commit_manifest(&target, &req).await) {
                Ok(_) => {
                    tracing::warn!(path = %path, copy = %target, "conflicting edit: kept this device's version as a conflict copy");
                    return Ok(target.to_string());
                }
                Err(VfsError::Conflict) | Err(VfsError::Exists) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(VfsError::Io(format!("no free conflict-copy name for {path}")))
    }

    /// Uploads every file whose close could not reach the gateway, and journal records of an
    /// earlier run. Called periodically and on reconnect.
    pub async fn upload_pending(&self) -> VfsResult<usize> {
        let mut done = 0;
        let pending: Vec<Ino> = {
            let t = lock(&self.tree);
            t.nodes
                .iter()
                .filter(|(_, n)| n.staged.is_some() && n.writers == 0 && !n.unlinked)
                .map(|(i, _)| *i)
                .collect()
        };
        for ino in pending {
            self.commit(ino, false).await?;
            done += 1;
        }
        let mut orphans = self.orphans.lock().await;
        while let Some(mut st) = orphans.pop() {
            let path = match RemotePath::parse(&st.rec.path) {
                Ok(p) => p,
                Err(_) => {
                    tracing::warn!(path = %st.rec.path, "journal record with an invalid path dropped");
                    st.discard();
                    continue;
                }
            };
            let local = path.name().is_some_and(is_local_only);
            if local || !st.has_changes() {
                st.discard();
                continue;
            }
            self.activity.pending_add(1);
            let r = self.upload(&mut st, &path).await;
            self.activity.pending_add(-1);
            match r {
                Ok(Committed::Same(..)) => {
                    tracing::info!(path = %path, "uploaded a write journaled by an earlier run");
                    st.discard();
                    done += 1;
                }
                Ok(Committed::Conflict(copy)) => {
                    self.activity.conflict(Conflict { path: path.to_string(), copy });
                    st.discard();
                    done += 1;
                }
                Err(e) => {
                    orphans.push(st);
                    return Err(e);
                }
            }
            let mut t = lock(&self.tree);
            if let Some(parent) = path.parent().and_then(|p| t.find(&p.to_string())) {
                t.invalidate_dir(parent);
            }
        }
        Ok(done)
    }

    /// Pending uploads (live files with changes nobody has open, plus earlier runs' records).
    pub async fn pending_count(&self) -> usize {
        let live = {
            let t = lock(&self.tree);
            t.nodes.values().filter(|n| n.staged.is_some() && !n.unlinked).count()
        };
        live + self.orphans.lock().await.len()
    }

    /// Commits everything (clean unmount).
    pub async fn flush_all(&self) -> VfsResult<()> {
        let all: Vec<Ino> = {
            let t = lock(&self.tree);
            t.nodes.iter().filter(|(_, n)| n.staged.is_some() && !n.unlinked).map(|(i, _)| *i).collect()
        };
        for ino in all {
            self.commit(ino, true).await?;
        }
        self.upload_pending().await.map(|_| ())
    }

    // ---- namespace changes ----

    pub async fn unlink(&self, parent: Ino, name: &str) -> VfsResult<()> {
        self.lookup(parent, name).await?;
        let ino = lock(&self.tree).child(parent, name).ok_or(VfsError::NotFound)?;
        // An upload of this file may be running: let it finish first (it may be what created
        // the file on the server), and start no other until the node is gone.
        let mut quiet = self.quiesce(ino).await;
        let (path, remote) = {
            let t = lock(&self.tree);
            let n = t.get(ino)?;
            if n.kind == Kind::Dir {
                return Err(VfsError::IsDir);
            }
            (t.path(ino)?, n.remote_id.is_some())
        };
        if remote {
            match self.seen(self.remote.delete(&path).await) {
                Ok(()) | Err(VfsError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        let mut t = lock(&self.tree);
        t.orphan(ino);
        let n = t.get_mut(ino)?;
        if n.open == 0
            && n.staged.take().is_some()
            && let Some(st) = quiet.as_mut()
        {
            st.discard();
        }
        Ok(())
    }

    /// Waits for any upload of the node to finish and holds its staging area, so no upload
    /// runs while a namespace change involving it is made.
    async fn quiesce(&self, ino: Ino) -> Option<tokio::sync::OwnedMutexGuard<Staged>> {
        let staged = lock(&self.tree).get(ino).ok()?.staged.clone()?;
        Some(staged.lock_owned().await)
    }

    pub async fn rmdir(&self, parent: Ino, name: &str) -> VfsResult<()> {
        self.lookup(parent, name).await?;
        let (ino, path) = {
            let t = lock(&self.tree);
            let ino = t.child(parent, name).ok_or(VfsError::NotFound)?;
            if t.get(ino)?.kind != Kind::Dir {
                return Err(VfsError::NotDir);
            }
            if t.get(ino)?.dir.children.values().any(|c| t.get(*c).is_ok_and(|n| n.remote_id.is_none() && !n.unlinked))
            {
                return Err(VfsError::NotEmpty);
            }
            (ino, t.path(ino)?)
        };
        let page = self.seen(self.remote.list_dir_page(&path, None, Some(1)).await)?;
        if !page.entries.is_empty() {
            return Err(VfsError::NotEmpty);
        }
        self.seen(self.remote.delete(&path).await)?;
        lock(&self.tree).orphan(ino);
        Ok(())
    }

    /// rename(2), replacing the target if `replace` (and it is not a non-empty directory).
    /// A directory of any size moves with one gateway call.
    pub async fn rename(&self, parent: Ino, name: &str, newparent: Ino, newname: &str, replace: bool) -> VfsResult<()> {
        let newname = validate_name(newname)?;
        self.lookup(parent, name).await?;
        let src = lock(&self.tree).child(parent, name).ok_or(VfsError::NotFound)?;
        let target = match self.lookup(newparent, &newname).await {
            Ok(a) => Some(a),
            Err(VfsError::NotFound) => None,
            Err(e) => return Err(e),
        };
        let same_node = target.is_some_and(|a| a.ino == src);
        if let Some(a) = target.filter(|_| !same_node) {
            if !replace {
                return Err(VfsError::Exists);
            }
            let src_kind = lock(&self.tree).get(src)?.kind;
            match (src_kind, a.kind) {
                (Kind::Dir, Kind::File) => return Err(VfsError::NotDir),
                (Kind::File, Kind::Dir) => return Err(VfsError::IsDir),
                (Kind::Dir, Kind::Dir) => {
                    let local_children = {
                        let t = lock(&self.tree);
                        t.get(a.ino)?.dir.children.values().any(|c| {
                            t.get(*c).is_ok_and(|n| !n.unlinked && (n.remote_id.is_none() || n.staged.is_some()))
                        })
                    };
                    if local_children {
                        return Err(VfsError::NotEmpty);
                    }
                    let tpath = lock(&self.tree).path(a.ino)?;
                    let page = self.seen(self.remote.list_dir_page(&tpath, None, Some(1)).await)?;
                    if !page.entries.is_empty() {
                        return Err(VfsError::NotEmpty);
                    }
                    // The gateway never moves onto a directory: the empty one goes first.
                    self.seen(self.remote.delete(&tpath).await)?;
                    lock(&self.tree).orphan(a.ino);
                }
                _ => {}
            }
        }
        // Files being written under the source go up first, so the move carries them.
        let staged: Vec<Ino> = {
            let t = lock(&self.tree);
            let mut v = Vec::new();
            let mut stack = vec![src];
            while let Some(i) = stack.pop() {
                if let Ok(n) = t.get(i) {
                    if n.staged.is_some() {
                        v.push(i);
                    }
                    stack.extend(n.dir.children.values().copied());
                }
            }
            v
        };
        for i in staged {
            let local_only = lock(&self.tree).get(i).is_ok_and(|n| is_local_only(&n.name));
            if !local_only {
                self.commit(i, false).await?;
            }
        }
        // A replaced file's pending upload must neither race the move nor run after it.
        let mut replaced = match target.filter(|a| !same_node && a.kind == Kind::File) {
            Some(a) => self.quiesce(a.ino).await,
            None => None,
        };
        let (from, to, remote) = {
            let t = lock(&self.tree);
            (t.path(src)?, t.path(newparent)?.join(&newname)?, t.get(src)?.remote_id.is_some())
        };
        if remote {
            let entry = self.seen(self.remote.move_entry(&from, &to, true).await)?;
            let mut t = lock(&self.tree);
            t.detach(src);
            if let Some(a) = target.filter(|_| !same_node) {
                t.orphan(a.ino);
                if let Ok(n) = t.get_mut(a.ino)
                    && n.open == 0
                    && n.staged.take().is_some()
                    && let Some(st) = replaced.as_mut()
                {
                    st.discard();
                }
            }
            t.attach(src, newparent, &newname);
            t.upsert(newparent, &entry);
        } else {
            // Never uploaded (a local-only owner file): the move is local.
            {
                let mut t = lock(&self.tree);
                t.detach(src);
                if let Some(a) = target.filter(|_| !same_node) {
                    t.orphan(a.ino);
                }
                t.attach(src, newparent, &newname);
            }
            if !is_local_only(&newname) {
                self.commit(src, false).await?;
            }
        }
        Ok(())
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

    /// Applies one change from the gateway's feed: forget what it makes stale. Changes this
    /// mount already reflects (its own, echoed back) cost nothing: an entry that is where the
    /// change says, with that node id, keeps the directory listing valid.
    pub fn apply_change(&self, op: ChangeOp, path: &str, from: Option<&str>, node_id: Option<i64>) {
        let mut t = lock(&self.tree);
        let split = |p: &str| -> (String, String) {
            match p.rfind('/') {
                Some(i) => (p[..i].to_string(), p[i + 1..].to_string()),
                None => (String::new(), p.to_string()),
            }
        };
        let (parent_path, name) = split(path);
        let parent = t.find(&parent_path);
        let here = parent.and_then(|p| t.child(p, &name));
        let same = |t: &Tree, ino: Option<Ino>| {
            ino.and_then(|i| t.get(i).ok()).is_some_and(|n| n.remote_id.is_some() && n.remote_id == node_id)
        };
        match op {
            ChangeOp::Update => {
                // Membership unchanged: only the entry's attributes and content are stale.
                if let Some(c) = here
                    && let Ok(n) = t.get_mut(c)
                    && n.staged.is_none()
                {
                    n.fetched = None;
                }
            }
            ChangeOp::Create | ChangeOp::Mkdir | ChangeOp::Restore | ChangeOp::Move => {
                // Our own create whose commit answer hasn't come back yet: the name is known to
                // exist here already, and forgetting the listing would send every following
                // lookup in the directory to the gateway. (Someone else's create of the same
                // name makes our commit conflict, which invalidates the directory then.)
                let own_pending = op != ChangeOp::Move
                    && here.and_then(|c| t.get(c).ok()).is_some_and(|n| n.remote_id.is_none() && !n.unlinked);
                if !own_pending
                    && !same(&t, here)
                    && let Some(p) = parent
                {
                    t.invalidate_dir(p);
                    if let Some(c) = here
                        && let Ok(n) = t.get_mut(c)
                        && n.staged.is_none()
                    {
                        n.fetched = None;
                    }
                }
                if let (ChangeOp::Move, Some(from)) = (op, from) {
                    let (fp, fname) = split(from);
                    if let Some(fparent) = t.find(&fp)
                        && let Some(c) = t.child(fparent, &fname)
                        && same(&t, Some(c))
                    {
                        // Still at the old place here: someone else moved it, or the feed is
                        // reporting our own move of a node we have since moved back. Only the
                        // gateway can tell, so ask it (the next lookup or listing) rather than
                        // take the node out of its directory.
                        t.invalidate_dir(fparent);
                        if let Ok(n) = t.get_mut(c)
                            && n.staged.is_none()
                        {
                            n.fetched = None;
                        }
                    }
                }
            }
            ChangeOp::Delete | ChangeOp::Purge => {
                if let Some(c) = here
                    && t.get(c).is_ok_and(|n| n.remote_id.is_some() && (node_id.is_none() || n.remote_id == node_id))
                {
                    t.orphan(c);
                    if let Some(p) = parent {
                        t.invalidate_dir(p);
                    }
                }
            }
        }
    }

    /// Forgets everything cached about the namespace (the feed was reset).
    pub fn invalidate_all(&self) {
        let mut t = lock(&self.tree);
        let inos: Vec<Ino> = t.nodes.keys().copied().collect();
        for i in inos {
            t.invalidate_dir(i);
            if let Ok(n) = t.get_mut(i)
                && n.staged.is_none()
            {
                n.fetched = None;
            }
        }
    }
}

enum Committed {
    Same(Entry, Vec<BlockRef>),
    /// Saved as a conflict copy at this path.
    Conflict(String),
}
