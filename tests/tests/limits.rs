//! Bounded memory and connection limits (docs/OPERATIONS.md, Limits), against the real gateway:
//! a folder of 100,000 entries (1,000 made through the API, the rest written into the database
//! the same way, see `fill_big_folder`) listed through WebDAV (PROPFIND Depth 1, streamed: the
//! gateway's memory stays flat, every entry present) and through the S3 door (ListObjectsV2
//! page by page: every key once, in order); WebDAV dead property limits; idle connections closed (HTTP/1
//! between requests, a connection that never sends a request, HTTP/2), slow header senders and
//! clients that stop reading cut, the connection cap (also across several request threads); HTTP/2 over TLS with more streams than
//! the cap (refused beyond it, queued by real clients, the server fine).

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use nimbus_e2e::dav::dav;
use nimbus_e2e::gateway::tail_file;
use nimbus_e2e::{ADMIN_PASSWORD, Api, Backend, GatewayOptions, backend_test, bins, data};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// Entries in the large folder (files and, every tenth, an empty folder).
const BIG: usize = 100_000;
/// Requests creating them at once.
const CREATORS: usize = 16;
/// How much the gateway's resident memory may grow while it streams the listing of the large
/// folder: well below the answer itself (about 70 MB), which a gateway that built the answer
/// in memory would hold whole. (The first listing warms the database connections' page
/// caches: about 10 to 25 MiB measured.)
const LISTING_RSS_GROWTH_KIB: u64 = 40 * 1024;

/// The name of entry `i`: case, punctuation and non-ASCII mixed, so byte order (S3) and name
/// key order (WebDAV, REST) differ.
fn big_name(i: usize) -> String {
    let lead = ["a", "B", "é", "Z", "_", "b-", "A.", "ä"][i % 8];
    format!("{lead}{i:06}")
}

fn is_folder(i: usize) -> bool {
    i % 10 == 3
}

/// Creates the large folder: every hundredth entry through the API (the block protocol's
/// commit of no blocks for a file, mkdir for a folder), `CREATORS` requests at a time, the rest
/// written straight into the database as those requests write them (`ops::seed_folder`):
/// 100,000 requests take about two minutes on a debug build.
async fn fill_big_folder(gw: &nimbus_e2e::Gateway, space: i64, api: &Api) -> anyhow::Result<()> {
    let started = Instant::now();
    api.mkdir("/big").await?.check(201)?;
    futures::stream::iter((0..BIG).step_by(100))
        .map(|i| async move {
            let path = format!("/big/{}", big_name(i));
            if is_folder(i) {
                api.mkdir(&path).await?.check(201)?;
            } else {
                api.commit(&path, None, &[]).await?.check(201)?;
            }
            anyhow::Ok(())
        })
        .buffer_unordered(CREATORS)
        .try_collect::<()>()
        .await?;
    println!("{} entries created through the API in {:?}", BIG / 100, started.elapsed());
    let seeded: Vec<(String, bool)> = (0..BIG).filter(|i| i % 100 != 0).map(|i| (big_name(i), is_folder(i))).collect();
    nimbus_e2e::ops::seed_folder(gw, space, "big", &seeded).await
}

/// Peak resident memory of `pid` while `work` runs, sampled every 10 ms, and its value before.
async fn rss_while<T>(pid: u32, work: impl Future<Output = T>) -> anyhow::Result<(T, u64, u64)> {
    let before = rss_kib(pid)?;
    let peak = Arc::new(AtomicU64::new(before));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(kib) = rss_kib(pid) {
                    peak.fetch_max(kib, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let out = work.await;
    stop.store(true, Ordering::Relaxed);
    sampler.await?;
    Ok((out, before, peak.load(Ordering::Relaxed)))
}

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("VmRSS")
}

/// The hrefs of a PROPFIND answer read as a stream (never held whole), with the bytes read.
/// Works on bytes: a chunk may end inside a character; hrefs themselves are ASCII.
async fn streamed_hrefs(resp: reqwest::Response) -> anyhow::Result<(Vec<String>, u64)> {
    const OPEN: &[u8] = b"<D:href>";
    const CLOSE: &[u8] = b"</D:href>";
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let mut stream = resp.bytes_stream();
    let mut pending: Vec<u8> = Vec::new();
    let mut hrefs = Vec::new();
    let mut total = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.context("reading the PROPFIND answer")?;
        total += chunk.len() as u64;
        pending.extend_from_slice(&chunk);
        let mut at = 0;
        while let Some(start) = find(&pending[at..], OPEN) {
            let from = at + start + OPEN.len();
            let Some(len) = find(&pending[from..], CLOSE) else { break };
            hrefs.push(String::from_utf8(pending[from..from + len].to_vec()).context("href")?);
            at = from + len;
        }
        // Keep an unfinished href, or the tail an opening tag may straddle.
        let keep = match find(&pending[at..], OPEN) {
            Some(i) => at + i,
            None => pending.len().saturating_sub(OPEN.len()).max(at),
        };
        pending.drain(..keep);
    }
    Ok((hrefs, total))
}

