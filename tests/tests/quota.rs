//! Every byte a space holds counts, and storage cannot grow without bound (docs/API.md,
//! "Usage and quota"): usage by kind (current, older versions, trash, uploads not committed),
//! the quota over all of it, room made by expiring the oldest history, refusals only when current
//! data alone would pass it, concurrent uploads through every door, retention by policy (the
//! maintenance worker and `nimbus-gateway gc`), and deleting one older version.

use std::time::Duration;

use anyhow::{Context, ensure};
use nimbus_e2e::mount::eventually;
use nimbus_e2e::ops::run_tool;
use nimbus_e2e::s3::{new_key, s3_io};
use nimbus_e2e::{Api, GatewayOptions, backend_test, data, encode_path};
use nimbus_proto::wire::{Me, MissingBlocksResponse, ServerInfo, TrashList, UsageBreakdown, UserInfo, VersionList};
use reqwest::Method;

const KIB: usize = 1 << 10;

async fn me(api: &Api) -> anyhow::Result<Me> {
    let m: Me = api.get("/api/v1/me").await?.ok(200)?;
    let u = m.usage;
    ensure!(
        m.used_bytes == u.current + u.versions + u.trash + u.pending,
        "used_bytes is not the sum of its parts: {m:?}"
    );
    Ok(m)
}

fn usage(current: usize, versions: usize, trash: usize, pending: usize) -> UsageBreakdown {
    UsageBreakdown { current: current as u64, versions: versions as u64, trash: trash as u64, pending: pending as u64 }
}

async fn versions(api: &Api, path: &str) -> anyhow::Result<VersionList> {
    api.get(&format!("/api/v1/versions/{}", encode_path(path))).await?.ok(200)
}

