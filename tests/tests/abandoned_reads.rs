//! An abandoned download never wedges the read path (issue 17, part 2).
//!
//! What a video player seeking, or `curl | head`, does: start downloads of large cold files and
//! drop them after a few KiB, while their blocks are still being fetched. Each of those fetches
//! must end (or finish) on its own, handing back its store-fetch slot and leaving nothing
//! registered, so the next cold read is answered. Reproduced black-box with a slow store: a
//! [`NetProxy`] between the gateway and MinIO delays every relayed chunk. The same for the
//! drive's local cache (`nimbus_mount::core::blocks`), with the proxy between the drive and a
//! gateway that stops answering.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use futures::StreamExt;
use nimbus_e2e::http::{Api, files_url, hash_body};
use nimbus_e2e::minio::{self, Minio};
use nimbus_e2e::netproxy::{Mode, NetProxy};
use nimbus_e2e::{Backend, Gateway, GatewayOptions, backend_test, data, run_on};
use nimbus_mount::core::blocks::{BlockCache, parse_hash};
use reqwest::Method;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
/// The gateway's block size (checked against `/api/v1/info`).
const BLOCK: usize = 4 * MIB;

/// `host:port` of an `http://host:port` URL.
fn socket_addr(url: &str) -> anyhow::Result<SocketAddr> {
    let rest = url.strip_prefix("http://").with_context(|| format!("not a plain http URL: {url}"))?;
    rest.trim_end_matches('/').parse().with_context(|| format!("no address in {url}"))
}

/// The value of one series in `/metrics` text.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let (k, v) = l.rsplit_once(' ')?;
        if k == series { v.parse().ok() } else { None }
    })
}

/// Waits until `/metrics` shows no store fetch registered any more (fetches of abandoned
/// readers are cancelled, SSD handovers end with their write).
async fn wait_no_fetches_in_flight(gw: &Gateway) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = gw.api().get("/metrics").await?;
        r.check(200)?;
        let n = metric(&r.text(), "nimbus_cache_fetches_in_flight")
            .context("no nimbus_cache_fetches_in_flight gauge in /metrics")?;
        if n == 0.0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{n} store fetches still registered 30 s after every reader left or finished");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The gateway's cache behind a slow object store
// ---------------------------------------------------------------------------------------------

/// Large cold files, one abandoned download each: every download finds its blocks cold (a
/// block an earlier download brought in would be a hit, and abandon nothing).
const FILES: usize = 36;
const FILE_SIZE: usize = 16 * MIB;
/// Downloads run this many at a time.
const WAVE: usize = 12;
/// Every chunk (at most 64 KiB) relayed between the gateway and MinIO waits this long: a 4 MiB
/// block takes about a second, so downloads are dropped while blocks are still on their way.
const STORE_DELAY: Duration = Duration::from_millis(15);
/// An abandoned download that has not even answered by then is dropped as it is.
const ABANDON_AFTER: Duration = Duration::from_secs(20);
/// The read after the abandoned ones needs 3 blocks (a few seconds at this store speed). A wedged
/// read path never answers: before the fix, every store-fetch slot was held by a dropped
/// reader's fetch for good.
const COLD_READ_WITHIN: Duration = Duration::from_secs(90);

/// Starts `GET path` from byte `start` on its own connection, reads a few KiB of the body and
/// drops the response. Returns how many bytes it read (0: no answer within [`ABANDON_AFTER`]).
async fn abandon(api: Api, path: String, start: usize) -> anyhow::Result<usize> {
    let req = api.req(Method::GET, &files_url(&path)).header("range", &format!("bytes={start}-"));
    let read = async {
        let (what, resp) = req.send_streaming().await?;
        ensure!(resp.status() == 206, "{what}: {}", resp.status());
        let mut body = resp.bytes_stream();
        let mut got = 0;
        while got < 8 * KIB {
            match body.next().await {
                Some(chunk) => got += chunk.with_context(|| format!("{what}: body broke"))?.len(),
                None => bail!("{what}: the body ended after {got} bytes"),
            }
        }
        Ok(got)
        // Dropping the response here closes the connection with most of the body unread.
    };
    match tokio::time::timeout(ABANDON_AFTER, read).await {
        Ok(r) => r,
        Err(_) => Ok(0),
    }
}

