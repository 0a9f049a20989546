//! The platform-independent VFS core. It never imports `fuser` or `winfsp`: adapters call
//! [`Vfs`] and translate its [`types`] to their own.

pub mod blocks;
pub mod dirty;
pub mod status;
pub mod tree;
pub mod types;
pub mod vfs;

pub use types::*;
pub use vfs::{DirEntry, Vfs, VfsConfig, conflict_name, is_local_only};
