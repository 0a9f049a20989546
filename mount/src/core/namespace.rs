//! Namespace changes: mkdir, unlink, rmdir, rename, and Windows' delete disposition. Each waits
//! for a running upload of the nodes involved before it changes the namespace.

use nimbus_proto::names::validate_name;

use super::dirty::Staged;
use super::types::*;
use super::vfs::{Vfs, is_local_only, lock};

impl Vfs {
    pub async fn mkdir(&self, parent: Ino, name: &str) -> VfsResult<Attr> {
        let name = validate_name(name)?;
        let path = {
            let t = lock(&self.tree);
            if t.child(parent, &name).is_some_and(|c| t.get(c).is_ok_and(|n| !n.is_unlinked())) {
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
        t.entries_changed(&[parent]);
        let n = t.get_mut(ino)?;
        // Just made here: known empty, so lookups inside need no gateway call.
        if n.dir.children.is_empty() {
            n.dir.complete = true;
        }
        Ok(n.attr(ino))
    }

    pub async fn unlink(&self, parent: Ino, name: &str) -> VfsResult<()> {
        let ino = self.resolve_child(parent, name).await?;
        // An upload of this file may be running: let it finish first (it may be what created
        // the file on the server), and start no other until the node is gone.
        let mut quiet = self.quiesce(ino).await;
        let (path, remote) = {
            let t = lock(&self.tree);
            let n = t.get(ino)?;
            if n.kind == Kind::Dir {
                return Err(VfsError::IsDir);
            }
            (t.path(ino)?, n.remote_id().is_some())
        };
        if remote {
            match self.seen(self.remote.delete(&path).await) {
                Ok(()) | Err(VfsError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        let unwanted = {
            let mut t = lock(&self.tree);
            t.entries_changed(&[parent]);
            t.remove(ino)
        };
        if unwanted.is_some()
            && let Some(st) = quiet.as_mut()
        {
            st.discard();
        }
        Ok(())
    }

    /// The node named `name` in `parent`, looked up first (so the gateway's view is current).
    async fn resolve_child(&self, parent: Ino, name: &str) -> VfsResult<Ino> {
        self.lookup(parent, name).await?;
        lock(&self.tree).child(parent, name).ok_or(VfsError::NotFound)
    }

    /// Waits for any upload of the node to finish and holds its staging area, so no upload
    /// runs while a namespace change involving it is made.
    pub(super) async fn quiesce(&self, ino: Ino) -> Option<tokio::sync::OwnedMutexGuard<Staged>> {
        let staged = lock(&self.tree).get(ino).ok()?.staged()?;
        Some(staged.lock_owned().await)
    }

    pub async fn rmdir(&self, parent: Ino, name: &str) -> VfsResult<()> {
        let ino = self.resolve_child(parent, name).await?;
        if lock(&self.tree).get(ino)?.kind != Kind::Dir {
            return Err(VfsError::NotDir);
        }
        self.remove_empty_dir(ino).await
    }

    /// Deletes a directory if it is empty, here and on the gateway.
    async fn remove_empty_dir(&self, ino: Ino) -> VfsResult<()> {
        let path = {
            let t = lock(&self.tree);
            if t.has_local_children(ino) {
                return Err(VfsError::NotEmpty);
            }
            t.path(ino)?
        };
        let page = self.seen(self.remote.list_dir_page(&path, None, Some(1)).await)?;
        if !page.entries.is_empty() {
            return Err(VfsError::NotEmpty);
        }
        self.seen(self.remote.delete(&path).await)?;
        let mut t = lock(&self.tree);
        let parent = t.get(ino)?.parent();
        t.orphan(ino);
        t.entries_changed(&[parent]);
        Ok(())
    }

    /// rename(2), replacing the target if `replace` (and it is not a non-empty directory).
    /// A directory of any size moves with one gateway call.
    pub async fn rename(&self, parent: Ino, name: &str, newparent: Ino, newname: &str, replace: bool) -> VfsResult<()> {
        let newname = validate_name(newname)?;
        // 1. What moves, and what it replaces (a case-only rename finds the node itself).
        let src = self.resolve_child(parent, name).await?;
        if lock(&self.tree).is_within(newparent, src) {
            // Checked before anything changes (the target could be an empty folder in there).
            return Err(VfsError::Invalid("a folder cannot move into itself".into()));
        }
        let target = match self.lookup(newparent, &newname).await {
            Ok(a) if a.ino != src => Some(a),
            Ok(_) | Err(VfsError::NotFound) => None,
            Err(e) => return Err(e),
        };
        if let Some(target) = target {
            if !replace {
                return Err(VfsError::Exists);
            }
            let src_kind = lock(&self.tree).get(src)?.kind;
            match (src_kind, target.kind) {
                (Kind::Dir, Kind::File) => return Err(VfsError::NotDir),
                (Kind::File, Kind::Dir) => return Err(VfsError::IsDir),
                // The gateway never moves onto a directory: the empty one goes first.
                (Kind::Dir, Kind::Dir) => self.remove_empty_dir(target.ino).await?,
                (Kind::File, Kind::File) => {}
            }
        }
        // 2. Files being written under the source go up first, so the move carries them.
        let staged = lock(&self.tree).staged_under(src);
        for ino in staged {
            let local_only = lock(&self.tree).get(ino).is_ok_and(|n| is_local_only(n.name()));
            if !local_only {
                self.commit(ino, false).await?;
            }
        }
        // 3. A replaced file's pending upload must neither race the move nor run after it.
        let replaced = target.filter(|a| a.kind == Kind::File).map(|a| a.ino);
        let mut quiet = match replaced {
            Some(ino) => self.quiesce(ino).await,
            None => None,
        };
        // 4. The move: on the gateway (unless the file never went there: an owner file), then
        // in the inode table.
        let (from, to, remote, replaced_remote) = {
            let t = lock(&self.tree);
            let replaced_remote = replaced.filter(|r| t.get(*r).is_ok_and(|n| n.remote_id().is_some()));
            (t.path(src)?, t.path(newparent)?.join(&newname)?, t.get(src)?.remote_id().is_some(), replaced_remote)
        };
        let entry = if remote {
            Some(self.seen(self.remote.move_entry(&from, &to, true).await)?)
        } else {
            // The file goes up after the move, under the new name: the one it replaces goes
            // first (to the trash, as the gateway's move would put it).
            if replaced_remote.is_some() {
                match self.seen(self.remote.delete(&to).await) {
                    Ok(()) | Err(VfsError::NotFound) => {}
                    Err(e) => return Err(e),
                }
            }
            None
        };
        let unwanted = {
            let mut t = lock(&self.tree);
            let unwanted = t.rename(src, newparent, &newname, replaced, entry.as_ref());
            // Both folders' entries changed; the node keeps its mtime, its ctime moves (as
            // on Linux's local file systems).
            t.entries_changed(&[parent, newparent]);
            t.get_mut(src)?.status_changed(std::time::SystemTime::now());
            unwanted
        };
        if unwanted.is_some()
            && let Some(st) = quiet.as_mut()
        {
            st.discard();
        }
        drop(quiet);
        if let Err(e) = self.repoint_records(src).await {
            // The rename is made (an error would say otherwise); until these files' next
            // upload, only a crash would send them to their old paths.
            tracing::warn!(error = %e, "could not update the journal records of renamed files");
        }
        // A file that never went up (an owner file given a real name) goes up now; offline it
        // waits in the journal like any closed file (the rename itself is done).
        if !remote && !is_local_only(&newname) {
            match self.commit(src, false).await {
                Ok(()) | Err(VfsError::Offline) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The journal records of the files with changes at or below `top` name their paths as
    /// they are now (after a rename), or a crash would bring them back at the old ones.
    async fn repoint_records(&self, top: Ino) -> VfsResult<()> {
        let staged: Vec<_> = {
            let t = lock(&self.tree);
            t.staged_under(top)
                .into_iter()
                .filter_map(|i| Some((t.get(i).ok()?.staged()?, t.path(i).ok()?.to_string())))
                .collect()
        };
        for (st, path) in staged {
            let mut st = st.lock().await;
            if !st.is_discarded() && st.rec.path != path {
                st.rec.path = path;
                st.persist(false)?;
            }
        }
        Ok(())
    }

    /// Windows' delete disposition (FILE_DISPOSITION_INFORMATION / delete-on-close): the
    /// file or empty directory goes when its last handle closes. Read-only files refuse.
    pub fn set_delete_pending(&self, ino: Ino, delete: bool) -> VfsResult<()> {
        let mut t = lock(&self.tree);
        let n = t.get_mut(ino)?;
        if delete && n.readonly {
            return Err(VfsError::ReadOnly);
        }
        n.set_delete_pending(delete);
        Ok(())
    }
}
