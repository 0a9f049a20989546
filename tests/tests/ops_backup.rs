//! Backup and restore as docs/OPERATIONS.md describes it, taken while the gateway serves:
//! SQLite with sqlite3's online `.backup`, PostgreSQL with pg_dump/pg_restore, the store as a
//! directory copy (local) or `rclone sync` (S3). The backup is restored into a fresh gateway,
//! which must serve the same files byte for byte.

use std::path::Path;

use anyhow::{Context, ensure};
use nimbus_e2e::data::bytes;
use nimbus_e2e::ops::{rclone, s3_remote};
use nimbus_e2e::{Backend, Gateway, GatewayOptions, backend_test};
use tokio::process::Command;

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

async fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let out = cmd.output().await.with_context(|| format!("cannot run {cmd:?}"))?;
    ensure!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

async fn backup(gw: &Gateway, to: &Path) -> anyhow::Result<()> {
    // Database first, store second: every block the database snapshot references is already
    // in the store (blocks are written before they are registered), and GC is not running.
    match gw.database() {
        Some(db) => {
            run(Command::new(format!("{PG_BIN}/pg_dump")).arg("-Fc").arg("-f").arg(to.join("db.dump")).arg(db.url()))
                .await?
        }
        None => {
            let dest = to.join("nimbus.db");
            run(Command::new("sqlite3")
                .arg(gw.data_dir().join("nimbus.db"))
                .arg(format!(".backup '{}'", dest.display())))
            .await?
        }
    }
    match s3_remote(gw)? {
        Some((remote, env)) => rclone(&env, &["sync", &remote, &to.join("store").to_string_lossy()], None).await?,
        None => run(Command::new("cp").arg("-a").arg(gw.data_dir().join("blocks")).arg(to.join("store"))).await?,
    }
    Ok(())
}

async fn restore(gw: &Gateway, from: &Path) -> anyhow::Result<()> {
    match gw.database() {
        Some(db) => {
            // Into an empty database: drop what the fresh gateway created, then restore.
            let pool = sqlx::PgPool::connect(db.url()).await?;
            sqlx::query("DROP SCHEMA public CASCADE").execute(&pool).await?;
            sqlx::query("CREATE SCHEMA public").execute(&pool).await?;
            pool.close().await;
            run(Command::new(format!("{PG_BIN}/pg_restore"))
                .args(["--no-owner", "-d"])
                .arg(db.url())
                .arg(from.join("db.dump")))
            .await?
        }
        None => {
            let db = gw.data_dir().join("nimbus.db");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
            }
            std::fs::copy(from.join("nimbus.db"), &db)?;
        }
    }
    match s3_remote(gw)? {
        Some((remote, env)) => rclone(&env, &["sync", &from.join("store").to_string_lossy(), &remote], None).await?,
        None => {
            let blocks = gw.data_dir().join("blocks");
            std::fs::remove_dir_all(&blocks)?;
            run(Command::new("cp").arg("-a").arg(from.join("store")).arg(&blocks)).await?
        }
    }
    Ok(())
}

backend_test!(backup_and_restore, |gw| async move {
    let (_, api) = gw.user("backed", None).await?;
    let bs = api.block_size().await?;
    let files: Vec<(String, Vec<u8>)> = vec![
        ("/docs/one.txt".into(), b"first file".to_vec()),
        ("/docs/big.bin".into(), bytes("backup-big", 2 * bs + 777)),
        ("/photos/\u{e9}t\u{e9}.jpg".into(), bytes("backup-photo", 50_000)),
    ];
    for (p, d) in &files {
        api.put_file(p, d.clone()).await?.check(201)?;
    }
    api.put_file("/docs/one.txt", b"second version".to_vec()).await?.check(200)?;

    let dir = tempfile::tempdir()?;
    backup(&gw, dir.path()).await?;
    // Written after the backup: not in it.
    api.put_file("/late.txt", b"after the backup".to_vec()).await?.check(201)?;

    let backend: Backend = gw.backend;
    let mut fresh = Gateway::start(backend, &GatewayOptions::default()).await?;
    fresh.stop().await?;
    restore(&fresh, dir.path()).await?;
    fresh.start_again().await?;

    let api2 = fresh.api().login_ok("backed", &nimbus_e2e::gateway::user_password("backed")).await?;
    ensure!(api2.get_file("/docs/one.txt").await?.check(200)?.body.as_ref() == b"second version");
    for (p, d) in &files[1..] {
        let got = api2.get_file(p).await?.check(200)?.body.to_vec();
        ensure!(&got == d, "{p}: restored content differs ({} vs {} bytes)", got.len(), d.len());
    }
    api2.get_file("/late.txt").await?.check(404)?;
    // The old version came back too, and the restored installation is consistent.
    let v = api2.get(&format!("/api/v1/versions/{}", nimbus_e2e::encode_path("/docs/one.txt"))).await?;
    ensure!(v.status == 200 && v.text().matches("\"version\":").count() >= 2, "versions after restore: {}", v.text());
    let r = nimbus_e2e::ops::run_tool(&fresh, "fsck", &["--json"]).await?;
    r.expect_code(0)?;
    Ok(())
});
