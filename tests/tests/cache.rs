//! The gateway's block cache (memory and SSD tiers in front of the store) seen from outside:
//! hits and misses at block edges, cached reads byte-identical to bypassed ones and to the
//! source, the admin-only bypass header, damaged/deleted SSD entries, a full or unwritable
//! cache dir, a cache that survives a restart, the SSD size bound, coalesced cold reads,
//! authorization and deletion never answered from the cache, per-space keys, one gateway per
//! cache dir, a cache dir that cannot be used at all, and purging while entries are written.
//!
//! Restarts go through [`Gateway::restart`] (same data dir, database and store), so they run
//! on every backend.
//!
//! Stats come from `GET /api/v1/admin/cache`; SSD entries are the files
//! `<cache dir>/blocks/<space>/<first 2 hex>/<hash>` (header, then the block at
//! [`data_offset`]), written in the background after a miss.
//!
//! The full-filesystem test mounts a 6 MiB tmpfs: it needs root (it is skipped otherwise).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use nimbus_e2e::gateway::tail_file;
use nimbus_e2e::http::{Api, files_url};
use nimbus_e2e::{ADMIN_PASSWORD, Backend, Gateway, GatewayOptions, Resp, backend_test, bins, data};
use reqwest::Method;
use serde::Deserialize;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
/// The unit a read of part of a block fetches and verifies.
const PIECE: usize = 16 * KIB;
/// The gateway's block size (checked against `/api/v1/info`).
const BLOCK: usize = 4 * MIB;
const CACHE_HEADER: &str = "x-nimbus-cache";
/// SSD admission runs in the background after a miss; what to wait before looking at files.
const SETTLE: Duration = Duration::from_millis(400);
/// Bound on tests that start their gateway themselves.
const TEST_TIMEOUT: Duration = Duration::from_secs(300);

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// `GET /api/v1/admin/cache`; every documented field must be there.
#[derive(Debug, Clone, Deserialize)]
#[allow(dead_code)] // every field is parsed so a missing one fails; not all are asserted on
struct Stats {
    mem_capacity_bytes: u64,
    mem_used_bytes: u64,
    mem_entries: u64,
    disk_enabled: bool,
    disk_dir: Option<String>,
    disk_capacity_bytes: u64,
    disk_used_bytes: u64,
    disk_entries: u64,
    hits_mem: u64,
    hits_disk: u64,
    misses: u64,
    bypassed: u64,
    hit_ratio: f64,
    bytes_served_mem: u64,
    bytes_served_disk: u64,
    bytes_fetched_store: u64,
    store_fetches: u64,
    admission_rejects: u64,
    evictions_mem: u64,
    evictions_disk: u64,
    corrupt_entries: u64,
    write_errors: u64,
}

impl Stats {
    fn hits(&self) -> u64 {
        self.hits_mem + self.hits_disk
    }
}

/// What changed between two stats snapshots (`after - before`; wraps if a counter went back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Delta {
    misses: u64,
    hits: u64,
    hits_disk: u64,
    store_fetches: u64,
    bypassed: u64,
    corrupt: u64,
}

fn delta(before: &Stats, after: &Stats) -> Delta {
    Delta {
        misses: after.misses.wrapping_sub(before.misses),
        hits: after.hits().wrapping_sub(before.hits()),
        hits_disk: after.hits_disk.wrapping_sub(before.hits_disk),
        store_fetches: after.store_fetches.wrapping_sub(before.store_fetches),
        bypassed: after.bypassed.wrapping_sub(before.bypassed),
        corrupt: after.corrupt_entries.wrapping_sub(before.corrupt_entries),
    }
}

async fn stats(admin: &Api) -> anyhow::Result<Stats> {
    admin.get("/api/v1/admin/cache").await?.ok(200)
}

/// `DELETE /api/v1/admin/cache` once background SSD writes have settled; afterwards both tiers
/// are empty. (Purging while entries are being written is `purge_during_admission`'s business.)
async fn purge(admin: &Api) -> anyhow::Result<()> {
    tokio::time::sleep(SETTLE).await;
    admin.delete("/api/v1/admin/cache").await?.check(204)?;
    let s = stats(admin).await?;
    ensure!(
        s.mem_entries == 0 && s.mem_used_bytes == 0 && s.disk_entries == 0 && s.disk_used_bytes == 0,
        "the cache is not empty after DELETE /api/v1/admin/cache: {s:?}"
    );
    Ok(())
}

/// `GET /api/v1/files/{path}` with an optional `Range` and optionally `X-Nimbus-Cache: bypass`.
async fn read(api: &Api, path: &str, range: Option<&str>, bypass: bool) -> anyhow::Result<Resp> {
    let mut req = api.req(Method::GET, &files_url(path));
    if let Some(r) = range {
        req = req.header("range", r);
    }
    if bypass {
        req = req.header(CACHE_HEADER, "bypass");
    }
    req.send().await
}

/// Where two byte strings first differ, for messages (bodies are too big to print).
fn first_difference(got: &[u8], want: &[u8]) -> String {
    match got.iter().zip(want).position(|(a, b)| a != b) {
        Some(i) => format!("first difference at byte {i} (got {:#04x}, want {:#04x})", got[i], want[i]),
        None => format!("lengths differ: got {} bytes, want {}", got.len(), want.len()),
    }
}

/// Inclusive byte positions of a range read; `None` is the whole file.
type Span = Option<(u64, u64)>;
/// A `Range` header (none: the whole file) and the bytes it selects.
type Case = (Option<String>, Span);
/// The span the `i`-th of many concurrent readers asks for.
type SpanOf = fn(usize) -> Span;

/// Checks a read of `src` for `span` (inclusive byte positions, `None` = the whole file):
/// status, `Content-Range`, `Content-Length` and every byte.
fn check_read(r: &Resp, src: &[u8], span: Span) -> anyhow::Result<()> {
    let (want, status) = match span {
        None => (src, 200),
        Some((s, e)) => (&src[s as usize..=e as usize], 206),
    };
    ensure!(r.status == status, "expected {status}, got {} for {}", r.status, r.what);
    if let Some((s, e)) = span {
        let cr = format!("bytes {s}-{e}/{}", src.len());
        ensure!(
            r.header("content-range").as_deref() == Some(cr.as_str()),
            "{}: Content-Range {:?}, want {cr:?}",
            r.what,
            r.headers
        );
    } else {
        ensure!(r.header("content-range").is_none(), "{}: a 200 with Content-Range: {:?}", r.what, r.headers);
    }
    let cl = want.len().to_string();
    ensure!(
        r.header("content-length").as_deref() == Some(cl.as_str()),
        "{}: Content-Length {:?}, want {cl}",
        r.what,
        r.headers
    );
    ensure!(r.body.as_ref() == want, "{}: wrong bytes: {}", r.what, first_difference(&r.body, want));
    Ok(())
}

/// Blocks of `file_len` bytes that bytes `span` touch.
fn touched(span: Span, file_len: usize) -> u64 {
    match span {
        None => file_len.div_ceil(BLOCK) as u64,
        Some((s, e)) => e / BLOCK as u64 - s / BLOCK as u64 + 1,
    }
}

