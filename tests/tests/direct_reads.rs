//! `--s3-direct-reads`: a client that checks blocks itself (`X-Nimbus-Accept-Redirect`) is
//! sent to read a block the gateway's cache does not hold straight from the store, on a URL
//! signed for that one object. Checked against MinIO and Garage: the URL reads exactly the
//! block, and nothing else (another object, another space, a different method are refused by
//! the store); the caller's scope is checked first (another user's block is a 404 with no URL);
//! a HEAD, a client that does not ask, and a block the cache holds are answered by the gateway
//! as before; the Rust client (the drive's and `nimbus get`'s path) reads through the redirect
//! with the gateway carrying none of the bytes. A local store refuses the flag at start.

use anyhow::{Context, ensure};
use nimbus_e2e::data::{bytes, hash_hex};
use nimbus_e2e::http::encode_path;
use nimbus_e2e::{Api, Gateway, GatewayOptions, backend_test, bins};
use nimbus_proto::wire::Manifest;
use reqwest::StatusCode;

const ACCEPT: &str = nimbus_proto::ACCEPT_REDIRECT_HEADER;

/// A client that shows redirects instead of following them.
fn raw() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?)
}

async fn block_get(api: &Api, hash: &str, accept: bool) -> anyhow::Result<reqwest::Response> {
    let mut rb = raw()?.get(format!("{}/api/v1/blocks/{hash}", api.base()));
    if let Some(t) = api.token() {
        rb = rb.bearer_auth(t);
    }
    if accept {
        rb = rb.header(ACCEPT, "1");
    }
    Ok(rb.send().await?)
}

async fn location(gw: &Gateway, api: &Api, hash: &str) -> anyhow::Result<String> {
    let r = block_get(api, hash, true).await?;
    ensure!(r.status() == StatusCode::TEMPORARY_REDIRECT, "asked for a redirect: {}", r.status());
    ensure!(r.headers().get("cache-control").is_some_and(|v| v == "no-store"), "{:?}", r.headers());
    let loc = r.headers().get("location").context("a 307 without Location")?.to_str()?.to_string();
    let store = match (gw.minio(), gw.garage()) {
        (Some(m), _) => m.endpoint(),
        (None, Some(g)) => g.endpoint(),
        _ => anyhow::bail!("a backend without an object store"),
    };
    ensure!(loc.starts_with(&format!("{store}/")), "{loc} is not on the store {store}");
    ensure!(loc.contains("X-Amz-Signature=") && loc.contains("X-Amz-Expires="), "not a presigned URL: {loc}");
    Ok(loc)
}

fn direct_reads() -> GatewayOptions {
    GatewayOptions::default().arg("--s3-direct-reads").arg("--cache-mem").arg("64MiB")
}

backend_test!(blocks_are_read_straight_from_minio, only = postgres_s3, opts = direct_reads(), |gw| async move {
    straight_from_the_store(gw).await
});

backend_test!(blocks_are_read_straight_from_garage, only = sqlite_garage, opts = direct_reads(), |gw| async move {
    straight_from_the_store(gw).await
});

