//! The WebDAV door (`/dav/`): Windows Explorer's "Map network drive", macOS Finder, davfs2,
//! rclone and friends reach the caller's own space without installing anything.
//!
//! dav-server speaks the protocol; this module signs the caller in (HTTP Basic with a device
//! token, or the account password over TLS only; or a bearer token), judges the request path
//! and any Destination with the shared name rules (the same decisions as the REST API), and
//! hands dav-server a file system ([`fs::SpaceFs`]) and a lock system ([`locks::SpaceLocks`])
//! bound to that user's space.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::uri::Authority;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use base64::Engine;
use dav_server::{DavConfig, DavHandler, DavMethod, DavMethodSet};
use nimbus_proto::RemotePath;
use nimbus_proto::names::name_key;

use crate::auth::{Attempt, AuthUser, ClientIp, TOKEN_PREFIX, verify_password_or_dummy};
use crate::error::ApiError;
use crate::meta::{LockTokens, NewAudit, SpaceId};
use crate::state::AppState;

pub mod fs;
pub mod locks;

/// Where the door is mounted.
pub const PREFIX: &str = "/dav";

/// Bytes dav-server asks a file for per read while sending a GET.
const READ_BUF: usize = 256 * 1024;

/// How long a verified account password is remembered (argon2 per request would make every
/// WebDAV request cost tens of milliseconds of CPU; Windows sends Basic on each one).
const PASSWORD_CACHE_TTL: Duration = Duration::from_secs(300);
const PASSWORD_CACHE_MAX: usize = 10_000;

static HANDLER: LazyLock<DavHandler> = LazyLock::new(|| {
    // Partial updates (SabreDAV PATCH) and the CalDAV/CardDAV methods are not offered: 405.
    let mut methods = DavMethodSet::all();
    for m in [DavMethod::Patch, DavMethod::Report, DavMethod::MkCalendar, DavMethod::MkAddressbook] {
        methods.remove(m);
    }
    DavHandler::builder().strip_prefix(PREFIX).read_buf_size(READ_BUF).autoindex(false).methods(methods).build_handler()
});

/// Verified (user, password, stored hash) triples, as BLAKE3 digests: a changed password
/// changes the stored hash and so misses.
static PASSWORD_CACHE: LazyLock<Mutex<HashMap<[u8; 32], Instant>>> = LazyLock::new(Default::default);

/// The door's routes: every method, no body size limit (PUT streams; the server's idle
/// timeout on request bodies still applies), no overall request timeout (large transfers).
pub fn router() -> Router<AppState> {
    Router::new()
        .route(PREFIX, any(handle))
        .route("/dav/", any(handle))
        .route("/dav/{*path}", any(handle))
        .layer(DefaultBodyLimit::disable())
}

/// Who a WebDAV request acts for.
#[derive(Debug, Clone)]
struct DavUser {
    space: SpaceId,
    username: String,
    device: String,
    /// The client's address, for the audit log.
    ip: Option<IpAddr>,
}

