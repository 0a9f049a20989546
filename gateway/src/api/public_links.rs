//! The public side of links (`/s/{token}`), for anyone who has the link, without an account:
//! the link's page (HTML), the file or one file inside the folder (ranges, through the cache,
//! the REST download's code), the folder as a streamed zip, and uploads to a file drop.
//!
//! Every request reads the link from the database (`meta/links.rs`), so a revocation, a change
//! or an expiry holds at once on every gateway. An unknown, revoked, expired or used-up link,
//! and one whose target is in the trash, all answer the same 404. A password is checked on
//! every request (argon2id under the `PasswordGate`), throttled per link and client address
//! like sign-ins (`Throttle::begin_link`); a browser types it into the page's form once and
//! gets a cookie for that link (see [`unlock`]), so its page, downloads and uploads open without
//! a password prompt per request. A file drop's page has an upload form. Paths below a shared
//! folder are decoded once by the shared name rules and resolved by walking down from the
//! folder's node, so nothing outside it can be named. Every access is audited with the client's address, the link and the bytes.

use std::net::IpAddr;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Form, Multipart, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures::{AsyncWriteExt, StreamExt};
use nimbus_proto::RemotePath;
use nimbus_proto::names::name_key;
use nimbus_proto::size::format_size;
use nimbus_proto::wire::LinkMode;

use super::files::{Download, drain_rejected};
use super::space_path;
use crate::access::StillAllowed;
use crate::auth::{ClientIp, token_hash, verify_password};
use crate::cache::CacheMode;
use crate::error::{ApiError, ApiResult};
use crate::meta::{Base, LockTokens, MetaError, NewAudit, NodeRow, PublicLink, SpaceId, now_ms};
use crate::space::{self, PutOptions};
use crate::state::AppState;

/// The header a client sends a link's password in (or as the HTTP Basic password).
pub const LINK_PASSWORD_HEADER: &str = "x-nimbus-link-password";

/// The policy of the link pages: no scripts, no outside resources, inline styles only, no
/// framing; forms (the password, a file drop's upload) may only post here.
pub const LINK_PAGE_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// How long a password typed into a link's page opens that link in that browser.
const UNLOCK_TTL_MS: i64 = 12 * 3600 * 1000;

/// Entries a folder page lists (the zip has them all).
const PAGE_ENTRIES: i64 = 1000;
/// Folder entries read per query while a zip is written.
const ZIP_PAGE: i64 = 500;
/// Bytes between the zip writer and the response: what a zip holds in memory at most, besides
/// the blocks in flight of the file being read.
const ZIP_PIPE: usize = 256 * 1024;

/// A path inside a linked folder, as the shared name rules judge it, with encoded slashes
/// refused (docs/API.md, Public links: `%2F` is 400): a visitor names one path, spelled one
/// way, so a `/` hidden in a name cannot stand in for a separator the rules would have seen.
fn link_path(uri: &Uri, prefix: &str) -> Result<RemotePath, ApiError> {
    let rest = uri.path().strip_prefix(prefix).unwrap_or("");
    if rest.as_bytes().windows(3).any(|w| w[0] == b'%' && w[1] == b'2' && w[2].eq_ignore_ascii_case(&b'f')) {
        return Err(nimbus_proto::NameError::ForbiddenChar { name: "%2F".into(), ch: '/' }.into());
    }
    space_path(uri, prefix)
}

/// The routes of the public side; merged into the gateway's router beside the API.
pub fn routes() -> Router<crate::state::AppState> {
    Router::new()
        .route("/s/{token}", get(page).post(unlock))
        .route("/s/{token}/upload", post(upload_form).layer(DefaultBodyLimit::disable()))
        .route("/s/{token}/browse/{*path}", get(browse))
        .route("/s/{token}/download", get(download))
        .route("/s/{token}/download/{*path}", get(download_inside))
        .route("/s/{token}/upload/{*name}", put(upload).layer(DefaultBodyLimit::disable()))
}

/// An error of the public side: JSON for programs, a small page for browsers (same status and
/// headers: `WWW-Authenticate` makes a browser ask for a link's password).
struct PublicError {
    err: ApiError,
    html: bool,
    /// The link's token, for the password form of a browser's 401 page.
    token: Option<String>,
}

impl PublicError {
    fn new(err: ApiError, headers: &HeaderMap, uri: &Uri) -> PublicError {
        PublicError { err, html: wants_html(headers), token: token_of(uri).map(str::to_string) }
    }
}

