//! The four ways into a space agree with each other: REST, WebDAV (`/dav/`), the S3 door and
//! the drive (a real FUSE mount). A file written through any of them reads back byte for byte
//! through all the others, and the same path tricks get the same decision (400, nothing
//! created) at every door, because they all go through one check (`RemotePath`).

use std::path::Path;

use anyhow::{Context, ensure};
use nimbus_e2e::gateway::user_password;
use nimbus_e2e::mount::{Device, Drive, MountMode, eventually};
use nimbus_e2e::s3::s3_io as s3;
use nimbus_e2e::{Api, GatewayOptions, backend_test, data, raw_request};
use nimbus_proto::wire::CreatedS3Key;
use reqwest::Method;

async fn dav_put(api: &Api, path: &str, body: Vec<u8>) -> anyhow::Result<u16> {
    Ok(api.req(Method::PUT, &format!("/dav/{path}")).body(body).send().await?.status)
}

async fn dav_get(api: &Api, path: &str) -> anyhow::Result<Vec<u8>> {
    let r = api.req(Method::GET, &format!("/dav/{path}")).send().await?;
    r.check(200)?;
    Ok(r.body.to_vec())
}

/// Reads `name` through every door (and the drive when mounted) and compares with `want`.
async fn read_everywhere(
    api: &Api,
    endpoint: &str,
    key: &CreatedS3Key,
    drive: &Path,
    tmp: &Path,
    name: &str,
    want: &[u8],
) -> anyhow::Result<()> {
    let r = api.get_file(&format!("/{name}")).await?;
    r.check(200)?;
    ensure!(r.body.as_ref() == want, "REST read of {name} differs");
    ensure!(dav_get(api, name).await? == want, "WebDAV read of {name} differs");
    let local = tmp.join(format!("s3-{name}"));
    s3(endpoint, key, &["get", "alice", name, local.to_str().context("path")?]).await?;
    ensure!(std::fs::read(&local)? == want, "S3 read of {name} differs");
    let on_drive = drive.join(name);
    let got = eventually(&format!("{name} on the drive"), std::time::Duration::from_secs(20), || async {
        let got = std::fs::read(&on_drive)?;
        ensure!(got.len() == want.len(), "{} bytes on the drive, want {}", got.len(), want.len());
        Ok(got)
    })
    .await?;
    ensure!(got == want, "drive read of {name} differs");
    Ok(())
}

backend_test!(
    every_door_reads_what_every_door_wrote,
    opts = GatewayOptions::default().arg("--s3-listen").arg("127.0.0.1:0"),
    |gw| async move {
        let (_, alice) = gw.user("alice", None).await?;
        let key: CreatedS3Key =
            alice.post_json("/api/v1/keys", &serde_json::json!({"name": "doors"})).await?.ok(201)?;
        let endpoint = gw.s3_endpoint()?;
        let tmp = tempfile::tempdir()?;
        let dev = Device::new("laptop")?;
        dev.login(&gw.url, "alice", &user_password("alice")).await?;
        let drive =
            Drive::mount(&dev, &dev.root().join("drive"), &dev.root().join("cache"), MountMode::Background).await?;

        // Several blocks each (4 MiB blocks), different lengths, so block boundaries differ.
        let via_rest = data::bytes("via rest", 9 * 1024 * 1024 + 3);
        let via_dav = data::bytes("via dav", 5 * 1024 * 1024 + 11);
        let via_s3 = data::bytes("via s3", 13 * 1024 * 1024 + 7);
        let via_drive = data::bytes("via drive", 6 * 1024 * 1024 + 1);
        alice.put_file("/via-rest.bin", via_rest.clone()).await?.check(201)?;
        ensure!(dav_put(&alice, "via-dav.bin", via_dav.clone()).await? == 201, "WebDAV PUT");
        let src = tmp.path().join("via-s3.bin");
        std::fs::write(&src, &via_s3)?;
        s3(&endpoint, &key, &["put", "alice", "via-s3.bin", src.to_str().context("path")?]).await?;
        std::fs::write(drive.path("via-drive.bin"), &via_drive)?;
        // The drive uploads in the background: wait until the server has the whole file.
        eventually("the drive's upload", std::time::Duration::from_secs(60), || async {
            let r = alice.get_file("/via-drive.bin").await?;
            ensure!(r.status == 200 && r.body.len() == via_drive.len(), "{} bytes so far", r.body.len());
            Ok(())
        })
        .await?;

        for (name, want) in [
            ("via-rest.bin", &via_rest),
            ("via-dav.bin", &via_dav),
            ("via-s3.bin", &via_s3),
            ("via-drive.bin", &via_drive),
        ] {
            read_everywhere(&alice, &endpoint, &key, &drive.mountpoint, tmp.path(), name, want)
                .await
                .with_context(|| format!("reading {name}"))?;
        }
        drive.unmount().await?;
        Ok(())
    }
);

