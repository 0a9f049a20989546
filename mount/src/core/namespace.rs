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
    pub(super) async fn quiesce(&self, ino: Ino) -> Option<tokio::sync::OwnedMutexGuard<Staged>> {
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
}
