//! The quota check of every write: a charge that would pass the quota first makes room by
//! expiring history ([`super::retention::make_room`]), and is refused only when current data
//! (and uploads still pending) alone would pass it (see [`super::usage`] for what counts).

use super::engine::{TxConn, sql};
use super::retention::make_room;
use super::usage::{Limit, Usage, apply_usage};
use super::{MetaError, MetaResult};

/// Applies `delta` to the space's usage under `limit`, in a transaction that holds the space
/// lock; see [`Limit`]. With a quota, room is made first if needed and any excess left (an
/// upload's allowance) is trimmed afterwards. Fails with [`MetaError::QuotaExceeded`] when
/// expiring every older version and trash item would not make room. Returns the bytes expired.
pub(crate) async fn charge(c: &mut impl TxConn, space: i64, delta: Usage, limit: Limit) -> MetaResult<i64> {
    let total = delta.total();
    let (check, allowance) = match limit {
        Limit::Free => (false, 0),
        Limit::Quota { allowance } => (true, allowance.max(0)),
    };
    let mut expired = 0;
    if !apply_usage(c, space, delta, !check, allowance).await? {
        let (quota, used): (Option<i64>, i64) = sql("SELECT quota_bytes, used_bytes FROM users WHERE id = $1")
            .bind(space)
            .fetch_optional(c)
            .await?
            .ok_or(MetaError::NotFound)?;
        let quota = quota.unwrap_or(i64::MAX);
        let excess = used.saturating_add(total).saturating_sub(quota.saturating_add(allowance));
        expired = make_room(c, space, excess).await?;
        if expired < excess {
            let (current, pending): (i64, i64) =
                sql("SELECT current_bytes, pending_bytes FROM users WHERE id = $1").bind(space).fetch_one(c).await?;
            let left = (quota.saturating_add(allowance) - current - pending).max(0);
            return Err(MetaError::QuotaExceeded(format!(
                "quota exceeded: this needs {total} more bytes but only {left} of your {quota} bytes are left \
                 once older versions and the trash are freed; delete files, or ask an administrator for more space"
            )));
        }
        apply_usage(c, space, delta, true, allowance).await?;
    }
    if check {
        // An upload's allowance may leave the space above its quota; the history that made
        // that necessary (the replaced version) can go now.
        let (quota, used): (Option<i64>, i64) =
            sql("SELECT quota_bytes, used_bytes FROM users WHERE id = $1").bind(space).fetch_one(c).await?;
        if let Some(q) = quota.filter(|q| used > *q) {
            expired += make_room(c, space, used - q).await?;
        }
    }
    Ok(expired)
}
