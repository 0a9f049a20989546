//! What the person does about refused changes ([`super::problems`]): the list with each file's
//! path now, and the three ways out: retry, save this device's version as a copy, discard it.

use nimbus_proto::RemotePath;
use nimbus_proto::drive::{DriveProblem, ProblemAction};
use nimbus_proto::wire::BlockRef;

use super::dirty::Staged;
use super::problems::{Subject, same_path};
use super::status::ActivitySnapshot;
use super::types::*;
use super::vfs::{Vfs, lock};
use super::writeback::Committed;

impl Vfs {
    /// The refused changes, each under the path its file has now. Problems of files that
    /// left the mount meanwhile (deleted here, or their change uploaded some other way) go.
    pub fn problems(&self) -> Vec<DriveProblem> {
        let mut out = Vec::new();
        for (subject, mut p) in self.problems.all() {
            if let Subject::File(ino) = subject {
                let path = {
                    let t = lock(&self.tree);
                    match t.get(ino) {
                        Ok(n) if n.is_staged() && !n.is_unlinked() => match t.path(ino) {
                            Ok(path) => Some(path.to_string()),
                            // Its folder is gone: still waiting, under the path it had.
                            Err(_) if t.folder_gone(ino) => Some(p.path.clone()),
                            Err(_) => None,
                        },
                        _ => None,
                    }
                };
                match path {
                    Some(path) => p.path = path,
                    None => {
                        self.problems.cleared(&subject);
                        continue;
                    }
                }
            }
            out.push(p);
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// What the mount is doing, with its problems (the status file, the desktop app).
    pub fn activity_snapshot(&self) -> ActivitySnapshot {
        let mut snap = self.activity.snapshot();
        snap.problems = self.problems();
        snap
    }

    /// Resolves the problem of the file at `path` (a path in the space, as a problem names
    /// it). Returns what was done, for people.
    pub async fn resolve(&self, path: &str, action: ProblemAction) -> VfsResult<String> {
        // Refresh paths (and drop stale problems) first.
        let known = self.problems();
        if !known.iter().any(|p| same_path(&p.path, path)) {
            return Err(VfsError::Invalid(format!(
                "no refused change is waiting at {path}; `nimbus status` lists the ones that are"
            )));
        }
        let subject = self.problems.all().into_iter().find_map(|(s, p)| {
            let hit = match &s {
                Subject::Record(p) => same_path(p, path),
                Subject::File(ino) => {
                    let t = lock(&self.tree);
                    match t.path(*ino) {
                        Ok(now) => same_path(&now.to_string(), path),
                        Err(_) => t.folder_gone(*ino) && same_path(&p.path, path),
                    }
                }
            };
            hit.then_some(s)
        });
        match subject {
            Some(Subject::File(ino)) => self.resolve_file(ino, action).await,
            Some(Subject::Record(p)) => self.resolve_record(&p, action).await,
            None => Err(VfsError::Invalid(format!("the refused change at {path} was resolved meanwhile"))),
        }
    }

    async fn resolve_file(&self, ino: Ino, action: ProblemAction) -> VfsResult<String> {
        if action == ProblemAction::Retry {
            let gone = lock(&self.tree).folder_gone(ino);
            self.commit(ino, true).await?;
            if gone {
                return Ok("its folder is gone; this device's version was saved at the top of the space".into());
            }
            let t = lock(&self.tree);
            let path = t.path(ino).map(|p| p.to_string()).unwrap_or_default();
            return Ok(format!("uploaded {path}"));
        }
        let staged = {
            let t = lock(&self.tree);
            let n = t.get(ino)?;
            if n.writers() > 0 {
                let path = t.path(ino)?;
                return Err(VfsError::Invalid(format!("{path} is open for writing here; close it first")));
            }
            n.staged()
        };
        let Some(staged) = staged else {
            self.problems.cleared(&Subject::File(ino));
            return Ok("nothing was waiting any more".to_string());
        };
        let mut st = staged.lock().await;
        let path = {
            let t = lock(&self.tree);
            match t.path(ino) {
                Ok(p) => p,
                // Its folder is gone: the copy goes at the top (next to this path).
                Err(_) if t.folder_gone(ino) => RemotePath::root().join(t.get(ino)?.name())?,
                Err(e) => return Err(e),
            }
        };
        let done = self.save_or_drop(&mut st, &path, action).await?;
        let new_file = st.rec.base_version.is_none();
        st.discard();
        drop(st);
        let mut t = lock(&self.tree);
        if let Ok(n) = t.get_mut(ino) {
            let parent = n.parent();
            if n.writers() == 0 && n.is_staged() {
                if new_file {
                    // Never on the server: it goes from here too.
                    t.remove(ino);
                } else {
                    // The server's version is the file again.
                    n.lost_to_conflict();
                }
                t.invalidate_dir(parent);
                t.entries_changed(&[parent]);
            }
        }
        drop(t);
        self.problems.cleared(&Subject::File(ino));
        Ok(done)
    }

    async fn resolve_record(&self, path: &str, action: ProblemAction) -> VfsResult<String> {
        let mut orphans = self.orphans.lock().await;
        let Some(i) = orphans.iter().position(|st| same_path(&st.rec.path, path)) else {
            self.problems.cleared(&Subject::Record(path.to_string()));
            return Ok("nothing was waiting any more".to_string());
        };
        let remote = RemotePath::parse(&orphans[i].rec.path)?;
        let subject = Subject::Record(path.to_string());
        let done = if action == ProblemAction::Retry {
            let r = self.upload(&mut orphans[i], &remote).await;
            match r {
                Ok(Committed::Same(..)) => format!("uploaded {remote}"),
                Ok(Committed::Conflict(copy)) => {
                    format!("{remote} changed on the server meanwhile; this device's version was saved as {copy}")
                }
                Err(e) => {
                    self.problems.refused(subject, path, &e);
                    return Err(e);
                }
            }
        } else {
            self.save_or_drop(&mut orphans[i], &remote, action).await?
        };
        let mut st = orphans.remove(i);
        st.discard();
        drop(orphans);
        self.problems.cleared(&subject);
        let mut t = lock(&self.tree);
        if let Some(parent) = remote.parent().and_then(|p| t.find(&p.to_string())) {
            t.invalidate_dir(parent);
            t.entries_changed(&[parent]);
        }
        Ok(done)
    }

    /// `SaveCopy`: uploads the staged content under a copy's name (next to the file, or at
    /// the top of the space if its folder is gone). `Discard`: nothing to send. The caller
    /// drops the staged change after either.
    async fn save_or_drop(&self, st: &mut Staged, path: &RemotePath, action: ProblemAction) -> VfsResult<String> {
        match action {
            ProblemAction::Discard => Ok(format!("discarded this device's change to {path}")),
            ProblemAction::Retry => Err(VfsError::Invalid("retry is not a save or a discard".into())),
            ProblemAction::SaveCopy => {
                let blocks: Vec<BlockRef> = self.send_blocks(st, path).await?;
                let copy = match self.commit_copy(path, None, blocks.clone(), "copy").await {
                    Err(VfsError::NotFound) | Err(VfsError::NotDir) => {
                        self.commit_copy(path, Some(RemotePath::root()), blocks, "copy").await?
                    }
                    other => other?,
                };
                Ok(format!("saved this device's version of {path} as {copy}"))
            }
        }
    }
}
