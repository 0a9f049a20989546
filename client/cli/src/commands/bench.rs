//! `nimbus bench`: thin wrapper over the nimbus-bench crate; writes report.json and
//! report.html to --output and prints the table.

use anyhow::{Context, Result, bail};
use nimbus_bench::{Job, Options, S3Options};

use crate::cli::BenchArgs;
use crate::commands::connect;

pub async fn bench(args: &BenchArgs) -> Result<()> {
    let job = match (&args.job, &args.preset) {
        (Some(file), _) => {
            let text =
                std::fs::read_to_string(file).with_context(|| format!("cannot read job file {}", file.display()))?;
            Job::parse(&text)?
        }
        (None, preset) => Job::preset(preset.as_deref().unwrap_or("quick"))?,
    };
    let (session, client) = connect()?;
    let s3 = match (&args.s3_endpoint, &args.s3_bucket) {
        (Some(endpoint), Some(bucket)) => Some(S3Options {
            endpoint: endpoint.clone(),
            bucket: bucket.clone(),
            access_key: std::env::var("AWS_ACCESS_KEY_ID").context("--s3-endpoint needs AWS_ACCESS_KEY_ID")?,
            secret_key: std::env::var("AWS_SECRET_ACCESS_KEY").context("--s3-endpoint needs AWS_SECRET_ACCESS_KEY")?,
            region: std::env::var("AWS_REGION")
                .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|_| "us-east-1".into()),
        }),
        (None, None) => None,
        _ => bail!("--s3-endpoint and --s3-bucket go together"),
    };
    let disk_dir = match &args.disk_dir {
        Some(d) => d.clone(),
        None => {
            dirs::cache_dir().context("cannot find a cache directory; pass --disk-dir")?.join("nimbus").join("bench")
        }
    };
    let opts = Options {
        client,
        gateway_url: session.url.clone(),
        path: args.path.clone(),
        disk_dir,
        mount: args.mount.clone(),
        s3,
        force: args.force,
        progress: !args.no_progress,
    };
    let report = nimbus_bench::run(&job, &opts).await?;
    std::fs::create_dir_all(&args.output).with_context(|| format!("cannot create {}", args.output.display()))?;
    let json = args.output.join("report.json");
    let html = args.output.join("report.html");
    std::fs::write(&json, report.to_json()).with_context(|| format!("cannot write {}", json.display()))?;
    std::fs::write(&html, report.html()).with_context(|| format!("cannot write {}", html.display()))?;
    print!("{}", report.table());
    println!("wrote {} and {}", json.display(), html.display());
    Ok(())
}
