//! The desktop app's logic (`nimbus-desktop-core`) against a real gateway and a real FUSE
//! mount, driven the way the Tauri shell drives it: sign-in (good and bad password, a
//! self-signed certificate refused until its fingerprint is trusted), token storage (the 0600
//! file fallback), the mount manager (mount, a file written through the drive reaches the
//! server, the status shows it, unmount), the status event stream, and sign-out (refused while
//! uploads are pending; then the token is revoked on the server), and a change the server
//! refuses (a full space) shown in the status and resolved from the app.
//!
//! Each test gets its own config, cache and mount directories; the token store is the file
//! fallback (the test machine runs no keychain; the keychain path is the `keyring` crate's).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use nimbus_desktop_core::api::{
    Connectivity, DesktopEvent, MountRequest, ProblemAction, ProblemReason, ResolveRequest, SignInOutcome,
    SignInRequest, SignOutOutcome, SignOutRequest, TokenStorage,
};
use nimbus_desktop_core::token::TokenStore;
use nimbus_desktop_core::{Desktop, DesktopConfig, DesktopError};
use nimbus_e2e::gateway::{tail_file, user_password};
use nimbus_e2e::mount::{eventually, force_unmount, is_mounted};
use nimbus_e2e::{ADMIN_PASSWORD, Gateway, backend_test, bins};
use tokio::process::{Child, Command};

const SEEN_WITHIN: Duration = Duration::from_secs(20);

/// One device's app directories.
struct App {
    dir: tempfile::TempDir,
}

impl App {
    fn new(name: &str) -> anyhow::Result<App> {
        Ok(App { dir: tempfile::Builder::new().prefix(&format!("nimbus-e2e-desktop-{name}-")).tempdir()? })
    }

    fn mountpoint(&self) -> PathBuf {
        self.dir.path().join("Nimbus")
    }

    fn config(&self) -> DesktopConfig {
        let root = self.dir.path();
        DesktopConfig {
            config_dir: root.join("config"),
            cache_dir: root.join("cache"),
            default_mountpoint: self.mountpoint(),
            token_store: Some(TokenStore::File { dir: root.join("config").join("tokens") }),
            device_name: "e2e desktop".into(),
            cache_size: 256 << 20,
            cache_mem: 16 << 20,
        }
    }

    async fn open(&self) -> anyhow::Result<Desktop> {
        Desktop::open(self.config()).await.context("opening the desktop state")
    }
}

impl Drop for App {
    fn drop(&mut self) {
        // A failed test must not leave a mount behind (the temp dir could not be removed).
        force_unmount(&self.mountpoint());
    }
}

fn sign_in_req(url: &str, user: &str, password: &str, fp: Option<&str>) -> SignInRequest {
    SignInRequest {
        server_url: url.into(),
        username: user.into(),
        password: password.into(),
        trusted_fingerprint: fp.map(Into::into),
    }
}

async fn server_file(gw: &Gateway, token: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    let r = gw.api().with_token(token).get(&format!("/api/v1/files{path}")).await?;
    r.check(200)?;
    Ok(r.body.to_vec())
}

async fn token_of(desktop: &Desktop) -> anyhow::Result<String> {
    let client = desktop.client().await.context("not signed in")?;
    Ok(client.token().context("the client has no token")?.to_string())
}

