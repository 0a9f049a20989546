//! Scale-out on one machine: PostgreSQL, a 4-node MinIO cluster (one drive each, erasure
//! coded), two gateways and nginx in front as the load balancer. A bounded mixed load (new
//! files written, earlier ones read back and verified) runs through nginx while one store
//! node is killed, then one gateway is stopped, then both come back. Clients retry failed
//! requests, as real ones do. At the end every acknowledged write reads back identically
//! through each gateway, the listing has exactly those files, and fsck finds nothing wrong.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use nimbus_e2e::minio::{MinioCluster, configured_bin, free_port};
use nimbus_e2e::ops::run_tool;
use nimbus_e2e::{Api, Backend, GatewayOptions, data, run_on};
use tokio::process::{Child, Command};

const WORKERS: usize = 4;
const OPS_PER_WORKER: usize = 12;

/// nginx on a free loopback port, balancing over `upstreams`, retrying the next one when a
/// gateway refuses connections.
struct Nginx {
    _dir: tempfile::TempDir,
    _child: Child,
    url: String,
}

impl Nginx {
    async fn start(upstreams: &[String]) -> anyhow::Result<Nginx> {
        let dir = tempfile::Builder::new().prefix("nimbus-e2e-nginx-").tempdir()?;
        let port = free_port()?;
        let servers: String = upstreams
            .iter()
            .map(|u| format!("server {} max_fails=1 fail_timeout=2s;\n", u.trim_start_matches("http://")))
            .collect();
        let d = dir.path().display();
        let conf = format!(
            "daemon off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/error.log warn;\n\
             events {{ worker_connections 512; }}\n\
             http {{\n access_log off; client_max_body_size 0;\n\
             client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;\n\
             uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
             upstream gateways {{\n{servers}}}\n\
             server {{ listen 127.0.0.1:{port};\n\
               location / {{ proxy_pass http://gateways; proxy_http_version 1.1; proxy_set_header Connection \"\";\n\
                 proxy_request_buffering off; proxy_buffering off;\n\
                 proxy_next_upstream error timeout; proxy_connect_timeout 2s; }} }}\n}}\n"
        );
        std::fs::write(dir.path().join("nginx.conf"), conf)?;
        let child = Command::new("nginx")
            .args(["-p", &d.to_string(), "-c", &format!("{d}/nginx.conf")])
            .kill_on_drop(true)
            .spawn()
            .context("cannot start nginx (apt-get install nginx)")?;
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::builder().no_proxy().build()?;
        for _ in 0..100 {
            if http.get(format!("{url}/healthz")).send().await.is_ok() {
                return Ok(Nginx { _dir: dir, _child: child, url });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("nginx did not come up: {}", std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default())
    }
}

