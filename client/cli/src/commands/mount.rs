//! `nimbus mount`, `nimbus unmount`, `nimbus status`.
//!
//! A background mount is this same binary re-run with `--foreground`, detached, logging to
//! `<cache dir>/mount.log`. Each running mount keeps a status file in
//! `<config dir>/mounts/<key>.json` (key: hash of the mount point): that is how `unmount`
//! finds the process to stop and `status` what to show.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;

use super::Ctx;
use crate::cli::MountArgs;
use crate::output::{Align, human_bytes, parse_size, print_json, print_table};
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

fn pid_alive(pid: u64) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn read_status(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn live_pid(status: &Value) -> Option<u64> {
    status.get("pid").and_then(Value::as_u64).filter(|p| pid_alive(*p))
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
    if let Some(pid) = read_status(&status).as_ref().and_then(live_pid) {
        bail!(
            "{} is already mounted (process {pid}); `nimbus unmount {}` first",
            mountpoint.display(),
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
    let cfg = nimbus_mount::session::MountConfig {
        mountpoint: plan.mountpoint,
        cache_dir: plan.cache_dir,
        cache_size: plan.cache_size,
        cache_mem: plan.cache_mem,
        upload_delay: plan.upload_delay,
        status_file: plan.status,
        host: host_name(),
    };
    #[cfg(unix)]
    {
        nimbus_mount::session::run(client, cfg).map_err(|e| anyhow!("{e}"))
    }
    #[cfg(windows)]
    {
        nimbus_mount::winfsp::run(client, cfg).map_err(|e| anyhow!("{e}"))
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (client, cfg);
        bail!("mounting is not built for this platform")
    }
}

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
    if let Some(pid) = read_status(&status).as_ref().and_then(live_pid) {
        let ok = Command::new("kill").arg("-TERM").arg(pid.to_string()).status().map(|s| s.success()).unwrap_or(false);
        if !ok {
            bail!("cannot signal the mount process {pid}");
        }
        let started = Instant::now();
        let mut told = false;
        while pid_alive(pid) {
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
        return Ok(());
    }
    let _ = std::fs::remove_file(&status);
    // No live mount process of ours: a leftover (crashed) mount the kernel still lists.
    let mounted = std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(&*mp.to_string_lossy()));
    if !mounted {
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

/// `nimbus status`: every mount this user runs.
pub async fn status(ctx: &Ctx) -> Result<()> {
    let mut mounts = Vec::new();
    if let Ok(rd) = std::fs::read_dir(registry_dir()?) {
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_none_or(|x| x != "json") {
                continue;
            }
            match read_status(&p) {
                Some(st) if live_pid(&st).is_some() => mounts.push(st),
                _ => {
                    let _ = std::fs::remove_file(&p);
                }
            }
        }
    }
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
            ("CONFLICTS", Align::Right),
            ("CACHE", Align::Right),
        ],
        &rows,
    )
}
