//! Two gateways on one PostgreSQL database and one MinIO bucket, as behind a load balancer:
//! whatever changes through one is seen through the other at once — new file versions,
//! deletions, revoked tokens, disabled users — because invalidations travel over
//! PostgreSQL LISTEN/NOTIFY instead of waiting for cached entries to expire (tokens would
//! take 30 s, cached manifests would never expire). Keys and data work through both.

use std::time::Duration;

use anyhow::ensure;
use nimbus_e2e::mount::eventually;
use nimbus_e2e::{GatewayOptions, backend_test, gateway::user_password};

/// `rclone lsf` of the key owner's bucket through an S3 endpoint.
async fn rclone_ls(endpoint: &str, key: &nimbus_proto::wire::CreatedS3Key) -> anyhow::Result<String> {
    let out = tokio::process::Command::new("rclone")
        .args(["lsf", ":s3:alice", "--s3-provider", "Other", "--s3-endpoint", endpoint, "--retries", "1"])
        .args(["--s3-access-key-id", &key.access_key_id, "--s3-secret-access-key", &key.secret_access_key])
        .args(["--low-level-retries", "1"])
        .env_remove("AWS_CA_BUNDLE")
        .output()
        .await?;
    ensure!(out.status.success(), "rclone failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Far above a notification's delivery time (milliseconds) and far below the 30 s after
/// which a cached token would expire by itself.
const AT_ONCE: Duration = Duration::from_secs(3);

backend_test!(
    two_gateways_one_database,
    only = postgres_s3,
    opts = GatewayOptions::default().arg("--s3-listen").arg("127.0.0.1:0"),
    |gw| async move {
        let (alice_id, a) = gw.user("alice", None).await?;
        let other = gw.start_sibling().await?;
        let b = other.api.with_token(a.token().unwrap_or_default());

        // A file written through A reads through B; B now holds its manifest in memory.
        a.put_file("/doc.txt", "version one").await?.check(201)?;
        let r = b.get_file("/doc.txt").await?;
        ensure!(r.status == 200 && r.body.as_ref() == b"version one", "{r}");
        // A new version through A: B serves it, not the cached old block list.
        a.put_file("/doc.txt", "version two, longer").await?.check(200)?;
        eventually("B serves the new version", AT_ONCE, || async {
            let r = b.get_file("/doc.txt").await?;
            ensure!(r.body.as_ref() == b"version two, longer", "{r}");
            Ok(())
        })
        .await?;
        // And the other way round, and deletions.
        b.put_file("/doc.txt", "three").await?.check(200)?;
        eventually("A serves B's version", AT_ONCE, || async {
            ensure!(a.get_file("/doc.txt").await?.body.as_ref() == b"three");
            Ok(())
        })
        .await?;
        a.delete("/api/v1/files/doc.txt").await?.check(204)?;
        eventually("B sees the deletion", AT_ONCE, || async {
            b.get_file("/doc.txt").await?.check(404)?;
            Ok(())
        })
        .await?;

        // A change-feed long-poll on B wakes for a change made through A.
        let feed: nimbus_proto::wire::ChangeList = b.get("/api/v1/changes").await?.ok(200)?;
        let poll = {
            let b = b.clone();
            let url = format!("/api/v1/changes?cursor={}&wait=30", feed.cursor);
            tokio::spawn(async move { b.get(&url).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        a.put_file("/feed.txt", "for the feed").await?.check(201)?;
        let woke = tokio::time::timeout(AT_ONCE, poll)
            .await
            .map_err(|_| anyhow::anyhow!("B's long-poll did not wake"))???;
        let list: nimbus_proto::wire::ChangeList = woke.ok(200)?;
        ensure!(list.changes.iter().any(|c| c.path == "/feed.txt"), "{list:?}");

        // A token B has cached is refused by B as soon as it is revoked through A.
        let t2 = gw.api().login_ok("alice", &user_password("alice")).await?;
        let b2 = other.api.with_token(t2.token().unwrap_or_default());
        b2.get("/api/v1/me").await?.check(200)?;
        t2.post_json("/api/v1/auth/logout", &serde_json::json!({})).await?.check_any(&[200, 204])?;
        eventually("B refuses the revoked token", AT_ONCE, || async {
            b2.get("/api/v1/me").await?.check(401)?;
            Ok(())
        })
        .await?;

        // Disabling a user through A locks them out of B at once, S3 door included.
        let key: nimbus_proto::wire::CreatedS3Key =
            a.post_json("/api/v1/keys", &serde_json::json!({"name": "k"})).await?.ok(201)?;
        a.put_file("/via-a.txt", "x").await?.check(201)?;
        let s3_b = other.s3_endpoint()?;
        let listed = rclone_ls(&s3_b, &key).await?;
        ensure!(listed.contains("via-a.txt"), "B's S3 door with a key made through A: {listed}");
        b.get("/api/v1/me").await?.check(200)?;
        let admin = gw.admin().await?;
        admin
            .patch_json(&format!("/api/v1/admin/users/{alice_id}"), &serde_json::json!({"disabled": true}))
            .await?
            .check(200)?;
        eventually("B refuses the disabled user", AT_ONCE, || async {
            b.get("/api/v1/me").await?.check(401)?;
            Ok(())
        })
        .await?;
        ensure!(rclone_ls(&s3_b, &key).await.is_err(), "B's S3 door still takes a disabled user's key");
        Ok(())
    }
);
