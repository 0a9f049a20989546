//! The real Nimbus Drive app (`nimbus-drive`, the Tauri shell over nimbus-desktop-core, its
//! webview showing the built UI) under Xvfb, driven through its window with WebDriver
//! (tauri-driver in front of Debian's WebKitWebDriver) against a real gateway: sign in, mount
//! (a real FUSE mount made by the app), a file written through the drive appears via the REST
//! API, unmount, sign out (the token is revoked). Screenshots of the sign-in and main windows go
//! to client/desktop/ui/e2e-artifacts/app-*.png.
//!
//! Needs: `cargo build -p nimbus-desktop` (target/debug/nimbus-drive, or `NIMBUS_DESKTOP_BIN`),
//! `tauri-driver` (`NIMBUS_TAURI_DRIVER`, else on PATH or in ~/.cargo/bin; infra/install-deps.sh
//! installs it), `WebKitWebDriver` and `Xvfb` (Debian: webkit2gtk-driver, xvfb). When one is
//! missing the test fails under `NIMBUS_TEST_REQUIRE_ALL=1` (infra/test.sh) and skips otherwise.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use nimbus_e2e::gateway::user_password;
use nimbus_e2e::mount::{eventually, force_unmount, is_mounted};
use nimbus_e2e::{Backend, GatewayOptions, run_on};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

const STEP: Duration = Duration::from_secs(60);

fn find_tool(env: &str, name: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    // infra/install-deps.sh builds tauri-driver into $NIMBUS_CACHE_DIR/bin.
    let cache = std::env::var_os("NIMBUS_CACHE_DIR").filter(|p| !p.is_empty());
    dirs.push(cache.map_or_else(|| PathBuf::from("/var/cache/nimbus"), PathBuf::from).join("bin"));
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

fn app_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NIMBUS_DESKTOP_BIN").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    // The test binary is target/debug/deps/desktop_app-*: the app is in target/debug.
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("nimbus-drive");
    p.is_file().then_some(p)
}

fn artifacts() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../client/desktop/ui/e2e-artifacts")
}

/// A child process killed when dropped; with `true`, its own children first (tauri-driver
/// leaves WebKitWebDriver, and through it the app, running when only it is killed).
struct Proc(Child, bool);

/// The ids of `parent`'s child processes (from /proc).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else { return Vec::new() };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after ')'.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|st| st.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok()))
                == Some(parent)
        })
        .collect()
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.1
            && let Some(pid) = self.0.id()
        {
            for child in children_of(pid) {
                for grandchild in children_of(child) {
                    let _ = std::process::Command::new("kill").arg("-KILL").arg(grandchild.to_string()).status();
                }
                let _ = std::process::Command::new("kill").arg("-KILL").arg(child.to_string()).status();
            }
        }
        let _ = self.0.start_kill();
    }
}

/// A minimal W3C WebDriver client: what this test needs and nothing more.
struct WebDriver {
    http: reqwest::Client,
    base: String,
}

impl WebDriver {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let mut rb = self.http.request(method.clone(), format!("{}{path}", self.base));
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let r = rb.send().await.with_context(|| format!("WebDriver {method} {path}"))?;
        let status = r.status();
        let v: Value = r.json().await.with_context(|| format!("WebDriver {method} {path}: not JSON"))?;
        ensure!(status.is_success(), "WebDriver {method} {path}: {status} {v}");
        Ok(v["value"].clone())
    }
}

struct Session<'a> {
    wd: &'a WebDriver,
    id: String,
}

