//! Login, tokens, logout, expiry, disabled users and login throttling, against every backend.

use std::time::Duration;

use anyhow::{Context, ensure};
use nimbus_e2e::gateway::user_password;
use nimbus_e2e::http::check_rfc3339_utc;
use nimbus_e2e::{ADMIN_PASSWORD, GatewayOptions, backend_test};
use nimbus_proto::wire::{LoginResponse, Me, Role, TokenList};
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

backend_test!(login_throttling, |gw| async move {
    let (_, token) = gw.create_user("erin", None).await?;
    gw.create_user("frank", None).await?;
    let api = gw.api();
    for i in 0..5 {
        api.login("erin", "wrong").await?.check_error(401, "unauthorized").with_context(|| format!("failure {i}"))?;
    }
    // Locked now, even with the right password.
    let r = api.login("erin", &user_password("erin")).await?;
    r.check_error(429, "too_many_requests")?;
    let ra: u64 = r.header("retry-after").context("429 without Retry-After")?.parse().context("Retry-After seconds")?;
    ensure!((1..=60).contains(&ra), "Retry-After {ra}");
    api.login("erin", "wrong").await?.check_error(429, "too_many_requests")?;
    // Other users are unaffected; existing tokens keep working.
    api.login_ok("frank", &user_password("frank")).await?;
    api.with_token(&token).get("/api/v1/me").await?.check(200)?;
    // An unknown username locks the same way (no existence oracle).
    for _ in 0..5 {
        api.login("ghost", "wrong").await?.check_error(401, "unauthorized")?;
    }
    api.login("ghost", "wrong").await?.check_error(429, "too_many_requests")?;
    Ok(())
});
