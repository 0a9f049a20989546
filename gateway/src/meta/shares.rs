//! Shares between users: a file or folder of the owner's space given to another user with a
//! permission. A share follows its node (by id), so the owner may rename or move it; it ends
//! when the owner revokes it, the recipient leaves it, or the node is deleted for good. While
//! the node is in the trash the share leads nowhere.
//!
//! The recipient reaches a share only through [`Meta::shared_grant`], which reads the row on
//! every call (no cache): a revocation or a permission change holds on every gateway at once.
//! The grant carries the owner's `SpaceId`, made here from the share row: the only way a
//! request gets a space other than its own.

use nimbus_proto::RemotePath;
use nimbus_proto::names::{SHARED_WITH_ME, name_key};

use super::engine::{TxConn, scalar, sql};
use super::journal::{Change, journal};
use super::retention::is_live;
use super::tree::NODE_SQL;
use super::{Meta, MetaError, MetaResult, NodeRow, SpaceId, now_ms};

/// What a share lets its recipient do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharePermission {
    /// List, read, download.
    Read,
    /// Also create, change, rename and delete inside.
    Write,
}

impl SharePermission {
    pub fn as_str(self) -> &'static str {
        match self {
            SharePermission::Read => "read",
            SharePermission::Write => "write",
        }
    }

    pub fn parse(s: &str) -> Option<SharePermission> {
        match s {
            "read" => Some(SharePermission::Read),
            "write" => Some(SharePermission::Write),
            _ => None,
        }
    }
}

/// A share as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ShareRow {
    pub id: i64,
    pub owner_id: i64,
    pub node_id: i64,
    /// The user it is given to; None for a group share (which has `group_id`).
    pub recipient_id: Option<i64>,
    /// The group a group share is given to.
    pub group_id: Option<i64>,
    /// A member's entry of a group share: the group share it comes from.
    pub parent_id: Option<i64>,
    pub permission: String,
    /// The recipient's entry under `Shared with me`.
    pub name: String,
    pub created_at: i64,
}

/// An outgoing share as its owner lists it.
#[derive(Debug, Clone)]
pub struct OutgoingShare {
    pub row: ShareRow,
    /// Where the shared node is now in the owner's space (None while it is in the trash).
    pub path: Option<RemotePath>,
    /// The user it is given to (None: a group share).
    pub recipient: Option<String>,
    /// The group it is given to (None: a user share).
    pub group: Option<String>,
}

/// An incoming share as its recipient lists it.
#[derive(Debug, Clone)]
pub struct IncomingShare {
    pub row: ShareRow,
    pub owner: String,
    pub kind: String,
    pub size: i64,
    pub modified_at: i64,
    /// The group it came through (None: shared with the recipient themselves).
    pub group: Option<String>,
    /// What the recipient may do (see [`Meta::effective_permission`]).
    pub permission: SharePermission,
}

/// What a recipient may reach through one share: the owner's space, the shared node there
/// and where it is now, and the permission.
#[derive(Debug, Clone)]
pub struct Grant {
    pub share_id: i64,
    pub owner: SpaceId,
    pub owner_name: String,
    pub node: NodeRow,
    /// The shared node's path in the owner's space, now.
    pub root: RemotePath,
    pub permission: SharePermission,
    /// The recipient's name for it under `Shared with me`.
    pub name: String,
}

pub(super) const SHARE_COLS: &str =
    "s.id, s.owner_id, s.node_id, s.recipient_id, s.group_id, s.parent_id, s.permission, s.name, s.created_at";