impl IntoResponse for PublicError {
    fn into_response(self) -> Response {
        let html = self.html;
        let message = match &self.err {
            ApiError::Internal(_) => "internal error; the gateway log has details".to_string(),
            e => e.to_string(),
        };
        let wrong = matches!(&self.err, ApiError::BasicAuthRequired(m) if m == WRONG_PASSWORD);
        let ask = matches!(self.err, ApiError::BasicAuthRequired(_));
        let mut resp = self.err.into_response();
        if html {
            let (mut parts, _) = resp.into_parts();
            let body = match (&self.token, ask) {
                // A browser gets the page's own form, not its Basic prompt over the page.
                (Some(token), true) => {
                    parts.headers.remove(header::WWW_AUTHENTICATE);
                    let said =
                        if wrong { "Wrong password; try again." } else { "This link is protected by a password." };
                    render("Password required", &password_form(token, said))
                }
                _ => render("Nimbus", &format!("<h1>{}</h1><p>{}</p>", parts.status.as_u16(), escape(&message))),
            };
            resp = Response::from_parts(parts, Body::from(body));
            page_headers(resp.headers_mut());
        }
        resp
    }
}

const WRONG_PASSWORD: &str = "wrong password for this link";

type PublicResult<T> = Result<T, PublicError>;

fn wants_html(headers: &HeaderMap) -> bool {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"))
}

/// The one answer for every link that opens nothing: no oracle between unknown, revoked,
/// expired, used up and trashed.
fn gone() -> ApiError {
    ApiError::NotFound("no such link: it may have expired or been revoked".into())
}

/// The token of a `/s/{token}...` request, as written in the URL: tokens are URL-safe base64,
/// anything else is no token at all.
fn token_of(uri: &Uri) -> Option<&str> {
    let rest = uri.path().strip_prefix("/s/")?;
    let token = rest.split('/').next()?;
    (!token.is_empty()
        && token.len() <= 64
        && token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    .then_some(token)
}

/// A link opened for one request: its target is live and the password, if any, was right.
struct Visit {
    link: PublicLink,
    /// The link's target.
    node: NodeRow,
    /// The target's current path in the owner's space.
    path: RemotePath,
    token: String,
    ip: Option<IpAddr>,
}

impl Visit {
    fn space(&self) -> SpaceId {
        self.link.space
    }

    fn mode(&self) -> LinkMode {
        LinkMode::parse(&self.link.link.mode).unwrap_or_default()
    }

    fn require(&self, mode: LinkMode) -> ApiResult<()> {
        match (self.mode(), mode) {
            (a, b) if a == b => Ok(()),
            (LinkMode::Upload, _) => {
                Err(ApiError::Forbidden("this link is a file drop: its contents cannot be listed or downloaded".into()))
            }
            (LinkMode::View, _) => Err(ApiError::Forbidden("this link does not accept uploads".into())),
        }
    }

    /// Checked again just before an upload through this link commits: the link still opens
    /// as it did (not revoked, expired or used up, its password unchanged, still a file
    /// drop) and its folder is still at `self.path`.
    fn still_open(&self, st: &AppState) -> StillAllowed {
        let st = st.clone();
        let (token, id, stored) = (self.token.clone(), self.link.link.id, self.link.link.password_hash.clone());
        let (node, folder) = (self.node.id, self.path.clone());
        Box::pin(async move {
            let link = st.meta.link_by_token(&token_hash(&token)).await?.ok_or_else(gone)?;
            let mode = LinkMode::parse(&link.link.mode).unwrap_or_default();
            if link.link.id != id
                || link.link.spent(now_ms())
                || link.link.password_hash != stored
                || mode != LinkMode::Upload
            {
                return Err(gone());
            }
            match st.meta.node_path(link.space, node).await {
                Ok((_, path, true)) if path == folder => Ok(()),
                Ok((_, _, true)) => Err(ApiError::Conflict(
                    "the folder behind this link moved while the file was uploading; nothing was saved, send it again"
                        .into(),
                )),
                Ok(_) | Err(MetaError::NotFound) => Err(gone()),
                Err(e) => Err(e.into()),
            }
        })
    }

    async fn audit(&self, st: &AppState, action: &str, detail: String) {
        let entry = NewAudit {
            actor: None,
            action: action.into(),
            target: Some(format!("link:{}", self.link.link.id)),
            detail: Some(format!("{detail} (owner {})", self.link.owner)),
            ip: self.ip.map(|i| i.to_string()),
            ..Default::default()
        };
        if let Err(e) = st.meta.audit(entry).await {
            tracing::warn!(error = %e, "could not audit a link access");
        }
    }
}

/// The password a request carries: `X-Nimbus-Link-Password`, or the password of HTTP Basic
/// (any username).
fn supplied_password(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers.get(LINK_PASSWORD_HEADER) {
        return String::from_utf8(v.as_bytes().to_vec()).ok();
    }
    let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, b64) = auth.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = STANDARD.decode(b64.trim()).ok()?;
    let text = String::from_utf8(raw).ok()?;
    text.split_once(':').map(|(_, p)| p.to_string())
}

/// Finds the link of the request and checks it opens: not spent, the password right, the
/// target live.
async fn open(st: &AppState, uri: &Uri, headers: &HeaderMap, ip: Option<IpAddr>) -> ApiResult<Visit> {
    open_as(st, uri, headers, ip, supplied_password(headers)).await
}

