//! The block protocol: which blocks are missing, upload one, fetch one, commit a block list
//! as a file version, read a version's manifest.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use nimbus_proto::is_block_hash;
use nimbus_proto::wire::{CommitRequest, Entry, Manifest, MissingBlocksRequest, MissingBlocksResponse};

use super::files::VersionQuery;
use super::{Json, Query, cache_mode, entry, rfc3339, space_path};
use crate::auth::AuthUser;
use crate::error::{ApiError, ApiResult};
use crate::meta::{Base, BlockEntry, CommitSpec, LockTokens};
use crate::space;
use crate::state::AppState;

const MAX_MISSING_QUERY: usize = 10_000;

fn check_hash(hash: &str) -> ApiResult<()> {
    if is_block_hash(hash) {
        Ok(())
    } else {
        Err(ApiError::BadRequest(format!(
            "`{}` is not a block hash (64 lowercase hex digits of BLAKE3)",
            hash.escape_debug()
        )))
    }
}

#[utoipa::path(
    post,
    path = "/api/v1/blocks/missing",
    tag = "blocks",
    summary = "Which of these blocks does my space lack?",
    request_body = MissingBlocksRequest,
    responses((status = 200, description = "success", body = MissingBlocksResponse))
)]
pub async fn missing(
    State(st): State<AppState>,
    user: AuthUser,
    Json(req): Json<MissingBlocksRequest>,
) -> ApiResult<Json<MissingBlocksResponse>> {
    if req.hashes.len() > MAX_MISSING_QUERY {
        return Err(ApiError::BadRequest(format!("ask about at most {MAX_MISSING_QUERY} hashes at a time")));
    }
    for h in &req.hashes {
        check_hash(h)?;
    }
    let missing = st.meta.missing_blocks(user.space, &req.hashes).await?;
    Ok(Json(MissingBlocksResponse { missing }))
}

#[utoipa::path(
    put,
    path = "/api/v1/blocks/{hash}",
    tag = "blocks",
    summary = "Upload one block (hash verified)",
    params(("hash" = String, Path, description = "The block's BLAKE3 hash, 64 lowercase hex digits")),
    request_body(content_type = "application/octet-stream"),
    responses((status = 201, description = "stored"), (status = 200, description = "already held"))
)]
pub async fn put_block(
    State(st): State<AppState>,
    user: AuthUser,
    Path(hash): Path<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    check_hash(&hash)?;
    let created = space::put_block(&st, user.space, &hash, body).await?;
    Ok(if created { StatusCode::CREATED } else { StatusCode::OK })
}

#[utoipa::path(
    method(get, head),
    path = "/api/v1/blocks/{hash}",
    tag = "blocks",
    summary = "Download one block (immutable)",
    params(("hash" = String, Path, description = "The block's BLAKE3 hash, 64 lowercase hex digits")),
    responses((status = 200, description = "the block", content_type = "application/octet-stream"), (status = 304, description = "not modified"))
)]
pub async fn get_block(
    State(st): State<AppState>,
    user: AuthUser,
    method: Method,
    Path(hash): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    check_hash(&hash)?;
    let mode = cache_mode(&headers, &user)?;
    // Only blocks registered to the caller's space exist for them.
    let Some(size) = st.meta.block_size_of(user.space, &hash).await? else {
        return Err(ApiError::NotFound("no such block".into()));
    };
    let etag = format!("\"{hash}\"");
    let mut h = HeaderMap::new();
    h.insert(header::ETAG, HeaderValue::from_str(&etag).map_err(ApiError::internal)?);
    // Content-addressed: the bytes behind this URL can never change.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=31536000, immutable"));
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
    {
        return Ok((StatusCode::NOT_MODIFIED, h).into_response());
    }
    let data = st.cache.read(user.id, &hash, 0..size.max(0) as usize, size.max(0) as usize, mode).await?;
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(data.len()));
    if method == Method::HEAD {
        return Ok((StatusCode::OK, h).into_response());
    }
    Ok((StatusCode::OK, h, data).into_response())
}

#[utoipa::path(
    post,
    path = "/api/v1/manifests/{*path}",
    tag = "blocks",
    summary = "Commit a block list as the file's new version",
    params(("path" = String, Path, description = "A path in your space, each component percent-encoded")),
    request_body = CommitRequest,
    responses((status = 201, description = "created", body = Entry), (status = 200, description = "a new version", body = Entry))
)]
pub async fn commit(
    State(st): State<AppState>,
    user: AuthUser,
    uri: Uri,
    headers: axum::http::HeaderMap,
    Json(req): Json<CommitRequest>,
) -> ApiResult<Response> {
    let path = space_path(&uri, "/api/v1/manifests/")?;
    let bs = st.settings.block_size;
    let n = req.blocks.len();
    for (i, b) in req.blocks.iter().enumerate() {
        check_hash(&b.hash)?;
        let last = i + 1 == n;
        if b.size == 0 || b.size > bs || (!last && b.size != bs) {
            return Err(ApiError::BadRequest(format!(
                "block {i} has {} bytes; every block but the last must hold exactly {bs} bytes and the last 1 to {bs}",
                b.size
            )));
        }
    }
    let blocks: Vec<BlockEntry> =
        req.blocks.iter().map(|b| BlockEntry { hash: b.hash.clone(), size: b.size as i64 }).collect();
    let base = if req.force { Base::Any } else { Base::Expect(req.base_version) };
    let spec = CommitSpec { base, blocks: &blocks, block_size: bs as i64, device: Some(&user.device) };
    let held = super::lock_tokens(&headers);
    let (node, created, path) = st.meta.commit(user.space, &path, &spec, LockTokens::new(&held)).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(entry(&node, &path))).into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/manifests/{*path}",
    tag = "blocks",
    summary = "A version's block list",
    params(("path" = String, Path, description = "A path in your space, each component percent-encoded"), VersionQuery),
    responses((status = 200, description = "success", body = Manifest))
)]
pub async fn get_manifest(
    State(st): State<AppState>,
    user: AuthUser,
    uri: Uri,
    Query(q): Query<VersionQuery>,
) -> ApiResult<Json<Manifest>> {
    let path = space_path(&uri, "/api/v1/manifests/")?;
    let m = st.meta.manifest(user.space, &path, q.version).await?;
    Ok(Json(Manifest {
        path: m.path.to_string(),
        version: m.version.id,
        size: m.version.size.max(0) as u64,
        block_size: m.version.block_size.max(0) as u64,
        modified: rfc3339(m.version.created_at),
        blocks: m
            .blocks
            .into_iter()
            .map(|b| nimbus_proto::wire::BlockRef { hash: b.hash, size: b.size.max(0) as u64 })
            .collect(),
    }))
}
