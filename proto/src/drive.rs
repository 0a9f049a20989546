//! The drive's own contract, between a running mount and what shows its state: the changes
//! the gateway refused (a "problem" per file, in the status file that `nimbus status` reads and
//! in the desktop app), and the requests that resolve them (retry, save a copy, discard), which
//! `nimbus resolve` drops into the mount's request folder and the desktop app makes in process.
//! docs/MOUNT.md documents the files.

use serde::{Deserialize, Serialize};

/// Why the gateway refused a change. Transient failures (the gateway unreachable, a 5xx) are
/// not problems: the change waits and goes up by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ProblemReason {
    /// 413 `quota_exceeded`: the space is full.
    Quota,
    /// 423 `locked`: someone else holds a lock on the file (WebDAV, e.g. Office on another
    /// computer).
    Locked,
    /// The name is taken on the server by something this change cannot replace (a folder), or
    /// the folder the file was in is gone.
    NameConflict,
    /// The server refuses the name itself.
    InvalidName,
    /// 403: not allowed.
    Denied,
    /// Any other refusal.
    Failed,
}

/// What can be done about a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ProblemAction {
    /// Send the change again now (after making room, or once the lock is gone).
    Retry,
    /// Upload this device's version under a new name next to the file (`name (copy <date>
    /// <device>).ext`, at the top of the space if its folder is gone) and let the file be the
    /// server's version again.
    SaveCopy,
    /// Throw this device's change away: the file becomes the server's version again (or goes,
    /// if it never reached the server).
    Discard,
}

impl ProblemAction {
    /// The spelling on the command line (`nimbus resolve FILE retry|save-copy|discard`).
    pub fn cli_name(self) -> &'static str {
        match self {
            ProblemAction::Retry => "retry",
            ProblemAction::SaveCopy => "save-copy",
            ProblemAction::Discard => "discard",
        }
    }

    /// The action named `s` on the command line.
    pub fn from_cli(s: &str) -> Option<Self> {
        // The JSON spelling (`save_copy`) is accepted too.
        match s {
            "retry" => Some(ProblemAction::Retry),
            "save-copy" | "save_copy" => Some(ProblemAction::SaveCopy),
            "discard" => Some(ProblemAction::Discard),
            _ => None,
        }
    }
}

/// A change the gateway refused, kept on this device until it is resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct DriveProblem {
    /// The file's path in the space (as it is now, if it was renamed since).
    pub path: String,
    pub reason: ProblemReason,
    /// For people: what happened and what can be done.
    pub message: String,
    /// The gateway's own words.
    pub detail: String,
    /// When the change was first refused (RFC 3339).
    pub since: String,
    /// How many times it was tried.
    pub attempts: u32,
    /// What can be done (every problem offers all three today; a front end shows these).
    pub actions: Vec<ProblemAction>,
}

/// A request to a running mount, written as `<id>.json` into its request folder (and the
/// desktop app's `resolve_problem` command).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ResolveRequest {
    /// The file's path in the space, as [`DriveProblem::path`] gives it.
    pub path: String,
    pub action: ProblemAction,
}

/// The mount's answer, written as `<id>.reply` next to the request (and what the desktop
/// app's `resolve_problem` returns).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ResolveReply {
    pub ok: bool,
    /// What was done ("uploaded", "saved as /a/b (copy ...).txt") or why not.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_parse_from_their_cli_and_json_names() {
        for a in [ProblemAction::Retry, ProblemAction::SaveCopy, ProblemAction::Discard] {
            assert_eq!(ProblemAction::from_cli(a.cli_name()), Some(a));
        }
        assert_eq!(ProblemAction::from_cli("save_copy"), Some(ProblemAction::SaveCopy));
        assert_eq!(ProblemAction::from_cli("delete"), None);
        assert_eq!(ProblemAction::from_cli(""), None);
    }

    #[test]
    fn a_problem_serializes_in_snake_case() {
        let p = DriveProblem {
            path: "/a.txt".into(),
            reason: ProblemReason::NameConflict,
            message: "m".into(),
            detail: "d".into(),
            since: "2026-01-01T00:00:00Z".into(),
            attempts: 2,
            actions: vec![ProblemAction::SaveCopy],
        };
        let v = serde_json::to_value(&p).unwrap_or_default();
        assert_eq!(v["reason"], "name_conflict");
        assert_eq!(v["actions"][0], "save_copy");
    }
}
