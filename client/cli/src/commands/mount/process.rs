//! Which process serves a mount, told apart from a later process that got the same pid.
//!
//! A status file outlives a mount process that was killed (`kill -9`, a crash), and the system
//! hands its pid to other processes later: a pid alone must never be signalled. On Linux the
//! CLI's mount process records its start time (field 22 of `/proc/self/stat`, in clock ticks
//! since boot) and the boot id in `<key>.process` next to the status file; a process is the
//! mount only if both still match. Mounts that wrote no such record (the desktop app, an
//! older `nimbus`) are judged by time: a process that started after the status file was last
//! written (the mount rewrites it every second) cannot be the one writing it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What `<key>.process` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub pid: u64,
    /// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks since boot.
    pub start: u64,
    /// `/proc/sys/kernel/random/boot_id`: start times are only comparable within one boot.
    pub boot: String,
}

/// The running process a status file names, as checked by [`mount_process`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountProc {
    pub pid: u64,
    /// Its start time when it was identified (Linux), so that waiting for it to exit does
    /// not mistake a successor with the same pid for it.
    start: Option<u64>,
}

/// Where the mount of status file `status` records its [`Identity`].
pub fn identity_file(status: &Path) -> PathBuf {
    status.with_extension("process")
}

/// Removes a stale status file and what goes with it.
pub fn remove_stale(status: &Path) {
    let _ = std::fs::remove_file(status);
    let _ = std::fs::remove_file(identity_file(status));
}

/// Records this process as the mount of status file `status` (before the mount writes it).
pub fn record_self(status: &Path) -> std::io::Result<()> {
    match this_process() {
        Some(id) => std::fs::write(identity_file(status), serde_json::to_vec(&id).map_err(std::io::Error::other)?),
        // Nothing to record on this platform: the pid check stays as it was.
        None => Ok(()),
    }
}

/// This process's identity, where the system tells start times (Linux).
fn this_process() -> Option<Identity> {
    let pid = u64::from(std::process::id());
    Some(Identity { pid, start: start_time(pid)?, boot: boot_id()? })
}

/// The live process that serves the mount of status file `path` (content `status`), if it
/// still runs; `None` for a stale file whose pid is gone or now belongs to another process.
pub fn mount_process(path: &Path, status: &Value) -> Option<MountProc> {
    let pid = status.get("pid").and_then(Value::as_u64)?;
    if !cfg!(target_os = "linux") {
        // No /proc to tell processes apart (macOS, Windows): the check as it always was,
        // which there finds no process (so nothing is ever signalled by mistake).
        return pid_exists(pid).then_some(MountProc { pid, start: None });
    }
    let start = start_time(pid)?;
    let recorded: Option<Identity> =
        std::fs::read(identity_file(path)).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let ok = match recorded {
        Some(id) if id.pid == pid => same_process(&id, start, boot_id().as_deref()),
        // No record of this pid: the status file's age must not predate the process.
        _ => {
            let written = std::fs::metadata(path).and_then(|m| m.modified()).ok();
            match (written, started_at(start)) {
                (Some(w), Some(s)) => !started_after_writing(s, w),
                // Cannot tell: take it as the mount (the behaviour before records existed).
                _ => true,
            }
        }
    };
    ok.then_some(MountProc { pid, start: Some(start) })
}

/// Whether `p` (from [`mount_process`]) still runs as the same process.
pub fn still_running(p: &MountProc) -> bool {
    match p.start {
        Some(s) => start_time(p.pid) == Some(s),
        None => pid_exists(p.pid),
    }
}

/// A recorded identity matches a live process with this start time on this boot.
fn same_process(id: &Identity, start: u64, boot: Option<&str>) -> bool {
    id.start == start && boot.is_some_and(|b| b == id.boot)
}

/// Tolerance for comparing a start time with a file time: the boot time the kernel reports is
/// whole seconds and moves when the clock is set.
const CLOCK_SLACK: std::time::Duration = std::time::Duration::from_secs(2);

fn started_after_writing(started: std::time::SystemTime, written: std::time::SystemTime) -> bool {
    started > written + CLOCK_SLACK
}

