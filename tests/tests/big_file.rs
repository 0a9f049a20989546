//! One 2 GiB file streamed up and down through the gateway (SQLite + local store only): the
//! content is generated on the fly and hashed on both sides, never held whole in memory or on
//! the test's disk; the gateway's peak RSS must stay under 512 MiB.
//!
//! Slow (about a minute); skip it with `cargo test -p nimbus-e2e -- --skip big_file`.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use nimbus_e2e::data::generated_stream;
use nimbus_e2e::http::{files_url, hash_body};
use nimbus_e2e::{GatewayOptions, backend_test};
use reqwest::Method;

const LEN: u64 = 2 << 30;
const RSS_LIMIT_KIB: u64 = 512 * 1024;

backend_test!(
    big_file_2gib,
    only = sqlite_local,
    opts = GatewayOptions::default().timeout(Duration::from_secs(1800)),
    |gw| async move {
        let (_, api) = gw.user("big", None).await?;
        let idle_kib = gw.rss_kib()?;

        let (stream, sent) = generated_stream("big-file-2gib", LEN, 1 << 20, None);
        let start = Instant::now();
        let r =
            api.req(Method::PUT, &files_url("/big/2gib.bin")).body(reqwest::Body::wrap_stream(stream)).send().await?;
        let up = start.elapsed();
        let e = r.entry(201)?;
        ensure!(e.size == LEN, "stored size {} != {LEN}", e.size);
        let sent = sent.get().context("the request body was not sent to its end")?;

        let start = Instant::now();
        let (what, resp) = api.req(Method::GET, &files_url("/big/2gib.bin")).send_streaming().await?;
        ensure!(resp.status() == 200, "{what}: {}", resp.status());
        ensure!(resp.content_length() == Some(LEN), "{what}: Content-Length {:?}", resp.content_length());
        let (got_len, got) = hash_body(&what, resp).await?;
        let down = start.elapsed();
        ensure!(got_len == LEN, "downloaded {got_len} bytes, want {LEN}");
        ensure!(got == sent, "the downloaded content differs from the uploaded one");

        let peak = gw.peak_rss_kib()?;
        let mib = |kib: u64| kib as f64 / 1024.0;
        let rate = |d: Duration| (LEN as f64 / (1u64 << 20) as f64) / d.as_secs_f64();
        println!(
            "big_file_2gib: up {:.1} s ({:.0} MiB/s), down {:.1} s ({:.0} MiB/s); gateway RSS idle {:.0} MiB, peak (VmHWM) {:.0} MiB",
            up.as_secs_f64(),
            rate(up),
            down.as_secs_f64(),
            rate(down),
            mib(idle_kib),
            mib(peak)
        );
        ensure!(peak < RSS_LIMIT_KIB, "gateway peak RSS {:.0} MiB exceeds 512 MiB", mib(peak));
        Ok(())
    }
);
