//! File versions: the block registry, atomic commits against a base version, manifests,
//! version history.

use nimbus_proto::RemotePath;
use nimbus_proto::names::name_key;

use super::SpaceId;
use super::engine::{scalar, sql};
use super::journal::{Change, journal};
use super::locks::{LockTokens, check_locks};
use super::quota::charge;
use super::retention::expire_version;
use super::tree::{CHILD_SQL, EnsuredDir, NODE_SQL, ensure_dir, resolve};
use super::usage::REFERENCED;
use super::{BlockEntry, Limit, Meta, MetaError, MetaResult, NodeRow, Usage, VersionRow, now_ms};

/// What the committer believes the file's current version is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// Replace whatever is there.
    Any,
    /// The file must currently be at this version (`None`: must not exist yet).
    Expect(Option<i64>),
}

#[derive(Debug, Clone)]
pub struct CommitSpec<'a> {
    pub base: Base,
    pub blocks: &'a [BlockEntry],
    pub block_size: i64,
    pub device: Option<&'a str>,
}

/// A version's ordered block list.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub node: NodeRow,
    /// The file's canonical path (stored spelling).
    pub path: RemotePath,
    pub version: VersionRow,
    /// Shared, so that a manifest from the hot cache lends its blocks to a download for free.
    pub blocks: std::sync::Arc<[BlockEntry]>,
}

/// What an upload of one block must do, as decided by [`Meta::claim_block`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The space holds the block already: nothing to write.
    Held,
    /// Write the object, then call [`Meta::block_stored`].
    Write,
}

/// Hashes per `IN (...)` query: far below SQLite's and PostgreSQL's parameter limits.
pub(super) const CHUNK: usize = 500;

pub(super) fn in_list(first_param: usize, n: usize) -> String {
    (0..n).map(|i| format!("${}", first_param + i)).collect::<Vec<_>>().join(", ")
}