async fn handle(State(st): State<AppState>, ClientIp(ip): ClientIp, req: Request) -> Response {
    let user = match authenticate(&st, req.headers(), ip).await {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    // Signing in again needs only the Authorization header (a cheap copy of its bytes), not
    // the whole header map; the map is built when an upload is about to commit.
    let again: Arc<dyn Fn() -> crate::access::SignInAgain + Send + Sync> = {
        let (st, authorization) = (st.clone(), req.headers().get(header::AUTHORIZATION).cloned());
        Arc::new(move || {
            let st = st.clone();
            let mut headers = HeaderMap::new();
            if let Some(v) = &authorization {
                headers.insert(header::AUTHORIZATION, v.clone());
            }
            Box::pin(async move { authenticate(&st, &headers, ip).await.map(|u| u.space) })
        })
    };
    match prepare(&st, &user, again, req).await {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    }
}

async fn prepare(
    st: &AppState,
    user: &DavUser,
    again: Arc<dyn Fn() -> crate::access::SignInAgain + Send + Sync>,
    mut req: Request,
) -> Result<Response, ApiError> {
    // The same decision as the REST API for the same spelling: decoded once, judged by the
    // shared rules (`..`, `%2e%2e`, `a:b`, `CON`, ... are 400 before dav-server sees them).
    let path = request_path(req.uri().path())?;
    let method = req.method().clone();
    let dest = match method.as_str() {
        "COPY" | "MOVE" => {
            overwrite_t_or_f(req.headers_mut())?;
            let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
            let proxied = peer.is_some_and(|p| st.settings.trusted_proxies.trusts(p));
            let own = own_origins(st.settings.tls, proxied, req.uri(), req.headers());
            destination(req.headers(), &own)?
        }
        _ => None,
    };
    if matches!(method.as_str(), "PROPFIND" | "COPY" | "MOVE" | "LOCK" | "DELETE") {
        check_depth(req.headers())?;
    }
    if method.as_str() == "PROPFIND" && depth_is_infinity(req.headers()) {
        return Ok(finite_depth_only());
    }
    if method == axum::http::Method::PUT && is_folder(st, user.space, &path).await {
        return Ok(put_on_folder());
    }
    if matches!(method.as_str(), "LOCK" | "UNLOCK") && !path.is_root() {
        // A lock inside a share is taken on the owner's file and stops the owner's writes: a
        // write of its own (and so is releasing one), refused (403) through a `read` share and
        // in `Shared with me` itself.
        let place = crate::access::locate(&st.meta, user.space, &path).await?;
        if place.is_shared() {
            place.target(crate::access::Want::Write)?;
        }
    }
    let mut held = lock_tokens_in_if(req.headers());
    held.extend(crate::headers::lock_tokens(req.headers()));
    let held: fs::Held = Arc::new(Mutex::new(held));
    let (delete_root, source) = match method.as_str() {
        "DELETE" => (Some(path.clone()), None),
        "COPY" | "MOVE" => (dest.clone(), Some(path.clone())),
        _ => (None, None),
    };
    let fs = fs::SpaceFs {
        st: st.clone(),
        space: user.space,
        username: user.username.clone(),
        device: user.device.clone(),
        ip: user.ip,
        again,
        held: held.clone(),
        delete_root,
        source,
        lock_request: method.as_str() == "LOCK",
        space_used: Default::default(),
        hints: Default::default(),
    };
    // PROPPATCH: dav-server accepts Windows' time properties without handing them to the file
    // system; read them here (the body is small: dav-server itself caps it at 64 KiB) and
    // apply them once dav-server has accepted the whole PROPPATCH.
    let (req, times) = if method.as_str() == "PROPPATCH" {
        let (parts, body) = req.into_parts();
        let bytes = axum::body::to_bytes(body, PROPPATCH_MAX)
            .await
            .map_err(|_| ApiError::PayloadTooLarge(format!("a PROPPATCH body holds at most {PROPPATCH_MAX} bytes")))?;
        let times = win32_times(&bytes);
        (Request::from_parts(parts, axum::body::Body::from(bytes)), times)
    } else {
        (req, (None, None))
    };
    let held_after = held.clone();
    let ls = locks::SpaceLocks {
        meta: st.meta.clone(),
        space: user.space,
        prefix: PREFIX,
        held,
        discovered: Default::default(),
        grants: Default::default(),
    };
    let cfg = DavConfig::new().filesystem(Box::new(fs)).locksystem(Box::new(ls)).principal(user.username.clone());
    let mut resp = HANDLER.handle_with(cfg, req).await;
    if times != (None, None) && resp.status() == StatusCode::MULTI_STATUS {
        resp = apply_times(st, user.space, &path, times, &fs::held_tokens(&held_after), resp).await?;
    }
    // A file whose type a browser would render (HTML, SVG, XML, scripts, ...) is sent as an
    // attachment: it must never run as a page of the gateway's origin (see browser.rs).
    if matches!(method.as_str(), "GET" | "HEAD")
        && resp.status().is_success()
        && !crate::browser::shows_inline(resp.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()))
    {
        let name = crate::browser::attachment(path.name().unwrap_or("file"));
        resp.headers_mut().insert(header::CONTENT_DISPOSITION, name);
    }
    if resp.headers().contains_key("dav") {
        // dav-server always advertises `sabredav-partialupdate`, which this door refuses.
        resp.headers_mut().insert("dav", axum::http::HeaderValue::from_static("1, 2, 3"));
    }
    if resp.status().is_server_error() {
        tracing::warn!(method = %method, path = %path, status = %resp.status(), "WebDAV request failed");
    }
    Ok(resp.map(axum::body::Body::new))
}

/// Largest PROPPATCH body read (dav-server's own limit for bodies it parses).
const PROPPATCH_MAX: usize = 65_536;

const MS_NS: &str = "urn:schemas-microsoft-com:";