/// [`open`] with the password `supplied` (from the request's headers, or the page's form);
/// without one, the link's unlock cookie (see [`unlock`]) also opens it.
async fn open_as(
    st: &AppState,
    uri: &Uri,
    headers: &HeaderMap,
    ip: Option<IpAddr>,
    supplied: Option<String>,
) -> ApiResult<Visit> {
    let token = token_of(uri).ok_or_else(gone)?;
    let link = st.meta.link_by_token(&token_hash(token)).await?.ok_or_else(gone)?;
    let now = now_ms();
    if link.link.spent(now) {
        return Err(gone());
    }
    if let Some(stored) = link.link.password_hash.clone()
        && !(supplied.is_none() && cookie_unlocks(headers, link.link.id, &stored, now))
    {
        let ask =
            "this link is protected by a password: send it as X-Nimbus-Link-Password or as the HTTP Basic password";
        let supplied = supplied.ok_or_else(|| ApiError::BasicAuthRequired(ask.into()))?;
        // Locked (this link at this address, or this address): 429 before any work.
        let attempt = st.throttle.begin_link(link.link.id, ip).await?;
        let ok = supplied.len() <= 1024 && st.passwords.run(move || verify_password(&supplied, &stored)).await?;
        if !ok {
            st.throttle.failed(&attempt).await;
            let entry = NewAudit {
                action: "link_password_failed".into(),
                target: Some(format!("link:{}", link.link.id)),
                detail: Some(format!("wrong password (owner {})", link.owner)),
                ip: ip.map(|i| i.to_string()),
                ..Default::default()
            };
            if let Err(e) = st.meta.audit(entry).await {
                tracing::warn!(error = %e, "could not audit a link access");
            }
            return Err(ApiError::BasicAuthRequired(WRONG_PASSWORD.into()));
        }
        st.throttle.succeeded(&attempt).await;
    }
    let (node, path, live) = match st.meta.node_path(link.space, link.link.node_id).await {
        Ok(found) => found,
        Err(MetaError::NotFound) => return Err(gone()),
        Err(e) => return Err(e.into()),
    };
    if !live {
        return Err(gone());
    }
    Ok(Visit { link, node, path, token: token.to_string(), ip })
}

/// The frame of every handler below a link: opens the request's link, checks that it serves
/// `mode` (`None`: any), runs `f` on it, and turns an error into the public side's answer
/// (JSON, or a page for a browser).
async fn with_link<F, Fut>(
    st: &AppState,
    uri: &Uri,
    headers: &HeaderMap,
    ip: Option<IpAddr>,
    mode: Option<LinkMode>,
    f: F,
) -> PublicResult<Response>
where
    F: FnOnce(Visit) -> Fut,
    Fut: Future<Output = ApiResult<Response>>,
{
    let run = async {
        let v = open(st, uri, headers, ip).await?;
        if let Some(mode) = mode {
            v.require(mode)?;
        }
        f(v).await
    };
    run.await.map_err(|err| PublicError::new(err, headers, uri))
}

/// The name of the cookie that opens link `id` in a browser.
fn unlock_cookie_name(id: i64) -> String {
    format!("nimbus_link_{id}")
}

/// The proof in a link's unlock cookie, valid until `expires` (ms): keyed by the link's stored
/// password hash (secret, and with a salt of its own), so it is worth nothing for another link,
/// and a new password (or none) ends every cookie of the old one without any state kept.
fn unlock_mac(id: i64, stored: &str, expires: i64) -> blake3::Hash {
    let key = blake3::derive_key("nimbus link unlock cookie v1", stored.as_bytes());
    blake3::keyed_hash(&key, format!("{id}.{expires}").as_bytes())
}

/// Whether the request carries a live unlock cookie for link `id` whose password hash is `stored`.
fn cookie_unlocks(headers: &HeaderMap, id: i64, stored: &str, now: i64) -> bool {
    let name = unlock_cookie_name(id);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .filter(|(k, _)| *k == name)
        .any(|(_, v)| {
            let Some((exp, mac)) = v.split_once('.') else { return false };
            let (Ok(exp), Ok(mac)) = (exp.parse::<i64>(), blake3::Hash::from_hex(mac)) else { return false };
            // blake3::Hash compares in constant time.
            exp > now && exp <= now + UNLOCK_TTL_MS && mac == unlock_mac(id, stored, exp)
        })
}

#[derive(serde::Deserialize)]
struct UnlockForm {
    password: String,
}

