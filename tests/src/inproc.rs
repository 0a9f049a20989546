//! The gateway in this process: `nimbus_gateway::server::app(state)` over SQLite and a local
//! block store in a temporary directory, driven with tower's `oneshot`. For tests whose subject
//! is the HTTP contract (statuses, headers, error bodies, input rules), not the store or the
//! database: no process, no port, no backend matrix. The answers are the same [`Resp`] the
//! process tests check, with the same helpers.

use anyhow::{Context, bail};
use axum::body::Body;
use bytes::Bytes;
use clap::Parser;
use http_body_util::BodyExt;
use nimbus_gateway::config::{Cli, Command};
use nimbus_gateway::state::AppState;
use nimbus_proto::wire::{DirListing, Entry};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue};
use serde::Serialize;
use tower::ServiceExt;

use crate::http::{Resp, encode_path, files_url};

/// One gateway state and its router; dropped with its directory.
pub struct InProcess {
    app: nimbus_gateway::server::Api,
    state: AppState,
    _dir: tempfile::TempDir,
}

impl InProcess {
    /// A gateway on an empty SQLite database and local block store, with its default flags.
    pub async fn start() -> anyhow::Result<InProcess> {
        let dir = tempfile::tempdir()?;
        let data = dir.path().to_str().context("temp dir path")?.to_string();
        let cli = Cli::try_parse_from(["nimbus-gateway", "serve", "--data-dir", &data, "--cache-size", "0"])?;
        let Command::Serve(args) = cli.command else { bail!("not the serve command") };
        let state = nimbus_gateway::server::build_state(&args).await?;
        Ok(InProcess { app: nimbus_gateway::server::app(state.clone()), state, _dir: dir })
    }

    /// A new user and a client holding a bearer token for it (made directly in the database:
    /// sign-in is not what these tests are about).
    pub async fn user(&self, name: &str) -> anyhow::Result<Client> {
        self.account(name, "user").await
    }

    /// [`InProcess::user`] with the administrator role.
    pub async fn admin(&self, name: &str) -> anyhow::Result<Client> {
        self.account(name, "admin").await
    }

    async fn account(&self, name: &str, role: &str) -> anyhow::Result<Client> {
        let user = self.state.meta.create_user(name, "!not-a-password-hash", role, None).await?;
        let (token, hash) = nimbus_gateway::auth::new_token();
        let expires = nimbus_gateway::meta::now_ms() + 3_600_000;
        self.state.meta.insert_token(user.id, &hash, "in-process test", expires, None).await?;
        Ok(Client { app: self.app.clone(), token: Some(token), id: user.id })
    }

    /// A client without a token (what anyone on the network can send).
    pub fn anonymous(&self) -> Client {
        Client { app: self.app.clone(), token: None, id: 0 }
    }

    /// The gateway's state: for checking what a refused request left in the database.
    pub fn state(&self) -> &AppState {
        &self.state
    }
}

/// Requests to the in-process router as one user (or as nobody: [`InProcess::anonymous`]).
#[derive(Clone)]
pub struct Client {
    app: nimbus_gateway::server::Api,
    token: Option<String>,
    /// The user's id (0 for the anonymous client).
    pub id: i64,
}

impl Client {
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// `method target` (sent as written: no URL parser resolves dot segments first) with the
    /// user's token, `headers` and `body`.
    pub async fn send(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> anyhow::Result<Resp> {
        let mut req = axum::http::Request::builder().method(method).uri(target);
        if let Some(token) = &self.token {
            req = req.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        for (k, v) in headers {
            req = req.header(HeaderName::from_bytes(k.as_bytes())?, HeaderValue::from_str(v)?);
        }
        let resp = self.app.clone().oneshot(req.body(Body::from(body.into()))?).await?;
        let status = resp.status().as_u16();
        let answer_headers = resp.headers().clone();
        let body = resp.into_body().collect().await?.to_bytes();
        let mut what = format!("{method} {target} (in process)");
        for (k, v) in headers {
            what.push_str(&format!(" [{k}: {v}]"));
        }
        Ok(Resp { what, status, headers: answer_headers, body })
    }

    pub async fn get(&self, target: &str, headers: &[(&str, &str)]) -> anyhow::Result<Resp> {
        self.send("GET", target, headers, Bytes::new()).await
    }

    /// `PUT /api/v1/files/{path}` with `body` and `headers`.
    pub async fn put_file_with(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> anyhow::Result<Resp> {
        self.send("PUT", &files_url(path), headers, body).await
    }

    /// `PUT /api/v1/files/{path}` with `body`.
    pub async fn put_file(&self, path: &str, body: impl Into<Bytes>) -> anyhow::Result<Resp> {
        self.put_file_with(path, &[], body).await
    }

    /// `POST /api/v1/dirs/{path}`.
    pub async fn mkdir(&self, path: &str) -> anyhow::Result<Resp> {
        self.send("POST", &format!("/api/v1/dirs/{}", encode_path(path)), &[], Bytes::new()).await
    }

    pub async fn post_json<T: Serialize + ?Sized>(&self, target: &str, body: &T) -> anyhow::Result<Resp> {
        self.json_text("POST", target, serde_json::to_string(body)?).await
    }

    pub async fn patch_json<T: Serialize + ?Sized>(&self, target: &str, body: &T) -> anyhow::Result<Resp> {
        self.json_text("PATCH", target, serde_json::to_string(body)?).await
    }

    /// `method target` with `text` as its body, sent as JSON whatever it holds (bad input).
    pub async fn json_text(&self, method: &str, target: &str, text: impl Into<String>) -> anyhow::Result<Resp> {
        self.send(method, target, &[(CONTENT_TYPE.as_str(), "application/json")], Bytes::from(text.into())).await
    }

    pub async fn delete(&self, target: &str) -> anyhow::Result<Resp> {
        self.send("DELETE", target, &[], Bytes::new()).await
    }

    /// Every entry of the folder at `path`, following the cursor.
    pub async fn list_all(&self, path: &str) -> anyhow::Result<Vec<Entry>> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10_000 {
            let mut target = format!("/api/v1/dirs/{}", encode_path(path));
            if let Some(c) = &cursor {
                target.push_str(&format!("?cursor={}", nimbus_proto::names::percent_encode(c)));
            }
            let r = self.get(&target, &[]).await?;
            let page: DirListing = r.ok(200)?;
            out.extend(page.entries);
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return Ok(out),
            }
        }
        bail!("listing {path} did not end")
    }

    /// The content of the file at `path`.
    pub async fn content(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        let r = self.get(&files_url(path), &[]).await?;
        r.check(200)?;
        Ok(r.body.to_vec())
    }
}
