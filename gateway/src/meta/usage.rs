//! What each space holds, and what it may hold.
//!
//! Every byte a space keeps in the store counts against its quota: the current versions of its
//! live files, their older versions, everything in its trash, and blocks uploaded (or announced
//! present) that no version references yet. `users.used_bytes` is that total and the four parts
//! are kept beside it (`current_bytes`, `versions_bytes`, `trash_bytes`, `pending_bytes`),
//! changed in the same transaction as the rows they count, so they never disagree with a
//! committed state. A version counts at its full size, as the user sees it; a block shared by
//! several versions counts with each, so usage is never less than what the store keeps for the
//! space (blocks nobody references any more are garbage: free at once, reclaimed by `gc`).
//!
//! The quota applies to the total. A write that would pass it first makes room by expiring the
//! space's oldest older versions and trash items ([`super::retention`]); only when current data
//! (and uploads still pending) alone would pass it is the write refused. Every charge happens
//! under the space lock, so concurrent uploads through any door cannot together pass it.
//!
//! [`Meta::recount_usage`] recomputes the parts from the tables: at start for spaces whose parts
//! were never counted (rows from before this accounting), and from `gc` to repair any drift.

use super::SpaceId;
use super::engine::{Conn, scalar, sql};
use super::{Meta, MetaError, MetaResult};

/// Bytes a space holds, by kind (or a change of them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub current: i64,
    pub versions: i64,
    pub trash: i64,
    pub pending: i64,
}

impl Usage {
    pub fn total(&self) -> i64 {
        self.current + self.versions + self.trash + self.pending
    }

    pub fn current(n: i64) -> Usage {
        Usage { current: n, ..Default::default() }
    }

    pub fn pending(n: i64) -> Usage {
        Usage { pending: n, ..Default::default() }
    }
}

/// How a change of usage meets the quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Applied as it is: moves between parts, frees, or bytes already stored.
    Free,
    /// A write: the total may not pass the quota plus `allowance` (the size of the file an
    /// upload replaces, whose current version becomes an older version, expirable, once the
    /// upload commits). Room is made by expiring history first.
    Quota { allowance: i64 },
}

impl Limit {
    pub const WRITE: Limit = Limit::Quota { allowance: 0 };
}

