//! What the admin console needs from the gateway: `GET /api/v1/admin/usage` (admin-only,
//! follows uploads and deletes) and the console's static files at `/admin`: the copy built into
//! the binary (gateway/build.rs), or a directory given with `--admin-ui-dir`.

use anyhow::ensure;
use nimbus_e2e::backend_test;
use nimbus_e2e::browser::check_entry_script;
use nimbus_e2e::{Backend, GatewayOptions, run_on};
use nimbus_proto::wire::UsageSummary;

backend_test!(usage_aggregates, |gw| async move {
    let admin = gw.admin().await?;
    let before: UsageSummary = admin.get("/api/v1/admin/usage").await?.ok(200)?;
    let (_, ivy) = gw.user("ivy", None).await?;
    let (_, _judy) = gw.user("judy", None).await?;
    ivy.put_file("a.bin", vec![7u8; 300_000]).await?.check_any(&[200, 201])?;
    ivy.put_file("b.bin", vec![8u8; 1000]).await?.check_any(&[200, 201])?;
    let u: UsageSummary = admin.get("/api/v1/admin/usage").await?.ok(200)?;
    ensure!(u.users == before.users + 2 && u.active_users == before.active_users + 2, "{u:?}");
    ensure!(u.total_bytes == before.total_bytes + 301_000, "{u:?}");
    ensure!(u.files == before.files + 2, "{u:?}");
    let top = u.top_users.first().ok_or_else(|| anyhow::anyhow!("no top users: {u:?}"))?;
    ensure!(top.username == "ivy" && top.used_bytes == 301_000, "{u:?}");

    // Disabled users are not active; deleted files stop counting.
    let judy_id = u.top_users.iter().find(|t| t.username == "judy").map(|t| t.id);
    let judy_id = judy_id.ok_or_else(|| anyhow::anyhow!("judy missing: {u:?}"))?;
    admin
        .patch_json(&format!("/api/v1/admin/users/{judy_id}"), &serde_json::json!({"disabled": true}))
        .await?
        .check(200)?;
    ivy.delete("/api/v1/files/b.bin").await?.check_any(&[200, 204])?;
    let after: UsageSummary = admin.get("/api/v1/admin/usage").await?.ok(200)?;
    ensure!(after.active_users == u.active_users - 1 && after.users == u.users, "{after:?}");
    ensure!(after.files == u.files - 1, "{after:?}");

    // Admin-only.
    ivy.get("/api/v1/admin/usage").await?.check(403)?;
    gw.api().anonymous().get("/api/v1/admin/usage").await?.check(401)?;
    Ok(())
});

