//! A user's devices (their sign-in tokens) as administrators see them: list with last-seen,
//! revoke one, or revoke all (a lost laptop, a departing employee).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use nimbus_proto::wire::TokenList;

use super::Json;
use super::admin::{audit, user_id};
use super::auth::token_info;
use crate::auth::{AdminUser, ClientIp};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

async fn target(st: &AppState, raw_id: &str) -> ApiResult<crate::meta::UserRow> {
    let id = user_id(raw_id)?;
    st.meta.user(id).await?.ok_or_else(|| ApiError::NotFound("no such user".into()))
}

#[utoipa::path(
    get,
    path = "/api/v1/admin/users/{id}/devices",
    tag = "admin",
    summary = "A user's devices (live tokens) with last use",
    params(("id" = i64, Path, description = "The user's id")),
    responses((status = 200, description = "success", body = TokenList))
)]
pub async fn list(State(st): State<AppState>, admin: AdminUser, Path(id): Path<String>) -> ApiResult<Json<TokenList>> {
    let user = target(&st, &id).await?;
    // `current` marks the administrator's own session when they look at their own devices.
    let mine = (user.id == admin.0.id).then_some(admin.0.token_id);
    let tokens = st.meta.list_tokens(user.id).await?.into_iter().map(|t| token_info(t, mine)).collect();
    Ok(Json(TokenList { tokens }))
}

#[utoipa::path(
    delete,
    path = "/api/v1/admin/users/{id}/devices/{token}",
    tag = "admin",
    summary = "Revoke one of a user's devices",
    params(("id" = i64, Path, description = "The user's id"), ("token" = i64, Path, description = "The device token's id")),
    responses((status = 204, description = "revoked"))
)]
pub async fn revoke(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Path((id, token)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let user = target(&st, &id).await?;
    let token: i64 = token.parse().map_err(|_| ApiError::NotFound("no such device".into()))?;
    // Scoped by user: a token id of someone else is "no such device", not a revocation.
    let device = st.meta.list_tokens(user.id).await?.into_iter().find(|t| t.id == token).map(|t| t.device);
    if !st.meta.revoke_token(user.id, token).await? {
        return Err(ApiError::NotFound("no such device".into()));
    }
    let detail = device.map(|d| format!("device: {d}"));
    audit(&st, &admin, ip, "device_revoke", user.username, detail).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    delete,
    path = "/api/v1/admin/users/{id}/devices",
    tag = "admin",
    summary = "Sign a user out of every device",
    params(("id" = i64, Path, description = "The user's id")),
    responses((status = 204, description = "signed out"))
)]
pub async fn revoke_all(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let user = target(&st, &id).await?;
    if user.id == admin.0.id {
        return Err(ApiError::Conflict(
            "this would sign you out too; revoke your other devices one by one instead".into(),
        ));
    }
    let n = st.meta.revoke_all_tokens(user.id).await?;
    audit(&st, &admin, ip, "device_revoke_all", user.username, Some(format!("{n} devices"))).await?;
    Ok(StatusCode::NO_CONTENT)
}
