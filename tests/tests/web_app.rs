//! The users' web app (admin-ui/web, built to admin-ui/dist-web and embedded in the gateway by
//! its build script) at `/`, beside the console at `/admin`: the embedded copy with its own
//! Content-Security-Policy, the page saying how to build it when a `--web-ui-dir` holds none, and
//! the whole app in Debian's chromium (admin-ui/e2e/web.e2e.mjs, playwright-core).

use anyhow::ensure;
use nimbus_e2e::browser::{admin_ui, check_entry_script, run_e2e_script};
use nimbus_e2e::{ADMIN_PASSWORD, Backend, GatewayOptions, Resp, run_on};

fn header(r: &Resp, name: &str) -> String {
    r.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}

/// A gateway started without `--web-ui-dir` serves the app built into it at `/` and at each
/// client-side route, its hashed script, and still the console at `/admin`; the API, the
/// public link pages and unknown paths answer as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_embedded_web_app_and_the_console() -> anyhow::Result<()> {
    run_on(Backend::SqliteLocal, GatewayOptions::default(), |gw| async move {
        let api = gw.api().anonymous();
        for path in ["/", "/files", "/files/My%20Docs/2026", "/trash", "/settings", "/settings/security"] {
            let r = api.get(path).await?;
            r.check(200)?;
            ensure!(r.headers["content-type"] == "text/html; charset=utf-8", "{path}: {r} {:?}", r.headers);
            ensure!(r.headers["cache-control"] == "no-cache", "{path}: {:?}", r.headers);
            ensure!(
                r.text().contains("<title>Nimbus</title>") && r.text().contains("<div id=\"root\">"),
                "{path}: not the web app: {r}"
            );
            let csp = header(&r, "content-security-policy");
            ensure!(
                csp.contains("script-src 'self' 'wasm-unsafe-eval'")
                    && csp.contains("img-src 'self' data: blob:")
                    && csp.contains("frame-ancestors 'none'")
                    && !csp.contains("sandbox"),
                "{path}: not the web app's CSP: {csp}"
            );
            ensure!(header(&r, "x-frame-options") == "DENY", "{path}: {:?}", r.headers);
        }
        check_entry_script(&api, "/").await?;

        // The console stays at /admin, with its own (stricter) policy.
        let r = api.get("/admin/").await?;
        r.check(200)?;
        ensure!(r.text().contains("<title>Nimbus admin</title>"), "not the console: {r}");
        let csp = header(&r, "content-security-policy");
        ensure!(csp.contains("script-src 'self';") && !csp.contains("wasm-unsafe-eval"), "the console's CSP: {csp}");

        // Everything else answers as before the app: JSON 404s, the public link side.
        let r = api.get("/api/v1/no-such-thing").await?;
        r.check(404)?;
        ensure!(r.text().contains("\"not_found\""), "{r}");
        api.get("/no-such-page").await?.check(404)?;
        api.get(&format!("/s/{}", "a".repeat(43))).await?.check(404)?;
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn says_how_to_build_a_missing_web_app() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let opts = GatewayOptions::default().arg("--web-ui-dir").arg(dir.path().display().to_string());
    run_on(Backend::SqliteLocal, opts, |gw| async move {
        for path in ["/", "/files/Docs"] {
            let r = gw.api().anonymous().get(path).await?;
            r.check(503)?;
            ensure!(r.text().contains("npm run build") && r.text().contains("--web-ui-dir"), "{r}");
        }
        // The console is not affected by the web app's directory.
        gw.api().anonymous().get("/admin/").await?.check(200)?;
        Ok(())
    })
    .await
}

/// The story of issue 19's web app in a real browser: sign in, upload a folder and a dropped
/// file, browse, sort, preview, download, rename, trash and restore, restore a version, share
/// with a colleague who then edits inside it, a password link opened signed out, S3 keys and
/// devices, a phone-width layout, all under the app's CSP. Screenshots go to
/// admin-ui/e2e-artifacts/web-*.png; with NIMBUS_UPDATE_SHOTS=1 the main screens also replace
/// docs/web/*.png (docs/WEB.md shows them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_app_in_chromium() -> anyhow::Result<()> {
    run_on(Backend::SqliteLocal, GatewayOptions::default(), |gw| async move {
        let base = gw.api().base().trim_end_matches('/').to_string();
        let mut args = vec![base, ADMIN_PASSWORD.to_string()];
        if std::env::var_os("NIMBUS_UPDATE_SHOTS").is_some_and(|v| v == "1") {
            args.push(admin_ui().join("../docs/web").display().to_string());
        }
        let log = run_e2e_script("e2e/web.e2e.mjs", &args).await?;
        println!("{log}");
        Ok(())
    })
    .await
}
