//! The namespace: path resolution, listing, mkdir, move, copy, trash.
//!
//! Paths are resolved by walking from the space's root one component at a time through the
//! live-name index, so a path can only ever reach nodes of the caller's space. Move and rename
//! of anything, however large, is one row update.

use nimbus_proto::RemotePath;
use nimbus_proto::names::name_key;

use super::SpaceId;
use super::engine::{Conn, TxConn, scalar, sql};
use super::journal::{Change, journal};
use super::locks::{LockTokens, check_locks, drop_locks_under};
use super::quota::charge;
use super::retention::purge_item;
use super::usage::trash_subtree_usage;
use super::{Limit, Meta, MetaError, MetaResult, NodeRow, Usage, node_cols, now_ms};

pub(crate) const ROOT_SQL: &str =
    concat!("SELECT ", node_cols!(), " FROM nodes WHERE space_id = $1 AND parent_id IS NULL");
pub(crate) const CHILD_SQL: &str =
    concat!("SELECT ", node_cols!(), " FROM nodes WHERE parent_id = $1 AND name_key = $2 AND trashed_at IS NULL");
pub(crate) const NODE_SQL: &str = concat!("SELECT ", node_cols!(), " FROM nodes WHERE id = $1");

/// Resolves a path to its live node and its canonical spelling (the stored names).
/// NotFound if any component is missing or not a directory.
pub(crate) async fn resolve(c: &mut impl Conn, space: i64, path: &RemotePath) -> MetaResult<(NodeRow, RemotePath)> {
    let mut cur: NodeRow = sql(ROOT_SQL).bind(space).fetch_optional(c).await?.ok_or(MetaError::NotFound)?;
    let mut canon = RemotePath::root();
    for comp in path.components() {
        if !cur.is_dir() {
            return Err(MetaError::NotFound);
        }
        cur = sql(CHILD_SQL).bind(cur.id).bind(name_key(comp)).fetch_optional(c).await?.ok_or(MetaError::NotFound)?;
        canon = canon.join(&cur.name)?;
    }
    Ok((cur, canon))
}

/// A folder [`ensure_dir`] walked to.
pub(crate) struct EnsuredDir {
    pub dir: NodeRow,
    /// Every folder walked through, the root first and `dir` last.
    pub ids: Vec<i64>,
    /// Whether the last component was created.
    pub created: bool,
    /// The folder's canonical path.
    pub canon: RemotePath,
}

/// Walks to the directory at `path`, creating what is missing (each one journaled as `mkdir`).
pub(crate) async fn ensure_dir(c: &mut impl TxConn, space: i64, path: &RemotePath, now: i64) -> MetaResult<EnsuredDir> {
    let mut cur: NodeRow = sql(ROOT_SQL).bind(space).fetch_optional(c).await?.ok_or(MetaError::NotFound)?;
    let mut ids = vec![cur.id];
    let mut created = false;
    let mut walked = RemotePath::root();
    let mut canon = RemotePath::root();
    for comp in path.components() {
        walked = walked.join(comp)?;
        let key = name_key(comp);
        let found: Option<NodeRow> = sql(CHILD_SQL).bind(cur.id).bind(&key).fetch_optional(c).await?;
        created = false;
        cur = match found {
            Some(n) if n.is_dir() => n,
            Some(_) => return Err(MetaError::NotADirectory(format!("`{walked}` is a file, not a folder"))),
            None => {
                not_reserved(&canon, comp)?;
                let inserted = sql(
                    "INSERT INTO nodes (space_id, parent_id, name, name_key, kind, size, created_at, modified_at) \
                     VALUES ($1, $2, $3, $4, 'dir', 0, $5, $5) \
                     ON CONFLICT (parent_id, name_key) WHERE trashed_at IS NULL DO NOTHING",
                )
                .bind(space)
                .bind(cur.id)
                .bind(comp.as_str())
                .bind(&key)
                .bind(now)
                .execute(c)
                .await?;
                let n: NodeRow =
                    sql(CHILD_SQL).bind(cur.id).bind(&key).fetch_optional(c).await?.ok_or(MetaError::NotFound)?;
                if !n.is_dir() {
                    return Err(MetaError::NotADirectory(format!("`{walked}` is a file, not a folder")));
                }
                // Only a folder this transaction made is news for the feed.
                if inserted > 0 {
                    created = true;
                    let shown = canon.join(&n.name)?.to_string();
                    journal(c, space, now, Change { node: n.id, op: "mkdir", kind: "dir", path: &shown, from: None })
                        .await?;
                }
                n
            }
        };
        ids.push(cur.id);
        canon = canon.join(&cur.name)?;
    }
    Ok(EnsuredDir { dir: cur, ids, created, canon })
}

