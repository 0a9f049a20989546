//! `nimbus-gateway gc` and `nimbus-gateway fsck` run beside a live gateway on its database and
//! store: GC frees purged and never-committed blocks only after the grace period, never a block
//! a concurrent upload is about to commit; fsck finds deleted and corrupted objects, repairs
//! what it can, and the files heal when a client uploads the lost blocks again; `fsck --repair`
//! deletes nothing an upload in progress may still register, nor anything it could not read;
//! uploading a block again replaces a damaged copy in the store.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use nimbus_e2e::data::{bytes, hash_hex};
use nimbus_e2e::http::files_url;
use nimbus_e2e::ops::{block_object, run_tool, run_tool_with};
use nimbus_e2e::{Api, GatewayOptions, backend_test};

/// Deletes `path` and purges it from the trash, so its blocks become garbage.
async fn delete_and_purge(api: &Api, path: &str) -> anyhow::Result<()> {
    let r = api.delete(&files_url(path)).await?;
    r.check(204)?;
    let id = r.header("x-nimbus-trash-id").context("no X-Nimbus-Trash-Id")?;
    api.delete(&format!("/api/v1/trash/{id}")).await?.check(204)?;
    Ok(())
}

async fn content(api: &Api, path: &str) -> anyhow::Result<Vec<u8>> {
    Ok(api.get_file(path).await?.check(200)?.body.to_vec())
}

fn field(v: &serde_json::Value, name: &str) -> anyhow::Result<u64> {
    v.get(name).and_then(serde_json::Value::as_u64).with_context(|| format!("no `{name}` in {v}"))
}

backend_test!(gc_frees_purged_blocks_after_grace, |gw| async move {
    let (_, api) = gw.user("gcuser", None).await?;
    let keep = bytes("keep", 3000);
    let gone_a = bytes("gone-a", 5000);
    let gone_b = bytes("gone-b", 7000);
    api.put_file("/keep.bin", keep.clone()).await?.check(201)?;
    api.put_file("/gone/a.bin", gone_a.clone()).await?.check(201)?;
    api.put_file("/gone/b.bin", gone_b.clone()).await?.check(201)?;
    // An upload never committed.
    let stray = bytes("stray", 1234);
    api.put_block(&hash_hex(&stray), stray.clone()).await?.check(201)?;
    delete_and_purge(&api, "/gone/a.bin").await?;
    delete_and_purge(&api, "/gone/b.bin").await?;

    // Within the grace period nothing goes.
    let r = run_tool(&gw, "gc", &["--grace", "1h", "--json"]).await?;
    r.expect_code(0)?;
    let v = r.json()?;
    ensure!(field(&v, "blocks_freed")? == 0 && field(&v, "bytes_freed")? == 0, "freed within the grace period: {v}");
    let hashes = [hash_hex(&gone_a), hash_hex(&gone_b), hash_hex(&stray)];
    let missing: nimbus_proto::wire::MissingBlocksResponse =
        api.post_json("/api/v1/blocks/missing", &serde_json::json!({ "hashes": hashes })).await?.ok(200)?;
    ensure!(missing.missing.is_empty(), "blocks vanished before GC: {:?}", missing.missing);

    // The missing-check above touched them: a grace of a minute still keeps them.
    let v = run_tool(&gw, "gc", &["--grace", "1m", "--json"]).await?.expect_code(0)?.json()?;
    ensure!(field(&v, "blocks_freed")? == 0, "freed blocks touched a moment ago: {v}");

    // After the grace period (0 here) the purged and the stray blocks go, the kept one stays.
    let v = run_tool(&gw, "gc", &["--grace", "0", "--json"]).await?.expect_code(0)?.json()?;
    ensure!(field(&v, "blocks_freed")? == 3, "{v}");
    ensure!(field(&v, "bytes_freed")? == (5000 + 7000 + 1234), "{v}");
    let missing: nimbus_proto::wire::MissingBlocksResponse =
        api.post_json("/api/v1/blocks/missing", &serde_json::json!({ "hashes": hashes })).await?.ok(200)?;
    ensure!(missing.missing.len() == 3, "still registered after GC: {:?}", missing);
    ensure!(content(&api, "/keep.bin").await? == keep, "a referenced block was damaged");
    // The objects left the store too: a full fsck finds no stray object and no damage.
    let v = run_tool(&gw, "fsck", &["--json"]).await?.expect_code(0)?.json()?;
    ensure!(field(&v, "problems_remaining")? == 0, "{v}");
    // Human output names what it freed.
    let r = run_tool(&gw, "gc", &["--grace", "0"]).await?;
    r.expect_code(0)?;
    ensure!(r.stdout.contains("freed 0 block(s)"), "{}", r.stdout);
    // A bad grace period is refused before anything is touched.
    ensure!(run_tool(&gw, "gc", &["--grace", "soon"]).await?.code == 2, "a bad --grace was accepted");
    Ok(())
});

