//! The caller's own public links: create, list, change, revoke (`/api/v1/links`). What a link
//! opens, and to whom, is `public_links.rs`; how it is stored is `meta/links.rs`.
//!
//! The token is 256 random bits, found by its BLAKE3 hash; it is also kept sealed under the
//! server key (the S3 secrets' sealer, bound to the hash), because people expect to copy a
//! link again from the list, as in every sharing product. Every handler is scoped by the
//! caller's space: another user's link id answers exactly like a missing one (404).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use nimbus_proto::wire::{CreateLinkRequest, LinkInfo, LinkList, LinkMode, UpdateLinkRequest};
use rand::RngCore;

use super::{Json, parse_path, rfc3339};
use crate::auth::{AuthUser, hash_password, token_hash};
use crate::error::{ApiError, ApiResult};
use crate::meta::{LinkRow, LinkUpdate, NewLink, SpaceId, now_ms};
use crate::state::AppState;

/// Links one user may hold: enough for anyone, bounded against runaway scripts.
const MAX_LINKS_PER_USER: i64 = 1000;

/// A fresh link token (256 random bits, URL-safe) and its hash.
fn new_link_token() -> (String, String) {
    let mut raw = [0u8; 32];
    rand::rng().fill_bytes(&mut raw);
    let token = URL_SAFE_NO_PAD.encode(raw);
    let hash = token_hash(&token);
    (token, hash)
}

/// What the sealed token is bound to: a sealed token copied onto another row does not open.
fn seal_binding(hash: &str) -> String {
    format!("link:{hash}")
}

/// `https://host` as the caller addressed this gateway: the `Host` header, over HTTPS when the
/// gateway serves TLS or a trusted proxy says the client came over HTTPS (`X-Forwarded-Proto`).
pub(super) fn base_url(st: &AppState, parts: &Parts) -> String {
    let headers = &parts.headers;
    let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let proxied = peer.is_some_and(|p| st.settings.trusted_proxies.trusts(p));
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let host = proxied
        .then(|| header("x-forwarded-host").and_then(|h| h.split(',').next_back()).map(str::trim))
        .flatten()
        .or_else(|| header("host"))
        .filter(|h| {
            !h.is_empty() && h.len() <= 255 && h.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
        })
        .unwrap_or("localhost");
    let https =
        st.settings.tls || (proxied && header("x-forwarded-proto").is_some_and(|p| p.eq_ignore_ascii_case("https")));
    format!("{}://{host}", if https { "https" } else { "http" })
}

fn parse_expiry(raw: &str) -> ApiResult<i64> {
    let t = time::OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339)
        .map_err(|_| ApiError::BadRequest("expires_at must be an RFC 3339 time, e.g. 2026-01-31T12:00:00Z".into()))?;
    let ms = i64::try_from(t.unix_timestamp_nanos() / 1_000_000)
        .map_err(|_| ApiError::BadRequest("expires_at is out of range".into()))?;
    if ms <= now_ms() {
        return Err(ApiError::BadRequest("expires_at is in the past".into()));
    }
    Ok(ms)
}

/// Slack for a client that computes "the longest allowed" itself and sends it a moment later.
const EXPIRY_SLACK_MS: i64 = 60_000;

/// An expiry under the administrator's `--link-max-expiry`: none asked gets the longest
/// allowed, a later one is refused (never shortened silently: the owner would not know).
fn within_max_expiry(st: &AppState, asked: Option<i64>) -> ApiResult<Option<i64>> {
    let Some(max) = st.settings.link_max_expiry else {
        return Ok(asked);
    };
    let max_ms = i64::try_from(max.as_millis()).unwrap_or(i64::MAX);
    let limit = now_ms().saturating_add(max_ms);
    match asked {
        None => Ok(Some(limit)),
        Some(e) if e <= limit.saturating_add(EXPIRY_SLACK_MS) => Ok(Some(e.min(limit))),
        Some(_) => Err(ApiError::BadRequest(format!(
            "links expire within {} at most (the administrator's limit); choose an earlier expires_at",
            crate::timefmt::format_duration(max)
        ))),
    }
}

/// Refuses when an administrator has turned public links off for the caller.
async fn check_links_allowed(st: &AppState, user: &AuthUser) -> ApiResult<()> {
    if st.meta.user(user.id).await?.is_some_and(|u| u.links) {
        return Ok(());
    }
    Err(ApiError::Forbidden(
        "an administrator has turned public links off for your account; ask them to turn them on".into(),
    ))
}

fn parse_max_downloads(n: u64) -> ApiResult<i64> {
    match i64::try_from(n) {
        Ok(0) => Err(ApiError::BadRequest("max_downloads must be at least 1".into())),
        Ok(n) => Ok(n),
        Err(_) => Err(ApiError::BadRequest(format!("max_downloads must be at most {}", i64::MAX))),
    }
}

