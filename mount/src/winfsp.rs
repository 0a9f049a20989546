//! WinFsp adapter (Windows only; it cannot be built on the Linux CI machine, see
//! docs/MOUNT.md for what is unverified). Like the FUSE adapter it only translates: every
//! decision lives in the core.

use crate::core::VfsError;

/// NTSTATUS values used by the mapping (from ntstatus.h).
pub mod ntstatus {
    pub const STATUS_OBJECT_NAME_NOT_FOUND: i32 = 0xC000_0034_u32 as i32;
    pub const STATUS_OBJECT_NAME_COLLISION: i32 = 0xC000_0035_u32 as i32;
    pub const STATUS_NOT_A_DIRECTORY: i32 = 0xC000_0103_u32 as i32;
    pub const STATUS_FILE_IS_A_DIRECTORY: i32 = 0xC000_00BA_u32 as i32;
    pub const STATUS_DIRECTORY_NOT_EMPTY: i32 = 0xC000_0101_u32 as i32;
    pub const STATUS_OBJECT_NAME_INVALID: i32 = 0xC000_0033_u32 as i32;
    pub const STATUS_ACCESS_DENIED: i32 = 0xC000_0022_u32 as i32;
    pub const STATUS_CANNOT_DELETE: i32 = 0xC000_0121_u32 as i32;
    pub const STATUS_DISK_FULL: i32 = 0xC000_007F_u32 as i32;
    pub const STATUS_NETWORK_UNREACHABLE: i32 = 0xC000_023C_u32 as i32;
    pub const STATUS_INVALID_HANDLE: i32 = 0xC000_0008_u32 as i32;
    pub const STATUS_INVALID_PARAMETER: i32 = 0xC000_000D_u32 as i32;
    pub const STATUS_UNEXPECTED_IO_ERROR: i32 = 0xC000_00E9_u32 as i32;
}

/// The one place core errors become NTSTATUS.
pub fn ntstatus(e: &VfsError) -> i32 {
    use ntstatus::*;
    match e {
        VfsError::NotFound => STATUS_OBJECT_NAME_NOT_FOUND,
        VfsError::Exists => STATUS_OBJECT_NAME_COLLISION,
        VfsError::NotDir => STATUS_NOT_A_DIRECTORY,
        VfsError::IsDir => STATUS_FILE_IS_A_DIRECTORY,
        VfsError::NotEmpty => STATUS_DIRECTORY_NOT_EMPTY,
        VfsError::InvalidName(_) => STATUS_OBJECT_NAME_INVALID,
        VfsError::ReadOnly => STATUS_CANNOT_DELETE,
        VfsError::Denied => STATUS_ACCESS_DENIED,
        VfsError::Quota => STATUS_DISK_FULL,
        VfsError::Offline => STATUS_NETWORK_UNREACHABLE,
        VfsError::BadHandle => STATUS_INVALID_HANDLE,
        VfsError::Invalid(_) => STATUS_INVALID_PARAMETER,
        VfsError::Conflict | VfsError::Io(_) => STATUS_UNEXPECTED_IO_ERROR,
    }
}