fn console_dir() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("assets"))?;
    std::fs::write(dir.path().join("index.html"), "<!doctype html><title>console-index</title>")?;
    std::fs::write(dir.path().join("assets/index-abc123.js"), "console.log('x')")?;
    Ok(dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_console_files() -> anyhow::Result<()> {
    let dir = console_dir()?;
    let opts = GatewayOptions::default().arg("--admin-ui-dir").arg(dir.path().display().to_string());
    run_on(Backend::SqliteLocal, opts, |gw| async move {
        let api = gw.api().anonymous();
        let r = api.get("/admin/").await?;
        r.check(200)?;
        ensure!(r.text().contains("console-index"), "{r}");
        ensure!(r.headers["content-type"].to_str()?.starts_with("text/html"), "{r:?}");
        ensure!(r.headers["cache-control"] == "no-cache", "{:?}", r.headers);
        // Client-side routes get index.html.
        let r = api.get("/admin/users/42").await?;
        r.check(200)?;
        ensure!(r.text().contains("console-index"), "{r}");
        // Hashed assets: their type, cached for good.
        let r = api.get("/admin/assets/index-abc123.js").await?;
        r.check(200)?;
        ensure!(r.headers["content-type"].to_str()?.starts_with("text/javascript"), "{:?}", r.headers);
        ensure!(r.headers["cache-control"].to_str()?.contains("immutable"), "{:?}", r.headers);
        api.get("/admin/assets/missing.js").await?.check(404)?;
        api.get("/admin/favicon.ico").await?.check(404)?;
        let r = api.get("/admin").await?;
        ensure!(r.text().contains("console-index") || r.status == 308, "{r}");
        Ok(())
    })
    .await
}

/// The console inside the binary: a gateway started without `--admin-ui-dir` serves the page
/// and its hashed script with their types, caching and the console's CSP. (The harness builds
/// the gateway with cargo, whose build script builds admin-ui: no npm step before this test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_embedded_console() -> anyhow::Result<()> {
    run_on(Backend::SqliteLocal, GatewayOptions::default(), |gw| async move {
        let api = gw.api().anonymous();
        let check_console_headers = |r: &nimbus_e2e::Resp| -> anyhow::Result<()> {
            let h = |n: &str| r.headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            let csp = h("content-security-policy");
            ensure!(
                csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'") && !csp.contains("sandbox"),
                "not the console's CSP: {r} {:?}",
                r.headers
            );
            ensure!(h("x-frame-options") == "DENY" && h("x-content-type-options") == "nosniff", "{r} {:?}", r.headers);
            Ok(())
        };
        for path in ["/admin/", "/admin/users/42"] {
            let r = api.get(path).await?;
            r.check(200)?;
            ensure!(r.headers["content-type"] == "text/html; charset=utf-8", "{r} {:?}", r.headers);
            ensure!(r.headers["cache-control"] == "no-cache", "{r} {:?}", r.headers);
            ensure!(r.text().contains("<div id=\"root\">"), "not the console's page: {r}");
            check_console_headers(&r)?;
        }
        // The entry script Vite named by its content hash, with the console's headers too.
        let r = check_entry_script(&api, "/admin/").await?;
        check_console_headers(&r)?;
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn says_how_to_build_a_missing_console() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let opts = GatewayOptions::default().arg("--admin-ui-dir").arg(dir.path().display().to_string());
    run_on(Backend::SqliteLocal, opts, |gw| async move {
        // An empty --admin-ui-dir (a console being worked on, not built yet).
        let r = gw.api().anonymous().get("/admin/users").await?;
        r.check(503)?;
        ensure!(r.text().contains("npm run build") && r.text().contains("--admin-ui-dir"), "{r}");
        Ok(())
    })
    .await
}

backend_test!(audit_filters, |gw| async move {
    use nimbus_proto::wire::AuditList;
    let admin = gw.admin().await?;
    let (kim, _) = gw.user("kim", None).await?;
    admin
        .patch_json(&format!("/api/v1/admin/users/{kim}"), &serde_json::json!({"quota_bytes": 1000}))
        .await?
        .check(200)?;
    // What was done to kim: the create and the update, by the admin.
    let l: AuditList = admin.get("/api/v1/admin/audit?target=kim").await?.ok(200)?;
    let actions: Vec<&str> = l.entries.iter().map(|e| e.action.as_str()).collect();
    ensure!(actions == ["user_update", "user_create"], "{l:?}");
    ensure!(l.entries.iter().all(|e| e.target.as_deref() == Some("kim")), "{l:?}");
    // A time range: everything so far is before 2100 and after 2000; nothing after 2100.
    let l: AuditList = admin
        .get("/api/v1/admin/audit?target=kim&since=2000-01-01T00:00:00Z&until=2100-01-01T00:00:00Z")
        .await?
        .ok(200)?;
    ensure!(l.entries.len() == 2, "{l:?}");
    let l: AuditList = admin.get("/api/v1/admin/audit?target=kim&since=2100-01-01T00:00:00Z").await?.ok(200)?;
    ensure!(l.entries.is_empty(), "{l:?}");
    let r = admin.get("/api/v1/admin/audit?since=yesterday").await?;
    r.check(400)?;
    ensure!(r.text().contains("RFC 3339"), "{r}");
    Ok(())
});

backend_test!(audit_details_in_words, |gw| async move {
    use nimbus_proto::wire::AuditList;
    let admin = gw.admin().await?;
    let created: serde_json::Value = admin
        .post_json(
            "/api/v1/admin/users",
            &serde_json::json!({"username": "lea", "password": "lea-password-1", "role": "user", "quota_bytes": 10485760}),
        )
        .await?
        .ok(201)?;
    let id = created["id"].as_i64().ok_or_else(|| anyhow::anyhow!("no id: {created}"))?;
    let path = format!("/api/v1/admin/users/{id}");
    // What the console sends: quota and role together, the role unchanged.
    for body in [
        serde_json::json!({"quota_bytes": 1073741824u64, "role": "user"}),
        serde_json::json!({"quota_bytes": null, "role": "user"}),
        serde_json::json!({"quota_bytes": 1536, "role": "admin"}),
        serde_json::json!({"quota_bytes": 1536, "role": "admin"}),
    ] {
        admin.patch_json(&path, &body).await?.check(200)?;
    }
    let l: AuditList = admin.get("/api/v1/admin/audit?target=lea").await?.ok(200)?;
    let details: Vec<&str> = l.entries.iter().rev().map(|e| e.detail.as_deref().unwrap_or("")).collect();
    ensure!(
        details
            == [
                "role user, quota 10 MiB",
                "quota 1 GiB",
                "quota removed (unlimited)",
                "quota 1.5 KiB, role admin",
                "nothing changed"
            ],
        "{details:?}"
    );
    Ok(())
});