/// Blocks of `file_len` bytes that a cold read of `span` loads whole (and admits): the ones it
/// reads from their start, or more than a quarter of (counted in 16 KiB pieces), or that have
/// one piece at most. Of the others it fetches only the pieces that hold the range, admitting
/// nothing (docs/ARCHITECTURE.md, "Path of a read").
fn loaded_whole(span: Span, file_len: usize) -> u64 {
    let (s, e) = span.map_or((0, file_len - 1), |(s, e)| (s as usize, e as usize));
    (s / BLOCK..=e / BLOCK)
        .filter(|b| {
            let block_len = BLOCK.min(file_len - b * BLOCK);
            let from = s.max(b * BLOCK) - b * BLOCK;
            let to = (e + 1).min(b * BLOCK + block_len) - b * BLOCK;
            let covered = (to.div_ceil(PIECE) * PIECE).min(block_len) - from / PIECE * PIECE;
            from == 0 || block_len <= PIECE || covered > block_len / 4
        })
        .count() as u64
}

/// The default cache dir of a harness gateway.
fn cache_dir(gw: &Gateway) -> PathBuf {
    gw.data_dir().join("cache")
}

/// The SSD entry of block `hash` in `space`.
fn entry_path(cache: &Path, space: i64, hash: &str) -> PathBuf {
    cache.join("blocks").join(space.to_string()).join(&hash[..2]).join(hash)
}

/// Where an entry's data starts (blockcache/src/disk.rs, format version 2): a 56-byte fixed
/// header, a 32-byte tag per 16 KiB chunk, padded to a multiple of 4096.
fn data_offset(len: usize) -> usize {
    (56 + len.div_ceil(16 * KIB) * 32).div_ceil(4096) * 4096
}

fn entry_size(len: usize) -> u64 {
    (data_offset(len) + len) as u64
}

/// Waits until the SSD entry at `path` holds exactly `block` (written and renamed), then a
/// little more so the gateway has marked it ready.
async fn wait_entry(path: &Path, block: &[u8]) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(raw) = std::fs::read(path)
            && raw.len() as u64 == entry_size(block.len())
            && raw.starts_with(b"NMBC")
            && raw[data_offset(block.len())..] == *block
        {
            tokio::time::sleep(Duration::from_millis(150)).await;
            return Ok(());
        }
        if Instant::now() > deadline {
            let what = match std::fs::metadata(path) {
                Ok(m) => format!("{} bytes, want {}", m.len(), entry_size(block.len())),
                Err(e) => e.to_string(),
            };
            bail!("no intact SSD entry at {} within 20 s ({what})", path.display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Regular files under `dir` (recursively): their count and total size.
fn tree_size(dir: &Path) -> (u64, u64) {
    let Ok(rd) = std::fs::read_dir(dir) else { return (0, 0) };
    let mut out = (0, 0);
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            let (n, b) = tree_size(&e.path());
            out = (out.0 + n, out.1 + b);
        } else if ft.is_file() {
            out = (out.0 + 1, out.1 + e.metadata().map(|m| m.len()).unwrap_or(0));
        }
    }
    out
}

/// `/metrics` (open on loopback).
async fn metrics_text(gw: &Gateway) -> anyhow::Result<String> {
    let r = gw.api().get("/metrics").await?;
    r.check(200)?;
    Ok(r.text())
}

/// The value of one series, e.g. `nimbus_cache_hits_total{tier="mem"}`.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let (k, v) = l.rsplit_once(' ')?;
        if k == series { v.parse().ok() } else { None }
    })
}

/// Defines one test per backend for bodies that must do something before their gateway starts
/// (`$f(backend)` starts it); the same names as [`backend_test!`].
macro_rules! each_backend {
    ($name:ident, $f:path) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite_local() -> anyhow::Result<()> {
                bounded(Backend::SqliteLocal, $f).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres_s3() -> anyhow::Result<()> {
                bounded(Backend::PostgresS3, $f).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite_garage() -> anyhow::Result<()> {
                bounded(Backend::SqliteGarage, $f).await
            }
        }
    };
}

async fn bounded<F, Fut>(backend: Backend, f: F) -> anyhow::Result<()>
where
    F: FnOnce(Backend) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    if !backend.should_run() {
        return Ok(());
    }
    match tokio::time::timeout(TEST_TIMEOUT, f(backend)).await {
        Ok(r) => r.with_context(|| format!("on backend {backend}")),
        Err(_) => bail!("on backend {backend}: the test did not finish within {TEST_TIMEOUT:?}"),
    }
}

/// Runs `body` on `gw`, printing the gateway's output if it fails.
async fn logged<Fut>(gw: &Gateway, body: Fut) -> anyhow::Result<()>
where
    Fut: Future<Output = anyhow::Result<()>>,
{
    let r = body.await;
    if r.is_err() {
        gw.logs().print_tail("test failed");
    }
    r
}

// ---------------------------------------------------------------------------------------------
// 1. Hits and misses, ranges at block edges
// ---------------------------------------------------------------------------------------------

backend_test!(hits_and_misses_at_block_edges, |gw| async move {
    let admin = gw.admin().await?;
    ensure!(admin.block_size().await? == BLOCK, "these tests assume 4 MiB blocks");
    let (_, user) = gw.user("carol", None).await?;
    let len = 9 * MIB;
    let src = data::bytes("cache edges", len);
    user.put_file("/edges.bin", src.clone()).await?.entry(201)?;

    let (b, last) = (BLOCK as u64, len as u64 - 1);
    let cases: Vec<Case> = vec![
        (None, None),
        (Some("bytes=0-0".into()), Some((0, 0))),
        (Some(format!("bytes={last}-{last}")), Some((last, last))),
        (Some("bytes=-1".into()), Some((last, last))),
        (Some("bytes=4194303-4194305".into()), Some((b - 1, b + 1))),
        (Some("bytes=4194303-4194303".into()), Some((b - 1, b - 1))),
        (Some("bytes=4194304-4194304".into()), Some((b, b))),
        (Some("bytes=4194305-4194305".into()), Some((b + 1, b + 1))),
        (Some("bytes=0-4194303".into()), Some((0, b - 1))),
        (Some("bytes=4194304-8388607".into()), Some((b, 2 * b - 1))),
        (Some("bytes=8388607-8388609".into()), Some((2 * b - 1, 2 * b + 1))),
        (Some("bytes=8388608-".into()), Some((2 * b, last))),
        (Some("bytes=4194300-8388620".into()), Some((b - 4, 2 * b + 12))),
    ];
    for (range, span) in &cases {
        let n = touched(*span, len);
        let whole = loaded_whole(*span, len);
        purge(&admin).await?;
        let s0 = stats(&admin).await?;
        let cold = read(&user, "/edges.bin", range.as_deref(), false).await?;
        check_read(&cold, &src, *span).with_context(|| format!("cold read, Range {range:?}"))?;
        let s1 = stats(&admin).await?;
        let d = delta(&s0, &s1);
        ensure!(
            d.misses == n && d.hits == 0 && d.store_fetches == n,
            "cold read, Range {range:?}: expected {n} misses, {n} store fetches and no hits, got {d:?}"
        );

        let warm = read(&user, "/edges.bin", range.as_deref(), false).await?;
        check_read(&warm, &src, *span).with_context(|| format!("warm read, Range {range:?}"))?;
        for h in ["etag", "last-modified", "content-range", "content-length", "accept-ranges"] {
            ensure!(
                cold.header(h) == warm.header(h),
                "Range {range:?}: {h} cold {:?} vs warm {:?}",
                cold.headers,
                warm.headers
            );
        }
        // Blocks loaded whole are hits now; of the others only pieces were read, again now.
        let s2 = stats(&admin).await?;
        let d = delta(&s1, &s2);
        ensure!(
            d.hits == whole && d.misses == n - whole && d.store_fetches == n - whole,
            "warm read, Range {range:?}: expected {whole} hits and {} ranged misses, got {d:?}",
            n - whole
        );
    }

    // The counters agree with /metrics.
    let s = stats(&admin).await?;
    ensure!(s.hit_ratio > 0.0 && s.hit_ratio < 1.0, "hit_ratio {} after as many hits as misses", s.hit_ratio);
    ensure!(s.bytes_fetched_store >= len as u64, "bytes_fetched_store {}", s.bytes_fetched_store);
    let m = metrics_text(&gw).await?;
    for (series, want) in
        [("nimbus_cache_hits_total{tier=\"mem\"}", s.hits_mem), ("nimbus_cache_misses_total", s.misses)]
    {
        let got = metric(&m, series).with_context(|| format!("no {series} in /metrics"))?;
        ensure!(got == want as f64, "{series} = {got}, the admin stats say {want}");
    }
    // Store fetches are whole blocks and ranges of pieces.
    let whole = metric(&m, "nimbus_store_fetch_seconds_count").context("no whole-block fetches in /metrics")?;
    let ranged = metric(&m, "nimbus_store_range_fetches_total").context("no ranged fetches in /metrics")?;
    ensure!(
        whole + ranged == s.store_fetches as f64,
        "{whole} + {ranged} store fetches, the admin stats say {}",
        s.store_fetches
    );
    ensure!(metric(&m, "nimbus_cache_size_bytes{tier=\"mem\"}").is_some(), "no memory tier size in /metrics");
    Ok(())
});