backend_test!(
    the_same_names_are_refused_at_every_door,
    only = sqlite_local,
    opts = GatewayOptions::default().arg("--s3-listen").arg("127.0.0.1:0"),
    |gw| async move {
        let (_, alice) = gw.user("alice", None).await?;
        let key: CreatedS3Key =
            alice.post_json("/api/v1/keys", &serde_json::json!({"name": "doors"})).await?.ok(201)?;
        let endpoint = gw.s3_endpoint()?;
        alice.mkdir("/docs").await?.check(201)?;
        let before = alice.get("/api/v1/dirs/").await?.text();

        // (name as the S3 key, the same name percent-encoded for the REST and WebDAV URLs)
        let cases = [
            ("../escape.txt", "..%2Fescape.txt"),
            ("docs/../../escape.txt", "docs/..%2F..%2Fescape.txt"),
            ("a:b.txt", "a%3Ab.txt"),
            ("CON", "CON"),
            ("docs/aux.txt", "docs/aux.txt"),
            ("what?.txt", "what%3F.txt"),
            ("pipe|.txt", "pipe%7C.txt"),
            ("trailing.", "trailing."),
            ("back\\slash.txt", "back%5Cslash.txt"),
            ("docs//double.txt", "docs//double.txt"),
        ];
        for (raw, encoded) in cases {
            let r = alice.req(Method::PUT, &format!("/api/v1/files/{encoded}")).body("x").send().await?;
            ensure!(r.status == 400, "REST PUT {raw:?}: {r}");
            let status = dav_put(&alice, encoded, b"x".to_vec()).await?;
            ensure!(status == 400, "WebDAV PUT {raw:?}: {status}");
            let code = s3(&endpoint, &key, &["code", "alice", raw]).await?;
            ensure!(code == "InvalidArgument 400", "S3 PUT {raw:?}: {code}");
        }
        // `%2e%2e` decodes to `..` exactly once, at every door (sent raw: HTTP client libraries
        // would normalise it away before it left the test).
        let auth = format!("Bearer {}", alice.token().unwrap_or_default());
        for target in
            ["/api/v1/files/%2e%2e/escape.txt", "/dav/%2e%2e/escape.txt", "/dav/docs/%2E%2E%2F%2e%2e%2fescape.txt"]
        {
            let r =
                raw_request(alice.base(), "PUT", target, &[("Authorization", &auth), ("Content-Length", "1")], b"x")
                    .await?;
            ensure!(r.status == 400, "{target}: {r}");
        }
        ensure!(alice.get("/api/v1/dirs/").await?.text() == before, "a refused name changed the space");
        Ok(())
    }
);

const LOCKINFO: &str = r#"<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>office</D:owner></D:lockinfo>"#;

backend_test!(
    a_webdav_lock_holds_at_the_s3_door,
    only = sqlite_local,
    opts = GatewayOptions::default().arg("--s3-listen").arg("127.0.0.1:0"),
    |gw| async move {
        let (_, alice) = gw.user("alice", None).await?;
        let key: CreatedS3Key =
            alice.post_json("/api/v1/keys", &serde_json::json!({"name": "doors"})).await?.ok(201)?;
        let endpoint = gw.s3_endpoint()?;
        alice.put_file("/report.docx", "draft").await?.check(201)?;
        // Office locks the document it opens over WebDAV.
        let r = alice
            .req(Method::from_bytes(b"LOCK")?, "/dav/report.docx")
            .header("timeout", "Second-600")
            .body(LOCKINFO)
            .send()
            .await?;
        r.check(200)?;
        let token = r.headers.get("lock-token").and_then(|v| v.to_str().ok()).context("no Lock-Token")?.to_string();
        // The S3 door cannot overwrite it meanwhile; the content stays.
        let code = s3(&endpoint, &key, &["code", "alice", "report.docx"]).await?;
        ensure!(code == "Locked 423", "S3 PUT on a locked file: {code}");
        ensure!(alice.get_file("/report.docx").await?.body.as_ref() == b"draft");
        // Once Office closes it (UNLOCK), the S3 door writes again.
        alice
            .req(Method::from_bytes(b"UNLOCK")?, "/dav/report.docx")
            .header("lock-token", token.as_str())
            .send()
            .await?
            .check(204)?;
        let code = s3(&endpoint, &key, &["code", "alice", "report.docx"]).await?;
        ensure!(code == "OK", "S3 PUT after UNLOCK: {code}");
        Ok(())
    }
);