/// One writer: writes files (some content shared with other files and with purged ones, so
/// GC keeps finding the same blocks garbage), deletes and purges some, retries commits GC
/// made fail. Returns what each of its files must now contain.
async fn writer(api: Api, w: usize, rounds: usize, bs: usize) -> anyhow::Result<HashMap<String, Vec<u8>>> {
    let mut expect = HashMap::new();
    for i in 0..rounds {
        // Content from a small pool: the same blocks come and go.
        let seed = format!("pool-{}", (i + w) % 4);
        let data = bytes(&seed, 1000 + 10 * i);
        let path = format!("/w{w}/f{i}.bin");
        let mut done = false;
        for _attempt in 0..30 {
            let r = if i % 2 == 0 {
                api.put_file(&path, data.clone()).await?
            } else {
                let blocks = api.upload_blocks(&data, bs).await?;
                api.commit(&path, None, &blocks).await?
            };
            match r.status {
                200 | 201 => {
                    done = true;
                    break;
                }
                // GC took a block between the upload and the commit: a clean, retryable refusal.
                409 | 400 => r.check_error_any(r.status, &["conflict", "missing_blocks"]).map(|_| ())?,
                _ => bail!("{path}: unexpected answer {}: {}", r.status, r.text()),
            }
        }
        ensure!(done, "{path}: never committed in 30 attempts");
        expect.insert(path.clone(), data);
        if i % 3 == 2 {
            delete_and_purge(&api, &path).await?;
            expect.remove(&path);
        }
    }
    Ok(expect)
}

