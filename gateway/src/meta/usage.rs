//! Storage aggregates over all users, for the admin dashboard.

use super::{Meta, MetaResult, on_pool};

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

impl Meta {
    pub async fn usage_totals(&self) -> MetaResult<UsageTotals> {
        // CASTs: PostgreSQL's SUM over BIGINT is NUMERIC.
        let (users, active_users, total_bytes): (i64, i64, i64) = on_pool!(self, p => sqlx::query_as(
            "SELECT COUNT(*), CAST(COALESCE(SUM(CASE WHEN disabled THEN 0 ELSE 1 END), 0) AS BIGINT), \
             CAST(COALESCE(SUM(used_bytes), 0) AS BIGINT) FROM users")
            .fetch_one(p).await?);
        let (files,): (i64,) = on_pool!(self, p => sqlx::query_as(
            "SELECT COUNT(*) FROM nodes WHERE kind = 'file' AND trashed_at IS NULL")
            .fetch_one(p).await?);
        Ok(UsageTotals { users, active_users, total_bytes, files })
    }

    pub async fn top_usage(&self, limit: i64) -> MetaResult<Vec<UsageRow>> {
        Ok(on_pool!(self, p => sqlx::query_as::<_, UsageRow>(
            "SELECT id, username, used_bytes, quota_bytes FROM users ORDER BY used_bytes DESC, id LIMIT $1")
            .bind(limit).fetch_all(p).await?))
    }
}