/// Percent-decodes an href (dav-server encodes everything but unreserved characters and `/`).
fn decode_href(h: &str) -> anyhow::Result<String> {
    let b = h.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = h.get(i + 1..i + 3).context("truncated escape")?;
            out.push(u8::from_str_radix(hex, 16)?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(String::from_utf8(out)?)
}

/// The lines of `s3_io.py list` (`K key` / `P prefix`) and its page count.
async fn s3_list(
    endpoint: &str,
    key: &nimbus_proto::wire::CreatedS3Key,
    args: &[&str],
) -> anyhow::Result<(Vec<String>, u32)> {
    let mut all = vec!["list"];
    all.extend_from_slice(args);
    let out = nimbus_e2e::s3::s3_io(endpoint, key, &all).await?;
    let mut lines: Vec<String> = out.lines().map(str::to_string).collect();
    let pages = lines.pop().and_then(|l| l.strip_prefix("PAGES ")?.parse().ok()).context("PAGES line")?;
    Ok((lines, pages))
}

backend_test!(
    huge_folder_listings,
    opts = GatewayOptions::default().arg("--s3-listen").arg("127.0.0.1:0").timeout(Duration::from_secs(900)),
    |gw| async move {
        let (alice_id, alice) = gw.user("alice", None).await?;
        let started = Instant::now();
        fill_big_folder(&gw, alice_id, &alice).await?;
        println!("{BIG} entries created in {:?}", started.elapsed());
        // A few entries with dead properties: the listing reads those, and only those.
        let patch = r#"<?xml version="1.0" encoding="utf-8"?><D:propertyupdate xmlns:D="DAV:" xmlns:X="urn:x-test:"><D:set><D:prop><X:colour>teal</X:colour></D:prop></D:set></D:propertyupdate>"#;
        for i in [0, 4242, BIG - 1, 500] {
            let href = format!("/dav/big/{}", nimbus_e2e::encode_path(&big_name(i)));
            dav(&alice, "PROPPATCH", &href, &[], patch.as_bytes().to_vec()).await?.check(207)?;
        }

        // WebDAV: PROPFIND Depth 1 streams the listing; the gateway's memory stays flat.
        let listing = async {
            let (_, resp) = alice
                .req(reqwest::Method::from_bytes(b"PROPFIND")?, "/dav/big/")
                .header("depth", "1")
                .send_streaming()
                .await?;
            ensure!(resp.status().as_u16() == 207, "PROPFIND: {}", resp.status());
            streamed_hrefs(resp).await
        };
        let (listed, before, peak) = rss_while(gw.pid(), listing).await?;
        let (hrefs, bytes) = listed?;
        println!("PROPFIND of {BIG} entries: {bytes} bytes; gateway RSS {before} KiB before, peak {peak} KiB");
        ensure!(
            peak.saturating_sub(before) < LISTING_RSS_GROWTH_KIB,
            "the gateway grew by {} KiB while listing (limit {LISTING_RSS_GROWTH_KIB} KiB)",
            peak - before
        );
        let mut names = HashSet::new();
        for h in &hrefs[1..] {
            let path = decode_href(h)?;
            let name = path.strip_prefix("/dav/big/").with_context(|| format!("href {h}"))?.trim_end_matches('/');
            ensure!(names.insert(name.to_string()), "{name} listed twice");
        }
        ensure!(hrefs.first().map(String::as_str) == Some("/dav/big/"), "first href {:?}", hrefs.first());
        ensure!(names.len() == BIG, "{} of {BIG} entries listed", names.len());
        for i in 0..BIG {
            ensure!(names.contains(&big_name(i)), "{} missing from the listing", big_name(i));
        }
        // Dead properties come with the listing.
        let (_, resp) = alice
            .req(reqwest::Method::from_bytes(b"PROPFIND")?, "/dav/big/")
            .header("depth", "1")
            .send_streaming()
            .await?;
        let body = resp.text().await?;
        ensure!(
            body.matches(">teal<").count() == 4,
            "dead properties in the listing: {}",
            body.matches(">teal<").count()
        );
        drop(body);

        // S3: ListObjectsV2 pages through it, every key once, in byte order.
        let key = nimbus_e2e::s3::new_key(&alice).await?;
        let endpoint = gw.s3_endpoint()?;
        let bucket = "alice";
        let mut want: Vec<String> = (0..BIG)
            .map(|i| if is_folder(i) { format!("K big/{}/", big_name(i)) } else { format!("K big/{}", big_name(i)) })
            .collect();
        want.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        let started = Instant::now();
        let (lines, pages) = s3_list(&endpoint, &key, &[bucket, "big/", "1000"]).await?;
        println!("ListObjectsV2 of {BIG} keys: {pages} pages in {:?}", started.elapsed());
        ensure!(pages as usize == BIG.div_ceil(1000), "{pages} pages");
        ensure!(lines.len() == want.len(), "{} lines for {} keys", lines.len(), want.len());
        if let Some(i) = (0..want.len()).find(|i| lines[*i] != want[*i]) {
            bail!("line {i}: {} where {} belongs", lines[i], want[i]);
        }
        // With a delimiter, an odd page size and a start in the middle: folders roll up.
        let start = format!("big/{}", big_name(50_000));
        let (lines, _) = s3_list(&endpoint, &key, &[bucket, "big/", "777", "/", &start]).await?;
        let rolled: Vec<String> = want
            .iter()
            .map(|l| match l.strip_suffix('/') {
                Some(dir) => format!("P {}/", &dir[2..]),
                None => l.clone(),
            })
            .filter(|l| &l[2..] > start.as_str())
            .collect();
        ensure!(lines == rolled, "delimiter listing from {start}: {} lines, want {}", lines.len(), rolled.len());
        // The root with a delimiter: one common prefix for the whole folder.
        let (lines, _) = s3_list(&endpoint, &key, &[bucket, "", "1000", "/"]).await?;
        ensure!(lines == ["P big/"], "{lines:?}");
        Ok(())
    }
);

const PROP_NS: &str = "urn:x-limits:";

fn propset(props: &[(&str, &str)]) -> Vec<u8> {
    let mut body = format!(
        r#"<?xml version="1.0" encoding="utf-8"?><D:propertyupdate xmlns:D="DAV:" xmlns:X="{PROP_NS}"><D:set><D:prop>"#
    );
    for (name, value) in props {
        body.push_str(&format!("<X:{name}>{value}</X:{name}>"));
    }
    body.push_str("</D:prop></D:set></D:propertyupdate>");
    body.into_bytes()
}

/// The status line of property `name` in a PROPPATCH answer (`207` body).
fn prop_status(body: &str, name: &str) -> Option<String> {
    let at = body.find(&format!(":{name}"))?;
    let status = body[at..].find("<D:status>")? + at + "<D:status>".len();
    let end = body[status..].find("</D:status>")? + status;
    Some(body[status..end].to_string())
}

/// The names of the `X:` properties a PROPFIND allprop lists for `href`.
async fn stored_props(api: &Api, href: &str) -> anyhow::Result<Vec<String>> {
    let r = dav(api, "PROPFIND", href, &[("depth", "0")], vec![]).await?;
    r.check(207)?;
    let text = r.text();
    let mut names: Vec<String> = Vec::new();
    for part in text.split('<').skip(1) {
        let tag = part.split(['>', ' ', '/']).next().unwrap_or_default();
        if let Some((_, name)) = tag.split_once(':')
            && name.starts_with('p')
            && !tag.starts_with("D:")
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_string());
        }
    }
    Ok(names)
}

