//! Administration: users and the audit log. Every handler takes `AdminUser`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use nimbus_proto::names::{name_key, validate_username};
use nimbus_proto::wire::{
    AuditEntry, AuditList, CacheStats, CreateUserRequest, CreatedUser, IdentitySource, Role, UpdateUserRequest,
    UserInfo, UserList, WarmRequest, WarmStatus,
};
use serde::Deserialize;
use utoipa::IntoParams;

use super::{Json, Query, id_cursor, page, page_limit, rfc3339};
use crate::auth::{AdminUser, ClientIp, PasswordError, generate_password, hash_password};
use crate::error::{ApiError, ApiResult};
use crate::meta::{AuditFilter, NewAudit, SpaceId, UserCursor, UserOrder, UserRow, UserSort, UserUpdate};
use crate::state::AppState;

fn user_info(u: &UserRow) -> UserInfo {
    UserInfo {
        id: u.id,
        username: u.username.clone(),
        role: Role::parse(&u.role).unwrap_or_default(),
        quota_bytes: u.quota_bytes.map(|q| q.max(0) as u64),
        used_bytes: u.used_bytes.max(0) as u64,
        usage: super::usage_breakdown(u),
        disabled: u.disabled,
        sharing: u.sharing,
        links: u.links,
        source: IdentitySource::parse(&u.source).unwrap_or_default(),
        totp: u.totp_enabled,
        last_login: u.last_login_at.map(rfc3339),
        created: rfc3339(u.created_at),
        email: u.email.clone(),
        display_name: u.display_name.clone(),
    }
}

pub(super) fn user_id(raw: &str) -> ApiResult<i64> {
    raw.parse().map_err(|_| ApiError::NotFound("no such user".into()))
}

/// A quota as the audit log shows it: `10 MiB`, or `unlimited`.
fn quota_text(q: Option<i64>) -> String {
    q.map_or("unlimited".to_string(), |b| nimbus_proto::size::format_size(b.max(0).unsigned_abs()))
}

fn quota(q: u64) -> ApiResult<i64> {
    i64::try_from(q).map_err(|_| ApiError::BadRequest("quota_bytes is too large".into()))
}

async fn hash(st: &AppState, password: String) -> ApiResult<String> {
    st.passwords.run(move || hash_password(&password)).await?.map_err(|e| match e {
        PasswordError::Hash(_) => ApiError::internal(e),
        other => ApiError::BadRequest(other.to_string()),
    })
}

pub(super) async fn audit(
    st: &AppState,
    admin: &AdminUser,
    ip: ClientIp,
    action: &str,
    target: String,
    detail: Option<String>,
) -> ApiResult<()> {
    st.meta
        .audit(NewAudit {
            actor_id: Some(admin.0.id),
            actor: Some(admin.0.username.clone()),
            action: action.into(),
            target: Some(target),
            detail,
            ip: ip.0.map(|i| i.to_string()),
        })
        .await?;
    Ok(())
}

#[utoipa::path(
    post,
    path = "/api/v1/admin/users",
    tag = "admin",
    summary = "Create a user",
    request_body = CreateUserRequest,
    responses((status = 201, description = "success", body = CreatedUser))
)]
pub async fn create_user(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Json(req): Json<CreateUserRequest>,
) -> ApiResult<Response> {
    validate_username(&req.username).map_err(ApiError::BadRequest)?;
    let source = req.source.unwrap_or_default();
    let (password_hash, generated) = match (source, req.password) {
        (IdentitySource::Local, Some(p)) => (hash(&st, p).await?, None),
        (IdentitySource::Local, None) => {
            let p = generate_password();
            (hash(&st, p.clone()).await?, Some(p))
        }
        // Signs in only through the identity provider: no password at all.
        (IdentitySource::Oidc, None) => (crate::auth::oidc::NO_PASSWORD.to_string(), None),
        (IdentitySource::Oidc, Some(_)) => {
            return Err(ApiError::BadRequest("an account that signs in with single sign-on has no password".into()));
        }
        (IdentitySource::Ldap, _) => {
            return Err(ApiError::BadRequest("accounts from LDAP come from the directory, not from here".into()));
        }
    };
    let quota = match req.quota_bytes.or(st.settings.default_quota) {
        Some(q) => Some(quota(q)?),
        None => None,
    };
    let user =
        st.meta.create_user_from(&req.username, &password_hash, req.role.as_str(), quota, source.as_str()).await?;
    audit(
        &st,
        &admin,
        ip,
        "user_create",
        user.username.clone(),
        Some(format!(
            "role {}, quota {}{}",
            user.role,
            quota_text(user.quota_bytes),
            if source == IdentitySource::Local { String::new() } else { format!(", signs in with {}", user.source) }
        )),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(CreatedUser { user: user_info(&user), generated_password: generated }))
        .into_response())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Users whose name contains this.
    pub q: Option<String>,
    /// Most users returned (1-1000, default 100).
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page, of the same sort (another sort's: 400).
    pub cursor: Option<String>,
    /// `name` (default), `usage` or `created`; a leading `-` reverses it.
    pub sort: Option<String>,
}

