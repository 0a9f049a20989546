//! What the S3 door keeps beyond the namespace: a folder's children in key order for listings,
//! the S3 ETag and metadata of versions written through it, and multipart uploads in progress
//! (parts are ordinary blocks of the space whose lists wait here for CompleteMultipartUpload).

use std::collections::HashMap;

use super::SpaceId;
use super::engine::{scalar, sql};
use super::{BlockEntry, Meta, MetaResult, NodeRow, node_cols, now_ms};

/// What the S3 door keeps with a version it wrote.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct S3ObjectMeta {
    pub version_id: i64,
    /// Quoted, as sent in the `ETag` header.
    pub etag: String,
    pub content_type: Option<String>,
    /// `x-amz-meta-*` as a JSON object.
    pub user_meta: Option<String>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UploadRow {
    pub id: i64,
    pub upload_id: String,
    pub user_id: i64,
    pub object_key: String,
    pub content_type: Option<String>,
    pub user_meta: Option<String>,
    pub created_at: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PartRow {
    pub part_number: i64,
    pub etag: String,
    pub size: i64,
    pub created_at: i64,
}

/// A folder's live children in S3 key order: by name, a folder's name followed by `/`
/// (the `nodes_s3_order` index; names compare bytewise in both engines).
const S3_CHILDREN_SQL: &str = concat!(
    "SELECT ",
    node_cols!(),
    " FROM nodes WHERE parent_id = $1 AND space_id = $2 AND trashed_at IS NULL \
     AND (CASE WHEN kind = 'dir' THEN name || '/' ELSE name END) >= $3 \
     ORDER BY (CASE WHEN kind = 'dir' THEN name || '/' ELSE name END) LIMIT $4"
);
const S3_CHILDREN_AFTER_SQL: &str = concat!(
    "SELECT ",
    node_cols!(),
    " FROM nodes WHERE parent_id = $1 AND space_id = $2 AND trashed_at IS NULL \
     AND (CASE WHEN kind = 'dir' THEN name || '/' ELSE name END) > $3 \
     ORDER BY (CASE WHEN kind = 'dir' THEN name || '/' ELSE name END) LIMIT $4"
);

impl Meta {
    /// Up to `limit` live children of folder `dir` of `space` whose key piece (the name, `/`
    /// appended for a folder) is `>= from` (`> from` unless `inclusive`), in bytewise order of
    /// that piece: the order S3 listings walk a folder in (`doors/s3/listing.rs`).
    pub async fn s3_children(
        &self,
        space: SpaceId,
        dir: i64,
        from: &str,
        inclusive: bool,
        limit: i64,
    ) -> MetaResult<Vec<NodeRow>> {
        let space = space.get();
        let text = if inclusive { S3_CHILDREN_SQL } else { S3_CHILDREN_AFTER_SQL };
        Ok({
            let mut db = self.db();
            sql(text).bind(dir).bind(space).bind(from).bind(limit).fetch_all::<NodeRow, _>(&mut db).await?
        })
    }

    /// What the S3 door stored with these versions (versions written through other doors
    /// have nothing).
    pub async fn s3_object_meta(&self, version_ids: &[i64]) -> MetaResult<HashMap<i64, S3ObjectMeta>> {
        let mut out = HashMap::new();
        for chunk in version_ids.chunks(500) {
            let list = (0..chunk.len()).map(|i| format!("${}", i + 1)).collect::<Vec<_>>().join(", ");
            let text = format!(
                "SELECT version_id, etag, content_type, user_meta FROM s3_object_meta WHERE version_id IN ({list})"
            );
            let rows: Vec<S3ObjectMeta> = {
                let mut db = self.db();
                let mut q = sql(sqlx::AssertSqlSafe(text));
                for v in chunk {
                    q = q.bind(v);
                }
                q.fetch_all::<S3ObjectMeta, _>(&mut db).await?
            };
            out.extend(rows.into_iter().map(|r| (r.version_id, r)));
        }
        Ok(out)
    }

    pub async fn set_s3_object_meta(&self, m: &S3ObjectMeta) -> MetaResult<()> {
        {
            let mut db = self.db();
            sql("INSERT INTO s3_object_meta (version_id, etag, content_type, user_meta) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (version_id) DO UPDATE SET etag = $2, content_type = $3, user_meta = $4")
            .bind(m.version_id)
            .bind(&m.etag)
            .bind(&m.content_type)
            .bind(&m.user_meta)
            .execute(&mut db)
            .await?;
        };
        Ok(())
    }

    pub async fn create_upload(&self, u: &UploadRow) -> MetaResult<()> {
        {
            let mut db = self.db();
            sql("INSERT INTO s3_uploads (upload_id, user_id, object_key, content_type, user_meta, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(&u.upload_id)
            .bind(u.user_id)
            .bind(&u.object_key)
            .bind(&u.content_type)
            .bind(&u.user_meta)
            .bind(now_ms())
            .execute(&mut db)
            .await?;
        };
        Ok(())
    }

    /// The user's upload with this id: another user's upload id is the same as a missing one.
    pub async fn upload(&self, user_id: i64, upload_id: &str) -> MetaResult<Option<UploadRow>> {
        Ok({
            let mut db = self.db();
            sql(
            "SELECT id, upload_id, user_id, object_key, content_type, user_meta, created_at FROM s3_uploads WHERE upload_id = $1 AND user_id = $2",
        )
        .bind(upload_id).bind(user_id).fetch_optional::<UploadRow, _>(&mut db).await?
        })
    }

    /// Takes the completion of `upload` in hand: false while another request is completing it
    /// (unless that one started before `stale_before_ms`: its gateway died halfway).
    pub async fn begin_complete(&self, upload: i64, stale_before_ms: i64) -> MetaResult<bool> {
        let n = {
            let mut db = self.db();
            sql("UPDATE s3_uploads SET completing_at = $2 WHERE id = $1 AND (completing_at IS NULL OR completing_at < $3)")
                .bind(upload)
                .bind(now_ms())
                .bind(stale_before_ms)
                .execute(&mut db)
                .await?
        };
        Ok(n == 1)
    }

    /// Lets go of a completion that did not finish: the client may try again at once.
    pub async fn end_complete(&self, upload: i64) -> MetaResult<()> {
        let mut db = self.db();
        sql("UPDATE s3_uploads SET completing_at = NULL WHERE id = $1").bind(upload).execute(&mut db).await?;
        Ok(())
    }

    /// The user's uploads in progress, by key then age.
    pub async fn list_uploads(&self, user_id: i64, limit: i64) -> MetaResult<Vec<UploadRow>> {
        Ok({
            let mut db = self.db();
            sql(
            "SELECT id, upload_id, user_id, object_key, content_type, user_meta, created_at FROM s3_uploads WHERE user_id = $1 \
             ORDER BY object_key, created_at LIMIT $2",
        )
        .bind(user_id).bind(limit).fetch_all::<UploadRow, _>(&mut db).await?
        })
    }

    /// Records (or replaces) a part and its blocks, which must already be registered. Returns
    /// the blocks of the part it replaced (clients send a part again on a retry): the caller
    /// discards those nothing else uses ([`Meta::discard_claimed`]).
    pub async fn put_part(&self, upload: i64, part: i64, etag: &str, blocks: &[BlockEntry]) -> MetaResult<Vec<String>> {
        let size: i64 = blocks.iter().map(|b| b.size).sum();
        let replaced = {
            let mut tx = self.begin_write().await?;
            let replaced: Vec<String> =
                scalar("SELECT hash FROM s3_upload_blocks WHERE upload_id = $1 AND part_number = $2")
                    .bind(upload)
                    .bind(part)
                    .fetch_all(&mut tx)
                    .await?;
            sql("DELETE FROM s3_upload_parts WHERE upload_id = $1 AND part_number = $2")
                .bind(upload)
                .bind(part)
                .execute(&mut tx)
                .await?;
            sql("INSERT INTO s3_upload_parts (upload_id, part_number, etag, size, created_at) VALUES ($1, $2, $3, $4, $5)")
                .bind(upload).bind(part).bind(etag).bind(size).bind(now_ms()).execute(&mut tx).await?;
            for (i, b) in blocks.iter().enumerate() {
                sql("INSERT INTO s3_upload_blocks (upload_id, part_number, idx, hash, size) VALUES ($1, $2, $3, $4, $5)")
                    .bind(upload).bind(part).bind(i as i64).bind(&b.hash).bind(b.size).execute(&mut tx).await?;
            }
            tx.commit().await?;
            replaced
        };
        Ok(replaced)
    }

    pub async fn list_parts(&self, upload: i64) -> MetaResult<Vec<PartRow>> {
        Ok({
            let mut db = self.db();
            sql(
            "SELECT part_number, etag, size, created_at FROM s3_upload_parts WHERE upload_id = $1 ORDER BY part_number",
        )
        .bind(upload).fetch_all::<PartRow, _>(&mut db).await?
        })
    }

    /// The blocks of one part, in order.
    pub async fn part_blocks(&self, upload: i64, part: i64) -> MetaResult<Vec<BlockEntry>> {
        Ok({
            let mut db = self.db();
            sql("SELECT hash, size FROM s3_upload_blocks WHERE upload_id = $1 AND part_number = $2 ORDER BY idx")
                .bind(upload)
                .bind(part)
                .fetch_all::<BlockEntry, _>(&mut db)
                .await?
        })
    }

    /// Ends an upload (completed or aborted) and returns the blocks its parts listed: the caller
    /// discards those nothing else uses ([`Meta::discard_claimed`] under the upload's claim), so
    /// an aborted upload frees its room at once and leaves nothing in the store.
    pub async fn delete_upload(&self, upload: i64) -> MetaResult<Vec<String>> {
        let space: Option<i64> = {
            let mut db = self.db();
            scalar("SELECT user_id FROM s3_uploads WHERE id = $1").bind(upload).fetch_optional(&mut db).await?
        };
        let Some(space) = space else { return Ok(Vec::new()) };
        let hashes = {
            let mut tx = self.begin_space(space).await?;
            let hashes: Vec<String> = scalar("SELECT DISTINCT hash FROM s3_upload_blocks WHERE upload_id = $1")
                .bind(upload)
                .fetch_all(&mut tx)
                .await?;
            sql("DELETE FROM s3_uploads WHERE id = $1").bind(upload).execute(&mut tx).await?;
            tx.commit().await?;
            hashes
        };
        Ok(hashes)
    }

    /// Aborts every upload started before `cutoff_ms`; their blocks become garbage.
    pub async fn expire_uploads(&self, cutoff_ms: i64) -> MetaResult<u64> {
        Ok({
            let mut db = self.db();
            sql("DELETE FROM s3_uploads WHERE created_at < $1").bind(cutoff_ms).execute(&mut db).await?
        })
    }
}