impl Session<'_> {
    fn path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.id)
    }

    /// The first element matching the XPath, waiting up to `STEP` for it.
    async fn find(&self, xpath: &str) -> anyhow::Result<String> {
        let deadline = Instant::now() + STEP;
        loop {
            let r = self
                .wd
                .call(reqwest::Method::POST, &self.path("/element"), Some(json!({"using": "xpath", "value": xpath})))
                .await;
            match r {
                Ok(v) => {
                    if let Some(id) = v.as_object().and_then(|o| o.values().next()).and_then(Value::as_str) {
                        return Ok(id.to_string());
                    }
                    bail!("unexpected element reference {v}");
                }
                Err(e) if Instant::now() > deadline => return Err(e.context(format!("no element {xpath}"))),
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    async fn click(&self, xpath: &str) -> anyhow::Result<()> {
        let el = self.find(xpath).await?;
        self.wd.call(reqwest::Method::POST, &self.path(&format!("/element/{el}/click")), Some(json!({}))).await?;
        Ok(())
    }

    async fn type_into(&self, xpath: &str, text: &str) -> anyhow::Result<()> {
        let el = self.find(xpath).await?;
        self.wd
            .call(reqwest::Method::POST, &self.path(&format!("/element/{el}/value")), Some(json!({"text": text})))
            .await?;
        Ok(())
    }

    async fn screenshot(&self, name: &str) -> anyhow::Result<()> {
        use base64::Engine;
        let v = self.wd.call(reqwest::Method::GET, &self.path("/screenshot"), None).await?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().context("screenshot is not a string")?)
            .context("screenshot is not base64")?;
        ensure!(png.starts_with(b"\x89PNG"), "screenshot is not a PNG");
        std::fs::create_dir_all(artifacts())?;
        std::fs::write(artifacts().join(format!("app-{name}.png")), png)?;
        Ok(())
    }
}

fn button(label: &str) -> String {
    format!("//button[normalize-space(.)='{label}']")
}

async fn wait_port(port: u16, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        ensure!(Instant::now() < deadline, "nothing listens on port {port} after {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_app_signs_in_mounts_and_signs_out() -> anyhow::Result<()> {
    let require = std::env::var("NIMBUS_TEST_REQUIRE_ALL").as_deref() == Ok("1");
    let tools = (
        app_bin(),
        find_tool("NIMBUS_TAURI_DRIVER", "tauri-driver"),
        find_tool("NIMBUS_WEBKIT_DRIVER", "WebKitWebDriver"),
        find_tool("NIMBUS_XVFB", "Xvfb"),
    );
    let (Some(app), Some(driver), Some(webkit), Some(xvfb)) = tools.clone() else {
        let msg = format!("missing (app, tauri-driver, WebKitWebDriver, Xvfb): {tools:?}");
        if require {
            bail!("{msg}");
        }
        eprintln!("skipped: {msg}");
        return Ok(());
    };
    run_on(Backend::SqliteLocal, GatewayOptions::default(), move |gw| async move {
        gw.create_user("frank", None).await?;
        let home = tempfile::Builder::new().prefix("nimbus-e2e-app-").tempdir()?;
        let mountpoint = home.path().join("Nimbus");
        let _unmount = scopeguard(mountpoint.clone());

        // A private X server.
        let display = format!(":{}", 90 + std::process::id() % 400);
        let xvfb = Proc(
            Command::new(&xvfb)
                .args([&display, "-screen", "0", "1024x900x24", "-nolisten", "tcp"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .context("cannot start Xvfb")?,
            false,
        );
        let sock = format!("/tmp/.X11-unix/X{}", &display[1..]);
        eventually("Xvfb is up", Duration::from_secs(20), || async {
            ensure!(Path::new(&sock).exists(), "no {sock}");
            Ok(())
        })
        .await?;

        // tauri-driver starts WebKitWebDriver, which starts the app with this environment.
        let (port, native) = (free_port()?, free_port()?);
        let logs = home.path().join("driver.log");
        let mut cmd = Command::new(&driver);
        cmd.args(["--port", &port.to_string(), "--native-port", &native.to_string()])
            .arg("--native-driver")
            .arg(&webkit)
            .env("DISPLAY", &display)
            .env("HOME", home.path())
            .env("NIMBUS_CONFIG_DIR", home.path().join("config"))
            .env("NIMBUS_CACHE_DIR", home.path().join("cache"))
            .env("NIMBUS_LOG", "info,nimbus_mount=debug")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&logs)?)
            .stderr(std::fs::File::create(home.path().join("driver.err"))?)
            .kill_on_drop(true);
        let _driver = Proc(cmd.spawn().context("cannot start tauri-driver")?, true);
        // tauri-driver forwards to WebKitWebDriver, which it starts itself: wait for both.
        wait_port(port, Duration::from_secs(30)).await?;
        wait_port(native, Duration::from_secs(30)).await?;

        let wd = WebDriver {
            http: reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(120)).build()?,
            base: format!("http://127.0.0.1:{port}"),
        };
        let caps = json!({"capabilities": {"alwaysMatch": {"tauri:options": {"application": app}}}});
        let created = wd.call(reqwest::Method::POST, "/session", Some(caps)).await.context("starting the app")?;
        let id = created["sessionId"].as_str().context("no session id")?.to_string();
        let s = Session { wd: &wd, id };
        let result = drive(&s, &gw.url, &mountpoint, &gw).await;
        if result.is_err() {
            if let Err(e) = s.screenshot("failure").await {
                eprintln!("no failure screenshot: {e:#}");
            }
            eprintln!(
                "---- tauri-driver / app output ----\n{}\n{}",
                nimbus_e2e::gateway::tail_file(&logs, 40),
                nimbus_e2e::gateway::tail_file(&home.path().join("driver.err"), 80)
            );
        }
        let _ = wd.call(reqwest::Method::DELETE, &s.path(""), None).await;
        drop(xvfb);
        result
    })
    .await
}

async fn drive(s: &Session<'_>, url: &str, mountpoint: &Path, gw: &nimbus_e2e::Gateway) -> anyhow::Result<()> {
    // Sign-in window.
    s.type_into("//input[@name='server_url']", url).await?;
    s.type_into("//input[@name='username']", "frank").await?;
    s.type_into("//input[@name='password']", "wrong password").await?;
    s.click(&button("Sign in")).await?;
    // (WebKitWebDriver's element text is unreliable here: match the text in the XPath.)
    s.find("//*[@role='alert'][contains(., 'wrong username or password')]").await?;
    s.screenshot("sign-in").await?;
    let pw = s.find("//input[@name='password']").await?;
    s.wd.call(reqwest::Method::POST, &s.path(&format!("/element/{pw}/clear")), Some(json!({}))).await?;
    s.type_into("//input[@name='password']", &user_password("frank")).await?;
    s.click(&button("Sign in")).await?;

    // Main window: mount at the default location (~/Nimbus).
    s.click(&button("Mount")).await?;
    s.find(&format!("//*[@data-testid='mount-location'][normalize-space(.)='{}']", mountpoint.display())).await?;
    ensure!(is_mounted(mountpoint), "the kernel lists no mount at {}", mountpoint.display());

    // A file written through the drive reaches the server.
    let content = b"written through the real app's drive\n".repeat(100);
    std::fs::write(mountpoint.join("from-app.txt"), &content).context("writing into the app's drive")?;
    let login = gw.api().login("frank", &user_password("frank")).await?;
    let token: Value = login.ok(200)?;
    let api = gw.api().with_token(token["token"].as_str().context("no token")?);
    eventually("the server has from-app.txt", Duration::from_secs(30), || async {
        let r = api.get("/api/v1/files/from-app.txt").await?;
        r.check(200)?;
        ensure!(r.body.as_ref() == content.as_slice(), "different content on the server");
        Ok(())
    })
    .await?;
    s.find("//*[@data-testid='activity'][contains(., 'Everything is uploaded')]").await?;
    s.screenshot("main").await?;

    // Unmount, then sign out: the app's own token is revoked on the server.
    let app_token = std::fs::read_dir(mountpoint.parent().context("no parent")?.join("config/nimbus-desktop/tokens"))?
        .flatten()
        .find_map(|e| std::fs::read_to_string(e.path()).ok())
        .context("the app stored no token file (no keychain under Xvfb)")?;
    let app_api = gw.api().with_token(app_token.trim());
    app_api.get("/api/v1/me").await?.check(200)?;
    s.click(&button("Unmount")).await?;
    s.find("//*[normalize-space(.)='Not mounted']").await?;
    ensure!(!is_mounted(mountpoint), "still mounted after Unmount");
    s.click(&button("Sign out")).await?;
    s.find(&button("Sign in")).await?;
    let r = app_api.get("/api/v1/me").await?;
    ensure!(r.status == 401, "the app's token still works after sign-out: {r}");
    Ok(())
}

/// Unmounts `path` when dropped, so a failed run leaves no mount behind.
fn scopeguard(path: PathBuf) -> impl Drop {
    struct G(PathBuf);
    impl Drop for G {
        fn drop(&mut self) {
            force_unmount(&self.0);
        }
    }
    G(path)
}