fn user_sort(raw: Option<&str>) -> ApiResult<UserSort> {
    let raw = raw.unwrap_or("name");
    let (desc, key) = match raw.strip_prefix('-') {
        Some(k) => (true, k),
        None => (false, raw),
    };
    let by = match key {
        "name" => UserOrder::Name,
        "usage" => UserOrder::Usage,
        "created" => UserOrder::Created,
        _ => {
            return Err(ApiError::BadRequest(format!(
                "unknown sort {raw:?}: use name, usage or created, with a leading - for descending"
            )));
        }
    };
    Ok(UserSort { by, desc })
}

/// How a sort is spelled in the query and in its cursors: `name`, `-usage`, ...
fn sort_tag(sort: UserSort) -> String {
    let by = match sort.by {
        UserOrder::Name => "name",
        UserOrder::Usage => "usage",
        UserOrder::Created => "created",
    };
    format!("{}{by}", if sort.desc { "-" } else { "" })
}

/// The cursor of a user page: `SORT:KEY`, the sort it was made for, then the name key in name
/// order or `VALUE:ID` otherwise. A cursor of another sort (or direction) would place the next
/// page by a value of another column: refused rather than giving a wrong page.
fn user_cursor(sort: UserSort, raw: Option<&str>) -> ApiResult<Option<UserCursor>> {
    let Some(raw) = raw else { return Ok(None) };
    let bad = || ApiError::BadRequest("invalid cursor for this sort; start again without one".into());
    let (tag, rest) = raw.split_once(':').ok_or_else(bad)?;
    if tag != sort_tag(sort) {
        return Err(bad());
    }
    if sort.by == UserOrder::Name {
        // A name key is never empty.
        return if rest.is_empty() { Err(bad()) } else { Ok(Some(UserCursor::Name(rest.to_string()))) };
    }
    let (v, id) = rest.split_once(':').ok_or_else(bad)?;
    Ok(Some(UserCursor::Num(v.parse().map_err(|_| bad())?, id.parse().map_err(|_| bad())?)))
}

/// [`user_cursor`]'s form for the page that ends with `u`.
fn next_user_cursor(sort: UserSort, u: &UserRow) -> String {
    let tag = sort_tag(sort);
    match sort.by {
        UserOrder::Name => format!("{tag}:{}", name_key(&u.username)),
        UserOrder::Usage => format!("{tag}:{}:{}", u.used_bytes, u.id),
        UserOrder::Created => format!("{tag}:{}:{}", u.created_at, u.id),
    }
}

#[utoipa::path(
    get,
    path = "/api/v1/admin/users",
    tag = "admin",
    summary = "List users",
    params(ListQuery),
    responses((status = 200, description = "success", body = UserList))
)]
pub async fn list_users(
    State(st): State<AppState>,
    _admin: AdminUser,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<UserList>> {
    let limit = page_limit(q.limit, 100)?;
    let sort = user_sort(q.sort.as_deref())?;
    let after = user_cursor(sort, q.cursor.as_deref())?;
    let search = q.q.as_deref().filter(|s| !s.is_empty());
    let rows = st.meta.list_users(search, sort, after.as_ref(), limit + 1).await?;
    let (rows, next_cursor) = page(rows, limit, |u| next_user_cursor(sort, u));
    Ok(Json(UserList { users: rows.iter().map(user_info).collect(), next_cursor }))
}

#[utoipa::path(
    get,
    path = "/api/v1/admin/users/{id}",
    tag = "admin",
    summary = "Get a user",
    params(("id" = i64, Path, description = "The user's id")),
    responses((status = 200, description = "success", body = UserInfo))
)]
pub async fn get_user(
    State(st): State<AppState>,
    _admin: AdminUser,
    Path(id): Path<String>,
) -> ApiResult<Json<UserInfo>> {
    let u = st.meta.user(user_id(&id)?).await?.ok_or_else(|| ApiError::NotFound("no such user".into()))?;
    Ok(Json(user_info(&u)))
}

