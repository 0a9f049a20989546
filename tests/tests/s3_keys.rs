//! Per-user S3 access keys over REST: create (secret shown once), list, revoke, isolation,
//! bad input, and that the database never holds a usable secret.

use anyhow::{Context, ensure};
use nimbus_e2e::backend_test;
use nimbus_proto::wire::{CreatedS3Key, S3KeyList};
use reqwest::Method;

/// Everything the metadata database holds, as text (what a leaked dump would show).
fn dump_database(gw: &nimbus_e2e::Gateway) -> anyhow::Result<String> {
    let out = match gw.database() {
        Some(db) => std::process::Command::new("psql")
            .args([db.url(), "-At", "-c", "SELECT * FROM s3_keys"])
            .output()
            .context("run psql")?,
        None => std::process::Command::new("sqlite3")
            .arg(gw.data_dir().join("nimbus.db"))
            .arg(".dump")
            .output()
            .context("run sqlite3")?,
    };
    ensure!(out.status.success(), "dump failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

backend_test!(s3_keys_lifecycle, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;

    let r = alice.post_json("/api/v1/keys", &serde_json::json!({"name": "backup box"})).await?;
    let key: CreatedS3Key = r.ok(201)?;
    ensure!(key.access_key_id.len() == 20 && key.access_key_id.starts_with("NMB"), "{r}");
    ensure!(key.secret_access_key.len() == 40 && key.name == "backup box", "{r}");
    let r = alice.post_json("/api/v1/keys", &serde_json::json!({})).await?;
    let second: CreatedS3Key = r.ok(201)?;
    ensure!(second.name == "S3 key" && second.access_key_id != key.access_key_id, "{r}");

    // The secret is shown once: listings never carry it.
    let r = alice.get("/api/v1/keys").await?;
    let list: S3KeyList = r.ok(200)?;
    ensure!(list.keys.len() == 2 && list.keys[0].access_key_id == key.access_key_id, "{r}");
    ensure!(!r.text().contains(&key.secret_access_key) && !r.text().contains("secret"), "secret in listing: {r}");

    // The database holds the key id but no usable secret; the server key lives in a 0600 file.
    let dump = dump_database(&gw)?;
    ensure!(dump.contains(&key.access_key_id), "the dump should hold the key id");
    ensure!(!dump.contains(&key.secret_access_key), "the plaintext secret is in the database");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(gw.data_dir().join("s3-secrets.key")).context("server key file")?;
        ensure!(meta.len() == 32 && meta.permissions().mode() & 0o777 == 0o600, "key file {meta:?}");
    }

    // Isolation: bob sees none of alice's keys and cannot revoke them (same answer as missing).
    let r = bob.get("/api/v1/keys").await?;
    ensure!(r.ok::<S3KeyList>(200)?.keys.is_empty(), "{r}");
    bob.delete(&format!("/api/v1/keys/{}", key.id)).await?.check_error(404, "not_found")?;
    bob.delete("/api/v1/keys/999999").await?.check_error(404, "not_found")?;
    ensure!(alice.get("/api/v1/keys").await?.ok::<S3KeyList>(200)?.keys.len() == 2);

    // Bad input and no credentials.
    let long = "x".repeat(101);
    alice.post_json("/api/v1/keys", &serde_json::json!({"name": long})).await?.check_error(400, "bad_request")?;
    alice.post_json("/api/v1/keys", &serde_json::json!({"name": "a\u{7}b"})).await?.check_error(400, "bad_request")?;
    alice.req(Method::POST, "/api/v1/keys").json_text("{nope").send().await?.check_error(400, "bad_request")?;
    alice.delete("/api/v1/keys/abc").await?.check_error(404, "not_found")?;
    let anon = alice.anonymous();
    anon.get("/api/v1/keys").await?.check_error(401, "unauthorized")?;
    anon.post_json("/api/v1/keys", &serde_json::json!({})).await?.check_error(401, "unauthorized")?;

    // Revoke: gone from the list, a second revoke is 404.
    alice.delete(&format!("/api/v1/keys/{}", key.id)).await?.check(204)?;
    let left = alice.get("/api/v1/keys").await?.ok::<S3KeyList>(200)?;
    ensure!(left.keys.len() == 1 && left.keys[0].id == second.id, "{left:?}");
    alice.delete(&format!("/api/v1/keys/{}", key.id)).await?.check_error(404, "not_found")?;
    Ok(())
});