impl Meta {
    /// Shares the node at `path` of `owner`'s space with the user `recipient`. Its entry under
    /// the recipient's `Shared with me` takes the node's name, made unique among the
    /// recipient's shares with " (2)", " (3)", ... Sharing again with the same user is refused.
    /// If the recipient already has the node through a group share, that entry becomes this
    /// share (one entry per node and recipient; see [`Meta::effective_permission`]).
    pub async fn create_share(
        &self,
        owner: SpaceId,
        path: &RemotePath,
        recipient: &str,
        permission: SharePermission,
    ) -> MetaResult<ShareRow> {
        if path.is_root() {
            return Err(MetaError::Invalid("the whole space cannot be shared; share a folder or a file in it".into()));
        }
        let (node, _) = self.stat(owner, path).await?;
        let to = self
            .user_by_name(recipient)
            .await?
            .filter(|u| !u.disabled)
            .ok_or_else(|| MetaError::Invalid(format!("there is no active user named `{recipient}`")))?;
        if to.id == owner.get() {
            return Err(MetaError::Invalid("a space cannot be shared with its own owner".into()));
        }
        let now = now_ms();
        // The recipient's journal tells their feed (and drive) that the entry appeared.
        let mut tx = self.begin_space(to.id).await?;
        let text = format!(
            "SELECT {SHARE_COLS} FROM shares s WHERE s.node_id = $1 AND s.recipient_id = $2 AND s.parent_id IS NOT NULL"
        );
        let from_group: Option<ShareRow> =
            sql(sqlx::AssertSqlSafe(text)).bind(node.id).bind(to.id).fetch_optional(&mut tx).await?;
        if let Some(entry) = from_group {
            sql("UPDATE shares SET parent_id = NULL, permission = $2, created_at = $3 WHERE id = $1")
                .bind(entry.id)
                .bind(permission.as_str())
                .bind(now)
                .execute(&mut tx)
                .await?;
            let row = ShareRow { parent_id: None, permission: permission.as_str().into(), created_at: now, ..entry };
            journal_entry(&mut tx, &row, &node.kind, "update", now).await?;
            tx.commit().await?;
            self.invalidate(super::notify::Invalidate::Space(to.id)).await;
            return Ok(row);
        }
        let row = insert_entry(&mut tx, owner.get(), &node, to.id, None, permission, now)
            .await
            .map_err(|e| already(e, || format!("`{path}` is already shared with `{}`", to.username)))?;
        tx.commit().await?;
        self.invalidate(super::notify::Invalidate::Space(to.id)).await;
        Ok(row)
    }

    /// Shares the node at `path` of `owner`'s space with the group `group`: every member but
    /// the owner gets an entry of their own (see [`Meta::sync_entry`]). Returns the group
    /// share and the group's name as it is spelled.
    pub async fn create_group_share(
        &self,
        owner: SpaceId,
        path: &RemotePath,
        group: &str,
        permission: SharePermission,
    ) -> MetaResult<(ShareRow, String)> {
        if path.is_root() {
            return Err(MetaError::Invalid("the whole space cannot be shared; share a folder or a file in it".into()));
        }
        let (node, _) = self.stat(owner, path).await?;
        let g = self
            .group_by_name(group)
            .await?
            .ok_or_else(|| MetaError::Invalid(format!("there is no group named `{group}`")))?;
        let row: ShareRow = {
            let mut tx = self.begin_write().await?;
            let text = format!(
                "INSERT INTO shares (owner_id, node_id, group_id, permission, name, name_key, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {}",
                SHARE_COLS.replace("s.", "")
            );
            let row = sql(sqlx::AssertSqlSafe(text))
                .bind(owner.get())
                .bind(node.id)
                .bind(g.id)
                .bind(permission.as_str())
                .bind(&node.name)
                .bind(name_key(&node.name))
                .bind(now_ms())
                .fetch_one(&mut tx)
                .await
                .map_err(|e| {
                    MetaError::from_insert(e, || format!("`{path}` is already shared with the group `{}`", g.name))
                })?;
            tx.commit().await?;
            row
        };
        for member in self.group_member_ids(g.id).await? {
            self.sync_entry(member, row.node_id).await?;
        }
        Ok((row, g.name))
    }