#[derive(Debug, Clone, Default)]
pub struct UsageTotals {
    pub users: i64,
    pub active_users: i64,
    pub total_bytes: i64,
    pub files: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UsageRow {
    pub id: i64,
    pub username: String,
    pub used_bytes: i64,
    pub quota_bytes: Option<i64>,
}

/// The live nodes of a space: the root and every node reachable from it through children that
/// are not in the trash.
pub(crate) const LIVE_NODES: &str = "WITH RECURSIVE live(id) AS (\
        SELECT id FROM nodes WHERE space_id = $1 AND parent_id IS NULL \
        UNION ALL SELECT n.id FROM nodes n JOIN live l ON n.parent_id = l.id WHERE n.trashed_at IS NULL)";

/// Current and older version bytes of a set of nodes named `live` by a preceding CTE.
const VERSION_BYTES_OF_LIVE: &str = " SELECT \
        CAST(COALESCE(SUM(CASE WHEN v.id = n.version_id THEN v.size ELSE 0 END), 0) AS BIGINT), \
        CAST(COALESCE(SUM(CASE WHEN v.id = n.version_id THEN 0 ELSE v.size END), 0) AS BIGINT) \
     FROM live l JOIN nodes n ON n.id = l.id JOIN versions v ON v.node_id = n.id";

/// The subtree of the node `$1` as it goes to (or sits in) the trash: the node and what is
/// reachable below it, leaving out items trashed on their own before (they count as theirs).
pub(crate) const TRASH_SUBTREE: &str = "WITH RECURSIVE live(id) AS (\
        SELECT id FROM nodes WHERE id = $1 \
        UNION ALL SELECT n.id FROM nodes n JOIN live l ON n.parent_id = l.id WHERE n.trashed_at IS NULL)";

/// Is a block referenced by a version of its space? (`b` is the blocks row.)
pub(crate) const REFERENCED: &str = "EXISTS (SELECT 1 FROM version_blocks vb JOIN versions v ON v.id = vb.version_id \
     WHERE vb.hash = b.hash AND v.space_id = b.space_id)";

/// Adds `delta` to the usage row, unless (without `unconditional`) that would pass the quota
/// plus `allowance`. Returns whether it was applied.
pub(crate) async fn apply_usage(
    c: &mut impl Conn,
    space: i64,
    delta: Usage,
    unconditional: bool,
    allowance: i64,
) -> MetaResult<bool> {
    let n = sql("UPDATE users SET current_bytes = current_bytes + $2, versions_bytes = versions_bytes + $3, \
         trash_bytes = trash_bytes + $4, pending_bytes = pending_bytes + $5, used_bytes = used_bytes + $6 \
         WHERE id = $1 AND ($7 OR $6 <= 0 OR quota_bytes IS NULL OR used_bytes + $6 <= quota_bytes + $8)")
    .bind(space)
    .bind(delta.current)
    .bind(delta.versions)
    .bind(delta.trash)
    .bind(delta.pending)
    .bind(delta.total())
    .bind(unconditional)
    .bind(allowance)
    .execute(c)
    .await?;
    Ok(n > 0)
}

/// Current and older version bytes of the subtree that goes to the trash with node `node`.
pub(crate) async fn trash_subtree_usage(c: &mut impl Conn, node: i64) -> MetaResult<Usage> {
    let text = format!("{TRASH_SUBTREE}{VERSION_BYTES_OF_LIVE}");
    let (current, versions): (i64, i64) = sql(sqlx::AssertSqlSafe(text)).bind(node).fetch_one(c).await?;
    Ok(Usage { current, versions, ..Default::default() })
}

impl Meta {
    /// The space's usage by kind, as counted.
    pub async fn usage(&self, space: SpaceId) -> MetaResult<Usage> {
        let space = space.get();
        let row: Option<(i64, i64, i64, i64)> = {
            let mut db = self.db();
            sql("SELECT current_bytes, versions_bytes, trash_bytes, pending_bytes FROM users WHERE id = $1")
                .bind(space)
                .fetch_optional(&mut db)
                .await?
        };
        let (current, versions, trash, pending) = row.ok_or(MetaError::NotFound)?;
        Ok(Usage { current, versions, trash, pending })
    }

