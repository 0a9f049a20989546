//! Drives a run: safety checks, data on every target, the steps (each workload against each
//! target in turn, so all see the same data under the same load), the report, the cleanup.
//!
//! mount-cold: for every workload that reads, a fresh data set (new seed, so new block
//! hashes the drive has never cached) is uploaded through the gateway and read through the
//! mount; mount-warm then reads the same data again after one full pass.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use indicatif::{ProgressBar, ProgressStyle};
use nimbus_client::{Client, RemotePath};
use rand::{Rng, RngCore, SeedableRng};

use crate::error::{Error, Result};
use crate::job::Job;
use crate::report::{Report, SCHEMA_VERSION, Skipped, StepResult, speedups};
use crate::stats::{Recorder, cache_counters, hit_ratio, process_cpu_seconds};
use crate::targets::{self, Backend, Target};
use crate::verify::{self, Dataset, LARGE_NAME, small_name};
use crate::workload::{Layout, Picker, Workload};

#[derive(Debug, Clone)]
pub struct S3Options {
    pub endpoint: String,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: String,
    pub region: String,
}

pub struct Options {
    pub client: Client,
    pub gateway_url: String,
    /// Folder in the user's space; each run uses `<path>/<run-id>`.
    pub path: String,
    pub disk_dir: PathBuf,
    pub mount: Option<PathBuf>,
    pub s3: Option<S3Options>,
    pub force: bool,
    pub progress: bool,
}

/// Runs the job; the bench data is removed afterwards, also when the run fails.
pub async fn run(job: &Job, opts: &Options) -> Result<Report> {
    job.validate()?;
    let started_at = now();
    let mut rng = rand::rng();
    let run_id = format!("{}-{:04x}", time::OffsetDateTime::now_utc().unix_timestamp(), rng.random::<u16>());
    safety_checks(opts).await?;
    let root = format!("{}/{run_id}", opts.path.trim_end_matches('/'));
    let disk_root = opts.disk_dir.join(&run_id);
    let s3 = opts.s3.as_ref().map(s3_client);
    let prefix = format!("{}/{run_id}", opts.path.trim_matches('/'));

    let outcome = tokio::select! {
        r = run_inner(job, opts, &run_id, &root, &disk_root, s3.as_ref(), &prefix) => r,
        _ = tokio::signal::ctrl_c() => Err(Error::Interrupted),
    };
    let cleaned = cleanup(opts, &root, &disk_root, s3.as_ref(), &prefix).await;
    let (results, skipped, names) = outcome?;
    cleaned?;
    Ok(Report {
        schema_version: SCHEMA_VERSION,
        tool: format!("nimbus bench {}", env!("CARGO_PKG_VERSION")),
        run_id,
        job: job.name.clone(),
        started_at,
        finished_at: now(),
        gateway: opts.gateway_url.clone(),
        targets: names,
        skipped,
        speedups: speedups(&results),
        results,
    })
}

fn now() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

fn s3_client(o: &S3Options) -> aws_sdk_s3::Client {
    use aws_sdk_s3::config::{Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation};
    let conf = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .region(Region::new(o.region.clone()))
        .endpoint_url(&o.endpoint)
        .credentials_provider(Credentials::new(&o.access_key, &o.secret_key, None, None, "nimbus-bench"))
        .force_path_style(true)
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}

/// Refuses folders that hold anything else, unless `force`.
async fn safety_checks(opts: &Options) -> Result<()> {
    if opts.force {
        return Ok(());
    }
    let path = remote(&opts.path)?;
    match opts.client.list_dir(&path).await {
        Ok(entries) if !entries.is_empty() => {
            return Err(Error::Unsafe(format!(
                "{} in your space already holds {} entries (an interrupted run?); remove them or pass --force",
                opts.path,
                entries.len()
            )));
        }
        Ok(_) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e.into()),
    }
    if let Ok(mut rd) = std::fs::read_dir(&opts.disk_dir)
        && rd.next().is_some()
    {
        return Err(Error::Unsafe(format!(
            "{} already holds files; choose an empty --disk-dir or pass --force",
            opts.disk_dir.display()
        )));
    }
    if let Some(mp) = &opts.mount
        && !mp.is_dir()
    {
        return Err(Error::Unsafe(format!("--mount {} is not a mounted folder", mp.display())));
    }
    Ok(())
}

