//! The REST API (`/api/v1`): routing, extractors that turn bad input into JSON errors, and
//! the conversions from metadata rows to wire types. One module per resource.

use axum::Router;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts};
use std::time::Duration;

use axum::http::{StatusCode, Uri};
use axum::routing::get;
use nimbus_proto::RemotePath;
use nimbus_proto::wire::{Entry, EntryKind};
use tower_http::timeout::TimeoutLayer;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::meta::NodeRow;
use crate::state::AppState;

pub use crate::headers::{LOCK_TOKEN_HEADER, lock_tokens};
pub use crate::timefmt::rfc3339;
pub use health::{LIVENESS_PATH, READINESS_PATH};
pub use shortcut::Shortcut;

mod admin;
mod admin_devices;
mod admin_usage;
mod auth;
mod blocks;
mod changes;
pub mod console;
mod files;
mod groups;
mod health;
mod keys;
mod links;
mod oidc;
pub mod openapi;
pub mod public_links;
mod shares;
mod shortcut;
mod thumbnails;
mod totp;
mod trash;

/// Largest JSON body accepted (a commit of a 40 GiB file lists 10,240 blocks: ~1 MiB).
const JSON_LIMIT: usize = 4 * 1024 * 1024;

/// The REST API with `doors` (the routes other doors serve on the same listener: WebDAV)
/// merged in, so that they share its fallback.
pub fn router(state: AppState, doors: Router<AppState>) -> Router {
    let block_limit = state.settings.block_size as usize + 1024;
    let (api, _) = api_routes(block_limit).split_for_parts();
    Router::new()
        .route(health::LIVENESS_PATH, get(health::healthz))
        .route(health::READINESS_PATH, get(health::readyz))
        .route("/metrics", get(health::metrics))
        .route("/admin", get(console::redirect_root))
        .route("/admin/", get(console::serve))
        .route("/admin/{*path}", get(console::serve))
        .merge(web_app_routes())
        .merge(api)
        .merge(public_links::routes())
        .merge(doors)
        .fallback(not_found)
        .with_state(state)
}

/// The users' web app: its page at `/` and at each of its client-side routes (a reload there
/// must bring the app back), and its hashed files. Keep in step with admin-ui/web/src/router.ts.
fn web_app_routes() -> Router<AppState> {
    let mut r = Router::new();
    for path in
        ["/", "/files", "/files/", "/files/{*path}", "/trash", "/settings", "/settings/security", "/assets/{*path}"]
    {
        r = r.route(path, get(console::serve_web));
    }
    r
}

/// The folder routes that also answer for the root without a path (`/api/v1/stat`,
/// `/api/v1/stat/`): the same handler as the documented `{*path}` route, which the document
/// describes once (docs/API.md says so). The test that every route is described skips these.
#[cfg(test)]
pub(crate) const ROOT_ALIASES: &[&str] = &["/api/v1/stat", "/api/v1/stat/", "/api/v1/dirs", "/api/v1/dirs/"];

