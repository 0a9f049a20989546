//! The seam between the core and the gateway: every call the drive makes to the server goes
//! through [`Remote`]. The real client ([`nimbus_client::Client`]) implements it for a mount;
//! the in-memory gateway of the tests (`core::fake`) implements it too, so the whole core runs
//! in-process with faults injected at will.
//!
//! Errors are [`RemoteError`]: what the core needs to know of a failure (no answer, or the
//! server's status and stable code), whoever produced it.

use bytes::Bytes;
use futures::future::BoxFuture;
use nimbus_proto::RemotePath;
use nimbus_proto::wire::{ChangeList, CommitRequest, DirListing, Entry, Manifest, Me, ServerInfo};

/// A failed gateway call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RemoteError {
    /// No answer: the gateway cannot be reached (connect, reset, timeout, TLS).
    #[error("{0}")]
    Unreachable(String),
    /// The gateway answered with an error: its HTTP status and stable code (docs/API.md).
    #[error("{message} ({code}, HTTP {status})")]
    Api { status: u16, code: String, message: String },
    /// Anything else: a malformed answer, an argument refused before any request.
    #[error("{0}")]
    Other(String),
}

impl RemoteError {
    /// An error answer with one of the gateway's codes (the fake gateway's way to fail).
    pub fn api(status: u16, code: nimbus_proto::wire::ErrorCode, message: impl Into<String>) -> Self {
        RemoteError::Api { status, code: code.as_str().to_string(), message: message.into() }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            RemoteError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The server's stable error code (`not_found`, `conflict`, `locked`...).
    pub fn code(&self) -> Option<&str> {
        match self {
            RemoteError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    pub fn server_message(&self) -> Option<&str> {
        match self {
            RemoteError::Api { message, .. } => Some(message),
            _ => None,
        }
    }

    pub fn is_unreachable(&self) -> bool {
        matches!(self, RemoteError::Unreachable(_))
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }
}

impl From<nimbus_client::Error> for RemoteError {
    fn from(e: nimbus_client::Error) -> Self {
        if e.is_transport() {
            return RemoteError::Unreachable(e.to_string());
        }
        match (e.status(), e.code(), e.server_message()) {
            (Some(status), Some(code), message) => {
                RemoteError::Api { status, code: code.to_string(), message: message.unwrap_or_default().to_string() }
            }
            _ => RemoteError::Other(e.to_string()),
        }
    }
}

pub type RemoteResult<T> = Result<T, RemoteError>;

/// Every gateway call of the drive (the REST API of docs/API.md, as far as the drive uses it).
pub trait Remote: Send + Sync + 'static {
    /// `GET /info`: answers while the gateway is reachable (the offline probe).
    fn info(&self) -> BoxFuture<'_, RemoteResult<ServerInfo>>;
    /// `GET /me`: quota and usage, for statfs.
    fn me(&self) -> BoxFuture<'_, RemoteResult<Me>>;
    fn stat<'a>(&'a self, path: &'a RemotePath) -> BoxFuture<'a, RemoteResult<Entry>>;
    fn list_dir_page<'a>(
        &'a self,
        path: &'a RemotePath,
        cursor: Option<&'a str>,
        limit: Option<u32>,
    ) -> BoxFuture<'a, RemoteResult<DirListing>>;
    /// Creates the directory and its parents; fine if it exists.
    fn mkdir<'a>(&'a self, path: &'a RemotePath) -> BoxFuture<'a, RemoteResult<Entry>>;
    /// A file or a directory with its contents, to the trash.
    fn delete<'a>(&'a self, path: &'a RemotePath) -> BoxFuture<'a, RemoteResult<()>>;
    fn move_entry<'a>(
        &'a self,
        from: &'a RemotePath,
        to: &'a RemotePath,
        overwrite: bool,
    ) -> BoxFuture<'a, RemoteResult<Entry>>;
    /// The current version's block list.
    fn get_manifest<'a>(&'a self, path: &'a RemotePath) -> BoxFuture<'a, RemoteResult<Manifest>>;
    /// Makes the block list the file's new version; a stale base fails with 409 `conflict`.
    fn commit_manifest<'a>(
        &'a self,
        path: &'a RemotePath,
        commit: &'a CommitRequest,
    ) -> BoxFuture<'a, RemoteResult<Entry>>;
    /// `true` if the block was new. `scope`: the file inside a share the block is for (the
    /// block then goes to the share owner's space); None in the user's own space.
    fn put_block<'a>(
        &'a self,
        hash: &'a str,
        data: Bytes,
        scope: Option<&'a RemotePath>,
    ) -> BoxFuture<'a, RemoteResult<bool>>;
    /// The block's bytes, unverified (the caller checks them against the hash). `scope`: the
    /// file inside a share it is a block of (read from the owner's space), None in the user's
    /// own space.
    fn get_block<'a>(&'a self, hash: &'a str, scope: Option<&'a RemotePath>) -> BoxFuture<'a, RemoteResult<Bytes>>;
    /// The shares given to the user (`/Shared with me`), with their permissions. A gateway
    /// without shares (the test fake) has none.
    fn incoming_shares(&self) -> BoxFuture<'_, RemoteResult<Vec<nimbus_proto::wire::IncomingShareInfo>>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    /// The change feed after `cursor`, long-polling up to `wait_secs`.
    fn changes<'a>(
        &'a self,
        cursor: Option<&'a str>,
        wait_secs: u32,
        limit: Option<u32>,
    ) -> BoxFuture<'a, RemoteResult<ChangeList>>;
}