/// `Win32CreationTime` and `Win32LastModifiedTime` (Unix ms) set by a PROPPATCH body, if any.
fn win32_times(body: &[u8]) -> (Option<i64>, Option<i64>) {
    let Ok(root) = xmltree::Element::parse(body) else { return (None, None) };
    let (mut created, mut modified) = (None, None);
    for set in root.children.iter().filter_map(|c| c.as_element()).filter(|e| e.name == "set") {
        for prop in set.children.iter().filter_map(|c| c.as_element()).filter(|e| e.name == "prop") {
            for p in prop.children.iter().filter_map(|c| c.as_element()) {
                if p.namespace.as_deref() != Some(MS_NS) {
                    continue;
                }
                let ms = p
                    .get_text()
                    .and_then(|t| httpdate::parse_http_date(t.trim()).ok())
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_millis() as i64);
                match p.name.as_str() {
                    "Win32CreationTime" => created = ms.or(created),
                    "Win32LastModifiedTime" => modified = ms.or(modified),
                    _ => {}
                }
            }
        }
    }
    (created, modified)
}

/// Applies the Win32 times of a PROPPATCH that dav-server accepted as a whole (a 207 whose
/// every property succeeded; any failure makes dav-server fail them all with 424).
async fn apply_times(
    st: &AppState,
    space: SpaceId,
    path: &RemotePath,
    (created, modified): (Option<i64>, Option<i64>),
    held: &[String],
    resp: axum::http::Response<dav_server::body::Body>,
) -> Result<axum::http::Response<dav_server::body::Body>, ApiError> {
    let (parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(axum::body::Body::new(body), PROPPATCH_MAX * 4)
        .await
        .map_err(|e| ApiError::internal(anyhow::anyhow!("reading the PROPPATCH answer: {e}")))?;
    let text = String::from_utf8_lossy(&bytes);
    let all_ok = text.matches("<D:status>").count() == text.matches("<D:status>HTTP/1.1 200 OK</D:status>").count();
    if all_ok {
        let (space, path) = crate::access::locate(&st.meta, space, path).await?.target(crate::access::Want::Write)?;
        st.meta.set_times(space, &path, created, modified, LockTokens::new(held)).await?;
    }
    Ok(axum::http::Response::from_parts(parts, dav_server::body::Body::from(bytes)))
}

/// The space path of a request URL path under [`PREFIX`].
fn request_path(raw: &str) -> Result<RemotePath, ApiError> {
    let rest = raw.strip_prefix(PREFIX).unwrap_or("");
    if !rest.is_empty() && !rest.starts_with('/') {
        return Err(ApiError::NotFound("no such endpoint".into()));
    }
    Ok(RemotePath::parse_url_encoded(rest)?)
}

/// The Destination of a COPY or MOVE as a path of the caller's space. An absolute URI must
/// name this server (`own`), else it is another server's resource: 502 (RFC 4918 §9.8.5,
/// §9.9.4), never taken for a path here. A path must lie under [`PREFIX`] (any other place is
/// not this user's space: 403), and its name is judged by the shared rules like any request
/// path.
fn destination(headers: &HeaderMap, own: &[Origin]) -> Result<Option<RemotePath>, ApiError> {
    let Some(v) = headers.get("destination") else { return Ok(None) };
    let s = v.to_str().map_err(|_| ApiError::BadRequest("the Destination header is not valid ASCII".into()))?;
    let path = match split_absolute(s)? {
        Some((scheme, authority, path)) => {
            let https = match scheme.to_ascii_lowercase().as_str() {
                "https" => true,
                "http" => false,
                _ => return Err(other_server(s)),
            };
            let authority = Authority::from_str(authority)
                .map_err(|_| ApiError::BadRequest(format!("the Destination `{s}` names no valid host")))?;
            if !own.iter().any(|o| o.serves(https, &authority)) {
                return Err(other_server(s));
            }
            path
        }
        None => s,
    };
    let outside = || ApiError::Forbidden(format!("the Destination must be inside {PREFIX}/ (your own space)"));
    let rest = path.strip_prefix(PREFIX).ok_or_else(outside)?;
    if !rest.is_empty() && !rest.starts_with('/') {
        return Err(outside());
    }
    let path = RemotePath::parse_url_encoded(rest)?;
    // The root is the space itself: nothing can be copied or moved onto it (RFC 4918 lets a
    // server refuse with 403). dav-server would also fail on a destination with no name.
    if path.is_root() {
        return Err(ApiError::Forbidden(
            "the Destination is the root of your space; name a file or folder in it".into(),
        ));
    }
    Ok(Some(path))
}

/// `scheme://authority/path` split into its parts (the path `/` when there is none), or None
/// for a reference without a scheme (a path). A scheme without `//authority` is no URL of
/// any server: 400.
fn split_absolute(s: &str) -> Result<Option<(&str, &str, &str)>, ApiError> {
    let Some((scheme, rest)) = s.split_once(':') else { return Ok(None) };
    // RFC 3986 §3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ); anything else before the
    // first `:` (a `/`, say) makes this a path.
    let mut chars = scheme.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        || !chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return Ok(None);
    }
    let Some(rest) = rest.strip_prefix("//") else {
        return Err(ApiError::BadRequest(format!(
            "the Destination `{s}` is not a URL; give /dav/... or http(s)://host/dav/..."
        )));
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let path = match &rest[end..] {
        "" => "/",
        p => p,
    };
    Ok(Some((scheme, &rest[..end], path)))
}

/// The answer names no host of ours: behind a proxy the one the gateway sees may be internal.
fn other_server(dest: &str) -> ApiError {
    ApiError::OtherServer(format!(
        "the Destination `{dest}` is on another server; COPY and MOVE work within this server only"
    ))
}

/// A scheme, host and port at which the caller reached this gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    /// None: not known (plain HTTP, and no trusted proxy said which the client used).
    https: Option<bool>,
    /// Lower case, without a trailing dot.
    host: String,
    /// None: the scheme's default.
    port: Option<u16>,
}

