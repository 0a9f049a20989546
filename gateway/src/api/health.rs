//! Liveness, readiness, metrics and server info.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use nimbus_proto::wire::{RetentionInfo, ServerInfo};
use serde_json::json;

use super::Json;
use crate::auth::{AuthUser, ClientIp};
use crate::error::ApiError;
use crate::state::AppState;

/// The liveness route (the process answers), for probes; `describe` reports it.
pub const LIVENESS_PATH: &str = "/healthz";
/// The readiness route (the database and the store answer).
pub const READINESS_PATH: &str = "/readyz";

pub async fn healthz() -> &'static str {
    "ok"
}

/// Ready when the database and the object store both answer; otherwise 503 saying which not.
pub async fn readyz(State(st): State<AppState>) -> Response {
    let db = st.meta.ping().await.map_err(|e| e.to_string());
    let store = st.store.check().await.map_err(|e| e.to_string());
    let ok = db.is_ok() && store.is_ok();
    let body = json!({
        "ready": ok,
        "database": { "engine": st.meta.engine(), "ok": db.is_ok(), "error": db.err() },
        "store": { "kind": st.store.describe(), "ok": store.is_ok(), "error": store.err() },
    });
    let status = if ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, axum::Json(body)).into_response()
}

/// Prometheus text. Open to loopback scrapers; anyone else needs an admin token, so the
/// numbers are never exposed to the network by accident.
pub async fn metrics(
    State(st): State<AppState>,
    ClientIp(ip): ClientIp,
    user: Result<AuthUser, ApiError>,
) -> Result<Response, ApiError> {
    let loopback = ip.is_some_and(|i| i.is_loopback());
    if !loopback && !user?.is_admin() {
        return Err(ApiError::Forbidden("metrics need an administrator token or a loopback connection".into()));
    }
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], st.metrics.render()).into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/info",
    tag = "service",
    summary = "Server version, block size and retention",
    responses((status = 200, description = "success", body = ServerInfo)),
    security(())
)]
pub async fn info(State(st): State<AppState>) -> Json<ServerInfo> {
    let r = &st.settings.retention;
    let retention = RetentionInfo {
        versions: r.versions.to_string(),
        trash: r.trash_spec(),
        trash_secs: r.trash.map(|d| d.as_secs()),
    };
    Json(ServerInfo {
        version: env!("CARGO_PKG_VERSION").to_string(),
        block_size: st.settings.block_size,
        version_retention: retention.versions.clone(),
        trash_retention: retention.trash.clone(),
        retention,
    })
}
