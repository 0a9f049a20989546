//! [`Client`]: one typed method per endpoint of docs/API.md. Bodies are the wire types of
//! `nimbus_proto::wire`; paths are [`RemotePath`]s, percent-encoded per component.
//!
//! Content never passes through memory whole: [`Client::put_stream`] streams an `AsyncRead`
//! as the request body and [`Client::get_to`] streams the response into an `AsyncWrite`.
//! The block protocol (resumable, verified transfers) is in `upload.rs` and `download.rs`.

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use nimbus_proto::names::percent_encode;
use nimbus_proto::wire::{
    AuditList, ChangeList, CommitRequest, CreateUserRequest, CreatedUser, DirListing, Entry, LoginRequest,
    LoginResponse, Manifest, Me, MissingBlocksRequest, MissingBlocksResponse, MoveRequest, RestoreTrashRequest,
    RestoreVersionRequest, ServerInfo, TokenInfo, TokenList, TrashEntry, TrashList, UpdateUserRequest, UserInfo,
    UserList, VersionInfo, VersionList,
};
use nimbus_proto::{RemotePath, is_block_hash};
use reqwest::header::{self, HeaderMap};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::direct::{self, ACCEPT_REDIRECT_HEADER, DirectReads, read_block};
use crate::error::{Error, Result};

/// The most a block body may hold: blocks are 4 MiB by default, and no gateway makes them
/// anywhere near this large.
const MAX_BLOCK_BODY: u64 = 64 << 20;

/// A direct read from the object store that stalls this long is given up for the gateway
/// (which has its own store timeouts; reads from it wait as long as it takes).
const STORE_READ_IDLE: Duration = Duration::from_secs(30);

/// `POST /blocks/missing` takes at most this many hashes per request.
pub const MAX_MISSING_BATCH: usize = 10_000;

/// The most of an error body we read: error JSON is small; anything bigger is not ours.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// How a client reaches its gateway.
#[derive(Clone, Default)]
pub struct ClientOptions {
    /// `https://host:port`, optionally with a path prefix when behind a reverse proxy.
    /// A trailing `/` or `/api/v1` is tolerated.
    pub base_url: String,
    /// Bearer token from [`Client::login`].
    pub token: Option<String>,
    /// A PEM file with extra root certificates to trust (a self-signed gateway's certificate).
    pub ca_cert: Option<PathBuf>,
    /// Accept any server certificate. Only for tests and first contact with a gateway whose
    /// certificate you cannot get otherwise: it lets anyone in the path read your traffic.
    pub danger_accept_invalid_certs: bool,
    /// Sent as `User-Agent`; defaults to `nimbus-client/<version>`.
    pub user_agent: Option<String>,
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("ca_cert", &self.ca_cert)
            .field("danger_accept_invalid_certs", &self.danger_accept_invalid_certs)
            .field("user_agent", &self.user_agent)
            .finish()
    }
}

impl ClientOptions {
    pub fn new(base_url: impl Into<String>) -> Self {
        Self { base_url: base_url.into(), ..Self::default() }
    }

    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }
}

/// Condition of a plain `PUT /files/{path}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PutCondition {
    /// Create or replace, whatever is there.
    #[default]
    Any,
    /// `If-Match: "<version>"`: only if the file is still at this version (else 412).
    IfVersion(i64),
    /// `If-None-Match: *`: only if nothing is there yet (else 412).
    CreateOnly,
}

/// A single byte range for [`Client::get_to`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// From this offset to the end: `bytes=N-`.
    From(u64),
    /// `start..=end`: `bytes=start-end`.
    Inclusive { start: u64, end: u64 },
    /// The last N bytes: `bytes=-N`.
    Last(u64),
}

impl ByteRange {
    pub fn header_value(&self) -> String {
        match *self {
            ByteRange::From(start) => format!("bytes={start}-"),
            ByteRange::Inclusive { start, end } => format!("bytes={start}-{end}"),
            ByteRange::Last(n) => format!("bytes=-{n}"),
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct GetOptions {
    pub range: Option<ByteRange>,
    /// Read this older version instead of the current one (`?version=ID`).
    pub version: Option<i64>,
}

/// What [`Client::get_to`] received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetInfo {
    /// 206: only the requested range was sent. `false` with a range asked means the server
    /// sent the whole content.
    pub partial: bool,
    /// Bytes written to the output.
    pub bytes: u64,
    /// The version that was read (from the `ETag`).
    pub version: Option<i64>,
    /// Size of the whole file when the server said (`Content-Range` or `Content-Length`).
    pub total_size: Option<u64>,
}

/// Filters of `GET /admin/audit`.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    pub user: Option<String>,
    pub action: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

/// A typed client of one gateway. Cheap to clone (connections are shared).
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    /// Block reads: redirects are not followed (a `307` to the object store is taken apart
    /// in [`Client::get_block_checked`]).
    blocks: reqwest::Client,
    pub(crate) direct: std::sync::Arc<DirectReads>,
    base: String,
    token: Option<String>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("base", &self.base).field("logged_in", &self.token.is_some()).finish()
    }
}

