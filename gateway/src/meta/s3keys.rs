//! Per-user S3 access keys (the secret is stored sealed; see `auth::s3key`).

use super::engine::{scalar, sql};
use super::{Meta, MetaResult, now_ms};

/// A key as its owner sees it in a listing: never the secret.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct S3KeyRow {
    pub id: i64,
    pub access_key_id: String,
    pub name: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
}

/// What the S3 door needs to check a signature and decide whether the key still works.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct S3KeyAuthRow {
    pub id: i64,
    pub user_id: i64,
    pub username: String,
    pub secret_sealed: String,
    pub revoked_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub disabled: bool,
}

impl S3KeyAuthRow {
    /// Revoked keys and keys of disabled users do not work.
    pub fn usable(&self) -> bool {
        self.revoked_at.is_none() && !self.disabled
    }
}

impl Meta {
    pub async fn insert_s3_key(&self, user_id: i64, access_key_id: &str, sealed: &str, name: &str) -> MetaResult<i64> {
        Ok({
            let mut db = self.db();
            scalar::<i64>(
            "INSERT INTO s3_keys (user_id, access_key_id, secret_sealed, name, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind(user_id).bind(access_key_id).bind(sealed).bind(name).bind(now_ms())
        .fetch_one(&mut db).await?
        })
    }

    /// The user's live keys, oldest first.
    pub async fn list_s3_keys(&self, user_id: i64) -> MetaResult<Vec<S3KeyRow>> {
        Ok({
            let mut db = self.db();
            sql("SELECT id, access_key_id, name, created_at, last_used_at FROM s3_keys \
             WHERE user_id = $1 AND revoked_at IS NULL ORDER BY id")
            .bind(user_id)
            .fetch_all::<S3KeyRow, _>(&mut db)
            .await?
        })
    }

    /// Revokes one of the user's own keys; false if it is not theirs or already revoked.
    pub async fn revoke_s3_key(&self, user_id: i64, key_id: i64) -> MetaResult<bool> {
        let n = {
            let mut db = self.db();
            sql("UPDATE s3_keys SET revoked_at = $3 WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL")
                .bind(key_id)
                .bind(user_id)
                .bind(now_ms())
                .execute(&mut db)
                .await?
        };
        Ok(n > 0)
    }

    /// Looks a key up by its public id, joined with the owner's current state. Read from the
    /// database on every request (no cache), so a revocation or an admin disabling the user
    /// takes effect on the very next request.
    pub async fn s3_key_auth(&self, access_key_id: &str) -> MetaResult<Option<S3KeyAuthRow>> {
        Ok({
            let mut db = self.db();
            sql("SELECT k.id, k.user_id, u.username, k.secret_sealed, k.revoked_at, k.last_used_at, u.disabled \
             FROM s3_keys k JOIN users u ON u.id = k.user_id WHERE k.access_key_id = $1")
            .bind(access_key_id)
            .fetch_optional::<S3KeyAuthRow, _>(&mut db)
            .await?
        })
    }

    pub async fn touch_s3_key(&self, key_id: i64) -> MetaResult<()> {
        {
            let mut db = self.db();
            sql("UPDATE s3_keys SET last_used_at = $2 WHERE id = $1")
                .bind(key_id)
                .bind(now_ms())
                .execute(&mut db)
                .await?;
        };
        Ok(())
    }
}