/// `POST /s/{token}` (the page's password form): the password checked and throttled as in a
/// header; right, a cookie for this link only (its path, HttpOnly, SameSite=Strict, 12 hours)
/// and back to the page (303); wrong, the form again with a word on it (401), and after
/// repeated failures the throttle's 429 page.
async fn unlock(
    State(st): State<AppState>,
    ClientIp(ip): ClientIp,
    parts: Parts,
    Form(form): Form<UnlockForm>,
) -> PublicResult<Response> {
    let run = async {
        let v = open_as(&st, &parts.uri, &parts.headers, ip, Some(form.password)).await?;
        let page = format!("/s/{}", v.token);
        let mut resp = (StatusCode::SEE_OTHER, [(header::LOCATION, page.clone())]).into_response();
        if let Some(stored) = &v.link.link.password_hash {
            let expires = now_ms() + UNLOCK_TTL_MS;
            let mac = unlock_mac(v.link.link.id, stored, expires);
            let secure = super::links::base_url(&st, &parts).starts_with("https:");
            let cookie = format!(
                "{}={expires}.{}; Path={page}; Max-Age={}; HttpOnly; SameSite=Strict{}",
                unlock_cookie_name(v.link.link.id),
                mac.to_hex(),
                UNLOCK_TTL_MS / 1000,
                if secure { "; Secure" } else { "" }
            );
            let value = HeaderValue::from_str(&cookie).map_err(ApiError::internal)?;
            resp.headers_mut().append(header::SET_COOKIE, value);
        }
        Ok(resp)
    };
    // The form is a browser's: its answers are pages.
    run.await.map_err(|err| PublicError { err, html: true, token: token_of(&parts.uri).map(str::to_string) })
}

/// `GET /s/{token}`: the link's page.
async fn page(State(st): State<AppState>, ClientIp(ip): ClientIp, parts: Parts) -> PublicResult<Response> {
    let st = &st;
    let parts = &parts;
    with_link(st, &parts.uri, &parts.headers, ip, None, |v| async move {
        let base = format!("/s/{}", v.token);
        let body = match (v.mode(), v.node.is_dir()) {
            (LinkMode::Upload, _) => format!(
                "<h1>{name}</h1><p>A file drop: you can add files here; you cannot see what is in it.</p>\
                 {form}<p>Or with curl: <code>curl -T FILE {url}/upload/NAME</code> (a name that is \
                 already taken is refused).</p>",
                name = escape(&v.node.name),
                form = upload_form_html(&base),
                url = escape(&format!("{}{base}", super::links::base_url(st, parts))),
            ),
            (LinkMode::View, false) => file_page(&v, &base),
            (LinkMode::View, true) => folder_page(st, &v, &v.node, &RemotePath::root(), &base).await?,
        };
        v.audit(st, "link_view", format!("page of {}", v.path)).await;
        Ok(html_response(&v.node.name, &body))
    })
    .await
}

/// `GET /s/{token}/browse/{path}`: a folder inside a shared folder.
async fn browse(
    State(st): State<AppState>,
    ClientIp(ip): ClientIp,
    uri: Uri,
    headers: HeaderMap,
) -> PublicResult<Response> {
    let (st, uri) = (&st, &uri);
    with_link(st, uri, &headers, ip, Some(LinkMode::View), |v| async move {
        let rel = link_path(uri, &format!("/s/{}/browse/", v.token))?;
        let dir = below(st, &v, &rel).await?;
        if !dir.is_dir() {
            return Err(ApiError::not_found());
        }
        let base = format!("/s/{}", v.token);
        let body = folder_page(st, &v, &dir, &rel, &base).await?;
        v.audit(st, "link_view", format!("page of {}", join_display(&v.path, &rel))).await;
        Ok(html_response(&dir.name, &body))
    })
    .await
}

