//! Users, their tokens, and the audit log.

use nimbus_proto::names::name_key;

use super::engine::{Tx, TxConn, scalar, sql};
use super::{AuditRow, Meta, MetaError, MetaResult, TokenAuthRow, TokenRow, UserRow, now_ms};

const USER_COLS: &str = "id, username, password_hash, role, quota_bytes, used_bytes, current_bytes, versions_bytes, \
     trash_bytes, pending_bytes, disabled, sharing, links, source, totp_enabled, last_login_at, created_at, \
     email, display_name";

/// What the admin user list is ordered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserOrder {
    Name,
    Usage,
    Created,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserSort {
    pub by: UserOrder,
    pub desc: bool,
}

/// Where the previous page ended: the name key (name order), or the sort value and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserCursor {
    Name(String),
    Num(i64, i64),
}

#[derive(Debug, Default, Clone)]
pub struct UserUpdate {
    pub quota_bytes: Option<Option<i64>>,
    pub disabled: Option<bool>,
    pub password_hash: Option<String>,
    pub role: Option<String>,
    /// May the user share with others?
    pub sharing: Option<bool>,
    /// May the user make public links?
    pub links: Option<bool>,
    /// Some(None) clears it.
    pub email: Option<Option<String>>,
    /// Some(None) clears it.
    pub display_name: Option<Option<String>>,
    /// A token a password reset leaves signed in: the administrator's own, when they reset
    /// their own password (their other devices are signed out).
    pub keep_token: Option<i64>,
}

#[derive(Debug, Clone, Default)]
pub struct NewAudit {
    pub actor_id: Option<i64>,
    pub actor: Option<String>,
    pub action: String,
    pub target: Option<String>,
    pub detail: Option<String>,
    pub ip: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub action: Option<String>,
    /// Entries about this user (what an admin did to them).
    pub target: Option<String>,
    /// Time range in Unix milliseconds, inclusive.
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub before_id: Option<i64>,
    pub limit: i64,
}

impl Meta {
    pub async fn count_users(&self) -> MetaResult<i64> {
        Ok({
            let mut db = self.db();
            scalar::<i64>("SELECT COUNT(*) FROM users").fetch_one(&mut db).await?
        })
    }

    /// Creates a user and the root of their space in one transaction.
    pub async fn create_user(
        &self,
        username: &str,
        password_hash: &str,
        role: &str,
        quota: Option<i64>,
    ) -> MetaResult<UserRow> {
        self.create_user_from(username, password_hash, role, quota, "local").await
    }

    /// [`Meta::create_user`] for an account from elsewhere (`source`: `local`, `ldap`, `oidc`).
    pub async fn create_user_from(
        &self,
        username: &str,
        password_hash: &str,
        role: &str,
        quota: Option<i64>,
        source: &str,
    ) -> MetaResult<UserRow> {
        let now = now_ms();
        let key = name_key(username);
        {
            let mut tx = self.begin_write().await?;
            let id: i64 = scalar(
                "INSERT INTO users (username, username_key, password_hash, role, quota_bytes, used_bytes, disabled, \
                 created_at, updated_at, usage_counted, source) VALUES ($1, $2, $3, $4, $5, 0, FALSE, $6, $6, TRUE, $7) RETURNING id",
            )
            .bind(username).bind(&key).bind(password_hash).bind(role).bind(quota).bind(now).bind(source)
            .fetch_one(&mut tx)
            .await
            .map_err(|e| MetaError::from_insert(e, || format!("a user named `{username}` already exists")))?;
            sql(
                "INSERT INTO nodes (space_id, parent_id, name, name_key, kind, size, created_at, modified_at) VALUES ($1, NULL, '', '', 'dir', 0, $2, $2)",
            )
            .bind(id).bind(now)
            .execute(&mut tx).await?;
            tx.commit().await?;
        };
        self.user_by_name(username).await?.ok_or(MetaError::NotFound)
    }