/// Normalises a base URL: `http(s)://host[:port][/prefix]`, without a trailing `/` or `/api/v1`.
pub fn normalize_base_url(raw: &str) -> Result<String> {
    let raw = raw.trim();
    let url = reqwest::Url::parse(raw).map_err(|e| {
        Error::Invalid(format!(
            "`{raw}` is not a valid URL ({e}); give the gateway's address, e.g. https://nimbus.example.com:8443"
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::Invalid(format!("`{raw}` is not an http:// or https:// URL")));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(Error::Invalid(format!("`{raw}` has no host name")));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Error::Invalid(format!("`{raw}` must not have a query string or fragment")));
    }
    let mut s = url.as_str().trim_end_matches('/').to_string();
    if let Some(stripped) = s.strip_suffix("/api/v1") {
        s = stripped.to_string();
    }
    Ok(s)
}

impl Client {
    pub fn new(opts: ClientOptions) -> Result<Self> {
        let base = normalize_base_url(&opts.base_url)?;
        let http = Self::builder(&opts)?.build();
        let blocks = Self::builder(&opts)?.redirect(reqwest::redirect::Policy::none()).build();
        let built = |r: reqwest::Result<reqwest::Client>| {
            r.map_err(|e| Error::Invalid(format!("cannot set up the HTTP client: {e}")))
        };
        Ok(Self { http: built(http)?, blocks: built(blocks)?, direct: Default::default(), base, token: opts.token })
    }

    fn builder(opts: &ClientOptions) -> Result<reqwest::ClientBuilder> {
        let ua = opts.user_agent.clone().unwrap_or_else(|| format!("nimbus-client/{}", env!("CARGO_PKG_VERSION")));
        let mut builder = reqwest::Client::builder()
            .user_agent(ua)
            .connect_timeout(Duration::from_secs(30))
            .tcp_keepalive(Duration::from_secs(60));
        if let Some(path) = &opts.ca_cert {
            let pem = std::fs::read(path)
                .map_err(|e| Error::io(format!("cannot read CA certificate `{}`", path.display()), e))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| Error::Invalid(format!("`{}` is not a PEM certificate file: {e}", path.display())))?;
            if certs.is_empty() {
                return Err(Error::Invalid(format!("`{}` contains no PEM certificate", path.display())));
            }
            builder = builder.tls_certs_merge(certs);
        }
        if opts.danger_accept_invalid_certs {
            builder = builder.tls_danger_accept_invalid_certs(true);
        }
        Ok(builder)
    }

    /// The normalised base URL (no trailing `/`).
    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    pub fn set_token(&mut self, token: Option<String>) {
        self.token = token;
    }

    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    // ---- plumbing ----

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let rb = self.http.request(method, self.url(path));
        match &self.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    /// Sends and turns any non-2xx answer into [`Error::Api`].
    async fn send(&self, rb: RequestBuilder) -> Result<Response> {
        let resp = rb.send().await?;
        if resp.status().is_success() { Ok(resp) } else { Err(api_error(resp).await) }
    }

    async fn json<T: DeserializeOwned>(&self, rb: RequestBuilder) -> Result<T> {
        let resp = self.send(rb).await?;
        Ok(resp.json::<T>().await?)
    }

    async fn empty(&self, rb: RequestBuilder) -> Result<()> {
        self.send(rb).await?;
        Ok(())
    }

    // ---- service and auth ----

    /// `GET /api/v1/info` (no auth): server version and block size.
    pub async fn info(&self) -> Result<ServerInfo> {
        self.json(self.http.get(self.url("/api/v1/info"))).await
    }

    /// `POST /auth/login`. Does not keep the token: use [`Client::with_token`].
    pub async fn login(&self, username: &str, password: &str, device: Option<&str>) -> Result<LoginResponse> {
        self.login_with_totp(username, password, device, None).await
    }

    /// [`Client::login`] with the second factor (the authenticator's code or a recovery code)
    /// of an account with two-factor sign-in, which without it answers 401 `totp_required`.
    pub async fn login_with_totp(
        &self,
        username: &str,
        password: &str,
        device: Option<&str>,
        totp: Option<&str>,
    ) -> Result<LoginResponse> {
        let body = LoginRequest {
            username: username.into(),
            password: password.into(),
            device: device.map(Into::into),
            totp: totp.map(Into::into),
        };
        self.json(self.http.post(self.url("/api/v1/auth/login")).json(&body)).await
    }

    /// `GET /auth/methods` (no auth): whether the gateway offers single sign-on.
    pub async fn auth_methods(&self) -> Result<nimbus_proto::wire::AuthMethods> {
        self.json(self.http.get(self.url("/api/v1/auth/methods"))).await
    }

    /// `POST /auth/oidc/token`: trades a single sign-on one-time code (see [`crate::sso`]).
    pub async fn oidc_token(&self, code: &str, code_verifier: &str) -> Result<LoginResponse> {
        let body = nimbus_proto::wire::OidcTokenRequest { code: code.into(), code_verifier: code_verifier.into() };
        self.json(self.http.post(self.url("/api/v1/auth/oidc/token")).json(&body)).await
    }

    /// `POST /auth/logout`: revokes the token this client uses.
    pub async fn logout(&self) -> Result<()> {
        self.empty(self.request(Method::POST, "/api/v1/auth/logout")).await
    }

    /// `GET /auth/tokens`: the caller's tokens (devices).
    pub async fn tokens(&self) -> Result<Vec<TokenInfo>> {
        let list: TokenList = self.json(self.request(Method::GET, "/api/v1/auth/tokens")).await?;
        Ok(list.tokens)
    }

    /// `DELETE /auth/tokens/{id}`.
    pub async fn revoke_token(&self, id: i64) -> Result<()> {
        self.empty(self.request(Method::DELETE, &format!("/api/v1/auth/tokens/{id}"))).await
    }

    /// `POST /keys`: a new S3 access key (the secret is in this answer only).
    pub async fn create_s3_key(&self, name: Option<&str>) -> Result<nimbus_proto::wire::CreatedS3Key> {
        let body = nimbus_proto::wire::CreateS3KeyRequest { name: name.map(Into::into) };
        self.json(self.request(Method::POST, "/api/v1/keys").json(&body)).await
    }

    /// `GET /keys`: the caller's live S3 access keys.
    pub async fn s3_keys(&self) -> Result<Vec<nimbus_proto::wire::S3KeyInfo>> {
        let list: nimbus_proto::wire::S3KeyList = self.json(self.request(Method::GET, "/api/v1/keys")).await?;
        Ok(list.keys)
    }

    /// `DELETE /keys/{id}`.
    pub async fn revoke_s3_key(&self, id: i64) -> Result<()> {
        self.empty(self.request(Method::DELETE, &format!("/api/v1/keys/{id}"))).await
    }

    // ---- shares and public links ----

    /// `POST /shares`: shares a file or folder of your space with another user.
    pub async fn create_share(
        &self,
        req: &nimbus_proto::wire::CreateShareRequest,
    ) -> Result<nimbus_proto::wire::ShareInfo> {
        self.json(self.request(Method::POST, "/api/v1/shares").json(req)).await
    }

    /// `GET /shares`: the shares you gave, newest first.
    pub async fn shares(&self) -> Result<Vec<nimbus_proto::wire::ShareInfo>> {
        let list: nimbus_proto::wire::ShareList = self.json(self.request(Method::GET, "/api/v1/shares")).await?;
        Ok(list.shares)
    }

    /// `GET /shares/incoming`: the shares given to you (under `/Shared with me`).
    pub async fn incoming_shares(&self) -> Result<Vec<nimbus_proto::wire::IncomingShareInfo>> {
        let list: nimbus_proto::wire::IncomingShareList =
            self.json(self.request(Method::GET, "/api/v1/shares/incoming")).await?;
        Ok(list.shares)
    }

    /// `PATCH /shares/{id}`: a share's new permission (its owner only).
    pub async fn update_share(
        &self,
        id: i64,
        permission: nimbus_proto::wire::SharePermission,
    ) -> Result<nimbus_proto::wire::ShareInfo> {
        let body = nimbus_proto::wire::UpdateShareRequest { permission };
        self.json(self.request(Method::PATCH, &format!("/api/v1/shares/{id}")).json(&body)).await
    }

    /// `DELETE /shares/{id}`: the owner revokes a share, or its recipient leaves it.
    pub async fn delete_share(&self, id: i64) -> Result<()> {
        self.empty(self.request(Method::DELETE, &format!("/api/v1/shares/{id}"))).await
    }

    /// `POST /links`: a public link to a file or folder of your space.
    pub async fn create_link(
        &self,
        req: &nimbus_proto::wire::CreateLinkRequest,
    ) -> Result<nimbus_proto::wire::LinkInfo> {
        self.json(self.request(Method::POST, "/api/v1/links").json(req)).await
    }

    /// `GET /links`: your links, oldest first.
    pub async fn links(&self) -> Result<Vec<nimbus_proto::wire::LinkInfo>> {
        let list: nimbus_proto::wire::LinkList = self.json(self.request(Method::GET, "/api/v1/links")).await?;
        Ok(list.links)
    }

    /// `PATCH /links/{id}`: changes a link (absent fields stay, `Some(None)` removes).
    pub async fn update_link(
        &self,
        id: i64,
        req: &nimbus_proto::wire::UpdateLinkRequest,
    ) -> Result<nimbus_proto::wire::LinkInfo> {
        self.json(self.request(Method::PATCH, &format!("/api/v1/links/{id}")).json(req)).await
    }

    /// `DELETE /links/{id}`: revokes a link at once.
    pub async fn delete_link(&self, id: i64) -> Result<()> {
        self.empty(self.request(Method::DELETE, &format!("/api/v1/links/{id}"))).await
    }

    /// `GET /me`.
    pub async fn me(&self) -> Result<Me> {
        self.json(self.request(Method::GET, "/api/v1/me")).await
    }

    // ---- files and directories ----

    /// `GET /stat/{path}`: the entry of a file or directory (the root too).
    pub async fn stat(&self, path: &RemotePath) -> Result<Entry> {
        self.json(self.request(Method::GET, &format!("/api/v1/stat/{}", path.url_encoded()))).await
    }

    /// `GET /dirs/{path}`: one page of a listing. `limit` 1–1000 (server default 1000).
    pub async fn list_dir_page(
        &self,
        path: &RemotePath,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> Result<DirListing> {
        let q = query(&[("limit", limit.map(|l| l.to_string())), ("cursor", cursor.map(Into::into))]);
        self.json(self.request(Method::GET, &format!("/api/v1/dirs/{}{q}", path.url_encoded()))).await
    }

    /// The whole listing of a directory, following `next_cursor`.
    pub async fn list_dir(&self, path: &RemotePath) -> Result<Vec<Entry>> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.list_dir_page(path, cursor.as_deref(), None).await?;
            all.extend(page.entries);
            match next_cursor(cursor.as_deref(), page.next_cursor)? {
                Some(c) => cursor = Some(c),
                None => return Ok(all),
            }
        }
    }

    /// `POST /dirs/{path}`: creates the directory and its parents; fine if it exists.
    pub async fn mkdir(&self, path: &RemotePath) -> Result<Entry> {
        self.json(self.request(Method::POST, &format!("/api/v1/dirs/{}", path.url_encoded()))).await
    }

    /// `PUT /files/{path}` streaming `body` (never held in memory whole). Give
    /// `content_length` when known: the server can then check quota before reading.
    pub async fn put_stream<R>(
        &self,
        path: &RemotePath,
        body: R,
        content_length: Option<u64>,
        condition: PutCondition,
    ) -> Result<Entry>
    where
        R: AsyncRead + Send + 'static,
    {
        if path.is_root() {
            return Err(Error::Invalid("give a file path to upload to, not `/`".into()));
        }
        let stream = tokio_util::io::ReaderStream::with_capacity(body, 256 * 1024);
        let mut rb = self
            .request(Method::PUT, &format!("/api/v1/files/{}", path.url_encoded()))
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .body(reqwest::Body::wrap_stream(stream));
        if let Some(len) = content_length {
            rb = rb.header(header::CONTENT_LENGTH, len);
        }
        rb = match condition {
            PutCondition::Any => rb,
            PutCondition::IfVersion(v) => rb.header(header::IF_MATCH, format!("\"{v}\"")),
            PutCondition::CreateOnly => rb.header(header::IF_NONE_MATCH, "*"),
        };
        self.json(rb).await
    }

    /// [`Client::put_stream`] of a local file.
    pub async fn put_file(&self, local: &Path, remote: &RemotePath, condition: PutCondition) -> Result<Entry> {
        let (file, meta) = crate::upload::open_regular(local)?;
        self.put_stream(remote, tokio::fs::File::from_std(file), Some(meta.len()), condition).await
    }

    /// `GET /files/{path}` streamed into `out` (flushed at the end).
    pub async fn get_to<W>(&self, path: &RemotePath, out: &mut W, opts: GetOptions) -> Result<GetInfo>
    where
        W: AsyncWrite + Unpin + ?Sized,
    {
        let q = query(&[("version", opts.version.map(|v| v.to_string()))]);
        let mut rb = self.request(Method::GET, &format!("/api/v1/files/{}{q}", path.url_encoded()));
        if let Some(r) = opts.range {
            rb = rb.header(header::RANGE, r.header_value());
        }
        let resp = self.send(rb).await?;
        let partial = resp.status() == StatusCode::PARTIAL_CONTENT;
        let headers = resp.headers();
        let version = etag_version(headers);
        let content_length = header_u64(headers, header::CONTENT_LENGTH);
        let total_size = if partial { content_range_total(headers) } else { content_length };
        let mut stream = resp.bytes_stream();
        let mut bytes = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            out.write_all(&chunk).await.map_err(|e| Error::io("cannot write the downloaded content", e))?;
            bytes += chunk.len() as u64;
        }
        out.flush().await.map_err(|e| Error::io("cannot write the downloaded content", e))?;
        if let Some(expected) = content_length
            && expected != bytes
        {
            return Err(Error::Protocol(format!("the server announced {expected} bytes but sent {bytes}")));
        }
        Ok(GetInfo { partial, bytes, version, total_size })
    }

    /// `GET /files/{path}` (a range of it when given) into memory; `cache_bypass` sends
    /// `X-Nimbus-Cache: bypass` (administrators only, 403 otherwise). For `nimbus bench`,
    /// which needs small reads with and without the gateway's cache.
    pub async fn get_bytes(&self, path: &RemotePath, range: Option<ByteRange>, cache_bypass: bool) -> Result<Bytes> {
        let mut rb = self.request(Method::GET, &format!("/api/v1/files/{}", path.url_encoded()));
        if let Some(r) = range {
            rb = rb.header(header::RANGE, r.header_value());
        }
        if cache_bypass {
            rb = rb.header("x-nimbus-cache", "bypass");
        }
        Ok(self.send(rb).await?.bytes().await?)
    }

    /// `GET /metrics` (Prometheus text), outside `/api/v1`.
    pub async fn metrics_text(&self) -> Result<String> {
        Ok(self.send(self.request(Method::GET, "/metrics")).await?.text().await?)
    }

    /// `DELETE /files/{path}`: a file or a directory with its contents, to the trash.
    pub async fn delete(&self, path: &RemotePath) -> Result<()> {
        self.empty(self.request(Method::DELETE, &format!("/api/v1/files/{}", path.url_encoded()))).await
    }

    /// `POST /move`. `to` is the full target path (an existing directory is an error).
    pub async fn move_entry(&self, from: &RemotePath, to: &RemotePath, overwrite: bool) -> Result<Entry> {
        let body = MoveRequest { from: from.to_string(), to: to.to_string(), overwrite };
        self.json(self.request(Method::POST, "/api/v1/move").json(&body)).await
    }

    /// `POST /copy` (blocks are shared, no content is copied).
    pub async fn copy_entry(&self, from: &RemotePath, to: &RemotePath, overwrite: bool) -> Result<Entry> {
        let body = MoveRequest { from: from.to_string(), to: to.to_string(), overwrite };
        self.json(self.request(Method::POST, "/api/v1/copy").json(&body)).await
    }

    // ---- blocks and manifests ----

    /// `POST /blocks/missing`: which of `hashes` this space does not hold, in the asked order.
    /// Any number of hashes: they are asked in batches of [`MAX_MISSING_BATCH`].
    pub async fn missing_blocks(&self, hashes: &[String]) -> Result<Vec<String>> {
        let mut missing = Vec::new();
        for batch in hashes.chunks(MAX_MISSING_BATCH) {
            let body = MissingBlocksRequest { hashes: batch.to_vec() };
            let resp: MissingBlocksResponse =
                self.json(self.request(Method::POST, "/api/v1/blocks/missing").json(&body)).await?;
            missing.extend(resp.missing);
        }
        Ok(missing)
    }

    /// `PUT /blocks/{hash}`. Returns `true` if the block was new (201), `false` if the space
    /// held it already (200).
    pub async fn put_block(&self, hash: &str, data: Bytes) -> Result<bool> {
        self.put_block_for(hash, data, None).await
    }

    /// `PUT /blocks/{hash}?path=`: a block of the file `path` (as the caller sees it). Inside a
    /// share (`/Shared with me/...`) the block goes to the owner's space; there the answer
    /// is always "new" (the gateway does not tell what the owner holds).
    pub async fn put_block_for(&self, hash: &str, data: Bytes, path: Option<&RemotePath>) -> Result<bool> {
        check_hash(hash)?;
        let q = query(&[("path", path.map(|p| p.to_string()))]);
        let rb = self
            .request(Method::PUT, &format!("/api/v1/blocks/{hash}{q}"))
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .body(data);
        let resp = self.send(rb).await?;
        Ok(resp.status() == StatusCode::CREATED)
    }

    /// `GET /blocks/{hash}`: the block's bytes, unverified (see `download.rs` for verified reads).
    pub async fn get_block(&self, hash: &str) -> Result<Bytes> {
        self.get_block_for(hash, None).await
    }

    /// `GET /blocks/{hash}?path=`: a block of the file `path` (as the caller sees it); inside a
    /// share the gateway reads it from the owner's space if that file is made of it.
    pub async fn get_block_for(&self, hash: &str, path: Option<&RemotePath>) -> Result<Bytes> {
        check_hash(hash)?;
        let q = query(&[("path", path.map(|p| p.to_string()))]);
        let resp = self.send(self.block_request(&format!("/api/v1/blocks/{hash}{q}"))).await?;
        read_block(resp, MAX_BLOCK_BODY, None).await
    }

    /// [`Client::get_block_for`], for a caller that checks the block against its hash itself
    /// (the drive, `download.rs`): a gateway with `--s3-direct-reads` may send it to read the
    /// block straight from the object store. Should that fail, the block is read through the
    /// gateway, and so are the next ones for a while (see [`crate::direct`]).
    pub async fn get_block_checked(&self, hash: &str, path: Option<&RemotePath>) -> Result<Bytes> {
        check_hash(hash)?;
        let q = query(&[("path", path.map(|p| p.to_string()))]);
        let url = format!("/api/v1/blocks/{hash}{q}");
        if self.direct.on() {
            // Sent as is: a 307 is the answer asked for, not an error.
            let resp = self.block_request(&url).header(ACCEPT_REDIRECT_HEADER, "1").send().await?;
            if resp.status() != StatusCode::TEMPORARY_REDIRECT {
                if !resp.status().is_success() {
                    return Err(api_error(resp).await);
                }
                return read_block(resp, MAX_BLOCK_BODY, None).await;
            }
            let target = direct::redirect_target(&resp);
            let store = target.as_ref().and_then(|t| t.host_str()).unwrap_or_default().to_string();
            let fetched = match target {
                Some(target) => direct::fetch(&self.blocks, target, MAX_BLOCK_BODY, STORE_READ_IDLE).await,
                None => Err(Error::Protocol("a redirect without a usable http(s) Location".into())),
            };
            match fetched {
                Ok(data) => return Ok(data),
                Err(e) => {
                    self.direct.pause();
                    tracing::warn!(
                        block = hash,
                        store = %store,
                        error = %e,
                        "cannot read blocks straight from the object store; reading them through the gateway for the next {} minutes",
                        direct::PAUSE.as_secs() / 60
                    );
                }
            }
        }
        self.get_block_for(hash, path).await
    }

    fn block_request(&self, path: &str) -> RequestBuilder {
        let rb = self.blocks.get(self.url(path));
        match &self.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    /// `POST /manifests/{path}`: makes the block list the file's new version. A stale
    /// `base_version` fails with 409 `conflict`, blocks not held with 400 `missing_blocks`.
    pub async fn commit_manifest(&self, path: &RemotePath, commit: &CommitRequest) -> Result<Entry> {
        self.json(self.request(Method::POST, &format!("/api/v1/manifests/{}", path.url_encoded())).json(commit)).await
    }

    /// `GET /manifests/{path}`, of the current version or of `version`.
    pub async fn get_manifest(&self, path: &RemotePath, version: Option<i64>) -> Result<Manifest> {
        let q = query(&[("version", version.map(|v| v.to_string()))]);
        self.json(self.request(Method::GET, &format!("/api/v1/manifests/{}{q}", path.url_encoded()))).await
    }

    // ---- versions and trash ----

    /// `GET /versions/{path}`, newest first.
    pub async fn versions(&self, path: &RemotePath) -> Result<Vec<VersionInfo>> {
        let list: VersionList =
            self.json(self.request(Method::GET, &format!("/api/v1/versions/{}", path.url_encoded()))).await?;
        Ok(list.versions)
    }

    /// `POST /versions/{path}`: makes `version`'s content current again, as a new version.
    pub async fn restore_version(&self, path: &RemotePath, version: i64) -> Result<Entry> {
        let body = RestoreVersionRequest { version };
        self.json(self.request(Method::POST, &format!("/api/v1/versions/{}", path.url_encoded())).json(&body)).await
    }

    /// `GET /trash`: one page.
    pub async fn trash_page(&self, cursor: Option<&str>, limit: Option<u32>) -> Result<TrashList> {
        let q = query(&[("limit", limit.map(|l| l.to_string())), ("cursor", cursor.map(Into::into))]);
        self.json(self.request(Method::GET, &format!("/api/v1/trash{q}"))).await
    }

    /// The whole trash, following `next_cursor`.
    pub async fn trash(&self) -> Result<Vec<TrashEntry>> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.trash_page(cursor.as_deref(), None).await?;
            all.extend(page.entries);
            match next_cursor(cursor.as_deref(), page.next_cursor)? {
                Some(c) => cursor = Some(c),
                None => return Ok(all),
            }
        }
    }

    /// `POST /trash/{id}/restore`, to its original path or to `to` (409 if the path is taken).
    pub async fn restore_trash(&self, id: i64, to: Option<&RemotePath>) -> Result<Entry> {
        let body = RestoreTrashRequest { to: to.map(ToString::to_string) };
        self.json(self.request(Method::POST, &format!("/api/v1/trash/{id}/restore")).json(&body)).await
    }

    /// `DELETE /trash/{id}`: purges one item for good.
    pub async fn purge_trash(&self, id: i64) -> Result<()> {
        self.empty(self.request(Method::DELETE, &format!("/api/v1/trash/{id}"))).await
    }

    /// `DELETE /trash`: empties the trash for good.
    pub async fn empty_trash(&self) -> Result<()> {
        self.empty(self.request(Method::DELETE, "/api/v1/trash")).await
    }

    // ---- change feed ----

    /// `GET /changes`: namespace changes of the caller's space after `cursor`, oldest first,
    /// at most `limit` (server default 1000). Without a cursor: none, and the cursor to start
    /// from now. `wait_secs` (0–60) long-polls while nothing follows the cursor. On
    /// `reset: true` drop every cached listing and continue from the returned cursor.
    pub async fn changes(&self, cursor: Option<&str>, wait_secs: u32, limit: Option<u32>) -> Result<ChangeList> {
        let q = query(&[
            ("cursor", cursor.map(Into::into)),
            ("wait", Some(wait_secs.to_string())),
            ("limit", limit.map(|l| l.to_string())),
        ]);
        // The server holds the request up to `wait_secs`: allow that plus time to answer.
        let timeout = Duration::from_secs(u64::from(wait_secs) + 30);
        self.json(self.request(Method::GET, &format!("/api/v1/changes{q}")).timeout(timeout)).await
    }

    // ---- admin ----

    /// `POST /admin/users`. Without a password the server generates one and returns it once.
    pub async fn create_user(&self, req: &CreateUserRequest) -> Result<CreatedUser> {
        self.json(self.request(Method::POST, "/api/v1/admin/users").json(req)).await
    }

    /// `GET /admin/users`: one page, optionally filtered by `q`.
    pub async fn list_users_page(&self, q: Option<&str>, limit: Option<u32>, cursor: Option<&str>) -> Result<UserList> {
        let qs = query(&[
            ("q", q.map(Into::into)),
            ("limit", limit.map(|l| l.to_string())),
            ("cursor", cursor.map(Into::into)),
        ]);
        self.json(self.request(Method::GET, &format!("/api/v1/admin/users{qs}"))).await
    }

    /// All users (matching `q`), following `next_cursor`.
    pub async fn list_users(&self, q: Option<&str>) -> Result<Vec<UserInfo>> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.list_users_page(q, Some(1000), cursor.as_deref()).await?;
            all.extend(page.users);
            match next_cursor(cursor.as_deref(), page.next_cursor)? {
                Some(c) => cursor = Some(c),
                None => return Ok(all),
            }
        }
    }

    /// `GET /admin/users/{id}`.
    pub async fn get_user(&self, id: i64) -> Result<UserInfo> {
        self.json(self.request(Method::GET, &format!("/api/v1/admin/users/{id}"))).await
    }

    /// `PATCH /admin/users/{id}`. Disabling or setting a password revokes the user's tokens.
    pub async fn update_user(&self, id: i64, update: &UpdateUserRequest) -> Result<UserInfo> {
        self.json(self.request(Method::PATCH, &format!("/api/v1/admin/users/{id}")).json(update)).await
    }

    /// `DELETE /admin/users/{id}`: the user, their tokens, their space and its blocks.
    pub async fn delete_user(&self, id: i64) -> Result<()> {
        self.empty(self.request(Method::DELETE, &format!("/api/v1/admin/users/{id}"))).await
    }

    /// `GET /admin/groups`: every group with its members, by name.
    pub async fn list_groups(&self) -> Result<Vec<nimbus_proto::wire::GroupInfo>> {
        let list: nimbus_proto::wire::GroupList = self.json(self.request(Method::GET, "/api/v1/admin/groups")).await?;
        Ok(list.groups)
    }

    /// `POST /admin/groups`.
    pub async fn create_group(&self, name: &str) -> Result<nimbus_proto::wire::GroupInfo> {
        let body = nimbus_proto::wire::GroupRequest { name: name.into() };
        self.json(self.request(Method::POST, "/api/v1/admin/groups").json(&body)).await
    }

    /// `PATCH /admin/groups/{id}`: a new name.
    pub async fn rename_group(&self, id: i64, name: &str) -> Result<nimbus_proto::wire::GroupInfo> {
        let body = nimbus_proto::wire::GroupRequest { name: name.into() };
        self.json(self.request(Method::PATCH, &format!("/api/v1/admin/groups/{id}")).json(&body)).await
    }

    /// `DELETE /admin/groups/{id}`: the group's shares end for every member.
    pub async fn delete_group(&self, id: i64) -> Result<()> {
        self.empty(self.request(Method::DELETE, &format!("/api/v1/admin/groups/{id}"))).await
    }

    /// `POST /admin/groups/{id}/members`.
    pub async fn add_group_member(&self, id: i64, username: &str) -> Result<nimbus_proto::wire::GroupInfo> {
        let body = nimbus_proto::wire::GroupMemberRequest { username: username.into() };
        self.json(self.request(Method::POST, &format!("/api/v1/admin/groups/{id}/members")).json(&body)).await
    }

    /// `DELETE /admin/groups/{id}/members/{username}`.
    pub async fn remove_group_member(&self, id: i64, username: &str) -> Result<()> {
        let url = format!("/api/v1/admin/groups/{id}/members/{}", percent_encode(username));
        self.empty(self.request(Method::DELETE, &url)).await
    }

    /// `GET /admin/audit`: one page, newest first.
    pub async fn audit(&self, filter: &AuditQuery) -> Result<AuditList> {
        let q = query(&[
            ("user", filter.user.clone()),
            ("action", filter.action.clone()),
            ("limit", filter.limit.map(|l| l.to_string())),
            ("cursor", filter.cursor.clone()),
        ]);
        self.json(self.request(Method::GET, &format!("/api/v1/admin/audit{q}"))).await
    }
}