/// `GET /s/{token}/download`: the file, or the folder as a zip.
async fn download(
    State(st): State<AppState>,
    ClientIp(ip): ClientIp,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> PublicResult<Response> {
    let (st, method, headers) = (&st, &method, &headers);
    with_link(st, &uri, headers, ip, Some(LinkMode::View), |v| async move {
        let node = v.node.clone();
        let shown = v.path.to_string();
        send(st, &v, node, shown, method, headers).await
    })
    .await
}

/// `GET /s/{token}/download/{path}`: one file inside a shared folder (a folder: as a zip).
async fn download_inside(
    State(st): State<AppState>,
    ClientIp(ip): ClientIp,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> PublicResult<Response> {
    let (st, uri, method, headers) = (&st, &uri, &method, &headers);
    with_link(st, uri, headers, ip, Some(LinkMode::View), |v| async move {
        let rel = link_path(uri, &format!("/s/{}/download/", v.token))?;
        if rel.is_root() {
            return Err(ApiError::not_found());
        }
        let node = below(st, &v, &rel).await?;
        let shown = join_display(&v.path, &rel);
        send(st, &v, node, shown, method, headers).await
    })
    .await
}

/// The live node at `rel` inside the link's folder (404 if the link is a file's).
async fn below(st: &AppState, v: &Visit, rel: &RemotePath) -> ApiResult<NodeRow> {
    if !v.node.is_dir() {
        return Err(ApiError::not_found());
    }
    match st.meta.resolve_below(v.space(), v.node.id, rel).await {
        Ok(n) => Ok(n),
        Err(MetaError::NotFound) => Err(ApiError::not_found()),
        Err(e) => Err(e.into()),
    }
}

fn join_display(base: &RemotePath, rel: &RemotePath) -> String {
    let mut p = base.clone();
    for c in rel.components() {
        p = p.join(c).unwrap_or_else(|_| p.clone());
    }
    p.to_string()
}

/// A file (with ranges, through the cache, as the REST download) or a folder (as a zip). A
/// download is counted when a GET starts one at byte 0: resuming the rest (`Range: bytes=N-`)
/// does not count again, and a link whose count is used up answers 404.
async fn send(
    st: &AppState,
    v: &Visit,
    node: NodeRow,
    shown: String,
    method: &Method,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    if node.is_dir() {
        return zip_response(st, v, node, shown, method).await;
    }
    let (node, version, blocks) = match st.meta.file_content(v.space(), node.id).await {
        Ok(found) => found,
        Err(MetaError::NotFound) => return Err(ApiError::not_found()),
        Err(e) => return Err(e.into()),
    };
    let plan = Download::plan(&version, blocks.into(), &node.name, headers)?;
    if plan.starts_download(method) && !st.meta.count_link_download(v.link.link.id).await? {
        return Err(gone());
    }
    if *method == Method::GET {
        let bytes = match plan.range() {
            Some((s, e)) => format!("bytes {s}-{e} ({})", format_size(e - s + 1)),
            None => "no content".into(),
        };
        v.audit(st, "link_download", format!("{shown}: {bytes}")).await;
    }
    plan.respond(st, v.space(), method, CacheMode::Normal).await
}

/// A folder as a zip, written while it is sent: files stored as they are (no compression, so
/// the gateway spends no CPU on it and the archive's size is the files' size), read block by
/// block through the cache. Memory stays bounded: the pipe, the blocks in flight and one
/// central-directory record per entry.
async fn zip_response(st: &AppState, v: &Visit, dir: NodeRow, shown: String, method: &Method) -> ApiResult<Response> {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/zip"));
    headers.insert(header::CONTENT_DISPOSITION, crate::browser::attachment(&format!("{}.zip", dir.name)));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    if *method != Method::GET {
        return Ok((StatusCode::OK, headers, Body::empty()).into_response());
    }
    if !st.meta.count_link_download(v.link.link.id).await? {
        return Err(gone());
    }
    let (writer, reader) = tokio::io::duplex(ZIP_PIPE);
    let task = tokio::spawn(write_zip(st.clone(), v.space(), dir, writer));
    let guard = ZipAudit {
        st: st.clone(),
        entry: NewAudit {
            action: "link_download".into(),
            target: Some(format!("link:{}", v.link.link.id)),
            ip: v.ip.map(|i| i.to_string()),
            ..Default::default()
        },
        what: format!("{shown} as zip"),
        owner: v.link.owner.clone(),
        sent: 0,
        done: false,
    };
    let state = ZipBody { reader: tokio_util::io::ReaderStream::with_capacity(reader, 64 * 1024), task, guard };
    let body = futures::stream::unfold(Some(state), |state| async move {
        let mut s = state?;
        match s.reader.next().await {
            Some(Ok(chunk)) => {
                s.guard.sent += chunk.len() as u64;
                Some((Ok(chunk), Some(s)))
            }
            Some(Err(e)) => Some((Err(e), None)),
            // The writer is done: its result says whether the archive is whole. If not, the
            // response is aborted rather than ended as if it were complete.
            None => match (&mut s.task).await {
                Ok(Ok(())) => {
                    s.guard.done = true;
                    None
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = format!("{e:#}"), "aborting a zip download");
                    Some((Err(std::io::Error::other(e)), None))
                }
                Err(e) => Some((Err(std::io::Error::other(e)), None)),
            },
        }
    });
    Ok((StatusCode::OK, headers, Body::from_stream(body)).into_response())
}

struct ZipBody {
    reader: tokio_util::io::ReaderStream<tokio::io::DuplexStream>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    guard: ZipAudit,
}

/// Audits a zip download when its response ends, complete or not, with the bytes sent.
struct ZipAudit {
    st: AppState,
    entry: NewAudit,
    what: String,
    owner: String,
    sent: u64,
    done: bool,
}

impl Drop for ZipAudit {
    fn drop(&mut self) {
        let mut entry = std::mem::take(&mut self.entry);
        let how = if self.done { "sent" } else { "interrupted after" };
        entry.detail = Some(format!("{}: {how} {} bytes (owner {})", self.what, self.sent, self.owner));
        let meta = self.st.meta.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = meta.audit(entry).await {
                    tracing::warn!(error = %e, "could not audit a link access");
                }
            });
        }
    }
}