    pub async fn user(&self, id: i64) -> MetaResult<Option<UserRow>> {
        let text = format!("SELECT {USER_COLS} FROM users WHERE id = $1");
        Ok({
            let mut db = self.db();
            sql(sqlx::AssertSqlSafe(text)).bind(id).fetch_optional::<UserRow, _>(&mut db).await?
        })
    }

    pub async fn user_by_name(&self, username: &str) -> MetaResult<Option<UserRow>> {
        let text = format!("SELECT {USER_COLS} FROM users WHERE username_key = $1");
        let key = name_key(username);
        Ok({
            let mut db = self.db();
            sql(sqlx::AssertSqlSafe(text)).bind(&key).fetch_optional::<UserRow, _>(&mut db).await?
        })
    }

    /// Every user whose account comes from `source` (`ldap`, ...).
    pub async fn users_from(&self, source: &str) -> MetaResult<Vec<UserRow>> {
        let text = format!("SELECT {USER_COLS} FROM users WHERE source = $1 ORDER BY id");
        Ok({
            let mut db = self.db();
            sql(sqlx::AssertSqlSafe(text)).bind(source).fetch_all::<UserRow, _>(&mut db).await?
        })
    }

    /// Who last disabled or enabled the user named `username`, by the audit log (the actor of
    /// the newest `user_update` that says `disabled` or `enabled`).
    pub async fn last_enablement_actor(&self, username: &str) -> MetaResult<Option<String>> {
        Ok({
            let mut db = self.db();
            scalar::<Option<String>>(
                "SELECT actor FROM audit WHERE target = $1 AND action = 'user_update' \
                 AND (detail LIKE '%disabled%' OR detail LIKE '%enabled%') ORDER BY id DESC LIMIT 1",
            )
            .bind(username)
            .fetch_optional(&mut db)
            .await?
            .flatten()
        })
    }

    /// A page of users in `sort` order, after `after` (the previous page's last row).
    pub async fn list_users(
        &self,
        search: Option<&str>,
        sort: UserSort,
        after: Option<&UserCursor>,
        limit: i64,
    ) -> MetaResult<Vec<UserRow>> {
        let pattern = search.map(|s| format!("%{}%", escape_like(&name_key(s))));
        // Keyset paging: the sort column plus the id (unique) as a tie-breaker, so a page
        // boundary inside equal values neither repeats nor skips a user. Only fixed column
        // names and operators go into the SQL text.
        let (dir, op) = if sort.desc { ("DESC", "<") } else { ("ASC", ">") };
        let col = match sort.by {
            UserOrder::Name => "username_key",
            UserOrder::Usage => "used_bytes",
            UserOrder::Created => "created_at",
        };
        let (text_after, num_after, id_after) = match after {
            Some(UserCursor::Name(k)) => (Some(k.as_str()), None, None),
            Some(UserCursor::Num(v, id)) => (None, Some(*v), Some(*id)),
            None => (None, None, None),
        };
        let keyset = match sort.by {
            UserOrder::Name => format!("($2 IS NULL OR username_key {op} $2)"),
            _ => format!("($3 IS NULL OR ({col}, id) {op} ($3, $4))"),
        };
        let text = format!(
            "SELECT {USER_COLS} FROM users WHERE ($1 IS NULL OR username_key LIKE $1 ESCAPE '\\') \
             AND {keyset} ORDER BY {col} {dir}, id {dir} LIMIT $5"
        );
        Ok({
            let mut db = self.db();
            sql(sqlx::AssertSqlSafe(text))
                .bind(pattern.as_deref())
                .bind(text_after)
                .bind(num_after)
                .bind(id_after)
                .bind(limit)
                .fetch_all::<UserRow, _>(&mut db)
                .await?
        })
    }

    /// Applies an admin's changes. Disabling a user or resetting the password revokes every
    /// token of theirs in the same transaction, so no request can slip through afterwards.
    pub async fn update_user(&self, id: i64, upd: &UserUpdate) -> MetaResult<UserRow> {
        self.update_user_with(id, upd, false).await
    }

