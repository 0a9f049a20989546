//! Shares between users: the owner shares a file or folder with a colleague (`read` or
//! `write`), lists, changes and revokes them; the recipient lists what is shared with them and
//! may leave a share. What a share gives access to is in `crate::access`.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use nimbus_proto::RemotePath;
use nimbus_proto::wire::{
    AdminShareInfo, AdminShareList, CreateShareRequest, EntryKind, IncomingShareInfo, IncomingShareList, ShareInfo,
    ShareList, SharePermission, UpdateShareRequest,
};

use super::{Json, rfc3339};
use crate::auth::{AdminUser, AuthUser, ClientIp};
use crate::error::{ApiError, ApiResult};
use crate::meta::{self, ShareRow};
use crate::state::AppState;

fn permission(p: SharePermission) -> meta::SharePermission {
    match p {
        SharePermission::Read => meta::SharePermission::Read,
        SharePermission::Write => meta::SharePermission::Write,
    }
}

fn permission_out(p: meta::SharePermission) -> SharePermission {
    match p {
        meta::SharePermission::Read => SharePermission::Read,
        meta::SharePermission::Write => SharePermission::Write,
    }
}

fn wire_permission(raw: &str) -> SharePermission {
    match meta::SharePermission::parse(raw) {
        Some(meta::SharePermission::Write) => SharePermission::Write,
        _ => SharePermission::Read,
    }
}

/// Who a new share is given to.
enum Recipient {
    User(String),
    Group(String),
}

impl Recipient {
    fn describe(&self) -> String {
        match self {
            Recipient::User(u) => u.clone(),
            Recipient::Group(g) => format!("group {g}"),
        }
    }

    /// The `username` and `group` fields of the answer.
    fn fields(self) -> (Option<String>, Option<String>) {
        match self {
            Recipient::User(u) => (Some(u), None),
            Recipient::Group(g) => (None, Some(g)),
        }
    }
}

fn share_id(raw: &str) -> ApiResult<i64> {
    raw.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(ApiError::not_found)
}

async fn audit(st: &AppState, user: &AuthUser, action: &str, row: &ShareRow, detail: String) -> ApiResult<()> {
    super::audit_user(st, user, action, format!("share {}", row.id), Some(detail)).await
}

#[utoipa::path(
    post,
    path = "/api/v1/shares",
    tag = "shares",
    summary = "Share a file or folder of your space with another user or a group (read or write)",
    request_body = CreateShareRequest,
    responses((status = 201, description = "created", body = ShareInfo))
)]
pub async fn create(
    State(st): State<AppState>,
    user: AuthUser,
    Json(req): Json<CreateShareRequest>,
) -> ApiResult<(StatusCode, Json<ShareInfo>)> {
    let path = RemotePath::parse(&req.path)?;
    let username = req.username.as_deref().map(str::trim);
    let group = req.group.as_deref().map(str::trim);
    if username.is_some() == group.is_some() {
        return Err(ApiError::BadRequest(
            "give either `username` (share with a user) or `group` (share with a group), not both".into(),
        ));
    }
    if !st.meta.user(user.id).await?.is_some_and(|u| u.sharing) {
        return Err(ApiError::Forbidden(
            "an administrator has turned sharing off for your account; ask them to turn it on".into(),
        ));
    }
    if crate::access::locate(&st.meta, user.space, &path).await?.is_shared() {
        return Err(ApiError::BadRequest(
            "only files and folders of your own space can be shared; ask the owner to share it".into(),
        ));
    }
    let (row, to) = match (username, group) {
        (Some(name), None) => {
            let row = st.meta.create_share(user.space, &path, name, permission(req.permission)).await?;
            (row, Recipient::User(name.to_string()))
        }
        (None, Some(name)) => {
            let (row, name) = st.meta.create_group_share(user.space, &path, name, permission(req.permission)).await?;
            (row, Recipient::Group(name))
        }
        _ => return Err(ApiError::BadRequest("give either `username` or `group`".into())),
    };
    let (_, canon) = st.meta.stat(user.space, &path).await?;
    audit(&st, &user, "share_created", &row, format!("{canon} with {} ({})", to.describe(), row.permission)).await?;
    let (username, group) = to.fields();
    let info = ShareInfo {
        id: row.id,
        path: Some(canon.to_string()),
        username,
        group,
        permission: wire_permission(&row.permission),
        created: rfc3339(row.created_at),
    };
    Ok((StatusCode::CREATED, Json(info)))
}

#[utoipa::path(
    get,
    path = "/api/v1/shares",
    tag = "shares",
    summary = "The shares you gave",
    responses((status = 200, description = "success", body = ShareList))
)]
pub async fn list(State(st): State<AppState>, user: AuthUser) -> ApiResult<Json<ShareList>> {
    let shares = st
        .meta
        .outgoing_shares(user.space)
        .await?
        .into_iter()
        .map(|s| ShareInfo {
            id: s.row.id,
            path: s.path.map(|p| p.to_string()),
            username: s.recipient,
            group: s.group,
            permission: wire_permission(&s.row.permission),
            created: rfc3339(s.row.created_at),
        })
        .collect();
    Ok(Json(ShareList { shares }))
}

