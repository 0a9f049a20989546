//! `nimbus mount`, `nimbus unmount`, `nimbus status`, `nimbus resolve`.
//!
//! A background mount is this same binary re-run with `--foreground`, detached, logging to
//! `<cache dir>/mount.log`. Each running mount keeps a status file in
//! `<config dir>/mounts/<key>.json` (key: hash of the mount point): that is how `unmount`
//! finds the process to stop and `status` what to show; `<key>.process` tells that process
//! apart from a later one with the same pid (`process`). `resolve` drops a request into the
//! mount's request folder (`nimbus_mount::requests`) and waits for its reply.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;

use nimbus_proto::drive::{DriveProblem, ProblemAction, ResolveRequest};

mod process;

use self::process::MountProc;
use super::Ctx;
use crate::cli::MountArgs;
use crate::outln;
use crate::output::{Align, confirm, human_bytes, parse_size, print_json, print_table};
use crate::session;

fn mountpoint_abs(raw: &Path) -> Result<PathBuf> {
    std::path::absolute(raw).with_context(|| format!("`{}` is not a usable path", raw.display()))
}

fn key(mp: &Path) -> String {
    blake3::hash(mp.as_os_str().as_encoded_bytes()).to_hex()[..16].to_string()
}

fn registry_dir() -> Result<PathBuf> {
    Ok(session::config_dir()?.join("mounts"))
}

fn status_file(mp: &Path) -> Result<PathBuf> {
    Ok(registry_dir()?.join(format!("{}.json", key(mp))))
}

fn default_cache_dir(mp: &Path) -> Result<PathBuf> {
    let base = match std::env::var_os("NIMBUS_CACHE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => {
            dirs::cache_dir().ok_or_else(|| anyhow!("cannot find a cache directory; pass --cache-dir"))?.join("nimbus")
        }
    };
    Ok(base.join(format!("drive-{}", key(mp))))
}

