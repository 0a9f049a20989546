//! HTTP helpers: [`Api`], a thin reqwest wrapper whose responses ([`Resp`]) remember the request
//! that produced them (so a failed assertion says what was sent), and [`raw_request`], which
//! sends a request target byte for byte (reqwest's URL parser would resolve `%2e%2e` and `\`
//! before they reach the server; traversal tests need them to arrive as written).

use std::fmt;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use futures::StreamExt;
use nimbus_proto::wire::{Entry, ErrorDetail};
use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A path inside a space as it goes into a URL: each component percent-encoded, no leading `/`.
pub fn encode_path(path: &str) -> String {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    if trimmed.is_empty() {
        return String::new();
    }
    trimmed.split('/').map(nimbus_proto::names::percent_encode).collect::<Vec<_>>().join("/")
}

/// `/api/v1/files/<encoded path>`.
pub fn files_url(path: &str) -> String {
    format!("/api/v1/files/{}", encode_path(path))
}

/// `?k=v&...` with keys and values percent-encoded; empty for no pairs.
pub fn query_string(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let enc = nimbus_proto::names::percent_encode;
    let parts: Vec<String> = pairs.iter().map(|(k, v)| format!("{}={}", enc(k), enc(v))).collect();
    format!("?{}", parts.join("&"))
}