/// Moves `node` (at `path`) with its subtree to the trash: marks it, records the trash item
/// with what it holds (moved from current and older versions to trash usage) and journals the
/// delete. Returns the trash item's id.
pub(crate) async fn trash_node(
    c: &mut impl TxConn,
    space: i64,
    node: &NodeRow,
    path: &str,
    now: i64,
) -> MetaResult<i64> {
    let held = trash_subtree_usage(c, node.id).await?;
    sql("UPDATE nodes SET trashed_at = $2 WHERE id = $1").bind(node.id).bind(now).execute(c).await?;
    let id: i64 = scalar(
        "INSERT INTO trash (space_id, node_id, original_path, deleted_at, current_bytes, versions_bytes) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(space)
    .bind(node.id)
    .bind(path)
    .bind(now)
    .bind(held.current)
    .bind(held.versions)
    .fetch_one(c)
    .await?;
    let moved =
        Usage { current: -held.current, versions: -held.versions, trash: held.current + held.versions, pending: 0 };
    charge(c, space, moved, Limit::Free).await?;
    journal(c, space, now, Change { node: node.id, op: "delete", kind: &node.kind, path, from: None }).await?;
    Ok(id)
}

/// A child in a folder listing, and whether it has WebDAV dead properties.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChildRow {
    #[sqlx(flatten)]
    pub node: NodeRow,
    pub has_props: bool,
}

/// One entry of the trash as listed.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TrashItem {
    pub id: i64,
    pub node_id: i64,
    pub original_path: String,
    pub deleted_at: i64,
    pub name: String,
    pub kind: String,
    pub size: i64,
    /// Older versions of its files, also freed when it is purged.
    pub versions_bytes: i64,
}

impl Meta {
    /// The node at `path` and its canonical path.
    pub async fn stat(&self, space: SpaceId, path: &RemotePath) -> MetaResult<(NodeRow, RemotePath)> {
        let space = space.get();
        {
            let mut db = self.db();
            resolve(&mut db, space, path).await
        }
    }

    /// Up to `limit` children of a directory, ordered by name key, after the key `after`.
    pub async fn list_dir(
        &self,
        space: SpaceId,
        path: &RemotePath,
        after: Option<&str>,
        limit: i64,
    ) -> MetaResult<(Vec<NodeRow>, RemotePath)> {
        let space = space.get();
        const SQL: &str = concat!(
            "SELECT ",
            node_cols!(),
            " FROM nodes WHERE parent_id = $1 AND trashed_at IS NULL AND ($2 IS NULL OR name_key > $2) ORDER BY name_key LIMIT $3"
        );
        {
            let mut db = self.db();
            let (dir, canon) = resolve(&mut db, space, path).await?;
            if !dir.is_dir() {
                return Err(MetaError::NotADirectory(format!("`{path}` is a file, not a folder")));
            }
            let rows = sql(SQL).bind(dir.id).bind(after).bind(limit).fetch_all::<NodeRow, _>(&mut db).await?;
            Ok((rows, canon))
        }
    }