// Every namespace write honours WebDAV locks, whatever the door: creating a folder inside a
// locked folder, restoring from the trash into it, an S3 folder marker there, an S3 self-copy
// (a metadata-only write) of a locked object. With the lock's token they go through.
backend_test!(
    locks_guard_every_namespace_write,
    opts = GatewayOptions::default().arg("--s3-listen").arg("127.0.0.1:0"),
    |gw| async move {
        use nimbus_e2e::dav::{dav, lock};
        let (_, alice) = gw.user("alice", None).await?;
        let key = nimbus_e2e::s3::new_key(&alice).await?;
        let endpoint = gw.s3_endpoint()?;
        alice.put_file("/locked/in.txt", "in").await?.check(201)?;
        alice.put_file("/gone.txt", "gone").await?.check(201)?;
        alice.delete("/api/v1/files/gone.txt").await?.check(204)?;
        let trash: nimbus_proto::wire::TrashList = alice.get("/api/v1/trash").await?.ok(200)?;
        let item = trash.entries.first().context("a trash item")?.id;
        let token = lock(&alice, "/dav/locked/", &[("depth", "infinity"), ("timeout", "Second-600")]).await?;
        let restore = format!("/api/v1/trash/{item}/restore");
        let into_locked = serde_json::json!({"to": "/locked/gone.txt"});

        alice.mkdir("/locked/sub").await?.check_error(423, "locked")?;
        dav(&alice, "MKCOL", "/dav/locked/sub", &[], vec![]).await?.check(423)?;
        alice.post_json(&restore, &into_locked).await?.check_error(423, "locked")?;
        let out = s3(&endpoint, &key, &["marker", "alice", "locked/sub/"]).await?;
        ensure!(out == "Locked 423", "S3 folder marker in a locked folder: {out}");
        let out = s3(&endpoint, &key, &["selfcopy", "alice", "locked/in.txt"]).await?;
        ensure!(out == "Locked 423", "S3 self-copy of a locked object: {out}");
        // Nothing changed.
        alice.stat("/locked/sub").await?.check_error(404, "not_found")?;
        alice.stat("/locked/gone.txt").await?.check_error(404, "not_found")?;
        let t: nimbus_proto::wire::TrashList = alice.get("/api/v1/trash").await?.ok(200)?;
        ensure!(t.entries.len() == 1, "{t:?}");

        // The lock's holder may.
        let with = |m: Method, url: &str| alice.req(m, url).header("x-nimbus-lock-token", &token);
        with(Method::POST, "/api/v1/dirs/locked/sub").send().await?.check(201)?;
        with(Method::POST, &restore).json(&into_locked).send().await?.check(200)?;
        ensure!(alice.get_file("/locked/gone.txt").await?.body.as_ref() == b"gone");
        let iff = format!("(<{token}>)");
        dav(&alice, "MKCOL", "/dav/locked/sub2", &[("if", &iff)], vec![]).await?.check(201)?;

        // Unlocked, every door may again.
        let lt = format!("<{token}>");
        dav(&alice, "UNLOCK", "/dav/locked/", &[("lock-token", &lt)], vec![]).await?.check(204)?;
        ensure!(s3(&endpoint, &key, &["marker", "alice", "locked/sub3/"]).await? == "OK");
        ensure!(s3(&endpoint, &key, &["selfcopy", "alice", "locked/in.txt"]).await? == "OK");
        alice.mkdir("/locked/sub4").await?.check(201)?;
        Ok(())
    }
);
