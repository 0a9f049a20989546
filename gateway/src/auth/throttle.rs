//! Login throttling, per username and per client address. After `USER_LIMIT` failures for a
//! name (or `IP_LIMIT` from an address) inside the window, further attempts are refused for a
//! lockout that doubles with each further failure (60 s, 120 s, ... up to an hour), even with
//! the right password: a guesser learns nothing during a lockout. A success clears the name.
//!
//! In memory per gateway process; bounded by pruning stale entries.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(15 * 60);
const USER_LIMIT: u32 = 5;
const IP_LIMIT: u32 = 20;
const BASE_LOCKOUT: Duration = Duration::from_secs(60);
const MAX_LOCKOUT: Duration = Duration::from_secs(3600);
const MAX_ENTRIES: usize = 100_000;

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    first: Instant,
    locked_until: Option<Instant>,
}

#[derive(Default)]
pub struct Throttle {
    entries: Mutex<HashMap<String, Failures>>,
}

impl Throttle {
    fn keys(username_key: &str, ip: Option<IpAddr>) -> [(Option<String>, u32); 2] {
        [(Some(format!("u:{username_key}")), USER_LIMIT), (ip.map(|ip| format!("ip:{ip}")), IP_LIMIT)]
    }

    /// Seconds until the next attempt is allowed, if locked out.
    pub fn check(&self, username_key: &str, ip: Option<IpAddr>) -> Option<u64> {
        let now = Instant::now();
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        Self::keys(username_key, ip)
            .iter()
            .filter_map(|(k, _)| k.as_ref().and_then(|k| entries.get(k)))
            .filter_map(|f| f.locked_until)
            .filter(|until| *until > now)
            .map(|until| (until - now).as_secs().max(1))
            .max()
    }

    pub fn failure(&self, username_key: &str, ip: Option<IpAddr>) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, f| now.duration_since(f.first) < WINDOW || f.locked_until.is_some_and(|u| u > now));
        }
        for (key, limit) in Self::keys(username_key, ip) {
            let Some(key) = key else { continue };
            let f = entries.entry(key).or_insert(Failures { count: 0, first: now, locked_until: None });
            if now.duration_since(f.first) > WINDOW && f.locked_until.is_none_or(|u| u <= now) {
                *f = Failures { count: 0, first: now, locked_until: None };
            }
            f.count += 1;
            if f.count >= limit {
                let doublings = (f.count - limit).min(6);
                let lockout = (BASE_LOCKOUT * 2u32.pow(doublings)).min(MAX_LOCKOUT);
                f.locked_until = Some(now + lockout);
            }
        }
    }

    pub fn success(&self, username_key: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.remove(&format!("u:{username_key}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_after_limit_and_success_clears() {
        let t = Throttle::default();
        let ip: IpAddr = [127, 0, 0, 1].into();
        for _ in 0..USER_LIMIT - 1 {
            t.failure("bob", Some(ip));
            assert!(t.check("bob", Some(ip)).is_none());
        }
        t.failure("bob", Some(ip));
        assert!(t.check("bob", Some(ip)).is_some_and(|s| s >= 59));
        assert!(t.check("carol", None).is_none(), "other names are unaffected");
        t.success("bob");
        assert!(t.check("bob", None).is_none());
    }

    #[test]
    fn many_names_from_one_address_lock_the_address() {
        let t = Throttle::default();
        let ip: IpAddr = [10, 0, 0, 9].into();
        for i in 0..IP_LIMIT {
            t.failure(&format!("user{i}"), Some(ip));
        }
        assert!(t.check("fresh-name", Some(ip)).is_some());
        assert!(t.check("fresh-name", None).is_none());
    }
}
