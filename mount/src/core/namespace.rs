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
        self.may_change(&path).await?;
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
        let path = lock(&self.tree).path(ino)?;
        self.may_change(&path).await?;
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
        let path = lock(&self.tree).path(ino)?;
        self.may_change(&path).await?;
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
        let (from, to) = {
            let t = lock(&self.tree);
            (t.path(src)?, t.path(newparent)?.join(&newname)?)
        };
        self.may_change(&from).await?;
        self.may_change(&to).await?;
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
        // 2. A file with changes goes up first, so the move carries them and the server
        // switches to the new name and content at once (an editor's save: write a temp file,
        // rename it over the document). A folder's files don't: see 3.
        let src_is_file = lock(&self.tree).get(src)?.kind == Kind::File;
        if src_is_file && !is_local_only(name) {
            self.commit(src, false).await?;
        }
        // 3. No upload may run under the source while it moves (one would commit at the old
        // path), and the replaced file's pending upload must neither race the move nor run
        // after it: their staging areas are held (in inode order, so two renames never wait
        // for each other) until the move is made and the journal records name the new paths.
        // The queued uploads of a folder's files wait meanwhile and go up later from their
        // new place, so a folder of thousands of files just written moves as fast as an
        // uploaded one (one gateway call, no upload, one entry in the journal's move log).
        let replaced = target.filter(|a| a.kind == Kind::File).map(|a| a.ino);
        let held = {
            let t = lock(&self.tree);
            let mut inos = t.staged_under(src);
            inos.extend(replaced);
            inos.sort_unstable();
            inos.dedup();
            inos.into_iter().filter_map(|i| Some((i, t.get(i).ok()?.staged()?))).collect::<Vec<_>>()
        };
        // Only the uploads already running are waited for; the queued ones wait for the move.
        let _deferred = self.defer_uploads(&held.iter().map(|(i, _)| *i).collect::<Vec<_>>());
        let mut quiet = Vec::with_capacity(held.len());
        for (ino, st) in held {
            quiet.push((ino, st.lock_owned().await));
        }
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
        let (unwanted, logged, paths) = {
            let mut t = lock(&self.tree);
            let unwanted = t.rename(src, newparent, &newname, replaced, entry.as_ref());
            // Both folders' entries changed; the node keeps its mtime, its ctime moves (as
            // on Linux's local file systems).
            t.entries_changed(&[parent, newparent]);
            t.get_mut(src)?.status_changed(std::time::SystemTime::now());
            // The journal records below a moved folder must name the new paths, or a crash
            // would bring the files back at the old ones: one entry in the move log says it
            // for all of them (logged under this lock, so a record's path and the log agree).
            // A moved file's own record is rewritten instead.
            let below = quiet.iter().any(|(i, _)| Some(*i) != replaced);
            let logged = !src_is_file
                && below
                && match self.moves.append(&from.to_string(), &to.to_string()) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not log a folder move; rewriting its files' records");
                        false
                    }
                };
            let seen = self.moves.seq();
            let paths: Vec<Option<(String, u64)>> =
                quiet.iter().map(|(i, _)| t.path(*i).ok().map(|p| (p.to_string(), seen))).collect();
            (unwanted, logged, paths)
        };
        for ((ino, st), path) in quiet.iter_mut().zip(paths) {
            if unwanted.is_some() && Some(*ino) == replaced {
                st.discard();
                continue;
            }
            if logged {
                // Their records catch up with the log whenever they are next written.
                continue;
            }
            if let Some((path, seen)) = path
                && !st.is_discarded()
                && st.rec.path != path
            {
                st.set_path(path, seen);
                if let Err(e) = st.persist(false) {
                    // The rename is made (an error would say otherwise); until this file's
                    // upload, only a crash would send it to its old path.
                    tracing::warn!(error = %e, "could not update the journal record of a renamed file");
                }
            }
        }
        drop(quiet);
        // A file that never went up (an owner file given a real name) goes up now; offline it
        // waits in the journal like any closed file. The rename itself is done, so a refused
        // upload is not its error: it is the file's problem (see `problems`), shown to the
        // person and retried, like any refused change.
        if !remote
            && !is_local_only(&newname)
            && let Err(e) = self.commit(src, false).await
            && !matches!(e, VfsError::Offline)
        {
            tracing::warn!(error = %e, path = %to, "a renamed file's first upload was refused; kept as a problem");
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