/// A client for one gateway, optionally signed in.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Api {
    /// `base` is `http://127.0.0.1:PORT` (no trailing `/`).
    pub fn new(base: &str) -> anyhow::Result<Self> {
        let http = Self::client_builder().build().context("cannot build the HTTP client")?;
        Ok(Self { http, base: base.trim_end_matches('/').to_string(), token: None })
    }

    fn client_builder() -> reqwest::ClientBuilder {
        reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            // An idle deadline, not a total one: big transfers run as long as they make progress.
            .read_timeout(Duration::from_secs(120))
    }

    /// The same credentials on a new connection pool whose connections leave from `source`:
    /// another client machine, as far as the gateway can tell. On Linux every 127.0.0.0/8
    /// address is loopback, so `127.0.0.2`, `127.0.0.3`, ... need no setup.
    pub fn from_address(&self, source: std::net::IpAddr) -> anyhow::Result<Api> {
        let http = Self::client_builder()
            .local_address(source)
            .build()
            .with_context(|| format!("cannot build an HTTP client bound to {source}"))?;
        Ok(Api { http, base: self.base.clone(), token: self.token.clone() })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The same client signed in with `token`.
    pub fn with_token(&self, token: impl Into<String>) -> Api {
        Api { http: self.http.clone(), base: self.base.clone(), token: Some(token.into()) }
    }

    /// The same credentials on a new connection pool (no connection shared with earlier requests).
    pub fn fresh_connection(&self) -> anyhow::Result<Api> {
        let mut api = Api::new(&self.base)?;
        api.token = self.token.clone();
        Ok(api)
    }

    /// The same client without credentials.
    pub fn anonymous(&self) -> Api {
        Api { http: self.http.clone(), base: self.base.clone(), token: None }
    }

    /// A request to `path` (starting with `/`, already encoded), with the token if there is one.
    pub fn req(&self, method: Method, path: &str) -> Req {
        let what = format!("{method} {path}");
        let mut rb = self.http.request(method, format!("{}{}", self.base, path));
        if let Some(t) = &self.token {
            rb = rb.bearer_auth(t);
        }
        Req { rb, what }
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Resp> {
        self.req(Method::GET, path).send().await
    }

    pub async fn head(&self, path: &str) -> anyhow::Result<Resp> {
        self.req(Method::HEAD, path).send().await
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<Resp> {
        self.req(Method::DELETE, path).send().await
    }

    pub async fn post_json<T: Serialize + ?Sized>(&self, path: &str, body: &T) -> anyhow::Result<Resp> {
        self.req(Method::POST, path).json(body).send().await
    }

    pub async fn patch_json<T: Serialize + ?Sized>(&self, path: &str, body: &T) -> anyhow::Result<Resp> {
        self.req(Method::PATCH, path).json(body).send().await
    }

    /// `PUT /api/v1/files/{path}` with `body`.
    pub async fn put_file(&self, path: &str, body: impl Into<reqwest::Body>) -> anyhow::Result<Resp> {
        self.req(Method::PUT, &files_url(path)).body(body).send().await
    }

    /// `GET /api/v1/files/{path}`.
    pub async fn get_file(&self, path: &str) -> anyhow::Result<Resp> {
        self.get(&files_url(path)).await
    }

    /// `GET /api/v1/stat/{path}`.
    pub async fn stat(&self, path: &str) -> anyhow::Result<Resp> {
        self.get(&format!("/api/v1/stat/{}", encode_path(path))).await
    }

    /// `POST /api/v1/dirs/{path}` (mkdir).
    pub async fn mkdir(&self, path: &str) -> anyhow::Result<Resp> {
        self.req(Method::POST, &format!("/api/v1/dirs/{}", encode_path(path))).send().await
    }

    /// `GET /api/v1/dirs/{path}` with optional `limit` and `cursor`.
    pub async fn list_dir(&self, path: &str, limit: Option<u32>, cursor: Option<&str>) -> anyhow::Result<Resp> {
        let mut q: Vec<(&str, &str)> = Vec::new();
        let limit = limit.map(|l| l.to_string());
        if let Some(l) = &limit {
            q.push(("limit", l));
        }
        if let Some(c) = cursor {
            q.push(("cursor", c));
        }
        self.get(&format!("/api/v1/dirs/{}{}", encode_path(path), query_string(&q))).await
    }

    /// Every entry of a directory, following `next_cursor`; fails on a page error.
    pub async fn list_all(&self, path: &str, limit: Option<u32>) -> anyhow::Result<Vec<Entry>> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..100_000 {
            let r = self.list_dir(path, limit, cursor.as_deref()).await?;
            let page: nimbus_proto::wire::DirListing = r.ok(200)?;
            if let Some(l) = limit {
                ensure!(page.entries.len() <= l as usize, "{r}: more entries than limit={l}");
            }
            out.extend(page.entries);
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return Ok(out),
            }
        }
        bail!("listing {path} never ended")
    }

    /// `POST /api/v1/auth/login`.
    pub async fn login(&self, username: &str, password: &str) -> anyhow::Result<Resp> {
        self.anonymous()
            .post_json("/api/v1/auth/login", &serde_json::json!({"username": username, "password": password}))
            .await
    }

    /// `block_size` from `GET /api/v1/info`.
    pub async fn block_size(&self) -> anyhow::Result<usize> {
        let info: nimbus_proto::wire::ServerInfo = self.get("/api/v1/info").await?.ok(200)?;
        Ok(info.block_size as usize)
    }

    /// `PUT /api/v1/blocks/{hash}`.
    pub async fn put_block(&self, hash: &str, data: impl Into<reqwest::Body>) -> anyhow::Result<Resp> {
        self.req(Method::PUT, &format!("/api/v1/blocks/{hash}")).body(data).send().await
    }

    /// `POST /api/v1/manifests/{path}`.
    pub async fn commit(
        &self,
        path: &str,
        base_version: Option<i64>,
        blocks: &[nimbus_proto::wire::BlockRef],
    ) -> anyhow::Result<Resp> {
        let body = nimbus_proto::wire::CommitRequest { base_version, blocks: blocks.to_vec(), force: false };
        self.post_json(&format!("/api/v1/manifests/{}", encode_path(path)), &body).await
    }

    /// Uploads the blocks of `data` this space is missing; returns the block list to commit.
    pub async fn upload_blocks(
        &self,
        data: &[u8],
        block_size: usize,
    ) -> anyhow::Result<Vec<nimbus_proto::wire::BlockRef>> {
        let blocks = crate::data::split_blocks(data, block_size);
        let hashes: Vec<String> = blocks.iter().map(|(h, _)| h.clone()).collect();
        let missing: nimbus_proto::wire::MissingBlocksResponse =
            self.post_json("/api/v1/blocks/missing", &serde_json::json!({ "hashes": hashes })).await?.ok(200)?;
        for (h, bytes) in &blocks {
            if missing.missing.contains(h) {
                self.put_block(h, bytes.to_vec()).await?.check_any(&[200, 201])?;
            }
        }
        Ok(blocks.iter().map(|(h, b)| nimbus_proto::wire::BlockRef { hash: h.clone(), size: b.len() as u64 }).collect())
    }

    /// Logs in and returns a client with the new token; fails unless the login answers 200.
    pub async fn login_ok(&self, username: &str, password: &str) -> anyhow::Result<Api> {
        let r = self.login(username, password).await?;
        let l: nimbus_proto::wire::LoginResponse = r.ok(200)?;
        Ok(self.with_token(l.token))
    }
}

/// A request being built; [`Req::send`] reads the whole response.
pub struct Req {
    rb: reqwest::RequestBuilder,
    what: String,
}

