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

use nimbus_proto::drive::{DriveProblem, ProblemAction, ProblemReason};
use nimbus_proto::names::name_key;

use super::types::*;

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

    pub(super) fn all(&self) -> Vec<(Subject, DriveProblem)> {
        self.lock().iter().map(|(s, r)| (s.clone(), r.problem.clone())).collect()
    }
}

/// Two paths of the space name the same file (names compare as the gateway compares them).
pub(super) fn same_path(a: &str, b: &str) -> bool {
    a == b || name_key(a) == name_key(b)
}
