//! The REST API's HTTP contract where neither the store nor the database is the subject:
//! conditional requests (ETag, If-Match, If-None-Match), the name rules with their error
//! bodies, and the admin API's refusals of users, of the anonymous and of bad input (docs/API.md). Driven in this process through `server::app(state)` on SQLite and a
//! local store (src/inproc.rs): the same assertions as over a socket, no gateway process.

use anyhow::{Context, ensure};
use nimbus_e2e::http::files_url;
use nimbus_e2e::inproc::InProcess;
use nimbus_proto::wire::{CreatedUser, LoginResponse, Me, Role, UserInfo, UserList};
use serde_json::json;

#[tokio::test]
async fn conditional_requests() -> anyhow::Result<()> {
    let gw = InProcess::start().await?;
    let api = gw.user("alice").await?;
    let get_with = |path: &'static str, header: &'static str, value: String| {
        let api = api.clone();
        async move { api.get(&files_url(path), &[(header, &value)]).await }
    };
    let e = api.put_file("/c.txt", "version one").await?.entry(201)?;
    let v1 = e.version.context("version")?;
    let etag = format!("\"{v1}\"");
    let stale = format!("\"{}\"", v1 + 1000);

    let r = get_with("/c.txt", "if-none-match", etag.clone()).await?;
    r.check(304)?;
    ensure!(r.body.is_empty(), "304 with a body: {r}");
    ensure!(r.header("etag").as_deref() == Some(etag.as_str()), "304 without the ETag: {:?}", r.headers);
    let r = get_with("/c.txt", "if-none-match", stale.clone()).await?;
    r.check(200)?;
    ensure!(r.body.as_ref() == b"version one");
    get_with("/c.txt", "if-none-match", "*".into()).await?.check(304)?;

    get_with("/c.txt", "if-match", stale.clone()).await?.check_error(412, "precondition_failed")?;
    get_with("/c.txt", "if-match", etag.clone()).await?.check(200)?;

    // Conditional PUT.
    let put = |cond: &'static str, value: String, body: &'static str| {
        let api = api.clone();
        async move { api.put_file_with("/c.txt", &[(cond, &value)], body).await }
    };
    put("if-match", stale.clone(), "lost update").await?.check_error(412, "precondition_failed")?;
    ensure!(api.content("/c.txt").await? == b"version one", "a refused PUT changed the file");
    put("if-none-match", "*".into(), "create only").await?.check_error(412, "precondition_failed")?;
    ensure!(api.content("/c.txt").await? == b"version one", "a refused PUT changed the file");
    let e2 = put("if-match", etag.clone(), "version two").await?.entry(200)?;
    ensure!(e2.version != Some(v1), "{e2:?}");
    ensure!(api.content("/c.txt").await? == b"version two");
    // The old ETag is now stale.
    put("if-match", etag.clone(), "version three").await?.check_error(412, "precondition_failed")?;
    get_with("/c.txt", "if-none-match", etag.clone()).await?.check(200)?;

    let r = api.put_file_with("/new.txt", &[("if-none-match", "*")], "fresh").await?;
    r.entry(201)?;
    Ok(())
}

#[tokio::test]
async fn invalid_names() -> anyhow::Result<()> {
    let gw = InProcess::start().await?;
    let api = gw.user("alice").await?;
    let bad = ["a:b", "CON", "con.txt", "x.", "trail ", "a|b", "a\0b", "a<b", "a*b", "a?b", "LPT1", "a\u{1}b"];
    for name in bad {
        let path = format!("/ok/{name}");
        let what = format!("{name:?}");
        api.put_file(&path, "x")
            .await?
            .check_error_any(400, &["invalid_name", "invalid_path"])
            .context(what.clone())?;
        api.mkdir(&path).await?.check_error_any(400, &["invalid_name", "invalid_path"]).context(what.clone())?;
        let r = api.post_json("/api/v1/move", &serde_json::json!({"from": "/ok", "to": path})).await?;
        // `/ok` does not exist: either error is fine, but a bad name must not be accepted.
        ensure!(r.status == 400 || r.status == 404, "move to {what}: {r}");
    }
    // Nothing was created, not even the parent.
    ensure!(api.list_all("/").await?.is_empty(), "invalid names created something");
    api.put_file("/ok/fine.txt", "x").await?.entry(201)?;
    for name in bad {
        let r = api
            .post_json("/api/v1/move", &serde_json::json!({"from": "/ok/fine.txt", "to": format!("/ok/{name}")}))
            .await?;
        r.check_error_any(400, &["invalid_name", "invalid_path"]).with_context(|| format!("move to {name:?}"))?;
        let r = api
            .post_json("/api/v1/copy", &serde_json::json!({"from": "/ok/fine.txt", "to": format!("/{name}")}))
            .await?;
        r.check_error_any(400, &["invalid_name", "invalid_path"]).with_context(|| format!("copy to {name:?}"))?;
    }
    // Dot segments and empty components, sent as written (no URL parser resolves them first).
    for target in ["/api/v1/files/ok/../ok/fine.txt", "/api/v1/files/ok/./fine.txt", "/api/v1/files/ok//fine.txt"] {
        let r = api.get(target, &[]).await?;
        r.check_error_any(400, &["invalid_name", "invalid_path"])?;
    }
    // A name too long (256 characters).
    let long = "a".repeat(256);
    api.put_file(&format!("/{long}"), "x").await?.check_error_any(400, &["invalid_name", "invalid_path"])?;
    api.put_file(&format!("/{}", "b".repeat(255)), "x").await?.entry(201)?;
    Ok(())
}

