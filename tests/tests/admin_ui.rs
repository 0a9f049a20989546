//! The admin console in a real browser: admin-ui/e2e/console.e2e.mjs (playwright-core driving
//! Debian's chromium) against a real gateway serving the console built into it (gateway/build.rs
//! builds admin-ui and runs `npm ci`, which also installs playwright-core); screenshots:
//! admin-ui/e2e-artifacts/.

use std::path::PathBuf;

use anyhow::{Context, ensure};
use nimbus_e2e::{ADMIN_PASSWORD, Backend, GatewayOptions, run_on};

fn admin_ui() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../admin-ui")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_in_chromium() -> anyhow::Result<()> {
    let ui = admin_ui();
    ensure!(ui.join("node_modules/playwright-core").exists(), "install the console's packages: cd admin-ui && npm ci");
    // One history point a second, so the dashboard's charts have data within the run.
    let opts = GatewayOptions::default().arg("--stats-interval-secs").arg("1");
    run_on(Backend::SqliteLocal, opts, |gw| async move {
        let base = gw.api().base().trim_end_matches('/').to_string();
        let out = tokio::process::Command::new("node")
            .arg("e2e/console.e2e.mjs")
            .arg(&base)
            .arg(ADMIN_PASSWORD)
            .current_dir(admin_ui())
            .output()
            .await
            .context("cannot run node")?;
        let log = format!(
            "stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ensure!(out.status.success(), "the browser test failed ({}):\n{log}", out.status);
        println!("{log}");
        Ok(())
    })
    .await
}