backend_test!(usage_counts_every_kind, |gw| async move {
    let (id, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    let admin = gw.admin().await?;

    alice.put_file("/a.bin", data::bytes("a1", 100 * KIB)).await?.check(201)?;
    ensure!(me(&alice).await?.usage == usage(100 * KIB, 0, 0, 0));
    // Rewriting keeps the old version, and it counts.
    alice.put_file("/a.bin", data::bytes("a2", 150 * KIB)).await?.check(200)?;
    ensure!(me(&alice).await?.usage == usage(150 * KIB, 100 * KIB, 0, 0));
    // Deleted: the file and its versions count as trash.
    alice.delete("/api/v1/files/a.bin").await?.check(204)?;
    ensure!(me(&alice).await?.usage == usage(0, 0, 250 * KIB, 0));
    let t: TrashList = alice.get("/api/v1/trash").await?.ok(200)?;
    ensure!(t.entries.len() == 1 && t.entries[0].size == (150 * KIB) as u64, "{t:?}");
    ensure!(t.entries[0].versions_bytes == (100 * KIB) as u64, "{t:?}");
    // An uploaded block no version references yet is pending, and readable only by its owner.
    let block = data::bytes("pending block", 64 * KIB);
    let hash = data::hash_hex(&block);
    alice.put_block(&hash, block.clone()).await?.check(201)?;
    ensure!(alice.get(&format!("/api/v1/blocks/{hash}")).await?.check(200)?.body.as_ref() == block.as_slice());
    bob.get(&format!("/api/v1/blocks/{hash}")).await?.check_error(404, "not_found")?;
    let m = me(&alice).await?;
    ensure!(m.usage == usage(0, 0, 250 * KIB, 64 * KIB), "{m:?}");
    ensure!(m.used_bytes == (314 * KIB) as u64, "{m:?}");
    // The admin API shows the same.
    let u: UserInfo = admin.get(&format!("/api/v1/admin/users/{id}")).await?.ok(200)?;
    ensure!(u.used_bytes == m.used_bytes && u.usage == m.usage, "{u:?} vs {m:?}");
    // Uploading it again changes nothing.
    alice.put_block(&hash, block.clone()).await?.check(200)?;
    ensure!(me(&alice).await?.usage == m.usage);

    // Restored from the trash: back to current and versions.
    alice.post_json(&format!("/api/v1/trash/{}/restore", t.entries[0].id), &serde_json::json!({})).await?.check(200)?;
    ensure!(me(&alice).await?.usage == usage(150 * KIB, 100 * KIB, 0, 64 * KIB));
    // Committing the pending block makes it current.
    let refs = [nimbus_proto::wire::BlockRef { hash: hash.clone(), size: block.len() as u64 }];
    alice.commit("/b.bin", None, &refs).await?.check(201)?;
    ensure!(me(&alice).await?.usage == usage(214 * KIB, 100 * KIB, 0, 0));

    // One older version deleted on its own.
    let l = versions(&alice, "/a.bin").await?;
    ensure!(l.versions.len() == 2, "{l:?}");
    let (cur, old) = (&l.versions[0], &l.versions[1]);
    ensure!(cur.current && !old.current, "{l:?}");
    let url = |v: i64| format!("/api/v1/versions/{}?version={v}", encode_path("/a.bin"));
    // Not the current one, not a version of another file, not without saying which, not bob.
    alice.delete(&url(cur.version)).await?.check_error(409, "conflict")?;
    let b = alice.stat("/b.bin").await?.entry(200)?;
    alice.delete(&url(b.version.context("b.bin version")?)).await?.check_error(404, "not_found")?;
    alice.delete(&url(old.version + 1_000_000)).await?.check_error(404, "not_found")?;
    alice
        .delete(&format!("/api/v1/versions/{}?version=x", encode_path("/a.bin")))
        .await?
        .check_error(404, "not_found")?;
    alice.delete(&format!("/api/v1/versions/{}", encode_path("/a.bin"))).await?.check_error(400, "bad_request")?;
    bob.put_file("/a.bin", "bob's own").await?.check(201)?;
    bob.delete(&url(old.version)).await?.check_error(404, "not_found")?;
    ensure!(me(&alice).await?.usage == usage(214 * KIB, 100 * KIB, 0, 0), "a refused delete changed usage");
    alice.delete(&url(old.version)).await?.check(204)?;
    ensure!(me(&alice).await?.usage == usage(214 * KIB, 0, 0, 0));
    let l = versions(&alice, "/a.bin").await?;
    ensure!(l.versions.len() == 1 && l.versions[0].version == cur.version, "{l:?}");
    alice.get(&format!("/api/v1/files/a.bin?version={}", old.version)).await?.check_error(404, "not_found")?;

    // Purged data is garbage, free at once; announcing its blocks as present charges them again
    // (as pending), so they cannot be kept alive outside the quota.
    alice.delete("/api/v1/files/a.bin").await?.check(204)?;
    alice.delete("/api/v1/trash").await?.check(204)?;
    ensure!(me(&alice).await?.usage == usage(64 * KIB, 0, 0, 0));
    let a2 = data::bytes("a2", 150 * KIB);
    let h2 = data::hash_hex(&a2);
    let m: MissingBlocksResponse =
        alice.post_json("/api/v1/blocks/missing", &serde_json::json!({"hashes": [h2]})).await?.ok(200)?;
    ensure!(m.missing.is_empty(), "{m:?}");
    ensure!(me(&alice).await?.usage == usage(64 * KIB, 0, 0, 150 * KIB));
    Ok(())
});

backend_test!(history_makes_room_and_current_data_is_the_limit, |gw| async move {
    let quota = 1000 * KIB;
    let (_, alice) = gw.user("alice", Some(quota as u64)).await?;

    // Ten saves of a 300 KiB file under a 1000 KiB quota: every one succeeds, the oldest
    // versions go to make room, the newest stay.
    let mut vids = Vec::new();
    for i in 0..10 {
        let e = alice.put_file("/doc.bin", data::bytes(&format!("doc {i}"), 300 * KIB)).await?;
        e.check_any(&[200, 201]).with_context(|| format!("save {i}"))?;
        vids.push(e.entry(e.status)?.version.context("version")?);
        let m = me(&alice).await?;
        ensure!(m.used_bytes <= quota as u64, "save {i}: over the quota: {m:?}");
    }
    let l = versions(&alice, "/doc.bin").await?;
    let kept: Vec<i64> = l.versions.iter().map(|v| v.version).collect();
    ensure!(kept.len() == 3, "300 KiB current + 2 older fit in 1000 KiB: {l:?}");
    ensure!(kept == vids[7..].iter().rev().copied().collect::<Vec<_>>(), "the newest are kept: {kept:?} of {vids:?}");
    ensure!(alice.get_file("/doc.bin").await?.body.as_ref() == data::bytes("doc 9", 300 * KIB).as_slice());

    // The trash makes room too, oldest first (the trash item is older than nothing else here
    // once the versions are gone).
    alice.delete("/api/v1/files/doc.bin").await?.check(204)?;
    ensure!(me(&alice).await?.usage == usage(0, 0, 900 * KIB, 0));
    alice.put_file("/new.bin", data::bytes("new", 400 * KIB)).await?.check(201)?;
    let m = me(&alice).await?;
    ensure!(m.usage == usage(400 * KIB, 0, 0, 0), "the whole trash item went: {m:?}");
    let t: TrashList = alice.get("/api/v1/trash").await?.ok(200)?;
    ensure!(t.entries.is_empty(), "{t:?}");

    // Replacing a file bigger than half the quota works: its old version becomes history.
    alice.put_file("/new.bin", data::bytes("newer", 700 * KIB)).await?.check(200)?;
    let m = me(&alice).await?;
    ensure!(m.usage == usage(700 * KIB, 0, 0, 0), "{m:?}");

    // Current data alone over the quota: 413, nothing changes.
    let api = alice.fresh_connection()?;
    api.put_file("/huge.bin", data::bytes("huge", 400 * KIB)).await?.check_error(413, "quota_exceeded")?;
    let api = api.fresh_connection()?;
    api.stat("/huge.bin").await?.check_error(404, "not_found")?;
    ensure!(me(&api).await?.usage == usage(700 * KIB, 0, 0, 0));
    // A block upload that would pass it is refused as it arrives, not at the commit.
    let block = data::bytes("one block too many", 400 * KIB);
    api.put_block(&data::hash_hex(&block), block.clone()).await?.check_error(413, "quota_exceeded")?;
    let api = api.fresh_connection()?;
    ensure!(me(&api).await?.usage == usage(700 * KIB, 0, 0, 0));
    // A copy is a write too.
    let copy = serde_json::json!({"from": "/new.bin", "to": "/copy.bin"});
    api.post_json("/api/v1/copy", &copy).await?.check_error(413, "quota_exceeded")?;
    // Restoring an older version of a file is a write that may expire other history.
    api.put_file("/small.bin", data::bytes("s1", 100 * KIB)).await?.check(201)?;
    api.put_file("/small.bin", data::bytes("s2", 100 * KIB)).await?.check(200)?;
    let l = versions(&api, "/small.bin").await?;
    let first = l.versions.last().context("a version")?.version;
    api.post_json(&format!("/api/v1/versions/{}", encode_path("/small.bin")), &serde_json::json!({"version": first}))
        .await?
        .check(200)?;
    let m = me(&api).await?;
    ensure!(m.used_bytes <= quota as u64 && m.usage.current == (800 * KIB) as u64, "{m:?}");
    ensure!(api.get_file("/small.bin").await?.body.as_ref() == data::bytes("s1", 100 * KIB).as_slice());
    Ok(())
});

fn s3_opts() -> GatewayOptions {
    GatewayOptions::default().arg("--s3-listen").arg("127.0.0.1:0")
}

/// Runs `n` uploads of `size` bytes at once through `send` and returns how many succeeded; every
/// other one must have been refused for the quota (`refused` says so for an answer).
async fn race<F, Fut>(n: usize, send: F) -> anyhow::Result<usize>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let results = futures::future::join_all((0..n).map(&send)).await;
    let mut ok = 0;
    for (i, r) in results.into_iter().enumerate() {
        if r.with_context(|| format!("upload {i}"))? {
            ok += 1;
        }
    }
    Ok(ok)
}

