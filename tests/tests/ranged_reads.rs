//! Reads of parts of blocks fetch only the 16 KiB pieces that hold them, verified against the
//! block's outboard (`<block key>.tags` in the store, written with the block): random ranges
//! of a multi-block file read with `X-Nimbus-Cache: bypass` and through the cache come back
//! byte-identical without a whole-block fetch; a piece rotten in the store is refused (and
//! only that piece: the rest of the block still reads); a block without an outboard (stored
//! before outboards existed) is read whole once and gets its outboard back; deleting the file
//! and collecting its blocks removes the outboards with them. A bypassed download of a block
//! of several pieces streams from the store, each piece passed on only once it matched.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use nimbus_e2e::data::{bytes, hash_hex};
use nimbus_e2e::http::files_url;
use nimbus_e2e::ops::{block_object, outboard_object, run_tool};
use nimbus_e2e::{Api, Gateway, Resp, backend_test};
use rand::Rng;

const PIECE: usize = 16 * 1024;

/// Whole-block and ranged fetches from the store so far.
async fn fetches(gw: &Gateway) -> anyhow::Result<(f64, f64)> {
    Ok((gw.metric("nimbus_store_fetch_seconds_count").await?, gw.metric("nimbus_store_range_fetches_total").await?))
}

async fn read(api: &Api, path: &str, start: usize, end: usize, bypass: bool) -> anyhow::Result<Resp> {
    let mut req =
        api.req(reqwest::Method::GET, &files_url(path)).header("range", &format!("bytes={start}-{}", end - 1));
    if bypass {
        req = req.header("x-nimbus-cache", "bypass");
    }
    req.send().await
}

async fn check(api: &Api, path: &str, src: &[u8], start: usize, end: usize, bypass: bool) -> anyhow::Result<()> {
    let r = read(api, path, start, end, bypass).await?;
    ensure!(r.status == 206, "{start}..{end}: status {} ({})", r.status, r.text());
    ensure!(r.body.as_ref() == &src[start..end], "{start}..{end} (bypass {bypass}): wrong bytes");
    Ok(())
}

