//! The caller's own S3 access keys: create (the secret is shown once), list, revoke.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use nimbus_proto::wire::{CreateS3KeyRequest, CreatedS3Key, S3KeyInfo, S3KeyList};

use super::{Json, rfc3339};
use crate::auth::AuthUser;
use crate::auth::s3key::new_key_pair;
use crate::error::{ApiError, ApiResult};
use crate::meta::{NewAudit, now_ms};
use crate::state::AppState;

/// Longest key label accepted.
const MAX_NAME_CHARS: usize = 100;
/// Live keys one user may hold: enough for every tool, bounded against runaway scripts.
const MAX_KEYS_PER_USER: usize = 100;

fn key_name(raw: Option<&str>) -> ApiResult<String> {
    let name = raw.map(str::trim).filter(|n| !n.is_empty()).unwrap_or("S3 key");
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::BadRequest(format!("a key name has at most {MAX_NAME_CHARS} characters")));
    }
    if name.chars().any(char::is_control) {
        return Err(ApiError::BadRequest("a key name cannot contain control characters".into()));
    }
    Ok(name.to_string())
}

#[utoipa::path(
    post,
    path = "/api/v1/keys",
    tag = "keys",
    summary = "Create an S3 access key; the secret is returned once",
    request_body = CreateS3KeyRequest,
    responses((status = 201, description = "success", body = CreatedS3Key))
)]
pub async fn create(
    State(st): State<AppState>,
    user: AuthUser,
    Json(req): Json<CreateS3KeyRequest>,
) -> ApiResult<(StatusCode, Json<CreatedS3Key>)> {
    let name = key_name(req.name.as_deref())?;
    if st.meta.list_s3_keys(user.id).await?.len() >= MAX_KEYS_PER_USER {
        return Err(ApiError::Conflict(format!(
            "you already have {MAX_KEYS_PER_USER} S3 keys; revoke one first (`nimbus keys revoke ID`)"
        )));
    }
    let (access_key_id, secret) = new_key_pair();
    let sealed = st.s3_sealer.seal(&access_key_id, &secret);
    let created = now_ms();
    let id = st.meta.insert_s3_key(user.id, &access_key_id, &sealed, &name).await?;
    st.meta
        .audit(NewAudit {
            actor_id: Some(user.id),
            actor: Some(user.username.clone()),
            action: "s3_key_created".into(),
            target: Some(access_key_id.clone()),
            detail: Some(format!("name: {name}")),
            ip: user.ip.map(|i| i.to_string()),
        })
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedS3Key { id, access_key_id, secret_access_key: secret, name, created: rfc3339(created) }),
    ))
}

#[utoipa::path(
    get,
    path = "/api/v1/keys",
    tag = "keys",
    summary = "List your S3 access keys (never the secrets)",
    responses((status = 200, description = "success", body = S3KeyList))
)]
pub async fn list(State(st): State<AppState>, user: AuthUser) -> ApiResult<Json<S3KeyList>> {
    let keys = st
        .meta
        .list_s3_keys(user.id)
        .await?
        .into_iter()
        .map(|k| S3KeyInfo {
            id: k.id,
            access_key_id: k.access_key_id,
            name: k.name,
            created: rfc3339(k.created_at),
            last_used: k.last_used_at.map(rfc3339),
        })
        .collect();
    Ok(Json(S3KeyList { keys }))
}

#[utoipa::path(
    delete,
    path = "/api/v1/keys/{id}",
    tag = "keys",
    summary = "Revoke one of your S3 access keys",
    params(("id" = i64, Path, description = "The key's id")),
    responses((status = 204, description = "revoked"))
)]
pub async fn revoke(State(st): State<AppState>, user: AuthUser, Path(id): Path<String>) -> ApiResult<StatusCode> {
    // Someone else's key answers exactly like a missing one: its existence is not revealed.
    let id: i64 = id.parse().map_err(|_| ApiError::NotFound("no such S3 key".into()))?;
    if !st.meta.revoke_s3_key(user.id, id).await? {
        return Err(ApiError::NotFound("no such S3 key".into()));
    }
    st.meta
        .audit(NewAudit {
            actor_id: Some(user.id),
            actor: Some(user.username),
            action: "s3_key_revoked".into(),
            target: Some(id.to_string()),
            ip: user.ip.map(|i| i.to_string()),
            ..Default::default()
        })
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
