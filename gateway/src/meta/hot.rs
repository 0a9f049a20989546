//! Hot metadata kept in memory so that a read of a hot file costs no database round trip:
//! token lookups and file manifests; and the wake-ups of change-feed readers waiting for a
//! space to change.
//!
//! Correctness comes from where invalidation happens: inside the `Meta` methods that change
//! the rows, never in handlers. Tokens are dropped when revoked (one, or all of a user's) and
//! when their user is changed or deleted; token entries also expire after [`TOKEN_TTL`] so a
//! change made by another gateway on the same database is seen within that time (instant
//! cross-node invalidation belongs to the scale-out work). Manifests are stamped with their
//! space's generation, which every namespace change in the space bumps; the generation is read
//! before the database, so a racing change can only make a fresh entry stale, never the
//! reverse.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{Manifest, TokenAuthRow};

const TOKEN_TTL: Duration = Duration::from_secs(30);
const MAX_TOKENS: usize = 100_000;
const MAX_MANIFESTS: usize = 20_000;
/// Manifests of larger files are not kept (they are read rarely per byte served).
const MAX_MANIFEST_BLOCKS: usize = 256;

type ManifestKey = (i64, String, Option<i64>);

pub(crate) struct HotCache {
    /// False while cross-node invalidations may be missed (see `notify.rs`): lookups then
    /// bypass the cache.
    trusted: std::sync::atomic::AtomicBool,
    tokens: Mutex<HashMap<String, (TokenAuthRow, Instant)>>,
    generations: Mutex<HashMap<i64, u64>>,
    manifests: Mutex<HashMap<ManifestKey, (u64, Manifest)>>,
    /// One channel per space that has change-feed readers waiting; removed with the last one.
    signals: Mutex<HashMap<i64, watch::Sender<()>>>,
}

