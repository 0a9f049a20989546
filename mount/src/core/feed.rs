//! Follows the gateway's change feed (`GET /api/v1/changes`, long-poll) and forgets what each
//! change makes stale: the listing of the directories involved and the attributes of the
//! entry. While the feed runs, the core trusts its cache until told otherwise; while it
//! doesn't (gateway unreachable, or too old to have the endpoint), attributes expire after a
//! couple of seconds instead.

use std::sync::Arc;
use std::time::Duration;

use nimbus_proto::wire::ChangeOp;

use super::remote::RemoteError;
use super::tree::Tree;
use super::types::Ino;
use super::vfs::{Vfs, lock};

/// How long one long-poll waits on the server.
const WAIT_SECS: u32 = 25;
/// Pause after a non-empty batch before polling again.
const BATCH_PAUSE: Duration = Duration::from_millis(200);

/// Where a follower of the feed is: the cursor of the last batch applied.
#[derive(Debug, Default, Clone)]
pub struct FeedCursor(Option<String>);

impl Vfs {
    /// Applies one change from the gateway's feed: forget what it makes stale. Changes this
    /// mount already reflects (its own, echoed back) cost nothing: an entry that is where the
    /// change says, with that node id, keeps the directory listing valid.
    pub fn apply_change(&self, op: ChangeOp, path: &str, from: Option<&str>, node_id: Option<i64>) {
        let mut t = lock(&self.tree);
        let split = |p: &str| -> (String, String) {
            match p.rfind('/') {
                Some(i) => (p[..i].to_string(), p[i + 1..].to_string()),
                None => (String::new(), p.to_string()),
            }
        };
        let (parent_path, name) = split(path);
        let parent = t.find(&parent_path);
        let here = parent.and_then(|p| t.child(p, &name));
        let same = |t: &Tree, ino: Option<Ino>| {
            ino.and_then(|i| t.get(i).ok()).is_some_and(|n| n.remote_id().is_some() && n.remote_id() == node_id)
        };
        match op {
            ChangeOp::Update => {
                // Membership unchanged: only the entry's attributes and content are stale.
                if let Some(c) = here
                    && let Ok(n) = t.get_mut(c)
                {
                    n.forget_attrs();
                }
            }
            ChangeOp::Create | ChangeOp::Mkdir | ChangeOp::Restore | ChangeOp::Move => {
                // Our own create whose commit answer hasn't come back yet: the name is known to
                // exist here already, and forgetting the listing would send every following
                // lookup in the directory to the gateway. (Someone else's create of the same
                // name makes our commit conflict, which invalidates the directory then.)
                let own_pending = op != ChangeOp::Move
                    && here.and_then(|c| t.get(c).ok()).is_some_and(|n| n.remote_id().is_none() && !n.is_unlinked());
                if !own_pending
                    && !same(&t, here)
                    && let Some(p) = parent
                {
                    t.invalidate_dir(p);
                    // Another device changed the folder's entries: its time moves, as for
                    // the changes made here.
                    t.entries_changed(&[p]);
                    if let Some(c) = here
                        && let Ok(n) = t.get_mut(c)
                    {
                        n.forget_attrs();
                    }
                }
                if let (ChangeOp::Move, Some(from)) = (op, from) {
                    let (fp, fname) = split(from);
                    if let Some(fparent) = t.find(&fp)
                        && let Some(c) = t.child(fparent, &fname)
                        && same(&t, Some(c))
                    {
                        // Still at the old place here: someone else moved it, or the feed is
                        // reporting our own move of a node we have since moved back. Only the
                        // gateway can tell, so ask it (the next lookup or listing) rather than
                        // take the node out of its directory.
                        t.invalidate_dir(fparent);
                        t.entries_changed(&[fparent]);
                        if let Ok(n) = t.get_mut(c) {
                            n.forget_attrs();
                        }
                    }
                }
            }
            ChangeOp::Delete | ChangeOp::Purge => {
                if let Some(c) = here
                    && t.get(c)
                        .is_ok_and(|n| n.remote_id().is_some() && (node_id.is_none() || n.remote_id() == node_id))
                {
                    if t.get(c).is_ok_and(|n| n.is_staged()) {
                        // Changes made here are not on the server yet: deleting elsewhere must
                        // not throw them away. The node stays, as after another device's move,
                        // so its commit finds the file gone and saves this device's content as
                        // a conflict copy next to it (a refused change stays a problem until
                        // then). Its staging copy and journal record stay with it.
                        if let Ok(n) = t.get_mut(c) {
                            n.fetched = None;
                        }
                    } else {
                        t.orphan(c);
                    }
                    if let Some(p) = parent {
                        t.invalidate_dir(p);
                        t.entries_changed(&[p]);
                    }
                }
            }
        }
    }

    /// Forgets everything cached about the namespace (the feed was reset).
    pub fn invalidate_all(&self) {
        let mut t = lock(&self.tree);
        let inos: Vec<Ino> = t.nodes.keys().copied().collect();
        for i in inos {
            t.invalidate_dir(i);
            if let Ok(n) = t.get_mut(i) {
                n.forget_attrs();
            }
        }
    }

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
