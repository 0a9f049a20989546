//! Warming a user's folder into the gateway cache: progress to `done`, every block of the
//! folder then served from the cache, other folders untouched, admin-only, bad input refused.

use std::time::Duration;

use anyhow::ensure;
use nimbus_e2e::backend_test;
use nimbus_e2e::data;

async fn stats(admin: &nimbus_e2e::http::Api) -> anyhow::Result<serde_json::Value> {
    admin.get("/api/v1/admin/cache").await?.ok(200)
}

backend_test!(warm_a_folder, |gw| async move {
    let admin = gw.admin().await?;
    let (uid, user) = gw.user("wendy", None).await?;
    // Two files in the folder to warm (one spans two blocks), one outside it.
    let big = data::bytes("warm-big", 5 * 1024 * 1024);
    let small = data::bytes("warm-small", 10_000);
    let other = data::bytes("warm-other", 20_000);
    user.put_file("/proj/big.bin", big.clone()).await?.check_any(&[200, 201])?;
    user.put_file("/proj/sub/small.bin", small.clone()).await?.check_any(&[200, 201])?;
    user.put_file("/elsewhere.bin", other.clone()).await?.check_any(&[200, 201])?;
    admin.delete("/api/v1/admin/cache").await?.check(204)?;

    let job: serde_json::Value = admin
        .post_json("/api/v1/admin/cache/warm", &serde_json::json!({"user_id": uid, "path": "/proj"}))
        .await?
        .ok(202)?;
    let id = job["id"].as_u64().unwrap_or(0);
    let mut status = job;
    for _ in 0..200 {
        if status["state"] == "done" || status["state"] == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        status = admin.get(&format!("/api/v1/admin/cache/warm/{id}")).await?.ok(200)?;
    }
    ensure!(status["state"] == "done", "{status}");
    ensure!(status["files_total"] == 2 && status["files_done"] == 2, "{status}");
    let expected = (big.len() + small.len()) as u64;
    ensure!(status["bytes_total"] == expected && status["bytes_done"] == expected, "{status}");

    // The warmed files now come from the cache: no store fetch for them.
    let before = stats(&admin).await?;
    ensure!(before["store_fetches"] == 3, "3 blocks fetched while warming: {before}");
    let r = user.get_file("/proj/big.bin").await?;
    ensure!(r.check(200)?.body[..] == big[..], "warmed content differs");
    let r = user.get_file("/proj/sub/small.bin").await?;
    ensure!(r.check(200)?.body[..] == small[..], "warmed content differs");
    let after = stats(&admin).await?;
    ensure!(after["store_fetches"] == before["store_fetches"], "reads after warming went to the store: {after}");
    // The file outside the folder was not warmed.
    user.get_file("/elsewhere.bin").await?.check(200)?;
    let last = stats(&admin).await?;
    ensure!(last["store_fetches"].as_u64() == before["store_fetches"].as_u64().map(|n| n + 1), "{last}");
    Ok(())
});

backend_test!(warm_is_admin_only_and_checks_input, |gw| async move {
    let admin = gw.admin().await?;
    let (uid, user) = gw.user("walter", None).await?;
    let body = serde_json::json!({"user_id": uid, "path": "/"});
    user.post_json("/api/v1/admin/cache/warm", &body).await?.check_error(403, "forbidden")?;
    user.get("/api/v1/admin/cache").await?.check_error(403, "forbidden")?;
    user.delete("/api/v1/admin/cache").await?.check_error(403, "forbidden")?;
    // A missing folder, an unknown user, a bad path, an unknown job: clear errors, no job.
    admin
        .post_json("/api/v1/admin/cache/warm", &serde_json::json!({"user_id": uid, "path": "/nope"}))
        .await?
        .check_error(404, "not_found")?;
    admin
        .post_json("/api/v1/admin/cache/warm", &serde_json::json!({"user_id": 999_999, "path": "/"}))
        .await?
        .check_error(404, "not_found")?;
    admin
        .post_json("/api/v1/admin/cache/warm", &serde_json::json!({"user_id": uid, "path": "/a/../b"}))
        .await?
        .check(400)?;
    admin.get("/api/v1/admin/cache/warm/424242").await?.check_error(404, "not_found")?;
    admin.get("/api/v1/admin/cache/warm/x").await?.check_error(404, "not_found")?;
    Ok(())
});