fn remote(p: &str) -> Result<RemotePath> {
    RemotePath::parse(p).map_err(|e| Error::Job(format!("`{p}` is not a valid path: {e}")))
}

async fn cleanup(
    opts: &Options,
    root: &str,
    disk_root: &Path,
    s3: Option<&aws_sdk_s3::Client>,
    prefix: &str,
) -> Result<()> {
    let mut first_err = None;
    if disk_root.exists()
        && let Err(e) = tokio::fs::remove_dir_all(disk_root).await
    {
        first_err.get_or_insert(Error::io(format!("cannot remove {}", disk_root.display()), e));
    }
    if let (Some(s3), Some(o)) = (s3, &opts.s3)
        && let Err(e) = targets::store_cleanup(s3, &o.bucket, prefix).await
    {
        first_err.get_or_insert(e);
    }
    match purge_remote(&opts.client, root).await {
        Ok(()) => {}
        Err(e) => {
            first_err.get_or_insert(e);
        }
    }
    // The parent folder goes too when the run left it empty.
    if let Ok(parent) = remote(&opts.path)
        && let Ok(entries) = opts.client.list_dir(&parent).await
        && entries.is_empty()
    {
        let _ = purge_remote(&opts.client, &opts.path).await;
    }
    first_err.map_or(Ok(()), Err)
}

