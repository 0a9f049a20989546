//! The front ends' browser tests (admin-ui/e2e/*.e2e.mjs: playwright-core driving Debian's
//! chromium) run from Rust tests against a gateway the harness started.

use std::path::PathBuf;

use anyhow::{Context, ensure};

/// admin-ui/, where the scripts and their node_modules are.
pub fn admin_ui() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../admin-ui")
}

/// Runs `node SCRIPT ARGS...` in admin-ui/ and fails with its output unless it succeeds; its
/// output otherwise. The gateway's build script ran `npm ci` there, which installs
/// playwright-core.
pub async fn run_e2e_script(script: &str, args: &[String]) -> anyhow::Result<String> {
    let ui = admin_ui();
    ensure!(ui.join("node_modules/playwright-core").exists(), "install the packages: cd admin-ui && npm ci");
    let out = tokio::process::Command::new("node")
        .arg(script)
        .args(args)
        .current_dir(&ui)
        .output()
        .await
        .context("cannot run node")?;
    let log =
        format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    ensure!(out.status.success(), "the browser test {script} failed ({}):\n{log}", out.status);
    Ok(log)
}

/// The entry script Vite named by its content hash in the front end's page at `page`
/// (`/admin/` → `/admin/assets/index-B88DHIcr.js`): fetched, and checked to be served as a
/// script (its type, cached for good). An unknown name under the same `assets/` is a 404.
pub async fn check_entry_script(api: &crate::Api, page: &str) -> anyhow::Result<crate::Resp> {
    let html = api.get(page).await?.text();
    let prefix = format!("{}assets/index-", page);
    let script = html
        .split('"')
        .find(|s| s.starts_with(&prefix) && s.ends_with(".js"))
        .ok_or_else(|| anyhow::anyhow!("no hashed entry script in the page {page}: {html}"))?
        .to_string();
    let r = api.get(&script).await?;
    r.check(200)?;
    ensure!(r.headers["content-type"] == "text/javascript; charset=utf-8", "{r} {:?}", r.headers);
    ensure!(r.headers["cache-control"] == "public, max-age=31536000, immutable", "{r} {:?}", r.headers);
    ensure!(r.body.len() > 1000 && !r.text().trim_start().starts_with('<'), "not a script: {r}");
    api.get(&format!("{prefix}0000.js")).await?.check(404)?;
    Ok(r)
}