backend_test!(dead_property_limits, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    alice.put_file("/f.txt", "x").await?.check(201)?;
    let href = "/dav/f.txt";

    // 64 properties fit, in one PROPPATCH or several.
    let first: Vec<(String, String)> = (0..40).map(|i| (format!("p{i:02}"), format!("v{i}"))).collect();
    let refs: Vec<(&str, &str)> = first.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let r = dav(&alice, "PROPPATCH", href, &[], propset(&refs)).await?;
    ensure!(r.status == 207 && !r.text().contains("507") && !r.text().contains("424"), "{r}");
    let more: Vec<(String, String)> = (40..64).map(|i| (format!("p{i:02}"), format!("v{i}"))).collect();
    let refs: Vec<(&str, &str)> = more.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    dav(&alice, "PROPPATCH", href, &[], propset(&refs)).await?.check(207)?;
    ensure!(stored_props(&alice, href).await?.len() == 64);

    // The 65th is refused with 507 (RFC 4918 §9.2.1), the rest of that PROPPATCH with 424, and
    // nothing of it is applied.
    // (`p00` keeps its size: it would fit, so it fails only by dependency.)
    let r = dav(&alice, "PROPPATCH", href, &[], propset(&[("p00", "x0"), ("p64", "new")])).await?;
    r.check(207)?;
    let text = r.text();
    ensure!(prop_status(&text, "p64").as_deref() == Some("HTTP/1.1 507 Insufficient Storage"), "{r}");
    ensure!(prop_status(&text, "p00").as_deref() == Some("HTTP/1.1 424 Failed Dependency"), "{r}");
    let names = stored_props(&alice, href).await?;
    ensure!(names.len() == 64 && !names.iter().any(|n| n == "p64"), "{names:?}");
    let r = dav(&alice, "PROPFIND", href, &[("depth", "0")], vec![]).await?;
    ensure!(r.text().contains(">v0<") && !r.text().contains(">x0<"), "{r}");
    // Replacing a value in place and removing still work on a full node.
    dav(&alice, "PROPPATCH", href, &[], propset(&[("p01", "w1")])).await?.check(207)?;
    let remove = format!(
        r#"<?xml version="1.0" encoding="utf-8"?><D:propertyupdate xmlns:D="DAV:" xmlns:X="{PROP_NS}"><D:remove><D:prop><X:p02/></D:prop></D:remove><D:set><D:prop><X:p64>fits now</X:p64></D:prop></D:set></D:propertyupdate>"#
    );
    let r = dav(&alice, "PROPPATCH", href, &[], remove.into_bytes()).await?;
    ensure!(r.status == 207 && !r.text().contains("507"), "{r}");
    let names = stored_props(&alice, href).await?;
    ensure!(names.len() == 64 && names.iter().any(|n| n == "p64") && !names.iter().any(|n| n == "p02"), "{names:?}");

    // One value over 16 KiB is refused; one just under fits.
    alice.put_file("/g.txt", "x").await?.check(201)?;
    let big = "v".repeat(16 * 1024 + 1);
    let r = dav(&alice, "PROPPATCH", "/dav/g.txt", &[], propset(&[("pbig", &big)])).await?;
    ensure!(prop_status(&r.text(), "pbig").as_deref() == Some("HTTP/1.1 507 Insufficient Storage"), "{r}");
    ensure!(stored_props(&alice, "/dav/g.txt").await?.is_empty());
    // 64 KiB per node in all: four values of 15 KiB fit, a fifth does not.
    let value = "w".repeat(15 * 1024);
    for i in 0..4 {
        let name = format!("pw{i}");
        let r = dav(&alice, "PROPPATCH", "/dav/g.txt", &[], propset(&[(&name, &value)])).await?;
        ensure!(r.status == 207 && !r.text().contains("507"), "{r}");
    }
    let r = dav(&alice, "PROPPATCH", "/dav/g.txt", &[], propset(&[("pw4", &value)])).await?;
    ensure!(prop_status(&r.text(), "pw4").as_deref() == Some("HTTP/1.1 507 Insufficient Storage"), "{r}");
    ensure!(stored_props(&alice, "/dav/g.txt").await?.len() == 4);
    // A body over the door's 64 KiB PROPPATCH limit is refused before anything is parsed.
    let huge = "v".repeat(70 * 1024);
    let r = dav(&alice, "PROPPATCH", "/dav/g.txt", &[], propset(&[("phuge", &huge)])).await?;
    r.check(413)?;
    Ok(())
});

