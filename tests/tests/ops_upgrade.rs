//! Upgrades: `nimbus-gateway migrate` applies migrations explicitly, and a database migrated
//! by a newer binary (a migration version this binary does not know) is refused, by `migrate`
//! and by `serve`, with a message that says so.

use std::time::Duration;

use anyhow::{Context, ensure};
use nimbus_e2e::ops::run_tool;
use nimbus_e2e::{Gateway, backend_test};

/// A migration no binary has: what a database touched by a future version looks like.
const FUTURE: i64 = 99_991_231_000_001;

async fn add_future_migration(gw: &Gateway) -> anyhow::Result<()> {
    match gw.database() {
        Some(db) => {
            let pool = sqlx::PgPool::connect(db.url()).await?;
            sqlx::query(
                "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
                 VALUES ($1, 'from a newer nimbus-gateway', TRUE, '\\x00'::bytea, 0)",
            )
            .bind(FUTURE)
            .execute(&pool)
            .await?;
            pool.close().await;
        }
        None => {
            let db = gw.data_dir().join("nimbus.db");
            let sql = format!(
                "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
                 VALUES ({FUTURE}, 'from a newer nimbus-gateway', 1, X'00', 0);"
            );
            let out = tokio::process::Command::new("sqlite3").arg(&db).arg(sql).output().await?;
            ensure!(out.status.success(), "sqlite3: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    Ok(())
}

backend_test!(migrate_and_refuse_newer_schema, |gw| async move {
    let mut gw = gw;
    let r = run_tool(&gw, "migrate", &[]).await?;
    r.expect_code(0)?;
    ensure!(r.stdout.contains("up to date"), "{}", r.stdout);
    // Idempotent.
    run_tool(&gw, "migrate", &[]).await?.expect_code(0)?;

    gw.stop().await?;
    add_future_migration(&gw).await?;
    let r = run_tool(&gw, "migrate", &[]).await?;
    ensure!(r.code != 0, "migrate accepted a newer schema: {}", r.stdout);
    ensure!(
        r.stderr.contains("newer than this nimbus-gateway") && r.stderr.contains(&FUTURE.to_string()),
        "unclear refusal: {}",
        r.stderr
    );
    let serve = tokio::time::timeout(Duration::from_secs(60), run_tool(&gw, "serve", &[]))
        .await
        .context("serve started on a newer schema")??;
    ensure!(serve.code != 0 && serve.stderr.contains("newer than this nimbus-gateway"), "{serve:?}");
    Ok(())
});