impl Origin {
    /// Whether `https://authority` (or `http://`) is this origin: hosts compared without case,
    /// a missing port the scheme's default (80, 443).
    fn serves(&self, https: bool, authority: &Authority) -> bool {
        let default = |https: bool| if https { 443 } else { 80 };
        // An unknown scheme of our own (a TLS proxy in front that does not say so) is taken to
        // be the one the client wrote: the same host and port are this server either way.
        let own_https = self.https.unwrap_or(https);
        own_https == https
            && self.host == host_key(authority.host())
            && self.port.unwrap_or(default(own_https)) == authority.port_u16().unwrap_or(default(https))
    }
}

fn host_key(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// The origins this request reached the gateway at: its `Host` (or the absolute request URI's
/// authority, HTTP/2's `:authority`), and from a trusted proxy (`--trusted-proxies`) the
/// `X-Forwarded-Host`s, over HTTPS when the gateway serves TLS or that proxy's
/// `X-Forwarded-Proto` says so (as public links' URLs are made, api/links.rs).
fn own_origins(tls: bool, proxied: bool, uri: &Uri, headers: &HeaderMap) -> Vec<Origin> {
    let lines = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect()
    };
    let https = if tls {
        Some(true)
    } else if proxied {
        // One value only: a chain of proxies that disagree leaves it unknown.
        match lines("x-forwarded-proto").as_slice() {
            [p] if p.eq_ignore_ascii_case("https") => Some(true),
            [p] if p.eq_ignore_ascii_case("http") => Some(false),
            _ => None,
        }
    } else {
        None
    };
    let mut names: Vec<String> = uri.authority().map(|a| a.to_string()).into_iter().collect();
    names.extend(headers.get(header::HOST).and_then(|v| v.to_str().ok()).map(|h| h.trim().to_string()));
    if proxied {
        names.extend(lines("x-forwarded-host"));
    }
    let mut out: Vec<Origin> = Vec::new();
    for a in names.iter().filter_map(|n| Authority::from_str(n).ok()) {
        let o = Origin { https, host: host_key(a.host()), port: a.port_u16() };
        if !out.contains(&o) {
            out.push(o);
        }
    }
    out
}

/// RFC 4918 §10.6: `Overwrite` is `T` or `F` (in any case: the RFC's grammar literals are
/// case-insensitive). dav-server reads only an upper-case `T` or `F` and takes anything else
/// for `T`, which would replace a destination a client that sent `f` meant to keep: the value
/// is handed on in upper case, and any other value is refused.
fn overwrite_t_or_f(headers: &mut HeaderMap) -> Result<(), ApiError> {
    let values: Vec<_> =
        headers.get_all("overwrite").iter().map(|v| v.as_bytes().trim_ascii().to_ascii_uppercase()).collect();
    let value = match values.as_slice() {
        [] => return Ok(()),
        [v] if v == b"T" => "T",
        [v] if v == b"F" => "F",
        _ => return Err(ApiError::BadRequest("the Overwrite header must be `T` or `F`, given once".into())),
    };
    headers.insert("overwrite", axum::http::HeaderValue::from_static(value));
    Ok(())
}

