//! The admin console in a real browser: admin-ui/e2e/console.e2e.mjs (playwright-core driving
//! Debian's chromium) against a real gateway serving the console built into it (gateway/build.rs
//! builds admin-ui and runs `npm ci`, which also installs playwright-core); screenshots:
//! admin-ui/e2e-artifacts/.

use nimbus_e2e::browser::run_e2e_script;
use nimbus_e2e::{ADMIN_PASSWORD, Backend, GatewayOptions, run_on};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_in_chromium() -> anyhow::Result<()> {
    // One history point a second, so the dashboard's charts have data within the run.
    let opts = GatewayOptions::default().arg("--stats-interval-secs").arg("1");
    run_on(Backend::SqliteLocal, opts, |gw| async move {
        let base = gw.api().base().trim_end_matches('/').to_string();
        let log = run_e2e_script("e2e/console.e2e.mjs", &[base, ADMIN_PASSWORD.to_string()]).await?;
        println!("{log}");
        Ok(())
    })
    .await
}
