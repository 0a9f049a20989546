//! Groups of users, made by administrators: what a share can be given to besides one user.
//!
//! A group share reaches each member through an entry of their own (a row of `shares` with
//! `parent_id`, see meta/shares.rs). Every change here that adds or takes away a member's
//! access brings those entries in step ([`Meta::sync_entry`]) before it returns, so the next
//! request on any gateway sees it: entries are read from the database on every request.

use nimbus_proto::names::name_key;

use super::engine::{scalar, sql};
use super::{Meta, MetaError, MetaResult, now_ms};

/// A group as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct GroupRow {
    pub id: i64,
    pub name: String,
    pub created_at: i64,
}

/// A group with its members' usernames, by name.
#[derive(Debug, Clone)]
pub struct GroupWithMembers {
    pub group: GroupRow,
    pub members: Vec<String>,
}

impl Meta {
    /// Makes group `name` (already checked against the naming rules); AlreadyExists if a group
    /// of that name (case-insensitively) exists.
    pub async fn create_group(&self, name: &str) -> MetaResult<GroupRow> {
        let mut tx = self.begin_write().await?;
        let row: GroupRow = sql(
            "INSERT INTO user_groups (name, name_key, created_at) VALUES ($1, $2, $3) RETURNING id, name, created_at",
        )
        .bind(name)
        .bind(name_key(name))
        .bind(now_ms())
        .fetch_one(&mut tx)
        .await
        .map_err(|e| MetaError::from_insert(e, || format!("a group named `{name}` already exists")))?;
        tx.commit().await?;
        Ok(row)
    }

