//! Write-back: committing a staged file (upload its changed blocks, commit against the base
//! version, or save a conflict copy), the uploader queue of closed files, retries of what could
//! not go up (and of an earlier run's journal), and the final flush at unmount.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use nimbus_blockcache::verify::Verified;
use nimbus_proto::names::RemotePath;
use nimbus_proto::wire::{BlockRef, CommitRequest, Entry};

use super::blocks::parse_hash;
use super::dirty::Staged;
use super::problems::Subject;
use super::status::Conflict;
use super::tree::Content;
use super::types::*;
use super::vfs::{COMMITS_IN_FLIGHT, UPLOADS_IN_FLIGHT, Vfs, copy_name, is_local_only, lock};

/// How a commit ended.
pub(super) enum Committed {
    Same(Entry, Vec<BlockRef>),
    /// Saved as a conflict copy at this path.
    Conflict(String),
}

/// Queued uploads taken out of the uploader's queue while a rename holds their files (else
/// the uploader, going through the queue in the order the rename locks the files, would keep
/// starting the very upload the rename waits for next). Put back, and the uploader woken, when
/// dropped, whatever the rename's outcome.
pub(super) struct Deferred<'a> {
    vfs: &'a Vfs,
    entries: Vec<(Ino, Instant)>,
}

impl Drop for Deferred<'_> {
    fn drop(&mut self) {
        if self.entries.is_empty() {
            return;
        }
        let mut q = lock(&self.vfs.queue);
        q.extend(self.entries.drain(..));
        // The uploader relies on the queue being in due order.
        q.make_contiguous().sort_by_key(|(_, due)| *due);
        drop(q);
        self.vfs.queued.notify_one();
    }
}