#[utoipa::path(
    get,
    path = "/api/v1/shares/incoming",
    tag = "shares",
    summary = "The shares given to you (each at /Shared with me/<name>)",
    responses((status = 200, description = "success", body = IncomingShareList))
)]
pub async fn incoming(State(st): State<AppState>, user: AuthUser) -> ApiResult<Json<IncomingShareList>> {
    let shares = st
        .meta
        .incoming_shares(user.space)
        .await?
        .into_iter()
        .map(|s| IncomingShareInfo {
            id: s.row.id,
            owner: s.owner,
            name: s.row.name,
            kind: if s.kind == "dir" { EntryKind::Dir } else { EntryKind::File },
            permission: permission_out(s.permission),
            group: s.group,
            created: rfc3339(s.row.created_at),
        })
        .collect();
    Ok(Json(IncomingShareList { shares }))
}

#[utoipa::path(
    patch,
    path = "/api/v1/shares/{id}",
    tag = "shares",
    summary = "Change a share's permission (its owner only)",
    params(("id" = i64, Path, description = "The share's id")),
    request_body = UpdateShareRequest,
    responses((status = 200, description = "success", body = ShareInfo))
)]
pub async fn update(
    State(st): State<AppState>,
    user: AuthUser,
    Path(id): Path<String>,
    Json(req): Json<UpdateShareRequest>,
) -> ApiResult<Json<ShareInfo>> {
    let id = share_id(&id)?;
    let row = st.meta.share(user.space, id).await?;
    if row.owner_id != user.space.get() {
        return Err(ApiError::Forbidden("only the owner of a share can change it; you can leave it".into()));
    }
    // With sharing turned off, shares made before stay as they are or give less: turning
    // one writable gives more, like a new share.
    let more = req.permission == SharePermission::Write && wire_permission(&row.permission) != SharePermission::Write;
    if more && !st.meta.user(user.id).await?.is_some_and(|u| u.sharing) {
        return Err(ApiError::Forbidden(
            "an administrator has turned sharing off for your account: a share can be made read-only or \
             revoked, not writable; ask them to turn sharing on"
                .into(),
        ));
    }
    let row = st.meta.update_share(user.space, id, permission(req.permission)).await?;
    audit(&st, &user, "share_changed", &row, format!("permission {}", row.permission)).await?;
    let out = st.meta.outgoing_shares(user.space).await?.into_iter().find(|s| s.row.id == id);
    let out = out.ok_or_else(ApiError::not_found)?;
    Ok(Json(ShareInfo {
        id,
        path: out.path.map(|p| p.to_string()),
        username: out.recipient,
        group: out.group,
        permission: wire_permission(&row.permission),
        created: rfc3339(row.created_at),
    }))
}

#[utoipa::path(
    delete,
    path = "/api/v1/shares/{id}",
    tag = "shares",
    summary = "Revoke a share (its owner) or leave it (its recipient)",
    params(("id" = i64, Path, description = "The share's id")),
    responses((status = 204, description = "revoked or left"))
)]
pub async fn delete(State(st): State<AppState>, user: AuthUser, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let id = share_id(&id)?;
    let row = st.meta.delete_share(user.space, id).await?;
    let action = if row.owner_id == user.space.get() { "share_revoked" } else { "share_left" };
    audit(&st, &user, action, &row, format!("node {}", row.node_id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AdminSharesQuery {
    /// Only the shares this user gave or got.
    pub user: Option<String>,
    /// Most shares returned, newest first (1-1000, default 1000).
    pub limit: Option<i64>,
}

#[utoipa::path(
    get,
    path = "/api/v1/admin/shares",
    tag = "admin",
    summary = "Every share, newest first; ?user= those one user gave or got",
    params(AdminSharesQuery),
    responses((status = 200, description = "success", body = AdminShareList))
)]
pub async fn admin_list(
    State(st): State<AppState>,
    _admin: AdminUser,
    Query(q): Query<AdminSharesQuery>,
) -> ApiResult<Json<AdminShareList>> {
    let limit = super::page_limit(q.limit, super::MAX_PAGE)?;
    let user = match q.user.as_deref().map(str::trim).filter(|u| !u.is_empty()) {
        Some(name) => match st.meta.user_by_name(name).await? {
            Some(u) => Some(u.id),
            None => return Ok(Json(AdminShareList { shares: Vec::new() })),
        },
        None => None,
    };
    let shares = st
        .meta
        .all_shares(user, limit)
        .await?
        .into_iter()
        .map(|(s, owner)| AdminShareInfo {
            id: s.row.id,
            owner,
            path: s.path.map(|p| p.to_string()),
            username: s.recipient,
            group: s.group,
            permission: wire_permission(&s.row.permission),
            created: rfc3339(s.row.created_at),
        })
        .collect();
    Ok(Json(AdminShareList { shares }))
}

#[utoipa::path(
    delete,
    path = "/api/v1/admin/shares/{id}",
    tag = "admin",
    summary = "Revoke any share",
    params(("id" = i64, Path, description = "The share's id")),
    responses((status = 204, description = "revoked"))
)]
pub async fn admin_revoke(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = share_id(&id)?;
    let row = st.meta.revoke_share(id).await?;
    let to = match (row.recipient_id, row.group_id) {
        (Some(r), _) => format!("recipient {r}"),
        (None, Some(g)) => format!("group {g}"),
        (None, None) => "nobody".into(),
    };
    let detail = format!("owner {}, {to}, node {}", row.owner_id, row.node_id);
    super::admin::audit(&st, &admin, ip, "share_revoked", format!("share {id}"), Some(detail)).await?;
    Ok(StatusCode::NO_CONTENT)
}