// ---------------------------------------------------------------------------------------------
// 2. Cached, bypassed and source bytes are identical
// ---------------------------------------------------------------------------------------------

backend_test!(cached_and_bypassed_reads_are_identical, |gw| async move {
    let admin = gw.admin().await?;
    let len = 9 * MIB + 12_345;
    let src = data::bytes("cache differential", len);
    admin.put_file("/diff.bin", src.clone()).await?.entry(201)?;
    let last = len as u64 - 1;
    let b = BLOCK as u64;
    let cases: Vec<Case> = vec![
        (None, None),
        (Some("bytes=0-0".into()), Some((0, 0))),
        (Some("bytes=4194303-4194305".into()), Some((b - 1, b + 1))),
        (Some("bytes=8388607-8388609".into()), Some((2 * b - 1, 2 * b + 1))),
        (Some("bytes=-100".into()), Some((last - 99, last))),
        (Some("bytes=5000000-".into()), Some((5_000_000, last))),
        (Some("bytes=100-9000000".into()), Some((100, 9_000_000))),
        (Some(format!("bytes={last}-{last}")), Some((last, last))),
    ];
    let headers = ["etag", "content-range", "content-length", "last-modified", "accept-ranges", "content-type"];
    for (range, span) in &cases {
        let n = touched(*span, len);
        read(&admin, "/diff.bin", range.as_deref(), false).await?;
        let cached = read(&admin, "/diff.bin", range.as_deref(), false).await?;
        let s0 = stats(&admin).await?;
        let bypassed = read(&admin, "/diff.bin", range.as_deref(), true).await?;
        let s1 = stats(&admin).await?;
        check_read(&cached, &src, *span).with_context(|| format!("cached read, Range {range:?}"))?;
        check_read(&bypassed, &src, *span).with_context(|| format!("bypassed read, Range {range:?}"))?;
        ensure!(cached.status == bypassed.status, "Range {range:?}: {cached} vs {bypassed}");
        for h in headers {
            ensure!(
                cached.header(h) == bypassed.header(h),
                "Range {range:?}: {h} differs: cached {:?}, bypassed {:?}",
                cached.header(h),
                bypassed.header(h)
            );
        }
        let d = delta(&s0, &s1);
        ensure!(
            d.bypassed == n && d.store_fetches == n && d.hits == 0 && d.misses == 0,
            "a bypassed read of {n} blocks (Range {range:?}) must go to the store {n} times and not count as hit or miss: {d:?}"
        );
    }

    // Errors and conditionals answer the same with and without the cache.
    for (name, value) in [("range", "bytes=99999999-"), ("if-none-match", "*")] {
        let mut a = admin.req(Method::GET, &files_url("/diff.bin")).header(name, value);
        let mut z = admin.req(Method::GET, &files_url("/diff.bin")).header(name, value);
        z = z.header(CACHE_HEADER, "bypass");
        a = a.header(CACHE_HEADER, "normal");
        let (a, z) = (a.send().await?, z.send().await?);
        ensure!(a.status == z.status && a.body == z.body, "{name}: {value}: cached {a} vs bypassed {z}");
        for h in ["content-range", "etag"] {
            ensure!(a.header(h) == z.header(h), "{name}: {value}: {h} {:?} vs {:?}", a.headers, z.headers);
        }
    }

    // The block endpoint: same bytes, same headers.
    for (hash, bytes) in data::split_blocks(&src, BLOCK) {
        let url = format!("/api/v1/blocks/{hash}");
        admin.get(&url).await?.check(200)?;
        let cached = admin.get(&url).await?;
        let bypassed = admin.req(Method::GET, &url).header(CACHE_HEADER, "bypass").send().await?;
        for r in [&cached, &bypassed] {
            r.check(200)?;
            ensure!(r.body.as_ref() == bytes, "{}: {}", r.what, first_difference(&r.body, bytes));
        }
        for h in ["etag", "content-length", "cache-control", "content-type"] {
            ensure!(
                cached.header(h) == bypassed.header(h),
                "{url}: {h} {:?} vs {:?}",
                cached.headers,
                bypassed.headers
            );
        }
    }

    // A bypassed read admits nothing.
    purge(&admin).await?;
    check_read(&read(&admin, "/diff.bin", None, true).await?, &src, None)?;
    tokio::time::sleep(SETTLE).await;
    let s = stats(&admin).await?;
    ensure!(s.mem_entries == 0 && s.disk_entries == 0, "a bypassed read filled the cache: {s:?}");
    let (files, _) = tree_size(&cache_dir(&gw).join("blocks"));
    ensure!(files == 0, "a bypassed read wrote {files} SSD entries");
    let s0 = stats(&admin).await?;
    check_read(&read(&admin, "/diff.bin", None, false).await?, &src, None)?;
    let d = delta(&s0, &stats(&admin).await?);
    ensure!(d.misses == 3 && d.hits == 0, "the first normal read after a bypassed one: {d:?}");

    // Only `bypass` and `normal` are understood.
    read(&admin, "/diff.bin", Some("bytes=0-0"), false).await?.check(206)?;
    let r = admin.req(Method::GET, &files_url("/diff.bin")).header(CACHE_HEADER, "sideways").send().await?;
    r.check_error(400, "bad_request")?;
    Ok(())
});