backend_test!(gc_races_uploads, opts = GatewayOptions::default(), |gw| async move {
    let (_, api) = gw.user("racer", None).await?;
    let bs = api.block_size().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let gw = Arc::new(gw);
    let freed_so_far = Arc::new(AtomicU64::new(0));
    let collector = {
        let (gw, stop, freed_so_far) = (gw.clone(), stop.clone(), freed_so_far.clone());
        tokio::spawn(async move {
            let mut runs = 0u32;
            let mut freed = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let v = run_tool(&gw, "gc", &["--grace", "0", "--json"]).await?.expect_code(0)?.json()?;
                freed += field(&v, "blocks_freed")?;
                freed_so_far.store(freed, Ordering::SeqCst);
                runs += 1;
            }
            anyhow::Ok((runs, freed))
        })
    };
    // Rounds of three writers until a GC run freed something during them (on a slow store or
    // a loaded machine one round may pass between two GC runs that find nothing); bounded.
    let mut expect = HashMap::new();
    for round in 0..4 {
        let writers: Vec<_> = (0..3).map(|w| tokio::spawn(writer(api.clone(), round * 3 + w, 12, bs))).collect();
        for w in writers {
            expect.extend(w.await??);
        }
        if freed_so_far.load(Ordering::SeqCst) > 0 {
            break;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let (runs, freed) = collector.await??;
    ensure!(runs >= 2, "GC ran only {runs} time(s) during the writes");
    ensure!(freed > 0, "GC never freed anything: the race was not exercised");

    let check = |api: Api, expect: HashMap<String, Vec<u8>>| async move {
        for (path, data) in &expect {
            let got = content(&api, path).await.with_context(|| format!("reading {path}"))?;
            if &got != data {
                bail!("{path}: {} bytes read back, {} written, or different content", got.len(), data.len());
            }
        }
        anyhow::Ok(())
    };
    check(api.clone(), expect.clone()).await?;
    // One more collection after the dust settles, then everything still reads and fsck agrees.
    run_tool(&gw, "gc", &["--grace", "0", "--json"]).await?.expect_code(0)?;
    check(api.clone(), expect).await?;
    let v = run_tool(&gw, "fsck", &["--json"]).await?.expect_code(0)?.json()?;
    ensure!(field(&v, "problems_remaining")? == 0, "{v}");
    Ok(())
});

backend_test!(fsck_finds_and_repairs_damage, |gw| async move {
    let (space, api) = gw.user("fsckuser", None).await?;
    let bs = api.block_size().await?;
    let files: Vec<(String, Vec<u8>)> =
        ["a", "b", "c"].iter().map(|n| (format!("/{n}.bin"), bytes(&format!("fsck-{n}"), 4000))).collect();
    for (p, d) in &files {
        api.put_file(p, d.clone()).await?.check(201)?;
    }
    let v = run_tool(&gw, "fsck", &["--json"]).await?.expect_code(0)?.json()?;
    ensure!(field(&v, "blocks_checked")? == 3 && field(&v, "problems_remaining")? == 0, "{v}");

    // Lose one object, corrupt another, behind the gateway's back.
    let (ha, hb) = (hash_hex(&files[0].1), hash_hex(&files[1].1));
    block_object(&gw, space, &ha)?.delete().await?;
    block_object(&gw, space, &hb)?.overwrite(b"bit rot happened here").await?;

    for args in [vec!["--json"], vec!["--json", "--sample", "3"]] {
        let r = run_tool(&gw, "fsck", &args).await?;
        r.expect_code(1)?;
        let v = r.json()?;
        let problems = v["problems"].as_array().context("problems")?;
        let kind_of = |h: &str| problems.iter().find(|p| p["hash"] == h).map(|p| p["kind"].clone());
        ensure!(kind_of(&ha) == Some("missing".into()), "deleted object not reported by {args:?}: {v}");
        ensure!(kind_of(&hb) == Some("corrupt".into()), "corrupted object not reported by {args:?}: {v}");
        ensure!(field(&v, "problems_remaining")? == 2, "{v}");
        ensure!(problems.iter().any(|p| p["files"][0] == "/a.bin"), "affected file not named: {v}");
    }
    let r = run_tool(&gw, "fsck", &[]).await?;
    ensure!(r.code == 1 && r.stdout.contains("missing") && r.stdout.contains("/b.bin"), "{}", r.stdout);

    // Repair drops what is lost; the files stay damaged (exit 1) until the data comes back.
    let r = run_tool(&gw, "fsck", &["--repair", "--json"]).await?;
    r.expect_code(1)?;
    let v = r.json()?;
    let damaged = v["damaged_files"].as_array().context("damaged_files")?;
    ensure!(damaged.len() == 2, "{v}");
    // A client that still has the data is now told to upload it, and the files heal.
    for (p, d) in &files[..2] {
        let missing: nimbus_proto::wire::MissingBlocksResponse =
            api.post_json("/api/v1/blocks/missing", &serde_json::json!({ "hashes": [hash_hex(d)] })).await?.ok(200)?;
        ensure!(missing.missing.len() == 1, "{p}: the lost block is not reported missing");
        api.upload_blocks(d, bs).await?;
    }
    for (p, d) in &files {
        ensure!(&content(&api, p).await? == d, "{p} did not heal");
    }
    let v = run_tool(&gw, "fsck", &["--json"]).await?.expect_code(0)?.json()?;
    ensure!(field(&v, "problems_remaining")? == 0, "{v}");

    // A stray object in the store (no registry row) is found and registered by --repair.
    let stray = bytes("fsck-stray", 999);
    let hs = hash_hex(&stray);
    block_object(&gw, space, &hs)?.overwrite(&stray).await?;
    let v = run_tool(&gw, "fsck", &["--json"]).await?.expect_code(1)?.json()?;
    ensure!(v["problems"][0]["kind"] == "orphan" && v["problems"][0]["hash"] == hs.as_str(), "{v}");
    run_tool(&gw, "fsck", &["--repair", "--json"]).await?.expect_code(0)?;
    let v = run_tool(&gw, "gc", &["--grace", "0", "--json"]).await?.expect_code(0)?.json()?;
    ensure!(field(&v, "blocks_freed")? == 1, "the re-registered stray was not collected: {v}");
    Ok(())
});

/// `path` read around the gateway's cache (`X-Nimbus-Cache: bypass`, admins only), so from the
/// store itself; None if the read fails (a damaged block fails before the headers or aborts
/// the body).
async fn from_store(api: &Api, path: &str) -> anyhow::Result<Option<Vec<u8>>> {
    Ok(match api.req(reqwest::Method::GET, &files_url(path)).header("x-nimbus-cache", "bypass").send().await {
        Ok(r) if r.status == 200 => Some(r.body.to_vec()),
        _ => None,
    })
}

backend_test!(reupload_replaces_damaged_blocks, |gw| async move {
    let api = gw.admin().await?;
    let me: nimbus_proto::wire::Me = api.get("/api/v1/me").await?.ok(200)?;
    let space = me.id;
    let bs = api.block_size().await?;
    let data = bytes("heal-me", 2 * bs + 5000);
    let blocks: Vec<&[u8]> = data.chunks(bs).collect();
    let hashes: Vec<String> = blocks.iter().map(|b| hash_hex(b)).collect();
    api.put_file("/heal.bin", data.clone()).await?.check(201)?;

    // Bit rot that keeps the size, and a lost object, behind the gateway's back.
    let mut rotten = blocks[0].to_vec();
    rotten[100] ^= 0x55;
    block_object(&gw, space, &hashes[0])?.overwrite(&rotten).await?;
    block_object(&gw, space, &hashes[2])?.delete().await?;
    ensure!(from_store(&api, "/heal.bin").await?.as_deref() != Some(&data[..]), "the damage does not show");

    // The same content uploaded again (under another name, through the streaming upload the
    // doors use): every block is one the space holds, and the damaged ones are replaced.
    api.put_file("/again.bin", data.clone()).await?.check(201)?;
    for (i, h) in hashes.iter().enumerate() {
        let stored = block_object(&gw, space, h)?.read().await?;
        ensure!(stored.as_deref() == Some(blocks[i]), "block {i}'s object was not replaced");
    }
    ensure!(from_store(&api, "/heal.bin").await?.as_deref() == Some(&data[..]), "/heal.bin did not heal");

    // The block protocol: a PUT of a block the space holds repairs it as well.
    block_object(&gw, space, &hashes[1])?.overwrite(b"short and wrong").await?;
    ensure!(from_store(&api, "/heal.bin").await?.is_none(), "the damage does not show");
    api.put_block(&hashes[1], blocks[1].to_vec()).await?.check_any(&[200, 201])?;
    ensure!(from_store(&api, "/heal.bin").await?.as_deref() == Some(&data[..]), "/heal.bin did not heal");
    ensure!(from_store(&api, "/again.bin").await?.as_deref() == Some(&data[..]));
    let v = run_tool(&gw, "fsck", &["--json"]).await?.expect_code(0)?.json()?;
    ensure!(field(&v, "problems_remaining")? == 0, "{v}");
    Ok(())
});

backend_test!(fsck_repair_spares_live_uploads, |gw| async move {
    let (space, api) = gw.user("live", None).await?;
    let bs = api.block_size().await?;
    let old = bytes("live-old", 3000);
    api.put_file("/old.bin", old.clone()).await?.check(201)?;

    // A block uploaded and not committed yet, as the drive leaves one between its PUT and
    // its commit.
    let pending = bytes("live-pending", 4000);
    api.put_block(&hash_hex(&pending), pending.clone()).await?.check(201)?;

    // A streaming upload in progress: four blocks in, the rest not arrived. The gateway
    // works on up to four blocks at a time while it reads the body: some are stored (pending),
    // others claimed with their objects being written.
    let streamed = bytes("live-streamed", 4 * bs + 1000);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(2);
    let body = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    let upload = {
        let api = api.clone();
        tokio::spawn(async move { api.put_file("/streamed.bin", reqwest::Body::wrap_stream(body)).await })
    };
    tx.send(Ok(streamed[..4 * bs + 10].to_vec())).await?;
    let first: Vec<String> = streamed[..4 * bs].chunks(bs).map(hash_hex).collect();
    nimbus_e2e::mount::eventually("a block of the streamed upload is stored", Duration::from_secs(60), || async {
        let m: nimbus_proto::wire::MissingBlocksResponse =
            api.post_json("/api/v1/blocks/missing", &serde_json::json!({ "hashes": first })).await?.ok(200)?;
        ensure!(m.missing.len() < first.len(), "{m:?}");
        Ok(())
    })
    .await?;

    // The paused upload holds no lock: the space's other writes go on.
    api.put_file("/during.bin", "written while an upload waits for its client").await?.check(201)?;

    // Objects no row names yet, younger than the grace period: one intact (what an upload
    // leaves between writing an object and registering it), one damaged.
    let stray = bytes("live-stray", 2000);
    block_object(&gw, space, &hash_hex(&stray))?.overwrite(&stray).await?;
    let bad_name = hash_hex(&bytes("live-bad", 2000));
    let bad = block_object(&gw, space, &bad_name)?;
    bad.overwrite(b"not what the name says").await?;

    // Exit 1: the damaged stray is reported, and left for now.
    let v = run_tool(&gw, "fsck", &["--repair", "--json"]).await?.expect_code(1)?.json()?;
    let problems = v["problems"].as_array().context("problems")?;
    ensure!(problems.len() == 2, "{v}");
    let of = |h: &str| problems.iter().find(|p| p["hash"] == h).cloned().unwrap_or_default();
    ensure!(of(&bad_name)["kind"] == "orphan" && of(&bad_name)["repaired"] == false, "{v}");
    ensure!(of(&hash_hex(&stray))["repaired"] == true, "the intact stray was not registered: {v}");
    ensure!(bad.read().await?.as_deref() == Some(&b"not what the name says"[..]), "a young stray object was deleted");

    // The uploads finish; everything reads back.
    tx.send(Ok(streamed[4 * bs + 10..].to_vec())).await?;
    drop(tx);
    upload.await??.check(201)?;
    let r = api
        .commit("/pending.bin", None, &[nimbus_proto::wire::BlockRef { hash: hash_hex(&pending), size: 4000 }])
        .await?;
    r.check(201)?;
    for (p, d) in [("/old.bin", &old), ("/pending.bin", &pending), ("/streamed.bin", &streamed)] {
        let got = content(&api, p).await?;
        ensure!(&got == d, "{p} does not read back: {} bytes, {} written", got.len(), d.len());
    }

    // Once older than the grace period (here 0), the damaged stray goes, and nothing else.
    let v = run_tool(&gw, "fsck", &["--repair", "--json", "--gc-grace", "0"]).await?.expect_code(0)?.json()?;
    ensure!(v["problems"].as_array().is_some_and(|p| p.len() == 1), "{v}");
    ensure!(bad.read().await?.is_none(), "the damaged stray object is still there");
    for (p, d) in [("/old.bin", &old), ("/pending.bin", &pending), ("/streamed.bin", &streamed)] {
        let got = content(&api, p).await?;
        ensure!(&got == d, "{p} does not read back: {} bytes, {} written", got.len(), d.len());
    }
    run_tool(&gw, "fsck", &["--json"]).await?.expect_code(0)?;
    Ok(())
});

backend_test!(
    fsck_repair_leaves_what_it_cannot_read,
    only = postgres_s3,
    opts = GatewayOptions::default(),
    |gw| async move {
        let (space, api) = gw.user("unread", None).await?;
        let bs = api.block_size().await?;
        let file = bytes("unread-file", 2 * bs);
        api.put_file("/big.bin", file.clone()).await?.check(201)?;
        // A whole block in the store that no row names (as after restoring a backup).
        let stray = bytes("unread-stray", bs);
        let stray_hash = hash_hex(&stray);
        block_object(&gw, space, &stray_hash)?.overwrite(&stray).await?;

        // The drive under MinIO loses the data of the stray and of one of the file's blocks
        // (their metadata stays, so MinIO lists them and fails to read them).
        let minio = gw.minio().context("no MinIO")?;
        let bucket = gw.flag("--s3-bucket").context("no --s3-bucket")?;
        let objects = minio.data_dir().join(&bucket).join("spaces").join(space.to_string()).join("blocks");
        let mut moved = Vec::new();
        for h in [stray_hash.clone(), hash_hex(&file[..bs])] {
            for entry in std::fs::read_dir(objects.join(&h))? {
                let part = entry?.path().join("part.1");
                if part.is_file() {
                    let away = part.with_extension("away");
                    std::fs::rename(&part, &away)?;
                    moved.push((part, away));
                }
            }
        }
        ensure!(moved.len() == 2, "MinIO's data files not found under {}: {moved:?}", objects.display());
        let r = run_tool(&gw, "fsck", &["--repair", "--json", "--gc-grace", "0"]).await?;
        let v = r.expect_code(1)?.json()?;
        let problems = v["problems"].as_array().context("problems")?;
        ensure!(problems.iter().all(|p| p["repaired"] == false), "something unreadable was repaired: {v}");
        ensure!(
            problems.iter().any(|p| p["hash"] == stray_hash.as_str())
                && problems.iter().all(|p| p["detail"].as_str().is_some_and(|d| d.contains("cannot read"))),
            "an unreadable object was called lost or damaged: {v}"
        );
        for (part, away) in &moved {
            std::fs::rename(away, part)?;
        }

        // A store nobody answers at all: everything is unreadable, nothing changes.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let gone = format!("http://{closed}");
        let r =
            run_tool_with(&gw, "fsck", &[("--s3-endpoint", &gone)], &["--repair", "--json", "--gc-grace", "0"]).await?;
        let v = r.expect_code(1)?.json()?;
        let problems = v["problems"].as_array().context("problems")?;
        ensure!(
            !problems.is_empty() && problems.iter().all(|p| p["kind"] == "unreadable" && p["repaired"] == false),
            "{v}"
        );

        // Nothing changed: the stray is still there (found again, intact), the file reads back.
        let v = run_tool(&gw, "fsck", &["--json"]).await?.expect_code(1)?.json()?;
        ensure!(v["problems"].as_array().is_some_and(|p| p.len() == 1), "{v}");
        ensure!(v["problems"][0]["kind"] == "orphan" && v["problems"][0]["hash"] == stray_hash.as_str(), "{v}");
        ensure!(content(&api, "/big.bin").await? == file);
        run_tool(&gw, "fsck", &["--repair", "--json"]).await?.expect_code(0)?;
        Ok(())
    }
);