    /// Recomputes the space's usage from its nodes, versions, trash and blocks, under the space
    /// lock, and stores it. Also clears the pending mark of blocks a version references (a
    /// commit does that as it goes; this repairs what a crash between two steps could leave).
    /// Returns (what was counted before, what is true).
    pub async fn recount_usage(&self, space: SpaceId) -> MetaResult<(Usage, Usage)> {
        let space = space.get();
        let live = format!("{LIVE_NODES}{VERSION_BYTES_OF_LIVE}");
        let subtree = format!("{TRASH_SUBTREE}{VERSION_BYTES_OF_LIVE}");
        let unpend =
            format!("UPDATE blocks AS b SET pending = FALSE WHERE b.space_id = $1 AND b.pending AND {REFERENCED}");
        {
            let mut tx = self.begin_space(space).await?;
            let before: Option<(i64, i64, i64, i64)> =
                sql("SELECT current_bytes, versions_bytes, trash_bytes, pending_bytes FROM users WHERE id = $1")
                    .bind(space)
                    .fetch_optional(&mut tx)
                    .await?;
            let (c, v, t, pe) = before.ok_or(MetaError::NotFound)?;
            let before = Usage { current: c, versions: v, trash: t, pending: pe };
            let (current, versions): (i64, i64) =
                sql(sqlx::AssertSqlSafe(live.clone())).bind(space).fetch_one(&mut tx).await?;
            let items: Vec<(i64, i64)> =
                sql("SELECT id, node_id FROM trash WHERE space_id = $1").bind(space).fetch_all(&mut tx).await?;
            let mut trash = 0;
            for (id, node) in items {
                let (ic, iv): (i64, i64) =
                    sql(sqlx::AssertSqlSafe(subtree.clone())).bind(node).fetch_one(&mut tx).await?;
                sql("UPDATE trash SET current_bytes = $2, versions_bytes = $3 WHERE id = $1")
                    .bind(id)
                    .bind(ic)
                    .bind(iv)
                    .execute(&mut tx)
                    .await?;
                trash += ic + iv;
            }
            sql(sqlx::AssertSqlSafe(unpend.clone())).bind(space).execute(&mut tx).await?;
            let pending: i64 =
                scalar("SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM blocks WHERE space_id = $1 AND pending")
                    .bind(space)
                    .fetch_one(&mut tx)
                    .await?;
            let after = Usage { current, versions, trash, pending };
            sql("UPDATE users SET current_bytes = $2, versions_bytes = $3, trash_bytes = $4, pending_bytes = $5, \
                 used_bytes = $6, usage_counted = TRUE WHERE id = $1")
            .bind(space)
            .bind(current)
            .bind(versions)
            .bind(trash)
            .bind(pending)
            .bind(after.total())
            .execute(&mut tx)
            .await?;
            tx.commit().await?;
            if before != after {
                tracing::info!(space, ?before, ?after, "usage recounted");
            }
            Ok((before, after))
        }
    }

    /// Spaces whose usage parts were never counted (users from before usage by kind existed).
    pub async fn uncounted_spaces(&self) -> MetaResult<Vec<SpaceId>> {
        let ids: Vec<i64> = {
            let mut db = self.db();
            scalar("SELECT id FROM users WHERE usage_counted = FALSE ORDER BY id").fetch_all(&mut db).await?
        };
        Ok(ids.into_iter().map(SpaceId::stored).collect())
    }

    /// Every space's id.
    pub async fn space_ids(&self) -> MetaResult<Vec<SpaceId>> {
        let ids: Vec<i64> = {
            let mut db = self.db();
            scalar("SELECT id FROM users ORDER BY id").fetch_all(&mut db).await?
        };
        Ok(ids.into_iter().map(SpaceId::stored).collect())
    }

    pub async fn usage_totals(&self) -> MetaResult<UsageTotals> {
        // CASTs: PostgreSQL's SUM over BIGINT is NUMERIC.
        let (users, active_users, total_bytes): (i64, i64, i64) = {
            let mut db = self.db();
            sql("SELECT COUNT(*), CAST(COALESCE(SUM(CASE WHEN disabled THEN 0 ELSE 1 END), 0) AS BIGINT), \
             CAST(COALESCE(SUM(used_bytes), 0) AS BIGINT) FROM users")
            .fetch_one(&mut db)
            .await?
        };
        let (files,): (i64,) = {
            let mut db = self.db();
            sql("SELECT COUNT(*) FROM nodes WHERE kind = 'file' AND trashed_at IS NULL").fetch_one(&mut db).await?
        };
        Ok(UsageTotals { users, active_users, total_bytes, files })
    }

    pub async fn top_usage(&self, limit: i64) -> MetaResult<Vec<UsageRow>> {
        Ok({
            let mut db = self.db();
            sql("SELECT id, username, used_bytes, quota_bytes FROM users ORDER BY used_bytes DESC, id LIMIT $1")
                .bind(limit)
                .fetch_all::<UsageRow, _>(&mut db)
                .await?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_arithmetic() {
        let a = Usage { current: 5, versions: 3, trash: 2, pending: 1 };
        assert_eq!(a.total(), 11);
        assert_eq!(Usage::current(4).total() + Usage::pending(-4).total(), 0);
    }
}
