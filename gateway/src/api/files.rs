//! Files and folders by path: streaming PUT/GET/HEAD with ranges and conditionals, delete to
//! trash, stat, listing, mkdir, move, copy, versions.

use std::time::{Duration, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use headers::{ETag, HeaderMapExt, IfMatch, IfNoneMatch};
use nimbus_proto::RemotePath;
use nimbus_proto::names::{SHARED_WITH_ME, is_shared_with_me, name_key};
use nimbus_proto::wire::{DirListing, Entry, EntryKind, MoveRequest, RestoreVersionRequest, VersionInfo, VersionList};
use serde::Deserialize;
use utoipa::IntoParams;

use super::{
    Json, MAX_PAGE, Query, actor, body_names_folder, cache_mode, entry, file_as_folder, file_to_folder, lock_tokens,
    names_folder, page, page_limit, parse_path, rfc3339, space_path,
};
use crate::access::{self, Place, Want};
use crate::auth::AuthUser;
use crate::error::{ApiError, ApiResult};
use crate::meta::{Base, LockTokens, NewAudit};
use crate::space::{self, PutOptions, across};
use crate::state::AppState;

pub(crate) const FILES: &str = "/api/v1/files/";
const VERSIONS: &str = "/api/v1/versions/";
const TRASH_ID: &str = "x-nimbus-trash-id";

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct VersionQuery {
    /// An older version's id (from the versions list); default the current one.
    pub version: Option<i64>,
}

/// [`etag_value`] typed, for conditionals and answers that set it with `typed_insert`.
fn etag_of(version: i64) -> Option<ETag> {
    etag_value(version)?.to_str().ok()?.parse().ok()
}

/// A version's strong ETag (`"<id>"`) as a header value, made without parsing it.
fn etag_value(version: i64) -> Option<HeaderValue> {
    use std::fmt::Write;
    let mut v = String::with_capacity(22);
    write!(v, "\"{version}\"").ok()?;
    HeaderValue::try_from(v).ok()
}

fn modified_time(ms: i64) -> std::time::SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

/// Whether a Range may be served under the request's `If-Range` (RFC 9110 §13.1.5): only when
/// its validator is this version's: the strong ETag compared strongly (a weak `W/"..."` never
/// matches), or exactly the Last-Modified date. Anything else, a value that is neither an ETag
/// nor a date included, cannot match: the Range is ignored and the whole file sent (200), so a
/// client never splices bytes of another version into what it holds. No If-Range: it may.
fn if_range_holds(headers: &HeaderMap, version: i64, last_modified: std::time::SystemTime) -> bool {
    let mut values = headers.get_all(header::IF_RANGE).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => return true,
        (Some(v), None) => v,
        (Some(_), Some(_)) => return false,
    };
    let Ok(value) = value.to_str().map(str::trim) else { return false };
    if let Some(tag) = value.strip_prefix('"') {
        return tag.strip_suffix('"').is_some_and(|id| id == version.to_string());
    }
    httpdate::parse_http_date(value).is_ok_and(|t| t == last_modified)
}

#[utoipa::path(
    method(get, head),
    path = "/api/v1/files/{*path}",
    tag = "files",
    summary = "Download a file; Range, If-None-Match, If-Match, If-Range; ?version= (HEAD: headers only)",
    params(("path" = String, Path, description = "A path in your space, each component percent-encoded"), VersionQuery),
    responses((status = 200, description = "the content", content_type = "application/octet-stream"), (status = 206, description = "the requested range", content_type = "application/octet-stream"), (status = 304, description = "not modified"))
)]
pub async fn get_file(
    State(st): State<AppState>,
    user: AuthUser,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    Query(q): Query<VersionQuery>,
) -> ApiResult<Response> {
    read(&st, &user, &method, &uri, &headers, q).await
}

/// A file read (`GET`/`HEAD` of [`FILES`]) served ahead of the router (`shortcut.rs`): the
/// same extractors as [`get_file`]'s, in the same order, then the same code.
pub(crate) async fn get_file_direct(st: AppState, req: axum::extract::Request) -> Response {
    use axum::extract::FromRequestParts;
    let (mut parts, _) = req.into_parts();
    let user = match AuthUser::from_request_parts(&mut parts, &st).await {
        Ok(user) => user,
        Err(e) => return e.into_response(),
    };
    // No query string is what almost every read has: nothing to parse.
    let q = match parts.uri.query() {
        None => VersionQuery { version: None },
        Some(_) => match Query::<VersionQuery>::from_request_parts(&mut parts, &st).await {
            Ok(Query(q)) => q,
            Err(e) => return e.into_response(),
        },
    };
    read(&st, &user, &parts.method, &parts.uri, &parts.headers, q).await.into_response()
}

