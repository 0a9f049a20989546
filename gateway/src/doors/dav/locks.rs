//! dav-server's `DavLockSystem` over the `dav_locks` table of one space. The same table is
//! what the metadata layer checks for every door, so a WebDAV lock holds for REST, the drive
//! and S3 alike. One `SpaceLocks` is built per request, for the caller's own space: no path
//! or token can reach another user's locks.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, UNIX_EPOCH};

use dav_server::davpath::DavPath;
use dav_server::ls::{DavLock, DavLockSystem, LsFuture};
use futures::FutureExt;
use nimbus_proto::RemotePath;
use xmltree::Element;

use super::fs::{Held, remote};
use crate::meta::{LockRow, LockTokens, Meta, SpaceId, lock_key, now_ms};

/// Lock lifetime when the client asks for none or for "Infinite": a crashed client's lock
/// must not stay forever. Clients refresh locks they keep (Office and Windows do).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);

#[derive(Clone)]
pub struct SpaceLocks {
    pub meta: Meta,
    pub space: SpaceId,
    pub prefix: &'static str,
    pub held: Held,
    /// The space's live locks as first read by `discover` in this request: a PROPFIND of a
    /// folder asks for every entry's lockdiscovery, one query is enough.
    pub discovered: Arc<OnceLock<Vec<LockRow>>>,
}

impl std::fmt::Debug for SpaceLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpaceLocks").field("space", &self.space).finish()
    }
}

/// True if `key` is `dir` or below it.
fn at_or_below(key: &str, dir: &str) -> bool {
    key == dir || dir == "/" || (key.starts_with(dir) && key.as_bytes().get(dir.len()) == Some(&b'/'))
}

impl SpaceLocks {
    /// The lock as dav-server shows it; `fallback` (the request's path) stands in for a stored
    /// path that no longer parses.
    fn dav_lock(&self, row: &LockRow, fallback: &DavPath) -> DavLock {
        let path = DavPath::new(&format!("{}{}", self.prefix, row.path))
            .and_then(|mut p| p.set_prefix(self.prefix).map(|_| p))
            .unwrap_or_else(|_| fallback.clone());
        let owner = row.owner_xml.as_deref().and_then(|x| Element::parse(x.as_bytes()).ok()).map(Box::new);
        DavLock {
            token: row.token.clone(),
            path: Box::new(path),
            principal: row.principal.clone(),
            owner,
            timeout_at: Some(UNIX_EPOCH + Duration::from_millis(row.expires_at.max(0) as u64)),
            timeout: Some(Duration::from_millis(row.timeout_ms.max(0) as u64)),
            shared: row.shared,
            deep: row.deep,
        }
    }

    /// A stand-in returned as "the conflicting lock" when the database fails: the caller
    /// answers 423 and nothing changes.
    fn unavailable(&self, path: &DavPath) -> DavLock {
        DavLock {
            token: String::new(),
            path: Box::new(path.clone()),
            principal: None,
            owner: None,
            timeout_at: None,
            timeout: None,
            shared: false,
            deep: false,
        }
    }

    async fn live(&self) -> Vec<LockRow> {
        match self.meta.live_locks(self.space).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot read locks");
                Vec::new()
            }
        }
    }

    /// The live lock `token` if it is on `path` or on a folder above it.
    async fn find(&self, path: &RemotePath, token: &str) -> Option<LockRow> {
        let key = lock_key(path);
        self.live().await.into_iter().find(|l| l.token == token && at_or_below(&key, &l.path_key))
    }
}

/// The lock owner as XML text. dav-server hands the element over re-prefixed `D:` without a
/// binding for it, so the binding is added before writing.
fn owner_to_xml(owner: &Element) -> Option<String> {
    let mut o = owner.clone();
    let mut ns = o.namespaces.clone().unwrap_or_else(xmltree::Namespace::empty);
    if let Some(p) = &o.prefix {
        ns.put(p.clone(), o.namespace.clone().unwrap_or_else(|| "DAV:".into()));
    }
    o.namespaces = Some(ns);
    let mut buf = Vec::new();
    if let Err(e) = o.write(&mut buf) {
        tracing::debug!(error = %e, "lock owner not stored");
        return None;
    }
    String::from_utf8(buf).ok()
}

