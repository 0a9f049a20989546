//! The thumbnails kept for the web app's listings (`api/thumbnails.rs` makes and serves them):
//! one row per (space, content key, box size), the encoded image in the row. The caller has
//! already resolved its path to a version of `space` with that content key, so a row is only
//! ever read for content the caller may read. Bounded: past [`MAX_THUMBNAILS`] rows the oldest
//! are deleted.

use super::engine::sql;
use super::{Meta, MetaResult, SpaceId, now_ms};

/// Most thumbnails kept, across all spaces. At 256 px a photo's JPEG is some 10-20 KB, at the
/// default 128 px a few KB: a few hundred MB of database at most.
pub const MAX_THUMBNAILS: i64 = 20_000;

/// A thumbnail as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredThumbnail {
    pub mime: String,
    pub data: Vec<u8>,
}

impl Meta {
    /// The kept thumbnail of content `key` of `space` at box `size`, if any.
    pub async fn thumbnail(&self, space: SpaceId, key: &str, size: u32) -> MetaResult<Option<StoredThumbnail>> {
        let mut db = self.db();
        Ok(sql("SELECT mime, data FROM thumbnails WHERE space_id = $1 AND content_key = $2 AND size = $3")
            .bind(space.get())
            .bind(key)
            .bind(i64::from(size))
            .fetch_optional::<StoredThumbnail, _>(&mut db)
            .await?)
    }

    /// Keeps a thumbnail (a second one made meanwhile for the same key is the same image: the
    /// first stays), then deletes the oldest beyond [`MAX_THUMBNAILS`]. Returns how many are
    /// kept then, and their bytes.
    pub async fn put_thumbnail(
        &self,
        space: SpaceId,
        key: &str,
        size: u32,
        mime: &str,
        data: Vec<u8>,
    ) -> MetaResult<(i64, i64)> {
        let mut db = self.db();
        let bytes = data.len() as i64;
        sql("INSERT INTO thumbnails (space_id, content_key, size, mime, data, bytes, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (space_id, content_key, size) DO NOTHING")
        .bind(space.get())
        .bind(key)
        .bind(i64::from(size))
        .bind(mime)
        .bind(data)
        .bind(bytes)
        .bind(now_ms())
        .execute(&mut db)
        .await?;
        self.evict_thumbnails(MAX_THUMBNAILS).await
    }

    /// Deletes the oldest thumbnails until at most `keep` remain; returns how many remain and
    /// their bytes.
    pub(crate) async fn evict_thumbnails(&self, keep: i64) -> MetaResult<(i64, i64)> {
        let mut db = self.db();
        let totals = || sql("SELECT COUNT(*), CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM thumbnails");
        let (count, bytes): (i64, i64) = totals().fetch_one(&mut db).await?;
        if count <= keep {
            return Ok((count, bytes));
        }
        sql("DELETE FROM thumbnails WHERE (space_id, content_key, size) IN \
             (SELECT space_id, content_key, size FROM thumbnails ORDER BY created_at, content_key LIMIT $1)")
        .bind(count - keep)
        .execute(&mut db)
        .await?;
        Ok(totals().fetch_one(&mut db).await?)
    }
}
