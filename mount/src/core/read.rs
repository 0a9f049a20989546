//! Reads: a file's manifest (cached per version), then its blocks through the local cache, with
//! read-ahead for sequential readers; a file with local changes reads from its staging copy.

use std::sync::Arc;

use bytes::Bytes;

use nimbus_proto::RemotePath;

use super::blocks::parse_hash;
use super::dirty::Staged;
use super::remote::block_scope;
use super::tree::{Content, parse_time};
use super::types::*;
use super::vfs::{Handle, Vfs, lock};

impl Vfs {
    /// The node's current content description (manifest), fetched if unknown or stale.
    pub(super) async fn content(&self, ino: Ino) -> VfsResult<Option<Arc<Content>>> {
        let path = {
            let t = lock(&self.tree);
            let n = t.get(ino)?;
            if let Some(c) = &n.content
                && (Some(c.version) == n.version && self.fresh(n.fetched))
            {
                return Ok(Some(c.clone()));
            }
            if n.remote_id().is_none() || n.is_unlinked() {
                // Never uploaded (nothing to fetch), or out of the namespace, still open (no
                // path to fetch it by): what this mount last had.
                return Ok(n.content.clone());
            }
            t.path(ino)?
        };
        let m = match self.seen(self.remote.get_manifest(&path).await) {
            Ok(m) => m,
            // What the cache knows, if anything: never an empty file in place of one not read
            // yet (a copy would take it as the content, a write would commit it).
            Err(VfsError::Offline) => {
                return lock(&self.tree).get(ino)?.content.clone().ok_or(VfsError::Offline).map(Some);
            }
            Err(e) => return Err(e),
        };
        let blocks = m.blocks.iter().map(|b| Ok((parse_hash(&b.hash)?, b.size))).collect::<VfsResult<Vec<_>>>()?;
        let c = Arc::new(Content { version: m.version, size: m.size, block_size: m.block_size, blocks });
        lock(&self.tree).get_mut(ino)?.seen_manifest(c.clone(), parse_time(&m.modified));
        Ok(Some(c))
    }

    pub async fn read(&self, fh: Fh, off: u64, size: u32) -> VfsResult<Bytes> {
        let (ino, content, opened_at) = match lock(&self.handles).get(&fh) {
            Some(Handle::File { ino, content, local_changes, .. }) => (*ino, content.clone(), *local_changes),
            _ => return Err(VfsError::BadHandle),
        };
        let (staged, local_changes, path) = {
            let t = lock(&self.tree);
            let n = t.get(ino)?;
            (n.staged(), n.local_changes(), t.path(ino).ok())
        };
        // Inside a share, blocks are asked for as blocks of this file.
        let scope = path.as_ref().and_then(block_scope).cloned();
        if let Some(staged) = staged {
            return self.read_staged(&staged, off, size).await;
        }
        // The version this handle opened, unless this mount changed the file since.
        let content = match content.filter(|_| opened_at == local_changes) {
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
            if let Some(&(hash, _)) = content.blocks.get(b as usize) {
                let (cache, scope) = (self.cache.clone(), scope.clone());
                tokio::spawn(async move {
                    let _ = cache.prefetch(scope.as_ref(), hash).await;
                });
            }
        }
        let parts = (off / bs..end.div_ceil(bs)).map(|b| {
            let cache = self.cache.clone();
            let blk = content.blocks.get(b as usize).copied();
            let scope = scope.clone();
            async move {
                let (hash, len) = blk.ok_or_else(|| VfsError::Io("manifest shorter than its size".into()))?;
                let start = b * bs;
                let from = off.max(start) - start;
                let to = end.min(start + len) - start;
                cache.read(scope.as_ref(), hash, from as usize, to as usize, sequential).await
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

    pub(super) async fn read_staged(
        &self,
        staged: &tokio::sync::Mutex<Staged>,
        off: u64,
        size: u32,
    ) -> VfsResult<Bytes> {
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
                let path = RemotePath::parse(&st.rec.path).ok();
                let scope = path.as_ref().and_then(block_scope);
                let data = self.cache.read(scope, hash, (from - start) as usize, (to - start) as usize, false).await?;
                out.extend_from_slice(&data);
            }
        }
        Ok(out.into())
    }
}