impl Default for HotCache {
    fn default() -> Self {
        HotCache {
            trusted: std::sync::atomic::AtomicBool::new(true),
            tokens: Default::default(),
            generations: Default::default(),
            manifests: Default::default(),
            signals: Default::default(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl HotCache {
    fn trusted(&self) -> bool {
        self.trusted.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn set_trusted(&self, on: bool) {
        self.trusted.store(on, std::sync::atomic::Ordering::Release);
    }

    /// Drops every cached token and manifest (generations only grow, so no entry of an older
    /// generation can come back).
    pub fn clear(&self) {
        lock(&self.tokens).clear();
        lock(&self.manifests).clear();
    }

    pub fn token(&self, hash: &str) -> Option<TokenAuthRow> {
        if !self.trusted() {
            return None;
        }
        let tokens = lock(&self.tokens);
        let (row, at) = tokens.get(hash)?;
        (at.elapsed() < TOKEN_TTL).then(|| row.clone())
    }

    pub fn put_token(&self, hash: String, row: TokenAuthRow) {
        let mut tokens = lock(&self.tokens);
        if tokens.len() >= MAX_TOKENS {
            tokens.retain(|_, (_, at)| at.elapsed() < TOKEN_TTL);
            if tokens.len() >= MAX_TOKENS {
                tokens.clear();
            }
        }
        tokens.insert(hash, (row, Instant::now()));
    }

    /// Records a use in the cached row, so the next requests don't write it again.
    pub fn mark_used(&self, token_id: i64, at_ms: i64, ip: Option<&str>) {
        for (row, _) in lock(&self.tokens).values_mut() {
            if row.token_id == token_id {
                row.last_used_at = Some(at_ms);
                if let Some(ip) = ip {
                    row.last_ip = Some(ip.to_string());
                }
            }
        }
    }

    pub fn forget_token(&self, token_id: i64) {
        lock(&self.tokens).retain(|_, (row, _)| row.token_id != token_id);
    }

    pub fn forget_user(&self, user_id: i64) {
        lock(&self.tokens).retain(|_, (row, _)| row.user_id != user_id);
    }

    pub fn generation(&self, space: i64) -> u64 {
        lock(&self.generations).get(&space).copied().unwrap_or(0)
    }

    /// Every namespace change of a space calls this after it commits.
    pub fn space_changed(&self, space: i64) {
        *lock(&self.generations).entry(space).or_insert(0) += 1;
        if let Some(tx) = lock(&self.signals).get(&space) {
            tx.send_replace(());
        }
    }

    /// Registers a change-feed reader of `space`: every [`HotCache::space_changed`] of that
    /// space from now on wakes [`ChangeWatch::changed`].
    pub fn watch_space(self: &Arc<Self>, space: i64) -> ChangeWatch {
        let rx = lock(&self.signals).entry(space).or_insert_with(|| watch::channel(()).0).subscribe();
        ChangeWatch { space, rx: Some(rx), hot: Arc::clone(self) }
    }

    pub fn manifest(&self, key: &ManifestKey) -> Option<Manifest> {
        if !self.trusted() {
            return None;
        }
        let current = self.generation(key.0);
        let manifests = lock(&self.manifests);
        let (generation, m) = manifests.get(key)?;
        (*generation == current).then(|| m.clone())
    }

    pub fn put_manifest(&self, key: ManifestKey, generation: u64, m: &Manifest) {
        if m.blocks.len() > MAX_MANIFEST_BLOCKS {
            return;
        }
        let mut manifests = lock(&self.manifests);
        if manifests.len() >= MAX_MANIFESTS {
            let generations = lock(&self.generations);
            manifests.retain(|k, (g, _)| generations.get(&k.0).copied().unwrap_or(0) == *g);
            if manifests.len() >= MAX_MANIFESTS {
                manifests.clear();
            }
        }
        manifests.insert(key, (generation, m.clone()));
    }
}

/// A change-feed reader's registration for wake-ups of one space (see [`HotCache::watch_space`]).
/// Changes committed through this process wake it, and on PostgreSQL those of other gateways
/// too (their invalidations arrive through `notify.rs`); readers also poll the database.
pub struct ChangeWatch {
    space: i64,
    rx: Option<watch::Receiver<()>>,
    hot: Arc<HotCache>,
}

impl ChangeWatch {
    /// Resolves once the space has changed since the registration or the previous wake-up.
    pub async fn changed(&mut self) {
        let woken = match self.rx.as_mut() {
            Some(rx) => rx.changed().await.is_ok(),
            None => false,
        };
        if !woken {
            // The sender lives as long as a receiver does; should it go anyway, the caller's
            // poll timer still ends the wait.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for ChangeWatch {
    fn drop(&mut self) {
        drop(self.rx.take());
        let mut signals = lock(&self.hot.signals);
        if signals.get(&self.space).is_some_and(|tx| tx.receiver_count() == 0) {
            signals.remove(&self.space);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::{NodeRow, VersionRow};

    fn row(token_id: i64, user_id: i64) -> TokenAuthRow {
        TokenAuthRow {
            token_id,
            user_id,
            device: "d".into(),
            expires_at: i64::MAX,
            revoked_at: None,
            last_used_at: None,
            last_ip: None,
            username: "u".into(),
            role: "user".into(),
            disabled: false,
        }
    }

    fn manifest() -> Manifest {
        let node = NodeRow {
            id: 1,
            space_id: 1,
            parent_id: Some(0),
            name: "a".into(),
            kind: "file".into(),
            size: 0,
            version_id: Some(1),
            created_at: 0,
            modified_at: 0,
        };
        let version = VersionRow { id: 1, node_id: 1, size: 0, block_size: 4, device: None, created_at: 0 };
        Manifest { node, path: nimbus_proto::RemotePath::root(), version, blocks: vec![] }
    }

    #[test]
    fn revocation_and_user_changes_drop_tokens() {
        let h = HotCache::default();
        h.put_token("a".into(), row(1, 10));
        h.put_token("b".into(), row(2, 10));
        h.put_token("c".into(), row(3, 11));
        h.forget_token(1);
        assert!(h.token("a").is_none());
        assert!(h.token("b").is_some());
        h.forget_user(10);
        assert!(h.token("b").is_none());
        assert!(h.token("c").is_some());
    }

    #[test]
    fn a_space_change_makes_its_manifests_stale() {
        let h = HotCache::default();
        let key = (1, "/a".to_string(), None);
        let g = h.generation(1);
        h.put_manifest(key.clone(), g, &manifest());
        assert!(h.manifest(&key).is_some());
        h.space_changed(2);
        assert!(h.manifest(&key).is_some(), "other spaces do not matter");
        h.space_changed(1);
        assert!(h.manifest(&key).is_none());
        // An entry read before a change but stored after it is stale on arrival.
        h.put_manifest(key.clone(), g, &manifest());
        assert!(h.manifest(&key).is_none());
    }

    #[tokio::test]
    async fn a_space_change_wakes_its_watchers_only() {
        let h = Arc::new(HotCache::default());
        let mut w1 = h.watch_space(1);
        let mut w2 = h.watch_space(2);
        // A change right after registering, before anyone waits, is not lost.
        h.space_changed(1);
        tokio::time::timeout(Duration::from_secs(5), w1.changed()).await.expect("woken");
        assert!(tokio::time::timeout(Duration::from_millis(50), w1.changed()).await.is_err(), "woken once per change");
        assert!(
            tokio::time::timeout(Duration::from_millis(50), w2.changed()).await.is_err(),
            "other spaces do not wake"
        );
        let w1b = h.watch_space(1);
        drop(w1);
        assert_eq!(lock(&h.signals).len(), 2, "space 1 still has a watcher");
        drop(w1b);
        drop(w2);
        assert!(lock(&h.signals).is_empty(), "the last watcher removes its space's channel");
    }
}
