//! Reading the change journal for the change feed (`GET /api/v1/changes`).
//!
//! The rows are written by the namespace methods (`tree.rs`, `files.rs`) through `journal!`,
//! inside their transactions and under the space's journal lock, so that within a space the
//! order of `seq` is the order of commits: a reader that has seen seq N will never see a
//! smaller one of the same space appear later.

use nimbus_proto::names::SHARED_WITH_ME;

use super::SpaceId;
use super::engine::{scalar, sql};
use super::hot::ChangeWatch;
use super::{Meta, MetaResult};

/// One journal row as the feed reports it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChangeRow {
    pub seq: i64,
    pub node_id: Option<i64>,
    pub op: String,
    pub path: Option<String>,
    pub from_path: Option<String>,
    /// "file" or "dir"; for rows journaled before kinds were recorded, the node's kind if it
    /// still exists, else None.
    pub kind: Option<String>,
    pub at: i64,
}

/// A share as the recipient's change feed follows it.
#[derive(Debug, Clone)]
pub struct FeedShare {
    pub share_id: i64,
    pub owner: SpaceId,
    /// The shared node.
    pub node: i64,
    /// Its path in the owner's space now.
    pub root: String,
    /// The recipient's entry under `Shared with me`.
    pub name: String,
    pub kind: String,
}

impl FeedShare {
    /// A change of the owner's journal as the recipient of `share` sees it: paths under
    /// `/Shared with me/<name>`, a move across the share's edge as a create or a delete, the
    /// shared node (or a folder above it) trashed or restored as its entry going or coming back.
    /// None if nothing the recipient sees changed (a move of the shared node itself: its entry
    /// stays where it is).
    pub fn as_recipient(&self, row: ChangeRow) -> Option<ChangeRow> {
        let share = self;
        let entry = format!("/{SHARED_WITH_ME}/{}", share.name);
        let shown = |p: &str| -> Option<String> {
            if p == share.root {
                Some(entry.clone())
            } else {
                p.strip_prefix(share.root.as_str())
                    .filter(|rest| rest.starts_with('/'))
                    .map(|rest| format!("{entry}{rest}"))
            }
        };
        let path = row.path.as_deref().unwrap_or_default();
        let to = shown(path);
        if row.op == "move" {
            if row.node_id == Some(share.node) {
                return None;
            }
            let from = row.from_path.as_deref().and_then(shown);
            let created = if row.kind.as_deref() == Some("dir") { "mkdir" } else { "create" };
            let (op, path, from) = match (to, from) {
                (Some(t), Some(f)) => ("move", t, Some(f)),
                (Some(t), None) => (created, t, None),
                (None, Some(f)) => ("delete", f, None),
                (None, None) => return None,
            };
            return Some(ChangeRow { op: op.into(), path: Some(path), from_path: from, ..row });
        }
        match to {
            Some(t) => Some(ChangeRow { path: Some(t), from_path: None, ..row }),
            // A folder above the shared node went to the trash or came back: so did the entry.
            None if matches!(row.op.as_str(), "delete" | "purge" | "restore")
                && share.root.starts_with(&format!("{path}/")) =>
            {
                let op = if row.op == "restore" { "restore" } else { "delete" };
                Some(ChangeRow {
                    op: op.into(),
                    path: Some(entry),
                    from_path: None,
                    node_id: Some(share.node),
                    kind: Some(share.kind.clone()),
                    ..row
                })
            }
            None => None,
        }
    }
}

impl Meta {
    /// The seq of the space's newest change, 0 if it has none.
    pub async fn latest_change(&self, space: SpaceId) -> MetaResult<i64> {
        let space = space.get();
        let latest: Option<i64> = {
            let mut db = self.db();
            scalar("SELECT MAX(seq) FROM changes WHERE space_id = $1").bind(space).fetch_one(&mut db).await?
        };
        Ok(latest.unwrap_or(0))
    }

