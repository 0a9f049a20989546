//! The console's dashboard: storage aggregates (`GET /api/v1/admin/usage`) and this gateway's
//! recent request rate and cache hit ratio (`GET /api/v1/admin/stats/history`).

use axum::extract::State;
use nimbus_proto::wire::{StatsHistory, UsageSummary, UserUsage};

use super::Json;
use crate::auth::AdminUser;
use crate::error::ApiResult;
use crate::state::AppState;

/// How many of the largest users the dashboard's chart shows.
const TOP_USERS: i64 = 10;

#[utoipa::path(
    get,
    path = "/api/v1/admin/usage",
    tag = "admin",
    summary = "Storage totals and the largest users",
    responses((status = 200, description = "success", body = UsageSummary))
)]
pub async fn usage(State(st): State<AppState>, _admin: AdminUser) -> ApiResult<Json<UsageSummary>> {
    let t = st.meta.usage_totals().await?;
    let top = st.meta.top_usage(TOP_USERS).await?;
    let n = |v: i64| v.max(0) as u64;
    Ok(Json(UsageSummary {
        users: n(t.users),
        active_users: n(t.active_users),
        total_bytes: n(t.total_bytes),
        files: n(t.files),
        top_users: top
            .into_iter()
            .map(|u| UserUsage {
                id: u.id,
                username: u.username,
                used_bytes: n(u.used_bytes),
                quota_bytes: u.quota_bytes.map(n),
            })
            .collect(),
    }))
}

#[utoipa::path(
    get,
    path = "/api/v1/admin/stats/history",
    tag = "admin",
    summary = "This gateway's request rate and cache hit ratio over the last hour",
    responses((status = 200, description = "success", body = StatsHistory))
)]
pub async fn history(State(st): State<AppState>, _admin: AdminUser) -> Json<StatsHistory> {
    Json(st.history.snapshot())
}
