//! Follows the gateway's change feed (placeholder until the endpoint lands: the core falls
//! back to short attribute lifetimes while `feed_ok` is false).

use std::sync::Arc;

use crate::core::Vfs;

pub async fn follow(vfs: Arc<Vfs>) {
    vfs.set_feed_ok(false);
}
