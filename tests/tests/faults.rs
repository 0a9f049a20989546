//! Store faults (PostgreSQL + MinIO only): MinIO killed during an upload, MinIO down.
//! What must hold (RELIABILITY.md): the client gets a clear error, no partial file is visible,
//! the previous version is intact, a retry after restart succeeds with the same hash; while the
//! store is down `/readyz` says so, `/healthz` stays up and requests fail fast.

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use nimbus_e2e::data::{self, generated_stream};
use nimbus_e2e::http::{Api, files_url, hash_body};
use nimbus_e2e::{GatewayOptions, backend_test};
use reqwest::Method;

const MIB: u64 = 1 << 20;
/// Requests while the store is down must fail within this (no hanging on a dead store).
const FAIL_FAST: Duration = Duration::from_secs(30);

async fn wait_ready(api: &Api, want: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = api.get("/readyz").await?;
        if r.status == want {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("/readyz did not become {want} within 60 s: {r}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

backend_test!(
    minio_killed_during_upload,
    only = postgres_s3,
    opts = GatewayOptions::default().timeout(Duration::from_secs(900)),
    |gw| async move {
        let minio = gw.minio().context("a postgres_s3 gateway has a MinIO")?;
        let (_, api) = gw.user("alice", None).await?;
        let prev = data::bytes("previous version", (3 * MIB) as usize);
        let e1 = api.put_file("/big.bin", prev.clone()).await?.entry(201)?;

        // 200 MiB sent slowly (256 KiB every 5 ms: at most ~50 MiB/s, at least 4 s).
        let len = 200 * MIB;
        let (stream, _) = generated_stream("fault upload", len, 256 << 10, Some(Duration::from_millis(5)));
        let upload = tokio::spawn({
            let api = api.clone();
            async move { api.req(Method::PUT, &files_url("/big.bin")).body(reqwest::Body::wrap_stream(stream)).send().await }
        });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        ensure!(!upload.is_finished(), "the upload ended before MinIO was killed: {:?}", upload.await?);
        minio.kill().await;
        let killed = Instant::now();

        let outcome = tokio::time::timeout(Duration::from_secs(180), upload)
            .await
            .context("the upload neither failed nor finished within 180 s of MinIO's death")??;
        match &outcome {
            Ok(r) => {
                ensure!(r.status >= 500, "an upload across a store crash must fail, got: {r}");
                r.error_detail()?;
                println!("upload after the kill: {} in {:.1} s", r.status, killed.elapsed().as_secs_f64());
            }
            Err(e) => {
                println!("upload after the kill: connection error in {:.1} s: {e:#}", killed.elapsed().as_secs_f64())
            }
        }

        // No half file: the metadata still shows the previous version.
        let st = api.stat("/big.bin").await?.entry(200)?;
        ensure!(
            st.version == e1.version && st.size == prev.len() as u64,
            "after the failed upload: {st:?}, before {e1:?}"
        );
        let vl: nimbus_proto::wire::VersionList =
            api.get(&format!("/api/v1/versions/{}", nimbus_e2e::encode_path("/big.bin"))).await?.ok(200)?;
        ensure!(vl.versions.len() == 1, "a failed upload left a version: {:?}", vl.versions);

        // Store down: liveness yes, readiness no.
        let h = api.get("/healthz").await?;
        h.check(200)?;
        let r = api.get("/readyz").await?;
        r.check(503)?;
        r.value().with_context(|| format!("/readyz must answer JSON: {r}"))?;

        minio.restart().await?;
        wait_ready(&api, 200).await?;
        let r = api.get_file("/big.bin").await?;
        r.check(200)?;
        ensure!(r.body.as_ref() == prev.as_slice(), "the previous version is not intact");

        // The same upload again, now at full speed.
        let (stream, sent) = generated_stream("fault upload", len, 1 << 20, None);
        let r = api.req(Method::PUT, &files_url("/big.bin")).body(reqwest::Body::wrap_stream(stream)).send().await?;
        let e2 = r.entry(200)?;
        ensure!(e2.size == len && e2.version != e1.version, "{e2:?}");
        let sent = sent.get().context("the retry body was not sent to its end")?;
        let (what, resp) = api.req(Method::GET, &files_url("/big.bin")).send_streaming().await?;
        ensure!(resp.status() == 200, "{what}: {}", resp.status());
        let (n, got) = hash_body(&what, resp).await?;
        ensure!(n == len && got == sent, "the retried upload's content differs");
        Ok(())
    }
);

backend_test!(
    store_down,
    only = postgres_s3,
    opts = GatewayOptions::default().timeout(Duration::from_secs(600)),
    |gw| async move {
        let minio = gw.minio().context("a postgres_s3 gateway has a MinIO")?;
        let (_, api) = gw.user("alice", None).await?;
        api.get("/readyz").await?.check(200)?;
        let body = data::bytes("store down", (5 * MIB) as usize);
        api.put_file("/f.bin", body.clone()).await?.entry(201)?;

        minio.kill().await;
        api.get("/healthz").await?.check(200)?;
        let r = api.get("/readyz").await?;
        r.check(503)?;
        let v = r.value().with_context(|| format!("/readyz must answer JSON: {r}"))?;
        ensure!(v.to_string().to_lowercase().contains("store"), "/readyz should say the store is down: {r}");

        // Requests needing the store fail fast with 503 store_unavailable; metadata still answers.
        // (Failures are collected so one run reports them all.)
        let mut failures = Vec::new();
        let t = Instant::now();
        let (what, resp) = api.req(Method::GET, &files_url("/f.bin")).timeout(FAIL_FAST).send_streaming().await?;
        let status = resp.status().as_u16();
        match hash_body(&what, resp).await {
            Ok((n, _)) if status == 200 => {
                failures.push(format!("{what}: 200 with {n} bytes while the store is down (want 503)"))
            }
            Err(e) => failures.push(format!(
                "{what}: answered {status} and then broke the body ({e:#}); want a 503 store_unavailable \
                 before any content is promised (the body is at least not completed short)"
            )),
            Ok(_) if status != 503 => failures.push(format!("{what}: {status}, want 503 store_unavailable")),
            Ok(_) => {}
        }
        let r =
            api.req(Method::PUT, &files_url("/g.bin")).body(data::bytes("new", 1000)).timeout(FAIL_FAST).send().await?;
        if let Err(e) = r.check_error(503, "store_unavailable") {
            failures.push(format!("{e:#}"));
        }
        let r = api
            .req(Method::GET, &format!("/api/v1/blocks/{}", data::hash_hex(&body[..4 << 20])))
            .timeout(FAIL_FAST)
            .send()
            .await?;
        if let Err(e) = r.check_error(503, "store_unavailable") {
            failures.push(format!("{e:#}"));
        }
        ensure!(t.elapsed() < FAIL_FAST, "requests took {:?} to fail", t.elapsed());
        api.stat("/g.bin").await?.check_error(404, "not_found")?;
        api.stat("/f.bin").await?.entry(200)?;
        api.get("/api/v1/me").await?.check(200)?;

        minio.restart().await?;
        wait_ready(&api, 200).await?;
        let r = api.get_file("/f.bin").await?;
        ensure!(r.status == 200 && r.body.as_ref() == body.as_slice(), "after restart: {}", r.status);
        api.put_file("/g.bin", "works again").await?.entry(201)?;
        ensure!(failures.is_empty(), "while the store was down:\n{}", failures.join("\n"));
        Ok(())
    }
);