backend_test!(concurrent_uploads_never_pass_the_quota, opts = s3_opts(), |gw| async move {
    let quota = 1000 * KIB;
    let size = 300 * KIB;
    let endpoint = gw.s3_endpoint()?;
    for door in ["rest", "blocks", "webdav", "s3"] {
        let (_, api) = gw.user(&format!("u-{door}"), Some(quota as u64)).await?;
        let key = new_key(&api).await?;
        let dir = tempfile::tempdir()?;
        let ok = race(8, |i| {
            let (api, key, endpoint) = (api.clone(), key.clone(), endpoint.clone());
            let body = data::bytes(&format!("{door} {i}"), size);
            let file = dir.path().join(format!("{i}.bin"));
            async move {
                let api = api.fresh_connection()?;
                match door {
                    "rest" => {
                        let r = api.put_file(&format!("/f{i}.bin"), body).await?;
                        if r.status == 413 {
                            r.check_error(413, "quota_exceeded")?;
                        }
                        Ok(r.check(201).is_ok())
                    }
                    "blocks" => {
                        let hash = data::hash_hex(&body);
                        let r = api.put_block(&hash, body.clone()).await?;
                        if r.status == 413 {
                            r.check_error(413, "quota_exceeded")?;
                            return Ok(false);
                        }
                        r.check(201)?;
                        let refs = [nimbus_proto::wire::BlockRef { hash, size: body.len() as u64 }];
                        api.commit(&format!("/f{i}.bin"), None, &refs).await?.check(201)?;
                        Ok(true)
                    }
                    "webdav" => {
                        let r = api.req(Method::PUT, &format!("/dav/f{i}.bin")).body(body).send().await?;
                        ensure!(r.status == 201 || r.status == 507, "WebDAV PUT: {r}");
                        Ok(r.status == 201)
                    }
                    _ => {
                        // Three parts each, all sent at once.
                        std::fs::write(&file, &body)?;
                        let key_name = format!("f{i}.bin");
                        let file = file.to_str().context("path")?;
                        let out = s3_io(&endpoint, &key, &["mpu", "u-s3", &key_name, file, "102400"]).await?;
                        ensure!(out == "OK" || out == "QuotaExceeded 403", "multipart upload: {out}");
                        Ok(out == "OK")
                    }
                }
            }
        })
        .await
        .with_context(|| format!("door {door}"))?;
        let m = me(&api).await?;
        ensure!(m.used_bytes <= quota as u64, "{door}: {ok} uploads together passed the quota: {m:?}");
        // One block each: exactly the first three claims fit. Multipart uploads of three parts
        // each can starve one another (every upload may lose one part), so fewer may finish,
        // but never more, and the aborted ones leave nothing counted.
        if door == "s3" {
            ensure!(ok <= 3, "{door}: {ok} of 8 succeeded");
        } else {
            ensure!(ok == 3, "{door}: {ok} of 8 succeeded");
        }
        ensure!(m.usage == usage(ok * size, 0, 0, 0), "{door}: {ok} succeeded but {m:?}");
        let files = api.list_all("/", None).await?;
        ensure!(files.len() == ok, "{door}: {} files listed, {ok} succeeded", files.len());
    }
    Ok(())
});