backend_test!(
    sign_in_and_token_file,
    only = sqlite_local,
    opts = nimbus_e2e::GatewayOptions::default(),
    |gw| async move {
        gw.create_user("dana", Some(50 << 20)).await?;
        let app = App::new("signin")?;
        let desktop = app.open().await?;
        ensure!(desktop.status().await.connectivity == Connectivity::SignedOut, "a fresh app is signed out");

        // Wrong password: an error the UI can tell apart, nothing stored.
        match desktop.sign_in(sign_in_req(&gw.url, "dana", "not-the-password", None)).await {
            Err(DesktopError::BadCredentials) => {}
            other => bail!("a wrong password should be BadCredentials, got {other:?}"),
        }
        ensure!(!app.dir.path().join("config/account.json").exists(), "a failed sign-in saved an account");
        // Nothing listens there: unreachable, not a crash or a hang.
        match desktop.sign_in(sign_in_req("http://127.0.0.1:9", "dana", "x", None)).await {
            Err(DesktopError::Unreachable { .. }) => {}
            other => bail!("a dead address should be Unreachable, got {other:?}"),
        }

        let out = desktop.sign_in(sign_in_req(&gw.url, "dana", &user_password("dana"), None)).await?;
        let SignInOutcome::SignedIn { account } = out else { bail!("expected SignedIn, got {out:?}") };
        ensure!(account.username == "dana" && account.server_url == gw.url, "{account:?}");
        let TokenStorage::File { path } = &account.token_storage else {
            bail!("the test uses the file store, the account says {:?}", account.token_storage)
        };
        // The token file: exactly the token, 0600 in a 0700 directory.
        let token = token_of(&desktop).await?;
        ensure!(std::fs::read_to_string(path)?.trim() == token, "the token file does not hold the token");
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
            ensure!(mode == 0o600, "token file mode {mode:o}, expected 600");
            let dir = Path::new(path).parent().context("token file without a directory")?;
            let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
            ensure!(mode == 0o700, "token dir mode {mode:o}, expected 700");
        }
        let account_json = std::fs::read_to_string(app.dir.path().join("config/account.json"))?;
        ensure!(!account_json.contains(&token), "account.json must not hold the token");

        let st = desktop.status().await;
        ensure!(st.connectivity == Connectivity::Online, "signed in but {:?}", st.connectivity);
        let quota = st.quota.context("no quota in the status")?;
        ensure!(quota.total_bytes == Some(50 << 20), "quota {quota:?}");
        ensure!(!st.mount.mounted, "nothing is mounted yet");

        // Signing in twice is refused (sign out first).
        ensure!(
            matches!(
                desktop.sign_in(sign_in_req(&gw.url, "dana", &user_password("dana"), None)).await,
                Err(DesktopError::Invalid(_))
            ),
            "a second sign-in should be refused"
        );

        // A restarted app restores the sign-in from the stored token, without a password.
        drop(desktop);
        let again = app.open().await?;
        let st = again.status().await;
        ensure!(st.account.as_ref().map(|a| a.username.as_str()) == Some("dana"), "not restored: {st:?}");
        ensure!(st.connectivity == Connectivity::Online, "restored but {:?}", st.connectivity);
        ensure!(token_of(&again).await? == token, "a different token after restart");

        // Sign-out revokes the token: the server refuses it afterwards, and nothing is left here.
        let out = again.sign_out(SignOutRequest { force: false }).await?;
        ensure!(matches!(out, SignOutOutcome::SignedOut { revoked: true, warning: None }), "{out:?}");
        let r = gw.api().with_token(&token).get("/api/v1/me").await?;
        ensure!(r.status == 401, "the revoked token still works: {r}");
        ensure!(!Path::new(path).exists(), "the token file is still there");
        ensure!(again.status().await.connectivity == Connectivity::SignedOut, "still signed in");
        ensure!(app.open().await?.status().await.account.is_none(), "a restarted app is still signed in");
        Ok(())
    }
);

