//! The Nimbus drive: a user's space mounted as a local file system.
//!
//! - [`core`]: the VFS (inodes, caches, read-ahead, write-back journal, Windows semantics),
//!   platform-independent;
//! - `fuse`: the FUSE adapter (Linux, macOS) on `fuser`;
//! - `winfsp`: the WinFsp adapter (Windows only);
//! - [`session`]: starting a mount: cache directory, change feed, uploader, status file.

pub mod core;
#[cfg(unix)]
pub mod fuse;
pub mod session;
#[cfg(windows)]
pub mod winfsp;
