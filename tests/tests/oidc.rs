//! OpenID Connect single sign-on against a real provider (`oidc-provider`, tests/oidc-provider,
//! started per test on loopback): the browser flow driven by HTTP (start → the provider's login
//! and consent forms → callback → a Nimbus token in the page's fragment), provisioning
//! (`existing`, `auto`), role mapping re-evaluated at each sign-in, refusals (unknown user,
//! password account of the same name, disabled, invalid username, state mismatch or reuse, and
//! ID tokens with a broken signature, another audience, expired, another issuer), and the CLI's
//! `nimbus login --sso` and the desktop app's "Sign in with SSO" through the same loopback
//! redirect (nimbus_client::sso).

use std::future::Future;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, ensure};
use nimbus_e2e::oidc::{Browser, ClientReg, OidcProvider, url_params};
use nimbus_e2e::{Api, Backend, Gateway, GatewayOptions, run_on};
use nimbus_proto::wire::{AuthMethods, IdentitySource, LoginResponse, Me, Role};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

const CLIENT_ID: &str = "nimbus-e2e";
const CLIENT_SECRET: &str = "nimbus-e2e-client-secret-0123456789";
const CALLBACK: &str = "/api/v1/auth/oidc/callback";

/// Starts a provider, then a gateway of `backend` signing in through it (`--oidc-*` plus
/// `extra`), registers the gateway at the provider, and runs `body`.
async fn with_sso<F, Fut>(backend: Backend, extra: &[&str], body: F) -> anyhow::Result<()>
where
    F: FnOnce(Gateway, Arc<OidcProvider>) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    if !backend.should_run() {
        return Ok(());
    }
    let provider = Arc::new(OidcProvider::start().await?);
    let secret_dir = tempfile::tempdir()?;
    let secret_file = secret_dir.path().join("client-secret");
    std::fs::write(&secret_file, format!("{CLIENT_SECRET}\n"))?;
    let mut opts = GatewayOptions::default()
        .timeout(Duration::from_secs(240))
        .arg("--oidc-issuer")
        .arg(provider.issuer.clone())
        .arg("--oidc-client-id")
        .arg(CLIENT_ID)
        .arg("--oidc-client-secret-file")
        .arg(secret_file.to_string_lossy().into_owned());
    for a in extra {
        opts = opts.arg(*a);
    }
    let p = provider.clone();
    let result = run_on(backend, opts, |gw| async move {
        p.setup(&[ClientReg {
            client_id: CLIENT_ID.into(),
            client_secret: CLIENT_SECRET.into(),
            redirect_uris: vec![format!("{}{CALLBACK}", gw.url)],
        }])
        .await?;
        body(gw, p).await
    })
    .await;
    if result.is_err() {
        eprintln!("---- OpenID provider log ----\n{}", provider.log());
    }
    result
}

/// The ending of a browser sign-in as `login` that began at `start` (a path and query on the
/// gateway): the callback's answer (status and `Location`).
async fn browser_sign_in(gw: &Gateway, start: &str, login: &str) -> anyhow::Result<(u16, String)> {
    let mut browser = Browser::new()?;
    let callback = browser.sign_in(&format!("{}{start}", gw.url), login, &format!("{}{CALLBACK}", gw.url)).await?;
    let (status, location, body) = browser.visit(&callback).await?;
    Ok((status, location.with_context(|| format!("the callback answered {status} without a location: {body}"))?))
}

/// Signs in as `login` from the console's start and returns the token of the fragment.
async fn sso_token(gw: &Gateway, login: &str) -> anyhow::Result<String> {
    let (status, location) = browser_sign_in(gw, "/api/v1/auth/oidc/start?return=/admin/", login).await?;
    ensure!(status == 303, "callback answered {status}");
    ensure!(location.starts_with("/admin/#sso_token="), "unexpected location {location}");
    let frag = url_params(&location, '#');
    let expires = frag.get("expires_at").context("no expires_at")?;
    time::OffsetDateTime::parse(expires, &time::format_description::well_known::Rfc3339)
        .with_context(|| format!("expires_at {expires} is not RFC 3339"))?;
    frag.get("sso_token").cloned().context("no sso_token")
}