/// Reads until the peer closes (EOF or reset), discarding what arrives; fails after `within`.
async fn closed_within(s: &mut (impl AsyncRead + Unpin), within: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(within, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .with_context(|| format!("the connection was still open after {within:?}"))?;
    Ok(started.elapsed())
}

/// One HTTP/1.1 keep-alive request on `s`; reads the response (Content-Length bodies).
async fn keepalive_get(s: &mut TcpStream, path: &str) -> anyhow::Result<u16> {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: gw\r\n\r\n").as_bytes()).await?;
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        ensure!(s.read(&mut b).await? == 1, "closed in the response head");
        head.push(b[0]);
    }
    let head = String::from_utf8(head)?;
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).context("status")?;
    let len: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
        .and_then(|v| v.parse().ok())
        .context("content-length")?;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).await?;
    Ok(status)
}

fn host_port(url: &str) -> anyhow::Result<String> {
    Ok(url.split_once("://").context("URL")?.1.trim_end_matches('/').to_string())
}

backend_test!(
    idle_connections_are_closed,
    only = sqlite_local,
    opts = GatewayOptions::default()
        .arg("--idle-timeout")
        .arg("2s")
        .arg("--header-read-timeout")
        .arg("30s")
        .arg("--s3-listen")
        .arg("127.0.0.1:0"),
    |gw| async move {
        let api_addr = host_port(&gw.url)?;
        let s3_addr = host_port(&gw.s3_endpoint()?)?;

        // HTTP/1 keep-alive: requests follow each other on one connection, which is closed once
        // it has been idle for the timeout (hyper's header clock, 30 s here, is not what closes it).
        let mut c = TcpStream::connect(&api_addr).await?;
        ensure!(keepalive_get(&mut c, "/healthz").await? == 200);
        ensure!(keepalive_get(&mut c, "/healthz").await? == 200, "the connection is kept alive between requests");
        let after = closed_within(&mut c, Duration::from_secs(15)).await?;
        println!("an idle HTTP/1 connection was closed after {after:?}");

        // A connection that never sends a request, on either listener; and one that stops in the
        // middle of the HTTP/2 preface (hyper waits for those bytes without a clock of its own).
        for (what, addr, bytes) in [
            ("silent (API)", &api_addr, &b""[..]),
            ("silent (S3)", &s3_addr, &b""[..]),
            ("half an HTTP/2 preface", &api_addr, &b"PRI * HTTP/2.0\r\n"[..]),
        ] {
            let mut c = TcpStream::connect(addr).await?;
            c.write_all(bytes).await?;
            closed_within(&mut c, Duration::from_secs(15)).await.with_context(|| what.to_string())?;
        }

        // A request in progress is never idle: a long poll of 5 s on a 2 s idle timeout answers.
        let (_, alice) = gw.user("alice", None).await?;
        let feed = alice.get("/api/v1/changes").await?.value()?;
        let cursor = feed["cursor"].as_str().context("cursor")?.to_string();
        let started = Instant::now();
        let r = alice.get(&format!("/api/v1/changes?cursor={cursor}&wait=5")).await?;
        r.check(200)?;
        ensure!(started.elapsed() >= Duration::from_secs(4), "the long poll returned early: {r}");
        Ok(())
    }
);