    /// Up to `limit` live children of the folder with id `dir` (of `space`), ordered by name
    /// key, after the key `after`, each with whether it has WebDAV dead properties: one page of
    /// a WebDAV listing, read page by page as the answer streams out.
    pub async fn list_children(
        &self,
        space: SpaceId,
        dir: i64,
        after: Option<&str>,
        limit: i64,
    ) -> MetaResult<Vec<ChildRow>> {
        let space = space.get();
        // Two statements rather than `($3 IS NULL OR name_key > $3)`, which the planners cannot
        // turn into an index range: every page would scan the folder from its start.
        const FIRST: &str = concat!(
            "SELECT ",
            node_cols!(),
            ", EXISTS (SELECT 1 FROM dav_props p WHERE p.node_id = nodes.id) AS has_props \
             FROM nodes WHERE parent_id = $1 AND space_id = $2 AND trashed_at IS NULL ORDER BY name_key LIMIT $3"
        );
        const AFTER: &str = concat!(
            "SELECT ",
            node_cols!(),
            ", EXISTS (SELECT 1 FROM dav_props p WHERE p.node_id = nodes.id) AS has_props \
             FROM nodes WHERE parent_id = $1 AND space_id = $2 AND trashed_at IS NULL AND name_key > $4 \
             ORDER BY name_key LIMIT $3"
        );
        {
            let mut db = self.db();
            let q = match after {
                None => sql(FIRST).bind(dir).bind(space).bind(limit),
                Some(a) => sql(AFTER).bind(dir).bind(space).bind(limit).bind(a),
            };
            Ok(q.fetch_all::<ChildRow, _>(&mut db).await?)
        }
    }

    /// Creates a directory and its missing parents. Returns it, whether it was created, and
    /// its canonical path. A folder is not created at a path a lock not in `held` guards
    /// (inside a depth-infinity locked folder, or a locked path).
    pub async fn mkdir(
        &self,
        space: SpaceId,
        path: &RemotePath,
        held: LockTokens<'_>,
    ) -> MetaResult<(NodeRow, bool, RemotePath)> {
        let space = space.get();
        let now = now_ms();
        let mut tx = self.begin_space(space).await?;
        let exists = resolve(&mut tx, space, path).await.is_ok_and(|(n, _)| n.is_dir());
        if !exists {
            check_locks(&mut tx, space, path, false, held).await?;
        }
        let made = ensure_dir(&mut tx, space, path, now).await?;
        tx.commit().await?;
        self.invalidate(super::notify::Invalidate::Space(space)).await;
        Ok((made.dir, made.created, made.canon))
    }

    /// Moves a file or directory to the trash; returns the trash item's id. Refused with
    /// [`MetaError::Locked`] while a lock on the path or below is not in `held`. The path's
    /// locks go.
    pub async fn trash(&self, space: SpaceId, path: &RemotePath, held: LockTokens<'_>) -> MetaResult<i64> {
        let space = space.get();
        if path.is_root() {
            return Err(MetaError::Invalid("the root folder cannot be deleted".into()));
        }
        let now = now_ms();
        let mut tx = self.begin_space(space).await?;
        let (node, canon) = resolve(&mut tx, space, path).await?;
        check_locks(&mut tx, space, &canon, true, held).await?;
        drop_locks_under(&mut tx, space, &canon).await?;
        let trash_id = trash_node(&mut tx, space, &node, &canon.to_string(), now).await?;
        tx.commit().await?;
        self.invalidate(super::notify::Invalidate::Space(space)).await;
        Ok(trash_id)
    }

