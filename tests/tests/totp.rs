//! Two-factor sign-in (TOTP, RFC 6238) against the real gateway: enrolment, sign-in with a
//! valid, an expired and a reused code, recovery codes used once, throttling of wrong codes,
//! turning it off, the administrator's reset, and `--require-totp` (a sign-in that may only
//! set it up). Codes are computed here with the same crate (`totp-rs`) an authenticator would
//! match.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, ensure};
use nimbus_e2e::browser::{admin_ui, run_e2e_script};
use nimbus_e2e::gateway::user_password;
use nimbus_e2e::{ADMIN_PASSWORD, Api, Backend, Gateway, GatewayOptions, Resp, backend_test, run_on};
use nimbus_proto::wire::{
    AuditList, CreatedUser, LoginResponse, Me, TotpEnrollment, TotpRecoveryCodes, UserInfo, UserList,
};
use reqwest::Method;
use totp_rs::{Algorithm, Secret, TOTP};

/// What an authenticator app makes of the enrolment's secret.
struct Authenticator(TOTP);

impl Authenticator {
    fn new(e: &TotpEnrollment) -> anyhow::Result<Self> {
        let bytes = Secret::Encoded(e.secret.clone()).to_bytes().map_err(|e| anyhow::anyhow!("base32: {e:?}"))?;
        Ok(Authenticator(TOTP::new_unchecked(Algorithm::SHA1, 6, 1, 30, bytes, None, String::new())))
    }

    /// The code `offset_steps` 30-second steps from now.
    fn code(&self, offset_steps: i64) -> String {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
        self.0.generate((now + offset_steps * 30).max(0) as u64)
    }

    /// Six digits that are none of the codes accepted around now.
    fn wrong_code(&self) -> String {
        let near: Vec<String> = (-2..=2).map(|o| self.code(o)).collect();
        (0..1000)
            .map(|i| format!("{:06}", (i * 7919 + 123_456) % 1_000_000))
            .find(|c| !near.contains(c))
            .unwrap_or_default()
    }
}