    /// Up to `limit` changes of the space with seq > `after`, oldest first, and the space's
    /// latest seq, read before them (so a cursor beyond it is one the database never issued
    /// for this space, e.g. after a restore from backup).
    pub async fn changes_after(&self, space: SpaceId, after: i64, limit: i64) -> MetaResult<(Vec<ChangeRow>, i64)> {
        let space = space.get();
        let latest = self.latest_change(SpaceId::stored(space)).await?;
        if after > latest {
            return Ok((Vec::new(), latest));
        }
        let rows: Vec<ChangeRow> = {
            let mut db = self.db();
            sql("SELECT c.seq, c.node_id, c.op, c.path, c.from_path, COALESCE(c.kind, n.kind) AS kind, c.at \
             FROM changes c LEFT JOIN nodes n ON n.id = c.node_id AND n.space_id = c.space_id \
             WHERE c.space_id = $1 AND c.seq > $2 ORDER BY c.seq LIMIT $3")
            .bind(space)
            .bind(after)
            .bind(limit)
            .fetch_all(&mut db)
            .await?
        };
        Ok((rows, latest))
    }

    /// What the change feed of `recipient` follows besides their own space: each share given
    /// to them whose owner is active, with where its node is in the owner's space now (in the
    /// trash too: the owner's journal then still names that path, so its delete is reported).
    pub async fn feed_shares(&self, recipient: SpaceId) -> MetaResult<Vec<FeedShare>> {
        let rows: Vec<(i64, i64, i64, String, String)> =
            sql("SELECT s.id, s.owner_id, s.node_id, s.name, n.kind FROM shares s JOIN users u ON u.id = s.owner_id \
             JOIN nodes n ON n.id = s.node_id WHERE s.recipient_id = $1 AND NOT u.disabled ORDER BY s.id")
            .bind(recipient.get())
            .fetch_all(&mut self.db())
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for (share_id, owner, node, name, kind) in rows {
            if let Some(root) = self.path_of(owner, node).await?.map(|(path, _)| path) {
                out.push(FeedShare {
                    share_id,
                    owner: SpaceId::stored(owner),
                    node,
                    root: root.to_string(),
                    name,
                    kind,
                });
            }
        }
        Ok(out)
    }

    /// Up to `limit` changes of the owner's space after `after` (and at most `upto`, the owner's
    /// latest seq read before) that concern `share`: inside the shared node, moves into or out
    /// of it, and the trashing or restoring of it or a folder above it. The filter runs in the
    /// database over the owner's journal index (`space_id, seq`) from the recipient's cursor
    /// on, so a poll reads only the owner's changes since the previous one.
    pub async fn share_changes_after(
        &self,
        share: &FeedShare,
        after: i64,
        upto: i64,
        limit: i64,
    ) -> MetaResult<Vec<ChangeRow>> {
        let under = format!("{}/", share.root);
        // substr counts characters on both engines.
        let n = i64::try_from(under.chars().count()).unwrap_or(i64::MAX);
        let rows: Vec<ChangeRow> =
            sql("SELECT c.seq, c.node_id, c.op, c.path, c.from_path, COALESCE(c.kind, n.kind) AS kind, c.at \
             FROM changes c LEFT JOIN nodes n ON n.id = c.node_id AND n.space_id = c.space_id \
             WHERE c.space_id = $1 AND c.seq > $2 AND c.seq <= $3 AND ( \
               c.path = $4 OR substr(c.path, 1, CAST($5 AS INTEGER)) = $6 OR c.from_path = $4 \
               OR substr(c.from_path, 1, CAST($5 AS INTEGER)) = $6 \
               OR (c.op IN ('delete', 'restore', 'purge') AND substr($6, 1, length(c.path) + 1) = c.path || '/')) \
             ORDER BY c.seq LIMIT $7")
            .bind(share.owner.get())
            .bind(after)
            .bind(upto)
            .bind(&share.root)
            .bind(n)
            .bind(&under)
            .bind(limit)
            .fetch_all(&mut self.db())
            .await?;
        Ok(rows)
    }

    /// Registers for wake-ups when this process commits a change of `space`. Register before
    /// querying: a change committed between the query and the wait then still wakes.
    pub fn watch_changes(&self, space: SpaceId) -> ChangeWatch {
        let space = space.get();
        self.hot.watch_space(space)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::{Base, CommitSpec, LockTokens};
    use nimbus_proto::RemotePath;

    fn path(s: &str) -> RemotePath {
        RemotePath::parse(s).expect("valid path")
    }

    async fn sqlite() -> (tempfile::TempDir, Meta, SpaceId) {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("meta.db").display());
        let meta = Meta::connect(&url).await.expect("connect");
        let user = meta.create_user("alice", "x", "user", None).await.expect("user");
        (dir, meta, SpaceId::stored(user.id))
    }