backend_test!(
    retention_applies_by_policy,
    opts = GatewayOptions::default()
        .arg("--maintenance-interval")
        .arg("1s")
        .arg("--version-retention")
        .arg("10s:all")
        .arg("--trash-retention")
        .arg("10s"),
    |gw| async move {
        let (_, alice) = gw.user("alice", None).await?;
        let info: ServerInfo = alice.get("/api/v1/info").await?.ok(200)?;
        ensure!(info.version_retention == "10s:all" && info.trash_retention == "10s", "{info:?}");
        ensure!(info.retention.trash_secs == Some(10), "{info:?}");

        for i in 0..3 {
            alice.put_file("/v.bin", data::bytes(&format!("v{i}"), 10 * KIB)).await?.check_any(&[200, 201])?;
        }
        alice.put_file("/gone.bin", data::bytes("gone", 20 * KIB)).await?.check(201)?;
        alice.delete("/api/v1/files/gone.bin").await?.check(204)?;
        ensure!(me(&alice).await?.usage == usage(10 * KIB, 20 * KIB, 20 * KIB, 0));
        // The worker runs every second; versions and trash older than 10 s go.
        eventually("retention by the maintenance worker", Duration::from_secs(60), || async {
            let m = me(&alice).await?;
            ensure!(m.usage == usage(10 * KIB, 0, 0, 0), "{m:?}");
            Ok(())
        })
        .await?;
        let l = versions(&alice, "/v.bin").await?;
        ensure!(l.versions.len() == 1 && l.versions[0].current, "{l:?}");
        let t: TrashList = alice.get("/api/v1/trash").await?.ok(200)?;
        ensure!(t.entries.is_empty(), "{t:?}");
        ensure!(alice.get_file("/v.bin").await?.body.as_ref() == data::bytes("v2", 10 * KIB).as_slice());
        Ok(())
    }
);