/// RFC 4918 §10.2: `Depth` is `0`, `1` or `infinity`, given once. dav-server takes any other
/// value for no header at all (PROPFIND then lists one level, COPY and LOCK go all the way
/// down): refused instead, so a client never gets something it did not ask for.
fn check_depth(headers: &HeaderMap) -> Result<(), ApiError> {
    let values: Vec<_> = headers.get_all("depth").iter().map(|v| v.as_bytes().trim_ascii()).collect();
    match values.as_slice() {
        [] => Ok(()),
        [v] if *v == b"0" || *v == b"1" || v.eq_ignore_ascii_case(b"infinity") => Ok(()),
        _ => Err(ApiError::BadRequest("the Depth header must be `0`, `1` or `infinity`, given once".into())),
    }
}

fn depth_is_infinity(headers: &HeaderMap) -> bool {
    headers.get("depth").and_then(|v| v.to_str().ok()).is_some_and(|d| d.trim().eq_ignore_ascii_case("infinity"))
}

/// True if `path` names an existing folder for the caller (their own, `Shared with me` or
/// a shared one). Anything else, errors included, is left to the request itself.
async fn is_folder(st: &AppState, caller: SpaceId, path: &RemotePath) -> bool {
    if path.is_root() {
        return true;
    }
    match crate::access::locate(&st.meta, caller, path).await {
        Ok(crate::access::Place::SharedIndex) => true,
        Ok(place) => match place.target(crate::access::Want::Read) {
            Ok((space, p)) => st.meta.stat(space, &p).await.is_ok_and(|(n, _)| n.is_dir()),
            Err(_) => false,
        },
        Err(_) => false,
    }
}

/// PUT on an existing folder: 405 with what a folder takes (RFC 4918 §9.7.2); nothing changes.
fn put_on_folder() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, "OPTIONS, PROPFIND, PROPPATCH, MKCOL, DELETE, COPY, MOVE, LOCK, UNLOCK")],
        "a PUT cannot replace a folder; upload into it (PUT to a path inside it)",
    )
        .into_response()
}

/// RFC 4918 §9.1: a server may refuse Depth: infinity PROPFIND with this precondition. A
/// listing of a whole space in one response is unbounded work and memory.
fn finite_depth_only() -> Response {
    let body = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n\
                <D:error xmlns:D=\"DAV:\"><D:propfind-finite-depth/></D:error>\n";
    (StatusCode::FORBIDDEN, [(header::CONTENT_TYPE, "application/xml; charset=utf-8")], body).into_response()
}

/// Every lock token named in an `If` header (RFC 4918 §10.4). dav-server evaluates the
/// header itself; these are what the metadata layer is told the request holds.
fn lock_tokens_in_if(headers: &HeaderMap) -> Vec<String> {
    let Some(v) = headers.get("if").and_then(|v| v.to_str().ok()) else { return Vec::new() };
    let mut out = Vec::new();
    let mut rest = v;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('>') else { break };
        let t = &after[..end];
        if (t.starts_with("opaquelocktoken:") || t.starts_with("urn:uuid:")) && t.len() <= 256 && out.len() < 16 {
            out.push(t.to_string());
        }
        rest = &after[end + 1..];
    }
    out
}

