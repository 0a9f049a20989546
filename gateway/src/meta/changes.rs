//! Reading the change journal for the change feed (`GET /api/v1/changes`).
//!
//! The rows are written by the namespace methods (`tree.rs`, `files.rs`) through `journal!`,
//! inside their transactions and under the space's journal lock, so that within a space the
//! order of `seq` is the order of commits: a reader that has seen seq N will never see a
//! smaller one of the same space appear later.

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

    /// Registers for wake-ups when this process commits a change of `space`. Register before
    /// querying: a change committed between the query and the wait then still wakes.
    pub fn watch_changes(&self, space: SpaceId) -> ChangeWatch {
        let space = space.get();
        self.hot.watch_space(space)
    }
}

#[cfg(test)]
mod tests {
    use nimbus_proto::RemotePath;

    use super::*;
    use crate::meta::{Base, CommitSpec, LockTokens};

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