backend_test!(
    connection_cap,
    only = sqlite_local,
    opts = GatewayOptions::default().arg("--max-connections").arg("4"),
    |gw| async move {
        let addr = host_port(&gw.url)?;
        let mut held = Vec::new();
        for _ in 0..4 {
            let mut c = TcpStream::connect(&addr).await?;
            ensure!(keepalive_get(&mut c, "/healthz").await? == 200);
            held.push(c);
        }
        // The fifth is closed at once, before it is read.
        let mut extra = TcpStream::connect(&addr).await?;
        let _ = extra.write_all(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n").await;
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), extra.read_to_end(&mut buf)).await;
        ensure!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "a connection over the cap was served: {:?}",
            String::from_utf8_lossy(&buf)
        );
        // A freed slot serves again.
        drop(held.pop());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut c = TcpStream::connect(&addr).await?;
            if keepalive_get(&mut c, "/healthz").await.is_ok_and(|s| s == 200) {
                break;
            }
            ensure!(Instant::now() < deadline, "no connection served after a slot was freed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
);

/// The CPU time (ns, from schedstat) of each of the gateway's own request threads
/// (`nimbus-requests-N`, named by the kernel in 15 characters), by thread id.
fn request_thread_times(pid: u32) -> anyhow::Result<std::collections::BTreeMap<String, u64>> {
    let mut out = std::collections::BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let dir = task?.path();
        // A thread of the blocking pool may end while this reads: skip what cannot be read.
        let (Ok(comm), Ok(stat)) =
            (std::fs::read_to_string(dir.join("comm")), std::fs::read_to_string(dir.join("schedstat")))
        else {
            continue;
        };
        if comm.trim() != "nimbus-requests" {
            continue;
        }
        let ns = stat.split_whitespace().next().context("schedstat")?.parse()?;
        out.insert(dir.file_name().context("tid")?.to_string_lossy().into_owned(), ns);
    }
    Ok(out)
}

/// Clients at once in `request_threads`, each on a connection of its own.
const THREAD_CLIENTS: usize = 12;
/// Its `--max-connections`: above what the clients may open at once (a client may open a second
/// connection before its first is back in its pool).
const THREAD_CAP: usize = 40;

// Several request threads (`--worker-threads 3`: each a runtime of its own, accepting on its own
// socket of one SO_REUSEPORT group; on every store, since each thread keeps its own pool of
// store connections): clients on separate connections see each other's files whole, and the
// connection cap counts the connections of all threads together; the S3 door is served on every
// thread too; and a second gateway cannot take the same port.
backend_test!(
    request_threads,
    opts = GatewayOptions::default()
        .arg("--worker-threads")
        .arg("3")
        .arg("--max-connections")
        .arg(THREAD_CAP.to_string())
        .arg("--s3-listen")
        .arg("127.0.0.1:0"),
    |gw| async move {
        let token = gw.admin_token().await?;
        let before = request_thread_times(gw.pid())?;
        ensure!(before.len() == 2, "request threads besides the main runtime's: {before:?}");
        let clients: Vec<Api> =
            (0..THREAD_CLIENTS).map(|_| Api::new(&gw.url).map(|a| a.with_token(&token))).collect::<Result<_, _>>()?;
        let content = |i: usize| data::bytes(&format!("thread-{i}"), 300_000 + i * 1_000);
        futures::future::try_join_all(clients.iter().enumerate().map(|(i, api)| async move {
            api.put_file(&format!("threads/f{i}"), content(i)).await?.check_any(&[200, 201])?;
            anyhow::Ok(())
        }))
        .await?;
        futures::future::try_join_all(clients.iter().enumerate().map(|(i, api)| async move {
            for k in 0..THREAD_CLIENTS {
                let j = (i + k) % THREAD_CLIENTS;
                let r = api.get(&nimbus_e2e::http::files_url(&format!("threads/f{j}"))).await?;
                r.check(200)?;
                ensure!(r.body[..] == content(j)[..], "f{j} read by client {i} differs");
            }
            anyhow::Ok(())
        }))
        .await?;

        // The cap is the gateway's, not each thread's: connections opened one after another are
        // refused from the 41st at the latest, not the 121st. The clients' keep-alive connections
        // count until the gateway sees them close, hence the retries.
        drop(clients);
        let addr = host_port(&gw.url)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut held = Vec::new();
            loop {
                let mut c = TcpStream::connect(&addr).await?;
                if !keepalive_get(&mut c, "/healthz").await.is_ok_and(|s| s == 200) {
                    break;
                }
                held.push(c);
                ensure!(held.len() <= THREAD_CAP, "{} connections served under a cap of {THREAD_CAP}", held.len());
            }
            if held.len() >= THREAD_CAP - 4 {
                break;
            }
            ensure!(Instant::now() < deadline, "only {} connections served under a cap of {THREAD_CAP}", held.len());
            drop(held);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The S3 door: every one of many connections is answered. One that landed on a thread
        // not serving the door would wait for ever; one the cap refused (the connections above
        // are still closing) is closed at once and tried again.
        let s3 = host_port(&gw.s3_endpoint()?)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut answered = 0;
        while answered < THREAD_CLIENTS * 2 {
            let mut c = TcpStream::connect(&s3).await?;
            let _ = c.write_all(b"GET / HTTP/1.1\r\nHost: s3\r\nConnection: close\r\n\r\n").await;
            let mut buf = Vec::new();
            let read = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut buf)).await;
            ensure!(read.is_ok(), "S3 connection {answered} was not answered");
            if buf.is_empty() {
                ensure!(Instant::now() < deadline, "S3 connections kept being refused");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            ensure!(buf.starts_with(b"HTTP/1.1 403"), "S3 connection {answered}: {:?}", String::from_utf8_lossy(&buf));
            answered += 1;
        }
        // Another gateway (of the same user, so the kernel would let it join the socket group)
        // is refused the port instead of sharing its connections.
        let other = tempfile::tempdir()?;
        let out = Command::new(bins::gateway_bin()?)
            .args(["serve", "--listen", &addr, "--worker-threads", "2", "--data-dir"])
            .arg(other.path())
            .env("NIMBUS_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let out =
            tokio::time::timeout(Duration::from_secs(60), out).await.context("the second gateway kept running")??;
        let err = String::from_utf8_lossy(&out.stderr);
        ensure!(!out.status.success() && err.contains("cannot listen"), "a second gateway on {addr}: {err}");
        // Both other threads served some of the connections (the kernel spreads them by
        // their addresses; a thread that served none never ran).
        let after = request_thread_times(gw.pid())?;
        for (tid, t) in &before {
            ensure!(after.get(tid).is_some_and(|a| a > t), "request thread {tid} served nothing: {before:?} {after:?}");
        }
        Ok(())
    }
);