/// Signs the caller in: `Authorization: Bearer <token>`, or Basic with the username and a
/// device token (an "app password"), or Basic with the account password when the gateway
/// itself serves TLS. A valid token is never throttled; failed Basic sign-ins feed the login
/// throttle and are refused (429) while the name at this address, or the address, is locked.
async fn authenticate(st: &AppState, headers: &HeaderMap, ip: Option<IpAddr>) -> Result<DavUser, ApiError> {
    const HOW: &str = "sign in with your username and an app password (a device token from `nimbus login` or \
                       POST /api/v1/auth/login)";
    let Some(h) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return Err(ApiError::BasicAuthRequired(HOW.into()));
    };
    let (scheme, value) = h.trim().split_once(' ').unwrap_or((h, ""));
    if scheme.eq_ignore_ascii_case("bearer") {
        let u =
            AuthUser::from_token(st, value.trim(), ip).await.map_err(|_| ApiError::BasicAuthRequired(HOW.into()))?;
        return Ok(DavUser { space: u.space, username: u.username, device: u.device, ip });
    }
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(ApiError::BasicAuthRequired(HOW.into()));
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(value.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| ApiError::BasicAuthRequired(HOW.into()))?;
    let (name, secret) = decoded.split_once(':').ok_or_else(|| ApiError::BasicAuthRequired(HOW.into()))?;
    if name.is_empty() || name.len() > 64 || secret.is_empty() || secret.len() > 1024 {
        return Err(ApiError::BasicAuthRequired(HOW.into()));
    }
    let key = name_key(name);
    let looks_like_token = secret.starts_with(TOKEN_PREFIX);
    // A valid app password of this user goes through whatever others did from this address:
    // checked before the throttle, and it costs no hashing.
    let token_user = if looks_like_token { AuthUser::from_token(st, secret, ip).await.ok() } else { None };
    if let Some(u) = &token_user
        && name_key(&u.username) == key
    {
        return Ok(DavUser { space: u.space, username: u.username.clone(), device: u.device.clone(), ip });
    }
    let attempt = st.throttle.begin(&key, ip).await?;
    if token_user.is_some() {
        // A token of another user with this username is refused like a wrong password.
        return Err(failed(st, &attempt, name, ip, "WebDAV: token of another user").await);
    }
    if looks_like_token && !st.settings.tls {
        return Err(failed(st, &attempt, name, ip, "WebDAV: unknown, expired or revoked token").await);
    }
    if !st.settings.tls {
        // Never verify (or cache) an account password that crossed the network in clear.
        tracing::info!(user = name, "WebDAV Basic sign-in with a password over plain HTTP refused");
        return Err(ApiError::BasicAuthRequired(
            "account passwords are accepted only when the gateway serves HTTPS; over plain HTTP use an app \
             password: a device token from `nimbus login` or POST /api/v1/auth/login"
                .into(),
        ));
    }
    let user = st.meta.user_by_name(name).await?;
    let stored = user.as_ref().map(|u| u.password_hash.clone());
    let cache_key =
        *blake3::hash(format!("{key}\0{secret}\0{}", stored.as_deref().unwrap_or("")).as_bytes()).as_bytes();
    let cached = stored.is_some() && password_cached(&cache_key);
    let ok = cached || {
        let (password, stored) = (secret.to_string(), stored.clone());
        st.passwords.run(move || verify_password_or_dummy(&password, stored.as_deref())).await?
    };
    match user {
        Some(u) if ok && !u.disabled => {
            let role = nimbus_proto::wire::Role::parse(&u.role).unwrap_or_default();
            if u.totp_enabled || st.settings.require_totp.applies_to(role) {
                // A password is one factor: an account with two-factor sign-in uses app passwords here.
                return Err(ApiError::BasicAuthRequired(
                    "this account signs in with two factors: for WebDAV use an app password (a device token)".into(),
                ));
            }
            st.throttle.succeeded(&attempt).await;
            if !cached {
                remember_password(cache_key);
            }
            Ok(DavUser { space: SpaceId::authenticated(u.id), username: u.username, device: "WebDAV".into(), ip })
        }
        _ => Err(failed(st, &attempt, name, ip, "WebDAV").await),
    }
}

/// Records a failed sign-in (throttle, audit log) and returns the 401.
async fn failed(st: &AppState, attempt: &Attempt, name: &str, ip: Option<IpAddr>, detail: &str) -> ApiError {
    st.throttle.failed(attempt).await;
    metrics::counter!("nimbus_logins_total", "result" => "failure").increment(1);
    let _ = st
        .meta
        .audit(NewAudit {
            actor: Some(name.chars().take(64).collect()),
            action: "login_failed".into(),
            ip: ip.map(|i| i.to_string()),
            detail: Some(detail.to_string()),
            ..Default::default()
        })
        .await;
    ApiError::BasicAuthRequired("wrong username, app password or password".into())
}

fn password_cached(key: &[u8; 32]) -> bool {
    let cache = PASSWORD_CACHE.lock().unwrap_or_else(|p| p.into_inner());
    cache.get(key).is_some_and(|at| at.elapsed() < PASSWORD_CACHE_TTL)
}