impl Drop for Nginx {
    /// SIGTERM lets the master take its workers down (a SIGKILL would orphan them).
    fn drop(&mut self) {
        if let Some(pid) = self._child.id() {
            let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
            for _ in 0..40 {
                if self._child.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Files whose upload was acknowledged: path → content hash.
type Acked = Arc<Mutex<BTreeMap<String, String>>>;

/// Retries a request while the answer is a transport error or a 5xx (what a client does when
/// the node it reached goes away), up to ~10 s.
async fn with_retries<F, Fut>(what: &str, mut f: F) -> anyhow::Result<nimbus_e2e::http::Resp>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<nimbus_e2e::http::Resp>>,
{
    let mut last = String::new();
    for _ in 0..40 {
        match f().await {
            Ok(r) if r.status < 500 => return Ok(r),
            Ok(r) => last = r.to_string(),
            Err(e) => last = format!("{e:#}"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    bail!("{what}: still failing after retries: {last}")
}

/// One phase of load: each worker writes new files and reads back earlier acknowledged ones.
async fn load(api: &Api, acked: &Acked, phase: &str) -> anyhow::Result<()> {
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let (api, acked, phase) = (api.clone(), acked.clone(), phase.to_string());
        tasks.push(tokio::spawn(async move {
            for i in 0..OPS_PER_WORKER {
                let path = format!("/load/{phase}/w{w}-{i}.bin");
                let len = 50_000 + (w * 131_071 + i * 65_537) % 1_500_000;
                let body = data::bytes(&path, len);
                let r = with_retries(&format!("PUT {path}"), || api.put_file(&path, body.clone())).await?;
                r.check_any(&[200, 201])?;
                acked.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.insert(path.clone(), data::hash_hex(&body));
                // Read back an earlier acknowledged file (every read verified).
                let pick = {
                    let a = acked.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                    let n = a.len();
                    a.iter().nth((w * 7 + i * 13) % n).map(|(p, h)| (p.clone(), h.clone()))
                };
                if let Some((p, h)) = pick {
                    let r = with_retries(&format!("GET {p}"), || api.get_file(&p)).await?;
                    r.check(200)?;
                    ensure!(data::hash_hex(&r.body) == h, "{p} read back different content during {phase}");
                }
            }
            Ok::<(), anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gateways_four_store_nodes_and_a_balancer() -> anyhow::Result<()> {
    let require = std::env::var("NIMBUS_TEST_REQUIRE_ALL").is_ok_and(|v| v == "1");
    let Some(bin) = configured_bin() else {
        ensure!(!require, "NIMBUS_TEST_MINIO_BIN is not set");
        eprintln!("skipped: NIMBUS_TEST_MINIO_BIN is not set");
        return Ok(());
    };
    let cluster = Arc::new(MinioCluster::start(&bin, 4).await?);
    let opts = GatewayOptions::default().s3_store(cluster.endpoint(0)).timeout(Duration::from_secs(600));
    let c = cluster.clone();
    run_on(Backend::PostgresS3, opts, move |mut gw| async move {
        let cluster = c;
        let (_, alice) = gw.user("alice", None).await?;
        let token = alice.token().context("token")?.to_string();
        let b = gw.start_sibling().await?;
        let lb = Nginx::start(&[gw.url.clone(), b.url.clone()]).await?;
        let api = Api::new(&lb.url)?.with_token(token.clone());
        let acked: Acked = Arc::default();

        load(&api, &acked, "steady").await.context("steady load")?;

        // One store node dies mid-load: erasure coding keeps reads and writes going.
        let run = {
            let (api, acked) = (api.clone(), acked.clone());
            tokio::spawn(async move { load(&api, &acked, "store-node-down").await })
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        cluster.kill_node(3).await;
        run.await?.context("load with a store node down")?;

        // One gateway stops mid-load: nginx and client retries move to the other.
        let run = {
            let (api, acked) = (api.clone(), acked.clone());
            tokio::spawn(async move { load(&api, &acked, "gateway-down").await })
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        gw.stop().await?;
        run.await?.context("load with a gateway down")?;

        // Both come back; the load goes on.
        cluster.restart_node(3).await?;
        gw.start_again().await?;
        load(&api, &acked, "recovered").await.context("load after recovery")?;

        // Every acknowledged write, through each gateway directly.
        let acked = acked.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
        ensure!(acked.len() == 4 * WORKERS * OPS_PER_WORKER, "{} writes acknowledged", acked.len());
        let direct = [gw.api().with_token(token.clone()), b.api.with_token(token.clone())];
        for (path, hash) in &acked {
            for node in &direct {
                let r = node.get_file(path).await?;
                r.check(200)?;
                ensure!(&data::hash_hex(&r.body) == hash, "{path} differs through {}", node.base());
            }
        }
        // Exactly those files exist.
        let mut listed = 0;
        for phase in ["steady", "store-node-down", "gateway-down", "recovered"] {
            let l: nimbus_proto::wire::DirListing =
                direct[1].get(&format!("/api/v1/dirs/load/{phase}?limit=1000")).await?.ok(200)?;
            listed += l.entries.len();
        }
        ensure!(listed == acked.len(), "{listed} files listed, {} acknowledged", acked.len());
        // The registry and the store agree.
        let fsck = run_tool(&gw, "fsck", &["--json"]).await?;
        fsck.expect_code(0)?;
        drop(lb);
        Ok(())
    })
    .await
}

/// The scaling benchmark (not a test: `cargo test --test cluster -- --ignored --nocapture`):
/// aggregate throughput of a fixed mixed load (1 MiB writes, each read back and verified)
/// through nginx over 1, 2 and 3 gateways on the same PostgreSQL and 4-node MinIO cluster.
/// Prints one line per gateway count and the scaling efficiency against one gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a benchmark; run it on purpose on a quiet machine"]
async fn scaling_benchmark() -> anyhow::Result<()> {
    const CLIENTS: usize = 8;
    const SECONDS: u64 = 20;
    let bin = configured_bin().context("NIMBUS_TEST_MINIO_BIN is not set")?;
    let cluster = Arc::new(MinioCluster::start(&bin, 4).await?);
    let opts = GatewayOptions::default().s3_store(cluster.endpoint(0)).timeout(Duration::from_secs(900));
    run_on(Backend::PostgresS3, opts, move |gw| async move {
        let (_, alice) = gw.user("alice", None).await?;
        let token = alice.token().context("token")?.to_string();
        let b = gw.start_sibling().await?;
        let c = gw.start_sibling().await?;
        let urls = [gw.url.clone(), b.url.clone(), c.url.clone()];
        let mut results = Vec::new();
        for n in 1..=3 {
            let lb = Nginx::start(&urls[..n]).await?;
            let api = Api::new(&lb.url)?.with_token(token.clone());
            let bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let deadline = tokio::time::Instant::now() + Duration::from_secs(SECONDS);
            let mut tasks = Vec::new();
            for w in 0..CLIENTS {
                let (api, bytes) = (api.clone(), bytes.clone());
                tasks.push(tokio::spawn(async move {
                    let mut i = 0;
                    while tokio::time::Instant::now() < deadline {
                        let path = format!("/scale/{n}/w{w}-{i}.bin");
                        let body = data::bytes(&path, 1 << 20);
                        api.put_file(&path, body.clone()).await?.check_any(&[200, 201])?;
                        let r = api.get_file(&path).await?;
                        r.check(200)?;
                        ensure!(r.body.as_ref() == body.as_slice(), "{path} read back different");
                        bytes.fetch_add(2 << 20, std::sync::atomic::Ordering::Relaxed);
                        i += 1;
                    }
                    Ok::<(), anyhow::Error>(())
                }));
            }
            let started = std::time::Instant::now();
            for t in tasks {
                t.await??;
            }
            let secs = started.elapsed().as_secs_f64();
            let mib_s = bytes.load(std::sync::atomic::Ordering::Relaxed) as f64 / (1 << 20) as f64 / secs;
            results.push(mib_s);
            let eff = mib_s / (results[0] * n as f64);
            println!(
                "gateways={n} clients={CLIENTS} throughput={mib_s:.1} MiB/s (writes+verified reads) efficiency={eff:.2}"
            );
            drop(lb);
        }
        let hwm = |pid: Option<u32>| -> String {
            pid.and_then(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("VmHWM:"))
                        .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_string())
                })
                .unwrap_or_else(|| "?".into())
        };
        println!("peak RSS (KiB): gateway A {}, B {}, C {}", hwm(Some(gw.pid())), hwm(b.child.id()), hwm(c.child.id()));
        Ok(())
    })
    .await
}
