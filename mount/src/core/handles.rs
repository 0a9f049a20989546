//! Open handles of files: `open` and `create`, and the three ends of a handle's life, `flush`
//! (close(2) of a descriptor), `fsync` and `release` (the last close), which hand changes to the
//! write-back.

use nimbus_proto::names::validate_name;

use super::tree::Closed;
use super::types::*;
use super::vfs::{Handle, ReadAhead, Vfs, lock};

impl Vfs {
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
        if mode.write || mode.truncate {
            // An unlinked file (still open elsewhere) has no path, and is in no share any more.
            let path = lock(&self.tree).path(ino).ok();
            if let Some(path) = path {
                self.may_change(&path).await?;
            }
        }
        let content = if mode.write || mode.truncate {
            self.stage(ino, mode.truncate).await?;
            None
        } else if lock(&self.tree).get(ino)?.is_staged() {
            None
        } else {
            self.content(ino).await?
        };
        let (keep_cache, local_changes) = {
            let mut t = lock(&self.tree);
            let n = t.get_mut(ino)?;
            n.opened(mode.write, mode.delete_on_close);
            let keep = !n.is_staged() && n.version.is_some() && n.kernel_version == n.version;
            n.kernel_version = if !n.is_staged() { n.version } else { None };
            (keep, n.local_changes())
        };
        let fh = self.new_fh();
        lock(&self.handles)
            .insert(fh, Handle::File { ino, write: mode.write, content, local_changes, ra: ReadAhead::default() });
        Ok((fh, keep_cache))
    }

    pub async fn create(&self, parent: Ino, name: &str, mode: OpenMode, readonly: bool) -> VfsResult<(Attr, Fh)> {
        let name = validate_name(name)?;
        let path = lock(&self.tree).path(parent)?.join(&name)?;
        self.may_change(&path).await?;
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
        let fh = self.new_fh();
        let (attr, local_changes) = {
            let mut t = lock(&self.tree);
            let n = t.get_mut(ino)?;
            n.opened(true, mode.delete_on_close);
            n.readonly = readonly;
            let attr = n.attr(ino);
            let local_changes = n.local_changes();
            t.entries_changed(&[parent]);
            (attr, local_changes)
        };
        lock(&self.handles)
            .insert(fh, Handle::File { ino, write: true, content: None, local_changes, ra: ReadAhead::default() });
        Ok((attr, fh))
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
            let staged = lock(&self.tree).get(ino)?.staged();
            if let Some(st) = staged {
                st.lock().await.persist(false)?;
            }
            return Ok(());
        }
        // `echo x > f` closes a duplicate descriptor right after the open/truncate: an empty
        // file with nothing written yet is committed by the release that follows, not twice.
        let staged = lock(&self.tree).get(ino)?.staged();
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
        let Closed { last, last_writer, delete } = lock(&self.tree).get_mut(ino)?.closed(write);
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
                (n.parent(), n.name().to_string())
            };
            if !lock(&self.tree).get(ino)?.is_unlinked() {
                self.unlink(parent, &name).await?;
            }
        }
        if last {
            let gone = {
                let mut t = lock(&self.tree);
                let n = t.get_mut(ino)?;
                if n.is_unlinked() { n.end_staging() } else { None }
            };
            if let Some(st) = gone {
                st.lock().await.discard();
            }
        }
        Ok(())
    }
}