async fn read(
    st: &AppState,
    user: &AuthUser,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    q: VersionQuery,
) -> ApiResult<Response> {
    let asked = space_path(uri, FILES)?;
    let mode = cache_mode(headers, user)?;
    let place = locate(st, user, &asked).await?;
    let (space, path) = place.target(Want::Read)?;
    let m = st.meta.manifest(space, &path, q.version).await.map_err(|e| place.scrub(e))?;
    if names_folder(uri, FILES) {
        return Err(file_as_folder(&asked));
    }
    let plan = Download::plan(&m.version, m.blocks.clone(), path.name().unwrap_or("file"), headers)?;
    if method == Method::GET {
        place.audit_access(&st.meta, &actor(user), "read", &asked).await?;
    }
    plan.respond(st, space, method, mode).await
}

/// A file download decided from the request's headers, before any content is read: the REST
/// download and a public link's (`public_links.rs`) answer through the same code.
pub(crate) struct Download {
    status: StatusCode,
    headers: HeaderMap,
    blocks: std::sync::Arc<[crate::meta::BlockEntry]>,
    /// The bytes to send, inclusive; None: no body (304, or an empty file).
    range: Option<(u64, u64)>,
}

impl Download {
    /// Evaluates the conditionals and the range of a GET or HEAD of `version` (made of
    /// `blocks`), a file named `name`.
    pub(crate) fn plan(
        version: &crate::meta::VersionRow,
        blocks: std::sync::Arc<[crate::meta::BlockEntry]>,
        name: &str,
        headers: &HeaderMap,
    ) -> ApiResult<Download> {
        let size = version.size.max(0) as u64;
        // Seconds precision: HTTP dates cannot carry more.
        let lm_time = modified_time(version.created_at / 1000 * 1000);
        // The typed ETag only for the conditionals that compare with it: most reads have none.
        let conditional =
            [header::IF_MATCH, header::IF_NONE_MATCH, header::IF_RANGE].iter().any(|h| headers.contains_key(h));
        let etag = match conditional {
            true => Some(etag_of(version.id).ok_or_else(|| ApiError::internal(anyhow::anyhow!("bad etag")))?),
            false => None,
        };

        // Conditionals are evaluated only now, after authorization and lookup in the caller's
        // own space: they cannot reveal anything about another space.
        if let (Some(im), Some(etag)) = (headers.typed_get::<IfMatch>(), &etag)
            && !im.precondition_passes(etag)
        {
            return Err(ApiError::PreconditionFailed(format!(
                "`{name}` is at version {}, not the one given in If-Match",
                version.id
            )));
        }
        // Room for these and the envelope's (request id, browser headers) without regrowing.
        let mut resp_headers = HeaderMap::with_capacity(16);
        let etag_header = etag_value(version.id).ok_or_else(|| ApiError::internal(anyhow::anyhow!("bad etag")))?;
        resp_headers.insert(header::ETAG, etag_header);
        // As the typed header would write it, without its extra string and copy.
        let lm_value = HeaderValue::try_from(httpdate::fmt_http_date(lm_time)).map_err(ApiError::internal)?;
        resp_headers.insert(header::LAST_MODIFIED, lm_value);
        resp_headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        resp_headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
        // A download API: a browser that is sent here saves the file, never shows it as a page of
        // this origin (browser.rs adds nosniff and the sandbox CSP).
        resp_headers.insert(header::CONTENT_DISPOSITION, crate::browser::attachment(name));
        if let (Some(inm), Some(etag)) = (headers.typed_get::<IfNoneMatch>(), &etag)
            && !inm.precondition_passes(etag)
        {
            return Ok(Download { status: StatusCode::NOT_MODIFIED, headers: resp_headers, blocks, range: None });
        }

        let mut range: Option<(u64, u64)> = None;
        let range_applies = if_range_holds(headers, version.id, lm_time);
        if let (Some(raw), true) = (headers.get(header::RANGE), range_applies) {
            // Unparseable ranges are ignored (RFC 9110 §14.2); unsatisfiable ones get 416.
            if let Ok(parsed) =
                raw.to_str().map_err(|_| ()).and_then(|s| http_range_header::parse_range_header(s).map_err(|_| ()))
            {
                match parsed.validate(size) {
                    Ok(ranges) if ranges.len() == 1 => range = Some((*ranges[0].start(), *ranges[0].end())),
                    Ok(_) => {} // several ranges: answer with the whole file, which HTTP allows
                    Err(_) => return Err(ApiError::RangeNotSatisfiable { size }),
                }
            }
        }

        let (status, start, end) = match range {
            Some((s, e)) => {
                let v = HeaderValue::from_str(&format!("bytes {s}-{e}/{size}")).map_err(ApiError::internal)?;
                resp_headers.insert(header::CONTENT_RANGE, v);
                (StatusCode::PARTIAL_CONTENT, s, e)
            }
            None => (StatusCode::OK, 0, size.saturating_sub(1)),
        };
        let len = if size == 0 { 0 } else { end - start + 1 };
        resp_headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        resp_headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
        let range = (len > 0).then_some((start, end));
        Ok(Download { status, headers: resp_headers, blocks, range })
    }