impl Vfs {
    /// Takes these files' queued uploads out of the queue until the returned value is dropped.
    pub(super) fn defer_uploads(&self, inos: &[Ino]) -> Deferred<'_> {
        let set: std::collections::HashSet<Ino> = inos.iter().copied().collect();
        let mut entries = Vec::new();
        lock(&self.queue).retain(|e| {
            let keep = !set.contains(&e.0);
            if !keep {
                entries.push(*e);
            }
            keep
        });
        Deferred { vfs: self, entries }
    }

    /// Journals a closed file's changes and queues its upload.
    pub(super) async fn enqueue(&self, ino: Ino) -> VfsResult<()> {
        let staged = lock(&self.tree).get(ino)?.staged();
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
                    if lock(&self.tree).get(ino).is_ok_and(|n| n.writers() > 0) {
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

    /// Uploads the node's changed blocks and commits them against the base version. On a
    /// conflict the local content is saved next to the file as a conflict copy. A refusal
    /// becomes the file's problem (see `problems`); success, or nothing left to send, ends it.
    pub(super) async fn commit(&self, ino: Ino, durable: bool) -> VfsResult<()> {
        let r = self.commit_inner(ino, durable).await;
        match &r {
            Err(e) => {
                let path = lock(&self.tree).path(ino).map(|p| p.to_string());
                if let Ok(path) = path {
                    self.problems.refused(Subject::File(ino), &path, e);
                }
            }
            Ok(()) => self.problems.cleared(&Subject::File(ino)),
        }
        r
    }

    async fn commit_inner(&self, ino: Ino, durable: bool) -> VfsResult<()> {
        let (staged, path, local_only) = {
            let t = lock(&self.tree);
            let n = t.get(ino)?;
            let Some(s) = n.staged() else { return Ok(()) };
            if n.is_unlinked() {
                return Ok(());
            }
            let path = match t.path(ino) {
                Ok(p) => Some(p),
                // Its folder was deleted elsewhere: no place to commit it (see `save_at_top`).
                Err(_) if t.folder_gone(ino) => None,
                Err(e) => return Err(e),
            };
            (s, path, is_local_only(n.name()))
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
        let (path, moves_seen) = {
            let t = lock(&self.tree);
            match t.get(ino) {
                Ok(n) if !n.is_unlinked() => {
                    let now = match t.path(ino) {
                        Ok(p) => Some(p),
                        Err(_) if t.folder_gone(ino) => None,
                        Err(_) => path,
                    };
                    (now, self.moves.seq())
                }
                _ => return Ok(()),
            }
        };
        if !st.has_changes() {
            // Nothing new since the last commit; once nobody writes, the staging copy goes.
            let mut t = lock(&self.tree);
            if let Ok(n) = t.get_mut(ino)
                && n.writers() == 0
            {
                n.end_staging();
                st.discard();
            }
            return Ok(());
        }
        let Some(path) = path else {
            return self.save_at_top(ino, &mut st, durable).await;
        };
        st.set_path(path.to_string(), moves_seen);
        self.activity.pending_add(1);
        let result = self.upload(&mut st, &path).await;
        self.activity.pending_add(-1);
        match result {
            Ok(Committed::Same(entry, blocks)) => {
                let content = Arc::new(Content {
                    version: entry.version.unwrap_or_default(),
                    size: entry.size,
                    block_size: st.bs(),
                    blocks: blocks.iter().filter_map(|b| Some((parse_hash(&b.hash).ok()?, b.size))).collect(),
                });
                // The staging copy now applies to the new version, if it stays.
                st.rec.base_version = entry.version;
                st.rec.base_blocks = blocks;
                st.rec.dirty.clear();
                st.rec.changed = false;
                let mut t = lock(&self.tree);
                let n = t.get_mut(ino)?;
                let parent = n.parent();
                if n.committed(entry.version, content) {
                    st.discard();
                } else {
                    st.persist(false)?;
                }
                t.upsert(parent, &entry);
                Ok(())
            }
            Ok(Committed::Conflict(copy)) => {
                st.discard();
                let mut t = lock(&self.tree);
                let n = t.get_mut(ino)?;
                let parent = n.parent();
                n.lost_to_conflict();
                t.invalidate_dir(parent);
                // The conflict copy is a new entry there.
                t.entries_changed(&[parent]);
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

    /// A file with changes here whose folder another device deleted: there is nowhere to
    /// commit it, and waiting would leave it pending unseen. As `save-copy` does when the
    /// folder is gone, this device's content goes to a conflict copy at the top of the space,
    /// listed with the conflicts; the node lets go of it. A refusal keeps it journaled.
    async fn save_at_top(&self, ino: Ino, st: &mut Staged, durable: bool) -> VfsResult<()> {
        let name = lock(&self.tree).get(ino)?.name().to_string();
        let top = RemotePath::root().join(&name)?;
        // The path it last had (the record follows this mount's moves), for the status.
        let was = st.rec.path.clone();
        self.activity.pending_add(1);
        let result = match self.send_blocks(st, &top).await {
            Ok(blocks) => self.commit_copy(&top, Some(RemotePath::root()), blocks, "conflict").await,
            Err(e) => Err(e),
        };
        self.activity.pending_add(-1);
        match result {
            Ok(copy) => {
                st.discard();
                let mut t = lock(&self.tree);
                if let Ok(n) = t.get_mut(ino) {
                    n.lost_to_conflict();
                }
                t.invalidate_dir(ROOT);
                t.entries_changed(&[ROOT]);
                drop(t);
                self.activity.conflict(Conflict { path: was, copy });
                Ok(())
            }
            Err(e) => {
                st.persist(durable || matches!(e, VfsError::Offline))?;
                if !matches!(e, VfsError::Offline) {
                    self.activity.error(format!("{was}: {e}"));
                }
                // `commit` can't name it (it has no path now): the problem is noted here,
                // under the path it had.
                self.problems.refused(Subject::File(ino), &was, &e);
                Err(e)
            }
        }
    }

    /// Uploads a staged file's dirty blocks and commits. Used for live files and for journal
    /// records of an earlier run alike.
    pub(super) async fn upload(&self, st: &mut Staged, path: &RemotePath) -> VfsResult<Committed> {
        let blocks = self.send_blocks(st, path).await?;
        let req = CommitRequest { base_version: st.rec.base_version, blocks: blocks.clone(), force: false };
        match self.seen(self.remote.commit_manifest(path, &req).await) {
            Ok(entry) => Ok(Committed::Same(entry, blocks)),
            Err(VfsError::Conflict) | Err(VfsError::Exists) => match self.already_there(path, &blocks).await? {
                Some(entry) => Ok(Committed::Same(entry, blocks)),
                None => self.commit_copy(path, None, blocks, "conflict").await.map(Committed::Conflict),
            },
            Err(e) => Err(e),
        }
    }

    /// Sends a staged file's changed blocks (the gateway keeps what it already has) and
    /// returns the file's whole block list: its content, ready to commit anywhere.
    pub(super) async fn send_blocks(&self, st: &Staged, path: &RemotePath) -> VfsResult<Vec<BlockRef>> {
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
                // One pass names the block and gives the tags its cache entry keeps.
                let (hash, block) = Verified::hash_new(data);
                let hex = blake3::Hash::from_bytes(hash).to_hex().to_string();
                let scope = super::remote::block_scope(path);
                self.seen(self.remote.put_block(&hex, block.data().clone(), scope).await)?;
                self.cache.admit(scope, hash, block).await;
                Ok((b, BlockRef { hash: hex, size: len }))
            })
            .buffer_unordered(UPLOADS_IN_FLIGHT)
            .try_collect()
            .await;
        self.activity.in_flight_add(-1);
        for (b, r) in sent? {
            blocks[b as usize] = Some(r);
        }
        blocks
            .into_iter()
            .collect::<Option<_>>()
            .ok_or_else(|| VfsError::Io(format!("{path}: a block is missing from the upload")))
    }

    /// After a refused commit: the entry at `path` if its current version is exactly `blocks`.
    /// That is this very commit when an earlier attempt reached the server but its answer did
    /// not come back (a timeout, a killed mount before it could drop its journal record); a
    /// conflict copy of identical content would be noise.
    pub(super) async fn already_there(&self, path: &RemotePath, blocks: &[BlockRef]) -> VfsResult<Option<Entry>> {
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

    /// Commits `blocks` as a new file named after `path`'s with `label` (`name (label <date>
    /// <device>).ext`, numbered if taken) in `folder` (default: next to `path`). Returns its path.
    pub(super) async fn commit_copy(
        &self,
        path: &RemotePath,
        folder: Option<RemotePath>,
        blocks: Vec<BlockRef>,
        label: &str,
    ) -> VfsResult<String> {
        let parent = folder.unwrap_or_else(|| path.parent().unwrap_or_else(RemotePath::root));
        let name = path.name().unwrap_or("file");
        let base = copy_name(name, label, &self.cfg.host, SystemTime::now());
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
                    tracing::warn!(path = %path, copy = %target, label, "kept this device's version as a copy");
                    return Ok(target.to_string());
                }
                Err(VfsError::Conflict) | Err(VfsError::Exists) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(VfsError::Io(format!("no free {label}-copy name for {path}")))
    }

    /// Uploads every file whose close could not reach the gateway, and journal records of an
    /// earlier run, now (reconnect, "retry"). A refused file does not hold up the others:
    /// all are tried, and the first refusal is returned. Unreachable: stops at once.
    pub async fn upload_pending(&self) -> VfsResult<usize> {
        self.upload_waiting(false).await
    }

    /// [`Vfs::upload_pending`] for the background loop: refused changes are tried again only
    /// once their pause is over (see `problems::backoff`).
    pub async fn upload_due(&self) -> VfsResult<usize> {
        self.upload_waiting(true).await
    }

    async fn upload_waiting(&self, only_due: bool) -> VfsResult<usize> {
        use futures::StreamExt;
        let mut done = 0;
        let mut first_err = None;
        let pending: Vec<Ino> = {
            let t = lock(&self.tree);
            t.nodes
                .iter()
                .filter(|(_, n)| n.is_staged() && n.writers() == 0 && !n.is_unlinked())
                .map(|(i, _)| *i)
                .collect()
        };
        // The background round leaves closed files still waiting out `--upload-delay` to the
        // uploader (or a burst of small files would go up as it is written); an explicit
        // retry and the unmount send them at once.
        let waiting: std::collections::HashSet<Ino> = if only_due {
            let now = Instant::now();
            lock(&self.queue).iter().filter(|(_, due)| *due > now).map(|(ino, _)| *ino).collect()
        } else {
            Default::default()
        };
        // A few at a time, as the uploader does: after an outage, hundreds of files wait.
        let due: Vec<Ino> = pending
            .into_iter()
            .filter(|ino| !only_due || (!waiting.contains(ino) && self.problems.due(&Subject::File(*ino))))
            .collect();
        let mut results =
            futures::stream::iter(due).map(|ino| self.commit(ino, false)).buffer_unordered(COMMITS_IN_FLIGHT);
        let mut offline = false;
        while let Some(r) = results.next().await {
            match r {
                Ok(()) => done += 1,
                Err(VfsError::Offline) => offline = true,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        drop(results);
        if offline {
            return Err(VfsError::Offline);
        }
        let mut orphans = self.orphans.lock().await;
        let mut kept = Vec::new();
        while let Some(mut st) = orphans.pop() {
            let path = match RemotePath::parse(&st.rec.path) {
                Ok(p) => p,
                Err(_) => {
                    tracing::warn!(path = %st.rec.path, "journal record with an invalid path dropped");
                    st.discard();
                    continue;
                }
            };
            let subject = Subject::Record(st.rec.path.clone());
            let local = path.name().is_some_and(is_local_only);
            if local || !st.has_changes() {
                self.problems.cleared(&subject);
                st.discard();
                continue;
            }
            if only_due && !self.problems.due(&subject) {
                kept.push(st);
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
                    self.problems.refused(subject, &st.rec.path, &e);
                    kept.push(st);
                    if matches!(e, VfsError::Offline) {
                        orphans.append(&mut kept);
                        return Err(e);
                    }
                    self.activity.error(format!("{path}: {e}"));
                    first_err.get_or_insert(e);
                    continue;
                }
            }
            self.problems.cleared(&subject);
            let mut t = lock(&self.tree);
            if let Some(parent) = path.parent().and_then(|p| t.find(&p.to_string())) {
                t.invalidate_dir(parent);
            }
        }
        orphans.append(&mut kept);
        match first_err {
            Some(e) => Err(e),
            None => Ok(done),
        }
    }

    /// Pending uploads (live files with changes nobody has open, plus earlier runs' records).
    pub async fn pending_count(&self) -> usize {
        let live = {
            let t = lock(&self.tree);
            t.nodes.values().filter(|n| n.is_staged() && !n.is_unlinked()).count()
        };
        live + self.orphans.lock().await.len()
    }

    /// Commits everything (clean unmount).
    pub async fn flush_all(&self) -> VfsResult<()> {
        let all: Vec<Ino> = {
            let t = lock(&self.tree);
            t.nodes.iter().filter(|(_, n)| n.is_staged() && !n.is_unlinked()).map(|(i, _)| *i).collect()
        };
        let mut first_err = None;
        for ino in all {
            match self.commit(ino, true).await {
                Ok(()) => {}
                Err(VfsError::Offline) => return Err(VfsError::Offline),
                // A refused file stays journaled; the others still go up.
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        let rest = self.upload_pending().await.map(|_| ());
        match first_err {
            Some(e) => Err(e),
            None => rest,
        }
    }
}