fn read_status(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The running process of the mount whose status file is `path`; a stale file (its process
/// gone, its pid now another process's) is removed and gives `None`.
fn live_mount(path: &Path) -> Option<(Value, MountProc)> {
    // No status file (yet): a mount starting now may have recorded its process already.
    let st = read_status(path)?;
    match process::mount_process(path, &st) {
        Some(p) => Some((st, p)),
        None => {
            process::remove_stale(path);
            None
        }
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_else(|| "device".into())
}

fn parse_delay(raw: &str) -> Result<Duration> {
    match raw.trim().parse::<f64>() {
        Ok(s) if (0.0..=3600.0).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => bail!("--upload-delay takes a number of seconds from 0 to 3600 (e.g. 1 or 0.5), not `{raw}`"),
    }
}

struct Plan {
    mountpoint: PathBuf,
    cache_dir: PathBuf,
    cache_size: u64,
    cache_mem: u64,
    upload_delay: Duration,
    status: PathBuf,
}

fn plan(args: &MountArgs) -> Result<Plan> {
    let mountpoint = mountpoint_abs(&args.mountpoint)?;
    #[cfg(unix)]
    {
        let md = std::fs::metadata(&mountpoint).with_context(|| {
            format!("the mount point {} must be an existing empty folder; create it first", mountpoint.display())
        })?;
        if !md.is_dir() {
            bail!("the mount point {} is not a folder", mountpoint.display());
        }
    }
    let status = status_file(&mountpoint)?;
    if let Some((_, p)) = live_mount(&status) {
        bail!(
            "{} is already mounted (process {}); `nimbus unmount {}` first",
            mountpoint.display(),
            p.pid,
            mountpoint.display()
        );
    }
    let cache_dir = match &args.cache_dir {
        Some(d) => mountpoint_abs(d)?,
        None => default_cache_dir(&mountpoint)?,
    };
    Ok(Plan {
        mountpoint,
        cache_dir,
        cache_size: parse_size(&args.cache_size).context("--cache-size")?,
        cache_mem: parse_size(&args.cache_mem).context("--cache-mem")?,
        upload_delay: parse_delay(&args.upload_delay)?,
        status,
    })
}

/// `nimbus mount --foreground`: serve in this process until unmounted or interrupted.
pub fn foreground(args: &MountArgs) -> Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NIMBUS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let plan = plan(args)?;
    let session = session::require()?;
    let client = session.client()?;
    if let Some(dir) = plan.status.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // Before the mount writes its status file, so that the two always go together.
    process::record_self(&plan.status)
        .with_context(|| format!("cannot write {}", process::identity_file(&plan.status).display()))?;
    let status = plan.status.clone();
    let cfg = nimbus_mount::session::MountConfig {
        mountpoint: plan.mountpoint,
        cache_dir: plan.cache_dir,
        cache_size: plan.cache_size,
        cache_mem: plan.cache_mem,
        upload_delay: plan.upload_delay,
        status_file: plan.status,
        host: host_name(),
    };
    #[cfg(any(unix, windows))]
    let result = nimbus_mount::session::run(client, cfg).map_err(|e| anyhow!("{e}"));
    #[cfg(not(any(unix, windows)))]
    let result = {
        let _ = (client, cfg);
        Err(anyhow!("mounting is not built for this platform"))
    };
    // The mount removed its status file; the record of this process goes with it.
    let _ = std::fs::remove_file(process::identity_file(&status));
    result
}

/// mimalloc's settings for the drive that `nimbus mount` starts, unless the caller's
/// environment gives them. Transparent huge pages off: in 2 MiB pages the drive's freed block
/// buffers stayed resident (a peak of 205 MiB at `--cache-mem 128MiB`, 162 MiB without them),
/// and its reads were as fast without (docs/BENCHMARKS.md). mimalloc reads its options before
/// `main`, so they are set here, in the environment it starts with.
const DRIVE_ALLOCATOR: &[(&str, &str)] = &[("MIMALLOC_ALLOW_THP", "0")];

/// `nimbus mount`: start a detached `--foreground` mount and wait until it serves.
pub async fn background(args: &MountArgs) -> Result<()> {
    let plan = plan(args)?;
    session::require()?;
    std::fs::create_dir_all(&plan.cache_dir)
        .with_context(|| format!("cannot create the cache dir {}", plan.cache_dir.display()))?;
    let log_path = plan.cache_dir.join("mount.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot write {}", log_path.display()))?;
    let exe = std::env::current_exe().context("cannot find the nimbus binary to start the mount")?;
    let mut cmd = Command::new(exe);
    cmd.arg("mount")
        .arg(&plan.mountpoint)
        .arg("--foreground")
        .arg("--cache-dir")
        .arg(&plan.cache_dir)
        .arg("--cache-size")
        .arg(&args.cache_size)
        .arg("--cache-mem")
        .arg(&args.cache_mem)
        .arg("--upload-delay")
        .arg(&args.upload_delay)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    for (name, value) in DRIVE_ALLOCATOR {
        if std::env::var_os(name).is_none() {
            cmd.env(name, value);
        }
    }
    #[cfg(unix)]
    {
        // Its own process group: Ctrl-C in this terminal later must not kill the drive.
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().context("cannot start the mount process")?;
    let started = Instant::now();
    loop {
        if let Some(st) = read_status(&plan.status)
            && st.get("pid").and_then(Value::as_u64) == Some(u64::from(child.id()))
        {
            println!(
                "Mounted your space at {} (cache {}). Stop with `nimbus unmount {}`.",
                plan.mountpoint.display(),
                plan.cache_dir.display(),
                plan.mountpoint.display()
            );
            return Ok(());
        }
        if let Some(code) = child.try_wait()? {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!("the mount process stopped ({code}):\n{}", tail.join("\n"));
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!("the mount did not come up within 30 s; see {}", log_path.display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `nimbus unmount`: ask the mount process to upload pending writes and let go.
pub async fn unmount(raw: &Path) -> Result<()> {
    let mp = mountpoint_abs(raw)?;
    let status = status_file(&mp)?;
    if let Some((st, p)) = live_mount(&status) {
        return stop(&mp, &st, &p).await;
    }
    // No live mount process of ours: a leftover (crashed) mount the kernel still lists.
    if !kernel_lists(&mp) {
        bail!("nothing is mounted at {}", mp.display());
    }
    for tool in [&["fusermount3", "-u"][..], &["fusermount", "-u"], &["umount", "-l"]] {
        if Command::new(tool[0]).args(&tool[1..]).arg(&mp).status().is_ok_and(|s| s.success()) {
            println!(
                "Unmounted {} (its mount process was gone; pending writes go up at the next mount).",
                mp.display()
            );
            return Ok(());
        }
    }
    bail!("cannot unmount {}", mp.display())
}

/// Whether the kernel lists a mount at `mp` (Linux; elsewhere never).
fn kernel_lists(mp: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(&*mp.to_string_lossy()))
}

/// Signals the mount process `p` to upload pending writes and unmount, and waits for it.
/// Fails, saying what to do, when the drive is in use, when the mount process reports that it
/// could not unmount, and when writes are left in its journal.
async fn stop(mp: &Path, st: &Value, p: &MountProc) -> Result<()> {
    let pid = p.pid;
    // A busy drive cannot be unmounted: the mount process would upload, fail to let go and
    // keep serving (no longer listening for signals), and this would wait for it in vain.
    let users = process::users_of(mp, pid);
    if !users.is_empty() {
        let list: Vec<String> =
            users.iter().take(5).map(|(pid, name, what)| format!("{name} (process {pid}, {what})")).collect();
        bail!(
            "{} is in use: {}{}.\nLeave it or close those files, then run `nimbus unmount {}` again; the drive keeps running meanwhile.",
            mp.display(),
            list.join(", "),
            if users.len() > 5 { ", ..." } else { "" },
            mp.display()
        );
    }
    let cache_dir = st.get("cache").and_then(|c| c.get("dir")).and_then(Value::as_str).map(PathBuf::from);
    // What the mount process logs from now on (a background mount logs to `mount.log`).
    let log = cache_dir.as_ref().map(|d| d.join("mount.log"));
    let log_from = log.as_ref().and_then(|l| std::fs::metadata(l).ok()).map_or(0, |m| m.len());
    let ok = Command::new("kill").arg("-TERM").arg(pid.to_string()).status().map(|s| s.success()).unwrap_or(false);
    if !ok {
        bail!("cannot signal the mount process {pid}");
    }
    let started = Instant::now();
    let mut told = false;
    let mut next_look = Duration::ZERO;
    let listed_at_start = kernel_lists(mp);
    let mut detached_since = None;
    while process::still_running(p) {
        if started.elapsed() >= next_look {
            next_look = started.elapsed() + Duration::from_secs(1);
            let pending = || {
                status_file(mp)
                    .ok()
                    .and_then(|f| read_status(&f))
                    .and_then(|s| s.get("pending_uploads").and_then(Value::as_u64))
                    .map_or(String::new(), |n| format!(" ({n} writes pending)"))
            };
            // The mount process unmounts only after its uploads; a lazy unmount (not root)
            // succeeds while the drive is in use, and the process then waits for the users.
            if listed_at_start && !kernel_lists(mp) {
                let since = *detached_since.get_or_insert_with(Instant::now);
                // Generous: after letting go the process only closes its journal and exits.
                if since.elapsed() > Duration::from_secs(30) {
                    bail!(
                        "{} is detached, but a program still has its working directory or a file in it, so the mount \
                         process {pid} keeps running{} until they let go; leave it or close those files",
                        mp.display(),
                        pending()
                    );
                }
            }
            if log.as_ref().is_some_and(|l| log_since(l, log_from).contains(UNMOUNT_FAILED)) {
                let pending = pending();
                bail!(
                    "the mount process could not unmount {}: something has it in use. The drive keeps running{pending}.\n\
                     Leave it or close the files in it, then unmount it with `{}` (the mount process then stops).",
                    mp.display(),
                    platform_unmount(mp)
                );
            }
        }
        if !told && started.elapsed() > Duration::from_secs(2) {
            eprintln!("Uploading pending writes before unmounting...");
            told = true;
        }
        if started.elapsed() > Duration::from_secs(900) {
            bail!("the mount process {pid} is still uploading after 15 minutes; it keeps going in the background");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("Unmounted {}.", mp.display());
    // The journal is the truth about what did not go up: a record per file whose changes the
    // mount process could not upload (gateway unreachable) or the server refused (kept until
    // resolved) before it stopped. The drive is unmounted all the same, so this is said, not
    // failed on.
    if let Some(staging) = cache_dir.map(|d| d.join("staging")) {
        let left = journal_records(&staging);
        if left > 0 {
            eprintln!(
                "Note: {left} file(s) with changes are not on the server yet (the gateway was out of reach, or refused \
                 them; see {}). They stay in the journal at {} and go up, or are listed by `nimbus status` to resolve, \
                 at the next `nimbus mount {}`.",
                log.as_ref().map_or_else(|| "the mount's log".to_string(), |l| l.display().to_string()),
                staging.display(),
                mp.display()
            );
        }
    }
    Ok(())
}

/// What the mount process logs when letting go of the mount point fails (nimbus_mount::session).
const UNMOUNT_FAILED: &str = "unmount failed";

/// The text appended to `log` after its first `from` bytes.
fn log_since(log: &Path, from: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let mut text = Vec::new();
    if let Ok(mut f) = std::fs::File::open(log)
        && f.seek(SeekFrom::Start(from)).is_ok()
    {
        let _ = f.read_to_end(&mut text);
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// How many write-back records the journal in `staging` holds (`<id>.json`, one per file not
/// yet uploaded; `moves.log`, `.data`, `.tmp` and `.broken` files are not records).
fn journal_records(staging: &Path) -> usize {
    std::fs::read_dir(staging)
        .map(|rd| rd.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "json")).count())
        .unwrap_or(0)
}

/// The command that unmounts a FUSE drive by hand here.
fn platform_unmount(mp: &Path) -> String {
    let tool = if cfg!(target_os = "linux") { "fusermount3 -u" } else { "umount" };
    format!("{tool} {}", shell_quoted(mp))
}

/// The status files of this user's running mounts (stale ones are removed).
fn live_mounts() -> Result<Vec<Value>> {
    let mut mounts = Vec::new();
    if let Ok(rd) = std::fs::read_dir(registry_dir()?) {
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_none_or(|x| x != "json") {
                continue;
            }
            if let Some((st, _)) = live_mount(&p) {
                mounts.push(st);
            }
        }
    }
    Ok(mounts)
}

fn mountpoint_of(status: &Value) -> PathBuf {
    PathBuf::from(status.get("mountpoint").and_then(Value::as_str).unwrap_or_default())
}

fn problems_of(status: &Value) -> Vec<DriveProblem> {
    status.get("problems").and_then(|p| serde_json::from_value(p.clone()).ok()).unwrap_or_default()
}

/// Where a path of the space is on the drive mounted at `mp`.
fn local_path(mp: &Path, space_path: &str) -> PathBuf {
    let mut p = mp.to_path_buf();
    if p.as_os_str().len() == 2 && p.as_os_str().to_string_lossy().ends_with(':') {
        // A drive letter: `Z:` + `docs` would be relative to Z:'s current folder.
        p.push(std::path::MAIN_SEPARATOR_STR);
    }
    for c in space_path.split('/').filter(|c| !c.is_empty()) {
        p.push(c);
    }
    p
}

/// A path for the shell: quoted when it has characters a shell would split or expand.
fn shell_quoted(p: &Path) -> String {
    let s = p.display().to_string();
    if s.chars().all(|c| c.is_alphanumeric() || "/._-:\\~".contains(c)) {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `nimbus status`: every mount this user runs.
pub async fn status(ctx: &Ctx) -> Result<()> {
    let mounts = live_mounts()?;
    if ctx.json {
        return print_json(&serde_json::json!({ "mounts": mounts }));
    }
    if mounts.is_empty() {
        println!("No drive is mounted. Mount one with `nimbus mount <folder>`.");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = mounts
        .iter()
        .map(|m| {
            let s = |k: &str| {
                m.get(k).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).unwrap_or_default()
            };
            let cache = m.get("cache");
            let used = cache.and_then(|c| c.get("used_bytes")).and_then(Value::as_u64).unwrap_or(0);
            let cap = cache.and_then(|c| c.get("capacity_bytes")).and_then(Value::as_u64).unwrap_or(0);
            let conflicts = m.get("conflicts").and_then(Value::as_array).map_or(0, Vec::len);
            vec![
                s("mountpoint"),
                s("state"),
                s("pending_uploads"),
                problems_of(m).len().to_string(),
                conflicts.to_string(),
                format!("{} / {}", human_bytes(used), human_bytes(cap)),
            ]
        })
        .collect();
    print_table(
        &[
            ("MOUNT POINT", Align::Left),
            ("STATE", Align::Left),
            ("PENDING", Align::Right),
            ("REFUSED", Align::Right),
            ("CONFLICTS", Align::Right),
            ("CACHE", Align::Right),
        ],
        &rows,
    )?;
    for m in &mounts {
        let problems = problems_of(m);
        if problems.is_empty() {
            continue;
        }
        let mp = mountpoint_of(m);
        outln!("");
        outln!("Changes the server refused on {} (kept on this device until resolved):", mp.display());
        for p in problems {
            let file = local_path(&mp, &p.path);
            let reason = serde_json::to_value(p.reason).ok().and_then(|v| v.as_str().map(str::to_string));
            outln!("  {}", file.display());
            outln!("    {}: {}", reason.unwrap_or_default(), p.message);
            let times = if p.attempts == 1 { "once".to_string() } else { format!("{} times", p.attempts) };
            outln!("    Tried {times} since {}; the server said: {}", p.since, p.detail);
            let actions: Vec<&str> = p.actions.iter().map(|a| a.cli_name()).collect();
            outln!("    nimbus resolve {} {}", shell_quoted(&file), actions.join("|"));
        }
    }
    Ok(())
}

/// `nimbus resolve FILE ACTION`: asks the mount holding the refused change to act on it.
pub async fn resolve(ctx: &Ctx, file: &Path, action: &str, yes: bool) -> Result<()> {
    let action = ProblemAction::from_cli(action)
        .ok_or_else(|| anyhow!("`{action}` is not an action; use retry, save-copy or discard"))?;
    let mounts = live_mounts()?;
    if mounts.is_empty() {
        bail!(
            "no drive is mounted; refused changes are resolved while the drive that holds them runs (`nimbus mount`)"
        );
    }
    let (status, space_path) = which_mount(&mounts, file)?;
    let mp = mountpoint_of(status);
    let problems = problems_of(status);
    let Some(problem) = problems.iter().find(|p| p.path.to_lowercase() == space_path.to_lowercase()) else {
        bail!(
            "no refused change is waiting for {} ({space_path} on {}); `nimbus status` lists the ones that are",
            file.display(),
            mp.display()
        );
    };
    if action == ProblemAction::Discard
        && !yes
        && !confirm(
            &format!("Throw away this device's change to {}?", local_path(&mp, &problem.path).display()),
            "--yes",
        )?
    {
        outln!("Nothing discarded.");
        return Ok(());
    }
    let status_path = status_file(&mp)?;
    let dir = nimbus_mount::requests::dir_for(&status_path);
    let req = ResolveRequest { path: problem.path.clone(), action };
    let id = nimbus_mount::requests::send(&dir, &req)
        .with_context(|| format!("cannot reach the mount of {} through {}", mp.display(), dir.display()))?;
    let started = Instant::now();
    let mut told = false;
    let reply = loop {
        if let Some(r) = nimbus_mount::requests::take_reply(&dir, &id) {
            break r;
        }
        if process::mount_process(&status_path, status).is_none() {
            bail!("the mount of {} stopped before answering; the change stays in its journal", mp.display());
        }
        if !told && started.elapsed() > Duration::from_secs(3) {
            eprintln!("Waiting for the drive (a retry uploads the whole change)...");
            told = true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    if ctx.json {
        print_json(&serde_json::json!({ "ok": reply.ok, "message": reply.message, "path": problem.path }))?;
    } else if reply.ok {
        outln!("{}", reply.message);
    }
    if !reply.ok {
        bail!(
            "{}: {}\nThe change is still kept on this device; `nimbus status` shows it.",
            local_path(&mp, &problem.path).display(),
            reply.message
        );
    }
    Ok(())
}

/// The mount `file` is on, and its path in the space. A path on the drive names its mount; a
/// path like `/docs/a.txt` that is on no drive is taken as a path in the space of the only
/// mount (or of the one whose refused changes name it).
fn which_mount<'a>(mounts: &'a [Value], file: &Path) -> Result<(&'a Value, String)> {
    let abs = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    for m in mounts {
        let mp = mountpoint_of(m);
        if let Ok(rest) = abs.strip_prefix(&mp) {
            let parts: Vec<String> = rest.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            return Ok((m, format!("/{}", parts.join("/"))));
        }
    }
    let raw = file.to_string_lossy().replace('\\', "/");
    if !raw.starts_with('/') {
        bail!(
            "{} is not on a mounted drive; give its path on the drive or in your space (`/docs/a.txt`)",
            file.display()
        );
    }
    let named: Vec<&Value> =
        mounts.iter().filter(|m| problems_of(m).iter().any(|p| p.path.to_lowercase() == raw.to_lowercase())).collect();
    match (named.as_slice(), mounts) {
        ([m], _) => Ok((m, raw)),
        ([], [m]) => Ok((m, raw)),
        _ => bail!(
            "several drives are mounted; give the file's path on the drive (e.g. {})",
            local_path(&mountpoint_of(&mounts[0]), &raw).display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn space_paths_map_to_the_drive() {
        assert_eq!(local_path(Path::new("/home/u/Nimbus"), "/docs/a b.txt"), Path::new("/home/u/Nimbus/docs/a b.txt"));
        assert_eq!(local_path(Path::new("/m"), "/"), Path::new("/m"));
        assert_eq!(shell_quoted(Path::new("/m/a.txt")), "/m/a.txt");
        assert_eq!(shell_quoted(Path::new("/m/it's here.txt")), "'/m/it'\\''s here.txt'");
    }

    #[test]
    fn only_write_back_records_count_as_pending() -> Result<()> {
        let dir = tempfile::tempdir()?;
        assert_eq!(journal_records(&dir.path().join("missing")), 0);
        for f in ["a1.json", "a1.data", "b2.json", "b2.data", "moves.log", "c3.tmp", "d4.broken"] {
            std::fs::write(dir.path().join(f), b"{}")?;
        }
        assert_eq!(journal_records(dir.path()), 2);
        Ok(())
    }

    #[test]
    fn only_what_the_mount_logged_since_the_signal_is_read() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("mount.log");
        std::fs::write(&log, "WARN unmount failed (an earlier run)\n")?;
        let from = std::fs::metadata(&log)?.len();
        assert!(!log_since(&log, from).contains(UNMOUNT_FAILED));
        std::fs::OpenOptions::new().append(true).open(&log)?.write_all(b"WARN unmount failed error=busy\n")?;
        assert!(log_since(&log, from).contains(UNMOUNT_FAILED));
        assert_eq!(log_since(&dir.path().join("none.log"), 0), "");
        Ok(())
    }

    #[test]
    fn a_file_names_its_mount() -> Result<()> {
        let m = |mp: &str, problems: &[&str]| {
            let problems: Vec<Value> = problems
                .iter()
                .map(|p| {
                    serde_json::json!({
                        "path": p, "reason": "quota", "message": "m", "detail": "d", "since": "s", "attempts": 1,
                        "actions": ["retry", "save_copy", "discard"]
                    })
                })
                .collect();
            serde_json::json!({ "mountpoint": mp, "problems": problems })
        };
        let one = [m("/home/u/Nimbus", &["/docs/a.txt"])];
        let (_, p) = which_mount(&one, Path::new("/home/u/Nimbus/docs/a.txt"))?;
        assert_eq!(p, "/docs/a.txt");
        let (_, p) = which_mount(&one, Path::new("/docs/a.txt"))?;
        assert_eq!(p, "/docs/a.txt");
        assert!(
            which_mount(&one, Path::new("docs/a.txt")).is_err_and(|e| e.to_string().contains("not on a mounted drive"))
        );
        let two = [m("/m1", &[]), m("/m2", &["/x.txt"])];
        let (st, _) = which_mount(&two, Path::new("/x.txt"))?;
        assert_eq!(mountpoint_of(st), Path::new("/m2"));
        assert!(which_mount(&two, Path::new("/y.txt")).is_err_and(|e| e.to_string().contains("several drives")));
        let (st, p) = which_mount(&two, Path::new("/m1/y.txt"))?;
        assert_eq!((mountpoint_of(st), p.as_str()), (PathBuf::from("/m1"), "/y.txt"));
        Ok(())
    }
}