/// Whether `path` lies in `/Shared with me`, what others shared with the user: its blocks
/// are the owners', so block requests for it name the file ([`block_scope`]).
pub fn in_shared_index(path: &RemotePath) -> bool {
    path.components().first().is_some_and(|c| {
        nimbus_proto::names::name_key(c) == nimbus_proto::names::name_key(nimbus_proto::names::SHARED_WITH_ME)
    })
}

/// The scope block requests for the file at `path` carry: the path inside a share, None in
/// the user's own space.
pub fn block_scope(path: &RemotePath) -> Option<&RemotePath> {
    in_shared_index(path).then_some(path)
}

impl Remote for nimbus_client::Client {
    fn info(&self) -> BoxFuture<'_, RemoteResult<ServerInfo>> {
        Box::pin(async move { Ok(nimbus_client::Client::info(self).await?) })
    }

    fn incoming_shares(&self) -> BoxFuture<'_, RemoteResult<Vec<nimbus_proto::wire::IncomingShareInfo>>> {
        Box::pin(async move { Ok(nimbus_client::Client::incoming_shares(self).await?) })
    }

    fn me(&self) -> BoxFuture<'_, RemoteResult<Me>> {
        Box::pin(async move { Ok(nimbus_client::Client::me(self).await?) })
    }

    fn stat<'a>(&'a self, path: &'a RemotePath) -> BoxFuture<'a, RemoteResult<Entry>> {
        Box::pin(async move { Ok(nimbus_client::Client::stat(self, path).await?) })
    }

    fn list_dir_page<'a>(
        &'a self,
        path: &'a RemotePath,
        cursor: Option<&'a str>,
        limit: Option<u32>,
    ) -> BoxFuture<'a, RemoteResult<DirListing>> {
        Box::pin(async move { Ok(nimbus_client::Client::list_dir_page(self, path, cursor, limit).await?) })
    }

    fn mkdir<'a>(&'a self, path: &'a RemotePath) -> BoxFuture<'a, RemoteResult<Entry>> {
        Box::pin(async move { Ok(nimbus_client::Client::mkdir(self, path).await?) })
    }

    fn delete<'a>(&'a self, path: &'a RemotePath) -> BoxFuture<'a, RemoteResult<()>> {
        Box::pin(async move { Ok(nimbus_client::Client::delete(self, path).await?) })
    }

    fn move_entry<'a>(
        &'a self,
        from: &'a RemotePath,
        to: &'a RemotePath,
        overwrite: bool,
    ) -> BoxFuture<'a, RemoteResult<Entry>> {
        Box::pin(async move { Ok(nimbus_client::Client::move_entry(self, from, to, overwrite).await?) })
    }

    fn get_manifest<'a>(&'a self, path: &'a RemotePath) -> BoxFuture<'a, RemoteResult<Manifest>> {
        Box::pin(async move { Ok(nimbus_client::Client::get_manifest(self, path, None).await?) })
    }

    fn commit_manifest<'a>(
        &'a self,
        path: &'a RemotePath,
        commit: &'a CommitRequest,
    ) -> BoxFuture<'a, RemoteResult<Entry>> {
        Box::pin(async move { Ok(nimbus_client::Client::commit_manifest(self, path, commit).await?) })
    }

    fn put_block<'a>(
        &'a self,
        hash: &'a str,
        data: Bytes,
        scope: Option<&'a RemotePath>,
    ) -> BoxFuture<'a, RemoteResult<bool>> {
        Box::pin(async move { Ok(nimbus_client::Client::put_block_for(self, hash, data, scope).await?) })
    }

    fn get_block<'a>(&'a self, hash: &'a str, scope: Option<&'a RemotePath>) -> BoxFuture<'a, RemoteResult<Bytes>> {
        Box::pin(async move { Ok(nimbus_client::Client::get_block_checked(self, hash, scope).await?) })
    }

    fn changes<'a>(
        &'a self,
        cursor: Option<&'a str>,
        wait_secs: u32,
        limit: Option<u32>,
    ) -> BoxFuture<'a, RemoteResult<ChangeList>> {
        Box::pin(async move { Ok(nimbus_client::Client::changes(self, cursor, wait_secs, limit).await?) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_of_shared_files_are_scoped_to_the_file() {
        let p = |s: &str| RemotePath::parse(s).expect("path");
        assert!(in_shared_index(&p("/Shared with me")));
        assert!(in_shared_index(&p("/shared WITH me/Plan/notes.txt")));
        assert!(!in_shared_index(&p("/")));
        assert!(!in_shared_index(&p("/Docs/Shared with me")));
        assert!(!in_shared_index(&p("/Shared with me 2")));
        let shared = p("/Shared with me/Plan/notes.txt");
        assert_eq!(block_scope(&shared), Some(&shared));
        assert_eq!(block_scope(&p("/Docs/notes.txt")), None);
    }
}
