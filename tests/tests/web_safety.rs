//! What the network can make the gateway do to a browser or to its own memory:
//! - browser safety: a user's file fetched through REST, WebDAV or the S3 door never runs as a
//!   page (nosniff, a sandboxing CSP, `Content-Disposition: attachment` for anything a browser
//!   would render), errors included; the console's pages get their own CSP with
//!   `frame-ancestors 'none'`; no HSTS over plain HTTP (tests/tls.rs checks it over TLS);
//! - metrics: requests with made-up methods and paths, unauthenticated, on both listeners, add
//!   no label values and no series to `/metrics`.

use std::time::{Duration, SystemTime};

use anyhow::{Context, ensure};
use nimbus_e2e::dav::dav;
use nimbus_e2e::s3::{new_key, presign_v4};
use nimbus_e2e::{Api, GatewayOptions, Resp, backend_test};
use reqwest::Method;

const HTML: &str = "<!doctype html><script>fetch('/api/v1/me').then(r => r.text()).then(alert)</script>";
const SVG: &str = r#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.domain)</script></svg>"#;
const XML: &str = r#"<?xml version="1.0"?><x:script xmlns:x="http://www.w3.org/1999/xhtml">alert(1)</x:script>"#;

fn header(r: &Resp, name: &str) -> String {
    r.header(name).unwrap_or_default()
}

/// nosniff, the sandboxing CSP, and no HSTS (plain HTTP).
fn sandboxed(r: &Resp) -> anyhow::Result<()> {
    ensure!(header(r, "x-content-type-options") == "nosniff", "no nosniff: {r} {:?}", r.headers);
    let csp = header(r, "content-security-policy");
    ensure!(csp.contains("sandbox") && csp.contains("default-src 'none'"), "no sandbox CSP: {r} {:?}", r.headers);
    ensure!(r.header("strict-transport-security").is_none(), "HSTS over plain HTTP: {r} {:?}", r.headers);
    Ok(())
}

/// Sent as an attachment named `name`.
fn attachment(r: &Resp, name: &str) -> anyhow::Result<()> {
    let cd = header(r, "content-disposition");
    ensure!(
        cd.starts_with("attachment") && cd.contains(&format!("filename=\"{name}\"")),
        "not an attachment named {name}: {r} {:?}",
        r.headers
    );
    Ok(())
}

/// A stand-in for admin-ui/dist: the console's files are served from `--admin-ui-dir`.
fn console_dir() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("assets"))?;
    std::fs::write(dir.path().join("index.html"), "<!doctype html><title>console-index</title>")?;
    std::fs::write(dir.path().join("assets/index-abc123.js"), "console.log('x')")?;
    Ok(dir)
}