async fn straight_from_the_store(gw: Gateway) -> anyhow::Result<()> {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    let bs = alice.block_size().await?;
    let src = bytes("direct-two", bs + 1000);
    alice.put_file("/d/two.bin", src.clone()).await?.check(201)?;
    let m: Manifest = alice.get(&format!("/api/v1/manifests/{}", encode_path("/d/two.bin"))).await?.ok(200)?;
    ensure!(m.blocks.len() == 2, "{m:?}");
    let (h0, h1) = (m.blocks[0].hash.clone(), m.blocks[1].hash.clone());
    ensure!(h0 == hash_hex(&src[..bs]) && h1 == hash_hex(&src[bs..]));
    bob.put_file("/mine.bin", bytes("direct-bob", 5000)).await?.check(201)?;
    let bobs: Manifest = bob.get(&format!("/api/v1/manifests/{}", encode_path("/mine.bin"))).await?.ok(200)?;
    let bob_hash = bobs.blocks[0].hash.clone();

    let read_before = gw.metric("nimbus_store_bytes_read_total").await?;
    let loc = location(&gw, &alice, &h0).await?;
    // The URL alone reads the block: no token goes to the store.
    let r = raw()?.get(&loc).send().await?;
    ensure!(r.status() == StatusCode::OK, "the store refused its own URL: {}", r.status());
    ensure!(r.bytes().await?.as_ref() == &src[..bs], "the URL read other bytes");
    ensure!(gw.metric("nimbus_store_bytes_read_total").await? == read_before, "the gateway read the block");
    ensure!(gw.metric("nimbus_block_redirects_total").await? >= 1.0);

    // The signature covers exactly that object and method.
    let other = loc.replacen(&h0, &h1, 1);
    ensure!(other != loc);
    let r = raw()?.get(&other).send().await?;
    ensure!(r.status() == StatusCode::FORBIDDEN, "another block on the same URL: {}", r.status());
    let loc_bob = loc.replacen(&h0, &bob_hash, 1);
    let r = raw()?.get(&loc_bob).send().await?;
    ensure!(r.status().is_client_error(), "bob's block on alice's URL: {}", r.status());
    let r = raw()?.put(&loc).body("overwritten").send().await?;
    ensure!(r.status() == StatusCode::FORBIDDEN, "a PUT on a read URL: {}", r.status());
    let r = raw()?.delete(&loc).send().await?;
    ensure!(r.status() == StatusCode::FORBIDDEN, "a DELETE on a read URL: {}", r.status());
    let r = alice.get_file("/d/two.bin").await?;
    ensure!(r.status == 200 && r.body.as_ref() == src.as_slice(), "the file changed");

    // Scope first: bob gets no URL for alice's block, nor does a stranger.
    let r = block_get(&bob, &h0, true).await?;
    ensure!(r.status() == StatusCode::NOT_FOUND && r.headers().get("location").is_none(), "{}", r.status());
    let r = block_get(&gw.api(), &h0, true).await?;
    ensure!(r.status() == StatusCode::UNAUTHORIZED && r.headers().get("location").is_none(), "{}", r.status());
    let r = block_get(&alice, &"0".repeat(64), true).await?;
    ensure!(r.status() == StatusCode::NOT_FOUND, "an unknown block: {}", r.status());

    // A client that does not ask, and a HEAD, are answered by the gateway.
    let r = block_get(&alice, &h1, false).await?;
    ensure!(r.status() == StatusCode::OK && r.bytes().await?.as_ref() == &src[bs..]);
    let r = raw()?.head(format!("{}/api/v1/blocks/{h0}", alice.base())).bearer_auth(alice.token().unwrap_or_default());
    let r = r.header(ACCEPT, "1").send().await?;
    ensure!(r.status() == StatusCode::OK, "HEAD: {}", r.status());
    // h1 is in the gateway's memory now: served from there, no trip to the store.
    let r = block_get(&alice, &h1, true).await?;
    ensure!(r.status() == StatusCode::OK && r.bytes().await?.as_ref() == &src[bs..], "a cached block");

    // The Rust client follows the redirect itself and checks nothing less.
    let client = nimbus_client::Client::new(nimbus_client::ClientOptions {
        base_url: alice.base().to_string(),
        token: alice.token().map(str::to_string),
        ..Default::default()
    })?;
    // A file the gateway never read: neither block is in its cache.
    let fresh = bytes("direct-fresh", bs + 10);
    alice.put_file("/d/fresh.bin", fresh.clone()).await?.check(201)?;
    let m: Manifest = alice.get(&format!("/api/v1/manifests/{}", encode_path("/d/fresh.bin"))).await?.ok(200)?;
    let redirects = gw.metric("nimbus_block_redirects_total").await?;
    let read_before = gw.metric("nimbus_store_bytes_read_total").await?;
    ensure!(client.get_block_checked(&m.blocks[0].hash, None).await?.as_ref() == &fresh[..bs]);
    ensure!(gw.metric("nimbus_block_redirects_total").await? == redirects + 1.0);
    let dir = tempfile::tempdir()?;
    let local = dir.path().join("fresh.bin");
    let path = nimbus_proto::RemotePath::parse("/d/fresh.bin")?;
    client.download_file(&path, &local, &|_| {}).await?;
    ensure!(std::fs::read(&local)? == fresh, "download through direct reads");
    ensure!(gw.metric("nimbus_block_redirects_total").await? == redirects + 3.0);
    ensure!(gw.metric("nimbus_store_bytes_read_total").await? == read_before, "the gateway carried the blocks");
    Ok(())
}

/// Blocks in a directory have no URL: the flag is refused at start with a message.
#[tokio::test]
async fn a_local_store_refuses_direct_reads() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = tokio::process::Command::new(bins::gateway_bin()?)
        .args(["serve", "--listen", "127.0.0.1:0", "--store", "local", "--s3-direct-reads", "--data-dir"])
        .arg(dir.path())
        .env_remove("NIMBUS_STORE")
        .env("NIMBUS_ADMIN_PASSWORD", nimbus_e2e::ADMIN_PASSWORD)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), out).await??;
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success(), "the gateway started: {err}");
    ensure!(err.contains("--s3-direct-reads needs --store s3"), "{err}");
    Ok(())
}