backend_test!(
    a_refused_change_is_shown_and_resolved_in_the_app,
    only = sqlite_local,
    opts = nimbus_e2e::GatewayOptions::default(),
    |gw| async move {
        let user_id = gw.create_user("fay", Some(64 << 10)).await?.0;
        let app = App::new("refused")?;
        let desktop = app.open().await?;
        desktop.sign_in(sign_in_req(&gw.url, "fay", &user_password("fay"), None)).await?;
        desktop.mount(MountRequest::default()).await?;
        let mp = app.mountpoint();
        std::fs::write(mp.join("big.bin"), vec![7u8; 200 << 10]).context("writing into the mount")?;
        let p = eventually("the status names the refused file", SEEN_WITHIN, || async {
            let st = desktop.status().await;
            st.activity.problems.iter().find(|p| p.path == "/big.bin").cloned().context("not listed yet")
        })
        .await?;
        ensure!(p.reason == ProblemReason::Quota && p.message.contains("full"), "{p:?}");
        ensure!(p.actions == vec![ProblemAction::Retry, ProblemAction::SaveCopy, ProblemAction::Discard], "{p:?}");
        // Still full: the retry is refused and says why.
        let retry = ResolveRequest { path: "/big.bin".into(), action: ProblemAction::Retry };
        match desktop.resolve_problem(retry.clone()).await {
            Err(DesktopError::Mount(m)) if m.contains("quota") => {}
            other => bail!("a retry into a full space: {other:?}"),
        }
        // Room made: the retry uploads it and the list empties.
        let admin = gw.admin().await?;
        admin
            .patch_json(&format!("/api/v1/admin/users/{user_id}"), &serde_json::json!({"quota_bytes": null}))
            .await?
            .check(200)?;
        let reply = desktop.resolve_problem(retry).await?;
        ensure!(reply.ok && reply.message.contains("uploaded"), "{reply:?}");
        ensure!(desktop.status().await.activity.problems.is_empty(), "the problem is still listed");
        let token = token_of(&desktop).await?;
        ensure!(server_file(&gw, &token, "/big.bin").await? == vec![7u8; 200 << 10], "different content on the server");
        // Nothing is waiting: a second resolve is refused clearly.
        match desktop.resolve_problem(ResolveRequest { path: "/big.bin".into(), action: ProblemAction::Discard }).await
        {
            Err(DesktopError::Mount(m)) if m.contains("no refused change") => {}
            other => bail!("resolving a resolved change: {other:?}"),
        }
        desktop.unmount().await?;
        Ok(())
    }
);

