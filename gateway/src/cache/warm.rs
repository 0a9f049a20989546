//! Warming: an admin asks for a user's folder to be loaded into the cache ahead of use (before
//! a meeting, after a purge). A job walks the folder, then reads every block of every file
//! through the cache in the background; its progress can be polled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use nimbus_proto::RemotePath;

use super::{BlockCache, CacheMode};
use crate::meta::{Meta, MetaError, SpaceId};

/// Blocks read at once by one job: enough to keep the store busy, little enough to leave
/// room for users.
const PARALLEL: usize = 4;
/// Jobs remembered (finished ones are dropped oldest first).
const MAX_JOBS: usize = 100;

pub use nimbus_proto::wire::{WarmState, WarmStatus};

#[derive(Default)]
pub struct Warmer {
    next: AtomicU64,
    jobs: Mutex<HashMap<u64, WarmStatus>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Warmer {
    pub fn status(&self, id: u64) -> Option<WarmStatus> {
        lock(&self.jobs).get(&id).cloned()
    }

    fn update(&self, id: u64, f: impl FnOnce(&mut WarmStatus)) {
        if let Some(s) = lock(&self.jobs).get_mut(&id) {
            f(s);
        }
    }

    /// Starts warming `path` of `space`; returns the job's first status.
    pub fn start(self: &Arc<Self>, meta: Meta, cache: Arc<BlockCache>, space: SpaceId, path: RemotePath) -> WarmStatus {
        let user_id = space.get();
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let status = WarmStatus {
            id,
            user_id,
            path: path.to_string(),
            state: WarmState::Listing,
            files_total: 0,
            files_done: 0,
            bytes_total: 0,
            bytes_done: 0,
            error: None,
        };
        {
            let mut jobs = lock(&self.jobs);
            if jobs.len() >= MAX_JOBS {
                let mut finished: Vec<u64> = jobs.values().filter(|j| j.state.finished()).map(|j| j.id).collect();
                finished.sort_unstable();
                for old in finished.into_iter().take(jobs.len() + 1 - MAX_JOBS) {
                    jobs.remove(&old);
                }
            }
            jobs.insert(id, status.clone());
        }
        let me = self.clone();
        tokio::spawn(async move {
            let result = me.run(id, &meta, &cache, space, &path).await;
            me.update(id, |s| match result {
                Ok(()) => s.state = WarmState::Done,
                Err(e) => {
                    s.state = WarmState::Failed;
                    s.error = Some(e);
                }
            });
        });
        status
    }

    async fn run(
        &self,
        id: u64,
        meta: &Meta,
        cache: &BlockCache,
        user: SpaceId,
        root: &RemotePath,
    ) -> Result<(), String> {
        let files = list_files(meta, user, root).await.map_err(|e| e.to_string())?;
        let bytes: u64 = files.iter().map(|(_, size)| size).sum();
        self.update(id, |s| {
            s.state = WarmState::Warming;
            s.files_total = files.len() as u64;
            s.bytes_total = bytes;
        });
        for (path, _) in files {
            // A file deleted or replaced meanwhile is simply skipped.
            let Ok(m) = meta.manifest(user, &path, None).await else { continue };
            let reads = m.blocks.iter().cloned().map(|b| async move {
                let size = b.size.max(0) as usize;
                cache.read(user.get(), &b.hash, 0..size, size, CacheMode::Normal).await.map(|_| size as u64)
            });
            let mut reads = futures::stream::iter(reads).buffer_unordered(PARALLEL);
            while let Some(r) = reads.next().await {
                let n = r.map_err(|e| format!("reading {path}: {e}"))?;
                self.update(id, |s| s.bytes_done += n);
            }
            self.update(id, |s| s.files_done += 1);
        }
        Ok(())
    }
}

/// Every file under `root` (or `root` itself if it is a file), with sizes.
async fn list_files(meta: &Meta, space: SpaceId, root: &RemotePath) -> Result<Vec<(RemotePath, u64)>, MetaError> {
    let (node, canon) = meta.stat(space, root).await?;
    if !node.is_dir() {
        return Ok(vec![(canon, node.size.max(0) as u64)]);
    }
    let mut files = Vec::new();
    let mut dirs = vec![canon];
    while let Some(dir) = dirs.pop() {
        let mut after: Option<String> = None;
        loop {
            let (rows, dir_canon) = meta.list_dir(space, &dir, after.as_deref(), 1000).await?;
            let full = rows.len() == 1000;
            after = rows.last().map(|n| nimbus_proto::names::name_key(&n.name));
            for n in rows {
                let p = dir_canon.join(&n.name)?;
                if n.is_dir() {
                    dirs.push(p);
                } else {
                    files.push((p, n.size.max(0) as u64));
                }
            }
            if !full {
                break;
            }
        }
    }
    Ok(files)
}