fn lo(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

async fn login(api: &Api, user: &str, password: &str, totp: Option<&str>) -> anyhow::Result<Resp> {
    let mut body = serde_json::json!({"username": user, "password": password});
    if let Some(t) = totp {
        body["totp"] = serde_json::Value::String(t.to_string());
    }
    api.anonymous().post_json("/api/v1/auth/login", &body).await
}

/// Enrols the account of `api` (a signed-in client): returns its authenticator and recovery codes.
async fn enrol(api: &Api, user: &str) -> anyhow::Result<(Authenticator, Vec<String>)> {
    let e: TotpEnrollment = api.post_json("/api/v1/auth/totp", &serde_json::json!({})).await?.ok(200)?;
    ensure!(e.secret.len() >= 32 && e.secret.chars().all(|c| c.is_ascii_uppercase() || ('2'..='7').contains(&c)));
    ensure!(
        e.otpauth_url.starts_with(&format!("otpauth://totp/Nimbus:{user}?")) && e.otpauth_url.contains(&e.secret),
        "otpauth URL {}",
        e.otpauth_url
    );
    let auth = Authenticator::new(&e)?;
    let codes: TotpRecoveryCodes =
        api.post_json("/api/v1/auth/totp/confirm", &serde_json::json!({"code": auth.code(0)})).await?.ok(200)?;
    Ok((auth, codes.recovery_codes))
}

async fn me(api: &Api) -> anyhow::Result<Me> {
    api.get("/api/v1/me").await?.ok(200)
}

/// `(action, detail)` of the audit entries of `action`s about or by `user`, oldest first.
async fn audit(admin: &Api, query: &str) -> anyhow::Result<Vec<(String, String)>> {
    let list: AuditList = admin.get(&format!("/api/v1/admin/audit?{query}&limit=200")).await?.ok(200)?;
    let mut out: Vec<(String, String)> =
        list.entries.into_iter().map(|e| (e.action, e.detail.unwrap_or_default())).collect();
    out.reverse();
    Ok(out)
}

fn check_no_panic(gw: &Gateway) -> anyhow::Result<()> {
    let logs = gw.logs();
    for p in [logs.stdout_path(), logs.stderr_path()] {
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        ensure!(!text.contains("panicked"), "the gateway panicked: {}", p.display());
    }
    Ok(())
}

backend_test!(enrol_sign_in_recover_and_turn_off, |gw| async move {
    let (uid, tina) = gw.user("tina", None).await?;
    let pw = user_password("tina");
    ensure!(!me(&tina).await?.totp, "off by default");
    let anon = gw.api();

    // Enrolment: pending until a right code confirms it.
    let e: TotpEnrollment = tina.post_json("/api/v1/auth/totp", &serde_json::json!({})).await?.ok(200)?;
    let auth = Authenticator::new(&e)?;
    tina.post_json("/api/v1/auth/totp/confirm", &serde_json::json!({"code": auth.wrong_code()}))
        .await?
        .check_error(400, "bad_request")?;
    tina.post_json("/api/v1/auth/totp/confirm", &serde_json::json!({"code": "not a code"}))
        .await?
        .check_error(400, "bad_request")?;
    ensure!(!me(&tina).await?.totp, "a wrong confirmation leaves it off");
    // Still pending: the password alone signs in.
    login(&anon, "tina", &pw, None).await?.check(200)?;
    // Starting over replaces the pending secret; the first one no longer confirms.
    let e2: TotpEnrollment = tina.post_json("/api/v1/auth/totp", &serde_json::json!({})).await?.ok(200)?;
    ensure!(e2.secret != e.secret, "a new secret each time");
    tina.post_json("/api/v1/auth/totp/confirm", &serde_json::json!({"code": auth.code(0)}))
        .await?
        .check_error(400, "bad_request")?;
    let auth = Authenticator::new(&e2)?;
    let confirm_code = auth.code(0);
    let codes: TotpRecoveryCodes =
        tina.post_json("/api/v1/auth/totp/confirm", &serde_json::json!({"code": confirm_code})).await?.ok(200)?;
    let codes = codes.recovery_codes;
    ensure!(codes.len() == 10, "ten recovery codes: {codes:?}");
    ensure!(me(&tina).await?.totp, "on after confirmation");
    // Already on: no second enrolment over it.
    tina.post_json("/api/v1/auth/totp", &serde_json::json!({})).await?.check_error(409, "conflict")?;
    // The token from before keeps working; the console sees the state.
    tina.get("/api/v1/dirs/").await?.check(200)?;
    let info: UserInfo = gw.admin().await?.get(&format!("/api/v1/admin/users/{uid}")).await?.ok(200)?;
    ensure!(info.totp, "the admin view shows two-factor on: {info:?}");
    // The console's user list shows it too, from the same page request (no call per row).
    let list: UserList = gw.admin().await?.get("/api/v1/admin/users?q=tina").await?.ok(200)?;
    ensure!(list.users == [info.clone()], "the list's entry is the user's: {:?} vs {info:?}", list.users);

    // Sign-in: the password alone asks for the code.
    let r = login(&anon, "tina", &pw, None).await?;
    r.check_error(401, "totp_required")?;
    login(&anon, "tina", &pw, Some("")).await?.check_error(401, "totp_required")?;
    // A wrong password with a code is just wrong (no hint that a code is needed).
    login(&anon, "tina", "wrong password", Some(&auth.code(0))).await?.check_error(401, "unauthorized")?;
    // An expired code (ten minutes old), and the code the confirmation used, are refused.
    login(&anon, "tina", &pw, Some(&auth.code(-20))).await?.check_error(401, "unauthorized")?;
    login(&anon, "tina", &pw, Some(&confirm_code)).await?.check_error(401, "unauthorized")?;
    // The next step's code (clock drift) is accepted once; replayed, it is refused.
    let next = auth.code(1);
    let l: LoginResponse = login(&anon, "tina", &pw, Some(&next)).await?.ok(200)?;
    ensure!(!l.totp_setup_required);
    anon.with_token(&l.token).get("/api/v1/me").await?.check(200)?;
    login(&anon, "tina", &pw, Some(&next)).await?.check_error(401, "unauthorized")?;

    // Recovery codes: each signs in once, in any case and with or without dashes.
    login(&anon, "tina", &pw, Some(&codes[0])).await?.check(200)?;
    login(&anon, "tina", &pw, Some(&codes[0])).await?.check_error(401, "unauthorized")?;
    let loose = codes[1].replace('-', "").to_uppercase();
    login(&anon, "tina", &pw, Some(&loose)).await?.check(200)?;
    login(&anon, "tina", &pw, Some("aaaa-bbbb-cccc-dddd")).await?.check_error(401, "unauthorized")?;

    // Wrong codes are failed sign-ins: five from one address lock the name there (429), even
    // for a right code; elsewhere tina still signs in.
    let guesser = anon.from_address(lo(7))?;
    for _ in 0..5 {
        login(&guesser, "tina", &pw, Some(&auth.wrong_code())).await?.check_error(401, "unauthorized")?;
    }
    let r = login(&guesser, "tina", &pw, Some(&codes[2])).await?;
    r.check_error(429, "too_many_requests")?;
    ensure!(r.header("retry-after").is_some(), "{r}");
    login(&anon, "tina", &pw, Some(&codes[2])).await?.check(200)?;

    // Turning it off needs a right code (a recovery code will do).
    tina.req(Method::DELETE, "/api/v1/auth/totp")
        .json(&serde_json::json!({"code": auth.wrong_code()}))
        .send()
        .await?
        .check_error(400, "bad_request")?;
    ensure!(me(&tina).await?.totp, "still on");
    tina.req(Method::DELETE, "/api/v1/auth/totp")
        .json(&serde_json::json!({"code": codes[3]}))
        .send()
        .await?
        .check(204)?;
    ensure!(!me(&tina).await?.totp, "off");
    login(&anon, "tina", &pw, None).await?.check(200)?;
    tina.req(Method::DELETE, "/api/v1/auth/totp")
        .json(&serde_json::json!({"code": codes[4]}))
        .send()
        .await?
        .check_error(409, "conflict")?;

    // Everything is in the audit log.
    let admin = gw.admin().await?;
    let log: Vec<(String, String)> =
        audit(&admin, "target=tina").await?.into_iter().filter(|(a, _)| a.starts_with("totp_")).collect();
    let actions: Vec<&str> = log.iter().map(|(a, _)| a.as_str()).collect();
    let rec = "totp_recovery_used";
    // Four recovery codes: two sign-ins, the one after the lock, and the one turning it off.
    ensure!(actions == ["totp_enabled", rec, rec, rec, rec, "totp_disabled"], "{log:?}");
    ensure!(log[1].1 == "9 recovery codes left" && log[4].1 == "6 recovery codes left", "{log:?}");
    let failed = audit(&admin, "user=tina&action=login_failed").await?;
    // Expired, the confirmation's code, a replay, a used recovery code, a made-up one, and
    // five guesses; the wrong password is logged without this detail.
    ensure!(failed.iter().filter(|(_, d)| d == "wrong two-factor code").count() == 10, "{failed:?}");
    check_no_panic(&gw)
});

backend_test!(admin_reset, |gw| async move {
    let (uid, uma) = gw.user("uma", None).await?;
    let (_, other) = gw.user("otto", None).await?;
    let pw = user_password("uma");
    enrol(&uma, "uma").await?;
    login(&gw.api(), "uma", &pw, None).await?.check_error(401, "totp_required")?;

    // Only administrators reset.
    other.delete(&format!("/api/v1/admin/users/{uid}/totp")).await?.check_error(403, "forbidden")?;
    let admin = gw.admin().await?;
    admin.delete("/api/v1/admin/users/999999/totp").await?.check_error(404, "not_found")?;
    admin.delete("/api/v1/admin/users/nope/totp").await?.check_any(&[400, 404])?;
    admin.delete(&format!("/api/v1/admin/users/{uid}/totp")).await?.check(204)?;
    let info: UserInfo = admin.get(&format!("/api/v1/admin/users/{uid}")).await?.ok(200)?;
    ensure!(!info.totp, "{info:?}");
    // Lost phone, reset: the password alone signs in again, and the user can enrol anew.
    login(&gw.api(), "uma", &pw, None).await?.check(200)?;
    uma.get("/api/v1/me").await?.check(200)?;
    enrol(&uma, "uma").await?;
    let log = audit(&admin, "action=totp_reset").await?;
    ensure!(log == [("totp_reset".to_string(), "two-factor sign-in was on".to_string())], "{log:?}");
    check_no_panic(&gw)
});

backend_test!(
    required_for_everyone,
    opts = GatewayOptions::default().arg("--require-totp").arg("all"),
    |gw| async move {
        let anon = gw.api();
        // The administrator signs in with the password: a token that may only set up two-factor.
        let l: LoginResponse = login(&anon, "admin", ADMIN_PASSWORD, None).await?.ok(200)?;
        ensure!(l.totp_setup_required, "the sign-in says set-up is required");
        let admin = anon.with_token(&l.token);
        admin.get("/api/v1/admin/users").await?.check_error(403, "totp_setup_required")?;
        admin.get("/api/v1/dirs/").await?.check_error(403, "totp_setup_required")?;
        admin.post_json("/api/v1/keys", &serde_json::json!({})).await?.check_error(403, "totp_setup_required")?;
        let m = me(&admin).await?;
        ensure!(m.totp_setup_required && m.totp_required && !m.totp, "{m:?}");
        // Setting it up makes the same token a full one; the policy still covers the account.
        let (auth, _codes) = enrol(&admin, "admin").await?;
        let m = me(&admin).await?;
        ensure!(!m.totp_setup_required && m.totp_required && m.totp, "{m:?}");
        admin.get("/api/v1/admin/users").await?.check(200)?;
        // Required: it cannot be turned off.
        admin
            .req(Method::DELETE, "/api/v1/auth/totp")
            .json(&serde_json::json!({"code": auth.code(1)}))
            .send()
            .await?
            .check_error(403, "forbidden")?;
        login(&anon, "admin", ADMIN_PASSWORD, None).await?.check_error(401, "totp_required")?;

        // A new user: the same until enrolled; logout works meanwhile.
        let created: CreatedUser = admin
            .post_json(
                "/api/v1/admin/users",
                &serde_json::json!({"username": "vera", "password": user_password("vera"), "role": "user"}),
            )
            .await?
            .ok(201)?;
        let l: LoginResponse = login(&anon, "vera", &user_password("vera"), None).await?.ok(200)?;
        ensure!(l.totp_setup_required);
        let first = anon.with_token(&l.token);
        first.get("/api/v1/dirs/").await?.check_error(403, "totp_setup_required")?;
        first.req(Method::POST, "/api/v1/auth/logout").send().await?.check(204)?;
        first.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
        let l: LoginResponse = login(&anon, "vera", &user_password("vera"), None).await?.ok(200)?;
        let vera = anon.with_token(&l.token);
        vera.get("/api/v1/auth/tokens").await?.check_error(403, "totp_setup_required")?;
        let (vauth, _) = enrol(&vera, "vera").await?;
        vera.get("/api/v1/dirs/").await?.check(200)?;
        // Full sign-ins from now on.
        let l: LoginResponse = login(&anon, "vera", &user_password("vera"), Some(&vauth.code(1))).await?.ok(200)?;
        ensure!(!l.totp_setup_required);
        // An admin reset sends vera back to set-up on her next sign-in; her tokens keep working.
        admin.delete(&format!("/api/v1/admin/users/{}/totp", created.user.id)).await?.check(204)?;
        vera.get("/api/v1/dirs/").await?.check(200)?;
        let l: LoginResponse = login(&anon, "vera", &user_password("vera"), None).await?.ok(200)?;
        ensure!(l.totp_setup_required);
        check_no_panic(&gw)
    }
);

// `--require-totp admins`: `/me` says which accounts the policy covers (the web app hides
// "Turn off" for them); a user may turn two-factor off, an administrator may not.
backend_test!(
    required_for_admins_only,
    only = sqlite_local,
    opts = GatewayOptions::default().arg("--require-totp").arg("admins"),
    |gw| async move {
        let anon = gw.api();
        let l: LoginResponse = login(&anon, "admin", ADMIN_PASSWORD, None).await?.ok(200)?;
        let admin = anon.with_token(&l.token);
        let (aauth, _) = enrol(&admin, "admin").await?;
        let m = me(&admin).await?;
        ensure!(m.totp_required && m.totp && !m.totp_setup_required, "admin: {m:?}");
        admin
            .req(Method::DELETE, "/api/v1/auth/totp")
            .json(&serde_json::json!({"code": aauth.code(1)}))
            .send()
            .await?
            .check_error(403, "forbidden")?;

        // (Made with this administrator's token: the harness's own admin sign-in has no code.)
        admin
            .post_json(
                "/api/v1/admin/users",
                &serde_json::json!({"username": "wes", "password": user_password("wes"), "role": "user"}),
            )
            .await?
            .check(201)?;
        let l: LoginResponse = login(&anon, "wes", &user_password("wes"), None).await?.ok(200)?;
        ensure!(!l.totp_setup_required);
        let wes = anon.with_token(&l.token);
        let m = me(&wes).await?;
        ensure!(!m.totp_required && !m.totp_setup_required && !m.totp, "user: {m:?}");
        let (wauth, _) = enrol(&wes, "wes").await?;
        ensure!(!me(&wes).await?.totp_required);
        wes.req(Method::DELETE, "/api/v1/auth/totp")
            .json(&serde_json::json!({"code": wauth.code(1)}))
            .send()
            .await?
            .check(204)?;
        ensure!(!me(&wes).await?.totp);
        check_no_panic(&gw)
    }
);

// Without `--require-totp` nothing changes for accounts without two-factor; the policy is
// described by `describe --json` like every flag.
backend_test!(no_policy_by_default, |gw| async move {
    let l: LoginResponse = login(&gw.api(), "admin", ADMIN_PASSWORD, None).await?.ok(200)?;
    ensure!(!l.totp_setup_required);
    let m = me(&gw.api().with_token(&l.token)).await?;
    ensure!(!m.totp_setup_required && !m.totp_required && !m.totp, "{m:?}");
    let d = nimbus_e2e::bins::gateway_describe()?;
    let serve = d["commands"].as_array().context("commands")?.iter().find(|c| c["name"] == "serve").context("serve")?;
    let flag =
        serve["args"].as_array().context("args")?.iter().find(|a| a["long"] == "require-totp").context("flag")?;
    ensure!(flag["env"] == "NIMBUS_REQUIRE_TOTP" && flag["defaults"] == serde_json::json!(["none"]), "{flag}");
    ensure!(flag["possible_values"] == serde_json::json!(["none", "admins", "all"]), "{flag}");
    Ok(())
});

/// The web app's Security page in Debian's chromium (admin-ui/e2e/web-totp.e2e.mjs): `mode`
/// `optional` enrols from the page (the QR code drawn in the page read back, the key shown as
/// text used by the script's RFC 6238 authenticator), recovery codes downloaded, sign-in with
/// password and code, a recovery code once, turning it off; `required` (`--require-totp all`):
/// a password sign-in lands on the Security page until two-factor is on. With
/// NIMBUS_UPDATE_SHOTS=1 the enrolment screens also replace docs/web/*.png.
async fn web_app_in_chromium(mode: &'static str, opts: GatewayOptions) -> anyhow::Result<()> {
    run_on(Backend::SqliteLocal, opts, |gw| async move {
        let base = gw.api().base().trim_end_matches('/').to_string();
        let mut args = vec![base, ADMIN_PASSWORD.to_string(), mode.to_string()];
        if mode == "optional" && std::env::var_os("NIMBUS_UPDATE_SHOTS").is_some_and(|v| v == "1") {
            args.push(admin_ui().join("../docs/web").display().to_string());
        }
        let log = run_e2e_script("e2e/web-totp.e2e.mjs", &args).await?;
        println!("{log}");
        check_no_panic(&gw)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_app_enrolment_in_chromium() -> anyhow::Result<()> {
    web_app_in_chromium("optional", GatewayOptions::default()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_app_required_setup_in_chromium() -> anyhow::Result<()> {
    web_app_in_chromium("required", GatewayOptions::default().arg("--require-totp").arg("all")).await
}
