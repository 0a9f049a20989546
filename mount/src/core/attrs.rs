//! Attributes: `getattr`, `lookup` (case-insensitive, answered from the inode table while it is
//! fresh, else by the gateway) and `setattr` (size, modification time, the read-only attribute).

use std::time::Instant;

use nimbus_proto::names::{name_key, validate_name};

use super::types::*;
use super::vfs::{Handle, NEGATIVE_TTL, Vfs, lock};

impl Vfs {
    pub async fn getattr(&self, ino: Ino) -> VfsResult<Attr> {
        let path = {
            let t = lock(&self.tree);
            let n = t.get(ino)?;
            let local = n.is_staged() || n.remote_id().is_none() || n.is_unlinked();
            if ino == ROOT || local || self.fresh(n.fetched) {
                return Ok(n.attr(ino));
            }
            t.path(ino)?
        };
        match self.seen(self.remote.stat(&path).await) {
            Ok(e) => {
                let mut t = lock(&self.tree);
                let parent = t.get(ino)?.parent();
                let got = t.upsert(parent, &e);
                if got != ino {
                    // The name now belongs to another node: this one is gone.
                    t.lost(ino);
                    return Err(VfsError::NotFound);
                }
                Ok(t.get(ino)?.attr(ino))
            }
            Err(VfsError::Offline) => Ok(lock(&self.tree).get(ino)?.attr(ino)),
            Err(VfsError::NotFound) => {
                lock(&self.tree).lost(ino);
                Err(VfsError::NotFound)
            }
            Err(e) => Err(e),
        }
    }

    pub async fn lookup(&self, parent: Ino, name: &str) -> VfsResult<Attr> {
        // Before any cached answer: a long name is ENAMETOOLONG, not ENOENT (unlink, rmdir
        // and rename find their source through here too).
        check_name_length(name)?;
        let key = name_key(name);
        let path = {
            let t = lock(&self.tree);
            let p = t.get(parent)?;
            if p.kind != Kind::Dir {
                return Err(VfsError::NotDir);
            }
            if let Some(&ino) = p.dir.children.get(&key) {
                let n = t.get(ino)?;
                if n.is_staged() || n.remote_id().is_none() || self.fresh(n.fetched) {
                    return Ok(n.attr(ino));
                }
            } else if (p.dir.complete && self.fresh(p.fetched))
                || p.dir
                    .negative
                    .get(&key)
                    .is_some_and(|t| !self.is_online() || self.feed_running() || t.elapsed() < NEGATIVE_TTL)
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
                    && t.get(old).is_ok_and(|n| n.remote_id().is_some() && !n.is_staged())
                {
                    t.lost(old);
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
            let mut t = lock(&self.tree);
            let n = t.get_mut(ino)?;
            n.readonly = ro;
            n.status_changed(std::time::SystemTime::now());
        }
        if let Some(size) = set.size {
            let (kind, readonly, has_writer) = {
                let t = lock(&self.tree);
                let n = t.get(ino)?;
                (n.kind, n.readonly, n.writers() > 0)
            };
            if kind == Kind::Dir {
                return Err(VfsError::IsDir);
            }
            let via_handle =
                fh.is_some_and(|fh| matches!(lock(&self.handles).get(&fh), Some(Handle::File { write: true, .. })));
            if readonly && !via_handle {
                return Err(VfsError::ReadOnly);
            }
            // An unlinked file (still open) has no path, and is in no share any more.
            let path = lock(&self.tree).path(ino).ok();
            if let Some(path) = path {
                self.may_change(&path).await?;
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
                n.changed_locally(size);
            }
            // truncate(2) on a path that nobody has open for writing: commit now. Offline,
            // the truncation is journaled and goes up later, as a close's changes do: it
            // happened, so it is no error.
            if !has_writer && !via_handle {
                match self.commit(ino, false).await {
                    Ok(()) | Err(VfsError::Offline) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let mut t = lock(&self.tree);
        let n = t.get_mut(ino)?;
        if let Some(m) = set.mtime {
            // Kept locally (the gateway stamps versions itself) for as long as the content
            // stays the version it was set on.
            n.set_mtime(m);
        }
        Ok(n.attr(ino))
    }
}
