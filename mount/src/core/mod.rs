//! The platform-independent VFS core. It never imports `fuser` or `winfsp`: adapters call
//! [`Vfs`] and translate its [`types`] to their own.

mod attrs;
pub mod blocks;
mod dirs;
pub mod dirty;
/// The in-memory gateway of the tests (`fake` feature for other crates' tests).
#[cfg(any(test, feature = "fake"))]
pub mod fake;
pub mod feed;
mod handles;
mod namespace;
mod problems;
mod read;
pub mod remote;
mod resolve;
mod shares;
pub mod status;
pub mod tree;
pub mod types;
pub mod vfs;
mod write;
mod writeback;

pub use remote::{Remote, RemoteError, RemoteResult};
pub use types::*;
pub use vfs::{DirEntry, Vfs, VfsConfig, conflict_name, copy_name, is_local_only};

#[cfg(test)]
pub(crate) mod tests;