    /// Whether this answer starts a download: a GET whose content begins at byte 0 (a whole
    /// file, or the first part of one). Resuming the rest, HEAD and 304 do not.
    pub(crate) fn starts_download(&self, method: &Method) -> bool {
        *method == Method::GET && self.status != StatusCode::NOT_MODIFIED && self.range.is_none_or(|(s, _)| s == 0)
    }

    /// The first and last byte the answer carries, if it carries content.
    pub(crate) fn range(&self) -> Option<(u64, u64)> {
        self.range
    }

    /// The answer: for GET the content, streamed through the cache; for HEAD the headers.
    pub(crate) async fn respond(
        self,
        st: &AppState,
        space: crate::meta::SpaceId,
        method: &Method,
        mode: crate::cache::CacheMode,
    ) -> ApiResult<Response> {
        let Download { status, headers, blocks, range } = self;
        let body = match range {
            Some(r) if *method != Method::HEAD => match space::read_within_block(st, space, &blocks, r, mode).await? {
                Some(body) => body,
                None => Body::from_stream(space::open_range(st, space, &blocks, r, mode).await?),
            },
            _ => Body::empty(),
        };
        // The headers as they are, not merged one by one into an empty map.
        let mut resp = Response::new(body);
        *resp.status_mut() = status;
        *resp.headers_mut() = headers;
        Ok(resp)
    }
}

#[utoipa::path(
    put,
    path = "/api/v1/files/{*path}",
    tag = "files",
    summary = "Upload a whole file (streamed); If-Match / If-None-Match: *; X-Nimbus-Lock-Token when locked (else 423)",
    params(("path" = String, Path, description = "A path in your space, each component percent-encoded")),
    request_body(content_type = "application/octet-stream"),
    responses((status = 201, description = "created", body = Entry), (status = 200, description = "replaced: a new version", body = Entry))
)]
pub async fn put_file(
    State(st): State<AppState>,
    user: AuthUser,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let asked = space_path(&uri, FILES)?;
    if asked.is_root() {
        return Err(ApiError::BadRequest("give a file path after /api/v1/files/".into()));
    }
    if names_folder(&uri, FILES) {
        return Err(ApiError::BadRequest(format!(
            "`{asked}/` ends in `/`, which names a folder; PUT uploads a file: give its path without the trailing `/` \
             (POST /api/v1/dirs/... makes a folder)"
        )));
    }
    let place = access::locate_new(&st.meta, user.space, &asked).await?;
    let (space, path) = place.target(Want::Write)?;
    let base = if let Some(inm) = headers.typed_get::<IfNoneMatch>() {
        if inm != IfNoneMatch::any() {
            return Err(ApiError::BadRequest("PUT supports only `If-None-Match: *` (create only)".into()));
        }
        Base::Expect(None)
    } else if let Some(raw) = headers.get(header::IF_MATCH) {
        let v = raw
            .to_str()
            .ok()
            .map(|s| s.trim().trim_matches('"'))
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| ApiError::BadRequest("If-Match must be a version ETag such as \"17\"".into()))?;
        Base::Expect(Some(v))
    } else {
        Base::Any
    };
    let content_length = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    let again = AuthUser::again(&st, &headers);
    let still_allowed = Some(access::still_writable(st.meta.clone(), again, asked.clone(), (space, path.clone())));
    let opts =
        PutOptions { base, device: Some(&user.device), content_length, verify: None, allowance: 0, still_allowed };
    let held = lock_tokens(&headers);
    let mut stream = body.into_data_stream();
    let result = space::put_stream(&st, space, &path, &mut stream, opts, LockTokens::new(&held)).await;
    if result.is_err() {
        drain_rejected(&mut stream).await;
    }
    let (node, created, path) = match result {
        // For PUT, a failed base check is a failed precondition (the headers set it).
        Err(ApiError::Conflict(m)) if base != Base::Any => return Err(place.scrub(ApiError::PreconditionFailed(m))),
        other => other.map_err(|e| place.scrub(e))?,
    };
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    let shown = place.show(&path)?;
    place.audit_access(&st.meta, &actor(&user), "write", &shown).await?;
    let mut resp = (status, Json(entry(&node, &shown))).into_response();
    if let Some(e) = node.version_id.and_then(etag_of) {
        resp.headers_mut().typed_insert(e);
    }
    Ok(resp)
}