backend_test!(
    slow_header_senders_are_cut,
    only = sqlite_local,
    opts = GatewayOptions::default().arg("--header-read-timeout").arg("2s"),
    |gw| async move {
        let addr = host_port(&gw.url)?;
        let c = TcpStream::connect(&addr).await?;
        let (mut rd, mut wr) = c.into_split();
        wr.write_all(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n").await?;
        // One byte of a header every 200 ms for up to 60 s: the head never completes.
        let trickle = tokio::spawn(async move {
            for _ in 0..300 {
                if wr.write_all(b"X").await.is_err() {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            false
        });
        let after = closed_within(&mut rd, Duration::from_secs(20)).await?;
        println!("a slow header sender was cut after {after:?}");
        trickle.abort();
        // Other clients are served meanwhile and after.
        gw.api().get("/healthz").await?.check(200)?;
        // A request head over 64 KiB is refused.
        let long = "v".repeat(70 * 1024);
        let r = nimbus_e2e::raw_request(&gw.url, "GET", "/healthz", &[("x-long", &long)], b"").await?;
        r.check(431)?;
        Ok(())
    }
);

backend_test!(
    clients_that_stop_reading_are_cut,
    only = sqlite_local,
    opts = GatewayOptions::default().arg("--idle-timeout").arg("2s"),
    |gw| async move {
        let (_, alice) = gw.user("alice", None).await?;
        const SIZE: usize = 64 << 20;
        alice.put_file("/big.bin", data::bytes("stall", SIZE)).await?.check(201)?;
        let token = alice.token().context("token")?.to_string();
        let mut c = TcpStream::connect(host_port(&gw.url)?).await?;
        c.write_all(
            format!("GET /api/v1/files/big.bin HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {token}\r\n\r\n")
                .as_bytes(),
        )
        .await?;
        // Read only the status line, then nothing for a while: the socket buffers fill up and the
        // gateway's sends stall.
        let mut first = [0u8; 12];
        c.read_exact(&mut first).await?;
        ensure!(&first[9..12] == b"200", "{}", String::from_utf8_lossy(&first));
        tokio::time::sleep(Duration::from_secs(8)).await;
        let mut got = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        let read_all = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                match c.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => got += n,
                }
            }
        });
        read_all.await.context("the download neither finished nor was cut")?;
        ensure!(got < SIZE, "the whole file arrived ({got} bytes) although the client stopped reading");
        println!("a client that stopped reading got {got} of {SIZE} bytes before the cut");
        gw.api().get("/healthz").await?.check(200)?;
        Ok(())
    }
);

/// A `--tls self-signed` gateway started by this file (the harness only waits for http://).
struct TlsGateway {
    _child: Child,
    url: String,
    logs: tempfile::TempDir,
}