backend_test!(
    mount_write_unmount_sign_out,
    only = sqlite_local,
    opts = nimbus_e2e::GatewayOptions::default(),
    |gw| async move {
        let mut gw = gw;
        gw.create_user("erin", None).await?;
        let app = App::new("mount")?;
        let desktop = app.open().await?;
        let mut events = desktop.subscribe();
        desktop.sign_in(sign_in_req(&gw.url, "erin", &user_password("erin"), None)).await?;
        let token = token_of(&desktop).await?;
        let status_loop = tokio::spawn(desktop.clone().run_status_loop());

        // Mount (default location), write through the drive, see it on the server.
        let state = desktop.mount(MountRequest::default()).await?;
        let mp = app.mountpoint();
        ensure!(state.mounted && state.location.as_deref() == Some(&*mp.to_string_lossy()), "{state:?}");
        ensure!(is_mounted(&mp), "the kernel lists no mount at {}", mp.display());
        ensure!(
            matches!(desktop.mount(MountRequest::default()).await, Err(DesktopError::AlreadyMounted(_))),
            "a second mount should be refused"
        );
        let content = b"written through Nimbus Drive\n".repeat(1000);
        std::fs::write(mp.join("hello.txt"), &content).context("writing into the mount")?;
        eventually("the server has hello.txt", SEEN_WITHIN, || async {
            ensure!(server_file(&gw, &token, "/hello.txt").await? == content, "different content on the server");
            Ok(())
        })
        .await?;
        ensure!(std::fs::read(mp.join("hello.txt"))? == content, "reading back through the drive");

        // The status shows the mount, the upload done, the quota used and the cache.
        let st = eventually("the status shows the upload", SEEN_WITHIN, || async {
            let st = desktop.status().await;
            ensure!(st.activity.pending_uploads == 0 && st.activity.uploads_in_flight == 0, "{:?}", st.activity);
            ensure!(st.quota.as_ref().is_some_and(|q| q.used_bytes >= content.len() as u64), "{:?}", st.quota);
            Ok(st)
        })
        .await?;
        ensure!(st.mount.mounted && st.connectivity == Connectivity::Online, "{st:?}");
        let cache = st.cache.context("no cache info while mounted")?;
        ensure!(cache.capacity_bytes == 256 << 20, "{cache:?}");
        ensure!(cache.dir.starts_with(&*app.dir.path().join("cache").to_string_lossy()), "{cache:?}");
        // Free up space: the cache empties, the file still reads (from the server).
        desktop.free_cache().await?;
        ensure!(desktop.status().await.cache.map(|c| c.used_bytes) == Some(0), "the cache is not empty");
        ensure!(std::fs::read(mp.join("hello.txt"))? == content, "reading after freeing the cache");

        // The event stream carried a status with the drive mounted.
        let deadline = Instant::now() + SEEN_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, events.recv()).await {
                Ok(Ok(DesktopEvent::StatusChanged { status })) if status.mount.mounted => break,
                Ok(Ok(_)) => {}
                Ok(Err(e)) => bail!("event stream: {e}"),
                Err(_) => bail!("no status event with the drive mounted"),
            }
        }

        // Offline: the write stays pending, and sign-out refuses to drop it.
        gw.stop().await?;
        let offline = b"written while the server is down\n".to_vec();
        std::fs::write(mp.join("offline.txt"), &offline).context("writing while offline")?;
        eventually("the status shows the pending upload", SEEN_WITHIN, || async {
            let st = desktop.status().await;
            ensure!(st.activity.pending_uploads >= 1, "{:?}", st.activity);
            ensure!(st.connectivity == Connectivity::Offline, "{:?}", st.connectivity);
            Ok(())
        })
        .await?;
        let out = desktop.sign_out(SignOutRequest { force: false }).await?;
        ensure!(matches!(out, SignOutOutcome::PendingUploads { pending } if pending >= 1), "{out:?}");
        ensure!(is_mounted(&mp), "a refused sign-out unmounted the drive");

        // Back online: the journal goes up; unmount; sign-out revokes the token.
        gw.start_again().await?;
        desktop.retry_uploads().await.ok();
        eventually("the server has offline.txt", SEEN_WITHIN, || async {
            ensure!(server_file(&gw, &token, "/offline.txt").await? == offline, "different content on the server");
            Ok(())
        })
        .await?;
        let state = desktop.unmount().await?;
        ensure!(!state.mounted, "{state:?}");
        ensure!(!is_mounted(&mp), "still mounted after unmount");
        ensure!(matches!(desktop.unmount().await, Err(DesktopError::NotMounted)), "a second unmount should fail");
        let st = desktop.status().await;
        ensure!(!st.mount.mounted && st.mount.location.as_deref() == Some(&*mp.to_string_lossy()), "{st:?}");

        let out = desktop.sign_out(SignOutRequest { force: false }).await?;
        ensure!(matches!(out, SignOutOutcome::SignedOut { revoked: true, .. }), "{out:?}");
        let r = gw.api().with_token(&token).get("/api/v1/me").await?;
        ensure!(r.status == 401, "the revoked token still works: {r}");
        status_loop.abort();
        Ok(())
    }
);

// ---------------------------------------------------------------------------------------------
// A self-signed gateway (the harness's readiness check only speaks http://).

struct TlsGateway {
    child: Child,
    url: String,
    fingerprint: String,
    logs: PathBuf,
}

