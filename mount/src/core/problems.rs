//! Changes the gateway refused (quota, someone else's lock, a name taken on the server): one
//! problem per file, kept until the change goes up or the user resolves it, shown by
//! `nimbus status` and the desktop app with what can be done: retry, save a copy, discard.
//! A transient failure (the gateway unreachable) is not a problem: the change just waits.
//!
//! Refused changes are retried by the background loop with a growing pause (a full space
//! is not asked again every two seconds); `retry` and `fsync` try at once.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use nimbus_proto::RemotePath;
use nimbus_proto::drive::{DriveProblem, ProblemAction, ProblemReason};
use nimbus_proto::names::name_key;
use nimbus_proto::wire::BlockRef;

use super::dirty::Staged;
use super::status::ActivitySnapshot;
use super::types::*;
use super::vfs::{Vfs, lock};
use super::writeback::Committed;

/// What a problem is about: a file of this mount (by inode: its path is looked up when shown,
/// so a rename carries the problem along), or a journal record of an earlier run (by path).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Subject {
    File(Ino),
    Record(String),
}

struct Refusal {
    problem: DriveProblem,
    next_try: Instant,
}

/// The refused changes of one mount.
#[derive(Default)]
pub(super) struct Problems {
    open: Mutex<BTreeMap<Subject, Refusal>>,
}

/// The pause before the background loop tries a refused change again: 5 s, doubling per
/// attempt, at most a minute.
pub(super) fn backoff(attempts: u32) -> Duration {
    Duration::from_secs(5u64.saturating_mul(1 << attempts.saturating_sub(1).min(4)).min(60))
}

/// Whether `e` is a refusal the user must hear about (else the change just waits).
fn reason(e: &VfsError) -> Option<ProblemReason> {
    Some(match e {
        VfsError::Offline => return None,
        VfsError::Quota => ProblemReason::Quota,
        VfsError::Locked => ProblemReason::Locked,
        VfsError::IsDir | VfsError::NotDir | VfsError::NotFound | VfsError::Exists => ProblemReason::NameConflict,
        VfsError::InvalidName(_) | VfsError::NameTooLong => ProblemReason::InvalidName,
        VfsError::Denied | VfsError::ReadOnly => ProblemReason::Denied,
        _ => ProblemReason::Failed,
    })
}

/// What the person reads: what happened, and what each action would do about it.
fn message(reason: ProblemReason) -> &'static str {
    match reason {
        ProblemReason::Quota => {
            "Your storage space is full, so the server refused this change. Free some space (empty the \
             trash, delete old versions or files) or ask your administrator for more, then retry; or discard \
             the change."
        }
        ProblemReason::Locked => {
            "Someone else has this file locked (open for editing on another computer). Retry once they \
             close it, or save your version as a copy next to it."
        }
        ProblemReason::NameConflict => {
            "The server has something else under this name (a folder), or the folder this file was in is \
             gone. Save your version as a copy, or discard it."
        }
        ProblemReason::InvalidName => {
            "The server refuses this file name. Save your version as a copy (under a name it accepts), or \
             discard it."
        }
        ProblemReason::Denied => {
            "The server does not allow this change. Save your version as a copy, or discard it; retry if \
             your access was restored."
        }
        ProblemReason::Failed => "The server refused this change. Retry, save your version as a copy, or discard it.",
    }
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::from(SystemTime::now())
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

impl Problems {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Subject, Refusal>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes that the change of `subject` (now at `path`) failed with `e`: a new problem, or
    /// one more attempt of a known one. Transient failures are not noted.
    pub(super) fn refused(&self, subject: Subject, path: &str, e: &VfsError) {
        let Some(reason) = reason(e) else { return };
        let mut open = self.lock();
        let r = open.entry(subject).or_insert_with(|| Refusal {
            problem: DriveProblem {
                path: path.to_string(),
                reason,
                message: String::new(),
                detail: String::new(),
                since: now_rfc3339(),
                attempts: 0,
                actions: vec![ProblemAction::Retry, ProblemAction::SaveCopy, ProblemAction::Discard],
            },
            next_try: Instant::now(),
        });
        let p = &mut r.problem;
        p.path = path.to_string();
        p.reason = reason;
        p.message = message(reason).to_string();
        p.detail = e.to_string();
        p.attempts = p.attempts.saturating_add(1);
        r.next_try = Instant::now() + backoff(p.attempts);
    }

    /// The change of `subject` went up, or is gone: no problem any more.
    pub(super) fn cleared(&self, subject: &Subject) {
        self.lock().remove(subject);
    }

    /// Whether the background loop should try `subject` now (no problem, or its pause is over).
    pub(super) fn due(&self, subject: &Subject) -> bool {
        self.lock().get(subject).is_none_or(|r| r.next_try <= Instant::now())
    }

    fn all(&self) -> Vec<(Subject, DriveProblem)> {
        self.lock().iter().map(|(s, r)| (s.clone(), r.problem.clone())).collect()
    }
}

/// Two paths of the space name the same file (names compare as the gateway compares them).
fn same_path(a: &str, b: &str) -> bool {
    a == b || name_key(a) == name_key(b)
}

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
                        Ok(n) if n.is_staged() && !n.is_unlinked() => t.path(ino).ok(),
                        _ => None,
                    }
                };
                match path {
                    Some(path) => p.path = path.to_string(),
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
        let subject = self.problems.all().into_iter().map(|(s, _)| s).find(|s| match s {
            Subject::Record(p) => same_path(p, path),
            Subject::File(ino) => {
                let t = lock(&self.tree);
                t.path(*ino).is_ok_and(|p| same_path(&p.to_string(), path))
            }
        });
        match subject {
            Some(Subject::File(ino)) => self.resolve_file(ino, action).await,
            Some(Subject::Record(p)) => self.resolve_record(&p, action).await,
            None => Err(VfsError::Invalid(format!("the refused change at {path} was resolved meanwhile"))),
        }
    }

    async fn resolve_file(&self, ino: Ino, action: ProblemAction) -> VfsResult<String> {
        if action == ProblemAction::Retry {
            self.commit(ino, true).await?;
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
        let path = lock(&self.tree).path(ino)?;
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
