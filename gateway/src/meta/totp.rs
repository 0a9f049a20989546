//! Two-factor sign-in state: the sealed TOTP secrets (active and pending), the last accepted
//! time step, and the hashed recovery codes. `users.totp_enabled` mirrors "an active secret
//! exists" for the listings; both change in one transaction.

use super::engine::{scalar, sql};
use super::notify::Invalidate;
use super::{Meta, MetaError, MetaResult, now_ms};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TotpRow {
    /// The active secret, sealed; None while only an enrolment is pending.
    pub secret: Option<String>,
    /// An enrolment awaiting its first code, sealed.
    pub pending_secret: Option<String>,
    /// The last 30-second step a code was accepted for (no code of it or before is again).
    pub last_step: Option<i64>,
}

impl Meta {
    pub async fn totp(&self, user_id: i64) -> MetaResult<Option<TotpRow>> {
        let mut db = self.db();
        Ok(sql("SELECT secret, pending_secret, last_step FROM user_totp WHERE user_id = $1")
            .bind(user_id)
            .fetch_optional::<TotpRow, _>(&mut db)
            .await?)
    }

    /// Starts (or starts over) an enrolment; an active secret stays as it is.
    pub async fn totp_set_pending(&self, user_id: i64, sealed: &str) -> MetaResult<()> {
        let mut db = self.db();
        sql("INSERT INTO user_totp (user_id, pending_secret) VALUES ($1, $2) \
             ON CONFLICT (user_id) DO UPDATE SET pending_secret = $2")
        .bind(user_id)
        .bind(sealed)
        .execute(&mut db)
        .await?;
        Ok(())
    }

    /// Confirms the pending enrolment `pending` (as read before the code was checked): it becomes
    /// the active secret, `step` the last used one, and `recovery_hashes` replace any earlier
    /// codes. Conflict if the pending secret changed meanwhile (a second enrolment started).
    pub async fn totp_enable(
        &self,
        user_id: i64,
        pending: &str,
        step: i64,
        recovery_hashes: &[String],
    ) -> MetaResult<()> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let n = sql("UPDATE user_totp SET secret = pending_secret, pending_secret = NULL, last_step = $3, \
                     enabled_at = $4 WHERE user_id = $1 AND pending_secret = $2")
        .bind(user_id)
        .bind(pending)
        .bind(step)
        .bind(now)
        .execute(&mut tx)
        .await?;
        if n == 0 {
            return Err(MetaError::Conflict("the enrolment changed meanwhile; start it again".into()));
        }
        sql("DELETE FROM totp_recovery WHERE user_id = $1").bind(user_id).execute(&mut tx).await?;
        for h in recovery_hashes {
            sql("INSERT INTO totp_recovery (user_id, code_hash) VALUES ($1, $2)")
                .bind(user_id)
                .bind(h.as_str())
                .execute(&mut tx)
                .await?;
        }
        sql("UPDATE users SET totp_enabled = TRUE, updated_at = $2 WHERE id = $1")
            .bind(user_id)
            .bind(now)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        self.invalidate(Invalidate::User(user_id)).await;
        Ok(())
    }

    /// Records that a code of `step` was accepted; false if that step (or a later one) was
    /// already used. One conditional update: two sign-ins racing with one code, one wins.
    pub async fn totp_use_step(&self, user_id: i64, step: i64) -> MetaResult<bool> {
        let mut db = self.db();
        let n = sql("UPDATE user_totp SET last_step = $2 \
                     WHERE user_id = $1 AND secret IS NOT NULL AND (last_step IS NULL OR last_step < $2)")
        .bind(user_id)
        .bind(step)
        .execute(&mut db)
        .await?;
        Ok(n > 0)
    }

    /// Uses up the recovery code with this hash; false if there is none or it was used.
    pub async fn totp_use_recovery(&self, user_id: i64, code_hash: &str) -> MetaResult<bool> {
        let mut db = self.db();
        let n = sql("UPDATE totp_recovery SET used_at = $3 WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL")
            .bind(user_id)
            .bind(code_hash)
            .bind(now_ms())
            .execute(&mut db)
            .await?;
        Ok(n > 0)
    }

    /// Recovery codes not used yet.
    pub async fn totp_recovery_left(&self, user_id: i64) -> MetaResult<i64> {
        let mut db = self.db();
        Ok(scalar::<i64>("SELECT COUNT(*) FROM totp_recovery WHERE user_id = $1 AND used_at IS NULL")
            .bind(user_id)
            .fetch_one(&mut db)
            .await?)
    }

    /// Turns two-factor sign-in off: secrets and recovery codes are deleted. True if it was
    /// on (or an enrolment was pending).
    pub async fn totp_disable(&self, user_id: i64) -> MetaResult<bool> {
        let mut tx = self.begin_write().await?;
        let n = sql("DELETE FROM user_totp WHERE user_id = $1").bind(user_id).execute(&mut tx).await?;
        sql("DELETE FROM totp_recovery WHERE user_id = $1").bind(user_id).execute(&mut tx).await?;
        let u = sql("UPDATE users SET totp_enabled = FALSE, updated_at = $2 WHERE id = $1 AND totp_enabled = TRUE")
            .bind(user_id)
            .bind(now_ms())
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        self.invalidate(Invalidate::User(user_id)).await;
        Ok(n > 0 || u > 0)
    }

    /// Lifts the set-up-only restriction of a token (its user has just confirmed two-factor
    /// sign-in with it).
    pub async fn token_lift_totp_setup(&self, token_id: i64) -> MetaResult<()> {
        {
            let mut db = self.db();
            sql("UPDATE tokens SET totp_setup_only = FALSE WHERE id = $1").bind(token_id).execute(&mut db).await?;
        }
        // The cached token row still says set-up only: drop it everywhere.
        self.invalidate(Invalidate::Token(token_id)).await;
        Ok(())
    }
}
