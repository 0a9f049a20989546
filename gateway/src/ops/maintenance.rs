//! The gateway's maintenance worker: every `--maintenance-interval` it does what
//! `nimbus-gateway gc` does (retention of older versions and trash, then garbage collection of
//! unreferenced blocks past the grace period), so storage stays bounded without an external
//! schedule. Several gateways on one database may all run it: every step takes the space lock
//! and is idempotent.

use std::time::Duration;

use crate::blocks::DynStore;
use crate::meta::Meta;
use crate::ops::gc::{self, GcOptions};

/// The first run waits at most this long after start (a restart loop must not skip it).
const FIRST_RUN_MAX_DELAY: Duration = Duration::from_secs(60);

/// Starts the worker (nothing when `interval` is zero). It stops with the runtime.
pub fn spawn(meta: Meta, store: DynStore, opts: GcOptions, interval: Duration) {
    if interval.is_zero() {
        tracing::info!("maintenance worker off (--maintenance-interval 0): run `nimbus-gateway gc` on a schedule");
        return;
    }
    tokio::spawn(async move {
        let mut wait = interval.min(FIRST_RUN_MAX_DELAY);
        loop {
            tokio::time::sleep(wait).await;
            wait = interval;
            match gc::run(&meta, &store, &opts).await {
                Ok(r) if !r.errors.is_empty() => tracing::warn!(errors = ?r.errors, "maintenance finished with errors"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "maintenance failed; retrying next interval"),
            }
        }
    });
}