fn zip_time(ms: i64) -> async_zip::ZipDateTime {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    // ZIP times start in 1980.
    let t = t.max(time::macros::datetime!(1980-01-01 0:00 UTC));
    async_zip::ZipDateTimeBuilder::new()
        .year(t.year())
        .month(u8::from(t.month()) as u32)
        .day(t.day() as u32)
        .hour(t.hour() as u32)
        .minute(t.minute() as u32)
        .second(t.second() as u32)
        .build()
}

/// Writes the folder `root` of `space` as a zip into `out`, folder by folder, page by page.
async fn write_zip(st: AppState, space: SpaceId, root: NodeRow, out: tokio::io::DuplexStream) -> anyhow::Result<()> {
    use async_zip::{Compression, ZipEntryBuilder};
    let mut zip = async_zip::base::write::ZipFileWriter::with_tokio(out);
    let mut folders = vec![(root.id, format!("{}/", root.name), root.modified_at)];
    while let Some((dir, prefix, modified)) = folders.pop() {
        let entry = ZipEntryBuilder::new(prefix.clone().into(), Compression::Stored)
            .last_modification_date(zip_time(modified))
            .unix_permissions(0o755);
        zip.write_entry_whole(entry, &[]).await?;
        let mut after: Option<String> = None;
        loop {
            let children = st.meta.list_children(space, dir, after.as_deref(), ZIP_PAGE).await?;
            for child in &children {
                let n = &child.node;
                let name = format!("{prefix}{}", n.name);
                if n.is_dir() {
                    folders.push((n.id, format!("{name}/"), n.modified_at));
                    continue;
                }
                // Gone since the listing: left out, as if the zip had been made a moment later.
                let (_, version, blocks) = match st.meta.file_content(space, n.id).await {
                    Ok(found) => found,
                    Err(MetaError::NotFound) => continue,
                    Err(e) => return Err(e.into()),
                };
                let entry = ZipEntryBuilder::new(name.into(), Compression::Stored)
                    .last_modification_date(zip_time(version.created_at))
                    .unix_permissions(0o644);
                let size = version.size.max(0) as u64;
                if size == 0 {
                    zip.write_entry_whole(entry, &[]).await?;
                    continue;
                }
                let mut content = space::open_range(&st, space, &blocks, (0, size - 1), CacheMode::Normal)
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                let mut w = zip.write_entry_stream(entry).await?;
                while let Some(chunk) = content.next().await {
                    let chunk: Bytes = chunk?;
                    w.write_all(&chunk).await?;
                }
                w.close().await?;
            }
            if (children.len() as i64) < ZIP_PAGE {
                break;
            }
            after = children.last().map(|c| name_key(&c.node.name));
        }
    }
    let mut out = zip.close().await?;
    futures::AsyncWriteExt::close(&mut out).await?;
    Ok(())
}

/// A file drop never replaces anything: the answer when `name` is taken.
fn taken(name: &str) -> ApiError {
    ApiError::AlreadyExists(format!("`{name}` is already there; choose another name"))
}

