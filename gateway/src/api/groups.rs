//! Groups of users, managed by administrators: made, renamed, deleted, members added and
//! taken out by username. A share with a group reaches every member (`crate::meta` keeps
//! each member's entry in step). Every handler takes `AdminUser`; every change is audited.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use nimbus_proto::names::validate_group_name;
use nimbus_proto::wire::{GroupInfo, GroupList, GroupMemberRequest, GroupRequest};

use super::{Json, rfc3339};
use crate::auth::{AdminUser, ClientIp};
use crate::error::{ApiError, ApiResult};
use crate::meta::GroupRow;
use crate::state::AppState;

fn no_group() -> ApiError {
    ApiError::NotFound("no such group".into())
}

fn group_id(raw: &str) -> ApiResult<i64> {
    raw.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(no_group)
}

fn info(g: GroupRow, members: Vec<String>) -> GroupInfo {
    GroupInfo { id: g.id, name: g.name, members, created: rfc3339(g.created_at) }
}

async fn load(st: &AppState, id: i64) -> ApiResult<GroupInfo> {
    let g = st.meta.group(id).await?.ok_or_else(no_group)?;
    let members = st.meta.group_members(id).await?;
    Ok(info(g, members))
}

fn valid_name(raw: &str) -> ApiResult<String> {
    let name = raw.trim();
    validate_group_name(name).map_err(ApiError::BadRequest)?;
    Ok(name.to_string())
}

#[utoipa::path(
    get,
    path = "/api/v1/admin/groups",
    tag = "admin",
    summary = "List groups with their members, by name",
    responses((status = 200, description = "success", body = GroupList))
)]
pub async fn list(State(st): State<AppState>, _admin: AdminUser) -> ApiResult<Json<GroupList>> {
    let groups = st.meta.groups().await?.into_iter().map(|g| info(g.group, g.members)).collect();
    Ok(Json(GroupList { groups }))
}

#[utoipa::path(
    post,
    path = "/api/v1/admin/groups",
    tag = "admin",
    summary = "Create a group",
    request_body = GroupRequest,
    responses((status = 201, description = "created", body = GroupInfo))
)]
pub async fn create(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Json(req): Json<GroupRequest>,
) -> ApiResult<(StatusCode, Json<GroupInfo>)> {
    let name = valid_name(&req.name)?;
    let g = st.meta.create_group(&name).await?;
    super::admin::audit(&st, &admin, ip, "group_create", g.name.clone(), None).await?;
    Ok((StatusCode::CREATED, Json(info(g, Vec::new()))))
}

#[utoipa::path(
    get,
    path = "/api/v1/admin/groups/{id}",
    tag = "admin",
    summary = "Get a group with its members",
    params(("id" = i64, Path, description = "The group's id")),
    responses((status = 200, description = "success", body = GroupInfo))
)]
pub async fn get(State(st): State<AppState>, _admin: AdminUser, Path(id): Path<String>) -> ApiResult<Json<GroupInfo>> {
    Ok(Json(load(&st, group_id(&id)?).await?))
}

#[utoipa::path(
    patch,
    path = "/api/v1/admin/groups/{id}",
    tag = "admin",
    summary = "Rename a group (its members and shares stay)",
    params(("id" = i64, Path, description = "The group's id")),
    request_body = GroupRequest,
    responses((status = 200, description = "success", body = GroupInfo))
)]
pub async fn rename(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Path(id): Path<String>,
    Json(req): Json<GroupRequest>,
) -> ApiResult<Json<GroupInfo>> {
    let id = group_id(&id)?;
    let name = valid_name(&req.name)?;
    let old = st.meta.group(id).await?.ok_or_else(no_group)?;
    let g = st.meta.rename_group(id, &name).await.map_err(|e| match e {
        crate::meta::MetaError::NotFound => no_group(),
        other => other.into(),
    })?;
    super::admin::audit(&st, &admin, ip, "group_rename", g.name.clone(), Some(format!("was {}", old.name))).await?;
    Ok(Json(load(&st, id).await?))
}

#[utoipa::path(
    delete,
    path = "/api/v1/admin/groups/{id}",
    tag = "admin",
    summary = "Delete a group: its shares end for every member",
    params(("id" = i64, Path, description = "The group's id")),
    responses((status = 204, description = "deleted"))
)]
pub async fn delete(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = group_id(&id)?;
    let g = st.meta.delete_group(id).await.map_err(|e| match e {
        crate::meta::MetaError::NotFound => no_group(),
        other => other.into(),
    })?;
    super::admin::audit(&st, &admin, ip, "group_delete", g.name, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post,
    path = "/api/v1/admin/groups/{id}/members",
    tag = "admin",
    summary = "Add a user to a group by username: the group's shares reach them at once",
    params(("id" = i64, Path, description = "The group's id")),
    request_body = GroupMemberRequest,
    responses((status = 201, description = "added", body = GroupInfo))
)]
pub async fn add_member(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Path(id): Path<String>,
    Json(req): Json<GroupMemberRequest>,
) -> ApiResult<(StatusCode, Json<GroupInfo>)> {
    let id = group_id(&id)?;
    let g = st.meta.group(id).await?.ok_or_else(no_group)?;
    let wanted = req.username.trim();
    let user = st
        .meta
        .user_by_name(wanted)
        .await?
        .ok_or_else(|| ApiError::BadRequest(format!("there is no user named `{wanted}`")))?;
    st.meta.add_group_member(id, user.id, &user.username).await?;
    super::admin::audit(&st, &admin, ip, "group_member_add", g.name, Some(format!("added {}", user.username))).await?;
    Ok((StatusCode::CREATED, Json(load(&st, id).await?)))
}

#[utoipa::path(
    delete,
    path = "/api/v1/admin/groups/{id}/members/{username}",
    tag = "admin",
    summary = "Take a user out of a group: the group's shares stop reaching them at once",
    params(
        ("id" = i64, Path, description = "The group's id"),
        ("username" = String, Path, description = "The member's username")
    ),
    responses((status = 204, description = "taken out"))
)]
pub async fn remove_member(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Path((id, username)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let id = group_id(&id)?;
    let g = st.meta.group(id).await?.ok_or_else(no_group)?;
    let not_member = || ApiError::NotFound(format!("`{username}` is not in the group `{}`", g.name));
    let user = st.meta.user_by_name(&username).await?.ok_or_else(not_member)?;
    st.meta.remove_group_member(id, user.id).await.map_err(|e| match e {
        crate::meta::MetaError::NotFound => not_member(),
        other => other.into(),
    })?;
    super::admin::audit(
        &st,
        &admin,
        ip,
        "group_member_remove",
        g.name.clone(),
        Some(format!("removed {}", user.username)),
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
