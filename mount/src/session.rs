//! Running a mount: open the local cache, start the VFS, the uploader, the change feed and
//! the status file, serve until unmounted or signalled, and on a clean stop upload every
//! pending write before letting go of the mount point.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nimbus_client::Client;
use nimbus_proto::drive::ProblemAction;
use serde::Serialize;

pub use crate::config::{DEFAULT_UPLOAD_DELAY, MountConfig, MountError};
use crate::core::blocks::{BlockCache, CacheCounters};
use crate::core::remote::Remote;
use crate::core::status::ActivitySnapshot;
use crate::core::{Connectivity, Vfs, VfsConfig};

/// How often the uploader retries pending writes and an offline mount probes the gateway.
const RETRY_EVERY: Duration = Duration::from_secs(2);

/// The status file's content (schema documented in docs/MOUNT.md).
#[derive(Debug, Serialize)]
pub struct MountStatus {
    pub mountpoint: String,
    pub pid: u32,
    pub state: Connectivity,
    pub pending_uploads: usize,
    #[serde(flatten)]
    pub activity: ActivitySnapshot,
    pub cache: CacheStatus,
    pub updated: String,
}

#[derive(Debug, Serialize)]
pub struct CacheStatus {
    pub dir: String,
    pub used_bytes: u64,
    pub capacity_bytes: u64,
    #[serde(flatten)]
    pub counters: CacheCounters,
}

pub async fn status(vfs: &Vfs, cfg: &MountConfig) -> MountStatus {
    let (used, cap) = vfs.cache().disk_usage();
    MountStatus {
        mountpoint: cfg.mountpoint.display().to_string(),
        pid: std::process::id(),
        state: vfs.connectivity(),
        pending_uploads: vfs.pending_count().await,
        activity: vfs.activity_snapshot(),
        cache: CacheStatus {
            dir: cfg.cache_dir.display().to_string(),
            used_bytes: used,
            capacity_bytes: cap,
            counters: vfs.cache().counters(),
        },
        updated: time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
    }
}

