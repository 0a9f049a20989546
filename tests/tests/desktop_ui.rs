//! The desktop app's front end in a real browser: client/desktop/ui/e2e/app.e2e.mjs
//! (playwright-core driving Debian's chromium) against the UI's mock back end: sign-in with a
//! certificate prompt and a wrong password, mount, status (uploads, errors, conflicts), the
//! pending-uploads warning on sign-out, free up space, unmount, sign out. Needs `npm ci` and
//! `npm run build` in client/desktop/ui (infra/desktop-ui.sh; infra/test.sh runs it).
//! Screenshots: client/desktop/ui/e2e-artifacts/.
//!
//! The real back end (nimbus-desktop-core) is tested against a real gateway and FUSE mount in
//! tests/tests/desktop.rs.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, ensure};

fn ui() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../client/desktop/ui")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn desktop_ui_in_chromium() -> anyhow::Result<()> {
    let ui = ui();
    ensure!(ui.join("dist/index.html").exists(), "build the UI first: infra/desktop-ui.sh");
    ensure!(ui.join("node_modules/playwright-core").exists(), "install the UI's packages: infra/desktop-ui.sh");
    let run = tokio::process::Command::new("node").arg("e2e/app.e2e.mjs").current_dir(&ui).kill_on_drop(true).output();
    let out = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .context("the browser test did not finish within 5 minutes")?
        .context("cannot run node")?;
    let log =
        format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    ensure!(out.status.success(), "the browser test failed ({}):\n{log}", out.status);
    ensure!(
        String::from_utf8_lossy(&out.stdout).contains("all steps passed"),
        "the browser test stopped early:\n{log}"
    );
    for shot in ["01-sign-in-certificate.png", "03-main-window.png"] {
        let p = ui.join("e2e-artifacts").join(shot);
        ensure!(std::fs::metadata(&p).map(|m| m.len() > 1000).unwrap_or(false), "no screenshot {}", p.display());
    }
    println!("{log}");
    Ok(())
}