    /// [`Meta::update_user`] for an administrator's change: one that would leave no enabled
    /// administrator (the last two demoting or disabling each other at the same moment) is
    /// refused with a conflict and changes nothing. The directory's own updates (LDAP sync,
    /// OpenID roles) are not held back: the directory decides who is an administrator there.
    pub async fn update_user_keeping_an_admin(&self, id: i64, upd: &UserUpdate) -> MetaResult<UserRow> {
        self.update_user_with(id, upd, true).await
    }

    async fn update_user_with(&self, id: i64, upd: &UserUpdate, keep_admin: bool) -> MetaResult<UserRow> {
        let now = now_ms();
        let revoke = upd.disabled == Some(true) || upd.password_hash.is_some();
        let demotes = upd.disabled == Some(true) || upd.role.as_deref().is_some_and(|r| r != "admin");
        {
            let mut tx = self.begin_write().await?;
            let guard = keep_admin && demotes && lock_admins(&mut tx, id).await?;
            let n = sql("UPDATE users SET \
                   quota_bytes = CASE WHEN $2 THEN $3 ELSE quota_bytes END, \
                   disabled = COALESCE($4, disabled), \
                   password_hash = COALESCE($5, password_hash), \
                   role = COALESCE($6, role), \
                   sharing = COALESCE($8, sharing), \
                   links = COALESCE($9, links), \
                   email = CASE WHEN $10 THEN $11 ELSE email END, \
                   display_name = CASE WHEN $12 THEN $13 ELSE display_name END, \
                   updated_at = $7 \
                 WHERE id = $1")
            .bind(id)
            .bind(upd.quota_bytes.is_some())
            .bind(upd.quota_bytes.flatten())
            .bind(upd.disabled)
            .bind(upd.password_hash.as_deref())
            .bind(upd.role.as_deref())
            .bind(now)
            .bind(upd.sharing)
            .bind(upd.links)
            .bind(upd.email.is_some())
            .bind(upd.email.clone().flatten())
            .bind(upd.display_name.is_some())
            .bind(upd.display_name.clone().flatten())
            .execute(&mut tx)
            .await?;
            if n == 0 {
                return Err(MetaError::NotFound);
            }
            if guard {
                no_last_admin_gone(&mut tx).await?;
            }
            if revoke {
                // A disabled account keeps nothing.
                let keep = if upd.disabled == Some(true) { None } else { upd.keep_token };
                sql("UPDATE tokens SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL AND id <> $3")
                    .bind(id)
                    .bind(now)
                    .bind(keep.unwrap_or(0))
                    .execute(&mut tx)
                    .await?;
            }
            tx.commit().await?;
            // Role and disabled state are part of every cached token row.
            self.invalidate(super::notify::Invalidate::User(id)).await;
        };
        self.user(id).await?.ok_or(MetaError::NotFound)
    }

    /// Deletes a user with everything in their space. Returns false if there was no such user.
    /// The caller removes the space's blocks from the object store afterwards.
    pub async fn delete_user(&self, id: i64) -> MetaResult<bool> {
        {
            let mut tx = self.begin_write().await?;
            let guard = lock_admins(&mut tx, id).await?;
            // Children before parents is not needed: nodes cascade through parent_id.
            sql("DELETE FROM trash WHERE space_id = $1").bind(id).execute(&mut tx).await?;
            sql("DELETE FROM nodes WHERE space_id = $1 AND parent_id IS NULL").bind(id).execute(&mut tx).await?;
            sql("DELETE FROM nodes WHERE space_id = $1").bind(id).execute(&mut tx).await?;
            sql("DELETE FROM blocks WHERE space_id = $1").bind(id).execute(&mut tx).await?;
            sql("DELETE FROM changes WHERE space_id = $1").bind(id).execute(&mut tx).await?;
            sql("DELETE FROM tokens WHERE user_id = $1").bind(id).execute(&mut tx).await?;
            sql("DELETE FROM s3_keys WHERE user_id = $1").bind(id).execute(&mut tx).await?;
            let n = sql("DELETE FROM users WHERE id = $1").bind(id).execute(&mut tx).await?;
            if guard {
                no_last_admin_gone(&mut tx).await?;
            }
            tx.commit().await?;
            self.invalidate(super::notify::Invalidate::User(id)).await;
            self.invalidate(super::notify::Invalidate::Space(id)).await;
            Ok(n > 0)
        }
    }

