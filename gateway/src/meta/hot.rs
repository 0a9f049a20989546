//! Hot metadata kept in memory so that a read of a hot file costs no database round trip:
//! token lookups and file manifests; and the wake-ups of change-feed readers waiting for a
//! space to change.
//!
//! Correctness comes from where invalidation happens: inside the `Meta` methods that change
//! the rows, never in handlers, and on PostgreSQL also from the other gateways' notifications
//! (`notify.rs`). Three stamps decide whether an entry may be stored and served:
//! - the **epoch** changes whenever the node stops or starts trusting its notification
//!   channel: while it is odd nothing is served or stored
//!   (the channel may be missing changes), and an entry read under an older epoch is refused;
//! - a space's **generation** is bumped by every namespace change in the space (local or
//!   notified); manifests are stamped with it;
//! - the **revocation count** is bumped by every token or user invalidation; a token row is
//!   stored only if no revocation happened since its lookup began.
//!
//! Every stamp is read before the database, so a change that commits while a lookup runs can
//! only make its result stale on arrival, never put an old row back: revocation wins races
//! with lookups. Entries also expire ([`TOKEN_TTL`], [`MANIFEST_TTL`]) as a backstop should an
//! invalidation be lost in a way the channel's checks cannot see.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{Manifest, TokenAuthRow};

const TOKEN_TTL: Duration = Duration::from_secs(30);
/// Manifests are kept correct by generations; the age limit only bounds how long a missed
/// invalidation could last.
const MANIFEST_TTL: Duration = Duration::from_secs(60);
const MAX_TOKENS: usize = 100_000;
const MAX_MANIFESTS: usize = 20_000;
/// Manifests of larger files are not kept (they are read rarely per byte served).
const MAX_MANIFEST_BLOCKS: usize = 256;

type ManifestKey = (i64, String, Option<i64>);
/// A manifest, shared with the reads that use it, and when and under what stamp it was read.
type ManifestEntry = (ManifestStamp, Instant, Arc<Manifest>);

/// What a token lookup saw before going to the database (see [`HotCache::token_stamp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenStamp {
    epoch: u64,
    revocations: u64,
}

/// What a manifest lookup saw before going to the database (see [`HotCache::manifest_stamp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ManifestStamp {
    epoch: u64,
    generation: u64,
}

/// A token's BLAKE3 hash, the bytes of what the database keeps in hex.
pub(crate) type TokenKey = [u8; 32];

struct Tokens {
    /// Bumped (under this lock) by every token or user invalidation.
    revocations: u64,
    /// Shared with the requests that use them: a hit copies no strings.
    rows: HashMap<TokenKey, (Arc<TokenAuthRow>, Instant)>,
}

pub(crate) struct HotCache {
    /// Even: trusted; odd: the notification channel may be missing changes, nothing is served
    /// or stored. Every change moves it on, so stamps taken before no longer match.
    epoch: AtomicU64,
    tokens: Mutex<Tokens>,
    generations: Mutex<HashMap<i64, u64>>,
    manifests: Mutex<HashMap<ManifestKey, ManifestEntry>>,
    /// One channel per space that has change-feed readers waiting; removed with the last one.
    signals: Mutex<HashMap<i64, watch::Sender<()>>>,
}

impl Default for HotCache {
    fn default() -> Self {
        HotCache {
            epoch: AtomicU64::new(0),
            tokens: Mutex::new(Tokens { revocations: 0, rows: HashMap::new() }),
            generations: Default::default(),
            manifests: Default::default(),
            signals: Default::default(),
        }
    }
}

