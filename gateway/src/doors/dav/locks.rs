//! dav-server's `DavLockSystem` over the `dav_locks` table. The same table is what the
//! metadata layer checks for every door, so a WebDAV lock holds for REST, the drive and S3
//! alike. One `SpaceLocks` is built per request, for the caller: a path of their own space
//! locks there; a path under `/Shared with me/<name>` locks the owner's file, in the owner's
//! space and under the owner's path, so the recipient's lock stops the owner's writes and the
//! owner's lock stops the recipient's, as for the owner's own files. Locks are shown with the
//! path as the caller sees it; no path or token reaches further than the caller's own space
//! and the subtrees shared with them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use dav_server::davpath::DavPath;
use dav_server::ls::{DavLock, DavLockSystem, LsFuture};
use futures::FutureExt;
use nimbus_proto::RemotePath;
use nimbus_proto::names::{is_shared_with_me, name_key};
use xmltree::Element;

use super::fs::{Held, remote};
use crate::access;
use crate::meta::{Grant, LockRow, LockTokens, Meta, SpaceId, lock_key, now_ms};

/// Lock lifetime when the client asks for none or for "Infinite": a crashed client's lock
/// must not stay forever. Clients refresh locks they keep (Office and Windows do).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);

#[derive(Clone)]
pub struct SpaceLocks {
    pub meta: Meta,
    pub space: SpaceId,
    pub prefix: &'static str,
    pub held: Held,
    /// Each space's live locks as first read by `discover` in this request: a PROPFIND of a
    /// folder asks for every entry's lockdiscovery, one query per space is enough.
    pub discovered: Arc<Mutex<HashMap<i64, Arc<Vec<LockRow>>>>>,
    /// The shares this request went through, by the name key of their entry (None: no such
    /// share), so a PROPFIND inside a share looks its share up once.
    pub grants: Arc<Mutex<HashMap<String, Option<Arc<Grant>>>>>,
}

