//! The Windows side of the drive in NT's terms, without WinFsp: everything the WinFsp adapter
//! (`winfsp`, Windows only) decides or computes, here so it compiles and is tested on every
//! platform. The adapter only converts WinFsp's arguments, calls these, and hands the
//! answers back.
//!
//! - [`status`]: NTSTATUS values and the one mapping from core errors to them;
//! - [`info`]: attribute bits, FILETIME, file information, `SetBasicInfo`/`Overwrite`/
//!   `SetFileSize` rules;
//! - [`request`]: paths, create options and granted access, write offsets, directory-entry
//!   names, mount targets;
//! - [`ops`]: each callback's work on the core ([`crate::core::Vfs`]).

pub mod info;
pub mod ops;
pub mod request;
pub mod status;

pub use status::{log_failure, ntstatus};