/// Polls until `cond` holds (background writes), failing after 10 s.
async fn until<F, Fut>(what: &str, mut cond: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond().await? {
        ensure!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

backend_test!(random_ranges_fetch_only_their_pieces, |gw| async move {
    let mut gw = gw;
    let api = gw.admin().await?;
    let me: nimbus_proto::wire::Me = api.get("/api/v1/me").await?.ok(200)?;
    let space = me.id;
    let bs = api.block_size().await?;
    // Two whole blocks and an odd tail of several pieces.
    let data = bytes("ranged-reads", 2 * bs + 5 * PIECE + 321);
    let hashes: Vec<String> = data.chunks(bs).map(hash_hex).collect();
    api.put_file("/big.bin", data.clone()).await?.check(201)?;

    // Every block of more than one piece has its outboard beside it: 32 bytes per piece.
    for (h, block) in hashes.iter().zip(data.chunks(bs)) {
        let tags = outboard_object(&gw, space, h)?.read().await?.with_context(|| format!("no outboard for {h}"))?;
        ensure!(tags.len() == block.len().div_ceil(PIECE) * 32, "outboard of {h}: {} bytes", tags.len());
    }

    // Random 4 KiB ranges (none at a block's start), bypassing the cache: pieces only.
    let (whole0, ranged0) = fetches(&gw).await?;
    let mut rng = rand::rng();
    let n = 24;
    for i in 0..n {
        let block = i % hashes.len();
        let block_len = data.chunks(bs).nth(block).map_or(0, <[u8]>::len);
        let at = rng.random_range(1..block_len - 4096);
        let start = block * bs + at;
        check(&api, "/big.bin", &data, start, start + 4096, true).await?;
    }
    // The block's last byte, and a range across two blocks (read as two parts).
    check(&api, "/big.bin", &data, data.len() - 1, data.len(), true).await?;
    check(&api, "/big.bin", &data, bs - 100, bs + 100, true).await?;
    let (whole, ranged) = fetches(&gw).await?;
    ensure!(whole == whole0, "a random read fetched a whole block ({whole0} → {whole})");
    ensure!(ranged - ranged0 == f64::from(n as u32) + 3.0, "ranged fetches {ranged0} → {ranged}");

    // Through the cache: a first random read of a block is a ranged miss, admitting nothing.
    api_purge(&api).await?;
    let at = bs + 7 * PIECE + 99;
    check(&api, "/big.bin", &data, at, at + 4096, false).await?;
    let (whole2, ranged2) = fetches(&gw).await?;
    ensure!(whole2 == whole && ranged2 == ranged + 1.0, "a cold random read: {whole}/{ranged} → {whole2}/{ranged2}");
    // A read from the block's start begins a sequential pass: the whole block is loaded.
    check(&api, "/big.bin", &data, bs, bs + 4096, false).await?;
    ensure!(fetches(&gw).await?.0 == whole2 + 1.0, "a sequential read did not load its block");

    // Bit rot in one piece of the first block, behind the gateway's back (same length).
    let obj = block_object(&gw, space, &hashes[0])?;
    let mut rotten = obj.read().await?.context("the block object is gone")?;
    rotten[10 * PIECE + 5] ^= 0x55;
    obj.overwrite(&rotten).await?;
    let corrupt0 = gw.metric("nimbus_store_corrupt_blocks_total").await?;
    let r = read(&api, "/big.bin", 10 * PIECE + 100, 10 * PIECE + 200, true).await?;
    ensure!(r.status >= 500, "a rotten piece was served: {}", r.status);
    ensure!(
        gw.metric("nimbus_store_corrupt_blocks_total").await? == corrupt0 + 1.0,
        "the corrupt piece was not counted"
    );
    // Verified streaming: the block's other pieces still read, verified.
    check(&api, "/big.bin", &data, 20 * PIECE + 1, 20 * PIECE + 4097, true).await?;
    obj.overwrite(&data[..bs]).await?;

    // A block stored without an outboard (before they existed): read whole once, its
    // outboard written again, then pieces only.
    let ob = outboard_object(&gw, space, &hashes[1])?;
    let want = ob.read().await?.context("no outboard")?;
    ob.delete().await?;
    // A new gateway process: the outboard is not in its memory either.
    gw.restart().await?;
    let api = gw.admin().await?;
    let (whole3, _) = fetches(&gw).await?;
    check(&api, "/big.bin", &data, bs + 3 * PIECE, bs + 3 * PIECE + 4096, true).await?;
    ensure!(fetches(&gw).await?.0 == whole3 + 1.0, "a block without an outboard was not read whole");
    until("the outboard is written again", || {
        let ob = &ob;
        let want = &want;
        async move { Ok(ob.read().await?.as_ref() == Some(want)) }
    })
    .await?;
    // A damaged outboard is refused (the read still answers, from the whole block) and replaced.
    let mut bad = want.clone();
    bad[64] ^= 1;
    ob.overwrite(&bad).await?;
    gw.restart().await?;
    let api = gw.admin().await?;
    check(&api, "/big.bin", &data, bs + 9 * PIECE, bs + 9 * PIECE + 4096, true).await?;
    until("the damaged outboard is replaced", || {
        let ob = &ob;
        let want = &want;
        async move { Ok(ob.read().await?.as_ref() == Some(want)) }
    })
    .await?;

    // Deleting the file and collecting its blocks removes the outboards too; fsck finds
    // nothing left over.
    let r = api.delete(&files_url("/big.bin")).await?;
    r.check(204)?;
    let id = r.header("x-nimbus-trash-id").context("no X-Nimbus-Trash-Id")?;
    api.delete(&format!("/api/v1/trash/{id}")).await?.check(204)?;
    run_tool(&gw, "gc", &["--grace", "0", "--json"]).await?.expect_code(0)?;
    for h in &hashes {
        ensure!(outboard_object(&gw, space, h)?.read().await?.is_none(), "the outboard of {h} outlived its block");
    }
    let v = run_tool(&gw, "fsck", &["--json"]).await?.expect_code(0)?.json()?;
    ensure!(v["problems_remaining"] == 0, "{v}");
    Ok(())
});

backend_test!(bypassed_downloads_stream_checked_pieces, |gw| async move {
    let api = gw.admin().await?;
    let me: nimbus_proto::wire::Me = api.get("/api/v1/me").await?.ok(200)?;
    // One block of several pieces, the last one short: the 1 MiB case of the cache benchmark.
    let data = bytes("streamed-bypass", 9 * PIECE + 321);
    api.put_file("/one.bin", data.clone()).await?.check(201)?;
    let bypass = |api: &Api| api.req(reqwest::Method::GET, &files_url("/one.bin")).header("x-nimbus-cache", "bypass");
    // Once to fetch the outboard, then again: each a ranged fetch of the whole block, never a
    // whole-block fetch.
    let (whole0, ranged0) = fetches(&gw).await?;
    for _ in 0..2 {
        let r = bypass(&api).send().await?;
        ensure!(r.status == 200, "status {}", r.status);
        ensure!(r.body.as_ref() == &data[..], "wrong bytes");
    }
    let (whole, ranged) = fetches(&gw).await?;
    ensure!(whole == whole0 && ranged == ranged0 + 2.0, "fetches {whole0}/{ranged0} → {whole}/{ranged}");
    check(&api, "/one.bin", &data, 2 * PIECE + 5, 7 * PIECE, true).await?;

    // A piece rotten in the store: its bytes never leave the gateway. The first piece bad:
    // an error status; a later one: the download is cut off before it.
    let obj = block_object(&gw, me.id, &hash_hex(&data))?;
    let corrupt0 = gw.metric("nimbus_store_corrupt_blocks_total").await?;
    for (n, bad_at) in [(1.0, 100), (2.0, 6 * PIECE + 7)] {
        let mut rotten = data.to_vec();
        rotten[bad_at] ^= 0x21;
        obj.overwrite(&rotten).await?;
        // An error here is a response that started and was aborted: the client sees a broken body.
        if let Ok(r) = bypass(&api).send().await {
            ensure!(
                r.status >= 500 || (r.body.len() <= bad_at / PIECE * PIECE && data.starts_with(&r.body)),
                "rotten byte {bad_at}: status {}, {} bytes served",
                r.status,
                r.body.len()
            );
        }
        ensure!(
            gw.metric("nimbus_store_corrupt_blocks_total").await? == corrupt0 + n,
            "rotten byte {bad_at} was not counted"
        );
    }
    obj.overwrite(&data).await?;
    let r = bypass(&api).send().await?;
    ensure!(r.status == 200 && r.body.as_ref() == &data[..], "after repair: {}", r.status);
    Ok(())
});

backend_test!(fsck_removes_stray_outboards, |gw| async move {
    let api = gw.admin().await?;
    let me: nimbus_proto::wire::Me = api.get("/api/v1/me").await?.ok(200)?;
    let data = bytes("stray-outboard", 3 * PIECE);
    // An outboard whose block is neither registered nor stored (a crash between the deletes).
    let stray = outboard_object(&gw, me.id, &hash_hex(&data))?;
    stray.overwrite(&[7u8; 96]).await?;
    let v = run_tool(&gw, "fsck", &["--json"]).await?.expect_code(1)?.json()?;
    ensure!(v["problems"][0]["kind"] == "stray_outboard", "{v}");
    // Younger than the grace period: left alone; older: deleted.
    run_tool(&gw, "fsck", &["--repair", "--json"]).await?;
    ensure!(stray.read().await?.is_some(), "a young stray outboard was deleted");
    let v = run_tool(&gw, "fsck", &["--repair", "--gc-grace", "0", "--json"]).await?.json()?;
    ensure!(v["problems"][0]["repaired"] == true, "{v}");
    ensure!(stray.read().await?.is_none(), "the stray outboard is still there");
    ensure!(run_tool(&gw, "fsck", &["--json"]).await?.expect_code(0)?.json()?["problems_remaining"] == 0);
    // An outboard beside its block is the block's: never a problem.
    api.put_file("/small.bin", data).await?.check(201)?;
    ensure!(run_tool(&gw, "fsck", &["--json"]).await?.expect_code(0)?.json()?["problems_remaining"] == 0);
    Ok(())
});

async fn api_purge(api: &Api) -> anyhow::Result<()> {
    tokio::time::sleep(Duration::from_millis(400)).await;
    api.delete("/api/v1/admin/cache").await?.check(204)?;
    Ok(())
}