async fn hash_link_password(st: &AppState, password: String) -> ApiResult<String> {
    st.passwords.run(move || hash_password(&password)).await?.map_err(|e| match e {
        crate::auth::PasswordError::Hash(_) => ApiError::internal(e),
        other => ApiError::BadRequest(format!("link password: {other}")),
    })
}

/// Upload links are file drops: they need a folder, and count no downloads.
fn check_mode(mode: LinkMode, is_dir: bool, max_downloads: Option<i64>) -> ApiResult<()> {
    if mode == LinkMode::Upload && !is_dir {
        return Err(ApiError::BadRequest("an upload link needs a folder: visitors add files to it".into()));
    }
    if mode == LinkMode::Upload && max_downloads.is_some() {
        return Err(ApiError::BadRequest(
            "max_downloads applies to view links; an upload link has no downloads".into(),
        ));
    }
    Ok(())
}

/// The link as its owner sees it.
async fn link_info(st: &AppState, space: SpaceId, base: &str, l: LinkRow) -> ApiResult<LinkInfo> {
    let token = st
        .s3_sealer
        .open(&seal_binding(&l.token_hash), &l.token_sealed)
        .map_err(|e| ApiError::internal(anyhow::Error::new(e).context("a link token does not open")))?;
    let (path, live) = match st.meta.node_path(space, l.node_id).await {
        Ok((_, p, live)) => (p.to_string(), live),
        // Purged while we looked: its link is going too.
        Err(crate::meta::MetaError::NotFound) => (String::new(), false),
        Err(e) => return Err(e.into()),
    };
    Ok(LinkInfo {
        id: l.id,
        url: format!("{base}/s/{token}"),
        token,
        path,
        mode: LinkMode::parse(&l.mode).unwrap_or_default(),
        expires_at: l.expires_at.map(rfc3339),
        max_downloads: l.max_downloads.map(|m| m.max(0) as u64),
        downloads: l.downloads.max(0) as u64,
        created: rfc3339(l.created_at),
        has_password: l.password_hash.is_some(),
        active: live && !l.spent(now_ms()),
    })
}

fn no_such_link() -> ApiError {
    ApiError::NotFound("no such link".into())
}

/// A link id from the URL: anything that is not one of the caller's link ids is "no such link".
fn link_id(raw: &str) -> ApiResult<i64> {
    raw.parse().map_err(|_| no_such_link())
}

async fn audit(st: &AppState, user: &AuthUser, action: &str, id: i64, detail: String) -> ApiResult<()> {
    super::audit_user(st, user, action, format!("link:{id}"), Some(detail)).await
}

#[utoipa::path(
    post,
    path = "/api/v1/links",
    tag = "links",
    summary = "Create a public link to a file or folder of your space",
    request_body = CreateLinkRequest,
    responses((status = 201, description = "created", body = LinkInfo))
)]
pub async fn create(
    State(st): State<AppState>,
    user: AuthUser,
    parts: Parts,
    Json(req): Json<CreateLinkRequest>,
) -> ApiResult<(StatusCode, Json<LinkInfo>)> {
    let path = parse_path(&req.path)?;
    if path.is_root() {
        return Err(ApiError::BadRequest("link a file or a folder, not your whole space".into()));
    }
    check_links_allowed(&st, &user).await?;
    let expires_at = within_max_expiry(&st, req.expires_at.as_deref().map(parse_expiry).transpose()?)?;
    let max_downloads = req.max_downloads.map(parse_max_downloads).transpose()?;
    let (node, canon) = st.meta.stat(user.space, &path).await?;
    check_mode(req.mode, node.is_dir(), max_downloads)?;
    if st.meta.count_links(user.space).await? >= MAX_LINKS_PER_USER {
        return Err(ApiError::Conflict(format!(
            "you already have {MAX_LINKS_PER_USER} links; delete some first (DELETE /api/v1/links/{{id}})"
        )));
    }
    let password_hash = match req.password {
        Some(p) => Some(hash_link_password(&st, p).await?),
        None => None,
    };
    let (token, hash) = new_link_token();
    let sealed = st.s3_sealer.seal(&seal_binding(&hash), &token);
    let new = NewLink {
        node_id: node.id,
        token_hash: hash,
        token_sealed: sealed,
        mode: req.mode.as_str().into(),
        password_hash,
        expires_at,
        max_downloads,
    };
    let id = st.meta.insert_link(user.space, &new).await?;
    let detail = format!(
        "{} link to {canon}{}{}{}",
        req.mode.as_str(),
        if new.password_hash.is_some() { ", password" } else { "" },
        expires_at.map(|e| format!(", expires {}", rfc3339(e))).unwrap_or_default(),
        max_downloads.map(|m| format!(", at most {m} downloads")).unwrap_or_default(),
    );
    audit(&st, &user, "link_created", id, detail).await?;
    let row = st.meta.link(user.space, id).await?.ok_or_else(no_such_link)?;
    let info = link_info(&st, user.space, &base_url(&st, &parts), row).await?;
    Ok((StatusCode::CREATED, Json(info)))
}