fn opts(console: &tempfile::TempDir) -> GatewayOptions {
    GatewayOptions::default()
        .arg("--s3-listen")
        .arg("127.0.0.1:0")
        .arg("--admin-ui-dir")
        .arg(console.path().display().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_safety_headers() -> anyhow::Result<()> {
    let console = console_dir()?;
    nimbus_e2e::run_on(nimbus_e2e::Backend::SqliteLocal, opts(&console), |gw| async move {
        let (_, alice) = gw.user("alice", None).await?;
        let files = [
            ("page.html", HTML.as_bytes().to_vec()),
            ("pic.svg", SVG.as_bytes().to_vec()),
            ("data.xml", XML.as_bytes().to_vec()),
            ("photo.png", b"\x89PNG\r\n\x1a\n not really a picture".to_vec()),
            ("notes.txt", b"plain words\n".to_vec()),
        ];
        for (name, body) in &files {
            alice.put_file(&format!("/site/{name}"), body.clone()).await?.check(201)?;
        }

        // REST: every file, GET and HEAD, whole and ranged, is an opaque sandboxed attachment.
        for (name, _) in &files {
            let path = format!("/api/v1/files/site/{name}");
            for r in [
                alice.get(&path).await?,
                alice.head(&path).await?,
                alice.req(Method::GET, &path).header("range", "bytes=0-3").send().await?,
            ] {
                r.check_any(&[200, 206])?;
                sandboxed(&r).with_context(|| format!("REST {name}"))?;
                attachment(&r, name).with_context(|| format!("REST {name}"))?;
                ensure!(header(&r, "content-type") == "application/octet-stream", "REST {name}: {:?}", r.headers);
            }
        }
        // A name that needs encoding keeps its exact form in filename*.
        alice.put_file("/site/ünï côde.html", HTML).await?.check(201)?;
        let r = alice.get("/api/v1/files/site/%C3%BCn%C3%AF%20c%C3%B4de.html").await?;
        r.check(200)?;
        ensure!(
            header(&r, "content-disposition").contains("filename*=UTF-8''%C3%BCn%C3%AF%20c%C3%B4de.html"),
            "{:?}",
            r.headers
        );

        // WebDAV: active types (uploaded through either door) are attachments with their type;
        // passive ones may show inline; all sandboxed.
        for (name, body) in [("dav.html", HTML), ("dav.svg", SVG)] {
            dav(&alice, "PUT", &format!("/dav/site/{name}"), &[], body.as_bytes().to_vec()).await?.check(201)?;
        }
        for (name, ty) in [
            ("dav.html", "text/html"),
            ("dav.svg", "image/svg+xml"),
            ("page.html", "text/html"),
            ("pic.svg", "image/svg+xml"),
            ("data.xml", "xml"),
        ] {
            let path = format!("/dav/site/{name}");
            for r in [
                dav(&alice, "GET", &path, &[], vec![]).await?,
                dav(&alice, "HEAD", &path, &[], vec![]).await?,
                dav(&alice, "GET", &path, &[("range", "bytes=0-3")], vec![]).await?,
            ] {
                r.check_any(&[200, 206])?;
                sandboxed(&r).with_context(|| format!("WebDAV {name}"))?;
                attachment(&r, name).with_context(|| format!("WebDAV {name}"))?;
                ensure!(header(&r, "content-type").contains(ty), "WebDAV {name}: {:?}", r.headers);
            }
        }
        for name in ["photo.png", "notes.txt"] {
            let r = dav(&alice, "GET", &format!("/dav/site/{name}"), &[], vec![]).await?;
            r.check(200)?;
            sandboxed(&r).with_context(|| format!("WebDAV {name}"))?;
            ensure!(
                r.header("content-disposition").is_none(),
                "WebDAV {name} need not be an attachment: {:?}",
                r.headers
            );
        }
        // The bodies are intact (the headers change nothing else).
        ensure!(dav(&alice, "GET", "/dav/site/dav.html", &[], vec![]).await?.text() == HTML, "WebDAV body");
        ensure!(alice.get("/api/v1/files/site/dav.svg").await?.text() == SVG, "REST body");

        // Errors and other answers are sandboxed too, JSON errors unchanged.
        let anon = alice.anonymous();
        let r = alice.get("/api/v1/files/site/missing.html").await?;
        r.check_error(404, "not_found")?;
        sandboxed(&r)?;
        let r = anon.get("/api/v1/files/site/page.html").await?;
        r.check(401)?;
        sandboxed(&r)?;
        let r = dav(&anon, "GET", "/dav/site/page.html", &[], vec![]).await?;
        r.check(401)?;
        sandboxed(&r)?;
        sandboxed(anon.get("/api/v1/info").await?.check(200)?)?;
        sandboxed(anon.get("/no/such/endpoint").await?.check(404)?)?;

        // The console: its own CSP (no sandbox: it must run), no framing, on pages and assets.
        for path in ["/admin/", "/admin/users/42", "/admin/assets/index-abc123.js"] {
            let r = anon.get(path).await?;
            r.check(200)?;
            let csp = header(&r, "content-security-policy");
            ensure!(
                csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'") && !csp.contains("sandbox"),
                "{path}: CSP {csp:?}"
            );
            ensure!(header(&r, "x-frame-options") == "DENY", "{path}: {:?}", r.headers);
            ensure!(header(&r, "x-content-type-options") == "nosniff", "{path}: {:?}", r.headers);
            ensure!(r.header("strict-transport-security").is_none(), "{path}: HSTS over plain HTTP");
        }

        // The S3 door (its own origin): nosniff and the sandbox on objects and on errors.
        let key = new_key(&alice).await?;
        let ep = gw.s3_endpoint()?;
        let url = presign_v4(&ep, &key, "GET", "/alice/site/page.html", Duration::from_secs(300), SystemTime::now())?;
        let http = reqwest::Client::new();
        let r = http.get(&url).send().await?;
        let s3 = Resp {
            what: format!("S3 GET {url}"),
            status: r.status().as_u16(),
            headers: r.headers().clone(),
            body: r.bytes().await?,
        };
        s3.check(200)?;
        ensure!(s3.text() == HTML, "S3 body");
        sandboxed(&s3)?;
        let r = http.get(format!("{ep}/alice/site/page.html")).send().await?;
        let s3 = Resp {
            what: "S3 anonymous GET".into(),
            status: r.status().as_u16(),
            headers: r.headers().clone(),
            body: r.bytes().await?,
        };
        s3.check(403)?;
        sandboxed(&s3)?;
        Ok(())
    })
    .await
}

/// `nimbus_http_*` series in a `/metrics` text.
fn http_series(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("nimbus_http_")).collect()
}

backend_test!(
    metric_labels_bounded,
    only = sqlite_local,
    opts = GatewayOptions::default().arg("--s3-listen").arg("127.0.0.1:0"),
    |gw| async move {
        let api = gw.api().anonymous();
        let s3 = Api::new(&gw.s3_endpoint()?)?;
        let mut tokens = Vec::new();
        // One batch of unauthenticated requests with made-up methods and paths, on every kind
        // of route (unmatched, REST, WebDAV, console, the S3 door's three shapes).
        let mut batch = async |n: usize| -> anyhow::Result<String> {
            for _ in 0..n {
                let t = format!("zq{:016x}", rand::random::<u64>());
                let m = Method::from_bytes(format!("X{}", t.to_ascii_uppercase()).as_bytes())?;
                for path in [
                    format!("/{t}/{t}"),
                    format!("/api/v1/{t}"),
                    format!("/api/v1/files/{t}"),
                    format!("/dav/{t}"),
                    format!("/admin/{t}.js"),
                ] {
                    api.req(m.clone(), &path).send().await?;
                    api.req(Method::GET, &path).send().await?;
                }
                for path in ["/".to_string(), format!("/{t}"), format!("/{t}/{t}")] {
                    s3.req(m.clone(), &path).send().await?;
                    s3.req(Method::GET, &path).send().await?;
                }
                tokens.push(t);
            }
            Ok(api.get("/metrics").await?.check(200)?.text())
        };
        api.get("/metrics").await?.check(200)?;
        let first = batch(40).await?;
        let second = batch(40).await?;
        for t in &tokens {
            ensure!(
                !second.contains(t.as_str()) && !second.contains(&t.to_ascii_uppercase()),
                "a label holds a client's value {t}:\n{}",
                second.lines().filter(|l| l.to_ascii_lowercase().contains(t.as_str())).collect::<Vec<_>>().join("\n")
            );
        }
        for label in [
            "method=\"other\"",
            "route=\"unmatched\"",
            "route=\"/dav/{*path}\"",
            "route=\"/api/v1/files/{*path}\"",
            "route=\"s3:/\"",
            "route=\"s3:/{bucket}\"",
            "route=\"s3:/{bucket}/{*key}\"",
        ] {
            ensure!(first.contains(label), "no {label} in /metrics:\n{first}");
        }
        // Twice as many distinct values, not one series more; the text grows only by counts.
        let (a, b) = (http_series(&first), http_series(&second));
        ensure!(a.len() == b.len(), "series grew from {} to {}", a.len(), b.len());
        ensure!(second.len() < first.len() + 4096, "/metrics grew from {} to {} bytes", first.len(), second.len());
        ensure!(b.len() < 500, "{} nimbus_http series after 80 junk requests per route", b.len());
        Ok(())
    }
);
