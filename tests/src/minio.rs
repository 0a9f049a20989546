//! A private MinIO process per test (`NIMBUS_TEST_MINIO_BIN`), on free loopback ports, with its
//! own data directory. [`Minio::kill`] and [`Minio::restart`] inject store faults; the process
//! is killed when the value is dropped. [`Minio::start_tls`] serves HTTPS with a given
//! certificate.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

pub const ENV_BIN: &str = "NIMBUS_TEST_MINIO_BIN";
pub const ACCESS_KEY: &str = "nimbus-e2e";
pub const SECRET_KEY: &str = "nimbus-e2e-secret";

/// The MinIO binary named by `NIMBUS_TEST_MINIO_BIN`, if that is set.
pub fn configured_bin() -> Option<PathBuf> {
    std::env::var_os(ENV_BIN).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// A free TCP port on 127.0.0.1 (bound, then released), below Linux's ephemeral range
/// (32768–60999) so that no outgoing connection takes it while MinIO is down for a restart.
/// A port is handed out once per test process: between the release here and the server's own
/// bind, a parallel test drawing the same number would otherwise take it.
pub fn free_port() -> anyhow::Result<u16> {
    static GIVEN: Mutex<Option<std::collections::HashSet<u16>>> = Mutex::new(None);
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let given = given.get_or_insert_with(Default::default);
    for _ in 0..200 {
        let port = rand::random_range(20_000..32_000);
        if !given.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return Ok(port);
        }
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("cannot bind a free port")?;
    let port = l.local_addr()?.port();
    given.insert(port);
    Ok(port)
}

pub struct Minio {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    console_port: u16,
    /// `--certs-dir` (its `public.crt` and `private.key`): HTTPS.
    certs: Option<PathBuf>,
    child: Mutex<Option<Child>>,
}

impl Minio {
    /// Starts MinIO and waits until `/minio/health/live` answers.
    pub async fn start(bin: &Path) -> anyhow::Result<Self> {
        Self::start_with(bin, None).await
    }

    /// Starts MinIO on HTTPS with the certificate and key in `certs` (`public.crt`,
    /// `private.key`), trusted by its own readiness check.
    pub async fn start_tls(bin: &Path, certs: &Path) -> anyhow::Result<Self> {
        Self::start_with(bin, Some(certs.to_path_buf())).await
    }

    async fn start_with(bin: &Path, certs: Option<PathBuf>) -> anyhow::Result<Self> {
        if !bin.is_file() {
            bail!("{ENV_BIN}={} does not exist (run ./infra/install-deps.sh)", bin.display());
        }
        // A port picked by `free_port` can be taken by another process (a benchmark, a server
        // a test left) before MinIO binds it: start again, on fresh ports in a fresh directory.
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_once(bin, certs.clone()).await {
                Err(e) if attempt < 4 && format!("{e:#}").contains("port is already in use") => {
                    eprintln!("{e:#}\nstarting MinIO again on other ports");
                }
                started => return started,
            }
        }
    }

    async fn start_once(bin: &Path, certs: Option<PathBuf>) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("nimbus-e2e-minio-").tempdir()?;
        std::fs::create_dir_all(dir.path().join("data"))?;
        let m = Minio {
            bin: bin.to_path_buf(),
            dir,
            port: free_port()?,
            console_port: free_port()?,
            certs,
            child: Mutex::new(None),
        };
        m.spawn_and_wait().await?;
        Ok(m)
    }

    /// `http://127.0.0.1:PORT` (`https://` with [`Minio::start_tls`]).
    pub fn endpoint(&self) -> String {
        let scheme = if self.certs.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("minio.log")
    }

    /// MinIO's drive: `<bucket>/<key>/xl.meta` and, for objects too large to inline, the
    /// data in `<bucket>/<key>/<uuid>/part.N` (a test can damage the drive under MinIO).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn pid(&self) -> Option<u32> {
        self.lock().as_ref().and_then(|c| c.id())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn spawn_and_wait(&self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path())?;
        let mut cmd = Command::new(&self.bin);
        let mut http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2));
        if let Some(certs) = &self.certs {
            cmd.arg("--certs-dir").arg(certs);
            let pem = std::fs::read(certs.join("public.crt")).context("MinIO's certificate")?;
            http = http.add_root_certificate(reqwest::Certificate::from_pem(&pem)?);
        }
        let child = cmd
            .arg("server")
            .arg(self.dir.path().join("data"))
            .arg("--quiet")
            .arg("--address")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--console-address")
            .arg(format!("127.0.0.1:{}", self.console_port))
            .env("MINIO_ROOT_USER", ACCESS_KEY)
            .env("MINIO_ROOT_PASSWORD", SECRET_KEY)
            .env("MINIO_UPDATE", "off")
            .env("MINIO_BROWSER", "off")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", self.bin.display()))?;
        *self.lock() = Some(child);

        let http = http.build()?;
        let url = format!("{}/minio/health/live", self.endpoint());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = http.get(&url).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            let exited = self.lock().as_mut().and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                bail!("MinIO exited during start-up ({status}); log:\n{}", self.log_tail(30));
            }
            if Instant::now() > deadline {
                bail!("MinIO not healthy after 60 s; log:\n{}", self.log_tail(30));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILL, and wait until the process is gone.
    pub async fn kill(&self) {
        let child = self.lock().take();
        if let Some(mut c) = child {
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
    }

    /// Starts MinIO again on the same data directory and port (after [`Minio::kill`]).
    pub async fn restart(&self) -> anyhow::Result<()> {
        self.kill().await;
        // The port was just released; retry while something (TIME_WAIT, a slow exit) holds it.
        let mut last = None;
        for _ in 0..5 {
            match self.spawn_and_wait().await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    self.kill().await;
                    last = Some(e);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("MinIO did not restart")))
    }

    pub fn log_tail(&self, lines: usize) -> String {
        crate::gateway::tail_file(&self.log_path(), lines)
    }
}