// ---------------------------------------------------------------------------------------------
// 3. The bypass header is for administrators only, and its refusal tells nothing
// ---------------------------------------------------------------------------------------------

backend_test!(bypass_is_refused_to_users, |gw| async move {
    let admin = gw.admin().await?;
    let (_, dave) = gw.user("dave", None).await?;
    let (_, erin) = gw.user("erin", None).await?;
    let mine = data::bytes("bypass dave", 100 * KIB);
    let hers = data::bytes("bypass erin", 100 * KIB);
    dave.put_file("/mine.bin", mine.clone()).await?.entry(201)?;
    erin.put_file("/hers.bin", hers.clone()).await?.entry(201)?;
    let s0 = stats(&admin).await?;

    let probes = [
        files_url("/mine.bin"),
        files_url("/nope.bin"),
        files_url("/hers.bin"),
        format!("/api/v1/blocks/{}", data::hash_hex(&mine)),
        format!("/api/v1/blocks/{}", data::hash_hex(&hers)),
        format!("/api/v1/blocks/{}", data::hash_hex(b"nobody has this")),
    ];
    let mut first: Option<Resp> = None;
    for url in &probes {
        for range in [None, Some("bytes=0-9")] {
            let mut req = dave.req(Method::GET, url).header(CACHE_HEADER, "bypass");
            if let Some(r) = range {
                req = req.header("range", r);
            }
            let r = req.send().await?;
            r.check_error(403, "forbidden")?;
            for h in ["etag", "content-range", "last-modified", "accept-ranges"] {
                ensure!(r.header(h).is_none(), "a refused bypass sent {h}: {:?} ({r})", r.headers);
            }
            match &first {
                None => first = Some(r),
                Some(f) => ensure!(
                    f.body == r.body && f.header("content-type") == r.header("content-type"),
                    "refusals differ, which tells what exists: {f} vs {r}"
                ),
            }
        }
        let h = dave.req(Method::HEAD, url).header(CACHE_HEADER, "bypass").send().await?;
        h.check(403)?;
        ensure!(h.header("etag").is_none() && h.header("last-modified").is_none(), "HEAD {url}: {:?}", h.headers);
    }
    // Spellings of the header value do not get around it.
    for v in ["BYPASS", " Bypass ", "bypass "] {
        let r = dave.req(Method::GET, &files_url("/mine.bin")).header(CACHE_HEADER, v).send().await?;
        ensure!(!(200..300).contains(&r.status), "`{CACHE_HEADER}: {v}` from a user was served: {r}");
    }
    let s1 = stats(&admin).await?;
    let d = delta(&s0, &s1);
    ensure!(
        d.bypassed == 0 && d.store_fetches == 0 && d.misses == 0 && d.hits == 0,
        "refused bypass attempts reached the cache or the store: {d:?}"
    );
    // Without the header dave reads as usual.
    check_read(&read(&dave, "/mine.bin", None, false).await?, &mine, None)?;
    Ok(())
});

// ---------------------------------------------------------------------------------------------
// 4. Damaged SSD entries (memory tier off): never served, refetched, counted
// ---------------------------------------------------------------------------------------------

backend_test!(
    damaged_ssd_entries_are_refetched,
    opts = GatewayOptions::default().arg("--cache-mem").arg("0"),
    |gw| async move {
        let admin = gw.admin().await?;
        let (uid, user) = gw.user("frank", None).await?;
        let len = 5 * MIB;
        let src = data::bytes("cache damage", len);
        user.put_file("/d.bin", src.clone()).await?.entry(201)?;
        let blocks = data::split_blocks(&src, BLOCK);
        let (b0, b1) = (blocks[0].1, blocks[1].1);
        let cache = cache_dir(&gw);
        let (p0, p1) = (entry_path(&cache, uid, &blocks[0].0), entry_path(&cache, uid, &blocks[1].0));

        let s = stats(&admin).await?;
        ensure!(s.mem_capacity_bytes == 0, "--cache-mem 0: {s:?}");
        ensure!(s.disk_enabled && s.disk_dir.as_deref() == Some(&*cache.display().to_string()), "SSD tier: {s:?}");
        purge(&admin).await?;
        check_read(&read(&user, "/d.bin", None, false).await?, &src, None)?;
        wait_entry(&p0, b0).await?;
        wait_entry(&p1, b1).await?;
        let s0 = stats(&admin).await?;
        check_read(&read(&user, "/d.bin", None, false).await?, &src, None)?;
        let d = delta(&s0, &stats(&admin).await?);
        ensure!(d.hits_disk == 2 && d.store_fetches == 0 && d.misses == 0, "warm read from the SSD tier: {d:?}");

        let off = data_offset(BLOCK);
        let other_entry = p1.clone();
        // (what is done to block 0's entry, the range read next, whether it counts as corrupt)
        type Damage = Box<dyn Fn(&Path) -> std::io::Result<()>>;
        let damages: Vec<(&str, Damage, Span, bool)> = vec![
            (
                "a flipped byte in the data",
                Box::new(move |p| {
                    let mut raw = std::fs::read(p)?;
                    raw[off + 3 * MIB + 7] ^= 0x40;
                    std::fs::write(p, raw)
                }),
                Some((0, 3 * MIB as u64 + 100)),
                true,
            ),
            (
                "the last byte flipped",
                Box::new(move |p| {
                    let mut raw = std::fs::read(p)?;
                    let i = raw.len() - 1;
                    raw[i] ^= 1;
                    std::fs::write(p, raw)
                }),
                None,
                true,
            ),
            (
                "the data cut short",
                Box::new(|p| std::fs::OpenOptions::new().write(true).open(p)?.set_len(entry_size(BLOCK) - 1000)),
                Some((0, 0)),
                true,
            ),
            (
                "cut inside the header",
                Box::new(|p| std::fs::OpenOptions::new().write(true).open(p)?.set_len(20)),
                // Reads from the block's start: a miss then loads (and re-admits) the block
                // whole, where a small part elsewhere would fetch only its pieces.
                Some((0, 4_194_303)),
                true,
            ),
            (
                "an empty file",
                Box::new(|p| std::fs::OpenOptions::new().write(true).open(p)?.set_len(0)),
                Some((0, 20)),
                true,
            ),
            (
                "a damaged magic",
                Box::new(|p| {
                    let mut raw = std::fs::read(p)?;
                    raw[0] ^= 0xff;
                    std::fs::write(p, raw)
                }),
                None,
                true,
            ),
            (
                "a chunk tag flipped",
                Box::new(|p| {
                    let mut raw = std::fs::read(p)?;
                    raw[56] ^= 0x01;
                    std::fs::write(p, raw)
                }),
                Some((0, 99)),
                true,
            ),
            (
                "another block's entry under this name",
                Box::new(move |p| std::fs::copy(&other_entry, p).map(|_| ())),
                Some((0, 99)),
                true,
            ),
            ("the entry deleted", Box::new(|p| std::fs::remove_file(p)), None, false),
        ];
        for (what, damage, span, corrupt) in &damages {
            damage(&p0).with_context(|| format!("damaging {} ({what})", p0.display()))?;
            let range = span.map(|(s, e)| format!("bytes={s}-{e}"));
            let s0 = stats(&admin).await?;
            let r = read(&user, "/d.bin", range.as_deref(), false).await?;
            check_read(&r, &src, *span).with_context(|| format!("the read after {what}"))?;
            let d = delta(&s0, &stats(&admin).await?);
            let want_blocks = touched(*span, len);
            ensure!(
                d.corrupt == u64::from(*corrupt) && d.store_fetches == 1 && d.misses == 1 && d.hits == want_blocks - 1,
                "after {what}: expected corrupt_entries +{}, block 0 refetched once, got {d:?}",
                u64::from(*corrupt)
            );
            // Re-admitted intact, then served from the SSD again.
            wait_entry(&p0, b0).await.with_context(|| format!("re-admission after {what}"))?;
            let s0 = stats(&admin).await?;
            check_read(&read(&user, "/d.bin", range.as_deref(), false).await?, &src, *span)?;
            let d = delta(&s0, &stats(&admin).await?);
            ensure!(d.store_fetches == 0 && d.hits_disk == want_blocks, "after {what} and re-admission: {d:?}");
        }

        // The whole entry tree deleted under the running gateway.
        std::fs::remove_dir_all(cache.join("blocks"))?;
        let s0 = stats(&admin).await?;
        check_read(&read(&user, "/d.bin", None, false).await?, &src, None)?;
        let d = delta(&s0, &stats(&admin).await?);
        ensure!(d.store_fetches == 2 && d.corrupt == 0, "after deleting blocks/: {d:?}");
        wait_entry(&p0, b0).await?;
        wait_entry(&p1, b1).await?;

        let s = stats(&admin).await?;
        let corrupt = damages.iter().filter(|d| d.3).count() as u64;
        ensure!(s.corrupt_entries == corrupt, "corrupt_entries {} after {corrupt} corruptions", s.corrupt_entries);
        let m = metrics_text(&gw).await?;
        let got = metric(&m, "nimbus_cache_corrupt_total").context("no nimbus_cache_corrupt_total in /metrics")?;
        ensure!(got == corrupt as f64, "nimbus_cache_corrupt_total = {got}, want {corrupt}");
        ensure!(
            metric(&m, "nimbus_cache_hits_total{tier=\"disk\"}").is_some_and(|v| v >= 1.0),
            "no SSD hits in /metrics"
        );
        Ok(())
    }
);