#[utoipa::path(
    patch,
    path = "/api/v1/admin/users/{id}",
    tag = "admin",
    summary = "Change quota, role, disabled, password",
    params(("id" = i64, Path, description = "The user's id")),
    request_body = UpdateUserRequest,
    responses((status = 200, description = "success", body = UserInfo))
)]
pub async fn update_user(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Path(id): Path<String>,
    Json(req): Json<UpdateUserRequest>,
) -> ApiResult<Json<UserInfo>> {
    let id = user_id(&id)?;
    let target = st.meta.user(id).await?.ok_or_else(|| ApiError::NotFound("no such user".into()))?;
    if id == admin.0.id && (req.disabled == Some(true) || req.role == Some(Role::User)) {
        return Err(ApiError::Conflict(
            "you cannot disable or demote your own account; ask another administrator".into(),
        ));
    }
    let upd = UserUpdate {
        quota_bytes: match req.quota_bytes {
            Some(Some(q)) => Some(Some(quota(q)?)),
            Some(None) => Some(None),
            None => None,
        },
        disabled: req.disabled,
        password_hash: match req.password {
            Some(p) => Some(hash(&st, p).await?),
            None => None,
        },
        role: req.role.map(|r| r.as_str().to_string()),
        sharing: req.sharing,
        links: req.links,
        // An administrator resetting their own password stays signed in where they did it
        // (signing themselves out everywhere is refused elsewhere too); their other devices
        // are signed out.
        keep_token: (id == admin.0.id).then_some(admin.0.token_id),
        // The directory's: not changed here.
        ..Default::default()
    };
    let user = st.meta.update_user_keeping_an_admin(id, &upd).await?;
    // What changed, in words: the console sends quota and role together, so a field sent with
    // its current value is not a change.
    let mut changed = Vec::new();
    match upd.quota_bytes {
        Some(q) if q == target.quota_bytes => {}
        Some(Some(q)) => changed.push(format!("quota {}", quota_text(Some(q)))),
        Some(None) => changed.push("quota removed (unlimited)".into()),
        None => {}
    }
    if let Some(d) = upd.disabled.filter(|d| *d != target.disabled) {
        changed.push(if d { "disabled".into() } else { "enabled".into() });
    }
    if upd.password_hash.is_some() {
        changed.push("password reset".into());
    }
    if let Some(r) = upd.role.as_ref().filter(|r| **r != target.role) {
        changed.push(format!("role {r}"));
    }
    if let Some(s) = upd.sharing.filter(|s| *s != target.sharing) {
        changed.push(if s { "sharing allowed".into() } else { "sharing turned off".into() });
    }
    if let Some(l) = upd.links.filter(|l| *l != target.links) {
        changed.push(if l { "public links allowed".into() } else { "public links turned off".into() });
    }
    if changed.is_empty() {
        changed.push("nothing changed".into());
    }
    audit(&st, &admin, ip, "user_update", target.username, Some(changed.join(", "))).await?;
    Ok(Json(user_info(&user)))
}

