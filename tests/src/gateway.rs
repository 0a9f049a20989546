//! One gateway process per test: temporary data dir, the chosen backend, stdout/stderr captured
//! to files in that dir (their tail is printed when a test fails or the gateway dies).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use nimbus_proto::wire::{CreatedUser, LoginResponse};
use tokio::process::{Child, Command};
use tokio::sync::OnceCell;

use crate::backend::Backend;
use crate::garage::Garage;
use crate::http::Api;
use crate::minio::Minio;
use crate::postgres::PgDatabase;

/// The password of the first administrator (`admin`), set through `NIMBUS_ADMIN_PASSWORD`.
pub const ADMIN_PASSWORD: &str = "e2e-admin-password";

/// The password [`Gateway::create_user`] gives a user.
pub fn user_password(username: &str) -> String {
    format!("pw-{username}-e2e-secret")
}

/// How to start a gateway beyond the backend.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// `--token-ttl-secs`.
    pub token_ttl_secs: Option<u64>,
    /// More command-line arguments.
    pub extra_args: Vec<String>,
    /// The whole test body must finish within this.
    pub timeout: Duration,
    /// PostgreSQL + S3 backend: use this S3 endpoint (a MinIO cluster the test started, with
    /// the harness's credentials) instead of a private single MinIO.
    pub s3_store: Option<String>,
    /// More environment variables.
    pub env: Vec<(String, String)>,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            token_ttl_secs: None,
            extra_args: Vec::new(),
            timeout: Duration::from_secs(300),
            s3_store: None,
            env: Vec::new(),
        }
    }
}

impl GatewayOptions {
    pub fn token_ttl(mut self, secs: u64) -> Self {
        self.token_ttl_secs = Some(secs);
        self
    }

    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.extra_args.push(a.into());
        self
    }

    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }

    pub fn s3_store(mut self, endpoint: impl Into<String>) -> Self {
        self.s3_store = Some(endpoint.into());
        self
    }

    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
}

/// The gateway's captured output; outlives the gateway so a failed test can still print it.
/// A second gateway on the same database and store (see [`Gateway::start_sibling`]).
pub struct Sibling {
    pub url: String,
    pub api: Api,
    pub child: Child,
    pub logs: GatewayLogs,
}

impl Sibling {
    /// The S3 door's endpoint, if started with `--s3-listen`.
    pub fn s3_endpoint(&self) -> anyhow::Result<String> {
        let out = std::fs::read_to_string(self.logs.stdout_path())?;
        out.lines()
            .find_map(|l| l.split_once("S3-compatible API on ").and_then(|(_, r)| r.split_whitespace().next()))
            .map(str::to_string)
            .context("the second gateway printed no S3 endpoint")
    }
}

#[derive(Clone)]
pub struct GatewayLogs {
    dir: Arc<tempfile::TempDir>,
}

impl GatewayLogs {
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn stdout_path(&self) -> PathBuf {
        self.dir.path().join("gateway.stdout")
    }

    pub fn stderr_path(&self) -> PathBuf {
        self.dir.path().join("gateway.stderr")
    }

    pub fn print_tail(&self, why: &str) {
        eprintln!(
            "---- {why}: gateway stdout ----\n{}\n---- gateway stderr (last 80 lines) ----\n{}\n---- end of gateway output ----",
            tail_file(&self.stdout_path(), 20),
            tail_file(&self.stderr_path(), 80)
        );
    }
}

