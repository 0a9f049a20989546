//! The block protocol: which blocks are missing, upload one, fetch one, commit a block list
//! as a file version, read a version's manifest.
//!
//! Through a share (`/Shared with me/<name>/...`) the blocks are the owner's: block requests
//! then carry `?path=`, the file (as the caller sees it) they are for, and act only within
//! that share. A block is read only if a version of that very file is made of it, and a
//! commit through a share names only blocks of the file's own versions or blocks the caller
//! uploaded through the share (their bytes, checked against the hash): knowing the hash of an
//! owner's block outside the share reaches nothing.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use nimbus_proto::wire::{CommitRequest, Entry, Manifest, MissingBlocksRequest, MissingBlocksResponse};
use nimbus_proto::{ACCEPT_REDIRECT_HEADER, is_block_hash};

use nimbus_proto::RemotePath;
use serde::Deserialize;
use utoipa::IntoParams;

use super::files::VersionQuery;
use super::{Json, Query, actor, cache_mode, entry, rfc3339, space_path};
use crate::access::{self, Place, Want};
use crate::auth::AuthUser;
use crate::cache::CacheMode;
use crate::error::{ApiError, ApiResult};
use crate::meta::{Base, BlockEntry, CommitSpec, LockTokens, SpaceId};
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

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BlockScope {
    /// The file (as you see it, e.g. `/Shared with me/Plan/notes.txt`) the block is for.
    /// Needed only inside a share: the block is then the owner's. Without it, or for a path
    /// in your own space, the block is your space's.
    pub path: Option<String>,
}

/// Where a block request acts.
enum Scope {
    /// The caller's own space.
    Own(SpaceId),
    /// The owner's space, through one share.
    Shared { place: Place, owner: SpaceId, path: RemotePath },
}

impl Scope {
    async fn of(st: &AppState, user: &AuthUser, q: &BlockScope, want: Want) -> ApiResult<Scope> {
        let Some(raw) = q.path.as_deref() else { return Ok(Scope::Own(user.space)) };
        let asked = RemotePath::parse(raw)?;
        let place = match want {
            Want::Read => access::locate(&st.meta, user.space, &asked).await?,
            Want::Write => access::locate_new(&st.meta, user.space, &asked).await?,
        };
        let (owner, path) = place.target(want)?;
        if !place.is_shared() {
            return Ok(Scope::Own(user.space));
        }
        Ok(Scope::Shared { place, owner, path })
    }

    fn share_id(&self) -> Option<i64> {
        match self {
            Scope::Shared { place: Place::Shared { grant, .. }, .. } => Some(grant.share_id),
            _ => None,
        }
    }

    /// The id of the file at the scope's path in the owner's space, if it exists and is a file.
    async fn file(&self, st: &AppState) -> ApiResult<Option<i64>> {
        let Scope::Shared { owner, path, .. } = self else { return Ok(None) };
        match st.meta.stat(*owner, path).await {
            Ok((node, _)) if !node.is_dir() => Ok(Some(node.id)),
            Ok(_) => Ok(None),
            Err(crate::meta::MetaError::NotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

#[utoipa::path(
    post,
    path = "/api/v1/blocks/missing",
    tag = "blocks",
    summary = "Which of these blocks does my space lack? (?path= inside a write share: which to upload through it)",
    params(BlockScope),
    request_body = MissingBlocksRequest,
    responses((status = 200, description = "success", body = MissingBlocksResponse))
)]
pub async fn missing(
    State(st): State<AppState>,
    user: AuthUser,
    Query(q): Query<BlockScope>,
    Json(req): Json<MissingBlocksRequest>,
) -> ApiResult<Json<MissingBlocksResponse>> {
    if req.hashes.len() > MAX_MISSING_QUERY {
        return Err(ApiError::BadRequest(format!("ask about at most {MAX_MISSING_QUERY} hashes at a time")));
    }
    for h in &req.hashes {
        check_hash(h)?;
    }
    let scope = Scope::of(&st, &user, &q, Want::Write).await?;
    let (space, share) = match (&scope, scope.share_id()) {
        (Scope::Shared { owner, .. }, Some(share)) => (*owner, share),
        _ => {
            let missing = st.meta.missing_blocks(user.space, &req.hashes).await?;
            return Ok(Json(MissingBlocksResponse { missing }));
        }
    };
    // Through a share, what the owner's space holds is not the caller's to learn: every block
    // not yet proven for this share (uploaded through it, or part of this file) is asked for.
    let node = scope.file(&st).await?;
    let mut missing = st.meta.share_unproven_blocks(share, node, &req.hashes).await?;
    let mut listed: std::collections::HashSet<String> = missing.iter().cloned().collect();
    for h in st.meta.missing_blocks(space, &req.hashes).await? {
        if listed.insert(h.clone()) {
            missing.push(h);
        }
    }
    Ok(Json(MissingBlocksResponse { missing }))
}

#[utoipa::path(
    put,
    path = "/api/v1/blocks/{hash}",
    tag = "blocks",
    summary = "Upload one block (hash verified); ?path= inside a write share stores it in the owner's space",
    params(("hash" = String, Path, description = "The block's BLAKE3 hash, 64 lowercase hex digits"), BlockScope),
    request_body(content_type = "application/octet-stream"),
    responses((status = 201, description = "stored"), (status = 200, description = "already held"))
)]
pub async fn put_block(
    State(st): State<AppState>,
    user: AuthUser,
    Path(hash): Path<String>,
    Query(q): Query<BlockScope>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    check_hash(&hash)?;
    let scope = Scope::of(&st, &user, &q, Want::Write).await?;
    match (&scope, scope.share_id()) {
        (Scope::Shared { place, owner, .. }, Some(share)) => {
            // Stored in (and charged to) the owner's space, as any write through the share.
            space::put_block(&st, *owner, &hash, body).await.map_err(|e| place.scrub(e))?;
            st.meta.record_share_upload(share, &hash).await?;
            // Always 201: whether the owner held the block already is not the caller's to learn.
            Ok(StatusCode::CREATED)
        }
        _ => {
            let created = space::put_block(&st, user.space, &hash, body).await?;
            Ok(if created { StatusCode::CREATED } else { StatusCode::OK })
        }
    }
}