    pub async fn group(&self, id: i64) -> MetaResult<Option<GroupRow>> {
        Ok(sql("SELECT id, name, created_at FROM user_groups WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut self.db())
            .await?)
    }

    pub async fn group_by_name(&self, name: &str) -> MetaResult<Option<GroupRow>> {
        Ok(sql("SELECT id, name, created_at FROM user_groups WHERE name_key = $1")
            .bind(name_key(name))
            .fetch_optional(&mut self.db())
            .await?)
    }

    /// Every group with its members, by name.
    pub async fn groups(&self) -> MetaResult<Vec<GroupWithMembers>> {
        let groups: Vec<GroupRow> =
            sql("SELECT id, name, created_at FROM user_groups ORDER BY name_key").fetch_all(&mut self.db()).await?;
        let pairs: Vec<(i64, String)> = sql(
            "SELECT m.group_id, u.username FROM group_members m JOIN users u ON u.id = m.user_id ORDER BY u.username_key",
        )
        .fetch_all(&mut self.db())
        .await?;
        Ok(groups
            .into_iter()
            .map(|group| {
                let members = pairs.iter().filter(|(g, _)| *g == group.id).map(|(_, u)| u.clone()).collect();
                GroupWithMembers { group, members }
            })
            .collect())
    }

    /// The members' usernames of group `id`, by name.
    pub async fn group_members(&self, id: i64) -> MetaResult<Vec<String>> {
        Ok(scalar(
            "SELECT u.username FROM group_members m JOIN users u ON u.id = m.user_id WHERE m.group_id = $1 \
             ORDER BY u.username_key",
        )
        .bind(id)
        .fetch_all(&mut self.db())
        .await?)
    }

    pub(super) async fn group_member_ids(&self, id: i64) -> MetaResult<Vec<i64>> {
        Ok(scalar("SELECT user_id FROM group_members WHERE group_id = $1").bind(id).fetch_all(&mut self.db()).await?)
    }

    /// Renames group `id`; its shares and members stay.
    pub async fn rename_group(&self, id: i64, name: &str) -> MetaResult<GroupRow> {
        let mut tx = self.begin_write().await?;
        let n = sql("UPDATE user_groups SET name = $2, name_key = $3 WHERE id = $1")
            .bind(id)
            .bind(name)
            .bind(name_key(name))
            .execute(&mut tx)
            .await
            .map_err(|e| MetaError::from_insert(e, || format!("a group named `{name}` already exists")))?;
        if n == 0 {
            return Err(MetaError::NotFound);
        }
        tx.commit().await?;
        self.group(id).await?.ok_or(MetaError::NotFound)
    }

    /// Deletes group `id`: its shares end for every member. Returns it.
    pub async fn delete_group(&self, id: i64) -> MetaResult<GroupRow> {
        let group = self.group(id).await?.ok_or(MetaError::NotFound)?;
        let members = self.group_member_ids(id).await?;
        let nodes: Vec<i64> =
            scalar("SELECT node_id FROM shares WHERE group_id = $1").bind(id).fetch_all(&mut self.db()).await?;
        // The group's shares go with it (ON DELETE CASCADE); the members' entries are then
        // brought in step one by one, each journaled in the member's space.
        let n = sql("DELETE FROM user_groups WHERE id = $1").bind(id).execute(&mut self.db()).await?;
        if n == 0 {
            return Err(MetaError::NotFound);
        }
        for m in &members {
            for node in &nodes {
                self.sync_entry(*m, *node).await?;
            }
        }
        Ok(group)
    }

    /// Adds user `user` to group `id`: the group's shares reach them at once. AlreadyExists if
    /// they are a member.
    pub async fn add_group_member(&self, id: i64, user: i64, username: &str) -> MetaResult<()> {
        let group = self.group(id).await?.ok_or(MetaError::NotFound)?;
        sql("INSERT INTO group_members (group_id, user_id, added_at) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(user)
            .bind(now_ms())
            .execute(&mut self.db())
            .await
            .map_err(|e| {
                MetaError::from_insert(e, || format!("`{username}` is already in the group `{}`", group.name))
            })?;
        for node in self.group_share_nodes(id).await? {
            self.sync_entry(user, node).await?;
        }
        Ok(())
    }

    /// Takes user `user` out of group `id`: the group's shares stop reaching them at once
    /// (unless something else gives them the same node). NotFound if they were not a member.
    pub async fn remove_group_member(&self, id: i64, user: i64) -> MetaResult<()> {
        let n = sql("DELETE FROM group_members WHERE group_id = $1 AND user_id = $2")
            .bind(id)
            .bind(user)
            .execute(&mut self.db())
            .await?;
        if n == 0 {
            return Err(MetaError::NotFound);
        }
        // Having left one of the group's shares does not outlive the membership: added again,
        // they see all of the group's shares again.
        sql("DELETE FROM share_leaves WHERE user_id = $2 AND share_id IN (SELECT id FROM shares WHERE group_id = $1)")
            .bind(id)
            .bind(user)
            .execute(&mut self.db())
            .await?;
        for node in self.group_share_nodes(id).await? {
            self.sync_entry(user, node).await?;
        }
        Ok(())
    }

    async fn group_share_nodes(&self, id: i64) -> MetaResult<Vec<i64>> {
        Ok(scalar("SELECT node_id FROM shares WHERE group_id = $1").bind(id).fetch_all(&mut self.db()).await?)
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sqlx::Row;
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

    /// A share as the test reads it back: id, recipient, group, parent, permission.
    type Share = (i64, Option<i64>, Option<i64>, Option<i64>, String);

    /// The migration before groups.
    const BEFORE_GROUPS: i64 = 20261129700001;

    /// SQLite cannot drop a NOT NULL, so the groups migration rebuilds `shares`: the shares,
    /// the upload proofs that hang on them (and their cascade) and the id sequence must all
    /// come through, with foreign keys on as the gateway runs.
    #[tokio::test]
    async fn the_sqlite_rebuild_of_shares_keeps_rows_proofs_and_ids() -> anyhow::Result<()> {
        let opts = SqliteConnectOptions::from_str("sqlite::memory:")?.foreign_keys(true);
        let pool = SqlitePoolOptions::new().max_connections(1).connect_with(opts).await?;
        super::super::SQLITE_MIGRATIONS.run_to(BEFORE_GROUPS, &pool).await?;
        for q in [
            "INSERT INTO users (id, username, username_key, password_hash, role, used_bytes, disabled, created_at, \
             updated_at) VALUES (1, 'a', 'a', 'x', 'user', 0, FALSE, 0, 0), (2, 'b', 'b', 'x', 'user', 0, FALSE, 0, 0)",
            "INSERT INTO nodes (id, space_id, parent_id, name, name_key, kind, size, created_at, modified_at) VALUES \
             (10, 1, NULL, '', '', 'dir', 0, 0, 0), (11, 1, 10, 'P', 'p', 'dir', 0, 0, 0), (12, 1, 10, 'Q', 'q', 'dir', 0, 0, 0)",
            "INSERT INTO shares (owner_id, node_id, recipient_id, permission, name, name_key, created_at) VALUES \
             (1, 11, 2, 'read', 'P', 'p', 0), (1, 12, 2, 'write', 'Q', 'q', 0), (2, 12, 1, 'read', 'Z', 'z', 0)",
            "INSERT INTO share_uploads (share_id, hash) VALUES (2, 'h1'), (2, 'h2')",
            // The newest share revoked: its id must not be given again.
            "DELETE FROM shares WHERE id = 3",
        ] {
            sqlx::query(q).execute(&pool).await?;
        }
        super::super::SQLITE_MIGRATIONS.run(&pool).await?;

        let rows = sqlx::query("SELECT id, recipient_id, group_id, parent_id, permission FROM shares ORDER BY id")
            .fetch_all(&pool)
            .await?;
        let got: Vec<Share> = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))).collect();
        assert_eq!(got, [(1, Some(2), None, None, "read".into()), (2, Some(2), None, None, "write".into())]);
        let proofs: Vec<String> = sqlx::query_scalar("SELECT hash FROM share_uploads WHERE share_id = 2 ORDER BY hash")
            .fetch_all(&pool)
            .await?;
        assert_eq!(proofs, ["h1", "h2"]);
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO shares (owner_id, node_id, recipient_id, permission, name, name_key, created_at) \
             VALUES (2, 11, 1, 'read', 'W', 'w', 0) RETURNING id",
        )
        .fetch_one(&pool)
        .await?;
        assert_eq!(id, 4, "an id of a revoked share was given again");
        // A share with neither a user nor a group is refused.
        let neither = "INSERT INTO shares (owner_id, node_id, recipient_id, group_id, permission, name, name_key, \
                    created_at) VALUES (1, 11, NULL, NULL, 'read', 'X', 'x', 0)";
        assert!(sqlx::query(neither).execute(&pool).await.is_err());
        // The proofs still go with their share.
        sqlx::query("DELETE FROM shares WHERE id = 2").execute(&pool).await?;
        let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM share_uploads").fetch_one(&pool).await?;
        assert_eq!(left, 0);
        assert!(sqlx::query("PRAGMA foreign_key_check").fetch_all(&pool).await?.is_empty());
        Ok(())
    }
}
