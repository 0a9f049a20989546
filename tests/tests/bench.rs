//! `nimbus bench` end to end: the CLI binary against a real gateway (PostgreSQL + MinIO, and
//! the embedded default), the store target on the same MinIO, reports checked, the HTML
//! rendered by headless Chromium, a corrupted read failing the run, a non-admin run skipping
//! the cache bypass, and the bench data gone afterwards.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anyhow::{Context, ensure};
use nimbus_e2e::gateway::{GatewayOptions, run_on, user_password};
use nimbus_e2e::{ADMIN_PASSWORD, Backend, bins, minio};
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(300);

/// A tiny matrix: a range read, a small-file read and a 75/25 mix, few operations.
const TINY_JOB: &str = r#"{"name":"tiny","file_size":1048576,"small_files":8,"ops":40,"duration_ms":20000,
 "workloads":[{"op":"read","block_size":4096,"pattern":"random","queue_depth":4},
              {"op":"read","block_size":4096,"pattern":"zipf","queue_depth":2,"layout":"files"},
              {"op":"mixed","read_pct":75,"block_size":65536,"pattern":"sequential","queue_depth":2}]}"#;

struct Cli {
    bin: PathBuf,
    dir: tempfile::TempDir,
}

impl Cli {
    fn new() -> anyhow::Result<Self> {
        Ok(Cli { bin: bins::cli_bin()?, dir: tempfile::Builder::new().prefix("nimbus-e2e-bench-").tempdir()? })
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    async fn run(&self, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<Output> {
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.args(args);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("NIMBUS_") || k.starts_with("AWS_") || k.to_ascii_uppercase().ends_with("_PROXY") {
                cmd.env_remove(k.as_ref());
            }
        }
        cmd.env("NIMBUS_CONFIG_DIR", self.path("config")).env("HOME", self.path("home")).env("NO_PROXY", "*");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.kill_on_drop(true);
        let out = tokio::time::timeout(TIMEOUT, cmd.output()).await.context("nimbus did not finish")??;
        Ok(out)
    }

    async fn login(&self, url: &str, user: &str, password: &str) -> anyhow::Result<()> {
        let out = self.run(&["login", url, "--username", user], &[("NIMBUS_PASSWORD", password)]).await?;
        ensure!(out.status.success(), "login failed: {}", String::from_utf8_lossy(&out.stderr));
        Ok(())
    }
}

fn text(out: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn read_report(dir: &Path) -> anyhow::Result<Value> {
    let json = std::fs::read_to_string(dir.join("report.json")).context("report.json")?;
    ensure!(dir.join("report.html").is_file(), "no report.html");
    Ok(serde_json::from_str(&json)?)
}

fn check_results(report: &Value, targets: &[&str]) -> anyhow::Result<()> {
    ensure!(report["schema_version"] == 1);
    let results = report["results"].as_array().context("results")?;
    for t in targets {
        let mine: Vec<&Value> = results.iter().filter(|r| r["target"] == *t).collect();
        ensure!(!mine.is_empty(), "no results for {t}");
        for r in mine {
            ensure!(r["ops"].as_u64().unwrap_or(0) > 0, "{t}: no operations: {r}");
            ensure!(r["iops"].as_f64().unwrap_or(0.0) > 0.0, "{t}: no IOPS");
            ensure!(r["latency_us"]["p99.9"].as_u64().is_some(), "{t}: no p99.9");
            ensure!(r["workload"]["block_size"] == r["block_size"]);
            if r["op"] == "read" {
                ensure!(r["verified"] == r["ops"], "{t}: not every read verified: {r}");
            }
        }
    }
    Ok(())
}

/// Headless Chromium renders the report to a PNG kept under target/e2e-artifacts.
async fn screenshot(html: &Path, name: &str) -> anyhow::Result<()> {
    let chromium = Path::new("/usr/bin/chromium");
    if !chromium.is_file() {
        anyhow::bail!("chromium is not installed (infra/install-deps.sh installs it)");
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/e2e-artifacts");
    std::fs::create_dir_all(&dir)?;
    let png = dir.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&png);
    let profile = tempfile::tempdir()?;
    let out = tokio::process::Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1280,1600")
        .arg(format!("file://{}", html.display()))
        .kill_on_drop(true)
        .output()
        .await?;
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    ensure!(size > 20_000, "screenshot {} is {size} bytes: {}", png.display(), text(&out));
    Ok(())
}

async fn bucket(endpoint: &str, name: &str) -> anyhow::Result<()> {
    let script = format!(
        "import boto3\nboto3.client('s3', endpoint_url='{endpoint}', aws_access_key_id='{}', \
         aws_secret_access_key='{}', region_name='us-east-1').create_bucket(Bucket='{name}')",
        minio::ACCESS_KEY,
        minio::SECRET_KEY
    );
    let out = tokio::process::Command::new("python3").arg("-c").arg(script).output().await?;
    ensure!(out.status.success(), "create bucket: {}", text(&out));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn bench_against_minio_and_gateway() -> anyhow::Result<()> {
    run_on(Backend::PostgresS3, GatewayOptions::default().timeout(TIMEOUT), |gw| async move {
        let endpoint = gw.minio().context("MinIO")?.endpoint();
        bucket(&endpoint, "nimbus-bench-e2e").await?;
        let admin = Cli::new()?;
        admin.login(&gw.url, "admin", ADMIN_PASSWORD).await?;
        std::fs::write(admin.path("job.json"), TINY_JOB)?;
        let job = admin.path("job.json");
        let disk = admin.path("disk");
        let out_dir = admin.path("out");
        let s3_env = [
            ("AWS_ACCESS_KEY_ID", minio::ACCESS_KEY),
            ("AWS_SECRET_ACCESS_KEY", minio::SECRET_KEY),
            ("AWS_REGION", "us-east-1"),
        ];
        let args = |out: &Path| -> Vec<String> {
            [
                "bench",
                "--no-progress",
                "--job",
                &job.to_string_lossy(),
                "--output",
                &out.to_string_lossy(),
                "--disk-dir",
                &disk.to_string_lossy(),
                "--s3-endpoint",
                &endpoint,
                "--s3-bucket",
                "nimbus-bench-e2e",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        };
        let a = args(&out_dir);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = admin.run(&a, &s3_env).await?;
        ensure!(out.status.success(), "bench failed: {}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        ensure!(stdout.contains("gateway-uncached") && stdout.contains("p99"), "no table: {stdout}");
        let report = read_report(&out_dir)?;
        check_results(&report, &["store", "gateway-uncached", "gateway-cached", "disk"])?;
        ensure!(report["speedups"].as_array().is_some_and(|s| !s.is_empty()), "no speed-ups");
        screenshot(&out_dir.join("report.html"), "bench-minio").await?;

        // Cleanup: nothing left in the space, the bucket or the disk dir.
        let ls = admin.run(&["--json", "ls", "/"], &[]).await?;
        ensure!(!String::from_utf8_lossy(&ls.stdout).contains(".nimbus-bench"), "bench folder left: {}", text(&ls));
        ensure!(std::fs::read_dir(&disk).map(|mut d| d.next().is_none()).unwrap_or(true), "disk dir not cleaned");

        // A corrupted read fails the run, with a clear message and a nonzero exit.
        let bad_dir = admin.path("bad");
        let a = args(&bad_dir);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let mut env = s3_env.to_vec();
        env.push(("NIMBUS_BENCH_INJECT_CORRUPTION", "1"));
        let out = admin.run(&a, &env).await?;
        ensure!(!out.status.success(), "corruption not caught: {}", text(&out));
        ensure!(String::from_utf8_lossy(&out.stderr).contains("verification failed"), "{}", text(&out));
        ensure!(!bad_dir.join("report.json").exists());
        ensure!(
            std::fs::read_dir(&disk).map(|mut d| d.next().is_none()).unwrap_or(true),
            "disk dir not cleaned after failure"
        );

        // A user without admin rights: gateway-uncached skipped with its reason, not a failure.
        gw.create_user("benchuser", None).await?;
        let user = Cli::new()?;
        user.login(&gw.url, "benchuser", &user_password("benchuser")).await?;
        std::fs::write(user.path("job.json"), TINY_JOB)?;
        let uout = user.path("out");
        let out = user
            .run(
                &[
                    "bench",
                    "--no-progress",
                    "--job",
                    &user.path("job.json").to_string_lossy(),
                    "--output",
                    &uout.to_string_lossy(),
                    "--disk-dir",
                    &user.path("disk").to_string_lossy(),
                ],
                &[],
            )
            .await?;
        ensure!(out.status.success(), "user bench failed: {}", text(&out));
        let report = read_report(&uout)?;
        check_results(&report, &["gateway-cached", "disk"])?;
        let results = report["results"].as_array().context("results")?;
        ensure!(results.iter().all(|r| r["target"] != "gateway-uncached"));
        let skipped = report["skipped"].as_array().context("skipped")?;
        ensure!(skipped.iter().any(|s| s["target"] == "gateway-uncached"), "not listed as skipped: {skipped:?}");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn bench_quick_preset_on_embedded_default() -> anyhow::Result<()> {
    run_on(Backend::SqliteLocal, GatewayOptions::default().timeout(TIMEOUT), |gw| async move {
        let cli = Cli::new()?;
        cli.login(&gw.url, "admin", ADMIN_PASSWORD).await?;
        let out_dir = cli.path("out");
        let out = cli
            .run(
                &[
                    "bench",
                    "--preset",
                    "quick",
                    "--output",
                    &out_dir.to_string_lossy(),
                    "--disk-dir",
                    &cli.path("disk").to_string_lossy(),
                ],
                &[],
            )
            .await?;
        ensure!(out.status.success(), "bench failed: {}", text(&out));
        let report = read_report(&out_dir)?;
        check_results(&report, &["gateway-uncached", "gateway-cached", "disk"])?;
        screenshot(&out_dir.join("report.html"), "bench-quick").await?;
        Ok(())
    })
    .await
}

/// The drive targets: a real FUSE mount of the admin's space, benchmarked cold (data seeded
/// through the API, never read through the drive) and warm; every read verified.
#[tokio::test(flavor = "multi_thread")]
async fn bench_mount_targets() -> anyhow::Result<()> {
    use nimbus_e2e::mount::{Device, Drive, MountMode};
    run_on(Backend::SqliteLocal, GatewayOptions::default().timeout(TIMEOUT), |gw| async move {
        let dev = Device::new("bench-drive")?;
        dev.login(&gw.url, "admin", ADMIN_PASSWORD).await?;
        let drive =
            Drive::mount(&dev, &dev.root().join("drive"), &dev.root().join("cache"), MountMode::Background).await?;
        let cli = Cli::new()?;
        cli.login(&gw.url, "admin", ADMIN_PASSWORD).await?;
        std::fs::write(cli.path("job.json"), TINY_JOB)?;
        let out_dir = cli.path("out");
        let out = cli
            .run(
                &[
                    "bench",
                    "--no-progress",
                    "--job",
                    &cli.path("job.json").to_string_lossy(),
                    "--output",
                    &out_dir.to_string_lossy(),
                    "--mount",
                    &drive.mountpoint.to_string_lossy(),
                ],
                &[],
            )
            .await?;
        ensure!(out.status.success(), "bench failed: {}", text(&out));
        let report = read_report(&out_dir)?;
        check_results(&report, &["mount-cold", "mount-warm"])?;
        let speedups = report["speedups"].as_array().context("speedups")?;
        ensure!(
            speedups.iter().any(|s| s.to_string().contains("mount-warm")),
            "no warm-vs-cold speedup in the report: {speedups:?}"
        );
        drive.unmount().await?;
        Ok(())
    })
    .await
}
