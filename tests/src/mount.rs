//! The drive as users run it: `nimbus login`, then `nimbus mount` (a real FUSE mount served by
//! the real `nimbus` binary), `nimbus status`, `nimbus unmount`.
//!
//! - [`Device`]: one machine's `nimbus`: its own config dir (`NIMBUS_CONFIG_DIR`), home and a
//!   scratch directory for mount points, cache dirs and local files.
//! - [`Drive`]: one mount of a device, in the foreground (a child process whose stderr is the
//!   log) or in the background (`nimbus mount` detaches it; it logs to `<cache dir>/mount.log`).
//!   Dropping a drive that the test did not unmount stops the mount process (SIGTERM, then
//!   SIGKILL) and unmounts the mount point (`fusermount3 -u`, else `umount -l`), so a failed
//!   test never leaves a mount behind; its log tail is printed then.
//! - [`Snapshot`]: a directory tree (names, kinds, sizes, content hashes) read from a local
//!   directory (the mount, a reference copy) or from the server through the REST API.
//! - [`PyOps`]: a sequence of open/write/fsync/close calls run by a `python3` process that
//!   reports each call's result, since Rust's `File` hides what `close(2)` returns.
//!
//! Environment: `NIMBUS_TEST_MOUNT_LOG`, the mount process's `NIMBUS_LOG` filter (default
//! `info,nimbus_mount=debug`).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use nimbus_proto::wire::EntryKind;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::http::Api;

/// No single CLI command may take longer than this (`nimbus unmount` uploads first).
pub const CLI_TIMEOUT: Duration = Duration::from_secs(180);
/// A mount must serve within this after it was started.
const MOUNT_READY: Duration = Duration::from_secs(60);

pub const ENV_MOUNT_LOG: &str = "NIMBUS_TEST_MOUNT_LOG";

// ---------------------------------------------------------------------------------------------
// Polling

/// Runs `check` until it succeeds or `within` has passed (then its last error, with `what`).
/// For "another device sees it within a few seconds": behaviour is checked, never a fixed wait.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        match check().await {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() >= deadline => {
                return Err(e.context(format!("{what}: still not so after {within:?}")));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A device's `nimbus`

/// What a finished command did.
pub struct CliOutput {
    pub cmd: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl fmt::Display for CliOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stdout: String = self.stdout.chars().take(3000).collect();
        let stderr: String = self.stderr.chars().take(3000).collect();
        write!(f, "`{}` exited with {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}", self.cmd, self.status)
    }
}

impl fmt::Debug for CliOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl CliOutput {
    /// Fails unless the command succeeded without a crash.
    pub fn ok(&self) -> anyhow::Result<&Self> {
        ensure!(self.status.success(), "expected success: {self}");
        self.no_crash()?;
        Ok(self)
    }

    /// Fails unless the command failed (exit code 1) with an `error: ` message on stderr that
    /// contains each of `needles` (case-insensitively), and without a panic.
    pub fn failed(&self, needles: &[&str]) -> anyhow::Result<&Self> {
        ensure!(self.status.code() == Some(1), "expected exit code 1: {self}");
        ensure!(self.stderr.starts_with("error: "), "the message should start with `error: `: {self}");
        let lower = self.stderr.to_lowercase();
        for n in needles {
            ensure!(lower.contains(&n.to_lowercase()), "stderr should mention {n:?}: {self}");
        }
        self.no_crash()?;
        Ok(self)
    }

    fn no_crash(&self) -> anyhow::Result<()> {
        let lower = self.stderr.to_lowercase();
        for bad in ["panicked", "stack backtrace"] {
            ensure!(!lower.contains(bad), "stderr shows a crash ({bad}): {self}");
        }
        Ok(())
    }

    pub fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_str(&self.stdout).with_context(|| format!("stdout is not JSON: {self}"))
    }
}

struct DeviceInner {
    name: String,
    bin: PathBuf,
    dir: tempfile::TempDir,
}

/// One machine's `nimbus` (cheap to clone: clones share the directories, which live until the
/// last clone, and so every [`Drive`] of the device, is gone).
#[derive(Clone)]
pub struct Device {
    inner: Arc<DeviceInner>,
}