/// Reads and discards what is left of a refused upload's body, up to a few MiB for a few
/// seconds: a client still sending when the server closes the connection gets a reset instead
/// of the error answer (the connection is closed afterwards either way, see server.rs).
pub(crate) async fn drain_rejected<S, E>(body: &mut S)
where
    S: futures::Stream<Item = Result<axum::body::Bytes, E>> + Unpin,
{
    use futures::StreamExt;
    const DRAIN_LIMIT: usize = 8 * 1024 * 1024;
    const DRAIN_TIME: Duration = Duration::from_secs(5);
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        let mut seen = 0;
        while let Some(Ok(chunk)) = body.next().await {
            seen += chunk.len();
            if seen > DRAIN_LIMIT {
                break;
            }
        }
    })
    .await;
}

#[utoipa::path(
    delete,
    path = "/api/v1/files/{*path}",
    tag = "files",
    summary = "Move a file or folder to the trash; X-Nimbus-Lock-Token when locked (else 423)",
    params(("path" = String, Path, description = "A path in your space, each component percent-encoded")),
    responses((status = 204, description = "in the trash; header X-Nimbus-Trash-Id"))
)]
pub async fn delete(State(st): State<AppState>, user: AuthUser, uri: Uri, headers: HeaderMap) -> ApiResult<Response> {
    let asked = space_path(&uri, FILES)?;
    let place = locate(&st, &user, &asked).await?;
    refuse_share_root(&place, &asked)?;
    let (space, path) = place.target(Want::Write)?;
    if names_folder(&uri, FILES) && is_file(&st, &place, space, &path).await? {
        return Err(file_as_folder(&asked));
    }
    let trash_id =
        st.meta.trash(space, &path, LockTokens::new(&lock_tokens(&headers))).await.map_err(|e| place.scrub(e))?;
    st.meta
        .audit(NewAudit {
            actor_id: Some(user.id),
            actor: Some(user.username.clone()),
            action: "delete".into(),
            target: Some(asked.to_string()),
            ip: user.ip.map(|i| i.to_string()),
            ..Default::default()
        })
        .await?;
    if place.is_shared() {
        place.audit_access(&st.meta, &actor(&user), "delete", &asked).await?;
        // The item is in the owner's trash, which the caller cannot reach.
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    // The trash item's id, so a client can offer "undo" without searching the trash.
    Ok((StatusCode::NO_CONTENT, [(TRASH_ID, trash_id.to_string())]).into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/stat/{*path}",
    tag = "files",
    summary = "Entry of a file or folder",
    params(("path" = String, Path, description = "A path in your space, each component percent-encoded")),
    responses((status = 200, description = "success", body = Entry))
)]
pub async fn stat(State(st): State<AppState>, user: AuthUser, uri: Uri) -> ApiResult<Json<Entry>> {
    let asked = space_path(&uri, "/api/v1/stat/")?;
    let place = locate(&st, &user, &asked).await?;
    if let Place::SharedIndex = place {
        return Ok(Json(shared_index_entry()));
    }
    let (space, path) = place.target(Want::Read)?;
    let (node, path) = st.meta.stat(space, &path).await.map_err(|e| place.scrub(e))?;
    if !node.is_dir() && names_folder(&uri, "/api/v1/stat/") {
        return Err(file_as_folder(&asked));
    }
    Ok(Json(entry(&node, &place.show(&path)?)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Most entries returned (1-1000, default 1000).
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

#[utoipa::path(
    get,
    path = "/api/v1/dirs/{*path}",
    tag = "files",
    summary = "List a folder",
    params(("path" = String, Path, description = "A path in your space, each component percent-encoded"), ListQuery),
    responses((status = 200, description = "success", body = DirListing))
)]
pub async fn list_dir(
    State(st): State<AppState>,
    user: AuthUser,
    uri: Uri,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<DirListing>> {
    let asked = space_path(&uri, "/api/v1/dirs/")?;
    let limit = page_limit(q.limit, MAX_PAGE)?;
    let place = locate(&st, &user, &asked).await?;
    if let Place::SharedIndex = place {
        return Ok(Json(shared_index(&st, &user).await?));
    }
    let (space, path) = place.target(Want::Read)?;
    // The cursor is the last name key of the previous page, opaque to clients.
    let after = match &q.cursor {
        Some(c) => Some(
            URL_SAFE_NO_PAD
                .decode(c)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| ApiError::BadRequest("invalid cursor; start again without one".into()))?,
        ),
        None => None,
    };
    let (mut rows, path) =
        st.meta.list_dir(space, &path, after.as_deref(), limit + 1).await.map_err(|e| place.scrub(e))?;
    let shown = place.show(&path)?;
    let at_top = shown.is_root();
    if at_top {
        // A folder of the space named like the virtual one is hidden behind it.
        rows.retain(|n| !is_shared_with_me(&n.name));
    }
    let (rows, next_cursor) = page(rows, limit, |n| URL_SAFE_NO_PAD.encode(name_key(&n.name)));
    let mut entries = rows.iter().map(|n| shown.join(&n.name).map(|p| entry(n, &p))).collect::<Result<Vec<_>, _>>()?;
    if at_top && after.is_none() && st.meta.has_incoming_shares(user.space).await? {
        entries.insert(0, shared_index_entry());
    }
    Ok(Json(DirListing { entries, next_cursor }))
}

#[utoipa::path(
    post,
    path = "/api/v1/dirs/{*path}",
    tag = "files",
    summary = "Create a folder and its parents",
    params(("path" = String, Path, description = "A path in your space, each component percent-encoded")),
    responses((status = 201, description = "created", body = Entry), (status = 200, description = "already there", body = Entry))
)]
pub async fn mkdir(State(st): State<AppState>, user: AuthUser, uri: Uri, headers: HeaderMap) -> ApiResult<Response> {
    let asked = space_path(&uri, "/api/v1/dirs/")?;
    let place = access::locate_new(&st.meta, user.space, &asked).await?;
    let (space, path) = place.target(Want::Write)?;
    let (node, created, path) =
        st.meta.mkdir(space, &path, LockTokens::new(&lock_tokens(&headers))).await.map_err(|e| place.scrub(e))?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    let shown = place.show(&path)?;
    if created {
        place.audit_access(&st.meta, &actor(&user), "create folder", &shown).await?;
    }
    Ok((status, Json(entry(&node, &shown))).into_response())
}