#[utoipa::path(
    method(get, head),
    path = "/api/v1/blocks/{hash}",
    tag = "blocks",
    summary = "Download one block (immutable); ?path= names the shared file it belongs to",
    params(("hash" = String, Path, description = "The block's BLAKE3 hash, 64 lowercase hex digits"), BlockScope),
    responses(
        (status = 200, description = "the block", content_type = "application/octet-stream"),
        (status = 304, description = "not modified"),
        (status = 307, description = "with X-Nimbus-Accept-Redirect and --s3-direct-reads: read the block from the URL in Location, valid for minutes, and check it against its hash")
    )
)]
pub async fn get_block(
    State(st): State<AppState>,
    user: AuthUser,
    method: Method,
    Path(hash): Path<String>,
    Query(q): Query<BlockScope>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    check_hash(&hash)?;
    let mode = cache_mode(&headers, &user)?;
    let scope = Scope::of(&st, &user, &q, Want::Read).await?;
    let space = match &scope {
        Scope::Own(space) => *space,
        Scope::Shared { owner, .. } => {
            // Only the blocks of the named file's versions, never any other of the owner's:
            // unknown to the caller as any block outside their space is.
            let Some(node) = scope.file(&st).await? else {
                return Err(ApiError::NotFound("no such block".into()));
            };
            if !st.meta.node_has_block(node, &hash).await? {
                return Err(ApiError::NotFound("no such block".into()));
            }
            *owner
        }
    };
    // Only blocks registered to the space exist.
    let Some(size) = st.meta.block_size_of(space, &hash).await? else {
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
    // A client that checks blocks itself may read this one straight from the store.
    if method == Method::GET
        && mode == CacheMode::Normal
        && headers.contains_key(ACCEPT_REDIRECT_HEADER)
        && let Some(url) = st.cache.direct_url(space.get(), &hash).await?
    {
        h.insert(header::LOCATION, HeaderValue::from_str(&url).map_err(ApiError::internal)?);
        // The URL expires: nobody may keep this answer.
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.remove(header::CONTENT_TYPE);
        metrics::counter!("nimbus_block_redirects_total").increment(1);
        return Ok((StatusCode::TEMPORARY_REDIRECT, h).into_response());
    }
    let data = st.cache.read(space.get(), &hash, 0..size.max(0) as usize, size.max(0) as usize, mode).await?;
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
    let asked = space_path(&uri, "/api/v1/manifests/")?;
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
    let place = access::locate_new(&st.meta, user.space, &asked).await?;
    let (space, path) = place.target(Want::Write)?;
    if let Place::Shared { grant, .. } = &place {
        let scope = Scope::Shared { place: place.clone(), owner: space, path: path.clone() };
        let hashes: Vec<String> = blocks.iter().map(|b| b.hash.clone()).collect();
        let unproven = st.meta.share_unproven_blocks(grant.share_id, scope.file(&st).await?, &hashes).await?;
        if let Some(first) = unproven.first() {
            return Err(ApiError::MissingBlocks(format!(
                "{} block(s) are not uploaded through this share yet (first: {first}); upload them with \
                 PUT /api/v1/blocks/{{hash}}?path=... and commit again",
                unproven.len()
            )));
        }
    }
    let (node, created, canon) =
        st.meta.commit(space, &path, &spec, LockTokens::new(&held)).await.map_err(|e| place.scrub(e))?;
    let shown = place.show(&canon)?;
    place.audit_access(&st.meta, &actor(&user), "write", &shown).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(entry(&node, &shown))).into_response())
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
    let asked = space_path(&uri, "/api/v1/manifests/")?;
    let place = access::locate(&st.meta, user.space, &asked).await?;
    let (space, path) = place.target(Want::Read)?;
    let m = st.meta.manifest(space, &path, q.version).await.map_err(|e| place.scrub(e))?;
    Ok(Json(Manifest {
        path: place.show(&m.path)?.to_string(),
        version: m.version.id,
        size: m.version.size.max(0) as u64,
        block_size: m.version.block_size.max(0) as u64,
        modified: rfc3339(m.version.created_at),
        blocks: m
            .blocks
            .iter()
            .map(|b| nimbus_proto::wire::BlockRef { hash: b.hash.clone(), size: b.size.max(0) as u64 })
            .collect(),
    }))
}