impl DavLockSystem for SpaceLocks {
    fn lock(
        &self,
        path: &DavPath,
        principal: Option<&str>,
        owner: Option<&Element>,
        timeout: Option<Duration>,
        shared: bool,
        deep: bool,
    ) -> LsFuture<'_, Result<DavLock, DavLock>> {
        let path = path.clone();
        let principal = principal.map(str::to_string);
        let owner_xml = owner.and_then(owner_to_xml);
        async move {
            let p = remote(&path).map_err(|_| self.unavailable(&path))?;
            let timeout = timeout.filter(|t| !t.is_zero()).unwrap_or(DEFAULT_TIMEOUT).min(DEFAULT_TIMEOUT * 24);
            let now = now_ms();
            let row = LockRow {
                token: format!("opaquelocktoken:{}", uuid::Uuid::new_v4()),
                space_id: self.space.get(),
                path: path.as_url_string(),
                path_key: lock_key(&p),
                principal,
                owner_xml,
                shared,
                deep,
                timeout_ms: timeout.as_millis() as i64,
                expires_at: now + timeout.as_millis() as i64,
                created_at: now,
            };
            match self.meta.insert_lock(&row).await {
                Ok(Ok(())) => {
                    // This request holds the lock it took (LOCK on an unmapped URL then
                    // creates the empty file under it).
                    if let Ok(mut h) = self.held.lock() {
                        h.push(row.token.clone());
                    }
                    tracing::info!(path = %p, shared, deep, secs = timeout.as_secs(), "WebDAV lock taken");
                    Ok(self.dav_lock(&row, &path))
                }
                Ok(Err(conflict)) => Err(self.dav_lock(&conflict, &path)),
                Err(e) => {
                    tracing::error!(error = %e, "cannot store a lock");
                    Err(self.unavailable(&path))
                }
            }
        }
        .boxed()
    }

    fn unlock(&self, path: &DavPath, token: &str) -> LsFuture<'_, Result<(), ()>> {
        let (path, token) = (path.clone(), token.to_string());
        async move {
            let p = remote(&path).map_err(|_| ())?;
            self.find(&p, &token).await.ok_or(())?;
            match self.meta.delete_lock(self.space, &token).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(()),
                Err(e) => {
                    tracing::error!(error = %e, "cannot release a lock");
                    Err(())
                }
            }
        }
        .boxed()
    }

    fn refresh(&self, path: &DavPath, token: &str, timeout: Option<Duration>) -> LsFuture<'_, Result<DavLock, ()>> {
        let (path, token) = (path.clone(), token.to_string());
        async move {
            let p = remote(&path).map_err(|_| ())?;
            self.find(&p, &token).await.ok_or(())?;
            let timeout = timeout.filter(|t| !t.is_zero()).unwrap_or(DEFAULT_TIMEOUT).min(DEFAULT_TIMEOUT * 24);
            match self.meta.refresh_lock(self.space, &token, timeout.as_millis() as i64).await {
                Ok(Some(row)) => Ok(self.dav_lock(&row, &path)),
                Ok(None) => Err(()),
                Err(e) => {
                    tracing::error!(error = %e, "cannot refresh a lock");
                    Err(())
                }
            }
        }
        .boxed()
    }

    fn check(
        &self,
        path: &DavPath,
        _principal: Option<&str>,
        _ignore_principal: bool,
        deep: bool,
        submitted_tokens: &[String],
    ) -> LsFuture<'_, Result<(), DavLock>> {
        // Principals are not compared: a space has one user, and the token is the proof.
        let (path, tokens) = (path.clone(), submitted_tokens.to_vec());
        async move {
            let p = remote(&path).map_err(|_| self.unavailable(&path))?;
            let locks = match self.meta.live_locks(self.space).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read locks");
                    return Err(self.unavailable(&path));
                }
            };
            match crate::meta::locks::conflict(&locks, &lock_key(&p), deep, LockTokens::new(&tokens)) {
                Some(l) => Err(self.dav_lock(l, &path)),
                None => Ok(()),
            }
        }
        .boxed()
    }

    fn discover(&self, path: &DavPath) -> LsFuture<'_, Vec<DavLock>> {
        let path = path.clone();
        async move {
            let Ok(p) = remote(&path) else { return Vec::new() };
            let key = lock_key(&p);
            let locks = match self.discovered.get() {
                Some(l) => l,
                None => {
                    let l = self.live().await;
                    self.discovered.get_or_init(|| l)
                }
            };
            locks
                .iter()
                .filter(|l| l.path_key == key || (l.deep && at_or_below(&key, &l.path_key)))
                .map(|l| self.dav_lock(l, &path))
                .collect()
        }
        .boxed()
    }

    fn delete(&self, path: &DavPath) -> LsFuture<'_, Result<(), ()>> {
        let path = path.clone();
        async move {
            let p = remote(&path).map_err(|_| ())?;
            self.meta.delete_locks_under(self.space, &p).await.map_err(|e| {
                tracing::error!(error = %e, "cannot release locks");
            })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_round_trips() {
        let mut o = Element::parse(&b"<owner xmlns=\"DAV:\">litmus test suite</owner>"[..]).expect("parse");
        o.prefix = Some("D".into());
        let xml = owner_to_xml(&o).expect("written");
        let back = Element::parse(xml.as_bytes()).expect("parsed back");
        assert_eq!(back.name, "owner");
        assert_eq!(back.get_text().as_deref(), Some("litmus test suite"));
        assert!(at_or_below("/a/b", "/a") && at_or_below("/a", "/a") && at_or_below("/x", "/"));
        assert!(!at_or_below("/ab", "/a"));
    }
}
