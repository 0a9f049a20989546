//! Login, tokens, logout, expiry, disabled users, and sign-in throttling per client address
//! (clients on several loopback addresses, and behind a trusted proxy), against every backend.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use anyhow::{Context, ensure};
use nimbus_e2e::gateway::user_password;
use nimbus_e2e::http::check_rfc3339_utc;
use nimbus_e2e::{ADMIN_PASSWORD, Api, Gateway, GatewayOptions, Resp, backend_test};
use nimbus_proto::wire::{AuditList, IdentitySource, LoginResponse, Me, Role, TokenList, UserInfo};
use reqwest::Method;

backend_test!(login, |gw| async move {
    let api = gw.api();
    let r = api.login("admin", ADMIN_PASSWORD).await?;
    let l: LoginResponse = r.ok(200)?;
    ensure!(l.token.len() >= 20, "a short token: {r}");
    ensure!(l.user.username == "admin" && l.user.role == Role::Admin, "{r}");
    let v = r.value()?;
    let mut keys: Vec<&str> = v.as_object().context("object")?.keys().map(String::as_str).collect();
    keys.sort_unstable();
    ensure!(keys == ["expires_at", "token", "user"], "login body keys: {r}");
    // Default lifetime: 30 days.
    let exp = check_rfc3339_utc(&l.expires_at)?;
    let days = (exp - time::OffsetDateTime::now_utc()).whole_hours() as f64 / 24.0;
    ensure!((29.9..=30.1).contains(&days), "token lifetime {days} days, want 30");

    let me: Me = api.with_token(&l.token).get("/api/v1/me").await?.ok(200)?;
    ensure!(me.id == l.user.id && me.username == "admin" && me.role == Role::Admin, "{me:?}");
    ensure!(me.source == IdentitySource::Local && !me.totp, "a local account without two-factor: {me:?}");
    let info: UserInfo = api.with_token(&l.token).get(&format!("/api/v1/admin/users/{}", me.id)).await?.ok(200)?;
    let last = check_rfc3339_utc(info.last_login.as_deref().context("the sign-in is recorded")?)?;
    ensure!((time::OffsetDateTime::now_utc() - last).whole_minutes() < 5, "last sign-in {last}");

    // Wrong password and unknown user: the same answer.
    let wrong = api.login("admin", "not the password").await?;
    let wrong_err = wrong.check_error(401, "unauthorized")?;
    let unknown = api.login("nobody-here", "not the password").await?;
    let unknown_err = unknown.check_error(401, "unauthorized")?;
    ensure!(wrong_err == unknown_err, "wrong password vs unknown user differ: {wrong} / {unknown}");
    ensure!(wrong.header("www-authenticate") == unknown.header("www-authenticate"));

    // Usernames are case-insensitive... or at least never a different account: either way no 5xx.
    let r = api.login("ADMIN", ADMIN_PASSWORD).await?;
    r.check_any(&[200, 401])?;

    // Malformed bodies.
    let r = api.req(Method::POST, "/api/v1/auth/login").json_text("{not json").send().await?;
    r.check_error(400, "bad_request")?;
    let r = api.req(Method::POST, "/api/v1/auth/login").json_text(r#"{"username":"admin"}"#).send().await?;
    r.check_error(400, "bad_request")?;

    // Bad tokens.
    for t in ["", "nmb_invalid", "garbage garbage", &format!("{}x", l.token)] {
        let r = api.req(Method::GET, "/api/v1/me").header("authorization", &format!("Bearer {t}")).send().await?;
        r.check_error(401, "unauthorized").with_context(|| format!("token {t:?}"))?;
    }
    api.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    let r = api.req(Method::GET, "/api/v1/me").header("authorization", &format!("Basic {}", l.token)).send().await?;
    r.check_error(401, "unauthorized")?;
    // The scheme's name in any case (RFC 9110), but only that scheme.
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let r =
            api.req(Method::GET, "/api/v1/me").header("authorization", &format!("{scheme} {}", l.token)).send().await?;
        r.check(200).with_context(|| scheme.to_string())?;
    }
    let r = api.req(Method::GET, "/api/v1/me").header("authorization", &format!("Bearerx {}", l.token)).send().await?;
    r.check_error(401, "unauthorized")?;
    // A method a route does not take is answered with the JSON error body too.
    let r = api.req(Method::DELETE, "/api/v1/move").send().await?;
    r.check_error(405, "bad_request")?;
    Ok(())
});