/// The last `lines` lines of a text file (lossy UTF-8), or a note that it cannot be read.
pub fn tail_file(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

pub struct Gateway {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    pub backend: Backend,
    api: Api,
    child: Child,
    pid: u32,
    logs: GatewayLogs,
    admin_token: OnceCell<String>,
    /// The command that started the gateway, for [`Gateway::restart`].
    cmd: Command,
    restarts: u32,
    /// Stopped on purpose ([`Gateway::stop`]), not crashed.
    stopped: bool,
    // Dropped after the gateway process is killed (Drop below), in this order.
    minio: Option<Minio>,
    garage: Option<Garage>,
    pg: Option<PgDatabase>,
}

impl Gateway {
    /// Starts a gateway on `backend` and waits until it prints `listening on http://...`.
    pub async fn start(backend: Backend, opts: &GatewayOptions) -> anyhow::Result<Gateway> {
        let bin = crate::bins::gateway_bin()?;
        let dir = Arc::new(tempfile::Builder::new().prefix("nimbus-e2e-gw-").tempdir()?);
        let logs = GatewayLogs { dir };
        let data_dir = logs.dir().join("data");

        let mut cmd = Command::new(&bin);
        cmd.arg("serve").arg("--listen").arg("127.0.0.1:0").arg("--data-dir").arg(&data_dir);
        // Only what this test sets: no NIMBUS_* or AWS_* settings leak in from the developer's shell.
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("NIMBUS_") || k.starts_with("AWS_") {
                cmd.env_remove(k.as_ref());
            }
        }
        cmd.env("NIMBUS_ADMIN_PASSWORD", ADMIN_PASSWORD);
        if let Ok(filter) = std::env::var("NIMBUS_TEST_GATEWAY_LOG") {
            cmd.env("NIMBUS_LOG", filter);
        }

        let (mut minio, mut garage, mut pg) = (None, None, None);
        if backend == Backend::PostgresS3 {
            let admin_url = crate::postgres::configured_url().context("NIMBUS_TEST_PG_URL is not set")?;
            let db = PgDatabase::create(&admin_url).await?;
            let (m, endpoint) = match &opts.s3_store {
                Some(ep) => (None, ep.clone()),
                None => {
                    let minio_bin = crate::minio::configured_bin().context("NIMBUS_TEST_MINIO_BIN is not set")?;
                    let m = Minio::start(&minio_bin).await?;
                    let ep = m.endpoint();
                    (Some(m), ep)
                }
            };
            let bucket = format!("nimbus-e2e-{:016x}", rand::random::<u64>());
            cmd.arg("--database-url")
                .arg(db.url())
                .args(["--store", "s3", "--s3-endpoint"])
                .arg(endpoint)
                .args(["--s3-bucket", &bucket, "--s3-region", "us-east-1"])
                .env("AWS_ACCESS_KEY_ID", crate::minio::ACCESS_KEY)
                .env("AWS_SECRET_ACCESS_KEY", crate::minio::SECRET_KEY)
                .env("AWS_EC2_METADATA_DISABLED", "true");
            minio = m;
            pg = Some(db);
        }
        if backend == Backend::SqliteGarage {
            let garage_bin = crate::garage::configured_bin().context("NIMBUS_TEST_GARAGE_BIN is not set")?;
            let g = Garage::start(&garage_bin).await?;
            let bucket = format!("nimbus-e2e-{:016x}", rand::random::<u64>());
            cmd.args(["--store", "s3", "--s3-endpoint"])
                .arg(g.endpoint())
                .args(["--s3-bucket", &bucket, "--s3-region", crate::garage::REGION])
                .env("AWS_ACCESS_KEY_ID", g.access_key())
                .env("AWS_SECRET_ACCESS_KEY", g.secret_key())
                .env("AWS_EC2_METADATA_DISABLED", "true");
            garage = Some(g);
        }
        if let Some(ttl) = opts.token_ttl_secs {
            cmd.arg("--token-ttl-secs").arg(ttl.to_string());
        }
        cmd.args(&opts.extra_args);
        cmd.envs(opts.env.iter().map(|(k, v)| (k, v)));

        let stdout = std::fs::File::create(logs.stdout_path())?;
        let stderr = std::fs::File::create(logs.stderr_path())?;
        cmd.stdin(Stdio::null()).stdout(stdout).stderr(stderr).kill_on_drop(true);
        let mut child = cmd.spawn().with_context(|| format!("cannot start {}", bin.display()))?;
        let pid = child.id().context("the gateway exited at once")?;

        let url = match wait_listening(&mut child, &logs).await {
            Ok(u) => u,
            Err(e) => {
                let _ = child.start_kill();
                logs.print_tail("gateway did not start");
                return Err(e);
            }
        };
        let api = Api::new(&url)?;
        Ok(Gateway {
            url,
            backend,
            api,
            child,
            pid,
            logs,
            admin_token: OnceCell::new(),
            cmd,
            restarts: 0,
            stopped: false,
            minio,
            garage,
            pg,
        })
    }

    /// The gateway's `--data-dir` (SQLite database, local blocks, the default cache dir).
    pub fn data_dir(&self) -> PathBuf {
        self.logs.dir().join("data")
    }

    /// Stops the gateway (SIGTERM, SIGKILL after 20 s) and starts it again with the same
    /// command: same data dir, database, store and flags, a new port. The previous run's
    /// output is kept as `gateway.stdout.N` / `gateway.stderr.N`. Clients made before the
    /// restart point at the old port: get new ones ([`Gateway::api`], [`Gateway::admin`]).
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.stop().await?;
        self.spawn_again(None).await
    }

    /// Stops the gateway process (SIGTERM, SIGKILL after 20 s), as an outage: the data dir,
    /// database and store stay, and so does its port until [`Gateway::start_again`]. Clients
    /// get "connection refused" meanwhile.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        if self.stopped {
            return Ok(());
        }
        let _ = self.terminate().await;
        if self.wait_exit(Duration::from_secs(20)).await?.is_none() {
            self.child.start_kill()?;
            tokio::time::timeout(Duration::from_secs(20), self.child.wait())
                .await
                .context("the gateway did not die after SIGKILL")??;
        }
        self.stopped = true;
        Ok(())
    }

    /// Sends the gateway SIGTERM (graceful shutdown) and returns at once; see
    /// [`Gateway::wait_exit`].
    pub async fn terminate(&self) -> anyhow::Result<()> {
        let status = Command::new("kill").args(["-TERM", &self.pid.to_string()]).status().await?;
        ensure!(status.success(), "kill -TERM {} failed: {status}", self.pid);
        Ok(())
    }

    /// Waits up to `within` for the gateway process to exit: its exit status (the gateway then
    /// counts as stopped, as after [`Gateway::stop`]), or None if it is still running.
    pub async fn wait_exit(&mut self, within: Duration) -> anyhow::Result<Option<ExitStatus>> {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(status) => {
                self.stopped = true;
                Ok(Some(status?))
            }
            Err(_) => Ok(None),
        }
    }

    /// Starts a gateway stopped with [`Gateway::stop`] again with the same command, on the
    /// same port: clients made before (a mounted drive, a logged-in CLI) reach it again.
    pub async fn start_again(&mut self) -> anyhow::Result<()> {
        ensure!(self.stopped, "start_again: the gateway is running");
        let listen = self.url.strip_prefix("http://").context("the gateway URL is not http://")?.to_string();
        self.spawn_again(Some(listen)).await
    }

    /// Starts the (stopped) gateway with the saved command, on `listen` if given (else the
    /// original `--listen`, a new port), keeping the previous run's output as `*.N`.
    async fn spawn_again(&mut self, listen: Option<String>) -> anyhow::Result<()> {
        self.restarts += 1;
        let n = self.restarts;
        for p in [self.logs.stdout_path(), self.logs.stderr_path()] {
            std::fs::rename(&p, PathBuf::from(format!("{}.{n}", p.display())))?;
        }
        let stdout = std::fs::File::create(self.logs.stdout_path())?;
        let stderr = std::fs::File::create(self.logs.stderr_path())?;
        let spawned = match &listen {
            Some(addr) => command_listening_on(&self.cmd, addr).stdout(stdout).stderr(stderr).spawn(),
            None => self.cmd.stdout(stdout).stderr(stderr).spawn(),
        };
        self.child = spawned.context("cannot start the gateway again")?;
        self.stopped = false;
        self.pid = self.child.id().context("the gateway exited at once")?;
        self.url = match wait_listening(&mut self.child, &self.logs).await {
            Ok(u) => u,
            Err(e) => {
                let _ = self.child.start_kill();
                self.logs.print_tail("gateway did not restart");
                return Err(e);
            }
        };
        if let Some(addr) = listen {
            ensure!(self.url == format!("http://{addr}"), "the gateway came back on {} instead of {addr}", self.url);
        }
        self.api = Api::new(&self.url)?;
        self.admin_token = OnceCell::new();
        Ok(())
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `nimbus-gateway <subcommand>` (gc, fsck, migrate, ...) with this gateway's database,
    /// store, flags and environment, as an operator would run it beside the server.
    pub fn tool(&self, subcommand: &str) -> Command {
        self.tool_with(subcommand, &[])
    }

    /// [`Gateway::tool`] with some flags' values replaced, e.g. `("--s3-endpoint", proxy)`
    /// (each flag must be one the gateway was started with).
    pub fn tool_with(&self, subcommand: &str, overrides: &[(&str, &str)]) -> Command {
        let mut args: Vec<std::ffi::OsString> =
            self.cmd.as_std().get_args().map(std::ffi::OsStr::to_os_string).collect();
        if let Some(first) = args.first_mut() {
            *first = subcommand.into();
        }
        for (flag, value) in overrides {
            if let Some(i) = args.iter().position(|a| a == *flag)
                && let Some(v) = args.get_mut(i + 1)
            {
                *v = value.into();
            }
        }
        command_with_args(&self.cmd, args)
    }

    /// The value of a command-line flag the gateway was started with (e.g. `--s3-bucket`).
    pub fn flag(&self, name: &str) -> Option<String> {
        let args: Vec<String> = self.cmd.as_std().get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        let i = args.iter().position(|a| a == name)?;
        args.get(i + 1).cloned()
    }

    /// Starts a second gateway process on the same database and block store (PostgreSQL
    /// backends), with its own data and cache dir and port, and the same S3 server key: a
    /// two-node deployment behind a load balancer.
    pub async fn start_sibling(&self) -> anyhow::Result<Sibling> {
        self.start_sibling_with(&[]).await
    }

    /// [`Gateway::start_sibling`] with more command-line arguments for the second gateway
    /// (e.g. `--database-listen-url` through a fault-injecting proxy).
    pub async fn start_sibling_with(&self, extra_args: &[String]) -> anyhow::Result<Sibling> {
        ensure!(self.pg.is_some(), "a second gateway needs the shared PostgreSQL database");
        let dir = Arc::new(tempfile::Builder::new().prefix("nimbus-e2e-gw2-").tempdir()?);
        let logs = GatewayLogs { dir };
        let mut args: Vec<std::ffi::OsString> =
            self.cmd.as_std().get_args().map(std::ffi::OsStr::to_os_string).collect();
        for (flag, value) in
            [("--listen", "127.0.0.1:0".into()), ("--data-dir", logs.dir().join("data").into_os_string())]
        {
            if let Some(i) = args.iter().position(|a| a == flag)
                && let Some(v) = args.get_mut(i + 1)
            {
                *v = value;
            }
        }
        args.push("--s3-key-file".into());
        args.push(self.data_dir().join("s3-secrets.key").into_os_string());
        args.extend(extra_args.iter().map(std::ffi::OsString::from));
        let mut cmd = command_with_args(&self.cmd, args);
        cmd.stdin(Stdio::null())
            .stdout(std::fs::File::create(logs.stdout_path())?)
            .stderr(std::fs::File::create(logs.stderr_path())?)
            .kill_on_drop(true);
        let mut child = cmd.spawn().context("cannot start a second gateway")?;
        let url = match wait_listening(&mut child, &logs).await {
            Ok(u) => u,
            Err(e) => {
                logs.print_tail("the second gateway did not start");
                return Err(e);
            }
        };
        let api = Api::new(&url)?;
        Ok(Sibling { url, api, child, logs })
    }

    /// The S3 door's endpoint (`--s3-listen`), as the gateway printed it at its last start.
    pub fn s3_endpoint(&self) -> anyhow::Result<String> {
        let out = std::fs::read_to_string(self.logs.stdout_path())?;
        out.lines()
            .rev()
            .find_map(|l| {
                l.split_once("S3-compatible API on ").map(|(_, r)| r.split_whitespace().next().map(str::to_string))
            })
            .flatten()
            .context("the gateway printed no S3 endpoint: start it with --s3-listen")
    }

    pub fn logs(&self) -> GatewayLogs {
        self.logs.clone()
    }

    /// The MinIO process behind a [`Backend::PostgresS3`] gateway.
    pub fn minio(&self) -> Option<&Minio> {
        self.minio.as_ref()
    }

    /// The Garage process behind a [`Backend::SqliteGarage`] gateway.
    pub fn garage(&self) -> Option<&Garage> {
        self.garage.as_ref()
    }

    /// The database behind a [`Backend::PostgresS3`] gateway.
    pub fn database(&self) -> Option<&PgDatabase> {
        self.pg.as_ref()
    }

    /// The value of one series in `/metrics` (0 if it was never recorded).
    pub async fn metric(&self, series: &str) -> anyhow::Result<f64> {
        let r = self.api().get("/metrics").await?;
        r.check(200)?;
        Ok(r.text()
            .lines()
            .find_map(|l| {
                let (k, v) = l.rsplit_once(' ')?;
                if k == series { v.parse().ok() } else { None }
            })
            .unwrap_or(0.0))
    }

    /// A client without credentials.
    pub fn api(&self) -> Api {
        self.api.clone()
    }

    /// The exit status, if the gateway has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// A token of `admin` (one login per gateway, reused).
    pub async fn admin_token(&self) -> anyhow::Result<String> {
        let t = self
            .admin_token
            .get_or_try_init(|| async {
                let r = self.api.login("admin", ADMIN_PASSWORD).await?;
                let l: LoginResponse = r.ok(200)?;
                anyhow::Ok(l.token)
            })
            .await?;
        Ok(t.clone())
    }

    /// A client signed in as `admin`.
    pub async fn admin(&self) -> anyhow::Result<Api> {
        Ok(self.api.with_token(self.admin_token().await?))
    }

    /// Creates a user (password [`user_password`]`(name)`, role user, the given quota), logs in
    /// as them and returns their id and token.
    pub async fn create_user(&self, name: &str, quota: Option<u64>) -> anyhow::Result<(i64, String)> {
        let admin = self.admin().await?;
        let r = admin
            .post_json(
                "/api/v1/admin/users",
                &serde_json::json!({"username": name, "password": user_password(name), "quota_bytes": quota, "role": "user"}),
            )
            .await?;
        let created: CreatedUser = r.ok(201)?;
        let r = self.api.login(name, &user_password(name)).await?;
        let login: LoginResponse = r.ok(200)?;
        Ok((created.user.id, login.token))
    }

    /// [`Gateway::create_user`], returning a signed-in client.
    pub async fn user(&self, name: &str, quota: Option<u64>) -> anyhow::Result<(i64, Api)> {
        let (id, token) = self.create_user(name, quota).await?;
        Ok((id, self.api.with_token(token)))
    }

    /// Resident memory now (VmRSS), KiB.
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        proc_status_kib(self.pid, "VmRSS")
    }

    /// Peak resident memory so far (VmHWM), KiB.
    pub fn peak_rss_kib(&self) -> anyhow::Result<u64> {
        proc_status_kib(self.pid, "VmHWM")
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let died = if self.stopped { None } else { self.exited() };
        if let Some(status) = died {
            self.logs.print_tail(&format!("the gateway exited on its own ({status})"));
        } else if std::thread::panicking() {
            self.logs.print_tail("test failed");
        }
        if std::thread::panicking()
            && let Some(m) = &self.minio
        {
            eprintln!("---- MinIO log (last 20 lines) ----\n{}", m.log_tail(20));
        }
        if std::thread::panicking()
            && let Some(g) = &self.garage
        {
            eprintln!("---- Garage log (last 20 lines) ----\n{}", g.log_tail(20));
        }
        let _ = self.child.start_kill();
    }
}

