//! `nimbus-gateway gc` and `nimbus-gateway fsck` run beside a live gateway on its database and
//! store: GC frees purged and never-committed blocks only after the grace period, never a block
//! a concurrent upload is about to commit; fsck finds deleted and corrupted objects, repairs
//! what it can, and the files heal when a client uploads the lost blocks again.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail, ensure};
use nimbus_e2e::data::{bytes, hash_hex};
use nimbus_e2e::http::files_url;
use nimbus_e2e::ops::{block_object, run_tool};
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
    let collector = {
        let (gw, stop) = (gw.clone(), stop.clone());
        tokio::spawn(async move {
            let mut runs = 0u32;
            let mut freed = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let v = run_tool(&gw, "gc", &["--grace", "0", "--json"]).await?.expect_code(0)?.json()?;
                freed += field(&v, "blocks_freed")?;
                runs += 1;
            }
            anyhow::Ok((runs, freed))
        })
    };
    let writers: Vec<_> = (0..3).map(|w| tokio::spawn(writer(api.clone(), w, 12, bs))).collect();
    let mut expect = HashMap::new();
    for w in writers {
        expect.extend(w.await??);
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