impl Req {
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.what.push_str(&format!(" [{name}: {value}]"));
        self.rb = self.rb.header(name, value);
        self
    }

    pub fn json<T: Serialize + ?Sized>(mut self, body: &T) -> Self {
        if let Ok(s) = serde_json::to_string(body) {
            let short: String = s.chars().take(300).collect();
            self.what.push_str(&format!(" {short}"));
        }
        self.rb = self.rb.json(body);
        self
    }

    /// A raw body, sent as `application/json` (for malformed-JSON tests).
    pub fn json_text(mut self, text: &str) -> Self {
        self.what.push_str(&format!(" {text}"));
        self.rb = self.rb.header("content-type", "application/json").body(text.to_string());
        self
    }

    pub fn body(mut self, body: impl Into<reqwest::Body>) -> Self {
        self.rb = self.rb.body(body);
        self
    }

    pub fn timeout(mut self, d: Duration) -> Self {
        self.rb = self.rb.timeout(d);
        self
    }

    /// Sends and reads the whole response body.
    pub async fn send(self) -> anyhow::Result<Resp> {
        let what = self.what;
        let resp = self.rb.send().await.with_context(|| format!("{what}: request failed"))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.with_context(|| format!("{what}: reading the response body failed"))?;
        Ok(Resp { what, status, headers, body })
    }

    /// Sends and returns the response with its body unread (for streaming downloads).
    pub async fn send_streaming(self) -> anyhow::Result<(String, reqwest::Response)> {
        let what = self.what;
        let resp = self.rb.send().await.with_context(|| format!("{what}: request failed"))?;
        Ok((what, resp))
    }
}

/// A complete response, with the request it answers.
#[derive(Clone)]
pub struct Resp {
    /// Method, path and notable request headers/body, for messages.
    pub what: String,
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl fmt::Display for Resp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = String::from_utf8_lossy(&self.body);
        let short: String = text.chars().take(1500).collect();
        let more = if text.chars().count() > 1500 { "…" } else { "" };
        write!(f, "{} → {} {short}{more}", self.what, self.status)
    }
}

impl fmt::Debug for Resp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Resp {
    /// Fails unless the status is `expected`.
    pub fn check(&self, expected: u16) -> anyhow::Result<&Self> {
        ensure!(self.status == expected, "expected {expected}, got: {self}");
        Ok(self)
    }

    /// Fails unless the status is one of `expected` (where the contract allows either).
    pub fn check_any(&self, expected: &[u16]) -> anyhow::Result<&Self> {
        ensure!(expected.contains(&self.status), "expected one of {expected:?}, got: {self}");
        Ok(self)
    }

    /// Checks the status and parses the JSON body.
    pub fn ok<T: DeserializeOwned>(&self, expected: u16) -> anyhow::Result<T> {
        self.check(expected)?;
        self.json()
    }

    pub fn json<T: DeserializeOwned>(&self) -> anyhow::Result<T> {
        serde_json::from_slice(&self.body).with_context(|| format!("unexpected JSON in: {self}"))
    }

    pub fn value(&self) -> anyhow::Result<serde_json::Value> {
        self.json()
    }

    pub fn entry(&self, expected: u16) -> anyhow::Result<Entry> {
        self.check(expected)?;
        check_entry_shape(self)?;
        self.json()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
    }

    /// Checks the status and that the body is exactly `{"error":{"code","message"}}` with the
    /// given code and a non-empty message.
    pub fn check_error(&self, status: u16, code: &str) -> anyhow::Result<ErrorDetail> {
        self.check(status)?;
        let e = self.error_detail()?;
        ensure!(e.code.as_str() == code, "expected error code `{code}`, got: {self}");
        Ok(e)
    }

    /// Like [`Resp::check_error`] where docs/API.md names the code but not the status.
    pub fn check_error_in(&self, statuses: &[u16], code: &str) -> anyhow::Result<ErrorDetail> {
        self.check_any(statuses)?;
        let e = self.error_detail()?;
        ensure!(e.code.as_str() == code, "expected error code `{code}`, got: {self}");
        Ok(e)
    }

    /// Like [`Resp::check_error`] where the contract allows several codes.
    pub fn check_error_any(&self, status: u16, codes: &[&str]) -> anyhow::Result<ErrorDetail> {
        self.check(status)?;
        let e = self.error_detail()?;
        ensure!(codes.contains(&e.code.as_str()), "expected an error code in {codes:?}, got: {self}");
        Ok(e)
    }