backend_test!(gc_applies_retention_and_reclaims_it, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let info: ServerInfo = alice.get("/api/v1/info").await?.ok(200)?;
    ensure!(info.version_retention == "24h:all,30d:1d,365d:7d" && info.trash_retention == "30d", "{info:?}");
    alice.put_file("/v.bin", data::bytes("old", 10 * KIB)).await?.check(201)?;
    alice.put_file("/v.bin", data::bytes("new", 10 * KIB)).await?.check(200)?;
    alice.put_file("/t.bin", data::bytes("trash", 10 * KIB)).await?.check(201)?;
    alice.delete("/api/v1/files/t.bin").await?.check(204)?;
    // The defaults keep a minute-old version and trash item.
    let run = run_tool(&gw, "gc", &["--json"]).await?;
    ensure!(run.code == 0, "{run:?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout)?;
    ensure!(report["versions_expired"] == 0 && report["trash_expired"] == 0, "{report}");
    // A policy that keeps no history: gc expires it, then (grace 0) reclaims its blocks.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let run =
        run_tool(&gw, "gc", &["--json", "--version-retention", "none", "--trash-retention", "1s", "--gc-grace", "0"])
            .await?;
    ensure!(run.code == 0, "{run:?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout)?;
    ensure!(report["versions_expired"] == 1 && report["trash_expired"] == 1, "{report}");
    ensure!(report["blocks_freed"] == 2, "the old version's and the trashed file's blocks: {report}");
    ensure!(me(&alice).await?.usage == usage(10 * KIB, 0, 0, 0));
    ensure!(alice.get_file("/v.bin").await?.body.as_ref() == data::bytes("new", 10 * KIB).as_slice());
    // Bad policies are refused with a message that says what to write.
    let run = run_tool(&gw, "gc", &["--version-retention", "30d:1d,24h:all"]).await?;
    ensure!(run.code != 0 && run.stderr.contains("growing ages"), "{run:?}");
    Ok(())
});

backend_test!(abandoned_and_aborted_uploads_count_until_gone, opts = s3_opts(), |gw| async move {
    let (_, alice) = gw.user("alice", Some((2000 * KIB) as u64)).await?;
    // Blocks of an upload never committed count as pending; gc takes them after its grace.
    let block = data::bytes("never committed", 500 * KIB);
    alice.put_block(&data::hash_hex(&block), block).await?.check(201)?;
    ensure!(me(&alice).await?.usage == usage(0, 0, 0, 500 * KIB));
    let run = run_tool(&gw, "gc", &["--json", "--gc-grace", "0"]).await?;
    ensure!(run.code == 0, "{run:?}");
    ensure!(me(&alice).await?.usage == usage(0, 0, 0, 0));
    // An S3 multipart upload refused part-way is aborted by the client: its parts stop counting.
    let key = new_key(&alice).await?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("big.bin");
    std::fs::write(&file, data::bytes("too big", 3000 * KIB))?;
    let out =
        s3_io(&gw.s3_endpoint()?, &key, &["mpu", "alice", "big.bin", file.to_str().context("path")?, "512000"]).await?;
    ensure!(out == "QuotaExceeded 403", "{out}");
    // A part refused halfway lets go of its blocks on a task of its own: soon, not at once.
    eventually("the aborted upload stops counting", Duration::from_secs(30), || async {
        let m = me(&alice).await?;
        ensure!(m.usage == usage(0, 0, 0, 0), "the aborted upload still counts: {m:?}");
        Ok(())
    })
    .await?;
    // And it left nothing in the store for garbage collection to find: its blocks went with it.
    nothing_left_behind(&gw).await
});

/// Garbage collection with no grace finds no block to free, and fsck no stray object: every
/// block an unfinished upload stored went with it, row and object.
async fn nothing_left_behind(gw: &nimbus_e2e::Gateway) -> anyhow::Result<()> {
    let run = run_tool(gw, "gc", &["--json", "--gc-grace", "0"]).await?;
    ensure!(run.code == 0, "{run:?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout)?;
    ensure!(report["blocks_freed"] == 0, "blocks of uploads that never committed stayed in the store: {report}");
    let run = run_tool(gw, "fsck", &["--json"]).await?;
    ensure!(run.code == 0, "{run:?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout)?;
    ensure!(report["problems_remaining"] == 0, "{report}");
    Ok(())
}

backend_test!(an_upload_cut_off_leaves_nothing_stored, |gw| async move {
    const MIB: usize = 1 << 20;
    let (_, alice) = gw.user("alice", Some((50 * MIB) as u64)).await?;
    // 12 MiB (three whole blocks) go out, then the body waits until the test sees them
    // counted, and breaks off: the client went away halfway through a 40 MiB file.
    let (cut, when) = tokio::sync::oneshot::channel::<()>();
    let sent = futures::stream::iter((0..12).map(|i| Ok::<_, std::io::Error>(data::bytes(&format!("cut {i}"), MIB))));
    let broken = futures::stream::once(async move {
        let _ = when.await;
        Err(std::io::Error::other("the client went away"))
    });
    let body = reqwest::Body::wrap_stream(futures::StreamExt::chain(sent, broken));
    let upload = tokio::spawn({
        let alice = alice.clone();
        async move {
            alice
                .req(Method::PUT, &nimbus_e2e::http::files_url("/cut.bin"))
                .header("content-length", &(40 * MIB).to_string())
                .body(body)
                .send()
                .await
        }
    });
    eventually("the upload's first blocks counted", Duration::from_secs(60), || async {
        let m = me(&alice).await?;
        ensure!(m.usage.pending >= (8 * MIB) as u64, "{m:?}");
        Ok(())
    })
    .await?;
    let _ = cut.send(());
    let outcome = tokio::time::timeout(Duration::from_secs(60), upload).await.context("the cut upload hung")??;
    if let Ok(r) = &outcome {
        ensure!(r.status >= 400, "a body cut off halfway was stored: {r}");
    }
    eventually("the cut upload stops counting", Duration::from_secs(30), || async {
        let m = me(&alice).await?;
        ensure!(m.usage == usage(0, 0, 0, 0), "{m:?}");
        Ok(())
    })
    .await?;
    ensure!(alice.stat("/cut.bin").await?.status == 404, "a file appeared");
    nothing_left_behind(&gw).await?;
    // The same content sent whole is stored as any other.
    let whole = data::bytes("cut 0", MIB);
    alice.put_file("/cut.bin", whole.clone()).await?.check(201)?;
    ensure!(alice.get_file("/cut.bin").await?.body.as_ref() == whole.as_slice());
    Ok(())
});
