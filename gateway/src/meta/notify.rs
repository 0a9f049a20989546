//! Cross-node invalidation of the hot metadata (`hot.rs`) when several gateways share one
//! PostgreSQL database: every change that invalidates something locally is also published
//! with `pg_notify`, and each gateway's listener applies what the others publish. A change
//! made through one gateway is therefore seen by every other one as soon as the notification
//! arrives (milliseconds), not after a cache entry expires.
//!
//! Notifications sent while a listener is not connected are lost for it, and a link that dies
//! without a reset (a firewall dropping state, a silent network) looks like a quiet channel.
//! So the hot cache is trusted only while the channel is known to work:
//! - a node starts distrusted and is trusted once it LISTENs; every (re)subscription starts
//!   from an empty cache, so nothing read before it can be served (that is the catch-up: what
//!   changed while the node was deaf is read from the database on the next lookup);
//! - every [`HEARTBEAT`] the node notifies itself through its connection pool; when its own
//!   heartbeat has not come back over the listening connection for [`SILENCE`], or the
//!   connection reports an error or closes, the node distrusts its cache (every lookup goes to
//!   the database), ends that connection, and subscribes again on a new one.
//!
//! sqlx's `PgListener` would reconnect by itself and hide the gap, so it runs with eager
//! reconnection off and a pool of its own per subscription. SQLite is single-node: nothing is
//! published or listened to.

use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};

use super::{Meta, MetaResult};

const CHANNEL: &str = "nimbus_hot";
/// How often a node notifies itself to prove the channel still carries notifications.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// A channel that has not carried the node's own heartbeat for this long is treated as dead.
const SILENCE: Duration = Duration::from_secs(3);
/// Bound on connecting and subscribing, and on one heartbeat.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait between two subscription attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

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

/// A message on the channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Message {
    Invalidate(Invalidate),
    /// The heartbeat of the node with this id.
    Heartbeat(i64),
}

impl Invalidate {
    fn encode(self) -> String {
        match self {
            Invalidate::Space(id) => format!("s:{id}"),
            Invalidate::Token(id) => format!("t:{id}"),
            Invalidate::User(id) => format!("u:{id}"),
        }
    }
}

impl Message {
    fn decode(s: &str) -> Option<Self> {
        let (kind, id) = s.split_once(':')?;
        let id: i64 = id.parse().ok()?;
        match kind {
            "s" => Some(Message::Invalidate(Invalidate::Space(id))),
            "t" => Some(Message::Invalidate(Invalidate::Token(id))),
            "u" => Some(Message::Invalidate(Invalidate::User(id))),
            "h" => Some(Message::Heartbeat(id)),
            _ => None,
        }
    }
}