    /// Brings the entry of `user` for `node` in step with the group shares that give it to
    /// them: made when a group share reaches them and they have none, pointed at another group
    /// share when its own ended, ended when none is left. A user share stays as it is. Run
    /// after every change of group shares, memberships and groups, before the request that
    /// made it answers, so the next request on any gateway sees it.
    pub(super) async fn sync_entry(&self, user: i64, node: i64) -> MetaResult<()> {
        let now = now_ms();
        let mut tx = self.begin_space(user).await?;
        let text = format!(
            "SELECT {SHARE_COLS} FROM shares s JOIN group_members m ON m.group_id = s.group_id AND m.user_id = $2 \
             WHERE s.node_id = $1 AND s.owner_id <> $2 AND NOT EXISTS \
             (SELECT 1 FROM share_leaves l WHERE l.share_id = s.id AND l.user_id = $2) ORDER BY s.id"
        );
        let sources: Vec<ShareRow> = sql(sqlx::AssertSqlSafe(text)).bind(node).bind(user).fetch_all(&mut tx).await?;
        let text = format!("SELECT {SHARE_COLS} FROM shares s WHERE s.node_id = $1 AND s.recipient_id = $2");
        let entry: Option<ShareRow> =
            sql(sqlx::AssertSqlSafe(text)).bind(node).bind(user).fetch_optional(&mut tx).await?;
        match (entry, sources.first()) {
            (None, None) => Ok(()),
            (Some(e), _) if e.parent_id.is_none() => Ok(()),
            (Some(e), Some(_)) if sources.iter().any(|s| Some(s.id) == e.parent_id) => Ok(()),
            (Some(e), Some(src)) => {
                sql("UPDATE shares SET parent_id = $2, permission = $3 WHERE id = $1")
                    .bind(e.id)
                    .bind(src.id)
                    .bind(&src.permission)
                    .execute(&mut tx)
                    .await?;
                let kind = node_kind(&mut tx, node).await?;
                journal_entry(&mut tx, &e, &kind, "update", now).await?;
                tx.commit().await?;
                self.invalidate(super::notify::Invalidate::Space(user)).await;
                Ok(())
            }
            (Some(e), None) => {
                drop(tx);
                match self.end_entry(e).await {
                    Ok(_) | Err(MetaError::NotFound) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            (None, Some(src)) => {
                let node_row: NodeRow = sql(NODE_SQL).bind(node).fetch_one(&mut tx).await?;
                let permission = SharePermission::parse(&src.permission).unwrap_or(SharePermission::Read);
                insert_entry(&mut tx, src.owner_id, &node_row, user, Some(src.id), permission, now).await?;
                tx.commit().await?;
                self.invalidate(super::notify::Invalidate::Space(user)).await;
                Ok(())
            }
        }
    }

    /// What `recipient` may do through their entry `row`: the higher of its own permission
    /// and those of the group shares of the same node that reach them (one entry per node,
    /// the higher permission, as Nextcloud does).
    pub async fn effective_permission(&self, row: &ShareRow) -> MetaResult<SharePermission> {
        let own = SharePermission::parse(&row.permission).unwrap_or(SharePermission::Read);
        let Some(user) = row.recipient_id.filter(|_| own == SharePermission::Read) else { return Ok(own) };
        let write: Option<i64> = scalar(
            "SELECT s.id FROM shares s JOIN group_members m ON m.group_id = s.group_id AND m.user_id = $2 \
             WHERE s.node_id = $1 AND s.permission = 'write' AND s.owner_id <> $2 AND NOT EXISTS \
             (SELECT 1 FROM share_leaves l WHERE l.share_id = s.id AND l.user_id = $2) LIMIT 1",
        )
        .bind(row.node_id)
        .bind(user)
        .fetch_optional(&mut self.db())
        .await?;
        Ok(if write.is_some() { SharePermission::Write } else { own })
    }

    /// The shares `owner` gave (to users and to groups; not the members' entries of group
    /// shares), newest first.
    pub async fn outgoing_shares(&self, owner: SpaceId) -> MetaResult<Vec<OutgoingShare>> {
        let text = format!(
            "SELECT {SHARE_COLS}, u.username, g.name AS group_name FROM shares s \
             LEFT JOIN users u ON u.id = s.recipient_id LEFT JOIN user_groups g ON g.id = s.group_id \
             WHERE s.owner_id = $1 AND s.parent_id IS NULL ORDER BY s.id DESC"
        );
        let raw: Vec<OutgoingRaw> = sql(sqlx::AssertSqlSafe(text)).bind(owner.get()).fetch_all(&mut self.db()).await?;
        let mut out = Vec::with_capacity(raw.len());
        for r in raw {
            let path = self.live_path(owner.get(), r.row.node_id).await?;
            out.push(OutgoingShare { row: r.row, path, recipient: r.username, group: r.group_name });
        }
        Ok(out)
    }

    /// The shares given to `recipient` (to them or to a group of theirs) whose node is live,
    /// by name.
    pub async fn incoming_shares(&self, recipient: SpaceId) -> MetaResult<Vec<IncomingShare>> {
        let text = format!(
            "SELECT {SHARE_COLS}, u.username AS owner, n.kind, n.size, n.modified_at, g.name AS group_name \
             FROM shares s JOIN users u ON u.id = s.owner_id JOIN nodes n ON n.id = s.node_id \
             LEFT JOIN shares p ON p.id = s.parent_id LEFT JOIN user_groups g ON g.id = p.group_id \
             WHERE s.recipient_id = $1 AND NOT u.disabled ORDER BY s.name_key"
        );
        let raw: Vec<IncomingRaw> =
            sql(sqlx::AssertSqlSafe(text)).bind(recipient.get()).fetch_all(&mut self.db()).await?;
        let mut out = Vec::with_capacity(raw.len());
        for r in raw {
            if is_live(&mut self.db(), r.row.node_id).await? {
                let permission = self.effective_permission(&r.row).await?;
                out.push(IncomingShare {
                    row: r.row,
                    owner: r.owner,
                    kind: r.kind,
                    size: r.size,
                    modified_at: r.modified_at,
                    group: r.group_name,
                    permission,
                });
            }
        }
        Ok(out)
    }

    /// Whether `recipient` has at least one share whose node is live: what decides if
    /// `Shared with me` is shown at the top of their space (asked on every listing of it, so
    /// it stops at the first live one).
    pub async fn has_incoming_shares(&self, recipient: SpaceId) -> MetaResult<bool> {
        let nodes: Vec<i64> = scalar(
            "SELECT s.node_id FROM shares s JOIN users u ON u.id = s.owner_id \
             WHERE s.recipient_id = $1 AND NOT u.disabled",
        )
        .bind(recipient.get())
        .fetch_all(&mut self.db())
        .await?;
        for node in nodes {
            if is_live(&mut self.db(), node).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The share `id` as its owner or its recipient sees it; NotFound for anyone else. The
    /// owner of a group share sees the group share, not the members' entries of it; a member
    /// sees their own entry only.
    pub async fn share(&self, caller: SpaceId, id: i64) -> MetaResult<ShareRow> {
        let text = format!(
            "SELECT {SHARE_COLS} FROM shares s WHERE s.id = $1 \
             AND ((s.owner_id = $2 AND s.parent_id IS NULL) OR s.recipient_id = $2)"
        );
        sql(sqlx::AssertSqlSafe(text))
            .bind(id)
            .bind(caller.get())
            .fetch_optional(&mut self.db())
            .await?
            .ok_or(MetaError::NotFound)
    }

    /// Changes the permission of the owner's share `id`.
    /// Journaled in each recipient's space as an `update` of the entry (its permission changed).
    pub async fn update_share(&self, owner: SpaceId, id: i64, permission: SharePermission) -> MetaResult<ShareRow> {
        let row = self.share(owner, id).await?;
        if row.owner_id != owner.get() {
            return Err(MetaError::NotFound);
        }
        if row.group_id.is_some() {
            let n = sql("UPDATE shares SET permission = $3 WHERE (id = $1 OR parent_id = $1) AND owner_id = $2")
                .bind(id)
                .bind(owner.get())
                .bind(permission.as_str())
                .execute(&mut self.db())
                .await?;
            if n == 0 {
                return Err(MetaError::NotFound);
            }
            let text = format!("SELECT {SHARE_COLS} FROM shares s WHERE s.parent_id = $1");
            let entries: Vec<ShareRow> = sql(sqlx::AssertSqlSafe(text)).bind(id).fetch_all(&mut self.db()).await?;
            for e in entries {
                let Some(recipient) = e.recipient_id else { continue };
                let mut tx = self.begin_space(recipient).await?;
                let kind = node_kind(&mut tx, e.node_id).await?;
                journal_entry(&mut tx, &e, &kind, "update", now_ms()).await?;
                tx.commit().await?;
                self.invalidate(super::notify::Invalidate::Space(recipient)).await;
            }
            return self.share(owner, id).await;
        }
        let recipient = row.recipient_id.ok_or(MetaError::NotFound)?;
        let mut tx = self.begin_space(recipient).await?;
        let n = sql("UPDATE shares SET permission = $3 WHERE id = $1 AND owner_id = $2")
            .bind(id)
            .bind(owner.get())
            .bind(permission.as_str())
            .execute(&mut tx)
            .await?;
        if n == 0 {
            return Err(MetaError::NotFound);
        }
        let kind = node_kind(&mut tx, row.node_id).await?;
        journal_entry(&mut tx, &row, &kind, "update", now_ms()).await?;
        tx.commit().await?;
        self.invalidate(super::notify::Invalidate::Space(recipient)).await;
        self.share(owner, id).await
    }

    /// Ends share `id`: its owner revokes it (a group share: for every member), or its
    /// recipient leaves it (an entry of a group share: for them only, for good). Returns the
    /// row.
    pub async fn delete_share(&self, caller: SpaceId, id: i64) -> MetaResult<ShareRow> {
        let row = self.share(caller, id).await?;
        if row.owner_id == caller.get() {
            return self.revoke(row).await;
        }
        // Leaving hides the node for this user whatever gave it to them: the group shares of
        // the same node that reach them are left too, or the entry would come back.
        sql("INSERT INTO share_leaves (share_id, user_id) \
             SELECT s.id, m.user_id FROM shares s JOIN group_members m ON m.group_id = s.group_id AND m.user_id = $2 \
             WHERE s.node_id = $1 ON CONFLICT (share_id, user_id) DO NOTHING")
        .bind(row.node_id)
        .bind(caller.get())
        .execute(&mut self.db())
        .await?;
        self.end_share(row).await
    }

    /// The owner's (or an administrator's) end of a share: a group share ends for every
    /// member; a user share's recipient may still have the node through a group share.
    async fn revoke(&self, row: ShareRow) -> MetaResult<ShareRow> {
        let row = self.end_share(row).await?;
        if let Some(recipient) = row.recipient_id {
            self.sync_entry(recipient, row.node_id).await?;
        }
        Ok(row)
    }

    /// Deletes the share and journals, in the recipient's space, that its entry (and, with the
    /// last share, `Shared with me` itself) is gone. A group share goes with its members'
    /// entries (or they move to another group share of the same node).
    async fn end_share(&self, row: ShareRow) -> MetaResult<ShareRow> {
        if row.recipient_id.is_none() {
            let members: Vec<i64> = scalar("SELECT recipient_id FROM shares WHERE parent_id = $1")
                .bind(row.id)
                .fetch_all(&mut self.db())
                .await?;
            let n = sql("DELETE FROM shares WHERE id = $1").bind(row.id).execute(&mut self.db()).await?;
            if n == 0 {
                return Err(MetaError::NotFound);
            }
            for m in members {
                self.sync_entry(m, row.node_id).await?;
            }
            return Ok(row);
        }
        self.end_entry(row).await
    }

    /// [`Meta::end_share`] of a recipient's entry.
    async fn end_entry(&self, row: ShareRow) -> MetaResult<ShareRow> {
        let recipient = row.recipient_id.ok_or(MetaError::NotFound)?;
        let mut tx = self.begin_space(recipient).await?;
        let n = sql("DELETE FROM shares WHERE id = $1").bind(row.id).execute(&mut tx).await?;
        if n == 0 {
            return Err(MetaError::NotFound);
        }
        let now = now_ms();
        let kind = node_kind(&mut tx, row.node_id).await?;
        journal_entry(&mut tx, &row, &kind, "delete", now).await?;
        let left: Option<i64> = scalar("SELECT id FROM shares WHERE recipient_id = $1 LIMIT 1")
            .bind(recipient)
            .fetch_optional(&mut tx)
            .await?;
        if left.is_none() {
            journal_index(&mut tx, recipient, now, "delete").await?;
        }
        tx.commit().await?;
        self.invalidate(super::notify::Invalidate::Space(recipient)).await;
        // The recipient's WebDAV locks on the owner's files go with the share: nobody could
        // release them any more, and they would stop the owner's writes until they expire.
        if let Some((root, _)) = self.path_of(row.owner_id, row.node_id).await? {
            let name: Option<String> = scalar("SELECT username FROM users WHERE id = $1")
                .bind(recipient)
                .fetch_optional(&mut self.db())
                .await?;
            if let Some(name) = name {
                super::locks::drop_locks_of(&mut self.db(), row.owner_id, &root, &name).await?;
            }
        }
        Ok(row)
    }

    /// Up to `limit` shares of every space (to users and to groups), newest first; with
    /// `user`, those it gave or got, itself or through a group (an administrator's view).
    pub async fn all_shares(&self, user: Option<i64>, limit: i64) -> MetaResult<Vec<(OutgoingShare, String)>> {
        let text = format!(
            "SELECT {SHARE_COLS}, r.username, g.name AS group_name, o.username AS owner FROM shares s \
             LEFT JOIN users r ON r.id = s.recipient_id LEFT JOIN user_groups g ON g.id = s.group_id \
             JOIN users o ON o.id = s.owner_id WHERE s.parent_id IS NULL AND ($1 IS NULL OR s.owner_id = $1 \
             OR s.recipient_id = $1 OR s.group_id IN (SELECT group_id FROM group_members WHERE user_id = $1)) \
             ORDER BY s.id DESC LIMIT $2"
        );
        let raw: Vec<AdminRaw> =
            sql(sqlx::AssertSqlSafe(text)).bind(user).bind(limit).fetch_all(&mut self.db()).await?;
        let mut out = Vec::with_capacity(raw.len());
        for r in raw {
            let path = self.live_path(r.row.owner_id, r.row.node_id).await?;
            out.push((OutgoingShare { row: r.row, path, recipient: r.username, group: r.group_name }, r.owner));
        }
        Ok(out)
    }

    /// Ends share `id` whoever's it is (an administrator revoking it; a group share ends for
    /// every member). Returns the row.
    pub async fn revoke_share(&self, id: i64) -> MetaResult<ShareRow> {
        let text = format!("SELECT {SHARE_COLS} FROM shares s WHERE s.id = $1 AND s.parent_id IS NULL");
        let row: ShareRow =
            sql(sqlx::AssertSqlSafe(text)).bind(id).fetch_optional(&mut self.db()).await?.ok_or(MetaError::NotFound)?;
        self.revoke(row).await
    }

    /// Renames `recipient`'s entry of share `id` under `Shared with me` to `name`: their own
    /// mount point of it (the owner's node keeps its name, other recipients theirs). Journaled
    /// in the recipient's space as a move, so their drives follow. Another share of theirs by
    /// that name is 409; a share that is not theirs is NotFound.
    pub async fn rename_incoming_share(&self, recipient: SpaceId, id: i64, name: &str) -> MetaResult<ShareRow> {
        let mut tx = self.begin_space(recipient.get()).await?;
        let text = format!("SELECT {SHARE_COLS} FROM shares s WHERE s.id = $1 AND s.recipient_id = $2");
        let row: ShareRow = sql(sqlx::AssertSqlSafe(text))
            .bind(id)
            .bind(recipient.get())
            .fetch_optional(&mut tx)
            .await?
            .ok_or(MetaError::NotFound)?;
        if row.name == name {
            return Ok(row);
        }
        let key = name_key(name);
        let taken: Option<i64> = scalar("SELECT id FROM shares WHERE recipient_id = $1 AND name_key = $2 AND id <> $3")
            .bind(recipient.get())
            .bind(&key)
            .bind(id)
            .fetch_optional(&mut tx)
            .await?;
        if taken.is_some() {
            return Err(MetaError::AlreadyExists(format!("`/{SHARED_WITH_ME}/{name}` already exists")));
        }
        sql("UPDATE shares SET name = $2, name_key = $3 WHERE id = $1")
            .bind(id)
            .bind(name)
            .bind(&key)
            .execute(&mut tx)
            .await?;
        let kind = node_kind(&mut tx, row.node_id).await?;
        let from = format!("/{SHARED_WITH_ME}/{}", row.name);
        let path = format!("/{SHARED_WITH_ME}/{name}");
        let change = Change { node: row.node_id, op: "move", kind: &kind, path: &path, from: Some(&from) };
        journal(&mut tx, recipient.get(), now_ms(), change).await?;
        tx.commit().await?;
        self.invalidate(super::notify::Invalidate::Space(recipient.get())).await;
        Ok(ShareRow { name: name.to_string(), ..row })
    }

    /// What `recipient` reaches as `Shared with me/<name>`: None if there is no such share, its
    /// owner is disabled, or its node is in the trash. Read from the database on every call.
    pub async fn shared_grant(&self, recipient: SpaceId, name: &str) -> MetaResult<Option<Grant>> {
        let text = format!(
            "SELECT {SHARE_COLS}, u.username, u.disabled FROM shares s JOIN users u ON u.id = s.owner_id \
             WHERE s.recipient_id = $1 AND s.name_key = $2"
        );
        let found: Option<GrantRaw> = sql(sqlx::AssertSqlSafe(text))
            .bind(recipient.get())
            .bind(name_key(name))
            .fetch_optional(&mut self.db())
            .await?;
        let Some(g) = found.filter(|g| !g.disabled) else { return Ok(None) };
        let Some(root) = self.live_path(g.row.owner_id, g.row.node_id).await? else { return Ok(None) };
        let node: NodeRow = sql(NODE_SQL).bind(g.row.node_id).fetch_one(&mut self.db()).await?;
        let permission = self.effective_permission(&g.row).await?;
        Ok(Some(Grant {
            share_id: g.row.id,
            owner: SpaceId::stored(g.row.owner_id),
            owner_name: g.username,
            node,
            root,
            permission,
            name: g.row.name,
        }))
    }

    /// Whether some version of file `node` (a node of the owner's space, reached through a
    /// share) is made of, among others, block `hash`: what lets a recipient fetch that block.
    pub async fn node_has_block(&self, node: i64, hash: &str) -> MetaResult<bool> {
        let found: Option<i64> = scalar(
            "SELECT vb.version_id FROM version_blocks vb JOIN versions v ON v.id = vb.version_id \
             WHERE vb.hash = $1 AND v.node_id = $2 LIMIT 1",
        )
        .bind(hash)
        .bind(node)
        .fetch_optional(&mut self.db())
        .await?;
        Ok(found.is_some())
    }

    /// Remembers that the recipient of share `share` uploaded block `hash` through it (the
    /// upload carried the bytes, checked against the hash).
    pub async fn record_share_upload(&self, share: i64, hash: &str) -> MetaResult<()> {
        sql("INSERT INTO share_uploads (share_id, hash) VALUES ($1, $2) ON CONFLICT (share_id, hash) DO NOTHING")
            .bind(share)
            .bind(hash)
            .execute(&mut self.db())
            .await?;
        Ok(())
    }

    /// Of `hashes`, those a commit through share `share` to file `node` (None: a new file) may
    /// not name: neither uploaded through the share nor part of a version of that file. In
    /// order, without repeats; two queries per 500 distinct hashes (`IN` lists), not two per
    /// block: a commit of a large file names thousands.
    pub async fn share_unproven_blocks(
        &self,
        share: i64,
        node: Option<i64>,
        hashes: &[String],
    ) -> MetaResult<Vec<String>> {
        let mut seen = std::collections::HashSet::new();
        let distinct: Vec<&String> = hashes.iter().filter(|h| seen.insert(h.as_str())).collect();
        let mut proven: std::collections::HashSet<String> = std::collections::HashSet::new();
        for chunk in distinct.chunks(super::files::CHUNK) {
            let text = format!(
                "SELECT hash FROM share_uploads WHERE share_id = $1 AND hash IN ({})",
                super::files::in_list(2, chunk.len())
            );
            let mut q = scalar::<String>(sqlx::AssertSqlSafe(text)).bind(share);
            for h in chunk {
                q = q.bind(*h);
            }
            proven.extend(q.fetch_all(&mut self.db()).await?);
            let Some(n) = node else { continue };
            let rest: Vec<&&String> = chunk.iter().filter(|h| !proven.contains(h.as_str())).collect();
            if rest.is_empty() {
                continue;
            }
            let text = format!(
                "SELECT DISTINCT vb.hash FROM version_blocks vb JOIN versions v ON v.id = vb.version_id \
                 WHERE v.node_id = $1 AND vb.hash IN ({})",
                super::files::in_list(2, rest.len())
            );
            let mut q = scalar::<String>(sqlx::AssertSqlSafe(text)).bind(n);
            for h in rest {
                q = q.bind(*h);
            }
            proven.extend(q.fetch_all(&mut self.db()).await?);
        }
        Ok(distinct.into_iter().filter(|h| !proven.contains(h.as_str())).cloned().collect())
    }

    /// The path of node `node` in `space` now, or None if it (or a folder above it) is in the
    /// trash, or it is not a node of that space.
    async fn live_path(&self, space: i64, node: i64) -> MetaResult<Option<RemotePath>> {
        Ok(self.path_of(space, node).await?.and_then(|(path, live)| live.then_some(path)))
    }

    /// The path of node `node` in `space` (where it was, for a node in the trash or under a
    /// trashed folder) and whether it is live; None if it is not a node of that space.
    pub(super) async fn path_of(&self, space: i64, node: i64) -> MetaResult<Option<(RemotePath, bool)>> {
        match super::links::node_path(&mut self.db(), space, node).await {
            Ok((_, path, live)) => Ok(Some((path, live))),
            Err(MetaError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The kind ("file" or "dir") of node `node`.
async fn node_kind(c: &mut impl TxConn, node: i64) -> MetaResult<String> {
    let kind: Option<String> = scalar("SELECT kind FROM nodes WHERE id = $1").bind(node).fetch_optional(c).await?;
    Ok(kind.unwrap_or_else(|| "file".into()))
}

/// Journals `op` of a share's entry `/Shared with me/<name>` in the recipient's space (none
/// for a group share itself: its members' entries are journaled each).
async fn journal_entry(c: &mut impl TxConn, row: &ShareRow, kind: &str, op: &str, now: i64) -> MetaResult<()> {
    let Some(recipient) = row.recipient_id else { return Ok(()) };
    let path = format!("/{SHARED_WITH_ME}/{}", row.name);
    journal(c, recipient, now, Change { node: row.node_id, op, kind, path: &path, from: None }).await
}

/// Adds `recipient`'s entry for `node` (a user share, or with `parent` a member's entry of a
/// group share), named uniquely among their entries, and journals it (with `Shared with me`
/// itself for their first). Inside the recipient's space transaction.
async fn insert_entry(
    c: &mut impl TxConn,
    owner: i64,
    node: &NodeRow,
    recipient: i64,
    parent: Option<i64>,
    permission: SharePermission,
    now: i64,
) -> MetaResult<ShareRow> {
    let taken: Vec<String> =
        scalar("SELECT name_key FROM shares WHERE recipient_id = $1").bind(recipient).fetch_all(&mut *c).await?;
    let name = unique_name(&node.name, &taken);
    let text = format!(
        "INSERT INTO shares (owner_id, node_id, recipient_id, parent_id, permission, name, name_key, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {}",
        SHARE_COLS.replace("s.", "")
    );
    let row: ShareRow = sql(sqlx::AssertSqlSafe(text))
        .bind(owner)
        .bind(node.id)
        .bind(recipient)
        .bind(parent)
        .bind(permission.as_str())
        .bind(&name)
        .bind(name_key(&name))
        .bind(now)
        .fetch_one(&mut *c)
        .await?;
    if taken.is_empty() {
        journal_index(c, recipient, now, "mkdir").await?;
    }
    let op = if node.is_dir() { "mkdir" } else { "create" };
    journal_entry(c, &row, &node.kind, op, now).await?;
    Ok(row)
}

/// A unique violation of [`insert_entry`] as "already exists" with `what`.
fn already(e: MetaError, what: impl FnOnce() -> String) -> MetaError {
    match e {
        MetaError::Db(d) => MetaError::from_insert(d, what),
        other => other,
    }
}

/// Journals `op` of `/Shared with me` itself (node 0, as its listing entry says) in the
/// recipient's space: it appears with the first share and goes with the last.
async fn journal_index(c: &mut impl TxConn, recipient: i64, now: i64, op: &str) -> MetaResult<()> {
    let path = format!("/{SHARED_WITH_ME}");
    journal(c, recipient, now, Change { node: 0, op, kind: "dir", path: &path, from: None }).await
}

#[derive(sqlx::FromRow)]
struct OutgoingRaw {
    #[sqlx(flatten)]
    row: ShareRow,
    username: Option<String>,
    group_name: Option<String>,
}

#[derive(sqlx::FromRow)]
struct IncomingRaw {
    #[sqlx(flatten)]
    row: ShareRow,
    owner: String,
    kind: String,
    size: i64,
    modified_at: i64,
    group_name: Option<String>,
}

#[derive(sqlx::FromRow)]
struct AdminRaw {
    #[sqlx(flatten)]
    row: ShareRow,
    username: Option<String>,
    group_name: Option<String>,
    owner: String,
}

#[derive(sqlx::FromRow)]
struct GrantRaw {
    #[sqlx(flatten)]
    row: ShareRow,
    username: String,
    disabled: bool,
}

/// `name`, or `name (2)`, `name (3)`, ... (before the extension of a file name), whichever
/// first is not among `taken` (name keys).
fn unique_name(name: &str, taken: &[String]) -> String {
    let free = |n: &str| !taken.iter().any(|t| *t == name_key(n));
    if free(name) {
        return name.to_string();
    }
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i..]),
        _ => (name, ""),
    };
    (2..).map(|i| format!("{stem} ({i}){ext}")).find(|n| free(n)).unwrap_or_else(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_unique_per_recipient() {
        let taken = vec![name_key("Report.pdf"), name_key("Report (2).pdf"), name_key("Team")];
        assert_eq!(unique_name("report.PDF", &taken), "report (3).PDF");
        assert_eq!(unique_name("team", &taken), "team (2)");
        assert_eq!(unique_name("Other", &taken), "Other");
        assert_eq!(unique_name(".hidden", &[name_key(".hidden")]), ".hidden (2)");
    }
}