// ---------------------------------------------------------------------------------------------
// 5. A full cache filesystem, and a cache dir that cannot be written
// ---------------------------------------------------------------------------------------------

/// A tmpfs mounted for one test, unmounted when dropped (also when the test fails).
struct Tmpfs {
    dir: PathBuf,
    _parent: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` (and a message) when not root: mounting needs it.
    fn mount(size_mib: u64) -> anyhow::Result<Option<Tmpfs>> {
        let status = std::fs::read_to_string("/proc/self/status")?;
        let root = status.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
        if !root {
            eprintln!("skipping: mounting a tmpfs needs root");
            return Ok(None);
        }
        let parent = tempfile::Builder::new().prefix("nimbus-e2e-tmpfs-").tempdir()?;
        let dir = parent.path().join("cache");
        std::fs::create_dir(&dir)?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m,mode=0755"), "tmpfs"])
            .arg(&dir)
            .output()
            .context("cannot run mount")?;
        ensure!(out.status.success(), "mount -t tmpfs {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
        Ok(Some(Tmpfs { dir, _parent: parent }))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // The gateway holding files there may take a moment to die.
        for _ in 0..50 {
            let ok = std::process::Command::new("umount").arg(&self.dir).output().is_ok_and(|o| o.status.success());
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let lazy = std::process::Command::new("umount").arg("-l").arg(&self.dir).status();
        if !lazy.is_ok_and(|s| s.success()) {
            eprintln!("WARNING: could not unmount the tmpfs at {}", self.dir.display());
        }
    }
}

async fn full_cache_filesystem(backend: Backend) -> anyhow::Result<()> {
    const FS_MIB: u64 = 6;
    let Some(fs) = Tmpfs::mount(FS_MIB)? else { return Ok(()) };
    let opts = GatewayOptions::default()
        .arg("--cache-dir")
        .arg(fs.dir.display().to_string())
        .arg("--cache-size")
        .arg("64MiB")
        .arg("--cache-mem")
        .arg("0");
    let gw = Gateway::start(backend, &opts).await?;
    let r = logged(&gw, full_cache_filesystem_body(&gw, &fs.dir, FS_MIB << 20)).await;
    drop(gw);
    drop(fs);
    r
}

async fn full_cache_filesystem_body(gw: &Gateway, cache: &Path, fs_bytes: u64) -> anyhow::Result<()> {
    let admin = gw.admin().await?;
    let (uid, user) = gw.user("hank", None).await?;
    let files: Vec<(String, Vec<u8>)> =
        (0..10).map(|i| (format!("/f{i}.bin"), data::bytes(&format!("cache full fs {i}"), 2 * MIB))).collect();
    for (path, bytes) in &files {
        user.put_file(path, bytes.clone()).await?.entry(201)?;
    }
    purge(&admin).await?;
    // 20 MiB of distinct blocks into a 6 MiB filesystem under a 64 MiB bound.
    for (path, bytes) in &files {
        check_read(&read(&user, path, None, false).await?, bytes, None)?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(SETTLE).await;
    let s = stats(&admin).await?;
    ensure!(s.write_errors > 0, "10 entries of 2 MiB cannot all fit in {fs_bytes} bytes, yet no write error: {s:?}");
    ensure!(
        s.disk_used_bytes <= fs_bytes,
        "the index claims {} bytes on a {fs_bytes}-byte filesystem",
        s.disk_used_bytes
    );
    ensure!(s.disk_entries >= 1, "not even one entry fit: {s:?}");
    let (n, bytes) = tree_size(&cache.join("blocks"));
    ensure!(n == s.disk_entries, "{n} entry files, the index says {}", s.disk_entries);
    ensure!(bytes == s.disk_used_bytes, "{bytes} bytes in entry files, the index says {}", s.disk_used_bytes);
    let (tmp_files, _) = tree_size(&cache.join("tmp"));
    ensure!(tmp_files == 0, "{tmp_files} partial files left in tmp/ after failed writes");

    // Everything still reads correctly; what was admitted is served from the SSD.
    let s0 = stats(&admin).await?;
    for (path, bytes) in &files {
        check_read(&read(&user, path, None, false).await?, bytes, None)?;
    }
    let d = delta(&s0, &stats(&admin).await?);
    ensure!(d.hits_disk == s.disk_entries, "second pass: {d:?}, {} entries were admitted", s.disk_entries);
    ensure!(d.hits_disk + d.misses == 10, "second pass: {d:?}");

    // Room again after a purge: the next miss is admitted.
    purge(&admin).await?;
    check_read(&read(&user, &files[9].0, None, false).await?, &files[9].1, None)?;
    wait_entry(&entry_path(cache, uid, &data::hash_hex(&files[9].1)), &files[9].1).await?;
    Ok(())
}

each_backend!(cache_dir_on_a_full_filesystem, full_cache_filesystem);

backend_test!(
    unwritable_cache_dir_still_serves,
    opts = GatewayOptions::default().arg("--cache-mem").arg("0"),
    |gw| async move {
        let admin = gw.admin().await?;
        let (uid, user) = gw.user("ivy", None).await?;
        let files: Vec<(String, Vec<u8>)> =
            (0..3).map(|i| (format!("/u{i}.bin"), data::bytes(&format!("cache unwritable {i}"), MIB + i))).collect();
        for (path, bytes) in &files {
            user.put_file(path, bytes.clone()).await?.entry(201)?;
        }
        purge(&admin).await?;
        let cache = cache_dir(&gw);
        // Entries are written to tmp/ and renamed: a file there makes every write fail.
        std::fs::remove_dir_all(cache.join("tmp"))?;
        std::fs::write(cache.join("tmp"), b"not a directory")?;
        let s0 = stats(&admin).await?;
        for _ in 0..2 {
            for (path, bytes) in &files {
                check_read(&read(&user, path, None, false).await?, bytes, None)?;
            }
            tokio::time::sleep(SETTLE).await;
        }
        let s = stats(&admin).await?;
        let d = delta(&s0, &s);
        ensure!(s.write_errors >= 1, "no write error counted: {s:?}");
        ensure!(s.disk_entries == 0 && s.disk_used_bytes == 0, "failed writes left index entries: {s:?}");
        ensure!(d.misses == 6 && d.store_fetches == 6 && d.hits == 0, "{d:?}");
        let (n, _) = tree_size(&cache.join("blocks"));
        ensure!(n == 0, "{n} entry files after failed writes");
        ensure!(gw.api().get("/readyz").await?.status == 200, "a failing cache made the gateway unready");

        // Repaired: the next miss is admitted again.
        std::fs::remove_file(cache.join("tmp"))?;
        std::fs::create_dir(cache.join("tmp"))?;
        check_read(&read(&user, &files[0].0, None, false).await?, &files[0].1, None)?;
        wait_entry(&entry_path(&cache, uid, &data::hash_hex(&files[0].1)), &files[0].1).await?;
        let s0 = stats(&admin).await?;
        check_read(&read(&user, &files[0].0, None, false).await?, &files[0].1, None)?;
        let d = delta(&s0, &stats(&admin).await?);
        ensure!(d.hits_disk == 1 && d.store_fetches == 0, "after repairing tmp/: {d:?}");
        Ok(())
    }
);

// ---------------------------------------------------------------------------------------------
// 6. The SSD tier survives a restart
// ---------------------------------------------------------------------------------------------

backend_test!(restart_keeps_the_ssd_cache, |mut gw| async move {
    let admin = gw.admin().await?;
    let (uid, user) = gw.user("gina", None).await?;
    let token = user.token().context("no token")?.to_string();
    let len = 9 * MIB;
    let src = data::bytes("cache restart", len);
    user.put_file("/keep.bin", src.clone()).await?.entry(201)?;
    let blocks = data::split_blocks(&src, BLOCK);
    let cache = cache_dir(&gw);
    purge(&admin).await?;
    check_read(&read(&user, "/keep.bin", None, false).await?, &src, None)?;
    for (hash, bytes) in &blocks {
        wait_entry(&entry_path(&cache, uid, hash), bytes).await?;
    }
    let want_used: u64 = blocks.iter().map(|(_, b)| entry_size(b.len())).sum();
    // Leftovers a crash could leave: a torn temp file, a stray name among the entries.
    std::fs::write(cache.join("tmp").join("torn-write"), b"half an entry")?;
    let stray = cache.join("blocks").join(uid.to_string()).join("zz").join("not-a-hash");
    std::fs::create_dir_all(stray.parent().context("stray dir")?)?;
    std::fs::write(&stray, b"junk")?;

    gw.restart().await?;
    let admin = gw.admin().await?;
    let user = gw.api().with_token(token.clone());
    let s = stats(&admin).await?;
    ensure!(s.store_fetches == 0 && s.misses == 0, "fresh counters after the restart: {s:?}");
    ensure!(
        s.disk_entries == 3 && s.disk_used_bytes == want_used,
        "entries found at start: {s:?} (want 3, {want_used} bytes)"
    );
    ensure!(!cache.join("tmp").join("torn-write").exists(), "a leftover temp file survived the start");
    ensure!(!stray.exists(), "a stray file among the entries survived the start");
    check_read(&read(&user, "/keep.bin", None, false).await?, &src, None)?;
    let s = stats(&admin).await?;
    ensure!(
        s.store_fetches == 0 && s.misses == 0 && s.hits_disk == 3,
        "after a restart the whole file must come from the SSD tier: {s:?}"
    );

    // An entry damaged while the gateway runs is dropped by the scan at the next start.
    let p2 = entry_path(&cache, uid, &blocks[2].0);
    std::fs::OpenOptions::new().write(true).open(&p2)?.set_len(entry_size(blocks[2].1.len()) - 1)?;
    gw.restart().await?;
    let admin = gw.admin().await?;
    let user = gw.api().with_token(token);
    let s = stats(&admin).await?;
    ensure!(s.disk_entries == 2, "the truncated entry was indexed at start: {s:?}");
    ensure!(!p2.exists(), "the truncated entry was not deleted at start");
    check_read(&read(&user, "/keep.bin", None, false).await?, &src, None)?;
    let s = stats(&admin).await?;
    ensure!(s.store_fetches == 1 && s.misses == 1 && s.hits_disk == 2 && s.corrupt_entries == 0, "{s:?}");
    Ok(())
});

// ---------------------------------------------------------------------------------------------
// 7. The SSD size bound holds
// ---------------------------------------------------------------------------------------------

backend_test!(
    ssd_size_bound_is_never_exceeded,
    opts = GatewayOptions::default().arg("--cache-size").arg("10MiB").arg("--cache-mem").arg("0"),
    |gw| async move {
        const CAP: u64 = 10 << 20;
        let admin = gw.admin().await?;
        let (_, user) = gw.user("jack", None).await?;
        let cache = cache_dir(&gw);
        let files: Vec<(String, Vec<u8>)> =
            (0..10).map(|i| (format!("/s{i}.bin"), data::bytes(&format!("cache bound {i}"), 4 * MIB))).collect();
        for (path, bytes) in &files {
            user.put_file(path, bytes.clone()).await?.entry(201)?;
        }
        purge(&admin).await?;
        ensure!(stats(&admin).await?.disk_capacity_bytes == CAP, "disk_capacity_bytes");

        // Watch the stats the whole time.
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = tokio::spawn({
            let (admin, stop) = (admin.clone(), stop.clone());
            async move {
                let mut max = 0;
                while !stop.load(Ordering::Relaxed) {
                    let s = stats(&admin).await?;
                    ensure!(s.disk_used_bytes <= CAP, "disk_used_bytes {} > {CAP}: {s:?}", s.disk_used_bytes);
                    max = max.max(s.disk_used_bytes);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                anyhow::Ok(max)
            }
        });
        let check_files = |when: &str| -> anyhow::Result<()> {
            let (n, bytes) = tree_size(&cache.join("blocks"));
            ensure!(bytes <= CAP, "{when}: {n} entry files hold {bytes} bytes, over the {CAP}-byte bound");
            Ok(())
        };

        // 40 MiB, one file after the other.
        for (path, bytes) in &files {
            check_read(&read(&user, path, None, false).await?, bytes, None)?;
            tokio::time::sleep(SETTLE).await;
            check_files(&format!("after reading {path}"))?;
        }
        // Then 4 at once, twice over (evicted ones come back).
        for round in 0..2 {
            let reads = files[round * 4..round * 4 + 4].iter().map(|(path, bytes)| {
                let user = user.clone();
                async move { check_read(&read(&user, path, None, false).await?, bytes, None) }
            });
            for r in futures::future::join_all(reads).await {
                r?;
            }
            tokio::time::sleep(SETTLE).await;
            check_files(&format!("after concurrent round {round}"))?;
        }
        stop.store(true, Ordering::Relaxed);
        let max = watcher.await??;
        let s = stats(&admin).await?;
        ensure!(s.evictions_disk > 0, "40 MiB through a 10 MiB SSD tier without an eviction: {s:?}");
        ensure!(s.disk_entries <= 2 && s.disk_used_bytes <= CAP && max > 0, "{s:?} (max seen {max})");
        let (n, bytes) = tree_size(&cache.join("blocks"));
        ensure!(n == s.disk_entries && bytes == s.disk_used_bytes, "{n} files / {bytes} bytes on disk vs {s:?}");
        Ok(())
    }
);

// ---------------------------------------------------------------------------------------------
// 8. Concurrent cold reads of one block fetch it once
// ---------------------------------------------------------------------------------------------

/// Rounds of 50 concurrent cold reads of one 4 MiB block (whole file, distinct ranges of it,
/// the block endpoint): each round fetches it from the store exactly once.
async fn coalesced_cold_reads(gw: Gateway) -> anyhow::Result<()> {
    const ROUNDS: usize = 3;
    let admin = gw.admin().await?;
    let (_, user) = gw.user("kim", None).await?;
    let src = data::bytes("cache coalescing", BLOCK);
    let hash = data::hash_hex(&src);
    user.put_file("/hot.bin", src.clone()).await?.entry(201)?;

    // (what, request url, the span reader i asks for)
    let phases: [(&str, String, SpanOf); 3] = [
        ("whole file", files_url("/hot.bin"), |_| None),
        ("distinct ranges", files_url("/hot.bin"), |i| Some((i as u64 * 80_000, i as u64 * 80_000 + 999))),
        ("block endpoint", format!("/api/v1/blocks/{hash}"), |_| None),
    ];
    // The most readers that missed together (waited on one fetch) in any round.
    let mut most_waiters = 0;
    for round in 0..ROUNDS {
        for (what, url, span_of) in &phases {
            purge(&admin).await?;
            let s0 = stats(&admin).await?;
            let reads = (0..50).map(|i| {
                let (user, url) = (user.clone(), url.clone());
                let span = span_of(i);
                async move {
                    let mut req = user.req(Method::GET, &url);
                    if let Some((s, e)) = span {
                        req = req.header("range", &format!("bytes={s}-{e}"));
                    }
                    req.send().await.map(|r| (r, span))
                }
            });
            for r in futures::future::join_all(reads).await {
                let (r, span) = r?;
                if url.starts_with("/api/v1/blocks/") {
                    r.check(200)?;
                    ensure!(r.body.as_ref() == &src[..], "{what}: {}", first_difference(&r.body, &src));
                } else {
                    check_read(&r, &src, span).with_context(|| what.to_string())?;
                }
            }
            let s1 = stats(&admin).await?;
            let d = delta(&s0, &s1);
            // Distinct small ranges: the first part reads of the block fetch only their pieces
            // until it is hot (the 4th within the window) or a load of it (reader 0 reads from
            // its start) is in flight; one whole load serves every later reader.
            let most = if *what == "distinct ranges" { 4 } else { 1 };
            ensure!(
                (1..=most).contains(&d.store_fetches),
                "round {round}: 50 concurrent cold reads ({what}) fetched the block {} times: {d:?}",
                d.store_fetches
            );
            ensure!(d.misses + d.hits == 50 && d.misses >= 1, "{what}: {d:?}");
            most_waiters = most_waiters.max(d.misses);
            let fetched = s1.bytes_fetched_store - s0.bytes_fetched_store;
            // One whole block, plus the 16 KiB pieces of the part reads before it was loaded.
            let pieces = (d.store_fetches - 1) * 2 * 16 * KIB as u64;
            ensure!(
                (BLOCK as u64..=BLOCK as u64 + pieces).contains(&fetched),
                "{what}: {fetched} bytes fetched from the store for one 4 MiB block"
            );
        }
    }
    // Against MinIO and Garage a fetch takes long enough that readers overlap; make sure they
    // did at least once, or the test would not have exercised coalescing at all.
    if gw.backend != Backend::SqliteLocal {
        ensure!(most_waiters > 1, "the readers never overlapped: coalescing was not exercised");
    }
    Ok(())
}

backend_test!(concurrent_cold_reads_fetch_once, coalesced_cold_reads);

// The same with the SSD tier alone: a reader arriving after the fetch but before the block is
// on the SSD must not fetch it again either.
backend_test!(
    concurrent_cold_reads_fetch_once_ssd_only,
    opts = GatewayOptions::default().arg("--cache-mem").arg("0"),
    coalesced_cold_reads
);

// ---------------------------------------------------------------------------------------------
// 9. Authorization and deletion are never answered from the cache; spaces have their own keys
// ---------------------------------------------------------------------------------------------

backend_test!(cache_never_outlives_auth_or_files, |gw| async move {
    let admin = gw.admin().await?;
    let (alice_id, alice) = gw.user("alice", None).await?;
    let (bob_id, bob) = gw.user("bob", None).await?;
    let src = data::bytes("cache secret", MIB + 17);
    let hash = data::hash_hex(&src);
    let block_url = format!("/api/v1/blocks/{hash}");
    alice.put_file("/secret.bin", src.clone()).await?.entry(201)?;
    purge(&admin).await?;
    check_read(&read(&alice, "/secret.bin", None, false).await?, &src, None)?;
    check_read(&read(&alice, "/secret.bin", None, false).await?, &src, None)?;
    let cache = cache_dir(&gw);
    wait_entry(&entry_path(&cache, alice_id, &hash), &src).await?;

    // A revoked token gets 401, warm cache or not.
    let alice2 = gw.api().login_ok("alice", &nimbus_e2e::gateway::user_password("alice")).await?;
    alice.req(Method::POST, "/api/v1/auth/logout").send().await?.check(204)?;
    let s0 = stats(&admin).await?;
    alice.get_file("/secret.bin").await?.check_error(401, "unauthorized")?;
    read(&alice, "/secret.bin", Some("bytes=0-9"), false).await?.check_error(401, "unauthorized")?;
    alice.get(&block_url).await?.check_error(401, "unauthorized")?;
    let d = delta(&s0, &stats(&admin).await?);
    ensure!(d.hits == 0 && d.misses == 0, "a revoked token's requests reached the cache: {d:?}");
    check_read(&read(&alice2, "/secret.bin", None, false).await?, &src, None)?;

    // Bob sees nothing of alice's, cached or not.
    let s0 = stats(&admin).await?;
    bob.get_file("/secret.bin").await?.check_error(404, "not_found")?;
    read(&bob, "/secret.bin", Some("bytes=0-9"), false).await?.check_error(404, "not_found")?;
    bob.get(&block_url).await?.check_error(404, "not_found")?;
    let d = delta(&s0, &stats(&admin).await?);
    ensure!(d.hits == 0 && d.misses == 0, "bob's requests for alice's content reached the cache: {d:?}");

    // A deleted file is gone although its block is cached.
    alice2.delete(&files_url("/secret.bin")).await?.check(204)?;
    let s0 = stats(&admin).await?;
    alice2.get_file("/secret.bin").await?.check_error(404, "not_found")?;
    read(&alice2, "/secret.bin", Some("bytes=0-9"), false).await?.check_error(404, "not_found")?;
    let d = delta(&s0, &stats(&admin).await?);
    ensure!(d.hits == 0, "a deleted file was read from the cache: {d:?}");

    // Bob uploads the same content: his own entries, his first read a miss.
    bob.put_file("/mine.bin", src.clone()).await?.entry(201)?;
    let s0 = stats(&admin).await?;
    check_read(&read(&bob, "/mine.bin", None, false).await?, &src, None)?;
    let d = delta(&s0, &stats(&admin).await?);
    ensure!(
        d.misses == 1 && d.hits == 0 && d.store_fetches == 1,
        "bob's first read of content alice has cached must be a miss (the space is part of the key): {d:?}"
    );
    wait_entry(&entry_path(&cache, bob_id, &hash), &src).await?;
    ensure!(entry_path(&cache, alice_id, &hash).exists(), "alice's entry disappeared");
    let s0 = stats(&admin).await?;
    check_read(&read(&bob, "/mine.bin", None, false).await?, &src, None)?;
    let d = delta(&s0, &stats(&admin).await?);
    ensure!(d.hits == 1 && d.misses == 0, "bob's second read: {d:?}");
    Ok(())
});

// ---------------------------------------------------------------------------------------------
// 10. One gateway per cache dir
// ---------------------------------------------------------------------------------------------

backend_test!(second_gateway_on_the_same_cache_dir_is_refused, |gw| async move {
    let admin = gw.admin().await?;
    let src = data::bytes("cache lock", 100 * KIB);
    admin.put_file("/a.bin", src.clone()).await?.entry(201)?;
    check_read(&read(&admin, "/a.bin", None, false).await?, &src, None)?;
    let cache = cache_dir(&gw);
    ensure!(cache.join("LOCK").exists(), "no LOCK file in {}", cache.display());

    // A second gateway (SQLite + local store of its own) pointed at the first one's cache dir.
    let other = tempfile::Builder::new().prefix("nimbus-e2e-gw2-").tempdir()?;
    let mut cmd = tokio::process::Command::new(bins::gateway_bin()?);
    cmd.arg("serve")
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(other.path().join("data"))
        .arg("--cache-dir")
        .arg(&cache);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("NIMBUS_") || k.starts_with("AWS_") {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd.env("NIMBUS_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(other.path().join("stdout"))?)
        .stderr(std::fs::File::create(other.path().join("stderr"))?)
        .kill_on_drop(true);
    let mut child = cmd.spawn().context("cannot start a second gateway")?;
    let status = match tokio::time::timeout(Duration::from_secs(60), child.wait()).await {
        Ok(s) => s?,
        Err(_) => {
            let out = tail_file(&other.path().join("stdout"), 20);
            bail!("a second gateway on the cache dir {} was still running after 60 s: {out}", cache.display());
        }
    };
    let stderr = std::fs::read_to_string(other.path().join("stderr")).unwrap_or_default();
    let stdout = std::fs::read_to_string(other.path().join("stdout")).unwrap_or_default();
    ensure!(!status.success(), "the second gateway exited successfully; stderr: {stderr}");
    ensure!(
        stderr.contains("in use by another gateway") || stdout.contains("in use by another gateway"),
        "the second gateway ({status}) did not say the cache dir is in use; stderr: {stderr}\nstdout: {stdout}"
    );
    ensure!(!stdout.contains("listening on"), "the second gateway listened: {stdout}");

    // The first one is untouched and still caches.
    let s0 = stats(&admin).await?;
    check_read(&read(&admin, "/a.bin", None, false).await?, &src, None)?;
    let d = delta(&s0, &stats(&admin).await?);
    ensure!(d.hits == 1 && d.store_fetches == 0, "the first gateway after the refused second one: {d:?}");
    Ok(())
});

// ---------------------------------------------------------------------------------------------
// 11. A cache dir that cannot be created: the gateway still runs (memory tier and store)
// ---------------------------------------------------------------------------------------------

// `BlockCache::open` documents that any problem with the SSD tier other than another gateway
// holding it leaves the gateway running on the memory tier and the store.
backend_test!(
    unusable_cache_dir_does_not_stop_the_gateway,
    only = sqlite_local,
    opts = GatewayOptions::default().arg("--cache-dir").arg("/dev/null/cache"),
    |gw| async move {
        let admin = gw.admin().await?;
        let src = data::bytes("cache unusable dir", MIB);
        admin.put_file("/x.bin", src.clone()).await?.entry(201)?;
        check_read(&read(&admin, "/x.bin", None, false).await?, &src, None)?;
        check_read(&read(&admin, "/x.bin", None, false).await?, &src, None)?;
        let s = stats(&admin).await?;
        ensure!(!s.disk_enabled && s.hits_mem == 1 && s.misses == 1, "{s:?}");
        Ok(())
    }
);

// ---------------------------------------------------------------------------------------------
// 12. Purging while entries are being admitted
// ---------------------------------------------------------------------------------------------

// `DELETE /api/v1/admin/cache` while misses keep writing SSD entries in the background: every
// purge succeeds, reads stay correct, and afterwards the index and the files agree.
backend_test!(purge_during_admission, opts = GatewayOptions::default().arg("--cache-mem").arg("0"), |gw| async move {
    let admin = gw.admin().await?;
    let (_, user) = gw.user("lena", None).await?;
    let files: Vec<(String, Vec<u8>)> =
        (0..8).map(|i| (format!("/p{i}.bin"), data::bytes(&format!("cache purge race {i}"), MIB))).collect();
    for (path, bytes) in &files {
        user.put_file(path, bytes.clone()).await?.entry(201)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|k| {
            let (user, files, stop) = (user.clone(), files.clone(), stop.clone());
            tokio::spawn(async move {
                let mut i = k;
                while !stop.load(Ordering::Relaxed) {
                    let (path, bytes) = &files[i % files.len()];
                    check_read(&read(&user, path, None, false).await?, bytes, None)?;
                    i += 1;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    let mut failures = Vec::new();
    for _ in 0..40 {
        let r = admin.delete("/api/v1/admin/cache").await?;
        if r.status != 204 {
            failures.push(r.to_string());
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.await??;
    }
    ensure!(failures.is_empty(), "{} of 40 purges during admission failed, e.g. {}", failures.len(), failures[0]);
    tokio::time::sleep(SETTLE).await;
    let s = stats(&admin).await?;
    let (n, bytes) = tree_size(&cache_dir(&gw).join("blocks"));
    ensure!(n == s.disk_entries && bytes == s.disk_used_bytes, "{n} files / {bytes} bytes on disk vs {s:?}");
    Ok(())
});
