//! NTSTATUS: the values the adapter answers with, and the one place core errors become them.

use crate::core::VfsError;

/// The NTSTATUS values the drive answers with (from ntstatus.h), as the `i32` WinFsp takes.
pub mod ntstatus {
    pub const STATUS_SUCCESS: i32 = 0;
    pub const STATUS_OBJECT_NAME_NOT_FOUND: i32 = 0xC000_0034_u32 as i32;
    pub const STATUS_OBJECT_NAME_COLLISION: i32 = 0xC000_0035_u32 as i32;
    pub const STATUS_NOT_A_DIRECTORY: i32 = 0xC000_0103_u32 as i32;
    pub const STATUS_FILE_IS_A_DIRECTORY: i32 = 0xC000_00BA_u32 as i32;
    pub const STATUS_DIRECTORY_NOT_EMPTY: i32 = 0xC000_0101_u32 as i32;
    pub const STATUS_OBJECT_NAME_INVALID: i32 = 0xC000_0033_u32 as i32;
    pub const STATUS_ACCESS_DENIED: i32 = 0xC000_0022_u32 as i32;
    pub const STATUS_CANNOT_DELETE: i32 = 0xC000_0121_u32 as i32;
    pub const STATUS_DISK_FULL: i32 = 0xC000_007F_u32 as i32;
    pub const STATUS_SHARING_VIOLATION: i32 = 0xC000_0043_u32 as i32;
    pub const STATUS_NETWORK_UNREACHABLE: i32 = 0xC000_023C_u32 as i32;
    pub const STATUS_INVALID_HANDLE: i32 = 0xC000_0008_u32 as i32;
    pub const STATUS_INVALID_PARAMETER: i32 = 0xC000_000D_u32 as i32;
    pub const STATUS_UNEXPECTED_IO_ERROR: i32 = 0xC000_00E9_u32 as i32;
    /// Not a core error: what `read` answers at or past the end of a file (as NTFS does).
    pub const STATUS_END_OF_FILE: i32 = 0xC000_0011_u32 as i32;
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
        // Windows has no "too long" for a component: NTFS answers this too.
        VfsError::InvalidName(_) | VfsError::NameTooLong => STATUS_OBJECT_NAME_INVALID,
        VfsError::ReadOnly => STATUS_CANNOT_DELETE,
        VfsError::Denied => STATUS_ACCESS_DENIED,
        VfsError::Quota => STATUS_DISK_FULL,
        // "The process cannot access the file because it is being used by another process."
        VfsError::Locked => STATUS_SHARING_VIOLATION,
        VfsError::Offline => STATUS_NETWORK_UNREACHABLE,
        VfsError::BadHandle => STATUS_INVALID_HANDLE,
        VfsError::Invalid(_) => STATUS_INVALID_PARAMETER,
        VfsError::Conflict | VfsError::Io(_) => STATUS_UNEXPECTED_IO_ERROR,
    }
}

/// Logs a failed call: lookups of names that do not exist (or already do) are routine for
/// Windows (every open probes), so they stay quiet; refused names are worth an info line.
pub fn log_failure(op: &str, e: &VfsError) {
    match e {
        VfsError::NotFound | VfsError::Exists => {}
        VfsError::InvalidName(msg) => tracing::info!(op, "refused: {msg}"),
        VfsError::NameTooLong => tracing::info!(op, "refused: {e}"),
        other => tracing::warn!(op, error = %other, "file system call failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::ntstatus::*;
    use super::*;

    #[test]
    fn every_core_error_has_its_ntstatus() {
        // Exhaustive over VfsError: a new variant fails to compile in `ntstatus()` first.
        let table: [(VfsError, i32); 16] = [
            (VfsError::NotFound, STATUS_OBJECT_NAME_NOT_FOUND),
            (VfsError::Exists, STATUS_OBJECT_NAME_COLLISION),
            (VfsError::NotDir, STATUS_NOT_A_DIRECTORY),
            (VfsError::IsDir, STATUS_FILE_IS_A_DIRECTORY),
            (VfsError::NotEmpty, STATUS_DIRECTORY_NOT_EMPTY),
            (VfsError::InvalidName("CON".into()), STATUS_OBJECT_NAME_INVALID),
            (VfsError::NameTooLong, STATUS_OBJECT_NAME_INVALID),
            (VfsError::ReadOnly, STATUS_CANNOT_DELETE),
            (VfsError::Denied, STATUS_ACCESS_DENIED),
            (VfsError::Quota, STATUS_DISK_FULL),
            (VfsError::Locked, STATUS_SHARING_VIOLATION),
            (VfsError::Offline, STATUS_NETWORK_UNREACHABLE),
            (VfsError::BadHandle, STATUS_INVALID_HANDLE),
            (VfsError::Invalid("x".into()), STATUS_INVALID_PARAMETER),
            (VfsError::Conflict, STATUS_UNEXPECTED_IO_ERROR),
            (VfsError::Io("disk".into()), STATUS_UNEXPECTED_IO_ERROR),
        ];
        for (e, want) in &table {
            assert_eq!(ntstatus(e), *want, "{e:?}");
        }
    }

    #[test]
    fn error_statuses_are_distinct_errors() {
        // Severity "error" (the top two bits set) makes them negative; a status that is not
        // would read as success or a warning to Windows. Distinct, so no two core errors
        // collapse by a typo.
        let all = [
            STATUS_OBJECT_NAME_NOT_FOUND,
            STATUS_OBJECT_NAME_COLLISION,
            STATUS_NOT_A_DIRECTORY,
            STATUS_FILE_IS_A_DIRECTORY,
            STATUS_DIRECTORY_NOT_EMPTY,
            STATUS_OBJECT_NAME_INVALID,
            STATUS_ACCESS_DENIED,
            STATUS_CANNOT_DELETE,
            STATUS_DISK_FULL,
            STATUS_NETWORK_UNREACHABLE,
            STATUS_INVALID_HANDLE,
            STATUS_INVALID_PARAMETER,
            STATUS_UNEXPECTED_IO_ERROR,
            STATUS_END_OF_FILE,
        ];
        for (i, s) in all.iter().enumerate() {
            assert_eq!(*s as u32 >> 30, 0b11, "{s:#x} is not an error status");
            assert!(!all[i + 1..].contains(s), "{s:#x} appears twice");
        }
        // Two spelled out as Windows' documentation lists them in decimal.
        assert_eq!(STATUS_OBJECT_NAME_NOT_FOUND, -1_073_741_772);
        assert_eq!(STATUS_ACCESS_DENIED, -1_073_741_790);
    }
}