    fn ops(rows: &[ChangeRow]) -> Vec<(String, String, String, Option<String>)> {
        rows.iter()
            .map(|r| {
                (
                    r.op.clone(),
                    r.kind.clone().unwrap_or_default(),
                    r.path.clone().unwrap_or_default(),
                    r.from_path.clone(),
                )
            })
            .collect()
    }

    fn own(s: &str) -> String {
        s.to_string()
    }

    #[tokio::test]
    async fn the_journal_records_folders_kinds_and_canonical_paths() {
        let (_dir, meta, space) = sqlite().await;
        let spec = CommitSpec { base: Base::Any, blocks: &[], block_size: 4096, device: None };
        meta.mkdir(space, &path("/Docs"), LockTokens::NONE).await.expect("mkdir");
        // Existing folders are not created again; names are matched case-insensitively and
        // journaled in their stored spelling.
        meta.commit(space, &path("/docs/Sub/a.txt"), &spec, LockTokens::NONE).await.expect("commit");
        meta.commit(space, &path("/DOCS/sub/A.TXT"), &spec, LockTokens::NONE).await.expect("commit again");
        meta.move_node(space, &path("/docs/sub"), &path("/Moved"), false, LockTokens::NONE).await.expect("move");
        let (rows, latest) = meta.changes_after(space, 0, 100).await.expect("changes");
        assert_eq!(
            ops(&rows),
            vec![
                (own("mkdir"), own("dir"), own("/Docs"), None),
                (own("mkdir"), own("dir"), own("/Docs/Sub"), None),
                (own("create"), own("file"), own("/Docs/Sub/a.txt"), None),
                (own("update"), own("file"), own("/Docs/Sub/a.txt"), None),
                (own("move"), own("dir"), own("/Moved"), Some(own("/Docs/Sub"))),
            ]
        );
        assert_eq!(latest, rows.last().map_or(0, |r| r.seq));
        assert!(rows.windows(2).all(|w| w[0].seq < w[1].seq));
        let (page, _) = meta.changes_after(space, rows[1].seq, 2).await.expect("page");
        assert_eq!(page.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![rows[2].seq, rows[3].seq]);
        // A cursor the space never reached.
        let (none, l) = meta.changes_after(space, latest + 1, 100).await.expect("future");
        assert!(none.is_empty() && l == latest);
    }

    fn share() -> FeedShare {
        FeedShare {
            share_id: 1,
            owner: SpaceId::stored(2),
            node: 10,
            root: "/Projects/Plan".into(),
            name: "Plan".into(),
            kind: "dir".into(),
        }
    }

    fn row(op: &str, path: &str, from: Option<&str>, node: i64) -> ChangeRow {
        ChangeRow {
            seq: 5,
            node_id: Some(node),
            op: op.into(),
            path: Some(path.into()),
            from_path: from.map(Into::into),
            kind: Some("file".into()),
            at: 0,
        }
    }

    fn seen(r: Option<ChangeRow>) -> Option<(String, String, Option<String>)> {
        r.map(|r| (r.op, r.path.unwrap_or_default(), r.from_path))
    }

    #[test]
    fn owners_changes_are_shown_as_the_recipient_sees_them() {
        let s = share();
        let w = |op: &str, p: &str, f: Option<&str>| Some((op.to_string(), p.to_string(), f.map(String::from)));
        let inside = "/Shared with me/Plan/a.txt";
        assert_eq!(seen(s.as_recipient(row("update", "/Projects/Plan/a.txt", None, 11))), w("update", inside, None));
        assert_eq!(
            seen(s.as_recipient(row("move", "/Projects/Plan/b.txt", Some("/Projects/Plan/a.txt"), 11))),
            w("move", "/Shared with me/Plan/b.txt", Some(inside))
        );
        // Across the edge: in is a create, out is a delete; the owner's paths never show.
        assert_eq!(
            seen(s.as_recipient(row("move", "/Projects/Plan/a.txt", Some("/private.txt"), 11))),
            w("create", inside, None)
        );
        assert_eq!(
            seen(s.as_recipient(row("move", "/elsewhere.txt", Some("/Projects/Plan/a.txt"), 11))),
            w("delete", inside, None)
        );
        // A sibling whose name starts the same is outside.
        assert_eq!(seen(s.as_recipient(row("update", "/Projects/Planning/x", None, 12))), None);
        assert_eq!(seen(s.as_recipient(row("update", "/Projects/secret.txt", None, 12))), None);
        // The shared node itself moved: its entry stays.
        assert_eq!(seen(s.as_recipient(row("move", "/Projects/Plan", Some("/Old/Plan"), 10))), None);
        // The shared node or a folder above it to the trash and back.
        assert_eq!(
            seen(s.as_recipient(row("delete", "/Projects/Plan", None, 10))),
            w("delete", "/Shared with me/Plan", None)
        );
        assert_eq!(
            seen(s.as_recipient(row("delete", "/Projects", None, 3))),
            w("delete", "/Shared with me/Plan", None)
        );
        assert_eq!(
            seen(s.as_recipient(row("restore", "/Projects", None, 3))),
            w("restore", "/Shared with me/Plan", None)
        );
        assert_eq!(seen(s.as_recipient(row("mkdir", "/Projects", None, 3))), None);
    }