/// The `sso_error` of a sign-in as `login` that must fail.
async fn sso_error(gw: &Gateway, login: &str) -> anyhow::Result<String> {
    let (status, location) = browser_sign_in(gw, "/api/v1/auth/oidc/start?return=/admin/", login).await?;
    ensure!(status == 303, "callback answered {status}");
    ensure!(location.starts_with("/admin/#sso_error="), "expected a refusal, got {location}");
    Ok(url_params(&location, '#').remove("sso_error").unwrap_or_default())
}

async fn me(gw: &Gateway, token: &str) -> anyhow::Result<Me> {
    gw.api().with_token(token).get("/api/v1/me").await?.ok(200)
}

async fn audit_details(admin: &Api, actor: &str) -> anyhow::Result<Vec<String>> {
    let v: serde_json::Value = admin.get(&format!("/api/v1/admin/audit?actor={actor}")).await?.ok(200)?;
    Ok(v["entries"]
        .as_array()
        .map(|es| {
            es.iter()
                .map(|e| format!("{} {}", e["action"].as_str().unwrap_or(""), e["detail"].as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default())
}

async fn full_flow(gw: Gateway, _p: Arc<OidcProvider>) -> anyhow::Result<()> {
    let methods: AuthMethods = gw.api().get("/api/v1/auth/methods").await?.ok(200)?;
    assert_eq!(methods, AuthMethods { password: true, oidc: true });

    // First sign-in creates alice (auto), a user: her groups hold no admin value.
    let token = sso_token(&gw, "alice").await?;
    let m = me(&gw, &token).await?;
    assert_eq!((m.username.as_str(), m.role, m.source), ("alice", Role::User, IdentitySource::Oidc));
    // No password works for an account of the provider.
    gw.api().login("alice", "any password").await?.check(401)?;
    gw.api().login("alice", "").await?.check(401)?;

    // carol's groups hold `nimbus-admins`: an administrator.
    let carol = sso_token(&gw, "carol").await?;
    let m = me(&gw, &carol).await?;
    assert_eq!((m.role, m.source), (Role::Admin, IdentitySource::Oidc));
    gw.api().with_token(&carol).get("/api/v1/admin/users").await?.check(200)?;

    // The role follows the provider at every sign-in: what an admin changed is undone.
    let admin = gw.admin().await?;
    admin
        .patch_json(&format!("/api/v1/admin/users/{}", me(&gw, &token).await?.id), &json!({"role": "admin"}))
        .await?
        .check(200)?;
    let again = sso_token(&gw, "alice").await?;
    assert_eq!(me(&gw, &again).await?.role, Role::User);
    // The same account, not a second one.
    assert_eq!(me(&gw, &again).await?.id, me(&gw, &token).await?.id);

    // Sign-out ends the Nimbus session: the token is revoked.
    gw.api().with_token(&again).req(reqwest::Method::POST, "/api/v1/auth/logout").send().await?.check(204)?;
    gw.api().with_token(&again).get("/api/v1/me").await?.check(401)?;
    gw.api().with_token(&token).get("/api/v1/me").await?.check(200)?;

    let details = audit_details(&admin, "alice").await?;
    assert!(details.iter().any(|d| d.starts_with("user_create") && d.contains("first single sign-on")), "{details:?}");
    assert!(details.iter().any(|d| d.starts_with("login single sign-on")), "{details:?}");
    assert!(details.iter().any(|d| d.starts_with("user_update role user")), "{details:?}");

    // The flow starts a code flow with PKCE, a state and a nonce.
    let (status, loc, _) = Browser::new()?.visit(&format!("{}/api/v1/auth/oidc/start", gw.url)).await?;
    assert_eq!(status, 303);
    let loc = loc.context("no location")?;
    let q = url_params(&loc, '?');
    for k in ["state", "nonce", "code_challenge", "redirect_uri", "client_id"] {
        assert!(q.get(k).is_some_and(|v| !v.is_empty()), "{k} missing in {loc}");
    }
    assert_eq!(q.get("code_challenge_method").map(String::as_str), Some("S256"));
    assert_eq!(q.get("response_type").map(String::as_str), Some("code"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_flow_sqlite_local() -> anyhow::Result<()> {
    let args = ["--oidc-provision", "auto", "--oidc-admin-claim", "groups", "--oidc-admin-values", "ops,nimbus-admins"];
    with_sso(Backend::SqliteLocal, &args, full_flow).await
}

/// On PostgreSQL the pending flows are in the shared database: a flow started at one gateway
/// ends at another (no sticky sessions needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_flow_postgres_s3() -> anyhow::Result<()> {
    let args = ["--oidc-provision", "auto", "--oidc-admin-claim", "groups", "--oidc-admin-values", "ops,nimbus-admins"];
    with_sso(Backend::PostgresS3, &args, |gw, p| async move {
        let sibling = gw.start_sibling().await?;
        p.setup(&[ClientReg {
            client_id: CLIENT_ID.into(),
            client_secret: CLIENT_SECRET.into(),
            redirect_uris: vec![format!("{}{CALLBACK}", gw.url), format!("{}{CALLBACK}", sibling.url)],
        }])
        .await?;
        let mut browser = Browser::new()?;
        let callback = browser
            .sign_in(&format!("{}/api/v1/auth/oidc/start?return=/", gw.url), "alice", &format!("{}{CALLBACK}", gw.url))
            .await?;
        // The provider sends the browser back to the first gateway; the load balancer hands
        // the request to the second.
        let at_sibling = callback.replacen(&gw.url, &sibling.url, 1);
        let (status, location, _) = browser.visit(&at_sibling).await?;
        assert_eq!(status, 303);
        let location = location.context("no location")?;
        assert!(location.starts_with("/#sso_token="), "{location}");
        let token = url_params(&location, '#').remove("sso_token").context("no token")?;
        assert_eq!(me(&gw, &token).await?.username, "alice");
        full_flow(gw, p).await
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_accounts_only() -> anyhow::Result<()> {
    // The default provisioning is `existing`.
    with_sso(Backend::SqliteLocal, &[], |gw, _p| async move {
        let admin = gw.admin().await?;
        let err = sso_error(&gw, "dave").await?;
        assert!(err.contains("no account named `dave`"), "{err}");
        let users: serde_json::Value = admin.get("/api/v1/admin/users?q=dave").await?.ok(200)?;
        assert_eq!(users["users"].as_array().map(Vec::len), Some(0), "{users}");

        // An administrator creates dave as an account of the provider: he gets in.
        let created: serde_json::Value =
            admin.post_json("/api/v1/admin/users", &json!({"username": "dave", "source": "oidc"})).await?.ok(201)?;
        assert!(created["generated_password"].is_null(), "{created}");
        let m = me(&gw, &sso_token(&gw, "dave").await?).await?;
        assert_eq!((m.username.as_str(), m.source), ("dave", IdentitySource::Oidc));
        admin
            .post_json(
                "/api/v1/admin/users",
                &json!({"username": "dave2", "source": "oidc", "password": "a-long-password"}),
            )
            .await?
            .check(400)?;

        // A password account of the same name is never taken over.
        gw.create_user("alice", None).await?;
        let err = sso_error(&gw, "alice").await?;
        assert!(err.contains("already exists") && err.contains("local"), "{err}");

        // A disabled account is refused.
        admin.patch_json(&format!("/api/v1/admin/users/{}", m.id), &json!({"disabled": true})).await?.check(200)?;
        let err = sso_error(&gw, "dave").await?;
        assert!(err.contains("disabled"), "{err}");

        // Usernames are checked like any other; a missing claim is said plainly.
        let err = sso_error(&gw, "mallory").await?;
        assert!(err.contains("not a valid Nimbus username"), "{err}");
        let err = sso_error(&gw, "nousername").await?;
        assert!(err.contains("no `preferred_username` claim"), "{err}");

        let details = audit_details(&admin, "dave").await?;
        assert!(
            details.iter().any(|d| d.starts_with("login_failed single sign-on: this account is disabled")),
            "{details:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_mismatch_and_reuse_refused() -> anyhow::Result<()> {
    with_sso(Backend::SqliteLocal, &["--oidc-provision", "auto"], |gw, _p| async move {
        let mut browser = Browser::new()?;
        let callback = browser
            .sign_in(&format!("{}/api/v1/auth/oidc/start", gw.url), "alice", &format!("{}{CALLBACK}", gw.url))
            .await?;
        let q = url_params(&callback, '?');
        let state = q.get("state").context("no state")?;
        // Another state with the real code: an unknown sign-in, said on a page (not a 500).
        let forged = callback.replacen(&format!("state={state}"), "state=forged-state-value", 1);
        ensure!(forged != callback, "the state was not replaced in {callback}");
        let (status, location, body) = browser.visit(&forged).await?;
        assert_eq!(status, 400, "{body}");
        assert!(location.is_none());
        assert!(body.contains("Sign-in failed") && body.contains("state"), "{body}");
        // No state at all.
        let (status, _, _) = browser.visit(&format!("{}{CALLBACK}?code=abc", gw.url)).await?;
        assert_eq!(status, 400);
        // The real answer in another browser (a link sent to someone): refused, and used up.
        let (status, _, body) = Browser::new()?.visit(&callback).await?;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("started in another browser"), "{body}");
        let (status, _, _) = browser.visit(&callback).await?;
        assert_eq!(status, 400);
        // A new sign-in works once in the browser that began it; the same answer again is refused.
        let callback = browser
            .sign_in(&format!("{}/api/v1/auth/oidc/start", gw.url), "alice", &format!("{}{CALLBACK}", gw.url))
            .await?;
        let (status, location, _) = browser.visit(&callback).await?;
        assert_eq!(status, 303);
        assert!(location.unwrap_or_default().starts_with("/#sso_token="));
        let (status, _, _) = browser.visit(&callback).await?;
        assert_eq!(status, 400);
        // The provider's own refusal comes back as `sso_error`.
        let (_, loc, _) = browser.visit(&format!("{}/api/v1/auth/oidc/start?return=/admin/", gw.url)).await?;
        let state = url_params(&loc.unwrap_or_default(), '?').remove("state").context("state")?;
        let (status, location, _) = browser
            .visit(&format!("{}{CALLBACK}?state={state}&error=access_denied&error_description=nope", gw.url))
            .await?;
        assert_eq!(status, 303);
        let location = location.unwrap_or_default();
        assert!(location.starts_with("/admin/#sso_error="), "{location}");
        assert!(url_params(&location, '#')["sso_error"].contains("access_denied"), "{location}");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_id_tokens_refused() -> anyhow::Result<()> {
    let args = ["--oidc-provision", "auto", "--oidc-admin-claim", "groups", "--oidc-admin-values", "nimbus-admins"];
    with_sso(Backend::SqliteLocal, &args, |gw, p| async move {
        for (mode, expect) in [
            ("signature", "Signature verification failed"),
            ("audience", "audiences"),
            ("expired", "Expired"),
            ("issuer", "issuer"),
        ] {
            p.tamper(mode).await?;
            let err = sso_error(&gw, "eve").await.with_context(|| format!("tamper {mode}"))?;
            assert!(
                err.contains("ID token was refused") && err.to_lowercase().contains(&expect.to_lowercase()),
                "{mode}: {err}"
            );
        }
        // Nobody was created by the forged tokens (`signature` claimed carol, an admin).
        let admin = gw.admin().await?;
        let users: serde_json::Value = admin.get("/api/v1/admin/users").await?.ok(200)?;
        let names: Vec<&str> =
            users["users"].as_array().into_iter().flatten().filter_map(|u| u["username"].as_str()).collect();
        assert_eq!(names, vec!["admin"], "{users}");
        // An honest token again: signed in.
        p.tamper("none").await?;
        assert_eq!(me(&gw, &sso_token(&gw, "eve").await?).await?.username, "eve");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_checks_its_input() -> anyhow::Result<()> {
    with_sso(Backend::SqliteLocal, &[], |gw, _p| async move {
        let api = gw.api();
        for bad in [
            "return=//evil.example/",
            "return=https://evil.example/",
            "return=/%5Cevil.example",
            "cli_redirect=http://evil.example:80/&cli_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            "cli_redirect=http://127.0.0.1:5000/",
            "cli_redirect=http://127.0.0.1:5000/&cli_challenge=short",
        ] {
            let r = api.get(&format!("/api/v1/auth/oidc/start?{bad}")).await?;
            r.check(400)?;
            assert_eq!(r.json::<serde_json::Value>()?["error"]["code"], "bad_request", "{bad}");
        }
        // A code nobody issued.
        let r =
            api.post_json("/api/v1/auth/oidc/token", &json!({"code": "nope", "code_verifier": "x".repeat(43)})).await?;
        r.check(400)?;
        Ok(())
    })
    .await
}

/// Without `--oidc-issuer` the browser comes back with a message and native clients get 404;
/// with a provider that is down, the browser comes back with a message, not an error page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_and_provider_down() -> anyhow::Result<()> {
    run_on(Backend::SqliteLocal, GatewayOptions::default(), |gw| async move {
        let api = gw.api();
        let m: AuthMethods = api.get("/api/v1/auth/methods").await?.ok(200)?;
        assert_eq!(m, AuthMethods { password: true, oidc: false });
        let (status, loc, _) = Browser::new()?.visit(&format!("{}/api/v1/auth/oidc/start", gw.url)).await?;
        assert_eq!(status, 303);
        let loc = loc.unwrap_or_default();
        assert!(url_params(&loc, '#')["sso_error"].contains("not configured"), "{loc}");
        api.get(&format!("{CALLBACK}?state=x&code=y")).await?.check(400)?;
        api.post_json("/api/v1/auth/oidc/token", &json!({"code": "c", "code_verifier": "v"})).await?.check(404)?;
        Ok(())
    })
    .await?;
    let dir = tempfile::tempdir()?;
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s")?;
    let port = nimbus_e2e::minio::free_port()?;
    let opts = GatewayOptions::default()
        .arg("--oidc-issuer")
        .arg(format!("http://127.0.0.1:{port}"))
        .arg("--oidc-client-id")
        .arg("x")
        .arg("--oidc-client-secret-file")
        .arg(secret.to_string_lossy().into_owned());
    run_on(Backend::SqliteLocal, opts, |gw| async move {
        let (status, loc, _) =
            Browser::new()?.visit(&format!("{}/api/v1/auth/oidc/start?return=/admin/", gw.url)).await?;
        assert_eq!(status, 303);
        let loc = loc.unwrap_or_default();
        assert!(loc.starts_with("/admin/#sso_error="), "{loc}");
        assert!(url_params(&loc, '#')["sso_error"].contains("unavailable"), "{loc}");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_login_sso() -> anyhow::Result<()> {
    with_sso(Backend::SqliteLocal, &["--oidc-provision", "auto"], |gw, _p| async move {
        let dir = tempfile::tempdir()?;
        let mut cmd = tokio::process::Command::new(nimbus_e2e::bins::cli_bin()?);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("NIMBUS_") {
                cmd.env_remove(k.as_ref());
            }
        }
        cmd.args(["login", "--sso", "--no-browser", "--device", "e2e laptop", &gw.url])
            .env("NIMBUS_CONFIG_DIR", dir.path().join("config"))
            .env("HOME", dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        // The CLI prints the address to open when it starts no browser.
        let url = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(l) = lines.next_line().await? {
                if let Some(u) = l.trim().strip_prefix(&gw.url) {
                    return anyhow::Ok(format!("{}{u}", gw.url));
                }
            }
            anyhow::bail!("the CLI printed no sign-in address")
        })
        .await??;
        assert!(url.contains("cli_redirect=http%3A%2F%2F127.0.0.1%3A"), "{url}");

        let mut browser = Browser::new()?;
        let callback = browser.sign_in(&url, "alice", &format!("{}{CALLBACK}", gw.url)).await?;
        let (status, location, _) = browser.visit(&callback).await?;
        assert_eq!(status, 303);
        let location = location.context("no location")?;
        assert!(location.starts_with("http://127.0.0.1:"), "{location}");
        let code = url_params(&location, '?').remove("code").context("no code")?;
        // The browser reaches the CLI's loopback listener, which trades the code.
        let (status, _, page) = browser.visit(&location).await?;
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("Signed in"), "{page}");
        let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await??;
        assert!(out.status.success(), "nimbus login --sso failed: {}", String::from_utf8_lossy(&out.stdout));
        assert!(String::from_utf8_lossy(&out.stdout).contains("as alice"));

        // The session works; its token is an ordinary device token with the given name.
        let session: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("config/nimbus/session.json"))?)?;
        let token = session["token"].as_str().context("no token in the session")?;
        let m = me(&gw, token).await?;
        assert_eq!((m.username.as_str(), m.source), ("alice", IdentitySource::Oidc));
        let tokens: serde_json::Value = gw.api().with_token(token).get("/api/v1/auth/tokens").await?.ok(200)?;
        assert!(tokens.to_string().contains("e2e laptop"), "{tokens}");

        // A code works once, and only with the verifier whose challenge started the flow.
        gw.api()
            .post_json("/api/v1/auth/oidc/token", &json!({"code": code, "code_verifier": "x".repeat(43)}))
            .await?
            .check(400)?;
        let (verifier, challenge) = nimbus_client::sso::pkce_pair();
        let start = nimbus_client::sso::start_url(&gw.url, "http://127.0.0.1:9/cb", &challenge, "other");
        let mut browser = Browser::new()?;
        let callback = browser.sign_in(&start, "alice", &format!("{}{CALLBACK}", gw.url)).await?;
        let (_, location, _) = browser.visit(&callback).await?;
        let code = url_params(&location.unwrap_or_default(), '?').remove("code").context("no code")?;
        let wrong = nimbus_client::sso::pkce_pair().0;
        gw.api()
            .post_json("/api/v1/auth/oidc/token", &json!({"code": code, "code_verifier": wrong}))
            .await?
            .check(400)?;
        // Used up by the wrong try: the right verifier is too late.
        gw.api()
            .post_json("/api/v1/auth/oidc/token", &json!({"code": code, "code_verifier": verifier}))
            .await?
            .check(400)?;
        let (verifier, challenge) = nimbus_client::sso::pkce_pair();
        let start = nimbus_client::sso::start_url(&gw.url, "http://127.0.0.1:9/cb", &challenge, "other");
        let callback = browser.sign_in(&start, "alice", &format!("{}{CALLBACK}", gw.url)).await?;
        let (_, location, _) = browser.visit(&callback).await?;
        let code = url_params(&location.unwrap_or_default(), '?').remove("code").context("no code")?;
        let login: LoginResponse = gw
            .api()
            .post_json("/api/v1/auth/oidc/token", &json!({"code": code, "code_verifier": verifier}))
            .await?
            .ok(200)?;
        assert_eq!(login.user.username, "alice");
        Ok(())
    })
    .await
}

/// The desktop app's "Sign in with SSO" (`Desktop::sign_in_sso`): the same loopback flow as the
/// CLI (nimbus_client::sso, one copy), its browser here driven over HTTP; it ends with an
/// ordinary device token kept in the app's token store, and the app is signed in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn desktop_sign_in_sso() -> anyhow::Result<()> {
    use nimbus_desktop_core::api::{SignInOutcome, SsoSignInRequest};
    use nimbus_desktop_core::token::TokenStore;
    use nimbus_desktop_core::{Desktop, DesktopConfig};

    with_sso(Backend::SqliteLocal, &["--oidc-provision", "auto"], |gw, _p| async move {
        let dir = tempfile::tempdir()?;
        let cfg = DesktopConfig {
            config_dir: dir.path().join("config"),
            cache_dir: dir.path().join("cache"),
            default_mountpoint: dir.path().join("mnt"),
            token_store: Some(TokenStore::File { dir: dir.path().join("config").join("tokens") }),
            device_name: "e2e desktop sso".into(),
            cache_size: 64 << 20,
            cache_mem: 16 << 20,
        };
        let desktop = Desktop::open(cfg.clone()).await?;
        let (tx, rx) = tokio::sync::oneshot::channel::<String>();
        let req = SsoSignInRequest { server_url: format!("{}/", gw.url), trusted_fingerprint: None };
        // What the app's browser would open goes to this test instead.
        let signing_in = {
            let desktop = desktop.clone();
            tokio::spawn(async move {
                desktop
                    .sign_in_sso(req, move |url| {
                        let _ = tx.send(url.to_string());
                        true
                    })
                    .await
            })
        };
        let url = tokio::time::timeout(Duration::from_secs(30), rx).await??;
        ensure!(
            url.starts_with(&format!("{}/api/v1/auth/oidc/start?cli_redirect=http%3A%2F%2F127.0.0.1%3A", gw.url)),
            "{url}"
        );
        ensure!(url.contains("device=e2e%20desktop%20sso"), "{url}");
        let mut browser = Browser::new()?;
        let callback = browser.sign_in(&url, "carol", &format!("{}{CALLBACK}", gw.url)).await?;
        let (status, location, _) = browser.visit(&callback).await?;
        ensure!(status == 303, "callback answered {status}");
        let location = location.context("no location")?;
        ensure!(location.starts_with("http://127.0.0.1:"), "{location}");
        let (status, _, page) = browser.visit(&location).await?;
        ensure!(status == 200 && page.contains("Signed in"), "{status}: {page}");

        let outcome = tokio::time::timeout(Duration::from_secs(30), signing_in).await???;
        let SignInOutcome::SignedIn { account } = outcome else { anyhow::bail!("not signed in: {outcome:?}") };
        ensure!(account.username == "carol" && account.server_url == gw.url, "{account:?}");
        // The app's client uses the device token; the gateway knows it by the app's device name.
        let client = desktop.client().await.context("no session")?;
        let me = client.me().await?;
        ensure!(me.username == "carol" && me.source == IdentitySource::Oidc, "{me:?}");
        let token = TokenStore::File { dir: dir.path().join("config").join("tokens") }
            .load(&nimbus_desktop_core::token::account_key(&gw.url, "carol"))?
            .context("no token stored")?;
        let tokens: serde_json::Value = gw.api().with_token(&token).get("/api/v1/auth/tokens").await?.ok(200)?;
        ensure!(tokens.to_string().contains("e2e desktop sso"), "{tokens}");
        // The sign-in survives a restart of the app (account file and token store).
        drop(desktop);
        let again = Desktop::open(cfg).await?;
        ensure!(again.status().await.account.is_some_and(|a| a.username == "carol"), "signed out after a restart");
        // A second SSO sign-in while signed in is refused before any browser opens.
        let e = again
            .sign_in_sso(SsoSignInRequest { server_url: gw.url.clone(), trusted_fingerprint: None }, |_| {
                panic!("no browser may open while signed in")
            })
            .await;
        ensure!(e.is_err(), "{e:?}");
        Ok(())
    })
    .await
}

/// The desktop app asks a gateway without single sign-on nothing in a browser.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn desktop_sso_refused_without_a_provider() -> anyhow::Result<()> {
    use nimbus_desktop_core::api::SsoSignInRequest;
    use nimbus_desktop_core::token::TokenStore;
    use nimbus_desktop_core::{Desktop, DesktopConfig, DesktopError};

    run_on(Backend::SqliteLocal, GatewayOptions::default(), |gw| async move {
        let dir = tempfile::tempdir()?;
        let desktop = Desktop::open(DesktopConfig {
            config_dir: dir.path().join("config"),
            cache_dir: dir.path().join("cache"),
            default_mountpoint: dir.path().join("mnt"),
            token_store: Some(TokenStore::File { dir: dir.path().join("config").join("tokens") }),
            device_name: "e2e desktop".into(),
            cache_size: 64 << 20,
            cache_mem: 16 << 20,
        })
        .await?;
        let r = desktop
            .sign_in_sso(SsoSignInRequest { server_url: gw.url.clone(), trusted_fingerprint: None }, |_| {
                panic!("no browser may open for a gateway without single sign-on")
            })
            .await;
        match r {
            Err(DesktopError::Invalid(m)) => ensure!(m.contains("does not offer single sign-on"), "{m}"),
            other => anyhow::bail!("expected a refusal, got {other:?}"),
        }
        ensure!(desktop.status().await.account.is_none());
        Ok(())
    })
    .await
}

/// The console's "Sign in with single sign-on" in Debian's chromium: admin-ui/e2e/sso.e2e.mjs
/// (playwright-core, installed with the console's packages by the gateway's build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_sso_in_chromium() -> anyhow::Result<()> {
    let ui = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../admin-ui");
    ensure!(ui.join("node_modules/playwright-core").exists(), "install the console's packages: cd admin-ui && npm ci");
    let args = ["--oidc-provision", "auto", "--oidc-admin-claim", "groups", "--oidc-admin-values", "nimbus-admins"];
    with_sso(Backend::SqliteLocal, &args, |gw, _p| async move {
        let out = tokio::process::Command::new("node")
            .arg("e2e/sso.e2e.mjs")
            .arg(&gw.url)
            .current_dir(&ui)
            .output()
            .await
            .context("cannot run node")?;
        let log = format!(
            "stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ensure!(out.status.success(), "the browser test failed ({}):\n{log}", out.status);
        println!("{log}");
        Ok(())
    })
    .await
}