    /// Moves or renames `from` to `to` in one transaction. With `overwrite`, a file at `to`
    /// goes to the trash (never lost); a directory at `to` is never replaced. The source (and
    /// what is below it) and the target must not be locked by a lock not in `held`. Locks on
    /// the source are released (a lock guards a path, it does not follow the node).
    pub async fn move_node(
        &self,
        space: SpaceId,
        from: &RemotePath,
        to: &RemotePath,
        overwrite: bool,
        held: LockTokens<'_>,
    ) -> MetaResult<(NodeRow, RemotePath)> {
        let space = space.get();
        let (to_parent, to_name) = split(to)?;
        not_reserved(&to_parent, to_name)?;
        if from.is_root() {
            return Err(MetaError::Invalid("the root folder cannot be moved".into()));
        }
        let now = now_ms();
        let mut tx = self.begin_space(space).await?;
        let (src, from_canon) = resolve(&mut tx, space, from).await?;
        check_locks(&mut tx, space, &from_canon, true, held).await?;
        check_locks(&mut tx, space, to, true, held).await?;
        let parent = ensure_dir(&mut tx, space, &to_parent, now).await?;
        let to_canon = parent.canon.join(to_name)?;
        if parent.ids.contains(&src.id) {
            return Err(MetaError::Invalid(format!("cannot move `{from}` into itself")));
        }
        if from_canon != to_canon {
            drop_locks_under(&mut tx, space, &from_canon).await?;
        }
        let key = name_key(to_name);
        let existing: Option<NodeRow> = sql(CHILD_SQL).bind(parent.dir.id).bind(&key).fetch_optional(&mut tx).await?;
        if let Some(ex) = existing.filter(|e| e.id != src.id) {
            if !overwrite || ex.is_dir() || src.is_dir() {
                return Err(MetaError::AlreadyExists(format!("`{to}` already exists")));
            }
            let ex_path = parent.canon.join(&ex.name)?.to_string();
            trash_node(&mut tx, space, &ex, &ex_path, now).await?;
        }
        sql("UPDATE nodes SET parent_id = $2, name = $3, name_key = $4 WHERE id = $1")
            .bind(src.id)
            .bind(parent.dir.id)
            .bind(to_name)
            .bind(&key)
            .execute(&mut tx)
            .await?;
        let (to_shown, from_shown) = (to_canon.to_string(), from_canon.to_string());
        let change = Change { node: src.id, op: "move", kind: &src.kind, path: &to_shown, from: Some(&from_shown) };
        journal(&mut tx, space, now, change).await?;
        let moved: NodeRow = sql(NODE_SQL).bind(src.id).fetch_one(&mut tx).await?;
        tx.commit().await?;
        self.invalidate(super::notify::Invalidate::Space(space)).await;
        Ok((moved, to_canon))
    }