impl TlsGateway {
    async fn start(extra: &[&str]) -> anyhow::Result<TlsGateway> {
        let logs = tempfile::Builder::new().prefix("nimbus-e2e-limits-").tempdir()?;
        let mut cmd = Command::new(bins::gateway_bin()?);
        cmd.arg("serve").args(["--listen", "127.0.0.1:0", "--tls", "self-signed", "--data-dir"]);
        cmd.arg(logs.path().join("data")).args(extra);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("NIMBUS_") || k.starts_with("AWS_") {
                cmd.env_remove(k.as_ref());
            }
        }
        cmd.env("NIMBUS_ADMIN_PASSWORD", ADMIN_PASSWORD);
        cmd.stdin(Stdio::null())
            .stdout(std::fs::File::create(logs.path().join("gateway.stdout"))?)
            .stderr(std::fs::File::create(logs.path().join("gateway.stderr"))?)
            .kill_on_drop(true);
        let mut child = cmd.spawn().context("cannot start the gateway")?;
        let deadline = Instant::now() + Duration::from_secs(90);
        let url = loop {
            let out = std::fs::read_to_string(logs.path().join("gateway.stdout")).unwrap_or_default();
            if let Some((_, rest)) = out.lines().find_map(|l| l.split_once("listening on ")) {
                break rest.split_whitespace().next().unwrap_or_default().trim_end_matches('/').to_string();
            }
            if let Some(status) = child.try_wait()? {
                bail!("the gateway exited during start-up ({status})");
            }
            ensure!(Instant::now() < deadline, "the gateway did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        ensure!(url.starts_with("https://127.0.0.1:"), "{url}");
        Ok(TlsGateway { _child: child, url, logs })
    }

    fn cert_pem(&self) -> anyhow::Result<Vec<u8>> {
        Ok(std::fs::read(self.logs.path().join("data/tls/cert.pem"))?)
    }

    fn print_logs(&self) {
        let p: PathBuf = self.logs.path().join("gateway.stderr");
        eprintln!("---- gateway stderr ----\n{}\n---- end ----", tail_file(&p, 60));
    }
}

/// A TLS connection to `addr` that trusts the gateway's certificate and offers only `h2`.
async fn h2_tls(addr: &str, cert_pem: &[u8]) -> anyhow::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    use base64::Engine;
    let b64: String = std::str::from_utf8(cert_pem)?.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD.decode(b64)?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from(der))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg)).connect(name, tcp).await?;
    ensure!(tls.get_ref().1.alpn_protocol() == Some(b"h2"), "the gateway did not choose HTTP/2");
    Ok(tls)
}

/// A raw HTTP/2 frame.
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const REFUSED_STREAM: u32 = 0x7;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

async fn read_frame(s: &mut (impl AsyncRead + Unpin)) -> anyhow::Result<Frame> {
    let mut h = [0u8; 9];
    s.read_exact(&mut h).await.context("reading a frame header")?;
    let len = (h[0] as usize) << 16 | (h[1] as usize) << 8 | h[2] as usize;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).await?;
    let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
    Ok(Frame { kind: h[3], flags: h[4], stream, payload })
}

/// A GET's header block in HPACK without Huffman coding or indexing (RFC 7541 §6.2.2):
/// `:method GET` and `:scheme https` from the static table, the rest as literals.
fn get_headers(path: &str, token: &str) -> Vec<u8> {
    fn lit(out: &mut Vec<u8>, s: &str) {
        assert!(s.len() < 127, "one-byte HPACK length");
        out.push(s.len() as u8);
        out.extend_from_slice(s.as_bytes());
    }
    let mut b = vec![0x82, 0x87];
    b.push(0x04); // :path, name from static index 4
    lit(&mut b, path);
    b.push(0x01); // :authority, static index 1
    lit(&mut b, "127.0.0.1");
    b.push(0x00);
    lit(&mut b, "authorization");
    lit(&mut b, &format!("Bearer {token}"));
    b
}