/// Even epochs are trusted ones.
fn is_trusted(epoch: u64) -> bool {
    epoch.is_multiple_of(2)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl HotCache {
    /// A cache that serves nothing until [`HotCache::trust`]: a node on a shared database,
    /// before it listens to the others' invalidations.
    pub fn distrusted() -> Self {
        let h = HotCache::default();
        h.epoch.store(1, Ordering::SeqCst);
        h
    }

    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    pub fn trusted(&self) -> bool {
        is_trusted(self.epoch())
    }

    /// Stops serving and storing entries, drops every entry, and wakes every change-feed
    /// reader (they read the journal again): changes may be going unnoticed.
    pub fn distrust(&self) {
        let _ = self.epoch.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |e| is_trusted(e).then_some(e + 1));
        self.drop_entries();
    }

    /// Serves and stores entries again, starting from nothing: called once every change from
    /// now on is known to arrive. Whatever was looked up before cannot be stored any more.
    pub fn trust(&self) {
        let _ = self.epoch.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |e| (!is_trusted(e)).then_some(e + 1));
        self.drop_entries();
    }

    fn drop_entries(&self) {
        lock(&self.tokens).rows.clear();
        lock(&self.manifests).clear();
        for tx in lock(&self.signals).values() {
            tx.send_replace(());
        }
    }

    /// Take before looking a token up in the database; give to [`HotCache::put_token`].
    pub fn token_stamp(&self) -> TokenStamp {
        let revocations = lock(&self.tokens).revocations;
        TokenStamp { epoch: self.epoch(), revocations }
    }

    pub fn token(&self, hash: &TokenKey) -> Option<Arc<TokenAuthRow>> {
        if !self.trusted() {
            return None;
        }
        let tokens = lock(&self.tokens);
        let (row, at) = tokens.rows.get(hash)?;
        (at.elapsed() < TOKEN_TTL).then(|| Arc::clone(row))
    }

    /// Keeps a row looked up under `stamp`, unless a revocation, user change or loss of trust
    /// happened since: the row may predate it.
    pub fn put_token(&self, hash: TokenKey, row: Arc<TokenAuthRow>, stamp: TokenStamp) {
        let mut tokens = lock(&self.tokens);
        // Checked under the lock invalidations take, after they bumped their counters.
        if !is_trusted(stamp.epoch) || stamp.epoch != self.epoch() || stamp.revocations != tokens.revocations {
            return;
        }
        if tokens.rows.len() >= MAX_TOKENS {
            tokens.rows.retain(|_, (_, at)| at.elapsed() < TOKEN_TTL);
            if tokens.rows.len() >= MAX_TOKENS {
                tokens.rows.clear();
            }
        }
        tokens.rows.insert(hash, (row, Instant::now()));
    }

    /// Records a use in the cached row of the token whose hash is `hash`, so the next requests
    /// don't write it again. One row per token: a token has one hash.
    pub fn mark_used(&self, hash: &TokenKey, at_ms: i64, ip: Option<&str>) {
        if let Some((row, _)) = lock(&self.tokens).rows.get_mut(hash) {
            // Requests still holding the old row keep it; the next lookup sees this one.
            let row = Arc::make_mut(row);
            row.last_used_at = Some(at_ms);
            if let Some(ip) = ip {
                row.last_ip = Some(ip.to_string());
            }
        }
    }

    pub fn forget_token(&self, token_id: i64) {
        let mut tokens = lock(&self.tokens);
        tokens.revocations += 1;
        tokens.rows.retain(|_, (row, _)| row.token_id != token_id);
    }

    pub fn forget_user(&self, user_id: i64) {
        let mut tokens = lock(&self.tokens);
        tokens.revocations += 1;
        tokens.rows.retain(|_, (row, _)| row.user_id != user_id);
    }

    /// Take before reading a manifest from the database; give to [`HotCache::put_manifest`].
    pub fn manifest_stamp(&self, space: i64) -> ManifestStamp {
        // Epoch first: a loss of trust between the two reads then still shows.
        let epoch = self.epoch();
        ManifestStamp { epoch, generation: self.generation(space) }
    }

    fn generation(&self, space: i64) -> u64 {
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

    /// The manifest kept under `key`, if it was read under `current`, the space's stamp as the
    /// caller just took it (the stamp it would store a database read under).
    pub fn manifest(&self, key: &ManifestKey, current: ManifestStamp) -> Option<Arc<Manifest>> {
        if !self.trusted() {
            return None;
        }
        let manifests = lock(&self.manifests);
        let (stamp, at, m) = manifests.get(key)?;
        (*stamp == current && at.elapsed() < MANIFEST_TTL).then(|| Arc::clone(m))
    }

    pub fn put_manifest(&self, key: ManifestKey, stamp: ManifestStamp, m: &Arc<Manifest>) {
        if m.blocks.len() > MAX_MANIFEST_BLOCKS || !is_trusted(stamp.epoch) || stamp != self.manifest_stamp(key.0) {
            // Stale on arrival (or nothing may be stored now): not worth keeping.
            return;
        }
        let mut manifests = lock(&self.manifests);
        if manifests.len() >= MAX_MANIFESTS {
            let epoch = self.epoch();
            let generations = lock(&self.generations);
            manifests.retain(|k, (s, at, _)| {
                s.epoch == epoch
                    && generations.get(&k.0).copied().unwrap_or(0) == s.generation
                    && at.elapsed() < MANIFEST_TTL
            });
            if manifests.len() >= MAX_MANIFESTS {
                manifests.clear();
            }
        }
        manifests.insert(key, (stamp, Instant::now(), Arc::clone(m)));
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
            totp_setup_only: false,
        }
    }

    fn manifest() -> Arc<Manifest> {
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
        Arc::new(Manifest { node, path: nimbus_proto::RemotePath::root(), version, blocks: Arc::new([]) })
    }

    /// The key of a token named `name` in these tests.
    fn k(name: &str) -> TokenKey {
        *crate::auth::token_key(name).as_bytes()
    }

    fn put(h: &HotCache, hash: &str, r: TokenAuthRow) {
        h.put_token(k(hash), Arc::new(r), h.token_stamp());
    }

    #[test]
    fn a_use_is_noted_in_that_tokens_row_only() {
        let h = HotCache::default();
        put(&h, "a", row(1, 10));
        put(&h, "b", row(2, 10));
        let held = h.token(&k("a")).expect("cached");
        h.mark_used(&k("a"), 42, Some("127.0.0.2"));
        let a = h.token(&k("a")).expect("cached");
        assert_eq!((a.last_used_at, a.last_ip.as_deref()), (Some(42), Some("127.0.0.2")));
        // Without an address the last one known stays.
        h.mark_used(&k("a"), 43, None);
        let a = h.token(&k("a")).expect("cached");
        assert_eq!((a.last_used_at, a.last_ip.as_deref()), (Some(43), Some("127.0.0.2")));
        assert_eq!(held.last_used_at, None, "a request's row is its own");
        assert_eq!(h.token(&k("b")).expect("cached").last_used_at, None);
        // A token not in memory: nothing to note, nothing put in.
        h.mark_used(&k("z"), 44, None);
        assert!(h.token(&k("z")).is_none());
    }

    #[test]
    fn revocation_and_user_changes_drop_tokens() {
        let h = HotCache::default();
        put(&h, "a", row(1, 10));
        put(&h, "b", row(2, 10));
        put(&h, "c", row(3, 11));
        h.forget_token(1);
        assert!(h.token(&k("a")).is_none());
        assert!(h.token(&k("b")).is_some());
        h.forget_user(10);
        assert!(h.token(&k("b")).is_none());
        assert!(h.token(&k("c")).is_some());
    }

    #[test]
    fn a_lookup_racing_a_revocation_cannot_put_the_row_back() {
        let h = HotCache::default();
        // The lookup takes its stamp, then reads the row before the revocation commits ...
        let stamp = h.token_stamp();
        let stale = row(1, 10);
        // ... the revocation commits and invalidates (here, or notified by another node) ...
        h.forget_token(1);
        // ... and only then does the lookup try to keep what it read.
        h.put_token(k("a"), Arc::new(stale.clone()), stamp);
        assert!(h.token(&k("a")).is_none(), "the revoked row came back");
        // The same for a user change (disabled, deleted, all tokens revoked).
        let stamp = h.token_stamp();
        h.forget_user(10);
        h.put_token(k("a"), Arc::new(stale.clone()), stamp);
        assert!(h.token(&k("a")).is_none());
        // A lookup that began after the revocation reads the new row and may keep it.
        put(&h, "a", stale);
        assert!(h.token(&k("a")).is_some());
    }

    #[test]
    fn a_space_change_makes_its_manifests_stale() {
        let h = HotCache::default();
        let key = (1, "/a".to_string(), None);
        let g = h.manifest_stamp(1);
        h.put_manifest(key.clone(), g, &manifest());
        assert!(h.manifest(&key, h.manifest_stamp(key.0)).is_some());
        h.space_changed(2);
        assert!(h.manifest(&key, h.manifest_stamp(key.0)).is_some(), "other spaces do not matter");
        h.space_changed(1);
        assert!(h.manifest(&key, h.manifest_stamp(key.0)).is_none());
        // An entry read before a change but stored after it is stale on arrival.
        h.put_manifest(key.clone(), g, &manifest());
        assert!(h.manifest(&key, h.manifest_stamp(key.0)).is_none());
    }

    #[test]
    fn nothing_is_served_or_kept_while_distrusted() {
        let h = HotCache::distrusted();
        let key = (1, "/a".to_string(), None);
        h.put_manifest(key.clone(), h.manifest_stamp(1), &manifest());
        put(&h, "a", row(1, 10));
        assert!(
            h.manifest(&key, h.manifest_stamp(key.0)).is_none() && h.token(&k("a")).is_none(),
            "a new node trusts nothing yet"
        );

        h.trust();
        h.put_manifest(key.clone(), h.manifest_stamp(1), &manifest());
        put(&h, "a", row(1, 10));
        assert!(h.manifest(&key, h.manifest_stamp(key.0)).is_some() && h.token(&k("a")).is_some());

        // Lookups that began before the channel went quiet ...
        let (ms, ts) = (h.manifest_stamp(1), h.token_stamp());
        h.distrust();
        assert!(
            h.manifest(&key, h.manifest_stamp(key.0)).is_none() && h.token(&k("a")).is_none(),
            "served while distrusted"
        );
        // ... and lookups made meanwhile cannot store what they read, even once trusted again.
        let (ms2, ts2) = (h.manifest_stamp(1), h.token_stamp());
        h.trust();
        for (m, t) in [(ms, ts), (ms2, ts2)] {
            h.put_manifest(key.clone(), m, &manifest());
            h.put_token(k("a"), Arc::new(row(1, 10)), t);
        }
        assert!(h.manifest(&key, h.manifest_stamp(key.0)).is_none(), "a manifest read before trust came back");
        assert!(h.token(&k("a")).is_none(), "a token read before trust came back");
        // Everything held before the loss is gone too.
        put(&h, "b", row(2, 10));
        h.distrust();
        h.trust();
        assert!(h.token(&k("b")).is_none());
    }

    #[tokio::test]
    async fn distrust_wakes_every_watcher() {
        let h = Arc::new(HotCache::default());
        let mut w = h.watch_space(7);
        h.distrust();
        tokio::time::timeout(Duration::from_secs(5), w.changed()).await.expect("woken by the loss of trust");
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