/// Every route under `/api/v1` with its OpenAPI operation. utoipa-axum registers each handler
/// at the path and methods of its own `#[utoipa::path]`, so the router and the document
/// (`openapi::document`) cannot drift; the only routes added otherwise are [`ROOT_ALIASES`].
/// `block_limit`: the largest block upload body.
pub(crate) fn api_routes(block_limit: usize) -> OpenApiRouter<AppState> {
    // Whole-file and block transfers may run long; they are bounded by an idle timeout on
    // the request body instead (server.rs). Everything else must answer within a minute.
    let streaming = OpenApiRouter::new()
        .routes(routes!(files::get_file, files::put_file, files::delete).layer(DefaultBodyLimit::disable()))
        .routes(routes!(blocks::get_block, blocks::put_block).layer(DefaultBodyLimit::max(block_limit)));
    let json = OpenApiRouter::new()
        .routes(routes!(health::info))
        .routes(routes!(openapi::serve))
        .routes(routes!(auth::login))
        .routes(routes!(auth::logout))
        .routes(routes!(auth::list_tokens))
        .routes(routes!(auth::revoke_token))
        .routes(routes!(auth::me))
        .routes(routes!(totp::enroll, totp::disable))
        .routes(routes!(totp::confirm))
        .routes(routes!(oidc::methods))
        .routes(routes!(oidc::start))
        .routes(routes!(oidc::callback))
        .routes(routes!(oidc::token))
        .routes(routes!(keys::list, keys::create))
        .routes(routes!(keys::revoke))
        .routes(routes!(shares::list, shares::create))
        .routes(routes!(shares::incoming))
        .routes(routes!(shares::update, shares::delete))
        .routes(routes!(links::list, links::create))
        .routes(routes!(links::update, links::revoke))
        .routes(routes!(files::stat))
        .route("/api/v1/stat", get(files::stat))
        .route("/api/v1/stat/", get(files::stat))
        .routes(routes!(files::list_dir, files::mkdir))
        .route("/api/v1/dirs", get(files::list_dir).post(files::mkdir))
        .route("/api/v1/dirs/", get(files::list_dir).post(files::mkdir))
        .routes(routes!(files::move_entry))
        .routes(routes!(files::copy_entry))
        .routes(routes!(thumbnails::get_thumbnail))
        .routes(routes!(blocks::missing))
        .routes(routes!(blocks::get_manifest, blocks::commit))
        .routes(routes!(files::list_versions, files::restore_version, files::delete_version))
        .routes(routes!(trash::list, trash::empty))
        .routes(routes!(trash::purge))
        .routes(routes!(trash::restore))
        .routes(routes!(admin::list_users, admin::create_user))
        .routes(routes!(admin::get_user, admin::update_user, admin::delete_user))
        .routes(routes!(totp::admin_reset))
        .routes(routes!(admin_devices::list, admin_devices::revoke_all))
        .routes(routes!(admin_devices::revoke))
        .routes(routes!(admin::audit_log))
        .routes(routes!(shares::admin_list))
        .routes(routes!(shares::admin_revoke))
        .routes(routes!(groups::list, groups::create))
        .routes(routes!(groups::get, groups::rename, groups::delete))
        .routes(routes!(groups::add_member))
        .routes(routes!(groups::remove_member))
        .routes(routes!(admin_usage::history))
        .routes(routes!(admin_usage::usage))
        .routes(routes!(admin::cache_stats, admin::cache_purge))
        .routes(routes!(admin::cache_warm))
        .routes(routes!(admin::cache_warm_status))
        .layer(DefaultBodyLimit::max(JSON_LIMIT))
        .layer(TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, Duration::from_secs(60)));
    // The change feed holds a request up to `wait` seconds: its own, longer limit.
    let feed = OpenApiRouter::new().routes(routes!(changes::list)).layer(TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        Duration::from_secs(changes::MAX_WAIT_SECS + 30),
    ));
    streaming.merge(json).merge(feed)
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such endpoint; see /api/v1/openapi.json".into())
}

/// `Json<T>` whose rejections are our JSON errors.
#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct Json<T>(pub T);

impl<T: serde::Serialize> axum::response::IntoResponse for Json<T> {
    fn into_response(self) -> axum::response::Response {
        axum::Json(self.0).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        match r {
            JsonRejection::BytesRejection(_) => {
                ApiError::PayloadTooLarge(format!("the request body is too large: {}", r.body_text()))
            }
            _ => ApiError::BadRequest(format!("invalid JSON body: {}", r.body_text())),
        }
    }
}

/// `Query<T>` whose rejections are our JSON errors.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct Query<T>(pub T);

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::BadRequest(format!("invalid query string: {}", r.body_text()))
    }
}

/// The space path of a request, taken from the raw URI after `prefix` and decoded exactly
/// once by the shared name rules (so `%2e%2e`, `%2f..` and friends are judged as names).
pub fn space_path(uri: &Uri, prefix: &str) -> Result<RemotePath, ApiError> {
    let raw = uri.path();
    let rest = raw.strip_prefix(prefix).unwrap_or("");
    // The route's own slash is already consumed: another one here is an empty component.
    if rest.starts_with('/') {
        return Err(nimbus_proto::NameError::EmptyComponent.into());
    }
    Ok(RemotePath::parse_url_encoded(rest)?)
}

/// Whether the path after `prefix` ends in `/`: as in POSIX it then names a folder, though
/// [`space_path`] drops the slash. Handlers of files refuse such a path on a file.
pub fn names_folder(uri: &Uri, prefix: &str) -> bool {
    uri.path().strip_prefix(prefix).is_some_and(body_names_folder)
}

/// [`names_folder`] for a path in a request body (`from` and `to` of a move or copy), which
/// [`parse_path`] takes without its trailing slash. The root (`/`) is a folder anyway.
pub fn body_names_folder(raw: &str) -> bool {
    raw.len() > 1 && raw.ends_with('/')
}

/// The answer for a file named with a trailing `/` (`shown`: the path as the caller wrote it,
/// without the slash).
pub fn file_as_folder(shown: &RemotePath) -> ApiError {
    ApiError::NotADirectory(format!(
        "`{shown}/` ends in `/`, which names a folder, but `{shown}` is a file; leave the `/` out to name the file"
    ))
}

