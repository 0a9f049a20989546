//! Sign-in throttling that a stranger cannot turn into a lock-out.
//!
//! Failures are counted per client address (an IPv4 address or an IPv6 /64, see
//! [`client_key`]) and per username *at* that address, never per username alone: guessing
//! Bob's password from one place locks Bob out of that place only, and Bob signing in from
//! anywhere else is unaffected. After [`PAIR_LIMIT`] failures for one name at one address, or
//! [`ADDRESS_LIMIT`] from one address whatever the names, further attempts there are refused
//! (429 with `Retry-After`), even with the right password, so a guesser learns nothing during
//! a lock. Each further failure after a lock doubles it ([`BASE_LOCKOUT`] up to
//! [`MAX_LOCKOUT`]). A key quiet for [`QUIET`] (no failure, no lock) starts from zero again; a
//! success clears the name-at-address count (not the address's: an attacker with an account
//! of their own must not be able to wipe it).
//!
//! Only password and app-password sign-ins consult it. A request with a valid token (REST
//! bearer, WebDAV Basic with an app password, an S3 signature) is never throttled: tokens are
//! 256-bit random, so there is nothing to guess and no one else's failures can stop them.
//!
//! The counts live in the database (`login_throttle`), so every gateway on one PostgreSQL
//! shares them; a failure costs one upsert, an attempt one indexed read. Locks are also
//! remembered in memory, so a flood from a locked address is refused without the database.
//! Rows quiet for [`QUIET`] are pruned every [`PRUNE_EVERY`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::forwarded::client_key;
use crate::error::ApiError;
use crate::meta::{Meta, MetaResult, now_ms};

/// Failures of one username at one client address before it is locked there.
pub const PAIR_LIMIT: i64 = 5;
/// Failures from one client address, whatever the usernames, before it is locked.
pub const ADDRESS_LIMIT: i64 = 20;
/// The first lock; each further failure doubles it, up to [`MAX_LOCKOUT`].
pub const BASE_LOCKOUT: Duration = Duration::from_secs(60);
pub const MAX_LOCKOUT: Duration = Duration::from_secs(3600);
/// A key with no failure and no lock for this long is forgotten.
pub const QUIET: Duration = Duration::from_secs(3600);
const PRUNE_EVERY: Duration = Duration::from_secs(600);
/// Locks remembered in memory at most (then expired ones are dropped, or all of them: the
/// database still has them).
const MAX_LOCAL_LOCKS: usize = 100_000;
/// Username keys longer than this are cut (no account has one; the key stays bounded).
const MAX_NAME_KEY: usize = 128;

/// The lock after `failures` failures of a key whose limit is `limit`, if any.
pub fn lockout(failures: i64, limit: i64) -> Option<Duration> {
    if failures < limit {
        return None;
    }
    let doublings = (failures - limit).min(12) as u32;
    Some(BASE_LOCKOUT.saturating_mul(1 << doublings).min(MAX_LOCKOUT))
}

/// One sign-in attempt's throttle keys, from [`Throttle::begin`]; settle it with
/// [`Throttle::failed`] or [`Throttle::succeeded`].
#[derive(Debug, Clone)]
pub struct Attempt {
    pair: String,
    address: String,
    /// The name-at-address key has a row (so a success has something to clear).
    pair_counted: bool,
}

pub struct Throttle {
    meta: Meta,
    /// Keys known to be locked, with the lock's end (Unix ms).
    locks: Mutex<HashMap<String, i64>>,
}

impl Throttle {
    pub fn new(meta: Meta) -> Self {
        Throttle { meta, locks: Mutex::new(HashMap::new()) }
    }

    fn keys(username_key: &str, ip: Option<IpAddr>) -> (String, String) {
        let client = client_key(ip);
        let mut name = username_key;
        if name.len() > MAX_NAME_KEY {
            let mut end = MAX_NAME_KEY;
            while !name.is_char_boundary(end) {
                end -= 1;
            }
            name = &name[..end];
        }
        (format!("p:{client}|{name}"), format!("a:{client}"))
    }

    /// Refuses the attempt with 429 while `username_key` at `ip` or `ip` itself is locked.
    pub async fn begin(&self, username_key: &str, ip: Option<IpAddr>) -> Result<Attempt, ApiError> {
        self.begin_at(username_key, ip, now_ms()).await
    }

    async fn begin_at(&self, username_key: &str, ip: Option<IpAddr>, now: i64) -> Result<Attempt, ApiError> {
        let (pair, address) = Self::keys(username_key, ip);
        let r = self.begin_keys(pair, address, now).await;
        if matches!(r, Err(ApiError::TooManyRequests { .. })) {
            metrics::counter!("nimbus_logins_total", "result" => "throttled").increment(1);
        }
        r
    }

