//! The block registry as garbage collection and fsck see it: which blocks no version
//! references, removing them under the space lock, and the consistency queries of fsck.
//!
//! Safety against concurrent uploads rests on three rules:
//! - a block reported present (`POST /blocks/missing`) or uploaded again is touched
//!   (`touched_at`), and GC only takes blocks untouched for its grace period;
//! - GC deletes a space's rows and then its objects inside one transaction holding the space
//!   lock, the lock every commit takes first, so a commit either sees the rows gone (and fails
//!   with a retryable conflict) or has already referenced the blocks (and GC keeps them);
//! - an uploader that finds the row gone writes the object again before registering it.
//!
//! An upload that fails deletes its blocks at once, by the same rules, but only those still
//! carrying its claim (`blocks.claim`, set by the claim that charged them): any other claim or
//! touch clears it, so a block someone else may still commit is left for collection.

use super::SpaceId;
use super::engine::{scalar, sql};
use super::quota::charge;
use super::{Limit, Meta, MetaResult, Usage, now_ms};

/// One registered block.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct BlockRow {
    pub space_id: i64,
    pub hash: String,
    pub size: i64,
}

impl BlockRow {
    /// The space that holds the block (from the metadata's own row).
    pub fn space(&self) -> SpaceId {
        SpaceId::stored(self.space_id)
    }
}

/// Nothing uses the block (`b`): no version of its space, no unfinished S3 multipart upload.
const NOT_IN_USE: &str = "NOT EXISTS (\
    SELECT 1 FROM version_blocks vb JOIN versions v ON v.id = vb.version_id \
    WHERE vb.hash = b.hash AND v.space_id = b.space_id) AND NOT EXISTS (\
    SELECT 1 FROM s3_upload_blocks ub JOIN s3_uploads u ON u.id = ub.upload_id \
    WHERE ub.hash = b.hash AND u.user_id = b.space_id)";

/// A registered block nothing uses and untouched since `$1`.
fn unreferenced() -> String {
    format!("COALESCE(b.touched_at, b.created_at) < $1 AND {NOT_IN_USE}")
}

/// Which unused blocks a removal takes.
#[derive(Debug, Clone, Copy)]
enum Garbage {
    /// Untouched since the cutoff (Unix ms): garbage collection.
    Untouched(i64),
    /// Still carrying this upload's claim (see [`Meta::discard_claimed`]).
    Claimed(i64),
}

fn in_list(first_param: usize, n: usize) -> String {
    (0..n).map(|i| format!("${}", first_param + i)).collect::<Vec<_>>().join(", ")
}

impl Meta {
    /// Marks the blocks among `hashes` that the space holds as just used and returns them:
    /// a client told "present" must find them still there when it commits.
    pub async fn touch_blocks(&self, space: SpaceId, hashes: &[String]) -> MetaResult<Vec<String>> {
        let space = space.get();
        let now = now_ms();
        let mut held = Vec::new();
        for chunk in hashes.chunks(500) {
            let text = format!(
                "UPDATE blocks SET touched_at = $2, claim = NULL WHERE space_id = $1 AND stored AND hash IN ({}) RETURNING hash",
                in_list(3, chunk.len())
            );
            let rows: Vec<String> = {
                let mut db = self.db();
                let mut q = scalar::<String>(sqlx::AssertSqlSafe(text)).bind(space).bind(now);
                for h in chunk {
                    q = q.bind(h);
                }
                q.fetch_all(&mut db).await?
            };
            held.extend(rows);
        }
        Ok(held)
    }

    /// Up to `limit` blocks that no version references and nobody touched since `cutoff_ms`.
    pub async fn gc_candidates(&self, cutoff_ms: i64, limit: i64) -> MetaResult<Vec<BlockRow>> {
        let text = format!(
            "SELECT b.space_id, b.hash, b.size FROM blocks b WHERE {} ORDER BY b.space_id, b.hash LIMIT $2",
            unreferenced()
        );
        Ok({
            let mut db = self.db();
            sql(sqlx::AssertSqlSafe(text)).bind(cutoff_ms).bind(limit).fetch_all::<BlockRow, _>(&mut db).await?
        })
    }

