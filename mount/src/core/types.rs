//! The core's own vocabulary: inode numbers, attributes, errors. Adapters translate these to
//! FUSE (`fuser`) or WinFsp types; nothing here knows about either.

use nimbus_proto::wire::ErrorCode;
use std::time::SystemTime;

/// Inode number. [`ROOT`] is the space's root; others are handed out by the core and stay
/// stable for the life of the mount (a renamed file keeps its number).
pub type Ino = u64;
pub const ROOT: Ino = 1;

/// Open-handle number.
pub type Fh = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
}

/// What `getattr` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub ino: Ino,
    pub kind: Kind,
    pub size: u64,
    pub mtime: SystemTime,
    /// Status change time (POSIX ctime): the last change of the contents, the name, the
    /// attributes or, for a directory, its entries. Never earlier than `mtime`.
    pub ctime: SystemTime,
    /// Windows' read-only attribute; on POSIX shown as a mode without write bits.
    pub readonly: bool,
    /// No name leads to it any more (unlinked or replaced while still open): POSIX shows a
    /// link count of 0, so a program can tell its open file was deleted.
    pub unlinked: bool,
}

/// Changes requested by `setattr`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetAttr {
    pub size: Option<u64>,
    pub mtime: Option<SystemTime>,
    pub readonly: Option<bool>,
}

/// How a file is opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenMode {
    pub write: bool,
    pub truncate: bool,
    /// Windows FILE_FLAG_DELETE_ON_CLOSE: the file goes away when its last handle closes.
    pub delete_on_close: bool,
}

/// Whether the mount can currently reach the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Connectivity {
    Online,
    Offline,
}

/// Errors of the VFS core. Adapters map them mechanically (errno, NTSTATUS).
#[derive(Debug, thiserror::Error)]
pub enum VfsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("already exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    /// A name Windows (and therefore the gateway) refuses: the message says why.
    #[error("invalid name: {0}")]
    InvalidName(String),
    /// A name component longer than 255 bytes (or a path too long for the gateway):
    /// ENAMETOOLONG, whichever call got it.
    #[error("file name too long")]
    NameTooLong,
    #[error("read-only file")]
    ReadOnly,
    #[error("quota exceeded")]
    Quota,
    /// Someone else holds a lock on the file (a WebDAV lock: Office on another computer).
    #[error("locked by someone else")]
    Locked,
    #[error("permission denied")]
    Denied,
    /// The gateway cannot be reached and the answer is not in the local cache.
    #[error("offline: the gateway cannot be reached")]
    Offline,
    /// The file changed on the server since the version this edit started from.
    #[error("changed on the server meanwhile")]
    Conflict,
    #[error("bad file handle")]
    BadHandle,
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("I/O error: {0}")]
    Io(String),
}

impl From<std::io::Error> for VfsError {
    fn from(e: std::io::Error) -> Self {
        VfsError::Io(e.to_string())
    }
}

impl From<super::remote::RemoteError> for VfsError {
    fn from(e: super::remote::RemoteError) -> Self {
        if e.is_unreachable() {
            return VfsError::Offline;
        }
        // A code this build does not know (a newer gateway) falls through to the status.
        match e.code().and_then(ErrorCode::parse) {
            Some(ErrorCode::NotFound) => VfsError::NotFound,
            Some(ErrorCode::AlreadyExists) => VfsError::Exists,
            Some(ErrorCode::NotADirectory) => VfsError::NotDir,
            Some(ErrorCode::IsADirectory) => VfsError::IsDir,
            Some(ErrorCode::InvalidName | ErrorCode::InvalidPath) => {
                VfsError::InvalidName(e.server_message().unwrap_or_default().to_string())
            }
            Some(ErrorCode::QuotaExceeded) => VfsError::Quota,
            Some(ErrorCode::Locked) => VfsError::Locked,
            Some(ErrorCode::Conflict) => VfsError::Conflict,
            Some(ErrorCode::Forbidden | ErrorCode::Unauthorized) => VfsError::Denied,
            _ => match e.status() {
                Some(s) if s >= 500 => VfsError::Offline,
                _ => VfsError::Io(e.to_string()),
            },
        }
    }
}

impl From<nimbus_client::Error> for VfsError {
    fn from(e: nimbus_client::Error) -> Self {
        VfsError::from(super::remote::RemoteError::from(e))
    }
}

impl From<nimbus_proto::NameError> for VfsError {
    fn from(e: nimbus_proto::NameError) -> Self {
        match e {
            nimbus_proto::NameError::TooLong | nimbus_proto::NameError::PathTooLong => VfsError::NameTooLong,
            e => VfsError::InvalidName(e.to_string()),
        }
    }
}

/// Refuses a name longer than a name may be (255 bytes, or UTF-16 units for Windows) with
/// [`VfsError::NameTooLong`]; other names pass (whether they are valid is checked where they
/// are made). Cheap: only a name over 255 bytes is looked at further.
pub fn check_name_length(name: &str) -> VfsResult<()> {
    if name.len() > nimbus_proto::names::MAX_NAME_LEN
        && let Err(e @ nimbus_proto::NameError::TooLong) = nimbus_proto::names::validate_name(name)
    {
        return Err(e.into());
    }
    Ok(())
}

pub type VfsResult<T> = Result<T, VfsError>;