/// File reads (`GET`/`HEAD /api/v1/files/...`) are served ahead of the router
/// (`api/shortcut.rs`): every answer, good or refused, is the one the router gives, status,
/// headers and body (the request id aside).
#[tokio::test]
async fn file_reads_ahead_of_the_router_answer_as_the_router() -> anyhow::Result<()> {
    use axum::body::Body;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let gw = InProcess::start().await?;
    let alice = gw.user("alice").await?;
    let v = alice.put_file("/d/r.txt", "hello, shortcut").await?.entry(201)?.version.context("version")?;
    let token = format!("Bearer {}", alice.token().context("token")?);
    let state = gw.state().clone();
    let routed = nimbus_gateway::api::router(state.clone(), nimbus_gateway::doors::dav::router())
        .layer(nimbus_gateway::metrics::Track::ROUTES);
    let routed = nimbus_gateway::envelope::Envelope::new(routed, false);
    let app = nimbus_gateway::server::app(state);
    let etag = format!("\"{v}\"");
    let version = format!("/api/v1/files/d/r.txt?version={v}");
    // Method, target, headers.
    type Case<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        ("GET", "/api/v1/files/d/r.txt", vec![]),
        ("HEAD", "/api/v1/files/d/r.txt", vec![]),
        ("GET", "/api/v1/files/D/R.TXT", vec![]),
        ("GET", "/api/v1/files/d/r.txt", vec![("range", "bytes=2-5")]),
        ("GET", "/api/v1/files/d/r.txt", vec![("range", "bytes=99-")]),
        ("HEAD", "/api/v1/files/d/r.txt", vec![("range", "bytes=0-0")]),
        ("GET", "/api/v1/files/d/r.txt", vec![("if-none-match", &etag)]),
        ("GET", "/api/v1/files/d/r.txt", vec![("if-match", "\"1234567\"")]),
        ("GET", "/api/v1/files/d/r.txt", vec![("x-nimbus-cache", "bypass")]),
        ("GET", "/api/v1/files/d/r.txt", vec![("x-nimbus-cache", "sideways")]),
        ("GET", &version, vec![]),
        ("GET", "/api/v1/files/d/r.txt?version=abc", vec![]),
        ("GET", "/api/v1/files/d/r.txt?version=999999", vec![]),
        ("GET", "/api/v1/files/d/missing.txt", vec![]),
        ("HEAD", "/api/v1/files/d/missing.txt", vec![]),
        ("GET", "/api/v1/files/d", vec![]),
        ("GET", "/api/v1/files//d/r.txt", vec![]),
        ("GET", "/api/v1/files/d/%2e%2e/d/r.txt", vec![]),
        ("GET", "/api/v1/files/d/a%00b", vec![]),
        ("GET", "/api/v1/files/Shared%20with%20me/x", vec![]),
        ("GET", "/api/v1/files/", vec![]),
    ];
    for (method, target, headers) in &cases {
        for auth in [Some(token.as_str()), None, Some("Bearer not-a-token")] {
            let request = || -> anyhow::Result<axum::http::Request<Body>> {
                let mut r = axum::http::Request::builder().method(*method).uri(*target);
                if let Some(a) = auth {
                    r = r.header("authorization", a);
                }
                for (k, v) in headers {
                    r = r.header(*k, *v);
                }
                Ok(r.body(Body::empty())?)
            };
            let what = format!("{method} {target} {headers:?} signed in: {}", auth == Some(token.as_str()));
            let (a, b) = (app.clone().oneshot(request()?).await?, routed.clone().oneshot(request()?).await?);
            ensure!(a.status() == b.status(), "{what}: {} ahead of the router, {} through it", a.status(), b.status());
            let strip = |h: &axum::http::HeaderMap| {
                let mut h = h.clone();
                h.remove("x-request-id");
                h
            };
            ensure!(strip(a.headers()) == strip(b.headers()), "{what}: {:?} against {:?}", a.headers(), b.headers());
            let (a, b) = (a.into_body().collect().await?.to_bytes(), b.into_body().collect().await?.to_bytes());
            ensure!(a == b, "{what}: {a:?} against {b:?}");
        }
    }
    Ok(())
}

