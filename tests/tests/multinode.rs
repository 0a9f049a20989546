//! Two gateways on one PostgreSQL database and one MinIO bucket, as behind a load balancer:
//! whatever changes through one is seen through the other at once — new file versions,
//! deletions, revoked tokens, disabled users — because invalidations travel over
//! PostgreSQL LISTEN/NOTIFY instead of waiting for cached entries to expire (tokens would
//! take 30 s, cached manifests would never expire). Keys and data work through both.
//!
//! And when B's listening connection fails — ended on the database side while B's way back is
//! slow, or silent with both sockets open (a [`NetProxy`] between B's listener and PostgreSQL)
//! — a token revoked and a file overwritten through A are refused and served new by B within
//! 5 s: B notices (the connection closes, or its own heartbeat stops coming back), stops
//! trusting its hot metadata, and starts afresh once it listens again.

use std::time::Duration;

use anyhow::{Context, ensure};
use nimbus_e2e::mount::eventually;
use nimbus_e2e::netproxy::{Mode, NetProxy};
use nimbus_e2e::{GatewayOptions, backend_test, gateway::user_password};
use sqlx::Connection;

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

/// How gateway B's listening connection fails in [`listener_fault`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListenerFault {
    /// PostgreSQL ends B's LISTEN session (`pg_terminate_backend`), and B's way back to the
    /// database is slow, so changes made meanwhile cannot reach it as notifications.
    Cut,
    /// The link stops carrying anything, sockets open on both ends: no error, no reset.
    Silent,
}

/// `url` with its host and port replaced by `addr` and the session named `app`.
fn via(url: &str, addr: std::net::SocketAddr, app: &str) -> anyhow::Result<String> {
    let (scheme, rest) = url.split_once("://").context("no scheme in the database URL")?;
    let (authority, path) = rest.split_once('/').context("no database in the database URL")?;
    let user = authority.rsplit_once('@').map(|(u, _)| format!("{u}@")).unwrap_or_default();
    let sep = if path.contains('?') { '&' } else { '?' };
    Ok(format!("{scheme}://{user}{addr}/{path}{sep}application_name={app}"))
}

/// The host and port of a `postgres://` URL.
fn pg_addr(url: &str) -> anyhow::Result<std::net::SocketAddr> {
    let rest = url.split_once("://").context("no scheme")?.1;
    let authority = rest.split('/').next().unwrap_or_default();
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    hostport.parse().with_context(|| format!("`{hostport}` is not an address:port"))
}

/// The server processes of the sessions named `app` that are LISTENing.
async fn listening(db_url: &str, app: &str) -> anyhow::Result<Vec<i32>> {
    let mut conn = sqlx::PgConnection::connect(db_url).await?;
    let pids = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle' AND query LIKE 'LISTEN%'",
    )
    .bind(app)
    .fetch_all(&mut conn)
    .await?;
    let _ = conn.close().await;
    Ok(pids)
}

/// What a gateway's captured output says.
fn log_of(logs: &nimbus_e2e::gateway::GatewayLogs) -> String {
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).unwrap_or_default();
    read(logs.stdout_path()) + &read(logs.stderr_path())
}

/// The bound of the issue: after a change through A, B answers with it within this, whatever
/// happened to its listening connection just before.
const AFTER_A_FAULT: Duration = Duration::from_secs(5);