/// Opens an HTTP/2 connection and completes the SETTINGS exchange; returns the server's
/// SETTINGS_MAX_CONCURRENT_STREAMS.
async fn h2_handshake(s: &mut (impl AsyncRead + AsyncWrite + Unpin)) -> anyhow::Result<Option<u32>> {
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await?;
    s.write_all(&frame(SETTINGS, 0, 0, &[])).await?;
    let (mut max_streams, mut got_settings, mut got_ack) = (None, false, false);
    while !(got_settings && got_ack) {
        let f = read_frame(s).await?;
        match (f.kind, f.flags & ACK) {
            (SETTINGS, 0) => {
                for p in f.payload.chunks(6) {
                    if p.len() == 6 && u16::from_be_bytes([p[0], p[1]]) == 0x3 {
                        max_streams = Some(u32::from_be_bytes([p[2], p[3], p[4], p[5]]));
                    }
                }
                s.write_all(&frame(SETTINGS, ACK, 0, &[])).await?;
                got_settings = true;
            }
            (SETTINGS, _) => got_ack = true,
            _ => {}
        }
    }
    Ok(max_streams)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_streams_over_tls_are_capped() -> anyhow::Result<()> {
    if !Backend::SqliteLocal.should_run() {
        return Ok(());
    }
    let gw = TlsGateway::start(&["--http2-max-streams", "4", "--idle-timeout", "3s"]).await?;
    let outcome = tokio::time::timeout(Duration::from_secs(180), h2_body(&gw)).await;
    let r = match outcome {
        Ok(r) => r,
        Err(_) => Err(anyhow::anyhow!("the test did not finish within 180 s")),
    };
    if r.is_err() {
        gw.print_logs();
    }
    r
}

async fn h2_body(gw: &TlsGateway) -> anyhow::Result<()> {
    let pem = gw.cert_pem()?;
    let client =
        reqwest::Client::builder().no_proxy().add_root_certificate(reqwest::Certificate::from_pem(&pem)?).build()?;
    let r = client
        .post(format!("{}/api/v1/auth/login", gw.url))
        .json(&serde_json::json!({"username": "admin", "password": ADMIN_PASSWORD}))
        .send()
        .await?;
    ensure!(r.version() == reqwest::Version::HTTP_2, "{:?}", r.version());
    let login: serde_json::Value = r.json().await?;
    let token = login["token"].as_str().context("token")?.to_string();
    let feed: serde_json::Value =
        client.get(format!("{}/api/v1/changes", gw.url)).bearer_auth(&token).send().await?.json().await?;
    let cursor = feed["cursor"].as_str().context("cursor")?.to_string();
    let poll = format!("/api/v1/changes?cursor={cursor}&wait=3");

    // Raw frames: ten long polls at once on a connection that allows four.
    let addr = host_port(&gw.url)?;
    let mut s = h2_tls(&addr, &pem).await?;
    ensure!(h2_handshake(&mut s).await? == Some(4), "the server announces its stream cap");
    let streams: Vec<u32> = (0..10).map(|i| 1 + 2 * i).collect();
    let mut burst = Vec::new();
    for id in &streams {
        burst.extend(frame(HEADERS, END_HEADERS | END_STREAM, *id, &get_headers(&poll, &token)));
    }
    s.write_all(&burst).await?;
    let (mut answered, mut refused) = (BTreeSet::new(), BTreeSet::new());
    let mut done: HashSet<u32> = HashSet::new();
    while done.len() < streams.len() {
        let f = read_frame(&mut s).await?;
        match f.kind {
            HEADERS if f.payload.first() == Some(&0x88) => {
                answered.insert(f.stream);
            }
            HEADERS => bail!("stream {}: a response other than 200", f.stream),
            RST_STREAM => {
                let code = u32::from_be_bytes(f.payload[..4].try_into()?);
                ensure!(code == REFUSED_STREAM, "stream {} reset with {code}", f.stream);
                refused.insert(f.stream);
                done.insert(f.stream);
            }
            GOAWAY => bail!("the server closed the connection (GOAWAY)"),
            PING if f.flags & ACK == 0 => s.write_all(&frame(PING, ACK, 0, &f.payload)).await?,
            _ => {}
        }
        if matches!(f.kind, DATA | HEADERS) && f.flags & END_STREAM != 0 {
            done.insert(f.stream);
        }
    }
    println!("answered {answered:?}, refused {refused:?}");
    ensure!(answered.len() == 4 && refused.len() == 6, "answered {answered:?}, refused {refused:?}");
    ensure!(answered.iter().all(|id| *id <= 7), "the first four streams are the ones served: {answered:?}");
    // The connection still serves once streams are free.
    s.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, 21, &get_headers("/api/v1/me", &token))).await?;
    loop {
        let f = read_frame(&mut s).await?;
        if f.kind == HEADERS && f.stream == 21 {
            ensure!(f.payload.first() == Some(&0x88), "GET /api/v1/me on the same connection");
            break;
        }
        ensure!(f.kind != RST_STREAM && f.kind != GOAWAY, "frame {} on a free connection", f.kind);
    }
    // An idle HTTP/2 connection is closed after the idle timeout.
    let after = closed_within(&mut s, Duration::from_secs(30)).await?;
    println!("an idle HTTP/2 connection was closed after {after:?}");
    // A TLS connection that never completes its handshake is closed (10 s handshake limit).
    let mut silent = TcpStream::connect(&addr).await?;
    closed_within(&mut silent, Duration::from_secs(30)).await.context("a silent TLS connection")?;

    // A real client queues what the cap does not allow: twelve long polls on one connection.
    let polls = (0..12).map(|_| {
        let (client, url, token) = (client.clone(), format!("{}{poll}", gw.url), token.clone());
        async move {
            let r = client.get(url).bearer_auth(token).send().await?;
            ensure!(r.status() == 200 && r.version() == reqwest::Version::HTTP_2, "{r:?}");
            anyhow::Ok(())
        }
    });
    futures::future::try_join_all(polls).await?;
    let r = client.get(format!("{}/healthz", gw.url)).send().await?;
    ensure!(r.status() == 200);
    Ok(())
}
