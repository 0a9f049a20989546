//! What a mount is told (`MountConfig`) and how starting or serving one fails (`MountError`).
//! A leaf: `session` (which runs a mount) and the platform adapters (`fuse`, `winfsp`) share
//! it without depending on each other.

use std::path::PathBuf;
use std::time::Duration;

/// The write-back delay the CLI and the desktop app use unless told otherwise.
pub const DEFAULT_UPLOAD_DELAY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct MountConfig {
    pub mountpoint: PathBuf,
    /// Local cache and write-back journal (one mount per directory: it is locked).
    pub cache_dir: PathBuf,
    pub cache_size: u64,
    pub cache_mem: u64,
    /// How long a closed file waits before its upload starts (see [`crate::core::VfsConfig::upload_delay`]).
    pub upload_delay: Duration,
    /// Where the status JSON is kept up to date (`nimbus mount status`, the desktop app).
    pub status_file: PathBuf,
    /// This device's name, used in conflict copy names.
    pub host: String,
}

#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("cannot reach the gateway: {0}")]
    Gateway(String),
    #[error("{0}")]
    Cache(String),
    #[error("cannot mount at {path}: {err}")]
    Mount { path: String, err: std::io::Error },
    #[error("{0}")]
    Runtime(String),
    /// A resolve request could not be carried out (the gateway refused again, no such
    /// problem, the file is open).
    #[error("{0}")]
    Refused(String),
}