    /// Copies a file or a whole tree. Copies share blocks: only metadata is written. The
    /// target must not be locked by a lock not in `held` (the source is only read).
    pub async fn copy_node(
        &self,
        space: SpaceId,
        from: &RemotePath,
        to: &RemotePath,
        overwrite: bool,
        device: Option<&str>,
        held: LockTokens<'_>,
    ) -> MetaResult<(NodeRow, RemotePath)> {
        let space = space.get();
        let (to_parent, to_name) = split(to)?;
        not_reserved(&to_parent, to_name)?;
        if from.is_root() {
            return Err(MetaError::Invalid("the root folder cannot be copied".into()));
        }
        let now = now_ms();
        let mut tx = self.begin_space(space).await?;
        let (src, _) = resolve(&mut tx, space, from).await?;
        check_locks(&mut tx, space, to, true, held).await?;
        let parent = ensure_dir(&mut tx, space, &to_parent, now).await?;
        let to_canon = parent.canon.join(to_name)?;
        if parent.ids.contains(&src.id) {
            return Err(MetaError::Invalid(format!("cannot copy `{from}` into itself")));
        }
        let key = name_key(to_name);
        let existing: Option<NodeRow> = sql(CHILD_SQL).bind(parent.dir.id).bind(&key).fetch_optional(&mut tx).await?;
        if let Some(ex) = existing {
            if !overwrite || ex.is_dir() || src.is_dir() || ex.id == src.id {
                return Err(MetaError::AlreadyExists(format!("`{to}` already exists")));
            }
            let ex_path = parent.canon.join(&ex.name)?.to_string();
            trash_node(&mut tx, space, &ex, &ex_path, now).await?;
        }
        let kind = src.kind.clone();
        // Breadth-first over a snapshot: (source node, new parent id, new name).
        let mut queue: Vec<(NodeRow, i64, String)> = vec![(src, parent.dir.id, to_name.to_string())];
        let mut top: Option<i64> = None;
        let mut bytes: i64 = 0;
        while let Some((node, new_parent, name)) = queue.pop() {
            let new_id: i64 = scalar(
                "INSERT INTO nodes (space_id, parent_id, name, name_key, kind, size, created_at, modified_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            )
            .bind(space)
            .bind(new_parent)
            .bind(&name)
            .bind(name_key(&name))
            .bind(&node.kind)
            .bind(node.size)
            .bind(now)
            .bind(node.modified_at)
            .fetch_one(&mut tx)
            .await?;
            top.get_or_insert(new_id);
            if let Some(vid) = node.version_id.filter(|_| !node.is_dir()) {
                let new_vid: i64 = scalar(
                    "INSERT INTO versions (node_id, space_id, size, block_size, device, created_at) \
                     SELECT $1, space_id, size, block_size, $3, $4 FROM versions WHERE id = $2 RETURNING id",
                )
                .bind(new_id)
                .bind(vid)
                .bind(device)
                .bind(now)
                .fetch_one(&mut tx)
                .await?;
                sql("INSERT INTO version_blocks (version_id, idx, hash, size) \
                     SELECT $1, idx, hash, size FROM version_blocks WHERE version_id = $2")
                .bind(new_vid)
                .bind(vid)
                .execute(&mut tx)
                .await?;
                sql("UPDATE nodes SET version_id = $2 WHERE id = $1")
                    .bind(new_id)
                    .bind(new_vid)
                    .execute(&mut tx)
                    .await?;
                bytes += node.size;
            }
            if node.is_dir() {
                let children: Vec<NodeRow> =
                    sql(concat!("SELECT ", node_cols!(), " FROM nodes WHERE parent_id = $1 AND trashed_at IS NULL"))
                        .bind(node.id)
                        .fetch_all(&mut tx)
                        .await?;
                for c in children {
                    let n = c.name.clone();
                    queue.push((c, new_id, n));
                }
            }
        }
        charge(&mut tx, space, Usage::current(bytes), Limit::WRITE).await?;
        let top = top.ok_or(MetaError::NotFound)?;
        let to_shown = to_canon.to_string();
        journal(&mut tx, space, now, Change { node: top, op: "create", kind: &kind, path: &to_shown, from: None })
            .await?;
        let copied: NodeRow = sql(NODE_SQL).bind(top).fetch_one(&mut tx).await?;
        tx.commit().await?;
        self.invalidate(super::notify::Invalidate::Space(space)).await;
        Ok((copied, to_canon))
    }

    /// Up to `limit` trash items, newest first, older than the id `before`.
    pub async fn list_trash(&self, space: SpaceId, before: Option<i64>, limit: i64) -> MetaResult<Vec<TrashItem>> {
        let space = space.get();
        {
            let mut db = self.db();
            // An item's size is what its files hold now (a folder's: recorded when it was trashed).
            let items: Vec<TrashItem> =
                sql("SELECT t.id, t.node_id, t.original_path, t.deleted_at, n.name, n.kind, t.current_bytes AS size, \
                 t.versions_bytes FROM trash t JOIN nodes n ON n.id = t.node_id \
                 WHERE t.space_id = $1 AND ($2 IS NULL OR t.id < $2) ORDER BY t.id DESC LIMIT $3")
                .bind(space)
                .bind(before)
                .bind(limit)
                .fetch_all(&mut db)
                .await?;
            Ok(items)
        }
    }

    /// Puts a trashed item back at its original path or at `to`. Returns the node and its path.
    /// Nothing is restored into a path a lock not in `held` guards.
    pub async fn restore_trash(
        &self,
        space: SpaceId,
        trash_id: i64,
        to: Option<&RemotePath>,
        held: LockTokens<'_>,
    ) -> MetaResult<(NodeRow, RemotePath)> {
        let space = space.get();
        let now = now_ms();
        let mut tx = self.begin_space(space).await?;
        let item: Option<(i64, String, i64, i64)> = sql(
            "SELECT node_id, original_path, current_bytes, versions_bytes FROM trash WHERE id = $1 AND space_id = $2",
        )
        .bind(trash_id)
        .bind(space)
        .fetch_optional(&mut tx)
        .await?;
        let (node_id, original, current, versions) = item.ok_or(MetaError::NotFound)?;
        let target = match to {
            Some(t) => t.clone(),
            None => RemotePath::parse(&original).map_err(|e| MetaError::Invalid(e.to_string()))?,
        };
        check_locks(&mut tx, space, &target, true, held).await?;
        let (target_parent, target_name) = split(&target)?;
        not_reserved(&target_parent, target_name)?;
        let parent = ensure_dir(&mut tx, space, &target_parent, now).await?;
        let target = parent.canon.join(target_name)?;
        let key = name_key(target_name);
        let taken: Option<NodeRow> = sql(CHILD_SQL).bind(parent.dir.id).bind(&key).fetch_optional(&mut tx).await?;
        if taken.is_some() {
            return Err(MetaError::AlreadyExists(format!(
                "`{target}` already exists; restore to another path with \"to\""
            )));
        }
        sql("UPDATE nodes SET parent_id = $2, name = $3, name_key = $4, trashed_at = NULL WHERE id = $1")
            .bind(node_id)
            .bind(parent.dir.id)
            .bind(target_name)
            .bind(&key)
            .execute(&mut tx)
            .await?;
        sql("DELETE FROM trash WHERE id = $1").bind(trash_id).execute(&mut tx).await?;
        let back = Usage { current, versions, trash: -(current + versions), pending: 0 };
        charge(&mut tx, space, back, Limit::Free).await?;
        let node: NodeRow = sql(NODE_SQL).bind(node_id).fetch_one(&mut tx).await?;
        let shown = target.to_string();
        journal(
            &mut tx,
            space,
            now,
            Change { node: node_id, op: "restore", kind: &node.kind, path: &shown, from: None },
        )
        .await?;
        tx.commit().await?;
        self.invalidate(super::notify::Invalidate::Space(space)).await;
        Ok((node, target))
    }

    /// Deletes trashed items for good (one, or all of the space's) and frees their quota.
    /// Blocks stay in the store until garbage collection finds them unreferenced.
    pub async fn purge_trash(&self, space: SpaceId, trash_id: Option<i64>) -> MetaResult<u64> {
        let space = space.get();
        let now = now_ms();
        {
            let mut tx = self.begin_space(space).await?;
            let items: Vec<i64> =
                scalar("SELECT id FROM trash WHERE space_id = $1 AND ($2 IS NULL OR id = $2) ORDER BY id")
                    .bind(space)
                    .bind(trash_id)
                    .fetch_all(&mut tx)
                    .await?;
            if trash_id.is_some() && items.is_empty() {
                return Err(MetaError::NotFound);
            }
            let mut purged = 0u64;
            for item in items {
                // An earlier item's subtree may already have taken this one with it.
                if purge_item(&mut tx, space, item, now).await?.is_some() {
                    purged += 1;
                }
            }
            tx.commit().await?;
            self.invalidate(super::notify::Invalidate::Space(space)).await;
            Ok(purged)
        }
    }

    /// Sets the creation and/or modification time (Unix ms) of the node at `path`: what a
    /// WebDAV client sends as `Win32CreationTime` / `Win32LastModifiedTime` after copying a
    /// file in, so the file keeps its own dates. Refused while locked by a lock not in `held`.
    pub async fn set_times(
        &self,
        space: SpaceId,
        path: &RemotePath,
        created: Option<i64>,
        modified: Option<i64>,
        held: LockTokens<'_>,
    ) -> MetaResult<()> {
        let space = space.get();
        if created.is_none() && modified.is_none() {
            return Ok(());
        }
        {
            let mut tx = self.begin_space(space).await?;
            let (node, canon) = resolve(&mut tx, space, path).await?;
            check_locks(&mut tx, space, &canon, false, held).await?;
            sql("UPDATE nodes SET created_at = COALESCE($2, created_at), modified_at = COALESCE($3, modified_at) WHERE id = $1")
                .bind(node.id).bind(created).bind(modified)
                .execute(&mut tx).await?;
            tx.commit().await?;
        };
        self.invalidate(super::notify::Invalidate::Space(space)).await;
        Ok(())
    }
}

/// Splits a target path into its parent and its (validated) last name.
fn split(path: &RemotePath) -> MetaResult<(RemotePath, &str)> {
    match (path.parent(), path.name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(MetaError::Invalid("the root folder cannot be the target".into())),
    }
}

/// `Shared with me` at the top of a space is where every door shows what others shared with
/// its owner: nothing of the space itself may take that name there.
pub(crate) fn not_reserved(parent: &RemotePath, name: &str) -> MetaResult<()> {
    if parent.is_root() && name_key(name) == name_key(nimbus_proto::names::SHARED_WITH_ME) {
        return Err(MetaError::Invalid(format!(
            "`/{name}` is reserved for what others share with you; choose another name"
        )));
    }
    Ok(())
}
