//! The Nimbus drive: a user's space mounted as a local file system.
//!
//! - [`core`]: the VFS (inodes, caches, read-ahead, write-back journal, Windows semantics),
//!   platform-independent;
//! - `fuse`: the FUSE adapter (Linux, macOS) on `fuser`;
//! - [`nt`]: what the WinFsp adapter decides (NTSTATUS, attributes, FILETIME, create
//!   options, write offsets, listings), platform-independent and tested everywhere;
//! - `winfsp`: the WinFsp adapter (Windows only), FFI on top of [`nt`];
//! - [`config`]: what a mount is told and how it fails (shared by `session` and the adapters);
//! - [`session`]: starting a mount: cache directory, change feed, uploader, status file;
//! - [`requests`]: `nimbus resolve`'s requests to a running mount, as files.

pub mod config;
pub mod core;
#[cfg(unix)]
pub mod fuse;
// Public, not `cfg(windows)`: compiled and tested on every platform, used by `winfsp`.
pub mod nt;
pub mod requests;
pub mod session;
#[cfg(windows)]
pub mod winfsp;