/// Deletes `path` and purges it from the trash, so the run leaves no quota use behind.
async fn purge_remote(client: &Client, path: &str) -> Result<()> {
    let p = remote(path)?;
    match client.delete(&p).await {
        Ok(()) => {}
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    let want = format!("/{}", path.trim_start_matches('/'));
    for t in client.trash().await? {
        if t.original_path == want {
            client.purge_trash(t.id).await?;
        }
    }
    Ok(())
}

type Inner = (Vec<StepResult>, Vec<Skipped>, Vec<String>);

async fn run_inner(
    job: &Job,
    opts: &Options,
    run_id: &str,
    root: &str,
    disk_root: &Path,
    s3: Option<&aws_sdk_s3::Client>,
    prefix: &str,
) -> Result<Inner> {
    let seed: u64 = rand::rng().random();
    let sizes = job.small_file_sizes();
    let data = Dataset::generate(seed, job.file_size, &sizes, job.small_files);
    let mut skipped = Vec::new();
    let mut list: Vec<Target> = Vec::new();
    let data_root = format!("{root}/data");

    match (s3, &opts.s3) {
        (Some(s3), Some(o)) => list.push(Target {
            name: targets::STORE,
            backend: Backend::Store { s3: s3.clone(), bucket: o.bucket.clone(), prefix: format!("{prefix}/data") },
        }),
        _ => {
            skipped.push(Skipped { target: targets::STORE.into(), reason: "no --s3-endpoint/--s3-bucket given".into() })
        }
    }
    let cached = Target {
        name: targets::GATEWAY_CACHED,
        backend: Backend::Gateway { client: opts.client.clone(), root: data_root.clone(), bypass: false },
    };
    let uncached = Target {
        name: targets::GATEWAY_UNCACHED,
        backend: Backend::Gateway { client: opts.client.clone(), root: data_root.clone(), bypass: true },
    };
    let disk = Target { name: targets::DISK, backend: Backend::Fs { dir: disk_root.join("data") } };

    // Data on every target, written once each.
    put_dataset(&cached, &data).await?;
    put_dataset(&disk, &data).await?;
    if let Some(store) = list.first() {
        put_dataset(store, &data).await?;
    }
    // Bypass is admin-only: probe it, skip the target with the reason when refused.
    match uncached.read(LARGE_NAME, Some((0, 1))).await {
        Ok(_) => list.push(uncached),
        Err(Error::Gateway(e)) if e.is_forbidden() => skipped.push(Skipped {
            target: targets::GATEWAY_UNCACHED.into(),
            reason: "bypassing the gateway cache needs an administrator account".into(),
        }),
        Err(e) => return Err(e),
    }
    warm_up(&cached, &data).await?;
    list.push(cached);
    let mount_dir = opts.mount.as_ref().map(|mp| mp.join(root.trim_start_matches('/')));
    let mut names: Vec<String> = list.iter().map(|t| t.name.to_string()).collect();
    if mount_dir.is_some() {
        names.push(targets::MOUNT_COLD.into());
        names.push(targets::MOUNT_WARM.into());
    } else {
        for t in [targets::MOUNT_COLD, targets::MOUNT_WARM] {
            skipped.push(Skipped { target: t.into(), reason: "no --mount given".into() });
        }
    }
    names.push(targets::DISK.into());

    let mut results = Vec::new();
    for (k, w) in job.workloads.iter().enumerate() {
        for t in &list {
            results.push(step(t, w, job, &data, k, opts).await?);
        }
        if let Some(md) = &mount_dir {
            // A fresh data set per workload that reads: blocks the drive has never cached.
            let sub = format!("mount-{k}");
            let ds = if w.read_percent() > 0 {
                Dataset::generate(seed.wrapping_add(k as u64 + 1), job.file_size, &sizes, job.small_files)
            } else {
                data.clone()
            };
            let gw = Target {
                name: targets::GATEWAY_CACHED,
                backend: Backend::Gateway { client: opts.client.clone(), root: format!("{root}/{sub}"), bypass: false },
            };
            put_dataset(&gw, &ds).await?;
            let dir = md.join(&sub);
            wait_visible(&dir.join(LARGE_NAME), job.file_size).await?;
            let cold = Target { name: targets::MOUNT_COLD, backend: Backend::Fs { dir: dir.clone() } };
            results.push(step(&cold, w, job, &ds, k, opts).await?);
            let warm = Target { name: targets::MOUNT_WARM, backend: Backend::Fs { dir } };
            warm_up(&warm, &ds).await?;
            results.push(step(&warm, w, job, &ds, k, opts).await?);
        }
        results.push(step(&disk, w, job, &data, k, opts).await?);
    }
    tracing::debug!(run_id, "bench steps done");
    Ok((results, skipped, names))
}

/// The mount learns of files uploaded elsewhere from the change feed: wait for them.
async fn wait_visible(path: &Path, size: u64) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if tokio::fs::metadata(path).await.is_ok_and(|m| m.len() == size) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::target(
                targets::MOUNT_COLD,
                format!("{} did not appear within 60 s: is --mount a drive of the logged-in user?", path.display()),
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn put_dataset(t: &Target, data: &Dataset) -> Result<()> {
    t.mkdir("").await.or_else(|e| if matches!(t.backend, Backend::Gateway { .. }) { Err(e) } else { Ok(()) })?;
    t.write(LARGE_NAME, Bytes::from(data.large.clone())).await?;
    for (size, files) in &data.small {
        t.mkdir(&format!("small-{size}")).await?;
        futures::future::try_join_all(
            files.iter().enumerate().map(|(i, f)| t.write_owned(small_name(*size, i as u64), Bytes::from(f.clone()))),
        )
        .await?;
    }
    Ok(())
}

/// One verified pass over all of the data, so the next reads find it cached.
async fn warm_up(t: &Target, data: &Dataset) -> Result<()> {
    const CHUNK: u64 = 1 << 20;
    let len = data.large.len() as u64;
    let mut off = 0;
    while off < len {
        let n = CHUNK.min(len - off);
        let mut got = t.read(LARGE_NAME, Some((off, n))).await?;
        verify::check(
            t.name,
            || format!("{LARGE_NAME} @{off}"),
            &data.large[off as usize..(off + n) as usize],
            &mut got,
        )?;
        off += n;
    }
    for (size, files) in &data.small {
        for (i, f) in files.iter().enumerate() {
            let name = small_name(*size, i as u64);
            let mut got = t.read(&name, None).await?;
            verify::check(t.name, || name.clone(), f, &mut got)?;
        }
    }
    Ok(())
}

impl Target {
    async fn write_owned(&self, name: String, data: Bytes) -> Result<()> {
        self.write(&name, data).await
    }
}

async fn step(t: &Target, w: &Workload, job: &Job, data: &Dataset, k: usize, opts: &Options) -> Result<StepResult> {
    let writes_dir = format!("w{k}");
    if w.read_percent() < 100 {
        t.mkdir(&writes_dir).await?;
    }
    let slots = match w.layout {
        Layout::Range => (data.large.len() as u64 / w.block_size).max(1),
        Layout::Files => job.small_files,
    };
    let picker = Picker::new(w.pattern, slots);
    let max_ops = job.ops.unwrap_or(u64::MAX);
    let deadline = job.duration_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
    let pb = if opts.progress {
        let pb = ProgressBar::new(job.ops.unwrap_or(0));
        if let Ok(style) = ProgressStyle::with_template("{prefix:>17} {msg:<34} [{bar:30}] {pos}/{len} {per_sec}") {
            pb.set_style(style.progress_chars("=> "));
        }
        pb.set_prefix(t.name);
        pb.set_message(w.label());
        pb
    } else {
        ProgressBar::hidden()
    };
    let gateway = matches!(t.backend, Backend::Gateway { .. });
    let before = if gateway { opts.client.metrics_text().await.ok().map(|m| cache_counters(&m)) } else { None };
    let cpu_before = process_cpu_seconds();
    let counter = AtomicU64::new(0);
    let start = Instant::now();
    let workers = (0..w.queue_depth).map(|worker| {
        let counter = &counter;
        let picker = &picker;
        let pb = &pb;
        let writes_dir = &writes_dir;
        async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random::<u64>() ^ u64::from(worker));
            let mut rec = Recorder::new();
            let mut first_error: Option<Error> = None;
            loop {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                if n >= max_ops || deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let is_read = rng.random_range(0..100u8) < w.read_percent();
                let t0 = Instant::now();
                let outcome = if is_read {
                    read_op(t, w, data, picker.pick(n, &mut rng)).await
                } else {
                    let mut buf = vec![0u8; w.block_size as usize];
                    rng.fill_bytes(&mut buf);
                    t.write(&format!("{writes_dir}/{worker}-{n}"), Bytes::from(buf)).await
                };
                match outcome {
                    Ok(()) => {
                        rec.record(t0.elapsed().as_micros() as u64, w.block_size);
                        if is_read {
                            rec.verified += 1;
                        }
                    }
                    Err(e @ Error::Verify { .. }) => return Err(e),
                    Err(e) => {
                        rec.errors += 1;
                        first_error.get_or_insert(e);
                    }
                }
                pb.inc(1);
            }
            Ok((rec, first_error))
        }
    });
    let outcomes = futures::future::try_join_all(workers).await?;
    let elapsed = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let mut total = Recorder::new();
    let mut first_error = None;
    for (rec, err) in outcomes {
        total.merge(&rec);
        if first_error.is_none() {
            first_error = err;
        }
    }
    if total.ops == 0
        && let Some(e) = first_error
    {
        // Every operation failed: that is a broken target, not a figure.
        return Err(Error::target(t.name, format!("{}: every operation failed, first: {e}", w.label())));
    }
    let mut result = StepResult::new(t.name, w, &total, elapsed);
    result.cpu_pct = cpu_before.zip(process_cpu_seconds()).map(|(a, b)| (b - a) / elapsed.max(1e-9) * 100.0);
    if let Some(before) = before
        && let Ok(m) = opts.client.metrics_text().await
    {
        result.cache_hit_ratio = hit_ratio(before, cache_counters(&m));
    }
    Ok(result)
}

async fn read_op(t: &Target, w: &Workload, data: &Dataset, slot: u64) -> Result<()> {
    match w.layout {
        Layout::Range => {
            let off = slot * w.block_size;
            let mut got = t.read(LARGE_NAME, Some((off, w.block_size))).await?;
            let expected = &data.large[off as usize..(off + w.block_size) as usize];
            verify::check(t.name, || format!("{LARGE_NAME} @{off}+{}", w.block_size), expected, &mut got)
        }
        Layout::Files => {
            let files =
                data.small_files(w.block_size).ok_or_else(|| Error::Job("no small files of that size".into()))?;
            let name = small_name(w.block_size, slot);
            let mut got = t.read(&name, None).await?;
            verify::check(t.name, || name.clone(), &files[slot as usize % files.len()], &mut got)
        }
    }
}