impl TlsGateway {
    async fn start(dir: &Path) -> anyhow::Result<TlsGateway> {
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        let mut cmd = Command::new(bins::gateway_bin()?);
        cmd.arg("serve").args(["--listen", "127.0.0.1:0", "--tls", "self-signed", "--data-dir"]).arg(dir.join("data"));
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("NIMBUS_") || k.starts_with("AWS_") {
                cmd.env_remove(k.as_ref());
            }
        }
        cmd.env("NIMBUS_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(logs.join("gateway.stdout"))?)
            .stderr(std::fs::File::create(logs.join("gateway.stderr"))?)
            .kill_on_drop(true);
        let mut child = cmd.spawn().context("cannot start the gateway")?;
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let out = std::fs::read_to_string(logs.join("gateway.stdout")).unwrap_or_default();
            let url = out
                .lines()
                .find_map(|l| l.split_once("listening on "))
                .map(|(_, r)| r.split_whitespace().next().unwrap_or_default().trim_end_matches('/').to_string());
            let fingerprint = out
                .lines()
                .find_map(|l| l.split_once("SHA-256 fingerprint "))
                .map(|(_, r)| r.trim_end_matches(')').trim().to_string());
            if let (Some(url), Some(fingerprint)) = (url, fingerprint) {
                ensure!(url.starts_with("https://127.0.0.1:"), "unexpected listen URL {url}");
                return Ok(TlsGateway { child, url, fingerprint, logs });
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "the gateway exited during start-up ({status}):\n{}",
                    tail_file(&logs.join("gateway.stderr"), 40)
                );
            }
            ensure!(Instant::now() < deadline, "the gateway did not start within 90 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for TlsGateway {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("gateway stderr:\n{}", tail_file(&self.logs.join("gateway.stderr"), 40));
        }
        let _ = self.child.start_kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_signed_certificate_is_trusted_only_by_fingerprint() -> anyhow::Result<()> {
    let tmp = tempfile::Builder::new().prefix("nimbus-e2e-desktop-tls-").tempdir()?;
    let gw = TlsGateway::start(tmp.path()).await?;
    let app = App::new("tls")?;
    let desktop = app.open().await?;
    let url = gw.url.clone();

    // First contact: refused, with the fingerprint the gateway printed.
    let out = desktop.sign_in(sign_in_req(&url, "admin", ADMIN_PASSWORD, None)).await?;
    let SignInOutcome::UntrustedCertificate { fingerprint, .. } = out else {
        bail!("an untrusted certificate must be refused first, got {out:?}")
    };
    ensure!(fingerprint == gw.fingerprint, "shown {fingerprint}, the gateway printed {}", gw.fingerprint);
    ensure!(desktop.status().await.account.is_none(), "signed in without trusting the certificate");

    // Trusting another fingerprint does not sign in either.
    let wrong = "00:".repeat(31) + "00";
    let out = desktop.sign_in(sign_in_req(&url, "admin", ADMIN_PASSWORD, Some(&wrong))).await?;
    ensure!(matches!(out, SignInOutcome::UntrustedCertificate { .. }), "a wrong fingerprint was accepted: {out:?}");
    ensure!(desktop.status().await.account.is_none(), "signed in with a wrong fingerprint");

    // The right one (typed in lowercase, as a person might): signed in over verified TLS.
    let out = desktop.sign_in(sign_in_req(&url, "admin", ADMIN_PASSWORD, Some(&fingerprint.to_lowercase()))).await?;
    let SignInOutcome::SignedIn { account } = out else { bail!("expected SignedIn, got {out:?}") };
    ensure!(account.certificate_fingerprint.as_deref() == Some(&*fingerprint), "{account:?}");
    ensure!(desktop.status().await.connectivity == Connectivity::Online, "signed in but not online");

    // A restarted app trusts the same certificate without asking again.
    drop(desktop);
    let again = app.open().await?;
    ensure!(again.status().await.connectivity == Connectivity::Online, "the restored sign-in is not online over TLS");
    let out = again.sign_out(SignOutRequest { force: false }).await?;
    ensure!(matches!(out, SignOutOutcome::SignedOut { revoked: true, .. }), "{out:?}");
    // Signing in again needs no new trust prompt (the certificate is remembered).
    let out = again.sign_in(sign_in_req(&url, "admin", ADMIN_PASSWORD, None)).await?;
    ensure!(matches!(out, SignInOutcome::SignedIn { .. }), "{out:?}");
    again.sign_out(SignOutRequest { force: true }).await?;
    Ok(())
}