#[utoipa::path(
    post,
    path = "/api/v1/move",
    tag = "files",
    summary = "Move or rename (one transaction); X-Nimbus-Lock-Token when locked (else 423)",
    request_body = MoveRequest,
    responses((status = 200, description = "success", body = Entry))
)]
pub async fn move_entry(
    State(st): State<AppState>,
    user: AuthUser,
    headers: HeaderMap,
    Json(req): Json<MoveRequest>,
) -> ApiResult<Json<Entry>> {
    Ok(Json(transfer(&st, &user, &headers, &req, Op::Move).await?))
}

#[utoipa::path(
    post,
    path = "/api/v1/copy",
    tag = "files",
    summary = "Copy (blocks are shared)",
    request_body = MoveRequest,
    responses((status = 201, description = "success", body = Entry))
)]
pub async fn copy_entry(
    State(st): State<AppState>,
    user: AuthUser,
    headers: HeaderMap,
    Json(req): Json<MoveRequest>,
) -> ApiResult<Response> {
    Ok((StatusCode::CREATED, Json(transfer(&st, &user, &headers, &req, Op::Copy).await?)).into_response())
}

/// A move of a share's entry within `/Shared with me`: the caller renames their own mount point
/// of the share (the owner's node keeps its name).
async fn rename_share_entry(
    st: &AppState,
    user: &AuthUser,
    req: &MoveRequest,
    (from, to): (&RemotePath, &RemotePath),
    name: &str,
) -> ApiResult<Entry> {
    let Place::Shared { grant, .. } = locate(st, user, from).await? else {
        return Err(ApiError::Forbidden(format!("`/{SHARED_WITH_ME}` cannot be changed")));
    };
    if !grant.node.is_dir() {
        refuse_file_as_folder(req, from, to)?;
    }
    let row = st.meta.rename_incoming_share(user.space, grant.share_id, name).await?;
    Ok(entry(&grant.node, &access::shared_root().join(&row.name)?))
}