fn write_status(path: &Path, st: &MountStatus) {
    let Ok(json) = serde_json::to_vec_pretty(st) else { return };
    let tmp = path.with_extension("tmp");
    if std::fs::write(&tmp, json).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

/// Background work of a mount: retries pending uploads (and probes the gateway while
/// offline), follows the change feed, refreshes the status file, answers `nimbus resolve`.
pub(crate) fn start_background(rt: &tokio::runtime::Runtime, vfs: Arc<Vfs>, cfg: MountConfig) {
    let v = vfs.clone();
    rt.spawn(async move {
        loop {
            tokio::time::sleep(RETRY_EVERY).await;
            if v.connectivity() == Connectivity::Offline && !v.probe().await {
                continue;
            }
            if let Err(e) = v.upload_due().await {
                tracing::debug!(error = %e, "pending uploads wait for the next round");
            }
        }
    });
    rt.spawn(vfs.clone().run_uploads());
    let v = vfs.clone();
    rt.spawn(crate::core::feed::follow(v));
    rt.spawn(crate::requests::serve(vfs.clone(), crate::requests::dir_for(&cfg.status_file)));
    rt.spawn(async move {
        loop {
            let st = status(&vfs, &cfg).await;
            write_status(&cfg.status_file, &st);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
}

/// The parts of a mount every platform shares: a runtime, the gateway's block size, the
/// locked cache dir and the VFS core (write-back: `close` hands uploads to the uploader).
pub(crate) fn start(client: Client, cfg: &MountConfig) -> Result<(tokio::runtime::Runtime, Arc<Vfs>), MountError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .thread_name("nimbus-mount")
        .build()
        .map_err(|e| MountError::Runtime(e.to_string()))?;
    let info = rt.block_on(client.info()).map_err(|e| MountError::Gateway(e.to_string()))?;
    std::fs::create_dir_all(&cfg.cache_dir)
        .map_err(|e| MountError::Cache(format!("cannot create the cache dir {}: {e}", cfg.cache_dir.display())))?;
    let remote: Arc<dyn Remote> = Arc::new(client);
    let cache = BlockCache::open(
        remote.clone(),
        Some(&cfg.cache_dir.join("blocks")),
        cfg.cache_size,
        cfg.cache_mem,
        info.block_size,
    )
    .map_err(MountError::Cache)?;
    let b = cache.budget();
    tracing::info!(
        fetches = b.fetches,
        read_ahead = b.ahead,
        pending_writes = b.writes,
        memory_tier_bytes = b.tier_bytes,
        "--cache-mem {} shared out (blocks of {} bytes)",
        cfg.cache_mem,
        info.block_size
    );
    let vfs = {
        let _guard = rt.enter();
        Vfs::new(
            remote,
            Arc::new(cache),
            VfsConfig {
                staging_dir: cfg.cache_dir.join("staging"),
                block_size: info.block_size,
                host: cfg.host.clone(),
                async_close: true,
                upload_delay: cfg.upload_delay,
            },
        )
    };
    Ok((rt, vfs))
}

#[cfg(unix)]
fn fuse_config() -> fuser::Config {
    let mut options = fuser::Config::default();
    options.mount_options = vec![
        fuser::MountOption::FSName("nimbus".into()),
        fuser::MountOption::Subtype("nimbus".into()),
        fuser::MountOption::NoAtime,
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
    ];
    options.n_threads = Some(2);
    options
}

/// The platform's half of a served mount: FUSE's session thread, or WinFsp's host thread.
#[cfg(unix)]
struct Serving {
    unmounter: fuser::SessionUnmounter,
    thread: std::thread::JoinHandle<std::io::Result<()>>,
}

#[cfg(unix)]
impl Serving {
    fn start(rt: &tokio::runtime::Runtime, vfs: Arc<Vfs>, cfg: &MountConfig) -> Result<Serving, MountError> {
        let fs = crate::fuse::FuseFs::new(vfs, rt.handle().clone());
        let mut session = fuser::Session::new(fs, &cfg.mountpoint, &fuse_config())
            .map_err(|err| MountError::Mount { path: cfg.mountpoint.display().to_string(), err })?;
        let unmounter = session.unmount_callable();
        let thread = std::thread::Builder::new()
            .name("fuse-session".into())
            .spawn(move || session.run())
            .map_err(|e| MountError::Runtime(e.to_string()))?;
        Ok(Serving { unmounter, thread })
    }

    fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    fn unmount_and_join(mut self) {
        if !self.thread.is_finished()
            && let Err(e) = self.unmounter.unmount()
        {
            tracing::warn!(error = %e, "unmount failed");
        }
        let _ = self.thread.join();
    }
}

#[cfg(windows)]
use crate::winfsp::HostThread as Serving;

/// A mount served by this process, stopped with [`Mounted::stop`]: what an app that lives
/// longer than its mounts (the desktop app) holds, where `nimbus mount` uses [`run`].
/// FUSE on Unix, WinFsp on Windows; the rest is the same.
pub struct Mounted {
    /// `Option` so that `Drop` can shut it down without blocking (dropping a runtime inside
    /// another runtime's worker panics).
    rt: Option<tokio::runtime::Runtime>,
    vfs: Arc<Vfs>,
    cfg: MountConfig,
    serving: Option<Serving>,
}

impl Mounted {
    /// Mounts at `cfg.mountpoint` and starts serving; returns once the system has the mount.
    pub fn start(client: Client, cfg: MountConfig) -> Result<Mounted, MountError> {
        let (rt, vfs) = start(client, &cfg)?;
        let serving = Serving::start(&rt, vfs.clone(), &cfg)?;
        start_background(&rt, vfs.clone(), cfg.clone());
        tracing::info!(mountpoint = %cfg.mountpoint.display(), "mounted");
        Ok(Mounted { rt: Some(rt), vfs, cfg, serving: Some(serving) })
    }

    pub fn config(&self) -> &MountConfig {
        &self.cfg
    }

    /// False once the session ended (on Unix also when unmounted from outside, e.g.
    /// `fusermount -u`).
    pub fn is_serving(&self) -> bool {
        self.serving.as_ref().is_some_and(|s| !s.is_finished())
    }

    /// A snapshot of what the mount is doing (the status file's content).
    pub async fn status(&self) -> Result<MountStatus, MountError> {
        let rt = self.rt.as_ref().ok_or_else(|| MountError::Runtime("the mount is stopped".into()))?;
        let (vfs, cfg) = (self.vfs.clone(), self.cfg.clone());
        // The VFS's timers and locks belong to the mount's runtime: compute the snapshot there.
        rt.spawn(async move { status(&vfs, &cfg).await }).await.map_err(|e| MountError::Runtime(e.to_string()))
    }

    /// Uploads pending writes now (the "retry" of an upload error) instead of at the next round.
    pub async fn retry_uploads(&self) -> Result<usize, MountError> {
        let rt = self.rt.as_ref().ok_or_else(|| MountError::Runtime("the mount is stopped".into()))?;
        let vfs = self.vfs.clone();
        rt.spawn(async move { vfs.upload_pending().await })
            .await
            .map_err(|e| MountError::Runtime(e.to_string()))?
            .map_err(|e| MountError::Gateway(e.to_string()))
    }

    /// Resolves the refused change at `path` (a path in the space): retry, save a copy or
    /// discard. Returns what was done.
    pub async fn resolve(&self, path: String, action: ProblemAction) -> Result<String, MountError> {
        let rt = self.rt.as_ref().ok_or_else(|| MountError::Runtime("the mount is stopped".into()))?;
        let vfs = self.vfs.clone();
        rt.spawn(async move { vfs.resolve(&path, action).await })
            .await
            .map_err(|e| MountError::Runtime(e.to_string()))?
            .map_err(|e| MountError::Refused(e.to_string()))
    }

    /// Drops every cached block; pending writes live in the staging dir and are kept.
    pub fn free_cache(&self) -> Result<(), MountError> {
        self.vfs.cache().purge().map_err(|e| MountError::Cache(e.to_string()))
    }

    /// Uploads every pending write (bounded by `upload_timeout`), then unmounts and waits for
    /// the session to end. Blocking: call it from a plain thread or `spawn_blocking`.
    /// Returns an error if writes were left in the journal (they go up at the next mount).
    pub fn stop(mut self, upload_timeout: Duration) -> Result<(), MountError> {
        let mut left = None;
        if let Some(rt) = &self.rt {
            let vfs = self.vfs.clone();
            match rt.block_on(async { tokio::time::timeout(upload_timeout, vfs.flush_all()).await }) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => left = Some(format!("some writes could not be uploaded ({e})")),
                Err(_) => left = Some("uploads took too long".to_string()),
            }
        }
        if let Some(serving) = self.serving.take() {
            serving.unmount_and_join();
        }
        let _ = std::fs::remove_file(&self.cfg.status_file);
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
        tracing::info!(mountpoint = %self.cfg.mountpoint.display(), "unmounted");
        match left {
            Some(why) => Err(MountError::Runtime(format!("{why}; they stay in the journal for the next mount"))),
            None => Ok(()),
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        // Not stopped: let go of the mount point at least; pending writes stay journaled.
        if let Some(serving) = self.serving.take() {
            serving.unmount_and_join();
            let _ = std::fs::remove_file(&self.cfg.status_file);
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Mounts and serves in this process until unmounted (`nimbus unmount`, `fusermount -u`) or
/// sent SIGINT/SIGTERM; a signal first uploads every pending write, then unmounts.
#[cfg(unix)]
pub fn run(client: Client, cfg: MountConfig) -> Result<(), MountError> {
    let (rt, vfs) = start(client, &cfg)?;
    let fs = crate::fuse::FuseFs::new(vfs.clone(), rt.handle().clone());
    let options = fuse_config();
    let mut session = fuser::Session::new(fs, &cfg.mountpoint, &options)
        .map_err(|err| MountError::Mount { path: cfg.mountpoint.display().to_string(), err })?;
    let mut unmounter = session.unmount_callable();
    start_background(&rt, vfs.clone(), cfg.clone());
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel();
    let serve = std::thread::Builder::new()
        .name("fuse-session".into())
        .spawn(move || {
            let r = session.run();
            let _ = done_tx.send(());
            r
        })
        .map_err(|e| MountError::Runtime(e.to_string()))?;
    tracing::info!(mountpoint = %cfg.mountpoint.display(), "mounted");
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let signalled = tokio::select! {
            _ = tokio::signal::ctrl_c() => true,
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => true,
            _ = &mut done_rx => false,
        };
        if signalled {
            tracing::info!("unmounting: uploading pending writes first");
            match tokio::time::timeout(Duration::from_secs(600), vfs.flush_all()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "some writes could not be uploaded; they stay in the journal for the next mount"),
                Err(_) => tracing::warn!("uploads took too long; the rest stay in the journal for the next mount"),
            }
            if let Err(e) = unmounter.unmount() {
                tracing::warn!(error = %e, "unmount failed");
            }
        }
    });
    let _ = serve.join();
    let _ = std::fs::remove_file(&cfg.status_file);
    tracing::info!(mountpoint = %cfg.mountpoint.display(), "unmounted");
    Ok(())
}

/// Mounts and serves in this process until Ctrl-C (or Ctrl-Break): then uploads every
/// pending write and unmounts. The Windows counterpart of the Unix `run`.
#[cfg(windows)]
pub fn run(client: Client, cfg: MountConfig) -> Result<(), MountError> {
    let (rt, vfs) = start(client, &cfg)?;
    let host = Serving::start(&rt, vfs.clone(), &cfg)?;
    start_background(&rt, vfs.clone(), cfg.clone());
    let target = crate::nt::request::mount_target(&cfg.mountpoint);
    tracing::info!(mountpoint = %target, "mounted");

    rt.block_on(async {
        let mut ctrl_break = tokio::signal::windows::ctrl_break().ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async {
                match ctrl_break.as_mut() {
                    Some(b) => { b.recv().await; }
                    None => std::future::pending().await,
                }
            } => {}
        }
        tracing::info!("unmounting: uploading pending writes first");
        match tokio::time::timeout(Duration::from_secs(600), vfs.flush_all()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "some writes could not be uploaded; they stay in the journal for the next mount")
            }
            Err(_) => tracing::warn!("uploads took too long; the rest stay in the journal for the next mount"),
        }
    });
    host.unmount_and_join();
    let _ = std::fs::remove_file(&cfg.status_file);
    tracing::info!(mountpoint = %target, "unmounted");
    Ok(())
}