impl Device {
    /// A new device; `name` only labels messages and directories.
    pub fn new(name: &str) -> anyhow::Result<Device> {
        let bin = crate::bins::cli_bin()?;
        let dir = tempfile::Builder::new().prefix(&format!("nimbus-e2e-dev-{name}-")).tempdir()?;
        for d in ["home", "work"] {
            std::fs::create_dir_all(dir.path().join(d))?;
        }
        Ok(Device { inner: Arc::new(DeviceInner { name: name.to_string(), bin, dir }) })
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The device's scratch directory (mount points, cache dirs, local files go here).
    pub fn root(&self) -> &Path {
        self.inner.dir.path()
    }

    /// `root/rel`, created as a directory.
    pub fn dir(&self, rel: &str) -> anyhow::Result<PathBuf> {
        let p = self.root().join(rel);
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(p)
    }

    /// `$NIMBUS_CONFIG_DIR`.
    pub fn config_dir(&self) -> PathBuf {
        self.root().join("config")
    }

    /// Where each mount keeps its status file.
    pub fn mounts_dir(&self) -> PathBuf {
        self.config_dir().join("nimbus").join("mounts")
    }

    /// A `nimbus ARGS` command with this device's environment (and nothing from the
    /// developer's shell: no NIMBUS_* settings, no proxies).
    pub fn command<I, S>(&self, args: I) -> tokio::process::Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = tokio::process::Command::new(&self.inner.bin);
        cmd.args(args);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            let upper = k.to_ascii_uppercase();
            if k.starts_with("NIMBUS_") || upper.ends_with("_PROXY") || k.starts_with("RUST_LOG") {
                cmd.env_remove(k.as_ref());
            }
        }
        let home = self.root().join("home");
        let log = std::env::var(ENV_MOUNT_LOG).unwrap_or_else(|_| "info,nimbus_mount=debug".into());
        cmd.env("NIMBUS_CONFIG_DIR", self.config_dir())
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("NO_PROXY", "*")
            .env("NIMBUS_LOG", log)
            .env("NO_COLOR", "1")
            .env("RUST_BACKTRACE", "1")
            .current_dir(self.root().join("work"))
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `nimbus ARGS` to its end (bounded by [`CLI_TIMEOUT`]).
    pub async fn run<I, S>(&self, args: I) -> anyhow::Result<CliOutput>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.run_env(args, &[]).await
    }

    pub async fn run_env<I, S>(&self, args: I, env: &[(&str, &str)]) -> anyhow::Result<CliOutput>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<std::ffi::OsString> = args.into_iter().map(|a| a.as_ref().to_os_string()).collect();
        let text = format!(
            "[{}] nimbus {}",
            self.name(),
            args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
        );
        let mut cmd = self.command(&args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let out = tokio::time::timeout(CLI_TIMEOUT, cmd.output())
            .await
            .with_context(|| format!("`{text}` did not finish within {CLI_TIMEOUT:?}"))?
            .with_context(|| format!("cannot run `{text}`"))?;
        Ok(CliOutput {
            cmd: text,
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// `nimbus login URL -u USER` with the password in `NIMBUS_PASSWORD` (no terminal).
    pub async fn login(&self, url: &str, user: &str, password: &str) -> anyhow::Result<()> {
        let device = format!("e2e-{}", self.name());
        self.run_env(["login", url, "-u", user, "--device", &device], &[("NIMBUS_PASSWORD", password)]).await?.ok()?;
        Ok(())
    }

    /// `nimbus status --json`, parsed: `{"mounts":[...]}`.
    pub async fn status(&self) -> anyhow::Result<Value> {
        let out = self.run(["status", "--json"]).await?;
        out.ok()?;
        let v = out.json()?;
        ensure!(v["mounts"].is_array(), "`nimbus status --json` has no `mounts` array: {out}");
        Ok(v)
    }

    /// This device's mount at `mountpoint` in `nimbus status --json`, if listed.
    pub async fn mount_status(&self, mountpoint: &Path) -> anyhow::Result<Option<Value>> {
        let v = self.status().await?;
        let want = mountpoint.to_string_lossy();
        Ok(v["mounts"].as_array().and_then(|a| a.iter().find(|m| m["mountpoint"].as_str() == Some(&*want))).cloned())
    }

    /// The status file a mount at `mountpoint` keeps, read directly (no CLI).
    fn status_file_of(&self, mountpoint: &Path) -> Option<Value> {
        let want = mountpoint.to_string_lossy();
        let rd = std::fs::read_dir(self.mounts_dir()).ok()?;
        rd.flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| serde_json::from_slice::<Value>(&std::fs::read(e.path()).ok()?).ok())
            .find(|v| v["mountpoint"].as_str() == Some(&*want))
    }
}

// ---------------------------------------------------------------------------------------------
// Mounts

/// Whether the kernel lists a mount at `path` (`/proc/self/mounts`).
pub fn is_mounted(path: &Path) -> bool {
    let want = path.to_string_lossy();
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .any(|mp| unescape_mount_field(mp) == want)
}

/// `/proc/self/mounts` writes space, tab, newline and backslash as `\ooo`.
fn unescape_mount_field(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && let Some(Ok(digits)) = b.get(i + 1..i + 4).map(std::str::from_utf8)
            && let Ok(v) = u8::from_str_radix(digits, 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Unmounts whatever is mounted at `path`: `fusermount3 -u`, else a lazy `umount -l`.
pub fn force_unmount(path: &Path) {
    if !is_mounted(path) {
        return;
    }
    let quiet = |prog: &str, args: &[&str]| {
        std::process::Command::new(prog)
            .args(args)
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !quiet("fusermount3", &["-u"]) && is_mounted(path) {
        let _ = quiet("umount", &["-l"]);
    }
}

fn pid_alive(pid: u32) -> bool {
    // A zombie is as good as dead (its parent has not reaped it yet).
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The last `lines` lines of a text file.
pub fn tail(path: &Path, lines: usize) -> String {
    crate::gateway::tail_file(path, lines)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountMode {
    /// `nimbus mount --foreground` as a child of the test (stderr captured to a file).
    Foreground,
    /// `nimbus mount` (detached; logs to `<cache dir>/mount.log`).
    Background,
}

/// A foreground mount process: reaped by a thread as soon as it exits, so its pid never
/// lingers as a zombie (which `nimbus unmount` would wait for).
struct Reaped {
    status: Arc<Mutex<Option<ExitStatus>>>,
}

impl Reaped {
    fn exited(&self) -> Option<ExitStatus> {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One mount of a [`Device`]'s space.
pub struct Drive {
    device: Device,
    pub mountpoint: PathBuf,
    pub cache_dir: PathBuf,
    pub mode: MountMode,
    pid: u32,
    child: Option<Reaped>,
    log: PathBuf,
    /// Unmounted (or crashed and cleaned up) on purpose: nothing left for Drop.
    done: bool,
}

impl Drive {
    /// Mounts `device`'s space at `mountpoint` with `--cache-dir cache_dir` and waits until
    /// the kernel lists the mount and its status file names the serving process.
    pub async fn mount(device: &Device, mountpoint: &Path, cache_dir: &Path, mode: MountMode) -> anyhow::Result<Drive> {
        std::fs::create_dir_all(mountpoint)?;
        ensure!(!is_mounted(mountpoint), "{} is already mounted", mountpoint.display());
        let mp = mountpoint.to_string_lossy().into_owned();
        let cd = cache_dir.to_string_lossy().into_owned();
        let mut drive = Drive {
            device: device.clone(),
            mountpoint: mountpoint.to_path_buf(),
            cache_dir: cache_dir.to_path_buf(),
            mode,
            pid: 0,
            child: None,
            log: cache_dir.join("mount.log"),
            done: false,
        };
        match mode {
            MountMode::Foreground => {
                let n = std::fs::read_dir(device.root()).map(|d| d.count()).unwrap_or(0);
                let log = device.root().join(format!("mount-fg-{n}.log"));
                let file = std::fs::File::create(&log)?;
                let cmd = device.command(["mount", &mp, "--foreground", "--cache-dir", &cd]);
                let mut cmd = cmd.into_std();
                cmd.stdout(file.try_clone()?).stderr(file);
                let mut child = cmd.spawn().context("cannot start `nimbus mount --foreground`")?;
                drive.pid = child.id();
                drive.log = log;
                let status = Arc::new(Mutex::new(None));
                let s = status.clone();
                std::thread::Builder::new().name(format!("reap-mount-{}", drive.pid)).spawn(move || {
                    let st = child.wait().ok();
                    *s.lock().unwrap_or_else(|e| e.into_inner()) = st;
                })?;
                drive.child = Some(Reaped { status });
            }
            MountMode::Background => {
                let out = device.run(["mount", &mp, "--cache-dir", &cd]).await?;
                if !out.status.success() {
                    drive.done = true;
                    bail!("{out}\n---- mount log ----\n{}", tail(&drive.log, 40));
                }
                ensure!(
                    out.stdout.contains(&format!("Mounted your space at {mp}")),
                    "`nimbus mount` should say where it mounted: {out}"
                );
                let st = device
                    .status_file_of(mountpoint)
                    .with_context(|| format!("`nimbus mount` returned but left no status file: {out}"))?;
                let pid = st["pid"].as_u64().with_context(|| format!("status file without pid: {st}"))?;
                drive.pid = u32::try_from(pid)?;
            }
        }
        drive.wait_ready().await?;
        Ok(drive)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + MOUNT_READY;
        loop {
            if let Some(st) = self.child.as_ref().and_then(Reaped::exited) {
                self.done = true;
                bail!("the mount process exited ({st}) before serving:\n{}", tail(&self.log, 40));
            }
            if self.child.is_none() && !pid_alive(self.pid) {
                self.done = true;
                bail!("the mount process {} died before serving:\n{}", self.pid, tail(&self.log, 40));
            }
            let listed = self
                .device
                .status_file_of(&self.mountpoint)
                .is_some_and(|st| st["pid"].as_u64() == Some(u64::from(self.pid)));
            if listed && is_mounted(&self.mountpoint) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the mount did not come up within {MOUNT_READY:?}:\n{}", tail(&self.log, 40));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The mount process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `mountpoint/rel`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mountpoint.join(rel)
    }

    /// The mount's log: the child's stderr (foreground) or `<cache dir>/mount.log`.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    pub fn alive(&self) -> bool {
        match &self.child {
            Some(c) => c.exited().is_none(),
            None => pid_alive(self.pid),
        }
    }

    /// This mount's entry in `nimbus status --json` (fails if it is not listed).
    pub async fn status(&self) -> anyhow::Result<Value> {
        self.device
            .mount_status(&self.mountpoint)
            .await?
            .with_context(|| format!("`nimbus status --json` does not list {}", self.mountpoint.display()))
    }

    /// Polls `nimbus status --json` until `pred` holds for this mount's entry.
    pub async fn wait_status(
        &self,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        eventually(what, within, || async {
            let st = self.status().await?;
            ensure!(pred(&st), "status: {st}");
            Ok(st)
        })
        .await
    }

    /// `nimbus unmount MOUNTPOINT`, which must succeed; then the process must be gone (a
    /// foreground one with exit status 0) and the kernel must no longer list the mount.
    pub async fn unmount(mut self) -> anyhow::Result<()> {
        let out = self.device.run([OsStr::new("unmount"), self.mountpoint.as_os_str()]).await?;
        if let Err(e) = out.ok() {
            return Err(e.context(format!("mount log:\n{}", self.log_tail(40))));
        }
        ensure!(out.stdout.contains("Unmounted"), "`nimbus unmount` should say so: {out}");
        self.wait_gone(Duration::from_secs(30)).await?;
        ensure!(!is_mounted(&self.mountpoint), "{} is still mounted after `{}`", self.mountpoint.display(), out.cmd);
        if let Some(st) = self.child.as_ref().and_then(Reaped::exited) {
            ensure!(st.success(), "the mount process exited with {st}:\n{}", self.log_tail(40));
        }
        self.done = true;
        Ok(())
    }

    async fn wait_gone(&self, within: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        while self.alive() {
            ensure!(Instant::now() < deadline, "the mount process {} is still running", self.pid);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// SIGKILL to the mount process (nothing uploaded, nothing unmounted: the kernel keeps a
    /// dead mount). Waits until the process is gone.
    pub async fn kill9(&mut self) -> anyhow::Result<()> {
        signal(self.pid, "-KILL");
        self.wait_gone(Duration::from_secs(20)).await
    }

    /// After [`Drive::kill9`]: `nimbus unmount` of the dead mount (it must say the process was
    /// gone and unmount it); `fusermount3 -u` / `umount -l` if it could not.
    pub async fn clean_up_dead(mut self) -> anyhow::Result<()> {
        ensure!(!self.alive(), "clean_up_dead: the mount process is alive");
        let out = self.device.run([OsStr::new("unmount"), self.mountpoint.as_os_str()]).await?;
        let cli_ok = out.status.success() && !is_mounted(&self.mountpoint);
        force_unmount(&self.mountpoint);
        self.done = true;
        ensure!(!is_mounted(&self.mountpoint), "cannot unmount the dead mount at {}", self.mountpoint.display());
        ensure!(cli_ok, "`nimbus unmount` of a mount whose process died should unmount it: {out}");
        Ok(())
    }
}

impl Drop for Drive {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        eprintln!(
            "---- drive {} ({}) was not unmounted by the test; mount log (last 60 lines) ----\n{}\n---- end of mount log ----",
            self.mountpoint.display(),
            self.device.name(),
            self.log_tail(60)
        );
        if self.alive() {
            signal(self.pid, "-TERM");
            let deadline = Instant::now() + Duration::from_secs(20);
            while self.alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if self.alive() {
                signal(self.pid, "-KILL");
                let deadline = Instant::now() + Duration::from_secs(10);
                while self.alive() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        force_unmount(&self.mountpoint);
        if is_mounted(&self.mountpoint) {
            eprintln!("WARNING: {} is still mounted", self.mountpoint.display());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Trees

/// One entry of a [`Snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir,
    File { len: u64, hash: blake3::Hash },
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Dir => f.write_str("dir"),
            Node::File { len, hash } => write!(f, "file of {len} bytes, blake3 {}", &hash.to_hex()[..16]),
        }
    }
}

/// A directory tree: relative path (`a/b.txt`) → entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot(pub BTreeMap<String, Node>);

impl Snapshot {
    /// Reads a local directory (the mount, or a reference copy): every name, kind, size and
    /// the hash of every file's content. `with_content = false` records sizes only (hash of
    /// nothing), for cheap structural comparisons.
    pub fn local(root: &Path, with_content: bool) -> anyhow::Result<Snapshot> {
        let mut out = BTreeMap::new();
        let mut stack = vec![(root.to_path_buf(), String::new())];
        while let Some((dir, rel)) = stack.pop() {
            let rd = std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?;
            for e in rd {
                let e = e.with_context(|| format!("listing {}", dir.display()))?;
                let name = e.file_name().into_string().map_err(|n| anyhow::anyhow!("non-UTF-8 name {n:?}"))?;
                let path = e.path();
                let r = if rel.is_empty() { name } else { format!("{rel}/{name}") };
                let md = std::fs::symlink_metadata(&path).with_context(|| format!("stat {}", path.display()))?;
                if md.is_dir() {
                    out.insert(r.clone(), Node::Dir);
                    stack.push((path, r));
                } else if md.is_file() {
                    let hash = if with_content {
                        let data = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                        ensure!(
                            data.len() as u64 == md.len(),
                            "{}: stat says {} bytes, read gave {}",
                            path.display(),
                            md.len(),
                            data.len()
                        );
                        blake3::hash(&data)
                    } else {
                        blake3::hash(b"")
                    };
                    out.insert(r, Node::File { len: md.len(), hash });
                } else {
                    bail!("{} is neither a file nor a directory", path.display());
                }
            }
        }
        Ok(Snapshot(out))
    }

    /// Reads `root` in the caller's space through the REST API (listings and full GETs).
    pub async fn server(api: &Api, root: &str) -> anyhow::Result<Snapshot> {
        let mut out = BTreeMap::new();
        let mut stack = vec![(root.trim_end_matches('/').to_string(), String::new())];
        while let Some((dir, rel)) = stack.pop() {
            let list = if dir.is_empty() { "/" } else { dir.as_str() };
            for e in api.list_all(list, None).await.with_context(|| format!("listing {list} on the server"))? {
                let r = if rel.is_empty() { e.name.clone() } else { format!("{rel}/{}", e.name) };
                let path = format!("{dir}/{}", e.name);
                match e.kind {
                    EntryKind::Dir => {
                        out.insert(r.clone(), Node::Dir);
                        stack.push((path, r));
                    }
                    EntryKind::File => {
                        let resp = api.get_file(&path).await?;
                        resp.check(200)?;
                        ensure!(
                            resp.body.len() as u64 == e.size,
                            "{path}: the listing says {} bytes, GET gave {}",
                            e.size,
                            resp.body.len()
                        );
                        out.insert(r, Node::File { len: e.size, hash: blake3::hash(&resp.body) });
                    }
                }
            }
        }
        Ok(Snapshot(out))
    }

    /// Same entries and sizes (contents not compared).
    pub fn same_shape(&self, other: &Snapshot) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().zip(&other.0).all(|((ka, a), (kb, b))| {
                ka == kb
                    && match (a, b) {
                        (Node::Dir, Node::Dir) => true,
                        (Node::File { len: x, .. }, Node::File { len: y, .. }) => x == y,
                        _ => false,
                    }
            })
    }

    /// What differs, one line each (`left` and `right` name the two sides); empty if equal.
    pub fn diff(&self, other: &Snapshot, left: &str, right: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (k, a) in &self.0 {
            match other.0.get(k) {
                None => out.push(format!("{k}: only in {left} ({a})")),
                Some(b) if a != b => out.push(format!("{k}: {left} has {a}, {right} has {b}")),
                _ => {}
            }
        }
        for (k, b) in &other.0 {
            if !self.0.contains_key(k) {
                out.push(format!("{k}: only in {right} ({b})"));
            }
        }
        out
    }

    /// Fails listing the differences unless both trees are equal.
    pub fn ensure_same(&self, other: &Snapshot, left: &str, right: &str) -> anyhow::Result<()> {
        let d = self.diff(other, left, right);
        ensure!(d.is_empty(), "{left} and {right} differ ({} entries):\n{}", d.len(), d.join("\n"));
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// System calls with their results: python3

const PY_OPS: &str = r#"
import json, os, sys
ops = json.load(open(sys.argv[1]))
hold = len(sys.argv) > 2 and sys.argv[2] == "hold"
fds, srcs = {}, {}
def say(s):
    sys.stdout.write(s + "\n")
    sys.stdout.flush()
def data_of(op):
    if "text" in op:
        return op["text"].encode()
    src = op["src"]
    if src not in srcs:
        with open(src, "rb") as f:
            srcs[src] = f.read()
    return srcs[src][op["src_off"]:op["src_off"] + op["len"]]
failed = False
for i, op in enumerate(ops):
    k = op["op"]
    try:
        if k == "open":
            flags = {
                "w": os.O_WRONLY | os.O_CREAT,
                "wt": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                "wx": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                "r": os.O_RDONLY,
            }
            fds[op["fd"]] = os.open(op["path"], flags[op["mode"]], 0o644)
        elif k == "write":
            d = data_of(op)
            done = 0
            while done < len(d):
                n = os.pwrite(fds[op["fd"]], d[done:], op["off"] + done)
                if n <= 0:
                    raise OSError(5, "pwrite wrote nothing")
                done += n
        elif k == "fsync":
            os.fsync(fds[op["fd"]])
        elif k == "close":
            os.close(fds.pop(op["fd"]))
        elif k == "unlink":
            os.unlink(op["path"])
        elif k == "rename":
            os.rename(op["from"], op["to"])
        elif k == "wait":
            sys.stdin.readline()
        else:
            raise ValueError("unknown op " + k)
        say("ok %d" % i)
    except OSError as e:
        say("err %d %d %s" % (i, e.errno or 0, e.strerror))
        failed = True
        break
say("end")
if hold:
    sys.stdin.read()
sys.exit(1 if failed else 0)
"#;

/// A list of system calls on files for one `python3` process to make in order, reporting each
/// one's result on stdout (`ok I` or `err I ERRNO MESSAGE`, then `end`). File descriptors are
/// named by the caller (`fd`). Open modes: `w` (O_CREAT), `wt` (O_CREAT|O_TRUNC), `wx`
/// (O_CREAT|O_EXCL), `r`.
#[derive(Debug, Default, Clone)]
pub struct PyOps {
    pub ops: Vec<Value>,
}

/// What each call of a [`PyOps`] run returned.
#[derive(Debug, Clone, Default)]
pub struct PyResults {
    /// Index of every call that succeeded, in order.
    pub ok: Vec<usize>,
    /// The call that failed: (index, errno, message).
    pub err: Option<(usize, i32, String)>,
    pub ended: bool,
}

impl PyResults {
    fn feed(&mut self, line: &str) -> anyhow::Result<()> {
        let mut parts = line.splitn(4, ' ');
        match parts.next() {
            Some("ok") => self.ok.push(parts.next().context("ok without index")?.parse()?),
            Some("err") => {
                let i = parts.next().context("err without index")?.parse()?;
                let errno = parts.next().context("err without errno")?.parse()?;
                self.err = Some((i, errno, parts.next().unwrap_or_default().to_string()));
            }
            Some("end") => self.ended = true,
            _ => bail!("unexpected line from the python writer: {line:?}"),
        }
        Ok(())
    }

    /// Whether call `i` succeeded.
    pub fn succeeded(&self, i: usize) -> bool {
        self.ok.contains(&i)
    }
}

impl PyOps {
    pub fn open(&mut self, fd: &str, path: &Path, mode: &str) -> usize {
        self.push(serde_json::json!({"op": "open", "fd": fd, "path": path.to_string_lossy(), "mode": mode}))
    }

    /// `pwrite(fd, src[src_off..src_off+len], off)`.
    pub fn write_from(&mut self, fd: &str, off: u64, src: &Path, src_off: u64, len: u64) -> usize {
        self.push(serde_json::json!({"op": "write", "fd": fd, "off": off, "src": src.to_string_lossy(), "src_off": src_off, "len": len}))
    }

    pub fn write_text(&mut self, fd: &str, off: u64, text: &str) -> usize {
        self.push(serde_json::json!({"op": "write", "fd": fd, "off": off, "text": text}))
    }

    pub fn fsync(&mut self, fd: &str) -> usize {
        self.push(serde_json::json!({"op": "fsync", "fd": fd}))
    }

    pub fn close(&mut self, fd: &str) -> usize {
        self.push(serde_json::json!({"op": "close", "fd": fd}))
    }

    pub fn unlink(&mut self, path: &Path) -> usize {
        self.push(serde_json::json!({"op": "unlink", "path": path.to_string_lossy()}))
    }

    pub fn rename(&mut self, from: &Path, to: &Path) -> usize {
        self.push(serde_json::json!({"op": "rename", "from": from.to_string_lossy(), "to": to.to_string_lossy()}))
    }

    /// Waits (in a [`PyOps::start`]ed run) until [`PyRun::go`].
    pub fn wait(&mut self) -> usize {
        self.push(serde_json::json!({"op": "wait"}))
    }

    fn push(&mut self, v: Value) -> usize {
        self.ops.push(v);
        self.ops.len() - 1
    }

    fn command(&self, dir: &Path, hold: bool) -> anyhow::Result<tokio::process::Command> {
        let plan = dir.join(format!("pyops-{:016x}.json", rand::random::<u64>()));
        std::fs::write(&plan, serde_json::to_vec(&self.ops)?)?;
        let mut cmd = tokio::process::Command::new("python3");
        cmd.arg("-c").arg(PY_OPS).arg(&plan);
        if hold {
            cmd.arg("hold");
        }
        cmd.stdin(if hold { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        Ok(cmd)
    }

    /// Runs the calls to the end (plan file written in `scratch`); the results.
    pub async fn run(&self, scratch: &Path) -> anyhow::Result<PyResults> {
        let out = tokio::time::timeout(CLI_TIMEOUT, self.command(scratch, false)?.output())
            .await
            .context("the python writer did not finish")??;
        let mut r = PyResults::default();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            r.feed(line)?;
        }
        ensure!(r.ended, "the python writer crashed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
        Ok(r)
    }

    /// Runs every call, each of which must succeed (including `close`).
    pub async fn run_ok(&self, scratch: &Path) -> anyhow::Result<()> {
        let r = self.run(scratch).await?;
        if let Some((i, errno, msg)) = &r.err {
            bail!("call {i} ({}) failed: errno {errno} {msg}", self.ops[*i]);
        }
        Ok(())
    }

    /// Starts the calls in the background; the process stays (its descriptors open) after the
    /// last call until [`PyRun::release`].
    pub fn start(&self, scratch: &Path) -> anyhow::Result<PyRun> {
        let mut child = self.command(scratch, true)?.spawn().context("cannot start python3")?;
        let stdout = child.stdout.take().context("python stdout")?;
        let results = Arc::new(Mutex::new(PyResults::default()));
        let r = results.clone();
        let reader = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut g = r.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = g.feed(&line) {
                    eprintln!("{e:#}");
                }
            }
        });
        Ok(PyRun { child, results, reader: Some(reader) })
    }
}

/// A [`PyOps`] run in progress.
pub struct PyRun {
    child: tokio::process::Child,
    results: Arc<Mutex<PyResults>>,
    reader: Option<tokio::task::JoinHandle<()>>,
}

impl PyRun {
    /// The results so far.
    pub fn results(&self) -> PyResults {
        self.results.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until `pred` holds for the results so far (or the run ended).
    pub async fn wait_for(&self, within: Duration, pred: impl Fn(&PyResults) -> bool) -> anyhow::Result<PyResults> {
        let deadline = Instant::now() + within;
        loop {
            let r = self.results();
            if pred(&r) || r.ended {
                return Ok(r);
            }
            ensure!(Instant::now() < deadline, "the python writer got no further than {:?} in {within:?}", r);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Lets a `wait` call return.
    pub async fn go(&mut self) -> anyhow::Result<()> {
        let stdin = self.child.stdin.as_mut().context("the python writer has no stdin")?;
        stdin.write_all(b"go\n").await?;
        stdin.flush().await?;
        Ok(())
    }

    /// Lets the process exit (closing its descriptors) and waits for it; the final results.
    pub async fn release(mut self) -> anyhow::Result<PyResults> {
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = stdin.shutdown().await;
        }
        tokio::time::timeout(Duration::from_secs(120), self.child.wait())
            .await
            .context("the python writer did not exit")??;
        if let Some(r) = self.reader.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), r).await;
        }
        Ok(self.results())
    }
}

// ---------------------------------------------------------------------------------------------
// Ordinary programs

/// `&OsStr` of anything path- or string-like, for argument lists mixing both.
pub fn os<S: AsRef<OsStr> + ?Sized>(s: &S) -> &OsStr {
    s.as_ref()
}

/// Runs `program args` (in `cwd`, with `env` added) to its end, which must succeed; its stdout.
pub async fn tool(program: &str, args: &[&OsStr], cwd: Option<&Path>, env: &[(&str, &str)]) -> anyhow::Result<String> {
    let text =
        format!("{program} {}", args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" "));
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(CLI_TIMEOUT, cmd.output())
        .await
        .with_context(|| format!("`{text}` did not finish within {CLI_TIMEOUT:?}"))?
        .with_context(|| format!("cannot run `{text}`"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(
        out.status.success(),
        "`{text}` exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        stdout.chars().take(4000).collect::<String>(),
        String::from_utf8_lossy(&out.stderr).chars().take(4000).collect::<String>()
    );
    Ok(stdout)
}