/// Two gateways, B's LISTEN connection through a [`NetProxy`] (its pool goes to PostgreSQL
/// directly, so B keeps serving): with B's token and manifest caches warm, B's listener fails
/// as `fault` says, a token is revoked and a file overwritten through A, and within 5 s B
/// refuses the token and serves the new bytes. Then the link heals and B follows A through
/// notifications again.
async fn listener_fault(gw: nimbus_e2e::Gateway, fault: ListenerFault) -> anyhow::Result<()> {
    let db_url = gw.database().context("needs PostgreSQL")?.url().to_string();
    let proxy = NetProxy::start(pg_addr(&db_url)?).await?;
    // Named per test: the tests of this file run at once against one PostgreSQL server, and
    // pg_stat_activity lists the sessions of every database.
    let app = &format!("nimbus-e2e-b-listener-{fault:?}").to_lowercase();
    let other = gw.start_sibling_with(&["--database-listen-url".into(), via(&db_url, proxy.addr(), app)?]).await?;
    eventually("B LISTENs through the proxy", AT_ONCE, || async {
        let pids = listening(&db_url, app).await?;
        ensure!(pids.len() == 1, "B's LISTEN sessions: {pids:?}; B's log:\n{}", log_of(&other.logs));
        Ok(())
    })
    .await?;

    let (_, a) = gw.user("alice", None).await?;
    let b = other.api.with_token(a.token().unwrap_or_default());
    // The token to revoke, used through B (so B holds its row in memory).
    let doomed = gw.api().login_ok("alice", &user_password("alice")).await?;
    let b_doomed = other.api.with_token(doomed.token().unwrap_or_default());
    b_doomed.get("/api/v1/me").await?.check(200)?;

    // The channel works through the proxy: B follows A at once, and B's caches are warm.
    a.put_file("/doc.txt", "version one").await?.check(201)?;
    ensure!(b.get_file("/doc.txt").await?.body.as_ref() == b"version one");
    a.put_file("/doc.txt", "version two").await?.check(200)?;
    eventually("B serves version two", AT_ONCE, || async {
        ensure!(b.get_file("/doc.txt").await?.body.as_ref() == b"version two");
        Ok(())
    })
    .await?;
    for _ in 0..3 {
        ensure!(b.get_file("/doc.txt").await?.body.as_ref() == b"version two");
        b_doomed.get("/api/v1/me").await?.check(200)?;
    }

    match fault {
        ListenerFault::Cut => {
            // Every chunk through the proxy waits: B's new session takes seconds to come up,
            // and A's changes below happen before it listens.
            proxy.set_mode(Mode::Delay(Duration::from_millis(400)));
            // On a loaded machine B may just have replaced a session whose heartbeat came late
            // (the old one ends a moment after the new one listens): wait for exactly one.
            let pids = eventually("B has one LISTEN session", Duration::from_secs(10), || async {
                let pids = listening(&db_url, app).await?;
                ensure!(pids.len() == 1, "B's LISTEN sessions: {pids:?}");
                Ok(pids)
            })
            .await?;
            let mut pg = sqlx::PgConnection::connect(&db_url).await?;
            let ended: bool =
                sqlx::query_scalar("SELECT pg_terminate_backend($1)").bind(pids[0]).fetch_one(&mut pg).await?;
            ensure!(ended, "could not end B's LISTEN session");
        }
        ListenerFault::Silent => proxy.set_mode(Mode::Stall),
    }

    doomed.post_json("/api/v1/auth/logout", &serde_json::json!({})).await?.check_any(&[200, 204])?;
    a.put_file("/doc.txt", "version three, written while B was deaf").await?.check(200)?;
    let changed = std::time::Instant::now();
    eventually("B refuses the revoked token and serves the new version", AFTER_A_FAULT, || async {
        b_doomed.get("/api/v1/me").await?.check(401)?;
        let r = b.get_file("/doc.txt").await?;
        ensure!(r.body.as_ref() == b"version three, written while B was deaf", "{r}");
        Ok(())
    })
    .await?;
    eprintln!("{fault:?}: B answered with A's changes {:?} after them", changed.elapsed());
    // A request after that still sees it (not a lucky read between two cached answers).
    ensure!(b.get_file("/doc.txt").await?.body.as_ref() == b"version three, written while B was deaf");

    // The link heals: B listens again and follows A's changes through notifications.
    proxy.set_mode(Mode::Forward);
    eventually("B LISTENs again", Duration::from_secs(30), || async {
        ensure!(listening(&db_url, app).await?.len() == 1);
        ensure!(log_of(&other.logs).matches("listening for the other gateways' invalidations").count() >= 2);
        Ok(())
    })
    .await?;
    let log = log_of(&other.logs);
    let why = match fault {
        // Closed or failed, depending on how the end reaches B.
        ListenerFault::Cut => "lost the invalidation channel",
        ListenerFault::Silent => "no heartbeat came back",
    };
    ensure!(log.contains(why), "B's log does not say `{why}`:\n{log}");
    for n in 0..3 {
        let text = format!("version {}", 4 + n);
        a.put_file("/doc.txt", text.clone()).await?.check(200)?;
        eventually("B follows A again", AT_ONCE, || async {
            ensure!(b.get_file("/doc.txt").await?.body.as_ref() == text.as_bytes());
            Ok(())
        })
        .await?;
    }
    Ok(())
}

backend_test!(
    listener_cut_on_the_database_side,
    only = postgres_s3,
    opts = GatewayOptions::default(),
    |gw| async move { listener_fault(gw, ListenerFault::Cut).await }
);

backend_test!(listener_goes_silent, only = postgres_s3, opts = GatewayOptions::default(), |gw| async move {
    listener_fault(gw, ListenerFault::Silent).await
});
