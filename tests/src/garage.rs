//! A private single-node Garage (<https://garagehq.deuxfleurs.fr>) per test
//! (`NIMBUS_TEST_GARAGE_BIN`): a temp dir with `garage.toml`, SQLite metadata, RPC and S3 on free
//! loopback ports. After start-up it is configured with Garage's own CLI (layout of one node,
//! an access key `nimbus` allowed to create buckets), so the gateway creates its bucket itself,
//! as it does on MinIO. The process is killed when the value is dropped.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

pub const ENV_BIN: &str = "NIMBUS_TEST_GARAGE_BIN";
/// `s3_region` in `garage.toml`; requests signed for another region are refused.
pub const REGION: &str = "garage";
/// The name of the access key the tests create.
pub const KEY_NAME: &str = "nimbus";

/// The Garage binary named by `NIMBUS_TEST_GARAGE_BIN`, if that is set.
pub fn configured_bin() -> Option<PathBuf> {
    std::env::var_os(ENV_BIN).filter(|v| !v.is_empty()).map(PathBuf::from)
}

pub struct Garage {
    bin: PathBuf,
    dir: tempfile::TempDir,
    s3_port: u16,
    access_key: String,
    secret_key: String,
    child: Mutex<Option<Child>>,
}

impl Garage {
    /// Starts Garage, waits until its S3 API answers, assigns it a layout and creates the
    /// access key [`KEY_NAME`] (with the right to create buckets).
    pub async fn start(bin: &Path) -> anyhow::Result<Self> {
        if !bin.is_file() {
            bail!("{ENV_BIN}={} does not exist (run ./infra/install-deps.sh)", bin.display());
        }
        // A port picked by `free_port` can be taken by someone else before Garage binds it:
        // start again with fresh ports and a fresh directory.
        let mut last = None;
        for _ in 0..3 {
            match Self::start_once(bin).await {
                Ok(g) => return Ok(g),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("Garage did not start")))
    }