/// A copy of the gateway's command (program, arguments, environment, working directory) with
/// `--listen` set to `addr`.
fn command_listening_on(cmd: &Command, addr: &str) -> Command {
    let std = cmd.as_std();
    let mut args: Vec<std::ffi::OsString> = std.get_args().map(std::ffi::OsStr::to_os_string).collect();
    if let Some(i) = args.iter().position(|a| a == "--listen")
        && let Some(v) = args.get_mut(i + 1)
    {
        *v = addr.into();
    }
    command_with_args(cmd, args)
}

/// A copy of `cmd` (program, environment, working directory) with other arguments.
fn command_with_args(cmd: &Command, args: Vec<std::ffi::OsString>) -> Command {
    let std = cmd.as_std();
    let mut out = Command::new(std.get_program());
    out.args(args);
    for (k, v) in std.get_envs() {
        match v {
            Some(v) => out.env(k, v),
            None => out.env_remove(k),
        };
    }
    if let Some(d) = std.get_current_dir() {
        out.current_dir(d);
    }
    out.stdin(Stdio::null()).kill_on_drop(true);
    out
}

async fn wait_listening(child: &mut Child, logs: &GatewayLogs) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = std::fs::read_to_string(logs.stdout_path()).unwrap_or_default();
        if let Some(line) = out.lines().find(|l| l.contains("listening on "))
            && let Some((_, rest)) = line.split_once("listening on ")
        {
            let url = rest.split_whitespace().next().unwrap_or_default().trim_end_matches('/').to_string();
            if url.starts_with("http://127.0.0.1:") {
                return Ok(url);
            }
            bail!("unexpected listen line {line:?}");
        }
        if let Some(status) = child.try_wait()? {
            bail!("the gateway exited during start-up ({status})");
        }
        if Instant::now() > deadline {
            bail!("the gateway printed no `listening on` line within 90 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn proc_status_kib(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
    let kib = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("cannot parse {line:?}"))?;
    Ok(kib)
}

/// Runs `body` on a fresh gateway of `backend` (or skips, see [`Backend::should_run`]), within
/// `opts.timeout`; prints the gateway's output if the body fails.
pub async fn run_on<F, Fut>(backend: Backend, opts: GatewayOptions, body: F) -> anyhow::Result<()>
where
    F: FnOnce(Gateway) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    if !backend.should_run() {
        return Ok(());
    }
    let gw = Gateway::start(backend, &opts).await.with_context(|| format!("starting a gateway on {backend}"))?;
    let logs = gw.logs();
    match tokio::time::timeout(opts.timeout, body(gw)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            logs.print_tail("test failed");
            Err(e.context(format!("on backend {backend}")))
        }
        Err(_) => {
            logs.print_tail("test timed out");
            bail!("on backend {backend}: the test did not finish within {:?}", opts.timeout)
        }
    }
}