/// Uploads the files at full speed, empties the cache, slows the store down, abandons
/// `FILES` downloads mid-body, then: a cold read of another file completes intact,
/// no fetch stays registered, and every abandoned file reads back intact.
async fn abandoned_downloads_body(gw: Gateway, proxy: Arc<NetProxy>) -> anyhow::Result<()> {
    let admin = gw.admin().await?;
    let (_, api) = gw.user("viewer", None).await?;
    ensure!(api.block_size().await? == BLOCK, "the block size is not {BLOCK}");
    let names: Vec<String> = (0..FILES).map(|i| format!("/movie-{i:02}.bin")).collect();
    for name in &names {
        api.put_file(name, data::bytes(name, FILE_SIZE)).await?.entry(201)?;
    }
    let target = data::bytes("/target.bin", 2 * BLOCK + 12_345);
    api.put_file("/target.bin", target.clone()).await?.entry(201)?;
    admin.delete("/api/v1/admin/cache").await?.check(204)?;

    proxy.set_mode(Mode::Delay(STORE_DELAY));
    let mut answered = 0;
    for names in names.chunks(WAVE) {
        let mut downloads = tokio::task::JoinSet::new();
        for name in names {
            downloads.spawn(abandon(api.fresh_connection()?, name.clone(), 1000));
        }
        while let Some(r) = downloads.join_next().await {
            if r?? > 0 {
                answered += 1;
            }
        }
    }
    println!("{answered} of {} abandoned downloads answered before they were dropped", FILES);

    let t = Instant::now();
    let read = async {
        let (what, resp) = api.req(Method::GET, &files_url("/target.bin")).send_streaming().await?;
        ensure!(resp.status() == 200, "{what}: {}", resp.status());
        hash_body(&what, resp).await
    };
    let (n, hash) = tokio::time::timeout(COLD_READ_WITHIN, read).await.with_context(|| {
        format!("a cold read after abandoned downloads got no complete answer within {COLD_READ_WITHIN:?}: the read path is wedged")
    })??;
    ensure!(n == target.len() as u64 && hash == blake3::hash(&target), "the cold read came back different");
    println!("cold read after the abandoned downloads: {:.1} s", t.elapsed().as_secs_f64());
    wait_no_fetches_in_flight(&gw).await?;

    // Nothing the abandoned downloads left behind (a half fetch, a failure) is served later.
    proxy.set_mode(Mode::Forward);
    for name in &names {
        let (what, resp) = api.req(Method::GET, &files_url(name)).send_streaming().await?;
        ensure!(resp.status() == 200, "{what}: {}", resp.status());
        let (n, hash) = hash_body(&what, resp).await?;
        ensure!(
            n == FILE_SIZE as u64 && hash == blake3::hash(&data::bytes(name, FILE_SIZE)),
            "{name} came back different"
        );
    }
    wait_no_fetches_in_flight(&gw).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_downloads_never_wedge_cold_reads() -> anyhow::Result<()> {
    if !Backend::PostgresS3.should_run() {
        return Ok(());
    }
    let bin = minio::configured_bin().context("NIMBUS_TEST_MINIO_BIN is not set")?;
    let minio = Minio::start(&bin).await?;
    let proxy = Arc::new(NetProxy::start(socket_addr(&minio.endpoint())?).await?);
    let opts = GatewayOptions::default().s3_store(format!("http://{}", proxy.addr())).timeout(Duration::from_secs(600));
    let p = proxy.clone();
    let r = run_on(Backend::PostgresS3, opts, move |gw| abandoned_downloads_body(gw, p)).await;
    if r.is_err() {
        eprintln!("--- MinIO log (tail) ---\n{}", minio.log_tail(30));
    }
    r
}

// ---------------------------------------------------------------------------------------------
// The drive's local cache behind a gateway that stops answering
// ---------------------------------------------------------------------------------------------

/// Blocks whose reads are abandoned: more than the drive's fetch slots (4 with 64 MiB of
/// `--cache-mem`).
const DRIVE_ABANDONED: usize = 12;

backend_test!(
    abandoned_drive_reads_never_wedge_the_local_cache,
    only = sqlite_local,
    opts = GatewayOptions::default(),
    |gw| async move {
        let (_, api) = gw.user("driver", None).await?;
        let content = data::bytes("drive blocks", (DRIVE_ABANDONED + 1) * BLOCK);
        api.put_file("/blocks.bin", content.clone()).await?.entry(201)?;
        let blocks = data::split_blocks(&content, BLOCK);

        let proxy = NetProxy::start(socket_addr(&gw.url)?).await?;
        let client = nimbus_client::Client::new(nimbus_client::ClientOptions {
            base_url: format!("http://{}", proxy.addr()),
            token: api.token().map(str::to_string),
            ..Default::default()
        })?;
        let dir = tempfile::tempdir()?;
        let cache = Arc::new(
            BlockCache::open(Arc::new(client), Some(&dir.path().join("blocks")), 1 << 30, 64 << 20, BLOCK as u64)
                .map_err(anyhow::Error::msg)?,
        );
        ensure!(cache.budget().fetches < DRIVE_ABANDONED, "{:?}", cache.budget());

        // The gateway goes silent; every read waits, and its reader gives up (an interrupted
        // read(2), a closed file). Sequential (whole-block) and random readers both.
        proxy.set_mode(Mode::Stall);
        for (i, (hex, _)) in blocks.iter().take(DRIVE_ABANDONED).enumerate() {
            let hash = parse_hash(hex)?;
            let whole = i % 2 == 0;
            let read = cache.read(None, hash, 0, 4096, whole);
            ensure!(
                tokio::time::timeout(Duration::from_millis(300), read).await.is_err(),
                "a read through a silent gateway answered"
            );
        }

        // Back again: a block nobody asked for yet is fetched, and so is one whose reader gave up.
        proxy.set_mode(Mode::Forward);
        for (hex, bytes) in [&blocks[DRIVE_ABANDONED], &blocks[0]] {
            let read = cache.read(None, parse_hash(hex)?, 0, bytes.len(), true);
            let got = tokio::time::timeout(Duration::from_secs(60), read)
                .await
                .context("a drive read after abandoned ones got no answer within 60 s: the local cache is wedged")??;
            ensure!(got.as_ref() == *bytes, "block {hex} came back different");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while cache.fetches_in_flight() > 0 {
            ensure!(Instant::now() < deadline, "{} fetches still registered", cache.fetches_in_flight());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
);