#[utoipa::path(
    get,
    path = "/api/v1/links",
    tag = "links",
    summary = "List your public links (with their URLs)",
    responses((status = 200, description = "success", body = LinkList))
)]
pub async fn list(State(st): State<AppState>, user: AuthUser, parts: Parts) -> ApiResult<Json<LinkList>> {
    let base = base_url(&st, &parts);
    // While an administrator has links off for the caller, none of them opens.
    let allowed = st.meta.user(user.id).await?.is_some_and(|u| u.links);
    let mut links = Vec::new();
    for row in st.meta.list_links(user.space).await? {
        let mut info = link_info(&st, user.space, &base, row).await?;
        info.active &= allowed;
        links.push(info);
    }
    Ok(Json(LinkList { links }))
}

#[utoipa::path(
    patch,
    path = "/api/v1/links/{id}",
    tag = "links",
    summary = "Change a link: mode, password, expiry, download limit (null removes one)",
    params(("id" = i64, Path, description = "The link's id")),
    request_body = UpdateLinkRequest,
    responses((status = 200, description = "changed", body = LinkInfo))
)]
pub async fn update(
    State(st): State<AppState>,
    user: AuthUser,
    Path(id): Path<String>,
    parts: Parts,
    Json(req): Json<UpdateLinkRequest>,
) -> ApiResult<Json<LinkInfo>> {
    let id = link_id(&id)?;
    let row = st.meta.link(user.space, id).await?.ok_or_else(no_such_link)?;
    check_links_allowed(&st, &user).await?;
    let expires_at = match &req.expires_at {
        Some(Some(raw)) => Some(within_max_expiry(&st, Some(parse_expiry(raw)?))?),
        // Removing the expiry under a maximum means "as long as allowed".
        Some(None) => Some(within_max_expiry(&st, None)?),
        None => None,
    };
    let max_downloads = match req.max_downloads {
        Some(Some(n)) => Some(Some(parse_max_downloads(n)?)),
        Some(None) => Some(None),
        None => None,
    };
    let mode = req.mode.unwrap_or(LinkMode::parse(&row.mode).unwrap_or_default());
    let (node, _, _) = st.meta.node_path(user.space, row.node_id).await?;
    check_mode(mode, node.is_dir(), max_downloads.unwrap_or(row.max_downloads))?;
    let password_hash = match req.password.clone() {
        Some(Some(p)) => Some(Some(hash_link_password(&st, p).await?)),
        Some(None) => Some(None),
        None => None,
    };
    let mut changed = Vec::new();
    if let Some(m) = req.mode {
        changed.push(format!("mode {}", m.as_str()));
    }
    match &password_hash {
        Some(Some(_)) => changed.push("password set".into()),
        Some(None) => changed.push("password removed".into()),
        None => {}
    }
    match expires_at {
        Some(Some(e)) => changed.push(format!("expires {}", rfc3339(e))),
        Some(None) => changed.push("expiry removed".into()),
        None => {}
    }
    match max_downloads {
        Some(Some(m)) => changed.push(format!("at most {m} downloads")),
        Some(None) => changed.push("download limit removed".into()),
        None => {}
    }
    let update =
        LinkUpdate { mode: req.mode.map(|m| m.as_str().to_string()), password_hash, expires_at, max_downloads };
    if !st.meta.update_link(user.space, id, &update).await? {
        return Err(no_such_link());
    }
    if !changed.is_empty() {
        audit(&st, &user, "link_changed", id, changed.join(", ")).await?;
    }
    let row = st.meta.link(user.space, id).await?.ok_or_else(no_such_link)?;
    Ok(Json(link_info(&st, user.space, &base_url(&st, &parts), row).await?))
}

#[utoipa::path(
    delete,
    path = "/api/v1/links/{id}",
    tag = "links",
    summary = "Revoke a link: it answers 404 at once, on every gateway",
    params(("id" = i64, Path, description = "The link's id")),
    responses((status = 204, description = "revoked"))
)]
pub async fn revoke(State(st): State<AppState>, user: AuthUser, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let id = link_id(&id)?;
    if !st.meta.delete_link(user.space, id).await? {
        return Err(no_such_link());
    }
    audit(&st, &user, "link_revoked", id, "revoked".into()).await?;
    Ok(StatusCode::NO_CONTENT)
}
