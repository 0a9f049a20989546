//! What the drive may change under `/Shared with me`: nothing in the folder itself (its entries
//! are the shares, which the user leaves rather than deletes), and inside a share only what a
//! `write` share allows. A change the gateway would refuse is refused here at once with
//! [`VfsError::ReadOnly`] (EACCES): at open for writing, create, mkdir, rename, unlink, rmdir and
//! truncate, not later when the upload is refused.

use std::time::{Duration, Instant};

use nimbus_proto::RemotePath;
use nimbus_proto::names::name_key;
use nimbus_proto::wire::SharePermission;

use super::remote::in_shared_index;
use super::types::*;
use super::vfs::{Vfs, lock};

/// How long the list of shares is trusted before it is asked for again: a permission changed
/// by the owner holds here within this (the gateway decides every write anyway).
const FRESH: Duration = Duration::from_secs(5);

impl Vfs {
    /// Ok if a change at `path` (a new name, or an existing node) may be tried; ReadOnly for
    /// `/Shared with me` itself, a share's own entry, and anything inside a read-only share.
    /// A share this drive does not know (yet) is left to the gateway.
    pub(super) async fn may_change(&self, path: &RemotePath) -> VfsResult<()> {
        if !in_shared_index(path) {
            return Ok(());
        }
        let comps = path.components();
        let Some(name) = comps.get(1).filter(|_| comps.len() > 2) else { return Err(VfsError::ReadOnly) };
        match self.share_writable(name).await {
            Some(false) => Err(VfsError::ReadOnly),
            _ => Ok(()),
        }
    }

    /// Whether the share named `name` (its entry under `/Shared with me`) takes writes; None if
    /// no such share is known. Asks the gateway when the list is stale; offline, the last list.
    async fn share_writable(&self, name: &str) -> Option<bool> {
        let key = name_key(name);
        {
            let s = lock(&self.shares);
            if s.read_at.is_some_and(|t| t.elapsed() < FRESH) {
                return s.writable.get(&key).copied();
            }
        }
        match self.remote.incoming_shares().await {
            Ok(list) => {
                let mut s = lock(&self.shares);
                s.writable =
                    list.into_iter().map(|i| (name_key(&i.name), i.permission == SharePermission::Write)).collect();
                s.read_at = Some(Instant::now());
                s.writable.get(&key).copied()
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot list the shares; using the last list");
                lock(&self.shares).writable.get(&key).copied()
            }
        }
    }
}
