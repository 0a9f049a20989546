//! Follows the gateway's change feed (`GET /api/v1/changes`, long-poll) and forgets what each
//! change makes stale: the listing of the directories involved and the attributes of the
//! entry. While the feed runs, the core trusts its cache until told otherwise; while it
//! doesn't (gateway unreachable, or too old to have the endpoint), attributes expire after a
//! couple of seconds instead.

use std::sync::Arc;
use std::time::Duration;

use super::remote::RemoteError;
use super::vfs::Vfs;

/// How long one long-poll waits on the server.
const WAIT_SECS: u32 = 25;
/// Pause after a non-empty batch before polling again.
const BATCH_PAUSE: Duration = Duration::from_millis(200);

/// Where a follower of the feed is: the cursor of the last batch applied.
#[derive(Debug, Default, Clone)]
pub struct FeedCursor(Option<String>);

impl Vfs {
    /// One poll of the change feed: asks for the changes after `cursor` (long-polling up to
    /// `wait_secs` once it has a cursor), applies them, and moves the cursor on. Returns how
    /// many changes were applied. Marks the feed working or not, which decides how long the
    /// core trusts its cached attributes.
    pub async fn poll_changes(&self, cursor: &mut FeedCursor, wait_secs: u32) -> Result<usize, RemoteError> {
        let wait = if cursor.0.is_some() { wait_secs } else { 0 };
        match self.remote().changes(cursor.0.as_deref(), wait, None).await {
            Ok(list) => {
                if list.reset {
                    tracing::info!("the change feed was reset; forgetting the cached namespace");
                    self.invalidate_all();
                }
                for c in &list.changes {
                    tracing::debug!(seq = c.seq, op = c.op.as_str(), path = %c.path, "change");
                    self.apply_change(c.op, &c.path, c.from.as_deref(), c.node_id);
                }
                cursor.0 = Some(list.cursor);
                self.set_feed_ok(true);
                Ok(list.changes.len())
            }
            Err(e) => {
                self.set_feed_ok(false);
                Err(e)
            }
        }
    }
}

/// Follows the feed for as long as the mount runs.
pub async fn follow(vfs: Arc<Vfs>) {
    let mut cursor = FeedCursor::default();
    loop {
        match vfs.poll_changes(&mut cursor, WAIT_SECS).await {
            // A burst of changes (a copy of many files) then comes back in a few batches
            // instead of one poll per change.
            Ok(n) if n > 0 => tokio::time::sleep(BATCH_PAUSE).await,
            Ok(_) => {}
            Err(e) => {
                // An older gateway without the feed: check again now and then.
                let pause = if e.is_not_found() { 60 } else { 2 };
                tracing::debug!(error = %e, "change feed unavailable; attributes expire after 2 s meanwhile");
                tokio::time::sleep(Duration::from_secs(pause)).await;
            }
        }
    }
}