fn remember_password(key: [u8; 32]) {
    let mut cache = PASSWORD_CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if cache.len() >= PASSWORD_CACHE_MAX {
        cache.retain(|_, at| at.elapsed() < PASSWORD_CACHE_TTL);
        if cache.len() >= PASSWORD_CACHE_MAX {
            cache.clear();
        }
    }
    cache.insert(key, Instant::now());
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).expect("header"));
        }
        h
    }

    #[test]
    fn request_paths_follow_the_shared_rules() {
        assert!(request_path("/dav").is_ok_and(|p| p.is_root()));
        assert!(request_path("/dav/").is_ok_and(|p| p.is_root()));
        assert_eq!(request_path("/dav/a%20b/c.txt").map(|p| p.to_string()).ok(), Some("/a b/c.txt".into()));
        for bad in ["/dav/%2e%2e/x", "/dav/..", "/dav/a/..%2fb", "/dav/a:b", "/dav/CON", "/dav//x", "/dav/a%zz"] {
            assert!(request_path(bad).is_err(), "{bad} must be refused");
        }
        assert!(matches!(request_path("/davx/y"), Err(ApiError::NotFound(_))));
    }

    fn origins(tls: bool, proxied: bool, uri: &str, pairs: &[(&'static str, &str)]) -> Vec<Origin> {
        own_origins(tls, proxied, &uri.parse().expect("uri"), &headers(pairs))
    }

    #[test]
    fn destinations_stay_inside_the_door() {
        let own = origins(false, false, "/dav/a", &[("host", "h")]);
        let d = |v: &str| destination(&headers(&[("destination", v)]), &own);
        assert_eq!(d("http://h:80/dav/a/b").ok().flatten().map(|p| p.to_string()), Some("/a/b".into()));
        assert_eq!(d("/dav/x%20y").ok().flatten().map(|p| p.to_string()), Some("/x y".into()));
        assert!(matches!(d("http://h/api/v1/files/x"), Err(ApiError::Forbidden(_))));
        assert!(matches!(d("http://h/davx/x"), Err(ApiError::Forbidden(_))));
        assert!(matches!(d("http://h"), Err(ApiError::Forbidden(_))));
        for bad in ["http://h/dav/%2e%2e/x", "http://h/dav/a/../../etc", "/dav/a%3ab", "/dav/con", "/dav/x..%2f"] {
            assert!(matches!(d(bad), Err(ApiError::InvalidName(_))), "{bad} must be refused");
        }
        assert!(destination(&HeaderMap::new(), &own).is_ok_and(|d| d.is_none()));
        // The root itself is not a destination (dav-server panicked on it).
        for root in ["/dav", "/dav/", "http://h/dav", "https://h:443/dav/"] {
            assert!(matches!(d(root), Err(ApiError::Forbidden(_))), "{root} must be refused");
        }
    }

    #[test]
    fn destinations_on_another_server_are_not_ours() {
        let dest = |own: &[Origin], v: &str| {
            destination(&headers(&[("destination", v)]), own).map(|p| p.map(|p| p.to_string()))
        };
        let ok = |own: &[Origin], v: &str| dest(own, v).ok().flatten().as_deref() == Some("/a");
        let other = |own: &[Origin], v: &str| matches!(dest(own, v), Err(ApiError::OtherServer(_)));

        // Plain HTTP, no proxy: the Host, without case, a default port the same as none; the
        // scheme is not known, so either (an untrusted TLS proxy may be in front).
        let own = origins(false, false, "/dav/x", &[("host", "Files.Example:8080")]);
        for v in [
            "http://files.example:8080/dav/a",
            "HTTP://FILES.EXAMPLE:8080/dav/a",
            "https://files.example:8080/dav/a",
            "/dav/a",
        ] {
            assert!(ok(&own, v), "{v}");
        }
        for v in [
            "http://files.example/dav/a",
            "http://files.example:8081/dav/a",
            "http://evil.example:8080/dav/a",
            "ftp://files.example:8080/dav/a",
            "http://files.example.evil:8080/dav/a",
        ] {
            assert!(other(&own, v), "{v}");
        }
        let own = origins(false, false, "/dav/x", &[("host", "files.example")]);
        for v in [
            "http://files.example/dav/a",
            "http://files.example:80/dav/a",
            "https://files.example:443/dav/a",
            "http://files.example./dav/a",
        ] {
            assert!(ok(&own, v), "{v}");
        }
        assert!(other(&own, "http://files.example:443/dav/a") && other(&own, "https://files.example:80/dav/a"));

        // TLS: https only; 443 is no port.
        let own = origins(true, false, "/dav/x", &[("host", "files.example:443")]);
        assert!(ok(&own, "https://files.example/dav/a") && ok(&own, "https://files.example:443/dav/a"));
        assert!(other(&own, "http://files.example/dav/a") && other(&own, "http://files.example:443/dav/a"));

        // HTTP/2's :authority (or an absolute request URI) without a Host header; IPv6.
        let own = origins(true, false, "https://[2001:db8::1]:8443/dav/x", &[]);
        assert!(ok(&own, "https://[2001:DB8::1]:8443/dav/a") && other(&own, "https://[2001:db8::2]:8443/dav/a"));
        assert!(other(&[], "http://h/dav/a") && ok(&[], "/dav/a"));

        // Behind a trusted proxy: its X-Forwarded-Host and -Proto; from anyone else, ignored.
        let fwd = [("host", "gateway:8080"), ("x-forwarded-host", "files.example"), ("x-forwarded-proto", "https")];
        let own = origins(false, true, "/dav/x", &fwd);
        assert!(ok(&own, "https://files.example/dav/a") && ok(&own, "https://gateway:8080/dav/a"));
        assert!(other(&own, "http://files.example/dav/a") && other(&own, "https://elsewhere/dav/a"));
        let own = origins(false, false, "/dav/x", &fwd);
        assert!(other(&own, "https://files.example/dav/a") && ok(&own, "http://gateway:8080/dav/a"));

        // Not a URL, or no host to compare: 400.
        for v in ["http:/dav/a", "mailto:x", "http:///dav/a", "http://a b/dav/a"] {
            assert!(matches!(dest(&own, v), Err(ApiError::BadRequest(_))), "{v}");
        }
    }

    #[test]
    fn depth_is_0_1_or_infinity() {
        for ok in [&[][..], &[("depth", "0")], &[("depth", "1")], &[("depth", "infinity")], &[("depth", " Infinity ")]]
        {
            assert!(check_depth(&headers(ok)).is_ok(), "{ok:?}");
        }
        for bad in [
            &[("depth", "5")][..],
            &[("depth", "")],
            &[("depth", "2")],
            &[("depth", "01")],
            &[("depth", "1,1")],
            &[("depth", "0"), ("depth", "0")],
        ] {
            assert!(matches!(check_depth(&headers(bad)), Err(ApiError::BadRequest(_))), "{bad:?}");
        }
    }

    #[test]
    fn overwrite_is_t_or_f_in_any_case() {
        let norm = |pairs: &[(&'static str, &str)]| {
            let mut h = headers(pairs);
            overwrite_t_or_f(&mut h).map(|()| h.get("overwrite").map(|v| v.to_str().unwrap_or("?").to_string()))
        };
        assert!(matches!(norm(&[]), Ok(None)));
        for (given, handed_on) in [("T", "T"), ("F", "F"), ("f", "F"), ("t", "T"), (" F ", "F")] {
            assert_eq!(norm(&[("overwrite", given)]).ok().flatten().as_deref(), Some(handed_on), "{given:?}");
        }
        for bad in ["X", "", "TF", "false", "0"] {
            assert!(matches!(norm(&[("overwrite", bad)]), Err(ApiError::BadRequest(_))), "{bad:?}");
        }
        assert!(norm(&[("overwrite", "T"), ("overwrite", "F")]).is_err());
    }

    #[test]
    fn win32_times_from_proppatch() {
        let body = br#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop><Z:Win32CreationTime>Tue, 02 Jan 2001 03:04:05 GMT</Z:Win32CreationTime><Z:Win32LastModifiedTime>Wed, 03 Jan 2001 03:04:05 GMT</Z:Win32LastModifiedTime><Z:Win32FileAttributes>00000020</Z:Win32FileAttributes></D:prop></D:set></D:propertyupdate>"#;
        assert_eq!(win32_times(body), (Some(978_404_645_000), Some(978_491_045_000)));
        assert_eq!(win32_times(b"<nope"), (None, None));
        let garbage = br#"<D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop><Z:Win32LastModifiedTime>yesterday</Z:Win32LastModifiedTime></D:prop></D:set></D:propertyupdate>"#;
        assert_eq!(win32_times(garbage), (None, None));
    }

    #[test]
    fn if_header_tokens() {
        let h = headers(&[("if", "</dav/a> (<opaquelocktoken:abc> [\"e\"]) (Not <urn:uuid:1>) (<DAV:no-lock>)")]);
        assert_eq!(lock_tokens_in_if(&h), vec!["opaquelocktoken:abc".to_string(), "urn:uuid:1".to_string()]);
        assert!(lock_tokens_in_if(&headers(&[("if", "(<broken")])).is_empty());
        assert!(depth_is_infinity(&headers(&[("depth", "Infinity")])));
        assert!(!depth_is_infinity(&headers(&[("depth", "1")])));
    }
}