/// One subscription: the listening connection and its server process, to end it for sure.
struct Subscription {
    listener: PgListener,
    pid: i32,
    started: String,
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
        if let super::engine::Db::Postgres(p) = &self.pool
            && let Err(e) = sqlx::query("SELECT pg_notify($1, $2)").bind(CHANNEL).bind(what.encode()).execute(p).await
        {
            tracing::warn!(error = %e, "could not tell other gateways about a change");
        }
    }

    /// Starts applying the other gateways' invalidations (PostgreSQL only; a no-op on SQLite),
    /// on a connection to `listen_url` (default: the database's own options). Runs until the
    /// process ends, subscribing again after every loss; the hot cache is used only while
    /// subscribed (see the module comment). Fails only on an unparsable `listen_url`.
    pub fn listen_for_other_gateways(&self, listen_url: Option<&str>) -> MetaResult<()> {
        let super::engine::Db::Postgres(pool) = &self.pool else { return Ok(()) };
        let options: PgConnectOptions = match listen_url {
            Some(url) => url.parse()?,
            None => (*pool.connect_options()).clone(),
        };
        // Tells this node's heartbeats from the others'.
        let node = (uuid::Uuid::new_v4().as_u64_pair().0 >> 1) as i64;
        let (heartbeat_pool, meta) = (pool.clone(), self.clone());
        tokio::spawn(async move {
            let payload = format!("h:{node}");
            let mut tick = tokio::time::interval(HEARTBEAT);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let notify = sqlx::query("SELECT pg_notify($1, $2)").bind(CHANNEL).bind(&payload);
                // A heartbeat that cannot be sent is not echoed: the listener then notices.
                if let Ok(Err(e)) = tokio::time::timeout(CONNECT_TIMEOUT, notify.execute(&heartbeat_pool)).await {
                    tracing::debug!(error = %e, "cannot send the invalidation channel's heartbeat");
                }
            }
        });
        tokio::spawn(async move {
            let mut delay = Duration::from_millis(200);
            loop {
                match subscribe(&options).await {
                    Ok(mut sub) => {
                        // From here on every change arrives; whatever was cached or looked up
                        // before is dropped or refused.
                        meta.hot.trust();
                        tracing::info!("listening for the other gateways' invalidations");
                        delay = Duration::from_millis(200);
                        let why = meta.follow(&mut sub.listener, node).await;
                        meta.hot.distrust();
                        tracing::warn!(why = %why, "lost the invalidation channel; hot metadata off until it is back");
                        meta.end(sub);
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot LISTEN for invalidations"),
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_BACKOFF);
            }
        });
        Ok(())
    }

    /// Applies notifications until the channel fails or goes silent; returns why it stopped.
    async fn follow(&self, listener: &mut PgListener, node: i64) -> String {
        let mut heard = Instant::now();
        let mut check = tokio::time::interval(SILENCE / 6);
        loop {
            tokio::select! {
                // Cancel-safe: a message is consumed only once it is complete.
                r = listener.try_recv() => match r {
                    Ok(Some(n)) => match Message::decode(n.payload()) {
                        Some(Message::Invalidate(what)) => self.apply(what),
                        Some(Message::Heartbeat(id)) => {
                            if id == node {
                                heard = Instant::now();
                            }
                        }
                        None => tracing::debug!(payload = n.payload(), "unknown invalidation"),
                    },
                    Ok(None) => return "the listening connection closed".into(),
                    Err(e) => return format!("the listening connection failed: {e}"),
                },
                _ = check.tick() => {
                    if heard.elapsed() > SILENCE {
                        return format!("no heartbeat came back for {} ms", heard.elapsed().as_millis());
                    }
                }
            }
        }
    }

    /// Ends a subscription that failed. A silent link may still have its server process
    /// listening (and notifications queueing for it): that process is ended through the pool,
    /// picked by pid and start time so a reused pid is never hit. The connection itself is
    /// dropped; sqlx then closes it in the background (on a dead link, once the OS gives up).
    fn end(&self, sub: Subscription) {
        let Subscription { listener, pid, started } = sub;
        drop(listener);
        let super::engine::Db::Postgres(pool) = &self.pool else { return };
        let pool = pool.clone();
        tokio::spawn(async move {
            let kill = sqlx::query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND backend_start::text = $2",
            )
            .bind(pid)
            .bind(&started);
            if let Ok(Err(e)) = tokio::time::timeout(CONNECT_TIMEOUT, kill.execute(&pool)).await {
                tracing::debug!(error = %e, "cannot end the old listening connection's server process");
            }
        });
    }
}

/// Connects and LISTENs, within [`CONNECT_TIMEOUT`].
async fn subscribe(options: &PgConnectOptions) -> Result<Subscription, String> {
    // A pool of one per subscription: a connection given up on cannot block the next one.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(CONNECT_TIMEOUT)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_lazy_with(options.clone());
    let subscribing = async {
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.eager_reconnect(false);
        listener.ignore_pool_close_event(true);
        let (pid, started): (i32, String) =
            sqlx::query_as("SELECT pid, backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid()")
                .fetch_one(&mut listener)
                .await?;
        listener.listen(CHANNEL).await?;
        Ok::<_, sqlx::Error>(Subscription { listener, pid, started })
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, subscribing).await {
        Ok(Ok(sub)) => Ok(sub),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip() {
        for w in [Invalidate::Space(7), Invalidate::Token(-1), Invalidate::User(123456789)] {
            assert_eq!(Message::decode(&w.encode()), Some(Message::Invalidate(w)));
        }
        assert_eq!(Message::decode("h:42"), Some(Message::Heartbeat(42)));
        assert_eq!(Message::decode("x:1"), None);
        assert_eq!(Message::decode("s:abc"), None);
        assert_eq!(Message::decode(""), None);
    }
}