    /// Parses the error body, checking its exact shape.
    pub fn error_detail(&self) -> anyhow::Result<ErrorDetail> {
        let ct = self.header("content-type").unwrap_or_default();
        ensure!(ct.starts_with("application/json"), "an error must be JSON (content-type {ct:?}): {self}");
        let v = self.value()?;
        let obj = v.as_object().with_context(|| format!("error body is not an object: {self}"))?;
        ensure!(obj.len() == 1 && obj.contains_key("error"), "error body must be {{\"error\":{{..}}}}: {self}");
        let inner = obj["error"].as_object().with_context(|| format!("`error` is not an object: {self}"))?;
        let mut keys: Vec<&str> = inner.keys().map(String::as_str).collect();
        keys.sort_unstable();
        ensure!(keys == ["code", "message"], "error must have exactly `code` and `message`: {self}");
        let detail: ErrorDetail = serde_json::from_value(obj["error"].clone())?;
        ensure!(!detail.message.trim().is_empty(), "error message is empty: {self}");
        Ok(detail)
    }
}

/// The entry JSON has exactly the documented keys.
fn check_entry_shape(r: &Resp) -> anyhow::Result<()> {
    let v = r.value()?;
    let obj = v.as_object().with_context(|| format!("entry is not an object: {r}"))?;
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    ensure!(
        keys == ["id", "kind", "modified", "name", "path", "size", "version"],
        "entry keys must be id,name,path,kind,size,modified,version: {r}"
    );
    let modified = obj["modified"].as_str().with_context(|| format!("`modified` is not a string: {r}"))?;
    check_rfc3339_utc(modified).with_context(|| format!("in {r}"))?;
    Ok(())
}

/// Parses an RFC 3339 timestamp and checks it is in UTC.
pub fn check_rfc3339_utc(s: &str) -> anyhow::Result<time::OffsetDateTime> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .with_context(|| format!("`{s}` is not RFC 3339"))?;
    ensure!(t.offset().is_utc(), "`{s}` is not UTC");
    Ok(t)
}

/// Streams a response body, returning its length and BLAKE3 hash.
pub async fn hash_body(what: &str, resp: reqwest::Response) -> anyhow::Result<(u64, blake3::Hash)> {
    let mut hasher = blake3::Hasher::new();
    let mut len = 0u64;
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.with_context(|| format!("{what}: body broke after {len} bytes"))?;
        len += chunk.len() as u64;
        hasher.update(&chunk);
    }
    Ok((len, hasher.finalize()))
}

/// Sends `method target` exactly as written (no URL normalisation) over a fresh connection
/// with `Connection: close`, and reads the whole response.
pub async fn raw_request(
    base: &str,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> anyhow::Result<Resp> {
    let hostport = base.strip_prefix("http://").context("raw_request needs an http:// base URL")?;
    let what = format!("{method} {target} (raw)");
    let mut stream = tokio::net::TcpStream::connect(hostport).await.with_context(|| format!("{what}: connect"))?;
    let mut req = Vec::new();
    req.extend_from_slice(
        format!("{method} {target} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n").as_bytes(),
    );
    for (k, v) in headers {
        req.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    if !body.is_empty() || matches!(method, "PUT" | "POST" | "PATCH") {
        req.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body);
    stream.write_all(&req).await.with_context(|| format!("{what}: send"))?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut raw))
        .await
        .with_context(|| format!("{what}: no complete response within 30 s"))?
        .with_context(|| format!("{what}: read"))?;
    parse_response(what, &raw, method == "HEAD")
}

fn parse_response(what: String, raw: &[u8], head: bool) -> anyhow::Result<Resp> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .with_context(|| format!("{what}: malformed response: {:?}", String::from_utf8_lossy(raw)))?;
    let head_text = std::str::from_utf8(&raw[..split]).with_context(|| format!("{what}: non-UTF-8 headers"))?;
    let mut lines = head_text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("{what}: bad status line {status_line:?}"))?;
    let mut headers = HeaderMap::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            headers.append(HeaderName::from_bytes(k.trim().as_bytes())?, HeaderValue::from_str(v.trim())?);
        }
    }
    let mut body = raw[split + 4..].to_vec();
    if head || status == 304 || status == 204 {
        body.clear();
    } else if headers.get("transfer-encoding").and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("chunked")) {
        body = dechunk(&body).with_context(|| format!("{what}: bad chunked body"))?;
    } else if let Some(len) = headers.get("content-length").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok()) {
        body.truncate(len);
    }
    Ok(Resp { what, status, headers, body: Bytes::from(body) })
}

fn dechunk(mut data: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = data.windows(2).position(|w| w == b"\r\n").context("chunk size line")?;
        let size_text = std::str::from_utf8(&data[..eol])?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        ensure!(data.len() >= size + 2, "truncated chunk");
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}