impl Meta {
    /// The subset of `hashes` the space does not hold, in the given order.
    /// The held ones are touched: garbage collection leaves them for its grace period.
    /// A held block nothing references (garbage awaiting collection) is charged again as
    /// pending, so announcing blocks cannot keep data alive outside the quota; one that no
    /// longer fits is reported missing (its upload then meets the quota).
    pub async fn missing_blocks(&self, space: SpaceId, hashes: &[String]) -> MetaResult<Vec<String>> {
        let space = space.get();
        let mut held: std::collections::HashSet<String> =
            self.touch_blocks(SpaceId::stored(space), hashes).await?.into_iter().collect();
        let touched: Vec<String> = held.iter().cloned().collect();
        for chunk in touched.chunks(CHUNK) {
            let text = format!(
                "SELECT b.hash, b.size FROM blocks b WHERE b.space_id = $1 AND b.hash IN ({}) AND b.stored \
                 AND NOT b.pending AND NOT {REFERENCED}",
                in_list(2, chunk.len())
            );
            let garbage: Vec<BlockEntry> = {
                let mut db = self.db();
                let mut q = sql(sqlx::AssertSqlSafe(text)).bind(space);
                for h in chunk {
                    q = q.bind(h);
                }
                q.fetch_all::<BlockEntry, _>(&mut db).await?
            };
            for b in garbage {
                match self.claim_block(SpaceId::stored(space), &b.hash, b.size, 0, None).await {
                    Ok(Claim::Held) => {}
                    Ok(Claim::Write) | Err(MetaError::QuotaExceeded(_)) => {
                        held.remove(&b.hash);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(hashes.iter().filter(|h| !held.contains(*h)).cloned().collect())
    }

    /// Claims the block `hash` of `size` bytes for an upload into `space`, under the space
    /// lock. A stored block is touched (garbage collection keeps it) and, if nothing references
    /// it and it is not charged yet, charged as pending: [`Claim::Held`]. Otherwise the block
    /// is charged as pending against the quota (with `allowance`, see [`Limit::Quota`]; room is
    /// made first) and its row inserted unstored: [`Claim::Write`]. A row another upload left
    /// unstored is reused without a second charge. Fails with [`MetaError::QuotaExceeded`].
    ///
    /// `owner` is the claiming upload's token (see [`Meta::discard_claimed`]): a block this
    /// claim charges carries it; any other claim leaves the block to nobody (NULL), so a
    /// failed upload never deletes a block someone else may be about to commit.
    pub async fn claim_block(
        &self,
        space: SpaceId,
        hash: &str,
        size: i64,
        allowance: i64,
        owner: Option<i64>,
    ) -> MetaResult<Claim> {
        let space = space.get();
        let now = now_ms();
        let referenced = format!("SELECT {REFERENCED} FROM blocks b WHERE b.space_id = $1 AND b.hash = $2");
        let limit = Limit::Quota { allowance };
        let (claim, expired) = {
            let mut tx = self.begin_space(space).await?;
            let row: Option<(bool, bool, Option<i64>)> =
                sql("SELECT stored, pending, claim FROM blocks WHERE space_id = $1 AND hash = $2")
                    .bind(space)
                    .bind(hash)
                    .fetch_optional(&mut tx)
                    .await?;
            let mut expired = 0;
            let claim = match row {
                Some((stored, pending, held_by)) => {
                    // Whose the block is from now on: this upload's if this claim charges it
                    // (garbage awaiting collection) or it was already (a file repeating a
                    // block), nobody's otherwise.
                    let mut owned = if held_by.is_some() && held_by == owner { owner } else { None };
                    if stored && !pending {
                        let used: bool =
                            scalar(sqlx::AssertSqlSafe(referenced)).bind(space).bind(hash).fetch_one(&mut tx).await?;
                        if !used {
                            expired = charge(&mut tx, space, Usage::pending(size), limit).await?;
                            sql("UPDATE blocks SET pending = TRUE WHERE space_id = $1 AND hash = $2")
                                .bind(space)
                                .bind(hash)
                                .execute(&mut tx)
                                .await?;
                            owned = owner;
                        }
                    }
                    sql("UPDATE blocks SET touched_at = $3, claim = $4 WHERE space_id = $1 AND hash = $2")
                        .bind(space)
                        .bind(hash)
                        .bind(now)
                        .bind(owned)
                        .execute(&mut tx)
                        .await?;
                    if stored { Claim::Held } else { Claim::Write }
                }
                None => {
                    expired = charge(&mut tx, space, Usage::pending(size), limit).await?;
                    sql("INSERT INTO blocks (space_id, hash, size, created_at, touched_at, stored, pending, claim) \
                         VALUES ($1, $2, $3, $4, $4, FALSE, TRUE, $5)")
                    .bind(space)
                    .bind(hash)
                    .bind(size)
                    .bind(now)
                    .bind(owner)
                    .execute(&mut tx)
                    .await?;
                    Claim::Write
                }
            };
            tx.commit().await?;
            (claim, expired)
        };
        if expired > 0 {
            self.invalidate(super::notify::Invalidate::Space(space)).await;
        }
        Ok(claim)
    }

    /// Records that the store now holds the claimed block: from now on it exists for readers
    /// and commits. False if the claim is gone (garbage collection took the unstored row, and
    /// with it maybe the object just written): the caller writes the object again and then
    /// [`Meta::register_block`]s it, as an upload that finds no row does.
    pub async fn block_stored(&self, space: SpaceId, hash: &str) -> MetaResult<bool> {
        let space = space.get();
        let n = {
            let mut db = self.db();
            sql("UPDATE blocks SET stored = TRUE, touched_at = $3 WHERE space_id = $1 AND hash = $2")
                .bind(space)
                .bind(hash)
                .bind(now_ms())
                .execute(&mut db)
                .await?
        };
        Ok(n > 0)
    }

    /// The blocks among `hashes` that the space holds, with their sizes.
    pub async fn held_blocks(&self, space: SpaceId, hashes: &[String]) -> MetaResult<Vec<BlockEntry>> {
        let space = space.get();
        let mut held = Vec::new();
        for chunk in hashes.chunks(CHUNK) {
            let text = format!(
                "SELECT hash, size FROM blocks WHERE space_id = $1 AND stored AND hash IN ({})",
                in_list(2, chunk.len())
            );
            let rows: Vec<BlockEntry> = {
                let mut db = self.db();
                let mut q = sql(sqlx::AssertSqlSafe(text)).bind(space);
                for h in chunk {
                    q = q.bind(h);
                }
                q.fetch_all::<BlockEntry, _>(&mut db).await?
            };
            held.extend(rows);
        }
        Ok(held)
    }

    /// The size of a block the space holds, or None.
    pub async fn block_size_of(&self, space: SpaceId, hash: &str) -> MetaResult<Option<i64>> {
        let space = space.get();
        let n: Option<i64> = {
            let mut db = self.db();
            scalar("SELECT size FROM blocks WHERE space_id = $1 AND hash = $2 AND stored")
                .bind(space)
                .bind(hash)
                .fetch_optional(&mut db)
                .await?
        };
        Ok(n)
    }

    /// Records that the store holds this block for the space (found there, not uploaded
    /// through a claim), charged as pending: bytes in the store count whatever brought them.
    pub async fn register_block(&self, space: SpaceId, hash: &str, size: i64) -> MetaResult<()> {
        let space = space.get();
        {
            let mut tx = self.begin_space(space).await?;
            let n = sql(
                "INSERT INTO blocks (space_id, hash, size, created_at, stored, pending) VALUES ($1, $2, $3, $4, TRUE, TRUE) \
                 ON CONFLICT (space_id, hash) DO NOTHING")
                .bind(space).bind(hash).bind(size).bind(now_ms())
                .execute(&mut tx).await?;
            if n > 0 {
                charge(&mut tx, space, Usage::pending(size), Limit::Free).await?;
            }
            tx.commit().await?;
        };
        Ok(())
    }

    /// Makes `spec.blocks` the new current version of the file at `path`, atomically:
    /// the base check, the quota charge, the version and the node update succeed or fail
    /// together. Returns the node and whether the file was created. Refused with
    /// [`MetaError::Locked`] while the path is locked by a lock not in `held`.
    pub async fn commit(
        &self,
        space: SpaceId,
        path: &RemotePath,
        spec: &CommitSpec<'_>,
        lock_tokens: LockTokens<'_>,
    ) -> MetaResult<(NodeRow, bool, RemotePath)> {
        let space = space.get();
        let (parent_path, name) = match (path.parent(), path.name()) {
            (Some(pp), Some(n)) => (pp, n),
            _ => return Err(MetaError::IsADirectory("the root is a folder".into())),
        };
        super::tree::not_reserved(&parent_path, name)?;
        let size: i64 = spec.blocks.iter().map(|b| b.size).sum();
        let shown = path.to_string();
        let key = name_key(name);
        let now = now_ms();

        // Every listed block must be held by this space with the stated size. Checked before
        // the transaction: blocks are never removed while they may still be committed.
        let mut distinct: Vec<String> = spec.blocks.iter().map(|b| b.hash.clone()).collect();
        distinct.sort();
        distinct.dedup();
        let held = self.held_blocks(SpaceId::stored(space), &distinct).await?;
        let missing: Vec<&String> = distinct.iter().filter(|h| !held.iter().any(|b| &b.hash == *h)).collect();
        if !missing.is_empty() {
            return Err(MetaError::MissingBlocks(format!(
                "{} block(s) are not uploaded yet (first: {}); upload them with PUT /api/v1/blocks/{{hash}} and commit again",
                missing.len(),
                missing[0]
            )));
        }
        for b in spec.blocks {
            if let Some(h) = held.iter().find(|h| h.hash == b.hash && h.size != b.size) {
                return Err(MetaError::Invalid(format!("block {} has {} bytes, not {}", b.hash, h.size, b.size)));
            }
        }

        {
            let mut tx = self.begin_space(space).await?;
            // Again under the space lock, which garbage collection takes too: a block it
            // removed since the check above fails the commit cleanly (retry re-uploads it).
            for chunk in distinct.chunks(CHUNK) {
                let text = format!(
                    "SELECT COUNT(*) FROM blocks WHERE space_id = $1 AND stored AND hash IN ({})",
                    in_list(2, chunk.len())
                );
                let mut q = scalar::<i64>(sqlx::AssertSqlSafe(text)).bind(space);
                for h in chunk {
                    q = q.bind(h);
                }
                if q.fetch_one(&mut tx).await? != chunk.len() as i64 {
                    return Err(MetaError::Conflict(
                        "some blocks were garbage-collected while this commit was prepared; check which are missing, upload them and commit again".into(),
                    ));
                }
            }
            check_locks(&mut tx, space, path, false, lock_tokens).await?;
            let EnsuredDir { dir: parent, canon: parent_canon, .. } =
                ensure_dir(&mut tx, space, &parent_path, now).await?;
            let existing: Option<NodeRow> = sql(CHILD_SQL).bind(parent.id).bind(&key).fetch_optional(&mut tx).await?;
            if let Some(ex) = &existing
                && ex.is_dir()
            {
                return Err(MetaError::IsADirectory(format!("`{shown}` is a folder")));
            }
            match (&existing, spec.base) {
                (_, Base::Any) => {}
                (Some(ex), Base::Expect(Some(v))) if ex.version_id == Some(v) => {}
                (None, Base::Expect(None)) => {}
                (Some(ex), Base::Expect(_)) => {
                    return Err(MetaError::Conflict(format!(
                        "`{shown}` changed on the server (it is now at version {}); fetch it and commit against that version",
                        ex.version_id.unwrap_or(0)
                    )));
                }
                (None, Base::Expect(Some(v))) => {
                    return Err(MetaError::Conflict(format!(
                        "`{shown}` was deleted or moved since version {v}; commit with base_version null to create it again"
                    )));
                }
            }
            let old_size = existing.as_ref().map_or(0, |e| e.size);

            let node_id =
                match &existing {
                    Some(ex) => ex.id,
                    None => {
                        let id: Option<i64> = scalar(
                        "INSERT INTO nodes (space_id, parent_id, name, name_key, kind, size, created_at, modified_at) \
                         VALUES ($1, $2, $3, $4, 'file', 0, $5, $5) \
                         ON CONFLICT (parent_id, name_key) WHERE trashed_at IS NULL DO NOTHING RETURNING id",
                    )
                    .bind(space).bind(parent.id).bind(name).bind(&key).bind(now)
                    .fetch_optional(&mut tx).await?;
                        id.ok_or_else(|| {
                            MetaError::Conflict(format!(
                                "`{shown}` was created by someone else at the same time; try again"
                            ))
                        })?
                    }
                };
            let vid: i64 = scalar(
                "INSERT INTO versions (node_id, space_id, size, block_size, device, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            )
            .bind(node_id).bind(space).bind(size).bind(spec.block_size).bind(spec.device).bind(now)
            .fetch_one(&mut tx).await?;
            for (c, chunk) in spec.blocks.chunks(CHUNK).enumerate() {
                let values = (0..chunk.len())
                    .map(|i| format!("($1, ${}, ${}, ${})", 2 + 3 * i, 3 + 3 * i, 4 + 3 * i))
                    .collect::<Vec<_>>()
                    .join(", ");
                let text = format!("INSERT INTO version_blocks (version_id, idx, hash, size) VALUES {values}");
                let mut q = sql(sqlx::AssertSqlSafe(text)).bind(vid);
                for (i, b) in chunk.iter().enumerate() {
                    q = q.bind((c * CHUNK + i) as i64).bind(&b.hash).bind(b.size);
                }
                q.execute(&mut tx).await?;
            }
            // Compare-and-set on the version read above: with PostgreSQL two committers may
            // both get here; exactly one of them moves the node forward.
            let n = sql(
                "UPDATE nodes SET version_id = $2, size = $3, modified_at = $4 WHERE id = $1 AND version_id IS NOT DISTINCT FROM $5",
            )
            .bind(node_id).bind(vid).bind(size).bind(now).bind(existing.as_ref().and_then(|e| e.version_id))
            .execute(&mut tx).await?;
            if n == 0 {
                return Err(MetaError::Conflict(format!(
                    "`{shown}` changed on the server during this commit; try again"
                )));
            }
            // The blocks stop being pending: from now on the version counts them. Charged after
            // the node moved on, so the replaced version can be expired to make room.
            let mut unpended = 0i64;
            for chunk in distinct.chunks(CHUNK) {
                let text = format!(
                    "UPDATE blocks SET pending = FALSE WHERE space_id = $1 AND pending AND hash IN ({}) RETURNING size",
                    in_list(2, chunk.len())
                );
                let mut q = scalar::<i64>(sqlx::AssertSqlSafe(text)).bind(space);
                for h in chunk {
                    q = q.bind(h);
                }
                unpended += q.fetch_all(&mut tx).await?.iter().sum::<i64>();
            }
            let delta = Usage { current: size - old_size, versions: old_size, trash: 0, pending: -unpended };
            charge(&mut tx, space, delta, Limit::WRITE).await?;
            let node: NodeRow = sql(NODE_SQL).bind(node_id).fetch_one(&mut tx).await?;
            let canon = parent_canon.join(&node.name)?;
            let op = if existing.is_some() { "update" } else { "create" };
            let path = canon.to_string();
            journal(&mut tx, space, now, Change { node: node_id, op, kind: "file", path: &path, from: None }).await?;
            tx.commit().await?;
            self.invalidate(super::notify::Invalidate::Space(space)).await;
            Ok((node, existing.is_none(), canon))
        }
    }

    /// The block list of the file's current version, or of `version` if given (it must be a
    /// version of this very file).
    pub async fn manifest(
        &self,
        space: SpaceId,
        path: &RemotePath,
        version: Option<i64>,
    ) -> MetaResult<std::sync::Arc<Manifest>> {
        let space = space.get();
        // Stamp first: a change committed while we read makes this entry stale at once.
        let stamp = self.hot.manifest_stamp(space);
        let key = (space, path.name_key(), version);
        if let Some(m) = self.hot.manifest(&key, stamp) {
            return Ok(m);
        }
        let m = std::sync::Arc::new(self.manifest_uncached(space, path, version).await?);
        self.hot.put_manifest(key, stamp, &m);
        Ok(m)
    }

    async fn manifest_uncached(&self, space: i64, path: &RemotePath, version: Option<i64>) -> MetaResult<Manifest> {
        {
            let mut db = self.db();
            let (node, canon) = resolve(&mut db, space, path).await?;
            if node.is_dir() {
                return Err(MetaError::IsADirectory(format!("`{path}` is a folder")));
            }
            let vid = version.or(node.version_id).ok_or(MetaError::NotFound)?;
            let v: VersionRow = sql(
                "SELECT id, node_id, size, block_size, device, created_at FROM versions WHERE id = $1 AND node_id = $2",
            )
            .bind(vid)
            .bind(node.id)
            .fetch_optional(&mut db)
            .await?
            .ok_or(MetaError::NotFound)?;
            let blocks: Vec<BlockEntry> =
                sql("SELECT hash, size FROM version_blocks WHERE version_id = $1 ORDER BY idx")
                    .bind(vid)
                    .fetch_all(&mut db)
                    .await?;
            Ok(Manifest { node, path: canon, version: v, blocks: blocks.into() })
        }
    }

    /// Versions of a file, newest first.
    pub async fn versions(&self, space: SpaceId, path: &RemotePath) -> MetaResult<(NodeRow, Vec<VersionRow>)> {
        let space = space.get();
        {
            let mut db = self.db();
            let (node, _) = resolve(&mut db, space, path).await?;
            if node.is_dir() {
                return Err(MetaError::IsADirectory(format!("`{path}` is a folder")));
            }
            let rows: Vec<VersionRow> = sql(
                "SELECT id, node_id, size, block_size, device, created_at FROM versions WHERE node_id = $1 ORDER BY id DESC",
            )
            .bind(node.id)
            .fetch_all(&mut db).await?;
            Ok((node, rows))
        }
    }

    /// Makes an earlier version's content current again, as a new version.
    pub async fn restore_version(
        &self,
        space: SpaceId,
        path: &RemotePath,
        version: i64,
        device: Option<&str>,
    ) -> MetaResult<(NodeRow, RemotePath)> {
        let space = space.get();
        let now = now_ms();
        let shown = path.to_string();
        {
            let mut tx = self.begin_space(space).await?;
            let (node, canon) = resolve(&mut tx, space, path).await?;
            if node.is_dir() {
                return Err(MetaError::IsADirectory(format!("`{shown}` is a folder")));
            }
            check_locks(&mut tx, space, &canon, false, LockTokens::NONE).await?;
            let old: VersionRow = sql(
                "SELECT id, node_id, size, block_size, device, created_at FROM versions WHERE id = $1 AND node_id = $2",
            )
            .bind(version)
            .bind(node.id)
            .fetch_optional(&mut tx)
            .await?
            .ok_or(MetaError::NotFound)?;
            let vid: i64 = scalar(
                "INSERT INTO versions (node_id, space_id, size, block_size, device, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            )
            .bind(node.id).bind(space).bind(old.size).bind(old.block_size).bind(device).bind(now)
            .fetch_one(&mut tx).await?;
            sql("INSERT INTO version_blocks (version_id, idx, hash, size) SELECT $1, idx, hash, size FROM version_blocks WHERE version_id = $2")
                .bind(vid).bind(old.id)
                .execute(&mut tx).await?;
            sql("UPDATE nodes SET version_id = $2, size = $3, modified_at = $4 WHERE id = $1")
                .bind(node.id)
                .bind(vid)
                .bind(old.size)
                .bind(now)
                .execute(&mut tx)
                .await?;
            charge(
                &mut tx,
                space,
                Usage { current: old.size - node.size, versions: node.size, ..Default::default() },
                Limit::WRITE,
            )
            .await?;
            let path = canon.to_string();
            journal(&mut tx, space, now, Change { node: node.id, op: "update", kind: "file", path: &path, from: None })
                .await?;
            let node: NodeRow = sql(NODE_SQL).bind(node.id).fetch_one(&mut tx).await?;
            tx.commit().await?;
            self.invalidate(super::notify::Invalidate::Space(space)).await;
            Ok((node, canon))
        }
    }

    /// Deletes one older version of the file at `path`. The current version cannot be deleted
    /// (delete the file instead). Returns the bytes freed.
    pub async fn delete_version(
        &self,
        space: SpaceId,
        path: &nimbus_proto::RemotePath,
        version: i64,
    ) -> MetaResult<i64> {
        let space = space.get();
        {
            let mut tx = self.begin_space(space).await?;
            let (node, _) = resolve(&mut tx, space, path).await?;
            if node.is_dir() {
                return Err(MetaError::IsADirectory(format!("`{path}` is a folder")));
            }
            let owned: Option<i64> = scalar("SELECT id FROM versions WHERE id = $1 AND node_id = $2")
                .bind(version)
                .bind(node.id)
                .fetch_optional(&mut tx)
                .await?;
            if owned.is_none() {
                return Err(MetaError::NotFound);
            }
            if node.version_id == Some(version) {
                return Err(MetaError::Conflict(format!(
                    "version {version} is the current version of `{path}`; restore another version first, or delete the file"
                )));
            }
            let size = expire_version(&mut tx, space, version).await?;
            tx.commit().await?;
            self.invalidate(super::notify::Invalidate::Space(space)).await;
            Ok(size)
        }
    }
}
