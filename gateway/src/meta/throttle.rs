//! Rows of the sign-in throttle (`login_throttle`); the policy is `auth/throttle.rs`. Every
//! statement is one atomic upsert, update or read, so gateways sharing the database never
//! lose a count to a race.

use super::engine::{scalar, sql};
use super::{Meta, MetaResult};

impl Meta {
    /// `(key, locked_until)` of whichever of the two keys have a row.
    pub async fn throttle_rows(&self, a: &str, b: &str) -> MetaResult<Vec<(String, i64)>> {
        Ok({
            let mut db = self.db();
            sql("SELECT key, locked_until FROM login_throttle WHERE key = $1 OR key = $2")
                .bind(a)
                .bind(b)
                .fetch_all::<(String, i64), _>(&mut db)
                .await?
        })
    }

    /// Counts one failure for `key` at `now` and returns the count. A key with no failure
    /// and no lock since `forget_before` starts again from one.
    pub async fn throttle_failure(&self, key: &str, now: i64, forget_before: i64) -> MetaResult<i64> {
        Ok({
            let mut db = self.db();
            scalar::<i64>(
                "INSERT INTO login_throttle (key, failures, last_failure, locked_until) VALUES ($1, 1, $2, 0) \
             ON CONFLICT (key) DO UPDATE SET \
               failures = CASE WHEN login_throttle.last_failure < $3 AND login_throttle.locked_until < $3 \
                               THEN 1 ELSE login_throttle.failures + 1 END, \
               last_failure = $2 \
             RETURNING failures",
            )
            .bind(key)
            .bind(now)
            .bind(forget_before)
            .fetch_one(&mut db)
            .await?
        })
    }

    /// Locks `key` until `until` (Unix ms), unless it is already locked longer.
    pub async fn throttle_lock(&self, key: &str, until: i64) -> MetaResult<()> {
        {
            let mut db = self.db();
            sql("UPDATE login_throttle SET locked_until = $2 WHERE key = $1 AND locked_until < $2")
                .bind(key)
                .bind(until)
                .execute(&mut db)
                .await?;
        };
        Ok(())
    }

    pub async fn throttle_clear(&self, key: &str) -> MetaResult<()> {
        {
            let mut db = self.db();
            sql("DELETE FROM login_throttle WHERE key = $1").bind(key).execute(&mut db).await?;
        };
        Ok(())
    }

    /// Deletes the rows with no failure and no lock since `forget_before`; returns how many.
    pub async fn throttle_prune(&self, forget_before: i64) -> MetaResult<u64> {
        Ok({
            let mut db = self.db();
            sql("DELETE FROM login_throttle WHERE last_failure < $1 AND locked_until < $1")
                .bind(forget_before)
                .execute(&mut db)
                .await?
        })
    }
}