    /// The same for a password of a public link (`api/public_links.rs`): failures are counted
    /// per link at a client address and per address across links, apart from sign-ins (a
    /// visitor mistyping a link's password does not lock anyone's sign-in), with the same
    /// limits and locks.
    pub async fn begin_link(&self, link_id: i64, ip: Option<IpAddr>) -> Result<Attempt, ApiError> {
        let client = client_key(ip);
        self.begin_keys(format!("l:{client}|{link_id}"), format!("la:{client}"), now_ms()).await
    }

    async fn begin_keys(&self, pair: String, address: String, now: i64) -> Result<Attempt, ApiError> {
        let known = {
            let locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            [&pair, &address].iter().filter_map(|k| locks.get(*k)).copied().filter(|u| *u > now).max()
        };
        if let Some(until) = known {
            return Err(refused(until, now));
        }
        let rows = self.meta.throttle_rows(&pair, &address).await?;
        let pair_counted = rows.iter().any(|(k, _)| *k == pair);
        if let Some((key, until)) = rows.into_iter().filter(|(_, u)| *u > now).max_by_key(|(_, u)| *u) {
            self.remember(key, until, now);
            return Err(refused(until, now));
        }
        Ok(Attempt { pair, address, pair_counted })
    }

    /// Counts a failed attempt, locking what reached its limit. A database error is logged:
    /// the caller answers 401 either way.
    pub async fn failed(&self, a: &Attempt) {
        self.failed_at(a, now_ms()).await
    }

    async fn failed_at(&self, a: &Attempt, now: i64) {
        for (key, limit) in [(&a.pair, PAIR_LIMIT), (&a.address, ADDRESS_LIMIT)] {
            if let Err(e) = self.count(key, limit, now).await {
                tracing::warn!(error = %e, "could not record a failed sign-in in the throttle");
            }
        }
    }

    async fn count(&self, key: &str, limit: i64, now: i64) -> MetaResult<()> {
        let forget_before = now - QUIET.as_millis() as i64;
        let failures = self.meta.throttle_failure(key, now, forget_before).await?;
        if let Some(lock) = lockout(failures, limit) {
            let until = now + lock.as_millis() as i64;
            self.meta.throttle_lock(key, until).await?;
            self.remember(key.to_string(), until, now);
            tracing::info!(key, failures, lock_secs = lock.as_secs(), "sign-in throttle: locked");
        }
        Ok(())
    }

    /// A successful sign-in clears the name-at-address count.
    pub async fn succeeded(&self, a: &Attempt) {
        if !a.pair_counted {
            return;
        }
        self.locks.lock().unwrap_or_else(|p| p.into_inner()).remove(&a.pair);
        if let Err(e) = self.meta.throttle_clear(&a.pair).await {
            tracing::warn!(error = %e, "could not clear a sign-in throttle count");
        }
    }

    fn remember(&self, key: String, until: i64, now: i64) {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        if locks.len() >= MAX_LOCAL_LOCKS {
            locks.retain(|_, u| *u > now);
            if locks.len() >= MAX_LOCAL_LOCKS {
                locks.clear();
            }
        }
        let e = locks.entry(key).or_insert(until);
        *e = (*e).max(until);
    }

    /// Drops forgotten rows and expired in-memory locks every few minutes, for the life of
    /// the process.
    pub fn spawn_pruner(self: &Arc<Self>) {
        let t = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(PRUNE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(t) = t.upgrade() else { return };
                let now = now_ms();
                t.locks.lock().unwrap_or_else(|p| p.into_inner()).retain(|_, u| *u > now);
                match t.meta.throttle_prune(now - QUIET.as_millis() as i64).await {
                    Ok(n) if n > 0 => tracing::debug!(rows = n, "sign-in throttle: pruned"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "could not prune the sign-in throttle"),
                }
            }
        });
    }
}

