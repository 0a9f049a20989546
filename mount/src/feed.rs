//! Follows the gateway's change feed (`GET /api/v1/changes`, long-poll) and forgets what each
//! change makes stale: the listing of the directories involved and the attributes of the
//! entry. While the feed runs, the core trusts its cache until told otherwise; while it
//! doesn't (gateway unreachable, or too old to have the endpoint), attributes expire after a
//! couple of seconds instead.

use std::sync::Arc;
use std::time::Duration;

use crate::core::Vfs;

/// How long one long-poll waits on the server.
const WAIT_SECS: u32 = 25;
/// Pause after a non-empty batch before polling again.
const BATCH_PAUSE: Duration = Duration::from_millis(200);

pub async fn follow(vfs: Arc<Vfs>) {
    let client = vfs.client().clone();
    let mut cursor: Option<String> = None;
    loop {
        match client.changes(cursor.as_deref(), if cursor.is_some() { WAIT_SECS } else { 0 }, None).await {
            Ok(list) => {
                if list.reset {
                    tracing::info!("the change feed was reset; forgetting the cached namespace");
                    vfs.invalidate_all();
                }
                for c in &list.changes {
                    tracing::debug!(seq = c.seq, op = c.op.as_str(), path = %c.path, "change");
                    vfs.apply_change(c.op, &c.path, c.from.as_deref(), c.node_id);
                }
                cursor = Some(list.cursor);
                vfs.set_feed_ok(true);
                if !list.changes.is_empty() {
                    // A burst of changes (a copy of many files) then comes back in a few
                    // batches instead of one poll per change.
                    tokio::time::sleep(BATCH_PAUSE).await;
                }
            }
            Err(e) => {
                vfs.set_feed_ok(false);
                // An older gateway without the feed: check again now and then.
                let pause = if e.is_not_found() { 60 } else { 2 };
                tracing::debug!(error = %e, "change feed unavailable; attributes expire after 2 s meanwhile");
                tokio::time::sleep(Duration::from_secs(pause)).await;
            }
        }
    }
}
