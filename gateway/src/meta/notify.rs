//! Cross-node invalidation of the hot metadata (`hot.rs`) when several gateways share one
//! PostgreSQL database: every change that invalidates something locally is also published
//! with `pg_notify`, and each gateway's listener applies what the others publish. A change
//! made through one gateway is therefore seen by every other one as soon as the notification
//! arrives (milliseconds), not after a cache entry expires.
//!
//! While the listener is disconnected, notifications may be missed, so the hot cache is
//! switched off (every lookup goes to the database) until it is listening again and has
//! dropped everything it held. SQLite is single-node: nothing is published or listened to.

use std::time::Duration;

use sqlx::postgres::PgListener;

use super::{Meta, Pool};

const CHANNEL: &str = "nimbus_hot";

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Invalidate {
    /// Any namespace change in a space (cached manifests of it are stale; feed readers wake).
    Space(i64),
    /// A token was revoked.
    Token(i64),
    /// A user changed (role, disabled, deleted) or all their tokens were revoked.
    User(i64),
}

impl Invalidate {
    fn encode(self) -> String {
        match self {
            Invalidate::Space(id) => format!("s:{id}"),
            Invalidate::Token(id) => format!("t:{id}"),
            Invalidate::User(id) => format!("u:{id}"),
        }
    }

    fn decode(s: &str) -> Option<Self> {
        let (kind, id) = s.split_once(':')?;
        let id: i64 = id.parse().ok()?;
        match kind {
            "s" => Some(Invalidate::Space(id)),
            "t" => Some(Invalidate::Token(id)),
            "u" => Some(Invalidate::User(id)),
            _ => None,
        }
    }
}

impl Meta {
    fn apply(&self, what: Invalidate) {
        match what {
            Invalidate::Space(id) => self.hot.space_changed(id),
            Invalidate::Token(id) => self.hot.forget_token(id),
            Invalidate::User(id) => self.hot.forget_user(id),
        }
    }

    /// Applies an invalidation here and publishes it to the other gateways. Called after the
    /// change committed; a failed publish is logged (the others' entries still expire).
    pub(crate) async fn invalidate(&self, what: Invalidate) {
        self.apply(what);
        if let Pool::Postgres(p) = &self.pool
            && let Err(e) = sqlx::query("SELECT pg_notify($1, $2)").bind(CHANNEL).bind(what.encode()).execute(p).await
        {
            tracing::warn!(error = %e, "could not tell other gateways about a change");
        }
    }

    /// Starts applying the other gateways' invalidations (PostgreSQL only; a no-op on SQLite).
    /// Runs until the process ends, reconnecting after errors.
    pub fn listen_for_other_gateways(&self) {
        let Pool::Postgres(pool) = &self.pool else { return };
        let (pool, meta) = (pool.clone(), self.clone());
        tokio::spawn(async move {
            let mut delay = Duration::from_millis(200);
            loop {
                match PgListener::connect_with(&pool).await {
                    Ok(mut listener) => match listener.listen(CHANNEL).await {
                        Ok(()) => {
                            // Whatever happened while not listening is unknown: start afresh.
                            meta.hot.clear();
                            meta.hot.set_trusted(true);
                            delay = Duration::from_millis(200);
                            loop {
                                match listener.recv().await {
                                    Ok(n) => match Invalidate::decode(n.payload()) {
                                        Some(what) => meta.apply(what),
                                        None => tracing::debug!(payload = n.payload(), "unknown invalidation"),
                                    },
                                    Err(e) => {
                                        tracing::warn!(error = %e, "lost the invalidation channel; hot cache off until it is back");
                                        break;
                                    }
                                }
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "cannot LISTEN for invalidations"),
                    },
                    Err(e) => tracing::warn!(error = %e, "cannot connect the invalidation listener"),
                }
                meta.hot.set_trusted(false);
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(10));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip() {
        for w in [Invalidate::Space(7), Invalidate::Token(-1), Invalidate::User(123456789)] {
            assert_eq!(Invalidate::decode(&w.encode()), Some(w));
        }
        assert_eq!(Invalidate::decode("x:1"), None);
        assert_eq!(Invalidate::decode("s:abc"), None);
        assert_eq!(Invalidate::decode(""), None);
    }
}