backend_test!(logout_and_tokens, |gw| async move {
    let (uid, _) = gw.create_user("bob", None).await?;
    let api = gw.api();
    let login = |device: &'static str| {
        let api = api.clone();
        async move {
            let r = api
                .post_json(
                    "/api/v1/auth/login",
                    &serde_json::json!({"username": "bob", "password": user_password("bob"), "device": device}),
                )
                .await?;
            let l: LoginResponse = r.ok(200)?;
            anyhow::Ok(l)
        }
    };
    let laptop = login("laptop").await?;
    let phone = login("phone").await?;
    ensure!(laptop.token != phone.token);
    ensure!(laptop.user.id == uid);
    let lap = api.with_token(&laptop.token);
    let ph = api.with_token(&phone.token);

    let me: Me = lap.get("/api/v1/me").await?.ok(200)?;
    ensure!(
        me.id == uid && me.username == "bob" && me.role == Role::User && me.quota_bytes.is_none() && me.used_bytes == 0,
        "{me:?}"
    );

    let list: TokenList = lap.get("/api/v1/auth/tokens").await?.ok(200)?;
    let current: Vec<&str> = list.tokens.iter().filter(|t| t.current).map(|t| t.device.as_str()).collect();
    ensure!(current == ["laptop"], "exactly the calling token is current: {:?}", list.tokens);
    let phone_id = list.tokens.iter().find(|t| t.device == "phone").context("the phone token is listed")?.id;
    for t in &list.tokens {
        check_rfc3339_utc(&t.created)?;
        check_rfc3339_utc(&t.expires_at)?;
    }
    // The listing never shows a secret.
    let raw = lap.get("/api/v1/auth/tokens").await?.text();
    ensure!(!raw.contains(&laptop.token) && !raw.contains(&phone.token), "token list leaks secrets: {raw}");

    // Revoke the phone from the laptop.
    lap.delete(&format!("/api/v1/auth/tokens/{phone_id}")).await?.check(204)?;
    ph.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    lap.get("/api/v1/me").await?.check(200)?;
    lap.delete(&format!("/api/v1/auth/tokens/{phone_id}")).await?.check_error(404, "not_found")?;
    lap.delete("/api/v1/auth/tokens/987654321").await?.check_error(404, "not_found")?;
    let list: TokenList = lap.get("/api/v1/auth/tokens").await?.ok(200)?;
    ensure!(list.tokens.iter().all(|t| t.id != phone_id), "a revoked token is still listed: {:?}", list.tokens);

    // Logout revokes the calling token.
    let r = lap.req(Method::POST, "/api/v1/auth/logout").send().await?;
    r.check(204)?;
    lap.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    lap.req(Method::POST, "/api/v1/auth/logout").send().await?.check_error(401, "unauthorized")?;
    api.req(Method::POST, "/api/v1/auth/logout").send().await?.check_error(401, "unauthorized")?;

    // Revoking the current token through DELETE works too.
    let l = login("tablet").await?;
    let tab = api.with_token(&l.token);
    let list: TokenList = tab.get("/api/v1/auth/tokens").await?.ok(200)?;
    let id = list.tokens.iter().find(|t| t.current).context("current token")?.id;
    tab.delete(&format!("/api/v1/auth/tokens/{id}")).await?.check(204)?;
    tab.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    Ok(())
});

backend_test!(token_expiry, opts = GatewayOptions::default().token_ttl(2), |gw| async move {
    let (_, token) = gw.create_user("carol", None).await?;
    let api = gw.api().with_token(&token);
    api.get("/api/v1/me").await?.check(200)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    api.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    api.get_file("/x.txt").await?.check_error(401, "unauthorized")?;
    // A fresh login works again.
    let fresh = gw.api().login_ok("carol", &user_password("carol")).await?;
    fresh.get("/api/v1/me").await?.check(200)?;
    Ok(())
});