    /// Removes the rows of those of `hashes` that are still garbage, then calls `delete_objects`
    /// with them while the space stays locked, and returns what was removed. The rows go even if
    /// the objects cannot be deleted: a stray object is harmless (fsck finds it), a row without
    /// its object is not.
    pub async fn gc_remove<F, Fut>(
        &self,
        space: SpaceId,
        hashes: &[String],
        cutoff_ms: i64,
        delete_objects: F,
    ) -> MetaResult<(Vec<BlockRow>, Option<String>)>
    where
        F: FnOnce(Vec<String>) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        self.remove_garbage(space, hashes, Garbage::Untouched(cutoff_ms), delete_objects).await
    }

    /// Deletes at once those of `hashes` that nothing uses and that still carry the claim
    /// `claim` (see [`Meta::claim_block`]): the blocks of an upload that failed, or of an S3
    /// multipart upload's parts that were aborted or replaced. Their pending charge ends with
    /// their rows and objects, so an upload that never commits leaves no bytes in the store
    /// outside the quota. A block another upload claimed or a client was told is present
    /// meanwhile stays, charged as pending, for its commit or for garbage collection. Returns
    /// what was removed and the store's error, as [`Meta::gc_remove`].
    pub async fn discard_claimed<F, Fut>(
        &self,
        space: SpaceId,
        hashes: &[String],
        claim: i64,
        delete_objects: F,
    ) -> MetaResult<(Vec<BlockRow>, Option<String>)>
    where
        F: Fn(Vec<String>) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        let mut distinct = hashes.to_vec();
        distinct.sort();
        distinct.dedup();
        let (mut gone, mut failed) = (Vec::new(), None);
        for chunk in distinct.chunks(super::files::CHUNK) {
            let (g, f) = self.remove_garbage(space, chunk, Garbage::Claimed(claim), &delete_objects).await?;
            gone.extend(g);
            failed = failed.or(f);
        }
        Ok((gone, failed))
    }

    /// See [`Meta::gc_remove`]: one transaction on the space's lock, objects deleted inside it
    /// so that no upload can register a block between its row going and its object going.
    async fn remove_garbage<F, Fut>(
        &self,
        space: SpaceId,
        hashes: &[String],
        which: Garbage,
        delete_objects: F,
    ) -> MetaResult<(Vec<BlockRow>, Option<String>)>
    where
        F: FnOnce(Vec<String>) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        if hashes.is_empty() {
            return Ok((Vec::new(), None));
        }
        let space = space.get();
        let (filter, bound) = match which {
            Garbage::Untouched(cutoff) => (unreferenced(), cutoff),
            Garbage::Claimed(claim) => (format!("b.claim = $1 AND {NOT_IN_USE}"), claim),
        };
        let text = format!(
            "DELETE FROM blocks AS b WHERE b.space_id = $2 AND b.hash IN ({}) AND {filter} \
             RETURNING space_id, hash, size, pending",
            in_list(3, hashes.len())
        );
        {
            let mut tx = self.begin_space(space).await?;
            let mut q = sql(sqlx::AssertSqlSafe(text)).bind(bound).bind(space);
            for h in hashes {
                q = q.bind(h);
            }
            let rows = q.fetch_all::<(i64, String, i64, bool), _>(&mut tx).await?;
            // Uploads never committed stop counting as pending as they go.
            let pending: i64 = rows.iter().filter(|r| r.3).map(|r| r.2).sum();
            if pending != 0 {
                charge(&mut tx, space, Usage::pending(-pending), Limit::Free).await?;
            }
            let gone: Vec<BlockRow> =
                rows.into_iter().map(|(space_id, hash, size, _)| BlockRow { space_id, hash, size }).collect();
            let failed = if gone.is_empty() {
                None
            } else {
                delete_objects(gone.iter().map(|b| b.hash.clone()).collect()).await.err()
            };
            tx.commit().await?;
            Ok((gone, failed))
        }
    }

    /// Every registered block, or `sample` of them picked at random.
    pub async fn registered_blocks(&self, sample: Option<i64>) -> MetaResult<Vec<BlockRow>> {
        Ok({
            let mut db = self.db();
            match sample {
                Some(n) => {
                    sql("SELECT space_id, hash, size FROM blocks WHERE stored ORDER BY RANDOM() LIMIT $1")
                        .bind(n)
                        .fetch_all::<BlockRow, _>(&mut db)
                        .await?
                }
                None => {
                    sql("SELECT space_id, hash, size FROM blocks WHERE stored ORDER BY space_id, hash")
                        .fetch_all::<BlockRow, _>(&mut db)
                        .await?
                }
            }
        })
    }

    /// Blocks some version references that the registry does not hold.
    pub async fn unregistered_references(&self) -> MetaResult<Vec<BlockRow>> {
        Ok({
            let mut db = self.db();
            sql(
            "SELECT DISTINCT v.space_id, vb.hash, vb.size FROM version_blocks vb JOIN versions v ON v.id = vb.version_id \
             WHERE NOT EXISTS (SELECT 1 FROM blocks b WHERE b.space_id = v.space_id AND b.hash = vb.hash AND b.stored) \
             ORDER BY v.space_id, vb.hash",
        ).fetch_all::<BlockRow, _>(&mut db).await?
        })
    }

    /// fsck's repair of a block the store lost or damaged: under the space lock (so no upload,
    /// commit or collection of the space runs meanwhile), if the space still registers the
    /// block as stored and `still_bad` confirms the store's copy is gone or damaged, the block
    /// is marked unstored. Nothing is deleted: readers fail on it either way, the next
    /// missing-check reports it missing, and the next upload of its bytes (which a client with
    /// the data then sends) writes the object again and heals every file using it. True if
    /// marked.
    pub async fn mark_block_damaged<F, Fut>(&self, space: SpaceId, hash: &str, still_bad: F) -> MetaResult<bool>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = bool>,
    {
        let space = space.get();
        {
            let mut tx = self.begin_space(space).await?;
            let stored: Option<bool> = scalar("SELECT stored FROM blocks WHERE space_id = $1 AND hash = $2")
                .bind(space)
                .bind(hash)
                .fetch_optional(&mut tx)
                .await?;
            let marked = stored == Some(true) && still_bad().await;
            if marked {
                sql("UPDATE blocks SET stored = FALSE WHERE space_id = $1 AND hash = $2")
                    .bind(space)
                    .bind(hash)
                    .execute(&mut tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(marked)
        }
    }

    /// fsck's repair of a block the store holds intact but the registry does not (as stored):
    /// under the space lock, if `intact` confirms the object, an unstored row becomes stored,
    /// or a new row is inserted untouched and charged as pending (bytes in the store count
    /// whatever brought them; GC reclaims the block after its grace period unless a commit uses
    /// it first). True if registered.
    pub async fn register_found<F, Fut>(&self, space: SpaceId, hash: &str, size: i64, intact: F) -> MetaResult<bool>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = bool>,
    {
        let space = space.get();
        {
            let mut tx = self.begin_space(space).await?;
            let stored: Option<bool> = scalar("SELECT stored FROM blocks WHERE space_id = $1 AND hash = $2")
                .bind(space)
                .bind(hash)
                .fetch_optional(&mut tx)
                .await?;
            let registered = match stored {
                Some(true) => false,
                Some(false) => {
                    let ok = intact().await;
                    if ok {
                        sql("UPDATE blocks SET stored = TRUE WHERE space_id = $1 AND hash = $2")
                            .bind(space)
                            .bind(hash)
                            .execute(&mut tx)
                            .await?;
                    }
                    ok
                }
                None => {
                    let ok = intact().await;
                    if ok {
                        sql(
                            "INSERT INTO blocks (space_id, hash, size, created_at, stored, pending) VALUES ($1, $2, $3, $4, TRUE, TRUE)")
                            .bind(space).bind(hash).bind(size).bind(now_ms()).execute(&mut tx).await?;
                        charge(&mut tx, space, Usage::pending(size), Limit::Free).await?;
                    }
                    ok
                }
            };
            tx.commit().await?;
            Ok(registered)
        }
    }

    /// fsck's removal of a damaged store object that no row names: under the space lock, and
    /// only if the space still has no row for it (an upload claims its row under this lock
    /// before it writes, so an object it is about to write or register is never removed),
    /// runs `remove` (which re-checks the object and deletes it). True if `remove` did.
    pub async fn remove_unregistered_object<F, Fut>(&self, space: SpaceId, hash: &str, remove: F) -> MetaResult<bool>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = bool>,
    {
        let space = space.get();
        {
            let mut tx = self.begin_space(space).await?;
            let row: Option<bool> = scalar("SELECT stored FROM blocks WHERE space_id = $1 AND hash = $2")
                .bind(space)
                .bind(hash)
                .fetch_optional(&mut tx)
                .await?;
            let removed = row.is_none() && remove().await;
            tx.commit().await?;
            Ok(removed)
        }
    }

    /// Every row of the block registry, stored or not (uploads in progress, damaged blocks).
    pub async fn block_rows(&self) -> MetaResult<Vec<BlockRow>> {
        Ok({
            let mut db = self.db();
            sql("SELECT space_id, hash, size FROM blocks ORDER BY space_id, hash")
                .fetch_all::<BlockRow, _>(&mut db)
                .await?
        })
    }

    /// The paths of the files with a version (current or older) that uses the block.
    pub async fn files_using(&self, space: SpaceId, hash: &str) -> MetaResult<Vec<String>> {
        let space = space.get();
        let ids: Vec<i64> = {
            let mut db = self.db();
            scalar(
                "SELECT DISTINCT v.node_id FROM version_blocks vb JOIN versions v ON v.id = vb.version_id \
             WHERE v.space_id = $1 AND vb.hash = $2 ORDER BY v.node_id",
            )
            .bind(space)
            .bind(hash)
            .fetch_all(&mut db)
            .await?
        };
        let mut paths = Vec::with_capacity(ids.len());
        for id in ids {
            let names: Vec<String> = {
                let mut db = self.db();
                scalar(
                    "WITH RECURSIVE up(id, parent_id, name, depth) AS (\
                 SELECT id, parent_id, name, 0 FROM nodes WHERE id = $1 \
                 UNION ALL SELECT n.id, n.parent_id, n.name, up.depth + 1 FROM nodes n JOIN up ON n.id = up.parent_id) \
                 SELECT name FROM up WHERE parent_id IS NOT NULL ORDER BY depth DESC",
                )
                .bind(id)
                .fetch_all(&mut db)
                .await?
            };
            paths.push(format!("/{}", names.join("/")));
        }
        Ok(paths)
    }
}