    /// `postgres://u@h:p/admin?opts` → the same URL naming database `db`.
    fn with_database(admin_url: &str, db: &str) -> String {
        let (base, query) = admin_url.split_at(admin_url.find('?').unwrap_or(admin_url.len()));
        let authority_end = base.find("://").map_or(0, |i| i + 3);
        let base = match base[authority_end..].find('/') {
            Some(i) => &base[..authority_end + i],
            None => base,
        };
        format!("{base}/{db}{query}")
    }

    /// On PostgreSQL, concurrent writers of one space must not commit seqs out of order: a
    /// reader following the feed while they run must end up with every change, none skipped.
    /// Runs when `NIMBUS_TEST_PG_URL` names a throwaway cluster (`infra/postgres.sh start`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres_feed_never_skips_a_change() {
        use sqlx::Connection;
        let Some(admin) = std::env::var("NIMBUS_TEST_PG_URL").ok().filter(|v| !v.is_empty()) else {
            eprintln!("skipping: set NIMBUS_TEST_PG_URL (infra/postgres.sh start)");
            return;
        };
        let name = format!("nimbus_u_{:016x}", rand::random::<u64>());
        let mut conn = sqlx::PgConnection::connect(&admin).await.expect("connect to NIMBUS_TEST_PG_URL");
        // `name` is ours: a prefix and hex digits.
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .expect("create db");
        let meta = Meta::connect(&with_database(&admin, &name)).await.expect("connect");
        let space = SpaceId::stored(meta.create_user("alice", "x", "user", None).await.expect("user").id);
        let other = SpaceId::stored(meta.create_user("bob", "x", "user", None).await.expect("user").id);

        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (meta, done) = (meta.clone(), done.clone());
            tokio::spawn(async move {
                let (mut cursor, mut seen) = (0i64, Vec::new());
                loop {
                    let finished = done.load(std::sync::atomic::Ordering::SeqCst);
                    let (rows, _) = meta.changes_after(space, cursor, 1000).await.expect("read");
                    if let Some(last) = rows.last() {
                        cursor = last.seq;
                    }
                    seen.extend(rows.iter().map(|r| r.seq));
                    if finished && rows.is_empty() {
                        return seen;
                    }
                }
            })
        };
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let meta = meta.clone();
                tokio::spawn(async move {
                    let spec = CommitSpec { base: Base::Any, blocks: &[], block_size: 4096, device: None };
                    for i in 0..25 {
                        // Some writes in another space interleave their seqs with this one's.
                        let s = if i % 5 == 4 { other } else { space };
                        meta.commit(s, &path(&format!("/w{w}/f{i}.txt")), &spec, LockTokens::NONE)
                            .await
                            .expect("commit");
                    }
                })
            })
            .collect();
        for w in writers {
            w.await.expect("writer");
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let seen = reader.await.expect("reader");
        let (all, _) = meta.changes_after(space, 0, 1000).await.expect("all");
        let all: Vec<i64> = all.iter().map(|r| r.seq).collect();
        meta.close().await;
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
            .execute(&mut conn)
            .await;
        // 8 writers x 20 files in this space, each with its folder once.
        assert_eq!(all.len(), 8 * 20 + 8);
        assert_eq!(seen, all, "the reader skipped or repeated changes");
    }
}