impl Drop for Minio {
    fn drop(&mut self) {
        if let Some(c) = self.lock().as_mut() {
            let _ = c.start_kill();
        }
    }
}

/// The address the cluster's nodes listen on: an extra address on the loopback device. MinIO
/// refuses 127.0.0.0/8 endpoints for a distributed setup when it detects a container
/// (`/.dockerenv`), as here; an address outside 127/8 on `lo` satisfies it while the traffic
/// still never leaves the machine.
pub const CLUSTER_HOST: &str = "10.231.0.1";

/// Puts [`CLUSTER_HOST`] on the loopback device if it is not there yet (needs root).
fn ensure_cluster_host() -> anyhow::Result<()> {
    let out = std::process::Command::new("ip")
        .args(["-o", "addr", "show", "dev", "lo"])
        .output()
        .context("cannot run `ip` (apt-get install iproute2)")?;
    if String::from_utf8_lossy(&out.stdout).contains(&format!("inet {CLUSTER_HOST}/")) {
        return Ok(());
    }
    let st = std::process::Command::new("ip")
        .args(["addr", "add", &format!("{CLUSTER_HOST}/32"), "dev", "lo"])
        .status()
        .context("cannot run `ip addr add`")?;
    if !st.success() {
        bail!("cannot add {CLUSTER_HOST} to the loopback device (needs root)");
    }
    Ok(())
}

/// A distributed MinIO on one machine: `n` server processes on the loopback device, one drive
/// each, erasure-coded across them (4 nodes: parity 2, so one node down keeps reads and
/// writes working). [`MinioCluster::kill_node`] and [`MinioCluster::restart_node`] inject
/// node failures.
pub struct MinioCluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    ports: Vec<u16>,
    console_ports: Vec<u16>,
    children: Mutex<Vec<Option<Child>>>,
}

impl Drop for MinioCluster {
    /// Stops every node before the temp dir goes: removing it under running nodes left their
    /// drives behind (about 150 MB per run in /tmp).
    fn drop(&mut self) {
        let mut children = self.lock();
        for c in children.iter_mut().flatten() {
            let _ = c.start_kill();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for c in children.iter_mut().flatten() {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl MinioCluster {
    pub async fn start(bin: &Path, n: usize) -> anyhow::Result<Self> {
        if !bin.is_file() {
            bail!("{ENV_BIN}={} does not exist (run ./infra/install-deps.sh)", bin.display());
        }
        ensure_cluster_host()?;
        let dir = tempfile::Builder::new().prefix("nimbus-e2e-minio-cluster-").tempdir()?;
        let mut ports = Vec::new();
        let mut console_ports = Vec::new();
        for i in 0..n {
            std::fs::create_dir_all(dir.path().join(format!("drive{i}")))?;
            ports.push(free_port()?);
            console_ports.push(free_port()?);
        }
        let c = MinioCluster {
            bin: bin.to_path_buf(),
            dir,
            ports,
            console_ports,
            children: Mutex::new((0..n).map(|_| None).collect()),
        };
        for i in 0..n {
            c.spawn(i)?;
        }
        c.wait_healthy(Duration::from_secs(120)).await?;
        Ok(c)
    }

    /// Node `i`'s S3 endpoint.
    pub fn endpoint(&self, i: usize) -> String {
        format!("http://{CLUSTER_HOST}:{}", self.ports[i])
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node{i}.log"))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<Child>>> {
        self.children.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn spawn(&self, i: usize) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path(i))?;
        let drives: Vec<String> = (0..self.ports.len())
            .map(|j| {
                format!(
                    "http://{CLUSTER_HOST}:{}{}",
                    self.ports[j],
                    self.dir.path().join(format!("drive{j}")).display()
                )
            })
            .collect();
        let child = Command::new(&self.bin)
            .arg("server")
            .args(&drives)
            .arg("--quiet")
            .arg("--address")
            .arg(format!("{CLUSTER_HOST}:{}", self.ports[i]))
            .arg("--console-address")
            .arg(format!("{CLUSTER_HOST}:{}", self.console_ports[i]))
            .env("MINIO_ROOT_USER", ACCESS_KEY)
            .env("MINIO_ROOT_PASSWORD", SECRET_KEY)
            .env("MINIO_UPDATE", "off")
            .env("MINIO_BROWSER", "off")
            // Drives on the root disk are fine for a test cluster.
            .env("MINIO_CI_CD", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", self.bin.display()))?;
        self.lock()[i] = Some(child);
        Ok(())
    }

    /// Waits until node 0 says the cluster has write quorum.
    pub async fn wait_healthy(&self, within: Duration) -> anyhow::Result<()> {
        let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build()?;
        let url = format!("{}/minio/health/cluster", self.endpoint(0));
        let deadline = Instant::now() + within;
        loop {
            if let Ok(r) = http.get(&url).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the MinIO cluster has no write quorum after {within:?}; node 0 log:\n{}", self.log_tail(0, 30));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// SIGKILL node `i` (its drive stays).
    pub async fn kill_node(&self, i: usize) {
        let child = self.lock()[i].take();
        if let Some(mut c) = child {
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
    }

    /// Starts node `i` again on its drive and port and waits for the cluster to be healthy.
    pub async fn restart_node(&self, i: usize) -> anyhow::Result<()> {
        self.kill_node(i).await;
        self.spawn(i)?;
        self.wait_healthy(Duration::from_secs(120)).await
    }

    pub fn log_tail(&self, i: usize, lines: usize) -> String {
        crate::gateway::tail_file(&self.log_path(i), lines)
    }
}