/// Runs `op` again while it fails with a transient error (no answer, 429, 502–504), at most
/// `RETRIES` more times, waiting `Retry-After` or an exponential backoff. Only for idempotent
/// requests (block reads and writes).
pub(crate) async fn with_retry<T, F, Fut>(mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    const RETRIES: u32 = 4;
    let mut attempt = 0;
    loop {
        match op().await {
            Err(e) if e.is_transient() && attempt < RETRIES => {
                let backoff = Duration::from_millis(500 << attempt);
                let wait = e.retry_after().unwrap_or(backoff).min(Duration::from_secs(30));
                tracing::debug!(error = %e, ?wait, attempt, "transient failure, retrying");
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

fn check_hash(hash: &str) -> Result<()> {
    if is_block_hash(hash) {
        Ok(())
    } else {
        Err(Error::Invalid(format!("`{hash}` is not a block hash (64 lowercase hex digits)")))
    }
}

/// `?a=1&b=2` of the pairs that have a value; empty if none.
fn query(pairs: &[(&str, Option<String>)]) -> String {
    let parts: Vec<String> =
        pairs.iter().filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", percent_encode(v)))).collect();
    if parts.is_empty() { String::new() } else { format!("?{}", parts.join("&")) }
}

/// The cursor of the next page; an error if the server hands back the same cursor (a loop).
fn next_cursor(current: Option<&str>, next: Option<String>) -> Result<Option<String>> {
    match next {
        Some(n) if n.is_empty() => Ok(None),
        Some(n) if Some(n.as_str()) == current => {
            Err(Error::Protocol("the server returned the same page cursor twice".into()))
        }
        other => Ok(other),
    }
}

fn header_u64(headers: &HeaderMap, name: header::HeaderName) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// The version id in an `ETag: "17"` (weak tags too).
fn etag_version(headers: &HeaderMap) -> Option<i64> {
    let raw = headers.get(header::ETAG)?.to_str().ok()?.trim();
    raw.strip_prefix("W/").unwrap_or(raw).trim_matches('"').parse().ok()
}

/// The total size in `Content-Range: bytes 0-99/1234`.
fn content_range_total(headers: &HeaderMap) -> Option<u64> {
    let raw = headers.get(header::CONTENT_RANGE)?.to_str().ok()?;
    raw.rsplit('/').next()?.trim().parse().ok()
}

/// `nimbus_proto::wire::ErrorBody` with the code as text: a code this build does not know (from
/// a newer gateway) is still the server's error, not an unreadable answer.
#[derive(serde::Deserialize)]
struct RawErrorBody {
    error: RawErrorDetail,
}

#[derive(serde::Deserialize)]
struct RawErrorDetail {
    code: String,
    message: String,
}

/// Turns an error answer into [`Error::Api`], reading at most [`ERROR_BODY_LIMIT`] bytes.
async fn api_error(mut resp: Response) -> Error {
    let status = resp.status();
    let retry_after = header_u64(resp.headers(), header::RETRY_AFTER).map(Duration::from_secs);
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_LIMIT {
        match resp.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    match serde_json::from_slice::<RawErrorBody>(&body) {
        Ok(b) => Error::Api { status: status.as_u16(), code: b.error.code, message: b.error.message, retry_after },
        Err(_) => {
            let reason = status.canonical_reason().unwrap_or("error");
            let text = String::from_utf8_lossy(&body);
            let text: String = text.trim().chars().take(200).collect();
            let message = if text.is_empty() || text.starts_with('<') {
                format!("the server answered {} {reason}", status.as_u16())
            } else {
                format!("the server answered {} {reason}: {text}", status.as_u16())
            };
            Error::Api { status: status.as_u16(), code: format!("http_{}", status.as_u16()), message, retry_after }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_normalised() {
        let ok = |s: &str| normalize_base_url(s).unwrap_or_else(|e| e.to_string());
        assert_eq!(ok("https://h:8443"), "https://h:8443");
        assert_eq!(ok("https://h:8443/"), "https://h:8443");
        assert_eq!(ok("https://h/api/v1/"), "https://h");
        assert_eq!(ok("http://h/nimbus/"), "http://h/nimbus");
        assert!(normalize_base_url("h:8443").is_err());
        assert!(normalize_base_url("ftp://h").is_err());
        assert!(normalize_base_url("https://h/?x=1").is_err());
    }

    #[test]
    fn query_strings_encode_values() {
        assert_eq!(query(&[("a", None)]), "");
        assert_eq!(query(&[("q", Some("a b&c".into())), ("limit", Some("5".into()))]), "?q=a%20b%26c&limit=5");
    }

    #[test]
    fn ranges_render_as_http() {
        assert_eq!(ByteRange::From(5).header_value(), "bytes=5-");
        assert_eq!(ByteRange::Inclusive { start: 0, end: 9 }.header_value(), "bytes=0-9");
        assert_eq!(ByteRange::Last(3).header_value(), "bytes=-3");
    }

    #[test]
    fn cursor_loops_are_caught() {
        assert!(next_cursor(Some("a"), Some("a".into())).is_err());
        assert_eq!(next_cursor(Some("a"), Some("b".into())).ok().flatten().as_deref(), Some("b"));
        assert_eq!(next_cursor(None, None).ok().flatten(), None);
    }

    #[test]
    fn etags_and_content_ranges_parse() {
        let mut h = HeaderMap::new();
        h.insert(header::ETAG, header::HeaderValue::from_static("\"17\""));
        h.insert(header::CONTENT_RANGE, header::HeaderValue::from_static("bytes 0-9/1234"));
        assert_eq!(etag_version(&h), Some(17));
        assert_eq!(content_range_total(&h), Some(1234));
    }

    #[tokio::test]
    async fn changes_asks_the_feed_and_outlasts_the_wait() -> std::result::Result<(), Box<dyn std::error::Error>> {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await?;
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = sock.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            // A long poll answers when the wait is over, or a little after it.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let body = r#"{"changes":[{"seq":5,"op":"move","path":"/b","from":"/a","kind":"dir","node_id":9,"at":"2026-01-01T00:00:00Z"}],"cursor":"5","reset":false}"#;
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(resp.as_bytes()).await?;
            std::io::Result::Ok(String::from_utf8_lossy(&head).into_owned())
        });
        let client = Client::new(ClientOptions::new(format!("http://{addr}")).token("t"))?;
        let list = client.changes(Some("4"), 1, Some(10)).await?;
        let head = server.await??;
        assert!(head.starts_with("GET /api/v1/changes?cursor=4&wait=1&limit=10 HTTP/1.1\r\n"), "{head}");
        assert!(head.to_ascii_lowercase().contains("authorization: bearer t"), "{head}");
        assert_eq!(list.cursor, "5");
        assert_eq!(list.changes[0].from.as_deref(), Some("/a"));
        assert_eq!(list.changes[0].op, nimbus_proto::wire::ChangeOp::Move);
        Ok(())
    }
}