backend_test!(disabled_user, |gw| async move {
    let (uid, token) = gw.create_user("dave", None).await?;
    let api = gw.api().with_token(&token);
    api.put_file("/keep.txt", "kept").await?.entry(201)?;
    let admin = gw.admin().await?;

    let r = admin.patch_json(&format!("/api/v1/admin/users/{uid}"), &serde_json::json!({"disabled": true})).await?;
    let u: nimbus_proto::wire::UserInfo = r.ok(200)?;
    ensure!(u.disabled, "{r}");
    // At once: no grace period, no cache.
    api.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    api.get_file("/keep.txt").await?.check_error(401, "unauthorized")?;
    let r = gw.api().login("dave", &user_password("dave")).await?;
    r.check_error(401, "unauthorized")?;

    admin
        .patch_json(&format!("/api/v1/admin/users/{uid}"), &serde_json::json!({"disabled": false}))
        .await?
        .check(200)?;
    // Disabling revoked the old token for good.
    api.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    let again = gw.api().login_ok("dave", &user_password("dave")).await?;
    let r = again.get_file("/keep.txt").await?;
    r.check(200)?;
    ensure!(r.body.as_ref() == b"kept", "the files survive disabling");
    Ok(())
});

/// `127.0.0.n`: on Linux every 127/8 address is loopback, so each is another client machine.
fn lo(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

/// HTTP Basic credentials.
fn basic(user: &str, secret: &str) -> String {
    use base64::Engine;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{secret}")))
}

/// A WebDAV PROPFIND of the space root with these Basic credentials.
async fn dav_basic(api: &Api, user: &str, secret: &str) -> anyhow::Result<Resp> {
    let propfind = Method::from_bytes(b"PROPFIND").context("method")?;
    api.anonymous()
        .req(propfind, "/dav/")
        .header("depth", "0")
        .header("authorization", &basic(user, secret))
        .send()
        .await
}

/// `POST /api/v1/auth/login` with `X-Forwarded-For` lines (one header per element).
async fn login_via(api: &Api, forwarded: &[&str], user: &str, password: &str, device: &str) -> anyhow::Result<Resp> {
    let mut r = api.anonymous().req(Method::POST, "/api/v1/auth/login");
    for line in forwarded {
        r = r.header("x-forwarded-for", line);
    }
    r.json(&serde_json::json!({"username": user, "password": password, "device": device})).send().await
}

/// A 429 `too_many_requests` with a `Retry-After` of 1..=max seconds.
fn check_throttled(r: &Resp, max: u64) -> anyhow::Result<u64> {
    r.check_error(429, "too_many_requests")?;
    let ra: u64 = r.header("retry-after").context("429 without Retry-After")?.parse().context("Retry-After seconds")?;
    ensure!((1..=max).contains(&ra), "Retry-After {ra}, want 1..={max}: {r}");
    Ok(ra)
}

/// `(action, ip)` of the audit entries whose actor is `user`, oldest first.
async fn audit_of(gw: &Gateway, user: &str) -> anyhow::Result<Vec<(String, String)>> {
    let admin = gw.admin().await?;
    let list: AuditList = admin.get(&format!("/api/v1/admin/audit?user={user}&limit=200")).await?.ok(200)?;
    let mut out: Vec<(String, String)> =
        list.entries.into_iter().map(|e| (e.action, e.ip.unwrap_or_default())).collect();
    out.reverse();
    Ok(out)
}

/// The gateway's output must not show a panic (a handler bug caught by the panic layer still
/// answers 500; this catches one in a background task too).
fn check_no_panic(gw: &Gateway) -> anyhow::Result<()> {
    let logs = gw.logs();
    for p in [logs.stdout_path(), logs.stderr_path()] {
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        ensure!(!text.contains("panicked"), "the gateway panicked: {}", p.display());
    }
    Ok(())
}

backend_test!(login_throttling, |gw| async move {
    let (erin_id, token) = gw.create_user("erin", None).await?;
    gw.create_user("frank", None).await?;
    let guesser = gw.api().from_address(lo(2))?;
    let owner = gw.api().from_address(lo(3))?;
    for i in 0..5 {
        guesser
            .login("erin", "wrong")
            .await?
            .check_error(401, "unauthorized")
            .with_context(|| format!("failure {i}"))?;
    }
    // Locked at the guesser's address, even with the right password.
    check_throttled(&guesser.login("erin", &user_password("erin")).await?, 60)?;
    check_throttled(&guesser.login("erin", "wrong").await?, 60)?;
    // The owner signing in from another address is not affected...
    let r = login_via(&owner, &[], "erin", &user_password("erin"), "erin's laptop").await?;
    let fresh: LoginResponse = r.ok(200)?;
    // The device list shows where a device signed in from...
    let admin = gw.admin().await?;
    let laptop_ip = || async {
        let devices: TokenList = admin.get(&format!("/api/v1/admin/users/{erin_id}/devices")).await?.ok(200)?;
        let laptop = devices.tokens.into_iter().find(|t| t.device == "erin's laptop").context("device listed")?;
        anyhow::Ok(laptop.last_ip)
    };
    ensure!(laptop_ip().await?.as_deref() == Some("127.0.0.3"));
    // ... and a valid token is never throttled by someone else's failures, even when it is
    // used from the guesser's own address: REST bearer and WebDAV app password alike.
    guesser.with_token(&token).get("/api/v1/me").await?.check(200)?;
    dav_basic(&guesser, "erin", &token).await?.check(207)?;
    dav_basic(&guesser, "erin", &fresh.token).await?.check(207)?;
    // ... and then where it was last used (recorded in the background, hence the wait).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while laptop_ip().await?.as_deref() != Some("127.0.0.2") {
        ensure!(std::time::Instant::now() < deadline, "the device's last address stays {:?}", laptop_ip().await?);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A wrong app password at the locked address waits like a wrong password.
    check_throttled(&dav_basic(&guesser, "erin", "nmb_wrong").await?, 60)?;
    // Five failures are far from the address's own limit: other names still sign in there.
    guesser.login_ok("frank", &user_password("frank")).await?;
    // An unknown username locks the same way (no existence oracle).
    for _ in 0..5 {
        guesser.login("ghost", "wrong").await?.check_error(401, "unauthorized")?;
    }
    check_throttled(&guesser.login("ghost", "wrong").await?, 60)?;

    // The audit log shows who signed in from where.
    let audit = audit_of(&gw, "erin").await?;
    let failed: Vec<&str> = audit.iter().filter(|(a, _)| a == "login_failed").map(|(_, ip)| ip.as_str()).collect();
    ensure!(failed == ["127.0.0.2"; 5], "failures are logged with the guesser's address: {audit:?}");
    ensure!(audit.iter().any(|(a, ip)| a == "login" && ip == "127.0.0.3"), "{audit:?}");
    check_no_panic(&gw)
});

backend_test!(address_throttling, |gw| async move {
    let (_, token) = gw.create_user("alice", None).await?;
    let noisy = gw.api().from_address(lo(4))?;
    // Twenty failures from one address, each for another name: no name reaches its own limit,
    // the address does.
    for i in 0..20 {
        noisy.login(&format!("nobody{i}"), "wrong").await?.check_error(401, "unauthorized")?;
    }
    let ra = check_throttled(&noisy.login("alice", &user_password("alice")).await?, 60)?;
    check_throttled(&noisy.login("nobody-new", "wrong").await?, ra)?;
    check_throttled(&dav_basic(&noisy, "alice", "nmb_wrong").await?, ra)?;
    // Tokens still work from there; everyone else signs in.
    noisy.with_token(&token).get("/api/v1/me").await?.check(200)?;
    dav_basic(&noisy, "alice", &token).await?.check(207)?;
    gw.api().from_address(lo(5))?.login_ok("alice", &user_password("alice")).await?;
    gw.api().login_ok("alice", &user_password("alice")).await?;
    check_no_panic(&gw)
});

backend_test!(
    trusted_proxy_forwarded_for,
    opts = GatewayOptions::default().arg("--trusted-proxies").arg("127.0.0.9, 10.0.0.0/8"),
    |gw| async move {
        let (erin_id, _) = gw.create_user("erin", None).await?;
        gw.create_user("gina", None).await?;
        let pw = user_password("erin");
        let proxy = gw.api().from_address(lo(9))?;

        // Five failures of one client behind the proxy lock that client only.
        for _ in 0..5 {
            login_via(&proxy, &["198.51.100.7"], "erin", "wrong", "x").await?.check_error(401, "unauthorized")?;
        }
        check_throttled(&login_via(&proxy, &["198.51.100.7"], "erin", &pw, "x").await?, 60)?;
        let r = login_via(&proxy, &["198.51.100.8"], "erin", &pw, "behind the proxy").await?;
        let behind: LoginResponse = r.ok(200)?;

        // A client's own (leftmost) claim is never believed: an attacker at 203.0.113.50
        // pretending to be 198.51.100.8 locks only itself.
        for _ in 0..5 {
            let r = login_via(&proxy, &["198.51.100.8, 203.0.113.50"], "erin", "wrong", "x").await?;
            r.check_error(401, "unauthorized")?;
        }
        login_via(&proxy, &["198.51.100.8"], "erin", &pw, "x").await?.check(200)?;
        check_throttled(&login_via(&proxy, &["203.0.113.50"], "erin", &pw, "x").await?, 60)?;

        // Several header lines are one list; ports, IPv6 brackets and a second trusted proxy
        // (10.0.0.0/8) are understood; an IPv6 client is its /64.
        for _ in 0..5 {
            let lines = ["203.0.113.99", "[2001:db8:1:2::1]:4711, 10.1.2.3"];
            login_via(&proxy, &lines, "erin", "wrong", "x").await?.check_error(401, "unauthorized")?;
        }
        check_throttled(&login_via(&proxy, &["2001:db8:1:2::ffff"], "erin", &pw, "x").await?, 60)?;
        login_via(&proxy, &["203.0.113.99"], "erin", &pw, "x").await?.check(200)?;
        login_via(&proxy, &["2001:db8:1:3::1"], "erin", &pw, "x").await?.check(200)?;
        // Garbage from a trusted proxy: the proxy's own address is the client; nothing breaks.
        for junk in ["unknown", "_hidden, ", "999.1.2.3", "fe80::1%eth0", ",,,", "[::1"] {
            login_via(&proxy, &[junk], "erin", &pw, "x").await?.check(200).with_context(|| format!("{junk:?}"))?;
        }

        // From a peer that is not trusted the header is ignored: every failure counts against
        // the peer, whatever it claims.
        let stranger = gw.api().from_address(lo(10))?;
        for i in 0..5 {
            let claim = format!("192.0.2.{i}");
            login_via(&stranger, &[&claim], "gina", "wrong", "x").await?.check_error(401, "unauthorized")?;
        }
        check_throttled(&login_via(&stranger, &["192.0.2.200"], "gina", &user_password("gina"), "x").await?, 60)?;
        gw.api().from_address(lo(11))?.login_ok("gina", &user_password("gina")).await?;

        // The audit log and the device list show the client, not the proxy.
        let audit = audit_of(&gw, "erin").await?;
        let failed: Vec<&str> = audit.iter().filter(|(a, _)| a == "login_failed").map(|(_, ip)| ip.as_str()).collect();
        let want = [["198.51.100.7"; 5], ["203.0.113.50"; 5], ["2001:db8:1:2::1"; 5]].concat();
        ensure!(failed == want, "failure addresses {failed:?}, want {want:?}");
        ensure!(audit.iter().any(|(a, ip)| a == "login" && ip == "198.51.100.8"), "{audit:?}");
        ensure!(audit.iter().any(|(a, ip)| a == "login" && ip == "127.0.0.9"), "garbage falls back: {audit:?}");
        let gina = audit_of(&gw, "gina").await?;
        ensure!(gina.iter().filter(|(a, ip)| a == "login_failed" && ip == "127.0.0.10").count() == 5, "{gina:?}");
        let admin = gw.admin().await?;
        let devices: TokenList = admin.get(&format!("/api/v1/admin/users/{erin_id}/devices")).await?.ok(200)?;
        let dev = devices.tokens.iter().find(|t| t.device == "behind the proxy").context("device listed")?;
        ensure!(dev.last_ip.as_deref() == Some("198.51.100.8"), "{:?}", devices.tokens);
        // (Used through the proxy for the same client: a use records its address too.)
        let r = proxy
            .with_token(&behind.token)
            .req(Method::GET, "/api/v1/auth/tokens")
            .header("x-forwarded-for", "198.51.100.8")
            .send()
            .await?;
        let own: TokenList = r.ok(200)?;
        ensure!(own.tokens.iter().any(|t| t.current && t.last_ip.as_deref() == Some("198.51.100.8")), "{own:?}");

        // Metrics are open to loopback clients only: a request the proxy forwards for a
        // remote client is not one.
        let r = proxy.anonymous().req(Method::GET, "/metrics").header("x-forwarded-for", "198.51.100.7").send().await?;
        r.check_error(401, "unauthorized")?;
        proxy.anonymous().get("/metrics").await?.check(200)?;
        check_no_panic(&gw)
    }
);

backend_test!(
    password_checks_are_bounded,
    opts = GatewayOptions::default().arg("--password-hash-concurrency").arg("1"),
    |gw| async move {
        gw.create_user("hank", None).await?;
        // A burst of sign-ins, each from its own address (so the throttle stays out of it):
        // one hash at a time, a few wait, the rest are told at once to come back.
        let mut burst = Vec::new();
        for i in 0..64u8 {
            let api = gw.api().from_address(lo(20 + i))?;
            burst.push(async move { api.login("hank", "wrong").await });
        }
        let answers = futures::future::join_all(burst).await;
        let (mut refused, mut checked) = (0, 0);
        for r in answers {
            let r = r?;
            match r.status {
                401 => checked += 1,
                _ => {
                    let e = r.check_error(429, "too_many_requests")?;
                    ensure!(r.header("retry-after").as_deref() == Some("1"), "{r}");
                    ensure!(e.message.contains("too many passwords"), "{r}");
                    refused += 1;
                }
            }
        }
        ensure!(refused > 0 && checked > 0, "{checked} checked and {refused} refused of 64");
        // The bound frees up: the owner signs in right after, and the refusals are counted.
        gw.api().from_address(lo(99))?.login_ok("hank", &user_password("hank")).await?;
        let metrics = gw.api().get("/metrics").await?.text();
        ensure!(
            metrics.lines().any(|l| l.starts_with("nimbus_password_checks_refused_total") && !l.ends_with(" 0")),
            "no refusal counted"
        );
        check_no_panic(&gw)
    }
);

backend_test!(
    throttle_shared_between_gateways,
    only = postgres_s3,
    opts = GatewayOptions::default(),
    |gw| async move {
        gw.create_user("ivy", None).await?;
        let second = gw.start_sibling().await?;
        let one = gw.api().from_address(lo(2))?;
        let two = second.api.from_address(lo(2))?;
        for _ in 0..5 {
            one.login("ivy", "wrong").await?.check_error(401, "unauthorized")?;
        }
        // The second gateway knows: the lock is in the shared database.
        check_throttled(&two.login("ivy", &user_password("ivy")).await?, 60)?;
        second.api.from_address(lo(3))?.login_ok("ivy", &user_password("ivy")).await?;
        // Failures on both gateways add up for the address.
        for i in 0..10 {
            one.login(&format!("a{i}"), "wrong").await?.check_error(401, "unauthorized")?;
        }
        for i in 0..5 {
            two.login(&format!("b{i}"), "wrong").await?.check_error(401, "unauthorized")?;
        }
        check_throttled(&one.login("ivy-2", "wrong").await?, 60)?;
        check_throttled(&two.login("ivy-3", "wrong").await?, 60)?;
        check_no_panic(&gw)
    }
);
