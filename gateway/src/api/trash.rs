//! The trash: list, restore, purge.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use nimbus_proto::wire::{Entry, EntryKind, RestoreTrashRequest, TrashEntry, TrashList};
use serde::Deserialize;
use utoipa::IntoParams;

use super::{Json, Query, entry, id_cursor, page, page_limit, parse_path, rfc3339};
use crate::auth::AuthUser;
use crate::error::{ApiError, ApiResult};
use crate::meta::LockTokens;
use crate::state::AppState;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TrashQuery {
    /// Most entries returned (1-1000, default 1000).
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

fn trash_id(raw: &str) -> ApiResult<i64> {
    raw.parse().map_err(|_| ApiError::NotFound("no such item in the trash".into()))
}

#[utoipa::path(
    get,
    path = "/api/v1/trash",
    tag = "trash",
    summary = "List the trash",
    params(TrashQuery),
    responses((status = 200, description = "success", body = TrashList))
)]
pub async fn list(
    State(st): State<AppState>,
    user: AuthUser,
    Query(q): Query<TrashQuery>,
) -> ApiResult<Json<TrashList>> {
    let limit = page_limit(q.limit, 1000)?;
    let rows = st.meta.list_trash(user.space, id_cursor(q.cursor.as_deref())?, limit + 1).await?;
    let (rows, next_cursor) = page(rows, limit, |r| r.id.to_string());
    let entries = rows
        .into_iter()
        .map(|r| TrashEntry {
            id: r.id,
            name: r.name,
            original_path: r.original_path,
            kind: if r.kind == "dir" { EntryKind::Dir } else { EntryKind::File },
            size: r.size.max(0) as u64,
            versions_bytes: r.versions_bytes.max(0) as u64,
            deleted_at: rfc3339(r.deleted_at),
        })
        .collect();
    Ok(Json(TrashList { entries, next_cursor }))
}

#[utoipa::path(
    post,
    path = "/api/v1/trash/{id}/restore",
    tag = "trash",
    summary = "Restore an item",
    params(("id" = i64, Path, description = "The trash item's id")),
    request_body = RestoreTrashRequest,
    responses((status = 200, description = "success", body = Entry))
)]
pub async fn restore(
    State(st): State<AppState>,
    user: AuthUser,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Json<Entry>> {
    let id = trash_id(&id)?;
    // The body is optional: empty means "put it back where it was".
    let req: RestoreTrashRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RestoreTrashRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?
    };
    let to = match req.to {
        Some(t) => Some(parse_path(&t)?),
        None => None,
    };
    // The trash is the caller's own: it restores into their space, never into a share (what
    // they deleted there went to the owner's trash).
    if to.as_ref().and_then(|t| t.components().first()).is_some_and(|c| nimbus_proto::names::is_shared_with_me(c)) {
        return Err(ApiError::Forbidden(
            "items restore into your own space, not into `/Shared with me`; restore it elsewhere, then copy it into \
             the share"
                .into(),
        ));
    }
    let held = super::lock_tokens(&headers);
    let (node, path) = st.meta.restore_trash(user.space, id, to.as_ref(), LockTokens::new(&held)).await?;
    Ok(Json(entry(&node, &path)))
}

#[utoipa::path(
    delete,
    path = "/api/v1/trash/{id}",
    tag = "trash",
    summary = "Purge an item",
    params(("id" = i64, Path, description = "The trash item's id")),
    responses((status = 204, description = "purged"))
)]
pub async fn purge(State(st): State<AppState>, user: AuthUser, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let id = trash_id(&id)?;
    st.meta.purge_trash(user.space, Some(id)).await?;
    audit_purge(&st, &user, Some(id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    delete,
    path = "/api/v1/trash",
    tag = "trash",
    summary = "Empty the trash",
    responses((status = 204, description = "emptied"))
)]
pub async fn empty(State(st): State<AppState>, user: AuthUser) -> ApiResult<StatusCode> {
    st.meta.purge_trash(user.space, None).await?;
    audit_purge(&st, &user, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn audit_purge(st: &AppState, user: &AuthUser, id: Option<i64>) -> ApiResult<()> {
    let target = id.map_or("whole trash".to_string(), |i| format!("trash item {i}"));
    super::audit_user(st, user, "purge", target, None).await
}
