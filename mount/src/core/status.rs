//! What the mount is doing, for `nimbus status` and the desktop app: uploads pending
//! and in flight, recent errors, conflict copies made, and (from [`crate::core::Vfs::activity_snapshot`]) the
//! changes the gateway refused.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use nimbus_proto::drive::DriveProblem;
use serde::Serialize;

const KEEP: usize = 50;

#[derive(Debug, Clone, Serialize)]
pub struct Conflict {
    /// The file both devices changed (it now holds the other device's version).
    pub path: String,
    /// Where this device's version was saved.
    pub copy: String,
}

#[derive(Default)]
pub struct Activity {
    pending: AtomicI64,
    in_flight: AtomicI64,
    errors: Mutex<VecDeque<String>>,
    conflicts: Mutex<VecDeque<Conflict>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ActivitySnapshot {
    pub uploads_in_flight: i64,
    pub commits_in_progress: i64,
    pub errors: Vec<String>,
    pub conflicts: Vec<Conflict>,
    /// Changes the gateway refused, with what can be done (filled in by
    /// [`crate::core::Vfs::activity_snapshot`]).
    pub problems: Vec<DriveProblem>,
}

impl Activity {
    pub fn pending_add(&self, d: i64) {
        self.pending.fetch_add(d, Ordering::Relaxed);
    }

    pub fn in_flight_add(&self, d: i64) {
        self.in_flight.fetch_add(d, Ordering::Relaxed);
    }

    pub fn error(&self, e: String) {
        let mut q = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        q.push_back(e);
        while q.len() > KEEP {
            q.pop_front();
        }
    }

    pub fn conflict(&self, c: Conflict) {
        let mut q = self.conflicts.lock().unwrap_or_else(|p| p.into_inner());
        q.push_back(c);
        while q.len() > KEEP {
            q.pop_front();
        }
    }

    /// Without problems: see [`crate::core::Vfs::activity_snapshot`].
    pub(crate) fn snapshot(&self) -> ActivitySnapshot {
        ActivitySnapshot {
            uploads_in_flight: self.in_flight.load(Ordering::Relaxed),
            commits_in_progress: self.pending.load(Ordering::Relaxed),
            errors: self.errors.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect(),
            conflicts: self.conflicts.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect(),
            problems: Vec::new(),
        }
    }
}
