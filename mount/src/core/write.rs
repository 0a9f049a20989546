//! Writes: the staging copy of a file being changed (created from its current version, or empty
//! on truncate), read-modify-write of partly written blocks, and `write` itself.

use std::sync::Arc;

use nimbus_proto::wire::BlockRef;

use super::blocks::parse_hash;
use super::dirty::{RECORD_VERSION, Record, Staged};
use super::types::*;
use super::vfs::{Handle, Vfs, lock};

impl Vfs {
    pub(super) async fn fill_from_base(&self, st: &mut Staged, b: u64) -> VfsResult<()> {
        let Some(base) = st.base_block(b).cloned() else {
            st.mark_present(b);
            return Ok(());
        };
        let hash = parse_hash(&base.hash)?;
        let path = nimbus_proto::RemotePath::parse(&st.rec.path).ok();
        let scope = path.as_ref().and_then(super::remote::block_scope);
        let data = self.cache.read(scope, hash, 0, base.size as usize, true).await?;
        st.fill(b, &data)
    }

    /// The node's staging area, created from its current content if it has none.
    pub(super) async fn stage(&self, ino: Ino, truncate: bool) -> VfsResult<Arc<tokio::sync::Mutex<Staged>>> {
        loop {
            if let Some(s) = self.stage_once(ino, truncate).await? {
                return Ok(s);
            }
        }
    }

    /// The node's staging area, locked. A commit may finish and discard the staging area
    /// while this waits for its lock (a truncate by path right as the uploader runs): then
    /// the change goes into a fresh one, never into the discarded copy.
    pub(super) async fn staged_locked(&self, ino: Ino) -> VfsResult<tokio::sync::OwnedMutexGuard<Staged>> {
        loop {
            let g = self.stage(ino, false).await?.lock_owned().await;
            if !g.is_discarded() {
                return Ok(g);
            }
        }
    }

    /// One attempt of [`Self::stage`]; `None` when the existing staging area turned out to be
    /// discarded meanwhile.
    pub(super) async fn stage_once(
        &self,
        ino: Ino,
        truncate: bool,
    ) -> VfsResult<Option<Arc<tokio::sync::Mutex<Staged>>>> {
        let existing = lock(&self.tree).get(ino)?.staged();
        if let Some(s) = existing {
            if truncate {
                let mut st = s.lock().await;
                if st.is_discarded() {
                    return Ok(None);
                }
                st.resize(0)?;
                st.rec.changed = true;
                st.persist(false)?;
                lock(&self.tree).get_mut(ino)?.staged_size(0);
            }
            return Ok(Some(s));
        }
        let content = if truncate { None } else { self.content(ino).await? };
        let mut t = lock(&self.tree);
        let path = t.path(ino)?;
        let n = t.get_mut(ino)?;
        if let Some(s) = n.staged() {
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
            changed: truncate || n.remote_id().is_none(),
            moves_seen: 0,
        };
        // Still under the inode table's lock: `path` and the move log agree.
        let mut st = Staged::create(&self.cfg.staging_dir, rec, &self.moves)?;
        if truncate {
            // A truncation is a change on its own (an open with O_TRUNC may be all there is):
            // journaled at once, like the existing staging copy's truncation above.
            st.persist(false)?;
        }
        let journal = st.journal().clone();
        let st = Arc::new(tokio::sync::Mutex::new(st));
        n.start_staging(st.clone(), journal, size);
        Ok(Some(st))
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
        lock(&self.tree).get_mut(ino)?.changed_locally(size);
        Ok(data.len() as u32)
    }
}