    pub async fn count_admins(&self) -> MetaResult<i64> {
        Ok({
            let mut db = self.db();
            scalar::<i64>("SELECT COUNT(*) FROM users WHERE role = 'admin' AND disabled = FALSE")
                .fetch_one(&mut db)
                .await?
        })
    }

    /// A new token from a sign-in (which is recorded as the user's last); `ip` is the client
    /// address it was signed in from.
    pub async fn insert_token(
        &self,
        user_id: i64,
        token_hash: &str,
        device: &str,
        expires_at: i64,
        ip: Option<&str>,
    ) -> MetaResult<i64> {
        self.insert_token_with(user_id, token_hash, device, expires_at, ip, false).await
    }

    /// [`Meta::insert_token`], for a token that may only set up two-factor sign-in when
    /// `totp_setup_only` (flagged in the same insert, so it is never a full token meanwhile).
    pub async fn insert_token_with(
        &self,
        user_id: i64,
        token_hash: &str,
        device: &str,
        expires_at: i64,
        ip: Option<&str>,
        totp_setup_only: bool,
    ) -> MetaResult<i64> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        let id = scalar::<i64>(
            "INSERT INTO tokens (user_id, token_hash, device, created_at, expires_at, last_ip, totp_setup_only) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        )
        .bind(user_id)
        .bind(token_hash)
        .bind(device)
        .bind(now)
        .bind(expires_at)
        .bind(ip)
        .bind(totp_setup_only)
        .fetch_one(&mut tx)
        .await?;
        sql("UPDATE users SET last_login_at = $1 WHERE id = $2").bind(now).bind(user_id).execute(&mut tx).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Looks a token up by its BLAKE3 hash, with the user state needed to decide whether it
    /// works. Served from memory when hot (see `hot.rs` for how it stays correct).
    pub async fn token_auth(&self, hash: &blake3::Hash) -> MetaResult<Option<std::sync::Arc<TokenAuthRow>>> {
        if let Some(row) = self.hot.token(hash.as_bytes()) {
            return Ok(Some(row));
        }
        // Before the database: a revocation committing meanwhile keeps this row out of memory.
        let stamp = self.hot.token_stamp();
        let row = {
            let mut db = self.db();
            sql("SELECT t.id AS token_id, t.user_id, t.device, t.expires_at, t.revoked_at, t.last_used_at, t.last_ip, \
                    u.username, u.role, u.disabled, t.totp_setup_only \
             FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = $1")
            .bind(hash.to_hex().as_str())
            .fetch_optional::<TokenAuthRow, _>(&mut db)
            .await?
        };
        Ok(row.map(|r| {
            let r = std::sync::Arc::new(r);
            self.hot.put_token(*hash.as_bytes(), std::sync::Arc::clone(&r), stamp);
            r
        }))
    }

    /// Notes in memory that a token was just used (from client address `ip`); `touch_token`
    /// then records it durably.
    pub fn mark_token_used(&self, hash: &blake3::Hash, at_ms: i64, ip: Option<&str>) {
        self.hot.mark_used(hash.as_bytes(), at_ms, ip);
    }

    pub async fn touch_token(&self, token_id: i64, ip: Option<&str>) -> MetaResult<()> {
        {
            let mut db = self.db();
            sql("UPDATE tokens SET last_used_at = $2, last_ip = COALESCE($3, last_ip) WHERE id = $1")
                .bind(token_id)
                .bind(now_ms())
                .bind(ip)
                .execute(&mut db)
                .await?;
        };
        Ok(())
    }

    /// The user's tokens that still work.
    pub async fn list_tokens(&self, user_id: i64) -> MetaResult<Vec<TokenRow>> {
        Ok({
            let mut db = self.db();
            sql("SELECT id, device, created_at, expires_at, last_used_at, last_ip FROM tokens \
             WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > $2 ORDER BY id")
            .bind(user_id)
            .bind(now_ms())
            .fetch_all::<TokenRow, _>(&mut db)
            .await?
        })
    }

    /// Revokes one of the user's own tokens; false if it is not theirs or not live.
    pub async fn revoke_token(&self, user_id: i64, token_id: i64) -> MetaResult<bool> {
        let n = {
            let mut db = self.db();
            sql("UPDATE tokens SET revoked_at = $3 WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL")
                .bind(token_id)
                .bind(user_id)
                .bind(now_ms())
                .execute(&mut db)
                .await?
        };
        self.invalidate(super::notify::Invalidate::Token(token_id)).await;
        Ok(n > 0)
    }

    pub async fn revoke_all_tokens(&self, user_id: i64) -> MetaResult<u64> {
        let n = {
            let mut db = self.db();
            sql("UPDATE tokens SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL")
                .bind(user_id)
                .bind(now_ms())
                .execute(&mut db)
                .await?
        };
        self.invalidate(super::notify::Invalidate::User(user_id)).await;
        Ok(n)
    }

    pub async fn audit(&self, e: NewAudit) -> MetaResult<()> {
        {
            let mut db = self.db();
            sql("INSERT INTO audit (at, actor_id, actor, action, target, detail, ip) VALUES ($1, $2, $3, $4, $5, $6, $7)")
                .bind(now_ms()).bind(e.actor_id).bind(e.actor.as_deref()).bind(&e.action)
                .bind(e.target.as_deref()).bind(e.detail.as_deref()).bind(e.ip.as_deref())
                .execute(&mut db).await?;
        };
        Ok(())
    }

    /// Audit entries newest first; `before_id` pages backwards.
    pub async fn list_audit(&self, f: &AuditFilter) -> MetaResult<Vec<AuditRow>> {
        Ok({
            let mut db = self.db();
            sql("SELECT id, at, actor, action, target, detail, ip FROM audit \
             WHERE ($1 IS NULL OR actor = $1) AND ($2 IS NULL OR action = $2) AND ($3 IS NULL OR id < $3) \
             AND ($5 IS NULL OR target = $5) AND ($6 IS NULL OR at >= $6) AND ($7 IS NULL OR at <= $7) \
             ORDER BY id DESC LIMIT $4")
            .bind(f.actor.as_deref())
            .bind(f.action.as_deref())
            .bind(f.before_id)
            .bind(f.limit)
            .bind(f.target.as_deref())
            .bind(f.since_ms)
            .bind(f.until_ms)
            .fetch_all::<AuditRow, _>(&mut db)
            .await?
        })
    }
}

fn escape_like(s: &str) -> String {
    s.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

/// The advisory lock that serialises changes to who is an administrator (PostgreSQL; SQLite's
/// write transactions are serial already). Space locks use user ids, which are positive.
const ADMINS_LOCK: i64 = -1;

/// Inside a write transaction about to demote, disable or delete user `id`: takes the
/// administrators' lock and says whether `id` is an enabled administrator now (so the change
/// must be checked with [`no_last_admin_gone`] before it commits).
async fn lock_admins(tx: &mut Tx, id: i64) -> MetaResult<bool> {
    tx.lock_space(ADMINS_LOCK).await?;
    let admin = scalar::<i64>("SELECT COUNT(*) FROM users WHERE id = $1 AND role = 'admin' AND disabled = FALSE")
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
    Ok(admin > 0)
}

/// Refuses (and so rolls back) a change that left no enabled administrator.
async fn no_last_admin_gone(tx: &mut Tx) -> MetaResult<()> {
    let left = scalar::<i64>("SELECT COUNT(*) FROM users WHERE role = 'admin' AND disabled = FALSE")
        .fetch_one(&mut *tx)
        .await?;
    if left == 0 {
        return Err(MetaError::Conflict(
            "this would leave no enabled administrator; make another account an administrator first".into(),
        ));
    }
    Ok(())
}