/// For a move or copy whose source `from` is a file: 409 `not_a_directory` when `from` or `to`
/// was written with a trailing `/` (`req`), which names a folder.
fn refuse_file_as_folder(req: &MoveRequest, from: &RemotePath, to: &RemotePath) -> ApiResult<()> {
    if body_names_folder(&req.from) {
        return Err(file_as_folder(from));
    }
    if body_names_folder(&req.to) {
        return Err(file_to_folder(from, to));
    }
    Ok(())
}

/// A move or copy: within one owner's space one metadata transaction, across a share's edge
/// content copied into the other space (space/across.rs).
async fn transfer(st: &AppState, user: &AuthUser, headers: &HeaderMap, req: &MoveRequest, op: Op) -> ApiResult<Entry> {
    let (from, to) = (parse_path(&req.from)?, parse_path(&req.to)?);
    if op == Op::Move
        && let Some((_, name)) = access::share_entry_rename(&from, &to)
    {
        return rename_share_entry(st, user, req, (&from, &to), &name).await;
    }
    let held = lock_tokens(headers);
    let held = LockTokens::new(&held);
    let ends = ends(st, user, &from, &to, op).await?;
    // A trailing `/` on either path names a folder: a file source is refused before anything
    // changes. Only then is the source looked up.
    if (body_names_folder(&req.from) || body_names_folder(&req.to))
        && is_file(st, &ends.from_place, ends.from.0, &ends.from.1).await?
    {
        refuse_file_as_folder(req, &from, &to)?;
    }
    let (src, dst) = (ends.source_end(), ends.target_end());
    let device = Some(user.device.as_str());
    let done = match (op, src.space == dst.space) {
        (Op::Move, true) => {
            st.meta.move_node(dst.space, &src.path, &dst.path, req.overwrite, held).await.map_err(Into::into)
        }
        (Op::Copy, true) => {
            st.meta.copy_node(dst.space, &src.path, &dst.path, req.overwrite, device, held).await.map_err(Into::into)
        }
        (Op::Move, false) => across::move_to(st, &src, &dst, req.overwrite, device, held).await,
        (Op::Copy, false) => across::copy(st, &src, &dst, req.overwrite, device, held).await,
    };
    let (node, canon) = done.map_err(|e: ApiError| ends.scrub(e))?;
    let shown = ends.to_place.show(&canon)?;
    let verb = if op == Op::Move { "move" } else { "copy" };
    ends.audit(st, user, verb, &from, &shown).await?;
    Ok(entry(&node, &shown))
}

#[utoipa::path(
    get,
    path = "/api/v1/versions/{*path}",
    tag = "versions",
    summary = "Versions of a file, newest first",
    params(("path" = String, Path, description = "A path in your space, each component percent-encoded")),
    responses((status = 200, description = "success", body = VersionList))
)]
pub async fn list_versions(State(st): State<AppState>, user: AuthUser, uri: Uri) -> ApiResult<Json<VersionList>> {
    let asked = space_path(&uri, VERSIONS)?;
    let place = locate(&st, &user, &asked).await?;
    let (space, path) = place.target(Want::Read)?;
    let (node, rows) = st.meta.versions(space, &path).await.map_err(|e| place.scrub(e))?;
    if !node.is_dir() && names_folder(&uri, VERSIONS) {
        return Err(file_as_folder(&asked));
    }
    let versions = rows
        .into_iter()
        .map(|v| VersionInfo {
            version: v.id,
            size: v.size.max(0) as u64,
            created: rfc3339(v.created_at),
            current: Some(v.id) == node.version_id,
            device: v.device,
        })
        .collect();
    Ok(Json(VersionList { versions }))
}