/// `PUT /s/{token}/upload/{name}`: adds a file to a file drop (201); never replaces one (409).
async fn upload(
    State(st): State<AppState>,
    ClientIp(ip): ClientIp,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> PublicResult<Response> {
    let mut stream = body.into_data_stream();
    let (st, uri, headers, stream_ref) = (&st, &uri, &headers, &mut stream);
    let result = with_link(st, uri, headers, ip, Some(LinkMode::Upload), |v| async move {
        if !v.node.is_dir() {
            return Err(gone());
        }
        let rel = link_path(uri, &format!("/s/{}/upload/", v.token))?;
        let [name] = rel.components() else {
            return Err(ApiError::BadRequest("upload one file by its name: /s/{token}/upload/NAME".into()));
        };
        // Already there (a file or a folder): refused before the body is read. The commit
        // checks again (`Base::Expect(None)`), so a race cannot replace anything either.
        match st.meta.resolve_below(v.space(), v.node.id, &rel).await {
            Ok(_) => return Err(taken(name)),
            Err(MetaError::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
        let target = v.path.join(name)?;
        let device = format!("link {}", v.link.link.id);
        let content_length =
            headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
        let opts = PutOptions {
            base: Base::Expect(None),
            device: Some(&device),
            content_length,
            verify: None,
            allowance: 0,
            still_allowed: Some(v.still_open(st)),
        };
        let (node, _, _) = match space::put_stream(st, v.space(), &target, stream_ref, opts, LockTokens::new(&[])).await
        {
            Err(ApiError::Conflict(_)) => return Err(taken(name)),
            other => other?,
        };
        let size = node.size.max(0) as u64;
        v.audit(st, "link_upload", format!("{target}: {size} bytes")).await;
        let body = serde_json::json!({ "name": node.name, "size": size });
        Ok((StatusCode::CREATED, axum::Json(body)).into_response())
    })
    .await;
    if result.is_err() {
        drain_rejected(&mut stream).await;
    }
    result
}

/// What became of one file of the upload form.
enum Dropped {
    Added(String, u64),
    /// A name already taken (409).
    Taken(String, String),
    /// No plain file name (400).
    Refused(String, String),
}

/// `POST /s/{token}/upload` (a file drop's page, `multipart/form-data`): adds each file under its
/// own name, as `PUT .../upload/NAME` does (never replacing one), and answers with a page saying
/// what was added and what was not, and why: 201 when all were added, 409 when a name was taken.
async fn upload_form(
    State(st): State<AppState>,
    ClientIp(ip): ClientIp,
    uri: Uri,
    headers: HeaderMap,
    mut form: Multipart,
) -> PublicResult<Response> {
    let (st, uri, headers, form) = (&st, &uri, &headers, &mut form);
    let result = with_link(st, uri, headers, ip, Some(LinkMode::Upload), |v| async move {
        if !v.node.is_dir() {
            return Err(gone());
        }
        let device = format!("link {}", v.link.link.id);
        let mut done = Vec::new();
        while let Some(field) =
            form.next_field().await.map_err(|e| ApiError::BadRequest(format!("the upload was interrupted: {e}")))?
        {
            // Browsers send the bare file name; anything before a (back)slash is not a name.
            let Some(name) = field.file_name().map(|n| n.rsplit(['/', '\\']).next().unwrap_or("").to_string()) else {
                continue;
            };
            if name.is_empty() {
                continue; // the form sent with no file chosen
            }
            let rel = match RemotePath::root().join(&name) {
                Ok(p) => p,
                Err(e) => {
                    done.push(Dropped::Refused(name, e.to_string()));
                    continue;
                }
            };
            match st.meta.resolve_below(v.space(), v.node.id, &rel).await {
                Ok(_) => {
                    done.push(Dropped::Taken(name.clone(), taken(&name).to_string()));
                    continue;
                }
                Err(MetaError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
            let target = v.path.join(&name)?;
            let opts = PutOptions {
                base: Base::Expect(None),
                device: Some(&device),
                content_length: None,
                verify: None,
                allowance: 0,
                still_allowed: Some(v.still_open(st)),
            };
            let body = Box::pin(field);
            match space::put_stream(st, v.space(), &target, body, opts, LockTokens::NONE).await {
                Ok((node, _, _)) => {
                    let size = node.size.max(0) as u64;
                    v.audit(st, "link_upload", format!("{target}: {size} bytes")).await;
                    done.push(Dropped::Added(node.name, size));
                }
                Err(ApiError::Conflict(_)) => done.push(Dropped::Taken(name.clone(), taken(&name).to_string())),
                Err(e) => return Err(e),
            }
        }
        if done.is_empty() {
            return Err(ApiError::BadRequest("choose at least one file to upload".into()));
        }
        let status = if done.iter().any(|d| matches!(d, Dropped::Taken(..))) {
            StatusCode::CONFLICT
        } else if done.iter().any(|d| matches!(d, Dropped::Refused(..))) {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::CREATED
        };
        let mut items = String::new();
        for d in &done {
            items.push_str(&match d {
                Dropped::Added(n, size) => {
                    format!("<li>Added <strong>{}</strong> ({})</li>", escape(n), escape(&format_size(*size)))
                }
                Dropped::Taken(n, why) | Dropped::Refused(n, why) => {
                    format!("<li>Not added: <strong>{}</strong>: {}</li>", escape(n), escape(why))
                }
            });
        }
        let base = format!("/s/{}", v.token);
        let body = format!(
            "<h1>{name}</h1><ul>{items}</ul><p>Add more files:</p>{form}",
            name = escape(&v.node.name),
            form = upload_form_html(&base)
        );
        let mut resp = html_response(&v.node.name, &body);
        *resp.status_mut() = status;
        Ok(resp)
    })
    .await;
    // A browser is answered with a page, whatever it sent as Accept.
    result.map_err(|mut e| {
        e.html = true;
        e
    })
}

// ---- HTML ----

/// A file drop's upload form (no script: a file input takes files picked or dropped on it).
fn upload_form_html(base: &str) -> String {
    format!(
        "<form method=\"post\" action=\"{action}\" enctype=\"multipart/form-data\">\
         <p><label>Files to add <input type=\"file\" name=\"file\" multiple required></label></p>\
         <p><button type=\"submit\">Upload</button></p></form>",
        action = escape(&format!("{base}/upload")),
    )
}

/// The password form of a protected link's page.
fn password_form(token: &str, said: &str) -> String {
    format!(
        "<h1>Password required</h1><p>{said}</p><form method=\"post\" action=\"{action}\">\
         <p><label>Password <input type=\"password\" name=\"password\" autocomplete=\"current-password\" \
         required autofocus></label></p><p><button type=\"submit\">Open</button></p></form>",
        said = escape(said),
        action = escape(&format!("/s/{token}")),
    )
}

/// `s` with HTML's special characters escaped (text and attribute values alike).
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What stays as it is in a path segment of a link: RFC 3986's unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// A path as it goes into a URL: every component percent-encoded.
fn url_path(p: &RemotePath) -> String {
    p.components()
        .iter()
        .map(|c| percent_encoding::utf8_percent_encode(c, SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

fn file_page(v: &Visit, base: &str) -> String {
    format!(
        "<h1>{name}</h1><p>{size}</p><p><a class=\"button\" href=\"{href}\">Download</a></p>",
        name = escape(&v.node.name),
        size = escape(&format_size(v.node.size.max(0) as u64)),
        href = escape(&format!("{base}/download")),
    )
}

async fn folder_page(st: &AppState, v: &Visit, dir: &NodeRow, rel: &RemotePath, base: &str) -> ApiResult<String> {
    let children = st.meta.list_children(v.space(), dir.id, None, PAGE_ENTRIES + 1).await?;
    let mut rows = String::new();
    if let Some(parent) = rel.parent() {
        let href = if parent.is_root() { base.to_string() } else { format!("{base}/browse/{}", url_path(&parent)) };
        rows.push_str(&format!("<tr><td><a href=\"{}\">..</a></td><td></td></tr>", escape(&href)));
    }
    for child in children.iter().take(PAGE_ENTRIES as usize) {
        let n = &child.node;
        let p = rel.join(&n.name)?;
        let (href, size, label) = if n.is_dir() {
            (format!("{base}/browse/{}", url_path(&p)), String::new(), format!("{}/", n.name))
        } else {
            (format!("{base}/download/{}", url_path(&p)), format_size(n.size.max(0) as u64), n.name.clone())
        };
        rows.push_str(&format!(
            "<tr><td><a href=\"{}\">{}</a></td><td>{}</td></tr>",
            escape(&href),
            escape(&label),
            escape(&size)
        ));
    }
    let more = if children.len() as i64 > PAGE_ENTRIES {
        format!("<p>The first {PAGE_ENTRIES} entries are shown; the zip holds them all.</p>")
    } else {
        String::new()
    };
    let zip = if rel.is_root() { format!("{base}/download") } else { format!("{base}/download/{}", url_path(rel)) };
    Ok(format!(
        "<h1>{name}</h1><p><a class=\"button\" href=\"{zip}\">Download all (zip)</a></p>\
         <table>{rows}</table>{more}",
        name = escape(&dir.name),
        zip = escape(&zip),
    ))
}

fn render(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>{title}</title><style>\
         body{{font-family:system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem;color:#222}}\
         h1{{font-size:1.4rem;word-break:break-all}}table{{border-collapse:collapse;width:100%}}\
         td{{padding:.3rem .5rem;border-bottom:1px solid #eee;word-break:break-all}}\
         td:last-child{{text-align:right;white-space:nowrap;color:#666}}\
         a.button,button{{display:inline-block;padding:.5rem 1rem;background:#2563eb;color:#fff;border-radius:.3rem;\
         border:0;font:inherit;cursor:pointer;text-decoration:none}}label{{display:block}}</style></head><body>{body}<footer><p><small>Shared with Nimbus</small></p>\
         </footer></body></html>",
        title = escape(title),
    )
}

/// Headers of every link page: its own strict policy, no caching, no referrer (the URL holds
/// the token), not indexed.
fn page_headers(h: &mut HeaderMap) {
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(LINK_PAGE_CSP));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert("x-robots-tag", HeaderValue::from_static("noindex"));
}

fn html_response(title: &str, body: &str) -> Response {
    let mut resp = Body::from(render(title, body)).into_response();
    page_headers(resp.headers_mut());
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_every_special_character() {
        assert_eq!(escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }

    #[test]
    fn tokens_are_url_safe_and_bounded() {
        let uri = |s: &str| s.parse::<Uri>().expect("uri");
        assert_eq!(token_of(&uri("/s/abc_-9/download")), Some("abc_-9"));
        assert_eq!(token_of(&uri("/s/abc")), Some("abc"));
        assert_eq!(token_of(&uri("/s/a%2Fb")), None);
        assert_eq!(token_of(&uri(&format!("/s/{}", "a".repeat(65)))), None);
        assert_eq!(token_of(&uri("/s//x")), None);
    }

    #[test]
    fn the_password_comes_from_the_header_or_basic() {
        let mut h = HeaderMap::new();
        assert_eq!(supplied_password(&h), None);
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic eDpzM2NyZXQ6Ym9v"));
        assert_eq!(supplied_password(&h).as_deref(), Some("s3cret:boo"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer nmb_x"));
        assert_eq!(supplied_password(&h), None);
        h.insert(LINK_PASSWORD_HEADER, HeaderValue::from_static("hunter22"));
        assert_eq!(supplied_password(&h).as_deref(), Some("hunter22"));
    }
}