    async fn start_once(bin: &Path) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("nimbus-e2e-garage-").tempdir()?;
        let mut g = Garage {
            bin: bin.to_path_buf(),
            dir,
            s3_port: crate::minio::free_port()?,
            access_key: String::new(),
            secret_key: String::new(),
            child: Mutex::new(None),
        };
        // `free_port` never hands out a port twice in this process.
        let rpc_port = crate::minio::free_port()?;
        std::fs::write(g.config_path(), g.config(rpc_port))?;
        g.spawn_and_wait().await?;
        if let Err(e) = g.configure().await {
            return Err(e.context(format!("configuring Garage; log:\n{}", g.log_tail(30))));
        }
        Ok(g)
    }

    /// `http://127.0.0.1:PORT`, the S3 API.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }

    /// The key id (`GK…`) of the access key [`KEY_NAME`], for `AWS_ACCESS_KEY_ID`.
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// Its secret, for `AWS_SECRET_ACCESS_KEY`.
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("garage.toml")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("garage.log")
    }

    pub fn pid(&self) -> Option<u32> {
        self.lock().as_ref().and_then(|c| c.id())
    }

    pub fn log_tail(&self, lines: usize) -> String {
        crate::gateway::tail_file(&self.log_path(), lines)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn config(&self, rpc_port: u16) -> String {
        let root = self.dir.path();
        let rpc_secret = format!("{:032x}{:032x}", rand::random::<u128>(), rand::random::<u128>());
        format!(
            r#"metadata_dir = "{meta}"
data_dir = "{data}"
db_engine = "sqlite"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:{rpc_port}"
rpc_public_addr = "127.0.0.1:{rpc_port}"
rpc_secret = "{rpc_secret}"

[s3_api]
s3_region = "{REGION}"
api_bind_addr = "127.0.0.1:{s3_port}"
"#,
            meta = root.join("meta").display(),
            data = root.join("data").display(),
            s3_port = self.s3_port,
        )
    }

    /// `garage -c CONFIG ARGS`, without any `GARAGE_*` settings of the developer's shell.
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("GARAGE_") {
                cmd.env_remove(k.as_ref());
            }
        }
        cmd.env("RUST_LOG", "garage=info").env("NO_COLOR", "1").arg("-c").arg(self.config_path());
        cmd
    }

    /// Runs one CLI command against the running node; its stdout, or an error with its output.
    async fn cli(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self
            .command()
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .with_context(|| format!("cannot run {} {}", self.bin.display(), args.join(" ")))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            bail!(
                "`garage {}` failed ({}):\n{stdout}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(stdout)
    }

    /// [`Garage::cli`], retried for up to `within` (the node may still be settling).
    async fn cli_retry(&self, args: &[&str], within: Duration) -> anyhow::Result<String> {
        let deadline = Instant::now() + within;
        loop {
            match self.cli(args).await {
                Ok(out) => return Ok(out),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    async fn spawn_and_wait(&self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path())?;
        let child = self
            .command()
            .arg("server")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", self.bin.display()))?;
        *self.lock() = Some(child);

        // Any HTTP answer from the S3 API (403 to an anonymous request) means it is up; the
        // RPC listener, which the CLI uses, starts before it.
        let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if http.get(self.endpoint()).send().await.is_ok() {
                return Ok(());
            }
            let exited = self.lock().as_mut().and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                bail!("Garage exited during start-up ({status}); log:\n{}", self.log_tail(30));
            }
            if Instant::now() > deadline {
                bail!("Garage's S3 API did not answer within 60 s; log:\n{}", self.log_tail(30));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One node in zone `dc1`, layout version 1, and the access key.
    async fn configure(&mut self) -> anyhow::Result<()> {
        let settle = Duration::from_secs(20);
        let status = self.cli_retry(&["status"], settle).await?;
        let node = node_id(&status).with_context(|| format!("no node id in `garage status`:\n{status}"))?;
        self.cli(&["layout", "assign", "-z", "dc1", "-c", "1G", &node]).await?;
        self.cli(&["layout", "apply", "--version", "1"]).await?;
        // Exit status 0 once every partition has quorum under the new layout.
        self.cli_retry(&["health", "--quiet"], settle).await?;
        let created = self.cli(&["key", "create", KEY_NAME]).await?;
        let (id, secret) =
            parse_key(&created).with_context(|| format!("cannot parse `garage key create`:\n{created}"))?;
        self.cli(&["key", "allow", "--create-bucket", &id]).await?;
        self.access_key = id;
        self.secret_key = secret;
        Ok(())
    }
}

impl Drop for Garage {
    fn drop(&mut self) {
        if let Some(c) = self.lock().as_mut() {
            let _ = c.start_kill();
        }
    }
}

/// The (short, 16 hex digits) id of the only healthy node in `garage status`:
///
/// ```text
/// ==== HEALTHY NODES ====
/// ID                Hostname  Address          Tags  Zone  Capacity          DataAvail  ...
/// 0cfc376eb2bf8f7b  vm        127.0.0.1:23901              NO ROLE ASSIGNED             ...
/// ```
fn node_id(status: &str) -> Option<String> {
    let mut lines = status.lines().skip_while(|l| !l.contains("HEALTHY NODES"));
    lines.next()?;
    let header = lines.next()?;
    if !header.trim_start().starts_with("ID") {
        return None;
    }
    let id = lines.next()?.split_whitespace().next()?;
    (id.len() >= 16 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_string())
}

/// `Key ID:` (`GK` and hex digits) and `Secret key:` (hex digits) of `garage key create`.
fn parse_key(out: &str) -> Option<(String, String)> {
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric()))
    };
    Some((field("Key ID:")?, field("Secret key:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_key() {
        let status = "==== HEALTHY NODES ====\n\
            ID                Hostname  Address          Tags  Zone  Capacity          DataAvail  ResyncQueue  Version\n\
            0cfc376eb2bf8f7b  vm        127.0.0.1:23901              NO ROLE ASSIGNED             0            cargo:2.5.0\n";
        assert_eq!(node_id(status).as_deref(), Some("0cfc376eb2bf8f7b"));
        assert_eq!(node_id("==== HEALTHY NODES ====\nID  Hostname\n"), None);

        let key = "==== ACCESS KEY INFORMATION ====\n\
            Key ID:              GK904c76b386579fe296bd522f\n\
            Key name:            nimbus\n\
            Secret key:          18e7c651fa790219cf9c1db458ef9ca0fd0f45c9b3b5680fe0bf45ef2d58c7d3\n\
            Created:             2026-11-23 08:20:35.315 +00:00\n";
        assert_eq!(
            parse_key(key),
            Some((
                "GK904c76b386579fe296bd522f".to_string(),
                "18e7c651fa790219cf9c1db458ef9ca0fd0f45c9b3b5680fe0bf45ef2d58c7d3".to_string()
            ))
        );
        assert_eq!(parse_key("Key ID: GK1\nSecret key: (redacted)\n"), None);
    }
}