#[utoipa::path(
    post,
    path = "/api/v1/versions/{*path}",
    tag = "versions",
    summary = "Make an earlier version current",
    params(("path" = String, Path, description = "A path in your space, each component percent-encoded")),
    request_body = RestoreVersionRequest,
    responses((status = 200, description = "success", body = Entry))
)]
pub async fn restore_version(
    State(st): State<AppState>,
    user: AuthUser,
    uri: Uri,
    Json(req): Json<RestoreVersionRequest>,
) -> ApiResult<Json<Entry>> {
    let asked = space_path(&uri, VERSIONS)?;
    let place = locate(&st, &user, &asked).await?;
    let (space, path) = place.target(Want::Write)?;
    if names_folder(&uri, VERSIONS) && is_file(&st, &place, space, &path).await? {
        return Err(file_as_folder(&asked));
    }
    let (node, path) =
        st.meta.restore_version(space, &path, req.version, Some(&user.device)).await.map_err(|e| place.scrub(e))?;
    let shown = place.show(&path)?;
    let actor = super::actor(&user);
    place.audit_detail(&st.meta, &actor, || format!("restore version {} of {shown}", req.version)).await?;
    Ok(Json(entry(&node, &shown)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteVersionQuery {
    /// The version to delete (required; not the current one).
    pub version: Option<String>,
}

/// `DELETE /versions/{path}?version=ID`: removes one older version for good.
#[utoipa::path(
    delete,
    path = "/api/v1/versions/{*path}",
    tag = "versions",
    summary = "Delete one older version",
    params(("path" = String, Path, description = "A path in your space, each component percent-encoded"), DeleteVersionQuery),
    responses((status = 204, description = "deleted"))
)]
pub async fn delete_version(
    State(st): State<AppState>,
    user: AuthUser,
    uri: Uri,
    Query(q): Query<DeleteVersionQuery>,
) -> ApiResult<StatusCode> {
    let asked = space_path(&uri, VERSIONS)?;
    let place = locate(&st, &user, &asked).await?;
    let (space, path) = place.target(Want::Write)?;
    // Deleting a version cannot be undone: the owner's alone, never a recipient's, whatever
    // the share allows (a recipient's other changes leave the owner a way back: versions,
    // trash).
    if place.is_shared() {
        return Err(ApiError::Forbidden("only the owner can delete older versions of a shared file; ask them".into()));
    }
    let raw = q.version.ok_or_else(|| ApiError::BadRequest("say which version to delete with ?version=ID".into()))?;
    if names_folder(&uri, VERSIONS) && is_file(&st, &place, space, &path).await? {
        return Err(file_as_folder(&asked));
    }
    // Not a version id of this file (whatever it looks like) is the same as a missing one.
    let version: i64 = raw.parse().map_err(|_| ApiError::NotFound("no such version".into()))?;
    let freed = st.meta.delete_version(space, &path, version).await.map_err(|e| place.scrub(e))?;
    st.meta
        .audit(NewAudit {
            actor_id: Some(user.id),
            actor: Some(user.username.clone()),
            action: "version.delete".into(),
            target: Some(path.to_string()),
            detail: Some(format!(
                "version {version}, {} freed",
                nimbus_proto::size::format_size(u64::try_from(freed).unwrap_or(0))
            )),
            ip: user.ip.map(|i| i.to_string()),
        })
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Whether `path` in `space` (where `place` led) is a file; for a path named with a trailing
/// `/`, looked up before anything changes. Missing: the usual 404.
async fn is_file(st: &AppState, place: &Place, space: crate::meta::SpaceId, path: &RemotePath) -> ApiResult<bool> {
    let (node, _) = st.meta.stat(space, path).await.map_err(|e| place.scrub(e))?;
    Ok(!node.is_dir())
}

/// Where `path` leads for the caller (their space, or a share given to them).
async fn locate(st: &AppState, user: &AuthUser, path: &RemotePath) -> ApiResult<Place> {
    access::locate(&st.meta, user.space, path).await
}

/// The entry of `/Shared with me` itself.
fn shared_index_entry() -> Entry {
    Entry {
        id: 0,
        name: SHARED_WITH_ME.to_string(),
        path: access::shared_root().to_string(),
        kind: EntryKind::Dir,
        size: 0,
        modified: rfc3339(0),
        version: None,
    }
}

/// The listing of `/Shared with me`: one folder or file per share given to the caller.
async fn shared_index(st: &AppState, user: &AuthUser) -> ApiResult<DirListing> {
    let root = access::shared_root();
    let mut entries = Vec::new();
    for s in st.meta.incoming_shares(user.space).await? {
        let dir = s.kind == "dir";
        entries.push(Entry {
            id: s.row.node_id,
            path: root.join(&s.row.name)?.to_string(),
            name: s.row.name,
            kind: if dir { EntryKind::Dir } else { EntryKind::File },
            size: if dir { 0 } else { s.size.max(0) as u64 },
            modified: rfc3339(s.modified_at),
            version: None,
        });
    }
    Ok(DirListing { entries, next_cursor: None })
}

/// A share's own entry is the owner's: the recipient leaves it (`DELETE /api/v1/shares/{id}`)
/// rather than deleting or moving the owner's file or folder.
fn refuse_share_root(place: &Place, asked: &RemotePath) -> ApiResult<()> {
    match place {
        Place::Shared { grant, .. } if place.is_share_entry() => Err(ApiError::Forbidden(format!(
            "`{asked}` is shared with you by {}: leave the share with DELETE /api/v1/shares/{} instead",
            grant.owner_name, grant.share_id
        ))),
        Place::SharedIndex => Err(ApiError::Forbidden(format!("`/{SHARED_WITH_ME}` cannot be changed"))),
        _ => Ok(()),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Move,
    Copy,
}

/// Both ends of a move or copy, each in the caller's space or in a share given to them.
struct Ends {
    from_place: Place,
    to_place: Place,
    from: (crate::meta::SpaceId, RemotePath),
    to: (crate::meta::SpaceId, RemotePath),
}

impl Ends {
    fn source_end(&self) -> across::End {
        across::End { space: self.from.0, path: self.from.1.clone() }
    }

    fn target_end(&self) -> across::End {
        across::End { space: self.to.0, path: self.to.1.clone() }
    }

    /// An error as the caller may read it: paths of either share as the caller sees them.
    fn scrub(&self, e: impl Into<ApiError>) -> ApiError {
        access::scrub_across(&self.from_place, &self.to_place, e)
    }

    /// `share_access` on each side that is a share: what was taken from it, what was put there.
    async fn audit(
        &self,
        st: &AppState,
        user: &AuthUser,
        op: &str,
        from: &RemotePath,
        shown: &RemotePath,
    ) -> ApiResult<()> {
        access::audit_transfer(&st.meta, &actor(user), op, (&self.from_place, from), (&self.to_place, shown)).await
    }
}

/// Where the two ends of a move or copy lead. A copy needs to read its source and write its
/// destination; a move also writes (removes) its source, so a read share refuses it with 403
/// `forbidden` on either side. A share's own entry is the owner's: it is neither moved nor
/// replaced (the recipient leaves the share instead), though it may be copied.
async fn ends(st: &AppState, user: &AuthUser, from: &RemotePath, to: &RemotePath, op: Op) -> ApiResult<Ends> {
    let from_place = locate(st, user, from).await?;
    let to_place = access::locate_new(&st.meta, user.space, to).await?;
    if op == Op::Move {
        refuse_share_root(&from_place, from)?;
    }
    refuse_share_root(&to_place, to)?;
    let from_t = from_place.target(if op == Op::Move { Want::Write } else { Want::Read })?;
    let to_t = to_place.target(Want::Write)?;
    Ok(Ends { from_place, to_place, from: from_t, to: to_t })
}

#[cfg(test)]
mod tests {
    use headers::LastModified;

    use super::*;

    #[test]
    fn if_range_matches_only_this_versions_validators() {
        let lm = modified_time(1_700_000_000_000);
        let date = httpdate::fmt_http_date(lm);
        let holds = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(header::IF_RANGE, HeaderValue::from_str(v).expect("value"));
            }
            if_range_holds(&h, 17, lm)
        };
        assert!(holds(&[]) && holds(&["\"17\""]) && holds(&[" \"17\" "]) && holds(&[&date]));
        for no in ["W/\"17\"", "\"18\"", "\"17", "17", "\"\"", "*", "garbage", "Tue, 14 Nov 2023 22:13:21 GMT", ""] {
            assert!(!holds(&[no]), "{no:?}");
        }
        assert!(!holds(&["\"17\"", "\"17\""]), "two validators are not one");
    }

    #[test]
    fn the_last_modified_header_is_the_typed_one() {
        for ms in [0, 1_000, 1_700_000_000_000, 4_102_444_800_000] {
            let t = modified_time(ms);
            let mut typed = HeaderMap::new();
            typed.typed_insert(LastModified::from(t));
            assert_eq!(
                HeaderValue::try_from(httpdate::fmt_http_date(t)).ok().as_ref(),
                typed.get(header::LAST_MODIFIED)
            );
        }
    }

    #[test]
    fn the_etag_header_is_the_typed_etag() {
        for v in [0, 1, 17, -3, i64::MAX] {
            let mut typed = HeaderMap::new();
            typed.typed_insert(etag_of(v).expect("an etag"));
            assert_eq!(etag_value(v).as_ref(), typed.get(header::ETAG), "{v}");
        }
    }
}