/// The answer for a move or copy of the file `from` to `to` written with a trailing `/`: a file
/// cannot take a folder's name (POSIX `rename("file", "x/")` is ENOTDIR). Both paths as the
/// caller wrote them, without the slash.
pub fn file_to_folder(from: &RemotePath, to: &RemotePath) -> ApiError {
    ApiError::NotADirectory(format!(
        "`{to}/` ends in `/`, which names a folder, but `{from}` is a file; give the file's new path without the \
         trailing `/` (into a folder: the folder's path, `/`, then the file's name)"
    ))
}

/// The caller as the share-access audit names them.
pub(crate) fn actor(user: &crate::auth::AuthUser) -> crate::access::Actor<'_> {
    crate::access::Actor { id: user.id, name: &user.username, ip: user.ip }
}

/// Records in the audit log that the signed-in `user` did `action` to `target`, from their
/// address.
pub(crate) async fn audit_user(
    st: &AppState,
    user: &crate::auth::AuthUser,
    action: &str,
    target: String,
    detail: Option<String>,
) -> Result<(), ApiError> {
    st.meta
        .audit(crate::meta::NewAudit {
            actor_id: Some(user.id),
            actor: Some(user.username.clone()),
            action: action.into(),
            target: Some(target),
            detail,
            ip: user.ip.map(|i| i.to_string()),
        })
        .await?;
    Ok(())
}

pub fn entry(node: &NodeRow, path: &RemotePath) -> Entry {
    Entry {
        id: node.id,
        // The name as the caller sees it: a share's entry under `Shared with me` may differ.
        name: path.name().map_or_else(|| node.name.clone(), str::to_string),
        path: path.to_string(),
        kind: if node.is_dir() { EntryKind::Dir } else { EntryKind::File },
        size: node.size.max(0) as u64,
        modified: rfc3339(node.modified_at),
        version: if node.is_dir() { None } else { node.version_id },
    }
}

/// Most entries one page of any listing returns.
pub const MAX_PAGE: i64 = 1000;

/// The page size from `?limit=`: `default` when absent, 1 to [`MAX_PAGE`] otherwise.
pub fn page_limit(limit: Option<i64>, default: i64) -> Result<i64, ApiError> {
    let limit = limit.unwrap_or(default);
    if (1..=MAX_PAGE).contains(&limit) {
        Ok(limit)
    } else {
        Err(ApiError::BadRequest(format!("limit must be between 1 and {MAX_PAGE}")))
    }
}

/// The `?cursor=` of listings paged by id.
pub fn id_cursor(cursor: Option<&str>) -> Result<Option<i64>, ApiError> {
    cursor
        .map(|c| c.parse::<i64>().map_err(|_| ApiError::BadRequest("invalid cursor; start again without one".into())))
        .transpose()
}

/// Listings fetch `limit + 1` rows: this cuts them to a page and, if there was more, derives
/// the next cursor from the page's last row.
pub fn page<T>(mut rows: Vec<T>, limit: i64, cursor: impl Fn(&T) -> String) -> (Vec<T>, Option<String>) {
    if rows.len() as i64 > limit {
        rows.truncate(limit as usize);
        let next = rows.last().map(cursor);
        (rows, next)
    } else {
        (rows, None)
    }
}

/// The header with which an administrator (or a benchmark run by one) reads around the cache.
pub const CACHE_HEADER: &str = "x-nimbus-cache";

/// The cache mode a request asks for. Bypassing is for administrators only: it lets a caller
/// load the object store at will.
pub fn cache_mode(
    headers: &axum::http::HeaderMap,
    user: &crate::auth::AuthUser,
) -> Result<crate::cache::CacheMode, ApiError> {
    match headers.get(CACHE_HEADER).map(|v| v.to_str().unwrap_or("").trim().to_ascii_lowercase()) {
        None => Ok(crate::cache::CacheMode::Normal),
        Some(v) if v == "bypass" => {
            if user.is_admin() {
                Ok(crate::cache::CacheMode::Bypass)
            } else {
                Err(ApiError::Forbidden("only administrators may bypass the cache".into()))
            }
        }
        Some(v) if v == "normal" || v.is_empty() => Ok(crate::cache::CacheMode::Normal),
        Some(_) => Err(ApiError::BadRequest(format!("{CACHE_HEADER} accepts `bypass` or `normal`"))),
    }
}

/// Parses a client-supplied JSON path field with the shared rules.
pub fn parse_path(raw: &str) -> Result<RemotePath, ApiError> {
    Ok(RemotePath::parse(raw)?)
}

/// A user's usage by kind, as the wire shows it.
pub(crate) fn usage_breakdown(u: &crate::meta::UserRow) -> nimbus_proto::wire::UsageBreakdown {
    let n = |v: i64| v.max(0) as u64;
    nimbus_proto::wire::UsageBreakdown {
        current: n(u.current_bytes),
        versions: n(u.versions_bytes),
        trash: n(u.trash_bytes),
        pending: n(u.pending_bytes),
    }
}