#[utoipa::path(
    delete,
    path = "/api/v1/admin/users/{id}",
    tag = "admin",
    summary = "Delete a user with all their data",
    params(("id" = i64, Path, description = "The user's id")),
    responses((status = 204, description = "deleted"))
)]
pub async fn delete_user(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = user_id(&id)?;
    if id == admin.0.id {
        return Err(ApiError::Conflict("you cannot delete your own account; ask another administrator".into()));
    }
    let user = st.meta.user(id).await?.ok_or_else(|| ApiError::NotFound("no such user".into()))?;
    st.meta.delete_user(id).await?;
    // Metadata is gone first, so nothing can reference these blocks any more.
    if let Err(e) = st.store.delete_space(id).await {
        tracing::warn!(error = %e, space = id, "could not remove all blocks of a deleted user; garbage collection will");
    }
    audit(&st, &admin, ip, "user_delete", user.username, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Entries by this username.
    pub user: Option<String>,
    /// Entries of this action (`login`, `user.create`, ...).
    pub action: Option<String>,
    /// Entries about this username.
    pub target: Option<String>,
    /// Entries at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Entries at or before this time (RFC 3339).
    pub until: Option<String>,
    /// Most entries returned (1-1000, default 100).
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// An RFC 3339 query parameter as Unix milliseconds.
fn time_param(name: &str, v: Option<&str>) -> ApiResult<Option<i64>> {
    let Some(v) = v.filter(|v| !v.is_empty()) else { return Ok(None) };
    let t = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339)
        .map_err(|_| ApiError::BadRequest(format!("{name} must be an RFC 3339 time, e.g. 2026-01-31T12:00:00Z")))?;
    Ok(Some((t.unix_timestamp_nanos() / 1_000_000) as i64))
}

#[utoipa::path(
    get,
    path = "/api/v1/admin/audit",
    tag = "admin",
    summary = "Audit log, newest first",
    params(AuditQuery),
    responses((status = 200, description = "success", body = AuditList))
)]
pub async fn audit_log(
    State(st): State<AppState>,
    _admin: AdminUser,
    Query(q): Query<AuditQuery>,
) -> ApiResult<Json<AuditList>> {
    let limit = page_limit(q.limit, 100)?;
    let filter = AuditFilter {
        since_ms: time_param("since", q.since.as_deref())?,
        until_ms: time_param("until", q.until.as_deref())?,
        actor: q.user.filter(|s| !s.is_empty()),
        action: q.action.filter(|s| !s.is_empty()),
        target: q.target.filter(|s| !s.is_empty()),
        before_id: id_cursor(q.cursor.as_deref())?,
        limit: limit + 1,
    };
    let (rows, next_cursor) = page(st.meta.list_audit(&filter).await?, limit, |r| r.id.to_string());
    let entries = rows
        .into_iter()
        .map(|r| AuditEntry {
            id: r.id,
            at: rfc3339(r.at),
            actor: r.actor,
            action: r.action,
            target: r.target,
            detail: r.detail,
            ip: r.ip,
        })
        .collect();
    Ok(Json(AuditList { entries, next_cursor }))
}

#[utoipa::path(
    get,
    path = "/api/v1/admin/cache",
    tag = "admin",
    summary = "Block cache statistics",
    responses((status = 200, description = "success", body = CacheStats))
)]
pub async fn cache_stats(State(st): State<AppState>, _admin: AdminUser) -> Json<CacheStats> {
    Json(st.cache.stats())
}

#[utoipa::path(
    delete,
    path = "/api/v1/admin/cache",
    tag = "admin",
    summary = "Empty the block cache",
    responses((status = 204, description = "emptied"))
)]
pub async fn cache_purge(State(st): State<AppState>, admin: AdminUser, ip: ClientIp) -> ApiResult<StatusCode> {
    st.cache.purge().map_err(|e| ApiError::internal(anyhow::anyhow!(e)))?;
    audit(&st, &admin, ip, "cache_purge", "gateway cache".into(), None).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Starts loading a user's folder into the cache in the background → 202 with the job.
#[utoipa::path(
    post,
    path = "/api/v1/admin/cache/warm",
    tag = "admin",
    summary = "Load a user's folder into the cache in the background",
    request_body = WarmRequest,
    responses((status = 202, description = "success", body = WarmStatus))
)]
pub async fn cache_warm(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Json(req): Json<WarmRequest>,
) -> ApiResult<Response> {
    let path = super::parse_path(req.path.as_deref().unwrap_or("/"))?;
    let user = st.meta.user(req.user_id).await?.ok_or_else(|| ApiError::NotFound("no such user".into()))?;
    // Fail now, not in the background, if the folder does not exist.
    // An administrator acting on the user's space.
    let space = SpaceId::authenticated(user.id);
    st.meta.stat(space, &path).await?;
    let status = st.warmer.start(st.meta.clone(), st.cache.clone(), space, path.clone());
    audit(&st, &admin, ip, "cache_warm", format!("{}:{path}", user.username), None).await?;
    Ok((StatusCode::ACCEPTED, Json(status)).into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/admin/cache/warm/{id}",
    tag = "admin",
    summary = "Progress of a cache warm-up job",
    params(("id" = i64, Path, description = "The job's id")),
    responses((status = 200, description = "success", body = WarmStatus))
)]
pub async fn cache_warm_status(
    State(st): State<AppState>,
    _admin: AdminUser,
    Path(id): Path<String>,
) -> ApiResult<Json<WarmStatus>> {
    let id: u64 = id.parse().map_err(|_| ApiError::NotFound("no such warm-up job".into()))?;
    st.warmer.status(id).map(Json).ok_or_else(|| ApiError::NotFound("no such warm-up job".into()))
}
