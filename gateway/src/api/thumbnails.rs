//! `GET /api/v1/thumbnails/{path}?size=N`: a small image of an image file, for the web app's
//! listings. Scoped exactly like a file read (`files::get_file`): the caller's own space, or
//! `/Shared with me/<name>/...` with a share of either permission; anything else is 404.
//!
//! The thumbnail is made from the current version's content, read through the cache like a
//! download (every block verified), decoded on the blocking pool under a bound on concurrent
//! jobs ([`crate::state::Shared::thumbnails`]) and the `image` crate's limits
//! (`crate::thumbs`), and kept in the metadata database keyed by the owning space, a key of the
//! content and the box size (`meta/thumbs.rs`). A kept thumbnail is served only after the
//! caller's path resolved to a version with that key, so a thumbnail never outlives the
//! caller's right to the file. Not audited (as Nextcloud's previews are not): showing a
//! listing is not reading the files in it; a download is audited as ever.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use headers::{ETag, HeaderMapExt, IfNoneMatch};
use serde::Deserialize;
use utoipa::IntoParams;

use super::{Query, space_path};
use crate::access::{self, Want};
use crate::auth::AuthUser;
use crate::cache::CacheMode;
use crate::error::{ApiError, ApiResult};
use crate::meta::{BlockEntry, SpaceId};
use crate::state::AppState;
use crate::thumbs::{self, ThumbError};

const THUMBNAILS: &str = "/api/v1/thumbnails/";

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ThumbQuery {
    /// The box the thumbnail fits in, in pixels: 64, 128 (default) or 256.
    pub size: Option<u32>,
}

/// A key of a version's content: BLAKE3 over its block list. Blocks are named by the BLAKE3 of
/// their bytes, so equal lists are equal content, and a changed file gets a new key.
pub(crate) fn content_key(blocks: &[BlockEntry]) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"nimbus-thumbnail-content-v1");
    for b in blocks {
        h.update(b.hash.as_bytes());
        h.update(&b.size.to_le_bytes());
    }
    h.finalize().to_hex()[..32].to_string()
}

impl From<ThumbError> for ApiError {
    fn from(e: ThumbError) -> Self {
        ApiError::UnsupportedMediaType(e.to_string())
    }
}

#[utoipa::path(
    get,
    path = "/api/v1/thumbnails/{*path}",
    tag = "files",
    summary = "A thumbnail of an image file (JPEG, PNG, GIF, WebP) fitting a size x size box: JPEG, or PNG when the image has alpha; If-None-Match",
    params(("path" = String, Path, description = "A path in your space, each component percent-encoded"), ThumbQuery),
    responses(
        (status = 200, description = "the thumbnail", content_type = "image/jpeg"),
        (status = 304, description = "not modified"),
        (status = 400, description = "a size other than 64, 128, 256", body = nimbus_proto::wire::ErrorBody),
        (status = 415, description = "not an image, damaged, or too large", body = nimbus_proto::wire::ErrorBody)
    )
)]
pub async fn get_thumbnail(
    State(st): State<AppState>,
    user: AuthUser,
    uri: Uri,
    headers: HeaderMap,
    Query(q): Query<ThumbQuery>,
) -> ApiResult<Response> {
    let size = q.size.unwrap_or(thumbs::DEFAULT_SIZE);
    if !thumbs::SIZES.contains(&size) {
        return Err(ApiError::BadRequest(format!("size must be one of {:?} (pixels)", thumbs::SIZES)));
    }
    let asked = space_path(&uri, THUMBNAILS)?;
    let place = access::locate(&st.meta, user.space, &asked).await?;
    let (space, path) = place.target(Want::Read)?;
    let m = st.meta.manifest(space, &path, None).await.map_err(|e| place.scrub(e))?;
    let key = content_key(&m.blocks);
    let etag: ETag =
        format!("\"t{size}-{key}\"").parse().map_err(|_| ApiError::internal(anyhow::anyhow!("bad thumbnail etag")))?;
    let mut out = HeaderMap::new();
    out.typed_insert(etag.clone());
    // Per user (it came with their token), and checked again on every use (the path may now
    // name other content; the ETag tells whether it does).
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    if let Some(inm) = headers.typed_get::<IfNoneMatch>()
        && !inm.precondition_passes(&etag)
    {
        return Ok((StatusCode::NOT_MODIFIED, out).into_response());
    }
    if m.version.size.max(0) as u64 > thumbs::MAX_SOURCE_BYTES {
        metrics::counter!("nimbus_thumbnails_refused_total").increment(1);
        return Err(
            ThumbError::TooLarge(format!("a file over {} MiB", thumbs::MAX_SOURCE_BYTES / (1024 * 1024))).into()
        );
    }
    let thumb = match st.meta.thumbnail(space, &key, size).await? {
        Some(kept) => {
            metrics::counter!("nimbus_thumbnails_served_kept_total").increment(1);
            kept
        }
        None => make(&st, space, &key, size, &m.blocks).await?,
    };
    let mime = HeaderValue::from_str(&thumb.mime).map_err(ApiError::internal)?;
    out.insert(header::CONTENT_TYPE, mime);
    Ok((StatusCode::OK, out, Body::from(thumb.data)).into_response())
}

/// Makes, keeps and returns the thumbnail of content `key` (made of `blocks`) of `space`.
async fn make(
    st: &AppState,
    space: SpaceId,
    key: &str,
    size: u32,
    blocks: &[BlockEntry],
) -> ApiResult<crate::meta::StoredThumbnail> {
    // The permit bounds the sources held in memory and the decodes running at once; a request
    // waits for one (within the API's minute) rather than adding to the load.
    let _permit = st.thumbnails.acquire().await.map_err(ApiError::internal)?;
    // Made by another request while this one waited.
    if let Some(kept) = st.meta.thumbnail(space, key, size).await? {
        return Ok(kept);
    }
    let total: u64 = blocks.iter().map(|b| b.size.max(0) as u64).sum();
    let src: Vec<u8> = if total == 0 {
        Vec::new()
    } else {
        let stream = crate::space::open_range(st, space, blocks, (0, total - 1), CacheMode::Normal).await?;
        let mut buf = Vec::with_capacity(total as usize);
        let mut stream = std::pin::pin!(stream);
        while let Some(chunk) = stream.try_next().await.map_err(ApiError::internal)? {
            buf.extend_from_slice(&chunk);
        }
        buf
    };
    let made = tokio::task::spawn_blocking(move || thumbs::make(&src, size)).await.map_err(ApiError::internal)?;
    let t = match made {
        Ok(t) => t,
        Err(e) => {
            metrics::counter!("nimbus_thumbnails_refused_total").increment(1);
            return Err(e.into());
        }
    };
    metrics::counter!("nimbus_thumbnails_made_total").increment(1);
    let (count, bytes) = st.meta.put_thumbnail(space, key, size, t.mime, t.data.clone()).await?;
    metrics::gauge!("nimbus_thumbnails_kept").set(count as f64);
    metrics::gauge!("nimbus_thumbnails_kept_bytes").set(bytes as f64);
    Ok(crate::meta::StoredThumbnail { mime: t.mime.to_string(), data: t.data })
}