/// Where a lock on a path of the caller's view lives.
struct Target {
    space: SpaceId,
    /// The path in that space.
    path: RemotePath,
    /// The share it was reached through (None: the caller's own space).
    grant: Option<Arc<Grant>>,
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
    fn dav_lock(&self, row: &LockRow, fallback: &DavPath, t: &Target) -> DavLock {
        let shown = match &t.grant {
            None => Some(row.path.clone()),
            // The owner's path as the caller sees it; one above the share is never shown.
            Some(g) => RemotePath::parse_url_encoded(&row.path)
                .ok()
                .and_then(|owner_path| {
                    access::Place::Shared { grant: Box::new((**g).clone()), path: owner_path.clone() }
                        .show(&owner_path)
                        .ok()
                })
                .map(|p| format!("/{}", p.url_encoded())),
        };
        let path = shown
            .ok_or(())
            .and_then(|s| {
                DavPath::new(&format!("{}{}", self.prefix, s))
                    .and_then(|mut p| p.set_prefix(self.prefix).map(|_| p))
                    .map_err(|_| ())
            })
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

    /// A stand-in returned as "the conflicting lock" when the database fails (the caller
    /// answers 423 and nothing changes), or when an `If` header's token is of no lock here.
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

    async fn live(&self, space: SpaceId) -> Vec<LockRow> {
        match self.meta.live_locks(space).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot read locks");
                Vec::new()
            }
        }
    }

    /// The live lock `token` if it is on `t`'s path or on a folder above it.
    async fn find(&self, t: &Target, token: &str) -> Option<LockRow> {
        let key = lock_key(&t.path);
        self.live(t.space).await.into_iter().find(|l| l.token == token && at_or_below(&key, &l.path_key))
    }

    /// Where a lock on `path` (the caller's view) lives: the caller's space, or through a
    /// share the owner's. None for a path that does not parse or a share that is not there
    /// (or was revoked), which no lock can be taken on or found at.
    async fn target(&self, path: &DavPath) -> Option<Target> {
        let p = remote(path).ok()?;
        let comps = p.components();
        let (Some(top), Some(name)) = (comps.first(), comps.get(1)) else {
            return Some(Target { space: self.space, path: p, grant: None });
        };
        if !is_shared_with_me(top) {
            return Some(Target { space: self.space, path: p, grant: None });
        }
        let key = name_key(name);
        let cached = self.grants.lock().ok().and_then(|g| g.get(&key).cloned());
        let grant = match cached {
            Some(g) => g?,
            None => {
                let g = match self.meta.shared_grant(self.space, name).await {
                    Ok(g) => g.map(Arc::new),
                    Err(e) => {
                        tracing::error!(error = %e, "cannot read a share");
                        return None;
                    }
                };
                if let Ok(mut m) = self.grants.lock() {
                    m.insert(key, g.clone());
                }
                g?
            }
        };
        let mut owner_path = grant.root.clone();
        for c in &comps[2..] {
            owner_path = owner_path.join(c).ok()?;
        }
        Some(Target { space: grant.owner, path: owner_path, grant: Some(grant) })
    }

    /// The live locks of `space`, read once per request.
    async fn discovered(&self, space: SpaceId) -> Arc<Vec<LockRow>> {
        if let Some(l) = self.discovered.lock().ok().and_then(|m| m.get(&space.get()).cloned()) {
            return l;
        }
        let l = Arc::new(self.live(space).await);
        if let Ok(mut m) = self.discovered.lock() {
            m.insert(space.get(), l.clone());
        }
        l
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
            let t = self.target(&path).await.ok_or_else(|| self.unavailable(&path))?;
            let timeout = timeout.filter(|t| !t.is_zero()).unwrap_or(DEFAULT_TIMEOUT).min(DEFAULT_TIMEOUT * 24);
            let now = now_ms();
            let stored = match &t.grant {
                None => path.as_url_string(),
                Some(_) => format!("/{}", t.path.url_encoded()),
            };
            let row = LockRow {
                token: format!("opaquelocktoken:{}", uuid::Uuid::new_v4()),
                space_id: t.space.get(),
                path: stored,
                path_key: lock_key(&t.path),
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
                    tracing::info!(path = %t.path, space = t.space.get(), shared, deep, secs = timeout.as_secs(), "WebDAV lock taken");
                    Ok(self.dav_lock(&row, &path, &t))
                }
                Ok(Err(conflict)) => Err(self.dav_lock(&conflict, &path, &t)),
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
            let t = self.target(&path).await.ok_or(())?;
            self.find(&t, &token).await.ok_or(())?;
            match self.meta.delete_lock(t.space, &token).await {
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
            let t = self.target(&path).await.ok_or(())?;
            self.find(&t, &token).await.ok_or(())?;
            let timeout = timeout.filter(|t| !t.is_zero()).unwrap_or(DEFAULT_TIMEOUT).min(DEFAULT_TIMEOUT * 24);
            match self.meta.refresh_lock(t.space, &token, timeout.as_millis() as i64).await {
                Ok(Some(row)) => Ok(self.dav_lock(&row, &path, &t)),
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
        ignore_principal: bool,
        deep: bool,
        submitted_tokens: &[String],
    ) -> LsFuture<'_, Result<(), DavLock>> {
        // Principals are not compared: the token is the proof (an owner and the recipients of a
        // write share act on the same files; a read share takes and releases no lock, mod.rs).
        // dav-server asks with `ignore_principal` only to evaluate a state token of an `If`
        // header (conditional.rs); that condition is true only if the token is the token of a
        // live lock on the resource (RFC 4918 §10.4), not whenever nothing conflicts: an
        // expired or made-up token must make the header false (412), or a client that lost its
        // lock would overwrite the changes made since.
        let if_token = ignore_principal;
        let (path, tokens) = (path.clone(), submitted_tokens.to_vec());
        async move {
            // A share that is not there has no locks; the file system answers for the path.
            let Some(t) = self.target(&path).await else {
                return if if_token { Err(self.unavailable(&path)) } else { Ok(()) };
            };
            let locks = match self.meta.live_locks(t.space).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read locks");
                    return Err(self.unavailable(&path));
                }
            };
            let key = lock_key(&t.path);
            if if_token {
                return match crate::meta::locks::held_on(&locks, &key, LockTokens::new(&tokens)) {
                    Some(_) => Ok(()),
                    None => Err(self.unavailable(&path)),
                };
            }
            match crate::meta::locks::conflict(&locks, &key, deep, LockTokens::new(&tokens)) {
                Some(l) => Err(self.dav_lock(l, &path, &t)),
                None => Ok(()),
            }
        }
        .boxed()
    }

    fn discover(&self, path: &DavPath) -> LsFuture<'_, Vec<DavLock>> {
        let path = path.clone();
        async move {
            let Some(t) = self.target(&path).await else { return Vec::new() };
            let key = lock_key(&t.path);
            let locks = self.discovered(t.space).await;
            locks
                .iter()
                .filter(|l| l.path_key == key || (l.deep && at_or_below(&key, &l.path_key)))
                .map(|l| self.dav_lock(l, &path, &t))
                .collect()
        }
        .boxed()
    }

    fn delete(&self, path: &DavPath) -> LsFuture<'_, Result<(), ()>> {
        let path = path.clone();
        async move {
            let t = self.target(&path).await.ok_or(())?;
            self.meta.delete_locks_under(t.space, &t.path).await.map_err(|e| {
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
