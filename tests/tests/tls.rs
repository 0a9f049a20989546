//! The gateway over HTTPS with `--tls self-signed` (SQLite + local store): the certificate it
//! generates and keeps, clients that trust it or not, the CLI with `--ca-cert`, HSTS on every
//! answer of both listeners, the refusal to serve plain HTTP on a non-loopback address
//! (`--listen` and `--s3-listen`), and WebDAV's account-password sign-in refused for an account
//! with two-factor sign-in. And the other side: blocks read from an S3 store over HTTPS.
//!
//! The harness's readiness check only accepts `http://` URLs, so these tests start the gateway
//! themselves.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use nimbus_e2e::gateway::tail_file;
use nimbus_e2e::http::files_url;
use nimbus_e2e::minio::{self, Minio};
use nimbus_e2e::{ADMIN_PASSWORD, Backend, GatewayOptions, bins, data, run_on};
use serde_json::Value;
use tokio::process::{Child, Command};

/// Bound on each whole test.
const TEST_TIMEOUT: Duration = Duration::from_secs(240);
/// Bound on one CLI command.
const CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// A gateway process started by this file, killed when dropped.
struct TlsGateway {
    child: Child,
    url: String,
    logs: PathBuf,
}

/// `nimbus-gateway serve --listen LISTEN --data-dir DATA EXTRA...`, output captured in `logs`
/// (`gateway.stdout`, `gateway.stderr`), environment free of the developer's NIMBUS_/AWS_ settings.
fn gateway_command(listen: &str, data: &Path, logs: &Path, extra: &[&str]) -> anyhow::Result<Command> {
    let bin = bins::gateway_bin()?;
    let mut cmd = Command::new(&bin);
    cmd.arg("serve").arg("--listen").arg(listen).arg("--data-dir").arg(data).args(extra);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("NIMBUS_") || k.starts_with("AWS_") {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd.env("NIMBUS_ADMIN_PASSWORD", ADMIN_PASSWORD);
    std::fs::create_dir_all(logs)?;
    let stdout = std::fs::File::create(logs.join("gateway.stdout"))?;
    let stderr = std::fs::File::create(logs.join("gateway.stderr"))?;
    cmd.stdin(Stdio::null()).stdout(stdout).stderr(stderr).kill_on_drop(true);
    Ok(cmd)
}

fn print_logs(logs: &Path, why: &str) {
    eprintln!(
        "---- {why}: gateway stdout ----\n{}\n---- gateway stderr ----\n{}\n---- end ----",
        tail_file(&logs.join("gateway.stdout"), 20),
        tail_file(&logs.join("gateway.stderr"), 60)
    );
}

impl TlsGateway {
    /// Starts `--tls self-signed` on loopback with the data dir `data`; waits for the
    /// `listening on https://127.0.0.1:PORT` line.
    async fn start(data: &Path, logs: &Path) -> anyhow::Result<TlsGateway> {
        TlsGateway::start_with(data, logs, &[]).await
    }

    /// [`TlsGateway::start`] with more flags.
    async fn start_with(data: &Path, logs: &Path, extra: &[&str]) -> anyhow::Result<TlsGateway> {
        let args: Vec<&str> = ["--tls", "self-signed"].iter().chain(extra).copied().collect();
        let mut cmd = gateway_command("127.0.0.1:0", data, logs, &args)?;
        let mut child = cmd.spawn().context("cannot start the gateway")?;
        let deadline = Instant::now() + Duration::from_secs(90);
        let url = loop {
            let out = std::fs::read_to_string(logs.join("gateway.stdout")).unwrap_or_default();
            if let Some((_, rest)) = out.lines().find_map(|l| l.split_once("listening on ")) {
                let url = rest.split_whitespace().next().unwrap_or_default().trim_end_matches('/').to_string();
                if !url.starts_with("https://127.0.0.1:") {
                    let _ = child.start_kill();
                    print_logs(logs, "unexpected listen line");
                    bail!("expected `listening on https://127.0.0.1:PORT`, got {rest:?}");
                }
                break url;
            }
            if let Some(status) = child.try_wait()? {
                print_logs(logs, "the gateway exited during start-up");
                bail!("the gateway exited during start-up ({status})");
            }
            if Instant::now() > deadline {
                let _ = child.start_kill();
                print_logs(logs, "no listening line");
                bail!("the gateway printed no `listening on` line within 90 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        Ok(TlsGateway { child, url, logs: logs.to_path_buf() })
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        self.child.start_kill()?;
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .context("the gateway did not stop")??;
        Ok(())
    }
}

impl Drop for TlsGateway {
    fn drop(&mut self) {
        if std::thread::panicking() {
            print_logs(&self.logs, "test failed");
        }
        let _ = self.child.start_kill();
    }
}

/// A client that trusts only `cert_pem`.
fn trusting_client(cert_pem: &[u8]) -> anyhow::Result<reqwest::Client> {
    let cert = reqwest::Certificate::from_pem(cert_pem).context("the gateway's cert.pem is not a PEM certificate")?;
    reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .tls_certs_only([cert])
        .build()
        .context("building a trusting client")
}

/// Logs in as admin over `client`; returns the token.
async fn login(client: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let r = client
        .post(format!("{url}/api/v1/auth/login"))
        .json(&serde_json::json!({"username": "admin", "password": ADMIN_PASSWORD}))
        .send()
        .await
        .with_context(|| format!("login over {url}"))?;
    let status = r.status().as_u16();
    let body: Value = r.json().await?;
    ensure!(status == 200, "login over {url}: {status} {body}");
    Ok(body["token"].as_str().context("no token in the login response")?.to_string())
}

/// Runs `nimbus ARGS` with its own config dir; returns (status, stdout, stderr).
async fn nimbus(config: &Path, args: &[&str]) -> anyhow::Result<(ExitStatus, String, String)> {
    let mut cmd = Command::new(bins::cli_bin()?);
    cmd.args(args);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("NIMBUS_") || k.to_ascii_uppercase().ends_with("_PROXY") {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd.env("NIMBUS_CONFIG_DIR", config)
        .env("HOME", config)
        .env("NIMBUS_PASSWORD", ADMIN_PASSWORD)
        .env("NO_PROXY", "*")
        .current_dir(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(CLI_TIMEOUT, cmd.output())
        .await
        .with_context(|| format!("`nimbus {}` did not finish in time", args.join(" ")))??;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    for bad in ["panicked", "backtrace"] {
        ensure!(!stderr.to_lowercase().contains(bad), "`nimbus {}` crashed: {stderr}", args.join(" "));
    }
    Ok((out.status, stdout, stderr))
}

async fn nimbus_ok(config: &Path, args: &[&str]) -> anyhow::Result<String> {
    let (status, stdout, stderr) = nimbus(config, args).await?;
    ensure!(status.success(), "`nimbus {}` failed ({status}):\n{stdout}\n{stderr}", args.join(" "));
    Ok(stdout)
}

async fn self_signed_body(tmp: &Path) -> anyhow::Result<()> {
    let data = tmp.join("data");
    let gw = TlsGateway::start(&data, &tmp.join("logs1")).await?;
    let url = gw.url.clone();

    // The certificate and a private key beside it.
    let cert_path = data.join("tls").join("cert.pem");
    let key_path = data.join("tls").join("key.pem");
    let cert = std::fs::read(&cert_path).with_context(|| format!("{} missing", cert_path.display()))?;
    let key = std::fs::read(&key_path).with_context(|| format!("{} missing", key_path.display()))?;
    ensure!(String::from_utf8_lossy(&cert).contains("BEGIN CERTIFICATE"), "cert.pem is not a PEM certificate");
    ensure!(String::from_utf8_lossy(&key).contains("PRIVATE KEY"), "key.pem holds no private key");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_path)?.permissions().mode() & 0o777;
        ensure!(mode == 0o600, "key.pem mode is {mode:o}, expected 600");
    }

    // A client trusting the certificate signs in over HTTPS.
    let trusting = trusting_client(&cert)?;
    let token = login(&trusting, &url).await?;
    let r = trusting.get(format!("{url}/api/v1/me")).bearer_auth(&token).send().await?;
    ensure!(r.status().as_u16() == 200, "GET /api/v1/me over https: {}", r.status());
    // One that does not trust it cannot even connect.
    let untrusting =
        reqwest::Client::builder().no_proxy().connect_timeout(Duration::from_secs(10)).timeout(Duration::from_secs(30));
    let untrusting = untrusting.build()?;
    match untrusting.get(format!("{url}/api/v1/info")).send().await {
        Ok(r) => bail!("a client without the certificate got an answer: {}", r.status()),
        Err(e) => ensure!(e.is_connect() || e.is_request(), "unexpected error kind: {e:?}"),
    }
    // Plain HTTP on the TLS port gets no API answer.
    let plain_url = url.replacen("https://", "http://", 1);
    if let Ok(r) = untrusting.get(format!("{plain_url}/api/v1/info")).send().await {
        ensure!(!r.status().is_success(), "plain HTTP on the TLS port answered {}", r.status());
    }

    // The CLI: refused without the certificate (with a hint), fine with --ca-cert.
    let config = tmp.join("cli");
    std::fs::create_dir_all(&config)?;
    let (status, stdout, stderr) = nimbus(&config, &["login", &url, "--username", "admin"]).await?;
    ensure!(!status.success(), "login to an untrusted certificate succeeded:\n{stdout}\n{stderr}");
    ensure!(stderr.contains("--ca-cert"), "the error should point to --ca-cert: {stderr}");
    ensure!(!config.join("nimbus").join("session.json").exists(), "a failed login saved a session");

    let out =
        nimbus_ok(&config, &["login", &url, "--username", "admin", "--ca-cert", cert_path.to_str().unwrap_or("")])
            .await?;
    ensure!(out.contains(&format!("Logged in to {url} as admin")), "{out}");
    let local = config.join("hello.txt");
    std::fs::write(&local, b"over tls\n")?;
    nimbus_ok(&config, &["put", local.to_str().unwrap_or(""), "/hello.txt"]).await?;
    let out = nimbus_ok(&config, &["ls"]).await?;
    ensure!(out.lines().any(|l| l == "hello.txt"), "ls over TLS: {out}");
    let out = nimbus_ok(&config, &["get", "/hello.txt", "-"]).await?;
    ensure!(out == "over tls\n", "get over TLS: {out:?}");
    let out = nimbus_ok(&config, &["whoami"]).await?;
    ensure!(out.contains(&format!("admin (admin) on {url}")), "{out}");

    // --insecure works, with a warning.
    let config2 = tmp.join("cli-insecure");
    std::fs::create_dir_all(&config2)?;
    let (status, stdout, stderr) = nimbus(&config2, &["login", &url, "--username", "admin", "--insecure"]).await?;
    ensure!(status.success(), "login --insecure failed:\n{stdout}\n{stderr}");
    ensure!(stderr.contains("warning") && stderr.contains("--insecure"), "no warning for --insecure: {stderr}");

    // A restart keeps the certificate: same files, and the old trust still works.
    gw.stop().await?;
    let gw = TlsGateway::start(&data, &tmp.join("logs2")).await?;
    ensure!(std::fs::read(&cert_path)? == cert, "the certificate changed across a restart");
    ensure!(std::fs::read(&key_path)? == key, "the key changed across a restart");
    login(&trusting, &gw.url).await.context("the restarted gateway does not serve the same certificate")?;
    gw.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_signed_certificate() -> anyhow::Result<()> {
    let tmp = tempfile::Builder::new().prefix("nimbus-e2e-tls-").tempdir()?;
    tokio::time::timeout(TEST_TIMEOUT, self_signed_body(tmp.path()))
        .await
        .with_context(|| format!("the test did not finish within {TEST_TIMEOUT:?}"))?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_on_all_interfaces_is_refused() -> anyhow::Result<()> {
    let tmp = tempfile::Builder::new().prefix("nimbus-e2e-tls-").tempdir()?;
    let logs = tmp.path().join("logs");
    let mut cmd = gateway_command("0.0.0.0:0", &tmp.path().join("data"), &logs, &[])?;
    let mut child = cmd.spawn().context("cannot start the gateway")?;
    let status = match tokio::time::timeout(Duration::from_secs(60), child.wait()).await {
        Ok(s) => s?,
        Err(_) => {
            let _ = child.start_kill();
            print_logs(&logs, "still running");
            bail!("the gateway kept running on 0.0.0.0 without TLS");
        }
    };
    let stdout = std::fs::read_to_string(logs.join("gateway.stdout"))?;
    let stderr = std::fs::read_to_string(logs.join("gateway.stderr"))?;
    ensure!(!status.success(), "expected a non-zero exit, got {status}\n{stdout}\n{stderr}");
    ensure!(!stdout.contains("listening on"), "it announced it was listening:\n{stdout}");
    ensure!(stderr.contains("--tls"), "the message should mention --tls:\n{stderr}");
    Ok(())
}

/// `--s3-listen` off loopback without TLS: the same refusal as `--listen`, before the data dir
/// or any port is touched, saying why and what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_s3_door_off_loopback_is_refused() -> anyhow::Result<()> {
    let tmp = tempfile::Builder::new().prefix("nimbus-e2e-tls-").tempdir()?;
    let (logs, data) = (tmp.path().join("logs"), tmp.path().join("data"));
    let mut cmd = gateway_command("127.0.0.1:0", &data, &logs, &["--s3-listen", "0.0.0.0:0"])?;
    let mut child = cmd.spawn().context("cannot start the gateway")?;
    let status = match tokio::time::timeout(Duration::from_secs(60), child.wait()).await {
        Ok(s) => s?,
        Err(_) => {
            let _ = child.start_kill();
            print_logs(&logs, "still running");
            bail!("the gateway kept running with a plain-HTTP S3 door on 0.0.0.0");
        }
    };
    let stdout = std::fs::read_to_string(logs.join("gateway.stdout"))?;
    let stderr = std::fs::read_to_string(logs.join("gateway.stderr"))?;
    ensure!(!status.success(), "expected a non-zero exit, got {status}\n{stdout}\n{stderr}");
    ensure!(!stdout.contains("listening on") && !stdout.contains("S3-compatible API on"), "it listened:\n{stdout}");
    for needle in ["--s3-listen", "0.0.0.0", "plain HTTP", "--tls self-signed", "--tls-cert", "loopback"] {
        ensure!(stderr.contains(needle), "the message should mention {needle:?}:\n{stderr}");
    }
    ensure!(!data.exists(), "the refused start created the data dir");
    Ok(())
}

/// With TLS the S3 door may listen on every interface; both listeners send HSTS (and the
/// browser-safety headers) on every answer, errors included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_on_every_interface_with_hsts() -> anyhow::Result<()> {
    let tmp = tempfile::Builder::new().prefix("nimbus-e2e-tls-").tempdir()?;
    let body = async {
        let (data, logs) = (tmp.path().join("data"), tmp.path().join("logs"));
        let gw = TlsGateway::start_with(&data, &logs, &["--s3-listen", "0.0.0.0:0"]).await?;
        let out = std::fs::read_to_string(logs.join("gateway.stdout"))?;
        let s3 = out
            .lines()
            .find_map(|l| l.split_once("S3-compatible API on ").map(|(_, r)| r.to_string()))
            .with_context(|| format!("no S3 listening line:\n{out}"))?;
        let port = s3
            .split_whitespace()
            .next()
            .and_then(|u| u.strip_prefix("https://0.0.0.0:"))
            .with_context(|| format!("expected `S3-compatible API on https://0.0.0.0:PORT`, got {s3:?}"))?
            .to_string();
        let client = trusting_client(&std::fs::read(data.join("tls").join("cert.pem"))?)?;
        let token = login(&client, &gw.url).await?;
        let hsts = |what: &str, r: &reqwest::Response| {
            let h = r.headers();
            let v = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            ensure!(v("strict-transport-security").contains("max-age=31536000"), "{what}: no HSTS: {h:?}");
            ensure!(v("x-content-type-options") == "nosniff", "{what}: no nosniff: {h:?}");
            ensure!(v("content-security-policy").contains("sandbox"), "{what}: no sandbox CSP: {h:?}");
            Ok(())
        };
        let r = client.get(format!("{}/api/v1/info", gw.url)).send().await?;
        hsts("GET /api/v1/info", &r)?;
        let r = client.get(format!("{}/api/v1/nothing-here", gw.url)).send().await?;
        ensure!(r.status() == 404, "{}", r.status());
        hsts("a 404", &r)?;
        let r = client
            .put(format!("{}/api/v1/files/page.html", gw.url))
            .bearer_auth(&token)
            .body("<script>alert(1)</script>")
            .send()
            .await?;
        ensure!(r.status() == 201, "upload over TLS: {}", r.status());
        let r = client.get(format!("{}/api/v1/files/page.html", gw.url)).bearer_auth(&token).send().await?;
        ensure!(r.status() == 200, "{}", r.status());
        hsts("a file over REST", &r)?;
        let r = client.get(format!("{}/dav/page.html", gw.url)).bearer_auth(&token).send().await?;
        ensure!(r.status() == 200, "{}", r.status());
        hsts("a file over WebDAV", &r)?;
        // The console's pages (built or not) get HSTS too; a built one its own CSP.
        let r = client.get(format!("{}/admin/", gw.url)).send().await?;
        ensure!(r.headers().contains_key("strict-transport-security"), "/admin/: no HSTS: {:?}", r.headers());
        // The S3 door, reached on loopback through its all-interfaces listener.
        let r = client.get(format!("https://127.0.0.1:{port}/")).send().await?;
        ensure!(r.status() == 403, "anonymous ListBuckets: {}", r.status());
        hsts("the S3 door", &r)?;
        gw.stop().await
    };
    tokio::time::timeout(TEST_TIMEOUT, body).await.with_context(|| format!("not done within {TEST_TIMEOUT:?}"))?
}

/// Over TLS WebDAV takes the account password, but not once the account has two-factor sign-in
/// on (a password is one factor): then only app passwords (device tokens) open it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webdav_password_refused_with_two_factor() -> anyhow::Result<()> {
    let tmp = tempfile::Builder::new().prefix("nimbus-e2e-tls-").tempdir()?;
    tokio::time::timeout(TEST_TIMEOUT, async {
        let data = tmp.path().join("data");
        let gw = TlsGateway::start(&data, &tmp.path().join("logs")).await?;
        let client = trusting_client(&std::fs::read(data.join("tls").join("cert.pem"))?)?;
        let token = login(&client, &gw.url).await?;
        let propfind = |secret: &str| {
            client
                .request(reqwest::Method::from_bytes(b"PROPFIND").expect("method"), format!("{}/dav/", gw.url))
                .header("depth", "0")
                .basic_auth("admin", Some(secret))
                .send()
        };
        ensure!(propfind(ADMIN_PASSWORD).await?.status().as_u16() == 207, "the password opens WebDAV over TLS");

        let r = client.post(format!("{}/api/v1/auth/totp", gw.url)).bearer_auth(&token).send().await?;
        let enrol: Value = r.json().await?;
        let secret = enrol["secret"].as_str().context("no secret")?.to_string();
        let bytes = totp_rs::Secret::Encoded(secret).to_bytes().map_err(|e| anyhow::anyhow!("base32: {e:?}"))?;
        let code = totp_rs::TOTP::new_unchecked(totp_rs::Algorithm::SHA1, 6, 1, 30, bytes, None, String::new())
            .generate_current()?;
        let r = client
            .post(format!("{}/api/v1/auth/totp/confirm", gw.url))
            .bearer_auth(&token)
            .json(&serde_json::json!({ "code": code }))
            .send()
            .await?;
        ensure!(r.status().as_u16() == 200, "confirm: {}", r.status());

        let r = propfind(ADMIN_PASSWORD).await?;
        ensure!(r.status().as_u16() == 401, "the password alone after two-factor: {}", r.status());
        let body = r.text().await?;
        ensure!(body.contains("app password"), "the refusal says what to use: {body}");
        ensure!(propfind(&token).await?.status().as_u16() == 207, "an app password still opens WebDAV");
        gw.stop().await
    })
    .await
    .with_context(|| format!("the test did not finish within {TEST_TIMEOUT:?}"))?
}

/// Blocks read from an S3 store on `https://` (MinIO with a self-signed certificate, which the
/// gateway trusts through `SSL_CERT_FILE` as it would a company CA): whole, bypassing the cache,
/// in ranges and streamed, every byte right, and all of it through the lean block GET (its
/// failures would fall back to the SDK quietly, so the test reads the debug log for them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_reads_from_an_https_store() -> anyhow::Result<()> {
    if !Backend::PostgresS3.should_run() {
        return Ok(());
    }
    let bin = minio::configured_bin().context("NIMBUS_TEST_MINIO_BIN is not set")?;
    let certs = tempfile::tempdir()?;
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()])?;
    let ca = certs.path().join("public.crt");
    std::fs::write(&ca, ck.cert.pem())?;
    std::fs::write(certs.path().join("private.key"), ck.signing_key.serialize_pem())?;
    let minio = Minio::start_tls(&bin, certs.path()).await?;
    ensure!(minio.endpoint().starts_with("https://"), "{}", minio.endpoint());
    let opts = GatewayOptions::default()
        .s3_store(minio.endpoint())
        .env("SSL_CERT_FILE", ca.to_string_lossy())
        .arg("--log")
        .arg("info,nimbus_gateway::blocks=debug");
    let r = run_on(Backend::PostgresS3, opts, |gw| async move {
        // The cache bypass is for administrators.
        let api = gw.admin().await?;
        let block = api.block_size().await?;
        let content = data::bytes("https store", 2 * block + 12_345);
        api.put_file("/f.bin", content.clone()).await?.entry(201)?;
        let url = files_url("/f.bin");
        let whole = api.req(reqwest::Method::GET, &url).header("x-nimbus-cache", "bypass").send().await?;
        ensure!(whole.status == 200 && whole.body.as_ref() == content.as_slice(), "bypassed read: {}", whole.status);
        // One range inside a block (streamed from the store) and one across two.
        for (start, end) in [(1000, 5000), (block - 100, block + 100)] {
            let r = api
                .req(reqwest::Method::GET, &url)
                .header("x-nimbus-cache", "bypass")
                .header("range", &format!("bytes={start}-{}", end - 1))
                .send()
                .await?;
            ensure!(r.status == 206 && r.body.as_ref() == &content[start..end], "range {start}..{end}: {}", r.status);
        }
        let cached = api.get_file("/f.bin").await?;
        ensure!(cached.status == 200 && cached.body.as_ref() == content.as_slice(), "read: {}", cached.status);
        let logs = gw.logs();
        let log = std::fs::read_to_string(logs.stdout_path()).unwrap_or_default()
            + &std::fs::read_to_string(logs.stderr_path()).unwrap_or_default();
        for sign in ["lean block reads unavailable", "lean block GET", "block GET failed"] {
            ensure!(!log.contains(sign), "the lean GET did not serve every read ({sign:?} in the log):\n{log}");
        }
        Ok(())
    })
    .await;
    if r.is_err() {
        eprintln!("--- MinIO log (tail) ---\n{}", minio.log_tail(30));
    }
    r
}