/// Every admin endpoint refuses a user (403 `forbidden`) and the anonymous (401
/// `unauthorized`) with the error body, and nothing changes: no account made, no role, password
/// or device of the administrator touched.
#[tokio::test]
async fn admin_api_refuses_non_admins() -> anyhow::Result<()> {
    let gw = InProcess::start().await?;
    let admin = gw.admin("root").await?;
    let user = gw.user("ivan").await?;
    let (uid, admin_id) = (user.id, admin.id);
    let before = gw.state().meta.user_by_name("root").await?.context("root")?;
    let body = json!({"username": "mallory", "password": "mallory-pass-1", "role": "admin"});
    let patch = json!({"role": "admin"});
    let anon = gw.anonymous();
    for (api, status, code) in [(&user, 403, "forbidden"), (&anon, 401, "unauthorized")] {
        let checks = [
            api.get("/api/v1/admin/users", &[]).await?,
            api.post_json("/api/v1/admin/users", &body).await?,
            api.get(&format!("/api/v1/admin/users/{uid}"), &[]).await?,
            api.get(&format!("/api/v1/admin/users/{admin_id}"), &[]).await?,
            api.patch_json(&format!("/api/v1/admin/users/{uid}"), &patch).await?,
            api.patch_json(&format!("/api/v1/admin/users/{admin_id}"), &json!({"password": "pwned-pw-1"})).await?,
            api.delete(&format!("/api/v1/admin/users/{admin_id}")).await?,
            api.delete("/api/v1/admin/users/987654321").await?,
            api.get("/api/v1/admin/audit", &[]).await?,
            api.get(&format!("/api/v1/admin/users/{admin_id}/devices"), &[]).await?,
            api.delete(&format!("/api/v1/admin/users/{admin_id}/devices")).await?,
            api.delete(&format!("/api/v1/admin/users/{admin_id}/devices/1")).await?,
            api.get("/api/v1/admin/stats/history", &[]).await?,
            api.get("/api/v1/admin/usage", &[]).await?,
        ];
        for r in checks {
            r.check_error(status, code)?;
        }
    }
    // Nothing happened.
    let me: Me = user.get("/api/v1/me", &[]).await?.ok(200)?;
    ensure!(me.role == Role::User, "{me:?}");
    let after = gw.state().meta.user_by_name("root").await?.context("root")?;
    ensure!(after.password_hash == before.password_hash && after.role == "admin" && !after.disabled, "{after:?}");
    ensure!(gw.state().meta.user_by_name("mallory").await?.is_none(), "mallory was created");
    admin.get("/api/v1/admin/users", &[]).await?.check(200)?;
    Ok(())
}

/// Malformed and out-of-range admin requests are 400 `bad_request` with the error body and
/// change nothing.
#[tokio::test]
async fn admin_api_bad_input() -> anyhow::Result<()> {
    let gw = InProcess::start().await?;
    let admin = gw.admin("root").await?;
    let judy = json!({"username": "judy", "password": "judy-password-1", "role": "user"});
    let created: CreatedUser = admin.post_json("/api/v1/admin/users", &judy).await?.ok(201)?;
    let user_path = format!("/api/v1/admin/users/{}", created.user.id);
    for text in [
        "{not json",
        "",
        "[]",
        r#"{"username": 5, "role": "user"}"#,
        r#"{"username": "x1", "role": "superuser"}"#,
        r#"{"username": "x2", "quota_bytes": -1, "role": "user"}"#,
        r#"{"username": "x3", "quota_bytes": "lots", "role": "user"}"#,
    ] {
        let r = admin.json_text("POST", "/api/v1/admin/users", text).await?;
        r.check_error(400, "bad_request").with_context(|| format!("POST body {text:?}"))?;
    }
    for text in ["{", r#"{"quota_bytes": "x"}"#, r#"{"disabled": "yes"}"#, r#"{"role": "root"}"#] {
        let r = admin.json_text("PATCH", &user_path, text).await?;
        r.check_error(400, "bad_request").with_context(|| format!("PATCH body {text:?}"))?;
    }
    // A non-numeric id.
    admin.get("/api/v1/admin/users/not-a-number", &[]).await?.check_any(&[400, 404])?.error_detail()?;
    // Nothing changed.
    let u: UserInfo = admin.get(&user_path, &[]).await?.ok(200)?;
    ensure!(u.role == Role::User && !u.disabled && u.quota_bytes.is_none(), "{u:?}");
    let l: UserList = admin.get("/api/v1/admin/users", &[]).await?.ok(200)?;
    ensure!(l.users.len() == 2, "bad requests created users: {:?}", l.users);
    let login = json!({"username": "judy", "password": "judy-password-1"});
    let _: LoginResponse = gw.anonymous().post_json("/api/v1/auth/login", &login).await?.ok(200)?;
    Ok(())
}