fn refused(until: i64, now: i64) -> ApiError {
    let secs = ((until - now).max(0) as u64).div_ceil(1000).max(1);
    ApiError::TooManyRequests { retry_after: secs }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    async fn throttle() -> (tempfile::TempDir, Throttle) {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("meta.db").display());
        let meta = Meta::connect(&url).await.expect("connect");
        (dir, Throttle::new(meta))
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().expect("address"))
    }

    fn retry_after(r: Result<Attempt, ApiError>) -> Option<u64> {
        match r {
            Err(ApiError::TooManyRequests { retry_after }) => Some(retry_after),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => None,
        }
    }

    /// `n` failures of `name` from `addr` at time `now`.
    async fn fail(t: &Throttle, name: &str, addr: Option<IpAddr>, n: usize, now: i64) {
        for _ in 0..n {
            let a = t.begin_at(name, addr, now).await.expect("not locked");
            t.failed_at(&a, now).await;
        }
    }

    #[test]
    fn lockouts_double_up_to_the_cap() {
        assert_eq!(lockout(4, 5), None);
        assert_eq!(lockout(5, 5), Some(Duration::from_secs(60)));
        assert_eq!(lockout(6, 5), Some(Duration::from_secs(120)));
        assert_eq!(lockout(10, 5), Some(Duration::from_secs(1920)));
        assert_eq!(lockout(11, 5), Some(MAX_LOCKOUT));
        assert_eq!(lockout(i64::MAX, 5), Some(MAX_LOCKOUT));
    }

    #[tokio::test]
    async fn a_name_locks_at_one_address_only_and_grows() {
        let (_d, t) = throttle().await;
        let (here, there) = (ip("198.51.100.1"), ip("198.51.100.2"));
        fail(&t, "bob", here, 4, 0).await;
        assert_eq!(retry_after(t.begin_at("bob", here, 0).await), None);
        fail(&t, "bob", here, 1, 0).await;
        assert_eq!(retry_after(t.begin_at("bob", here, 0).await), Some(60));
        assert_eq!(retry_after(t.begin_at("bob", here, 59_500).await), Some(1));
        // Elsewhere, and other names here, are unaffected.
        assert_eq!(retry_after(t.begin_at("bob", there, 0).await), None);
        assert_eq!(retry_after(t.begin_at("carol", here, 0).await), None);
        // After the lock, the next failure locks twice as long, and so on.
        fail(&t, "bob", here, 1, MIN).await;
        assert_eq!(retry_after(t.begin_at("bob", here, MIN).await), Some(120));
        fail(&t, "bob", here, 1, 3 * MIN).await;
        assert_eq!(retry_after(t.begin_at("bob", here, 3 * MIN).await), Some(240));
        // Quiet for an hour after the lock ends: forgotten, five more tries before a lock.
        let later = 7 * MIN + QUIET.as_millis() as i64 + 1;
        fail(&t, "bob", here, 4, later).await;
        assert_eq!(retry_after(t.begin_at("bob", here, later).await), None);
        // A success clears the count: four more failures do not lock.
        let a = t.begin_at("bob", here, later).await.expect("open");
        t.succeeded(&a).await;
        fail(&t, "bob", here, 4, later).await;
        assert_eq!(retry_after(t.begin_at("bob", here, later).await), None);
    }

    #[tokio::test]
    async fn many_names_from_one_address_lock_the_address_not_the_names() {
        let (_d, t) = throttle().await;
        let (here, there) = (ip("2001:db8:1:2::1"), ip("2001:db8:1:3::1"));
        for i in 0..ADDRESS_LIMIT {
            fail(&t, &format!("user{i}"), here, 1, 0).await;
        }
        assert_eq!(retry_after(t.begin_at("fresh-name", here, 0).await), Some(60));
        // The same /64 is the same client; the next /64 is not.
        assert_eq!(retry_after(t.begin_at("fresh-name", ip("2001:db8:1:2:ffff::9"), 0).await), Some(60));
        assert_eq!(retry_after(t.begin_at("user1", there, 0).await), None);
        // A success from the address does not reopen it.
        let a = t.begin_at("user1", there, 0).await.expect("open");
        t.succeeded(&a).await;
        assert_eq!(retry_after(t.begin_at("user1", here, 0).await), Some(60));
    }

    #[tokio::test]
    async fn locks_are_shared_through_the_database() {
        let (_d, t) = throttle().await;
        let other = Throttle::new(t.meta.clone());
        fail(&t, "bob", ip("203.0.113.5"), PAIR_LIMIT as usize, 0).await;
        // A second gateway (another Throttle on the same database) sees the lock.
        assert_eq!(retry_after(other.begin_at("bob", ip("203.0.113.5"), 1000).await), Some(59));
        assert_eq!(retry_after(other.begin_at("bob", ip("203.0.113.6"), 1000).await), None);
        // Pruning keeps live rows and drops forgotten ones.
        let forget = QUIET.as_millis() as i64;
        assert_eq!(t.meta.throttle_prune(-forget).await.expect("prune"), 0);
        assert_eq!(t.meta.throttle_prune(MIN + 1).await.expect("prune"), 2);
        assert_eq!(retry_after(other.begin_at("bob", ip("203.0.113.5"), 2 * MIN).await), None);
    }

    #[test]
    fn keys_are_bounded_and_unambiguous() {
        let (p, a) = Throttle::keys("bob", ip("198.51.100.1"));
        assert_eq!((p.as_str(), a.as_str()), ("p:198.51.100.1|bob", "a:198.51.100.1"));
        let long = "é".repeat(200);
        let (p, _) = Throttle::keys(&long, None);
        assert!(p.len() <= MAX_NAME_KEY + "p:unknown|".len() && p.starts_with("p:unknown|é"));
    }
}