fn pid_exists(pid: u64) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Field 22 of `/proc/<pid>/stat` (start time in clock ticks since boot).
fn start_time(pid: u64) -> Option<u64> {
    parse_start_time(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Field 22 of a `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and may
/// hold spaces and `)`: the fields after it are counted from its last `)`.
fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_string()).filter(|s| !s.is_empty())
}

/// The wall-clock time a process started `ticks` after boot. USER_HZ is 100 on every Linux
/// architecture Nimbus builds for (it is part of the kernel ABI, unlike HZ).
fn started_at(ticks: u64) -> Option<std::time::SystemTime> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: u64 = stat.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()?;
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_millis(btime * 1000 + ticks * 10))
}

/// Processes of this user that hold something under `mp` (working directory, root, an open
/// file, a mapped file), which makes unmounting it fail: `(pid, name, what)`. Linux only;
/// elsewhere nothing is found and the mount process reports the failure in its log.
pub fn users_of(mp: &Path, except: u64) -> Vec<(u64, String, &'static str)> {
    let mut found = Vec::new();
    if !cfg!(target_os = "linux") {
        return found;
    }
    // The kernel names paths by their real location: resolve the parent (not the mount
    // point itself, which would be a call into the mount).
    let mp = match (mp.parent(), mp.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent).map_or_else(|_| mp.to_path_buf(), |p| p.join(name)),
        _ => mp.to_path_buf(),
    };
    let Ok(rd) = std::fs::read_dir("/proc") else { return found };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u64>().ok()) else { continue };
        if pid == except || pid == u64::from(std::process::id()) {
            continue;
        }
        let dir = e.path();
        let inside = |link: PathBuf| std::fs::read_link(link).is_ok_and(|t| t.starts_with(&mp));
        let what = if inside(dir.join("cwd")) {
            Some("working directory")
        } else if inside(dir.join("root")) {
            Some("root directory")
        } else if std::fs::read_dir(dir.join("fd")).is_ok_and(|fds| fds.flatten().any(|fd| inside(fd.path()))) {
            Some("open file")
        } else if std::fs::read_to_string(dir.join("maps")).is_ok_and(|m| {
            m.lines().any(|l| l.split_whitespace().nth(5).is_some_and(|p| Path::new(p).starts_with(&mp)))
        }) {
            Some("mapped file")
        } else {
            None
        };
        if let Some(what) = what {
            let name = std::fs::read_to_string(dir.join("comm")).map(|s| s.trim().to_string()).unwrap_or_default();
            found.push((pid, name, what));
        }
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn the_start_time_is_field_22() {
        let line = "4242 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 19 20";
        assert_eq!(parse_start_time(line), Some(987654));
        assert_eq!(parse_start_time("4242 (short) S 1 2"), None);
        assert_eq!(parse_start_time("garbage"), None);
    }

    #[test]
    fn an_identity_matches_only_the_same_start_on_the_same_boot() {
        let id = Identity { pid: 7, start: 100, boot: "b1".into() };
        assert!(same_process(&id, 100, Some("b1")));
        assert!(!same_process(&id, 101, Some("b1")), "another process with the same pid");
        assert!(!same_process(&id, 100, Some("b2")), "the same start time after a reboot");
        assert!(!same_process(&id, 100, None));
    }

    #[test]
    fn a_process_younger_than_the_status_file_did_not_write_it() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert!(!started_after_writing(t, t + Duration::from_secs(60)), "the mount started before it wrote");
        assert!(!started_after_writing(t + Duration::from_secs(1), t), "within the clock's slack");
        assert!(started_after_writing(t + Duration::from_secs(30), t), "a pid reused after the mount died");
    }

    fn status_of(pid: u64) -> Value {
        serde_json::json!({ "mountpoint": "/m", "pid": pid })
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_recorded_mount_is_alive_only_while_its_start_time_matches() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let status = dir.path().join("k.json");
        std::fs::write(&status, b"{}")?;
        let me = this_process().ok_or_else(|| anyhow::anyhow!("no /proc/self"))?;
        let st = status_of(me.pid);

        record_self(&status)?;
        let p = mount_process(&status, &st).ok_or_else(|| anyhow::anyhow!("this process not recognised"))?;
        assert_eq!(p.pid, me.pid);
        assert!(still_running(&p));

        // The same pid, but not the process that recorded it: a stale file, not a mount.
        let other = Identity { start: me.start + 1, ..me.clone() };
        std::fs::write(identity_file(&status), serde_json::to_vec(&other)?)?;
        assert_eq!(mount_process(&status, &st), None);
        assert!(!still_running(&MountProc { pid: me.pid, start: Some(me.start + 1) }));
        let rebooted = Identity { boot: "another boot".into(), ..me.clone() };
        std::fs::write(identity_file(&status), serde_json::to_vec(&rebooted)?)?;
        assert_eq!(mount_process(&status, &st), None);

        remove_stale(&status);
        assert!(!status.exists() && !identity_file(&status).exists());
        Ok(())
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_unrecorded_mount_is_judged_by_the_status_file_age() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let status = dir.path().join("k.json");
        std::fs::write(&status, b"{}")?;
        let st = status_of(u64::from(std::process::id()));
        // Written now, by a process that started earlier: the desktop app's mounts look so.
        assert!(mount_process(&status, &st).is_some());
        // Last written long before this process started: its pid was reused.
        let old = SystemTime::now() - Duration::from_secs(365 * 24 * 3600);
        std::fs::File::options().write(true).open(&status)?.set_modified(old)?;
        assert_eq!(mount_process(&status, &st), None);
        // A record of another pid does not vouch for this one.
        std::fs::write(identity_file(&status), serde_json::to_vec(&Identity { pid: 1, start: 1, boot: "b".into() })?)?;
        assert_eq!(mount_process(&status, &st), None);
        Ok(())
    }

    #[test]
    fn a_missing_process_is_not_a_mount() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let status = dir.path().join("k.json");
        // Above any pid_max the kernel allows (2^22).
        assert_eq!(mount_process(&status, &status_of(u64::from(u32::MAX))), None);
        assert_eq!(mount_process(&status, &serde_json::json!({ "mountpoint": "/m" })), None);
        Ok(())
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_working_directory_inside_makes_the_mount_busy() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let inner = dir.path().join("mnt");
        std::fs::create_dir_all(inner.join("sub"))?;
        let mut child = std::process::Command::new("sleep").arg("30").current_dir(inner.join("sub")).spawn()?;
        let users = users_of(&inner, 0);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            users.iter().any(|(pid, _, what)| *pid == u64::from(child.id()) && *what == "working directory"),
            "{users:?}"
        );
        assert!(users_of(&dir.path().join("elsewhere"), 0).iter().all(|(pid, _, _)| *pid != u64::from(child.id())));
        Ok(())
    }
}
