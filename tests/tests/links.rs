//! Public links (`/api/v1/links`, `/s/{token}`) against the real gateway: the owner's REST side
//! (create, list, change, revoke, isolation between users, bad input, no plaintext token in the
//! database), downloads as curl and `wget -c` make them (ranges, resume, what counts as a
//! download), folders (page, one file inside, the zip unpacked and compared byte for byte),
//! every path trick against a shared folder, passwords (header, Basic, wrong, throttled),
//! expiry and download limits, file drops (201, 409, quota charged to the owner, modes kept
//! apart), and revocation seen at once by a second gateway on the same PostgreSQL.

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use anyhow::{Context, ensure};
use base64::Engine;
use nimbus_e2e::browser::run_e2e_script;
use nimbus_e2e::{
    ADMIN_PASSWORD, Api, Backend, GatewayOptions, Resp, backend_test, data, encode_path, raw_request, run_on,
};
use nimbus_proto::wire::{AuditList, LinkInfo, LinkList, Me};
use reqwest::Method;
use serde_json::json;

/// The link page's policy (the gateway's `LINK_PAGE_CSP`).
const LINK_PAGE_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

async fn create(api: &Api, body: serde_json::Value) -> anyhow::Result<LinkInfo> {
    api.post_json("/api/v1/links", &body).await?.ok(201)
}

/// A public request to `/s/{token}{rest}`, without the owner's token.
fn public(api: &Api, method: Method, token: &str, rest: &str) -> nimbus_e2e::http::Req {
    api.anonymous().req(method, &format!("/s/{token}{rest}"))
}

async fn public_get(api: &Api, token: &str, rest: &str) -> anyhow::Result<Resp> {
    public(api, Method::GET, token, rest).send().await
}

/// Everything the metadata database holds about links, as text (what a leaked dump shows).
fn dump_links(gw: &nimbus_e2e::Gateway) -> anyhow::Result<String> {
    let out = match gw.database() {
        Some(db) => std::process::Command::new("psql")
            .args([db.url(), "-At", "-c", "SELECT * FROM links"])
            .output()
            .context("run psql")?,
        None => std::process::Command::new("sqlite3")
            .arg(gw.data_dir().join("nimbus.db"))
            .arg("SELECT * FROM links")
            .output()
            .context("run sqlite3")?,
    };
    ensure!(out.status.success(), "dump failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The admin's audit entries of one action about one link.
async fn audit(admin: &Api, action: &str, link: i64) -> anyhow::Result<Vec<nimbus_proto::wire::AuditEntry>> {
    let r = admin.get(&format!("/api/v1/admin/audit?action={action}&target=link:{link}")).await?;
    Ok(r.ok::<AuditList>(200)?.entries)
}

backend_test!(links_are_created_listed_changed_and_revoked, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    alice.mkdir("/docs").await?.check(201)?;
    alice.put_file("/docs/report.txt", "the report").await?.check(201)?;

    let link = create(&alice, json!({"path": "/docs/report.txt", "mode": "view"})).await?;
    ensure!(link.token.len() >= 43, "a token of at least 256 bits: {link:?}");
    ensure!(link.token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "URL-safe: {link:?}");
    ensure!(link.url == format!("{}/s/{}", gw.url, link.token), "{link:?}");
    ensure!(link.path == "/docs/report.txt" && link.downloads == 0 && link.active && !link.has_password, "{link:?}");
    ensure!(link.expires_at.is_none() && link.max_downloads.is_none(), "{link:?}");
    nimbus_e2e::http::check_rfc3339_utc(&link.created)?;
    // Exactly the contract's fields (and the two extra ones docs/API.md names).
    let raw = alice.get("/api/v1/links").await?.value()?;
    let mut keys: Vec<String> =
        raw["links"][0].as_object().context("a link object")?.keys().cloned().collect::<Vec<_>>();
    keys.sort();
    ensure!(
        keys == [
            "active",
            "created",
            "downloads",
            "expires_at",
            "has_password",
            "id",
            "max_downloads",
            "mode",
            "path",
            "token",
            "url"
        ],
        "{keys:?}"
    );

    // The link opens without an account.
    let r = public_get(&alice, &link.token, "/download").await?;
    ensure!(r.status == 200 && r.body.as_ref() == b"the report", "{r}");
    let r = public_get(&alice, &link.token, "").await?;
    ensure!(r.status == 200 && r.text().contains("report.txt"), "{r}");
    ensure!(r.header("content-security-policy").as_deref() == Some(LINK_PAGE_CSP), "{r}");

    // The list shows it again (the owner can copy it again), with the count.
    let list: LinkList = alice.get("/api/v1/links").await?.ok(200)?;
    ensure!(list.links.len() == 1 && list.links[0].token == link.token && list.links[0].downloads == 1, "{list:?}");
    // The database holds neither the token nor anything that opens it by itself.
    let dump = dump_links(&gw)?;
    ensure!(!dump.is_empty() && !dump.contains(&link.token), "the plaintext token is in the database: {dump}");

    // It follows renames and moves.
    alice.mkdir("/archive").await?.check(201)?;
    alice
        .post_json("/api/v1/move", &json!({"from": "/docs/report.txt", "to": "/archive/2026.txt"}))
        .await?
        .check(200)?;
    let r = public_get(&alice, &link.token, "/download").await?;
    ensure!(r.status == 200 && r.body.as_ref() == b"the report", "{r}");
    let list: LinkList = alice.get("/api/v1/links").await?.ok(200)?;
    ensure!(list.links[0].path == "/archive/2026.txt", "{list:?}");

    // Change: a password and a limit, then remove them (null), one field at a time.
    let id = link.id;
    let r = alice
        .patch_json(&format!("/api/v1/links/{id}"), &json!({"password": "open sesame", "max_downloads": 5}))
        .await?;
    let changed: LinkInfo = r.ok(200)?;
    ensure!(changed.has_password && changed.max_downloads == Some(5) && changed.token == link.token, "{changed:?}");
    public_get(&alice, &link.token, "/download").await?.check_error(401, "unauthorized")?;
    let r = alice.patch_json(&format!("/api/v1/links/{id}"), &json!({"password": null})).await?;
    let changed: LinkInfo = r.ok(200)?;
    ensure!(!changed.has_password && changed.max_downloads == Some(5), "{changed:?}");
    public_get(&alice, &link.token, "/download").await?.check(200)?;

    // Bad input: 400 with the JSON error body, nothing created.
    let bad = [
        json!({"path": "/", "mode": "view"}),
        json!({"path": "/archive/2026.txt", "mode": "edit"}),
        json!({"path": "/archive/2026.txt"}),
        json!({"path": "/archive/2026.txt", "mode": "view", "expires_at": "2001-01-01T00:00:00Z"}),
        json!({"path": "/archive/2026.txt", "mode": "view", "expires_at": "tomorrow"}),
        json!({"path": "/archive/2026.txt", "mode": "view", "max_downloads": 0}),
        json!({"path": "/archive/2026.txt", "mode": "view", "password": "short"}),
        json!({"path": "/archive/2026.txt", "mode": "upload"}),
        json!({"path": "/archive", "mode": "upload", "max_downloads": 3}),
        json!({"path": "/a/../b", "mode": "view"}),
    ];
    for body in bad {
        let r = alice.post_json("/api/v1/links", &body).await?;
        r.check(400).with_context(|| format!("{body}"))?;
        r.error_detail()?;
    }
    alice
        .post_json("/api/v1/links", &json!({"path": "/nope.txt", "mode": "view"}))
        .await?
        .check_error(404, "not_found")?;
    alice.req(Method::POST, "/api/v1/links").json_text("{nope").send().await?.check_error(400, "bad_request")?;
    alice
        .patch_json(&format!("/api/v1/links/{id}"), &json!({"expires_at": "1999-01-01T00:00:00Z"}))
        .await?
        .check_error(400, "bad_request")?;
    // A limit past what is stored is refused as too large, never wrapped into another number.
    for n in [9_223_372_036_854_775_808u64, u64::MAX] {
        let body = json!({"path": "/archive/2026.txt", "mode": "view", "max_downloads": n});
        let r = alice.post_json("/api/v1/links", &body).await?;
        r.check_error(400, "bad_request")?;
        ensure!(r.text().contains("at most"), "{n}: {r}");
    }
    ensure!(alice.get("/api/v1/links").await?.ok::<LinkList>(200)?.links.len() == 1);

    // Another user: sees none of alice's links, cannot change or revoke them (404, as missing),
    // and cannot link alice's files (paths are in their own space).
    ensure!(bob.get("/api/v1/links").await?.ok::<LinkList>(200)?.links.is_empty());
    bob.patch_json(&format!("/api/v1/links/{id}"), &json!({"max_downloads": 1}))
        .await?
        .check_error(404, "not_found")?;
    bob.delete(&format!("/api/v1/links/{id}")).await?.check_error(404, "not_found")?;
    bob.post_json("/api/v1/links", &json!({"path": "/archive/2026.txt", "mode": "view"}))
        .await?
        .check_error(404, "not_found")?;
    alice.delete("/api/v1/links/abc").await?.check_error(404, "not_found")?;
    let anon = alice.anonymous();
    anon.get("/api/v1/links").await?.check_error(401, "unauthorized")?;
    anon.post_json("/api/v1/links", &json!({"path": "/archive/2026.txt", "mode": "view"}))
        .await?
        .check_error(401, "unauthorized")?;
    // Untouched by all that.
    let list: LinkList = alice.get("/api/v1/links").await?.ok(200)?;
    ensure!(list.links[0].max_downloads == Some(5), "{list:?}");

    // A target in the trash opens nothing (the same 404 as an unknown link); restored, it does.
    let unknown = public_get(&alice, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "/download").await?;
    let unknown_body = unknown.check_error(404, "not_found")?;
    let r = alice.delete(&nimbus_e2e::http::files_url("/archive/2026.txt")).await?;
    r.check(204)?;
    let trash_id = r.header("x-nimbus-trash-id").context("trash id")?;
    let r = public_get(&alice, &link.token, "/download").await?;
    ensure!(r.check_error(404, "not_found")? == unknown_body, "no oracle: {r}");
    let list: LinkList = alice.get("/api/v1/links").await?.ok(200)?;
    ensure!(!list.links[0].active, "{list:?}");
    alice.post_json(&format!("/api/v1/trash/{trash_id}/restore"), &json!({})).await?.check_any(&[200, 201])?;
    public_get(&alice, &link.token, "/download").await?.check(200)?;

    // Revoked: 404 at once, everywhere on the public side; a second revoke is 404.
    alice.delete(&format!("/api/v1/links/{id}")).await?.check(204)?;
    for rest in ["", "/download", "/download/x"] {
        let r = public_get(&alice, &link.token, rest).await?;
        ensure!(r.check_error(404, "not_found")? == unknown_body, "{r}");
    }
    alice.delete(&format!("/api/v1/links/{id}")).await?.check_error(404, "not_found")?;
    ensure!(alice.get("/api/v1/links").await?.ok::<LinkList>(200)?.links.is_empty());

    // Audited: creation, change, revocation by the owner.
    let admin = gw.admin().await?;
    for action in ["link_created", "link_changed", "link_revoked"] {
        let entries = audit(&admin, action, id).await?;
        ensure!(!entries.is_empty() && entries[0].actor.as_deref() == Some("alice"), "{action}: {entries:?}");
    }
    Ok(())
});

backend_test!(link_downloads_resume_count_and_expire, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let admin = gw.admin().await?;
    // Over one block, so ranges cross a block boundary.
    let content = data::bytes("link-download", 5 * 1024 * 1024 + 12_345);
    alice.put_file("/big.bin", content.clone()).await?.check(201)?;
    let link = create(&alice, json!({"path": "/big.bin", "mode": "view"})).await?;
    let t = &link.token;

    let r = public_get(&alice, t, "/download").await?;
    ensure!(r.status == 200 && r.body.as_ref() == content.as_slice(), "whole file: {}", r.status);
    ensure!(r.header("content-disposition").is_some_and(|d| d.starts_with("attachment") && d.contains("big.bin")));
    ensure!(r.header("accept-ranges").as_deref() == Some("bytes"), "{r}");
    // A range in the middle, across the block boundary.
    let (a, b) = (4 * 1024 * 1024 - 100, 4 * 1024 * 1024 + 99);
    let r = public(&alice, Method::GET, t, "/download").header("range", &format!("bytes={a}-{b}")).send().await?;
    ensure!(r.status == 206 && r.body.as_ref() == &content[a..=b], "range: {}", r.status);
    ensure!(r.header("content-range") == Some(format!("bytes {a}-{b}/{}", content.len())), "{r:?}");
    // `wget -c`: the first part, then the rest from where it stopped.
    let cut = 1_000_000;
    let r = public(&alice, Method::GET, t, "/download").header("range", &format!("bytes=0-{}", cut - 1)).send().await?;
    ensure!(r.status == 206 && r.body.as_ref() == &content[..cut], "first part: {}", r.status);
    let r = public(&alice, Method::GET, t, "/download").header("range", &format!("bytes={cut}-")).send().await?;
    ensure!(r.status == 206 && r.body.as_ref() == &content[cut..], "resume: {}", r.status);
    // HEAD and a conditional GET answered 304 count nothing either.
    let etag = r.header("etag").context("etag")?;
    public(&alice, Method::HEAD, t, "/download").send().await?.check(200)?;
    public(&alice, Method::GET, t, "/download").header("if-none-match", &etag).send().await?.check(304)?;
    public(&alice, Method::GET, t, "/download").header("range", "bytes=99999999-").send().await?.check(416)?;
    // Counted: the whole download and the one that started at byte 0.
    let list: LinkList = alice.get("/api/v1/links").await?.ok(200)?;
    ensure!(list.links[0].downloads == 2, "downloads counted: {list:?}");
    // Every access audited with the client's address and the bytes.
    let entries = audit(&admin, "link_download", link.id).await?;
    ensure!(entries.len() >= 4, "{entries:?}");
    ensure!(entries.iter().all(|e| e.ip.as_deref() == Some("127.0.0.1")), "{entries:?}");
    let details: Vec<&str> = entries.iter().filter_map(|e| e.detail.as_deref()).collect();
    ensure!(details.iter().any(|d| d.contains(&format!("bytes {cut}-"))), "{details:?}");

    // A download limit: two downloads, then 404 for everything, resumes included.
    let limited = create(&alice, json!({"path": "/big.bin", "mode": "view", "max_downloads": 2})).await?;
    let lt = &limited.token;
    public_get(&alice, lt, "/download").await?.check(200)?;
    public(&alice, Method::GET, lt, "/download").header("range", "bytes=10-20").send().await?.check(206)?;
    public_get(&alice, lt, "/download").await?.check(200)?;
    let unknown = public_get(&alice, "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "/download").await?;
    let unknown = unknown.check_error(404, "not_found")?;
    for range in [None, Some("bytes=100-")] {
        let mut req = public(&alice, Method::GET, lt, "/download");
        if let Some(r) = range {
            req = req.header("range", r);
        }
        let r = req.send().await?;
        ensure!(r.check_error(404, "not_found")? == unknown, "exhausted: {r}");
    }
    ensure!(public_get(&alice, lt, "").await?.check_error(404, "not_found")? == unknown);
    let info: LinkInfo = alice.get("/api/v1/links").await?.ok::<LinkList>(200)?.links[1].clone();
    ensure!(info.downloads == 2 && !info.active, "{info:?}");
    // Raising the limit opens it again.
    let r = alice.patch_json(&format!("/api/v1/links/{}", limited.id), &json!({"max_downloads": 3})).await?;
    ensure!(r.ok::<LinkInfo>(200)?.active);
    public_get(&alice, lt, "/download").await?.check(200)?;

    // Expiry: open until the time, then 404; `expires_at: null` reopens it.
    let soon = time::OffsetDateTime::now_utc() + Duration::from_secs(3);
    let soon = soon.format(&time::format_description::well_known::Rfc3339)?;
    let expiring = create(&alice, json!({"path": "/big.bin", "mode": "view", "expires_at": soon})).await?;
    ensure!(expiring.expires_at.is_some(), "{expiring:?}");
    public(&alice, Method::GET, &expiring.token, "/download").header("range", "bytes=0-9").send().await?.check(206)?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let r = public(&alice, Method::GET, &expiring.token, "/download").header("range", "bytes=0-9").send().await?;
    ensure!(r.check_error(404, "not_found")? == unknown, "expired: {r}");
    alice.patch_json(&format!("/api/v1/links/{}", expiring.id), &json!({"expires_at": null})).await?.check(200)?;
    public(&alice, Method::GET, &expiring.token, "/download").header("range", "bytes=0-9").send().await?.check(206)?;
    Ok(())
});

backend_test!(link_folders_pages_zips_and_path_tricks, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let block = 4 * 1024 * 1024;
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("/share/readme.txt", b"hello".to_vec()),
        ("/share/empty.txt", Vec::new()),
        ("/share/a&b 'q'.txt", b"escaped".to_vec()),
        ("/share/sub/deep/big.bin", data::bytes("zip-big", block + 777)),
        ("/share/sub/Überraschung.txt", "unicode".as_bytes().to_vec()),
    ];
    for (p, body) in &files {
        alice.put_file(p, body.clone()).await?.check(201)?;
    }
    alice.mkdir("/share/empty folder").await?.check(201)?;
    // Outside the shared folder: must never come out.
    let secret = b"TOP SECRET outside the share".to_vec();
    alice.put_file("/secret.txt", secret.clone()).await?.check(201)?;
    alice.put_file("/share2/secret.txt", secret.clone()).await?.check(201)?;
    let link = create(&alice, json!({"path": "/share", "mode": "view"})).await?;
    let t = link.token.clone();

    // The page lists the folder, every name escaped, under the strict policy.
    let r = public(&alice, Method::GET, &t, "").header("accept", "text/html").send().await?;
    r.check(200)?;
    let page = r.text();
    ensure!(r.header("content-type").is_some_and(|c| c.starts_with("text/html")), "{r}");
    ensure!(r.header("content-security-policy").as_deref() == Some(LINK_PAGE_CSP), "{r}");
    ensure!(r.header("referrer-policy").as_deref() == Some("no-referrer"), "{r}");
    ensure!(page.contains("a&amp;b &#39;q&#39;.txt") && !page.contains("a&b 'q'"), "not escaped: {page}");
    ensure!(page.contains("readme.txt") && page.contains("sub/") && !page.contains("secret"), "{page}");
    ensure!(!page.contains("<script"), "{page}");
    ensure!(page.contains(&format!("/s/{t}/download/a%26b%20%27q%27.txt")), "{page}");
    let r = public_get(&alice, &t, "/browse/sub").await?;
    ensure!(r.status == 200 && r.text().contains("%C3%9Cberraschung.txt") && r.text().contains("deep/"), "{r}");

    // One file inside, with ranges.
    for (p, body) in &files {
        let rel = p.strip_prefix("/share/").context("inside")?;
        let r = public_get(&alice, &t, &format!("/download/{}", encode_path(rel))).await?;
        ensure!(r.status == 200 && r.body.as_ref() == body.as_slice(), "{p}: {}", r.status);
    }
    let big = &files[3].1;
    let r = public(&alice, Method::GET, &t, "/download/sub/deep/big.bin").header("range", "bytes=100-").send().await?;
    ensure!(r.status == 206 && r.body.as_ref() == &big[100..], "{}", r.status);

    // The whole folder as a zip, unpacked and compared byte for byte.
    let r = public_get(&alice, &t, "/download").await?;
    r.check(200)?;
    ensure!(r.header("content-type").as_deref() == Some("application/zip"), "{r:?}");
    ensure!(r.header("content-disposition").is_some_and(|d| d.contains("share.zip")), "{r:?}");
    // Another reader agrees (Python's zipfile checks every CRC): data descriptors and ZIP64
    // fields as common tools read them.
    let dir = tempfile::tempdir()?;
    let zip_file = dir.path().join("share.zip");
    std::fs::write(&zip_file, &r.body)?;
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; print(len(z.namelist()))"])
        .arg(&zip_file)
        .output()
        .context("run python3")?;
    ensure!(out.status.success(), "python's zipfile refuses the zip: {}", String::from_utf8_lossy(&out.stderr));
    ensure!(String::from_utf8_lossy(&out.stdout).trim() == (files.len() + 4).to_string(), "{out:?}");
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(r.body.to_vec())).context("a valid zip")?;
    let mut seen = std::collections::BTreeMap::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i)?;
        let name = f.name()?.to_string();
        let mut body = Vec::new();
        f.read_to_end(&mut body)?;
        seen.insert(name, body);
    }
    for (p, body) in &files {
        let name = p.trim_start_matches('/');
        ensure!(seen.get(name) == Some(body), "{name} in the zip: {:?}", seen.keys().collect::<Vec<_>>());
    }
    ensure!(seen.contains_key("share/empty folder/") && seen.contains_key("share/sub/deep/"), "{:?}", seen.keys());
    ensure!(seen.len() == files.len() + 4, "share/, sub/, deep/, empty folder/ and the files: {:?}", seen.keys());
    ensure!(!seen.values().any(|b| b == &secret), "the zip holds a file from outside the share");
    // A subfolder as a zip.
    let r = public_get(&alice, &t, "/download/sub").await?;
    let zip = zip::ZipArchive::new(std::io::Cursor::new(r.body.to_vec())).context("a valid zip")?;
    let names = zip.file_names().map(|n| n.map(|n| n.to_string())).collect::<Result<Vec<_>, _>>()?;
    ensure!(names.iter().all(|n| n.starts_with("sub/")) && names.len() == 4, "{names:?}");
    // Counted: each file and each zip (a range from byte 100 is not a new download).
    let list: LinkList = alice.get("/api/v1/links").await?.ok(200)?;
    ensure!(list.links[0].downloads == files.len() as u64 + 2, "{list:?}");
    // Zip downloads are audited with their bytes once they end.
    let admin = gw.admin().await?;
    nimbus_e2e::mount::eventually("the zip audited", Duration::from_secs(5), || async {
        let entries = audit(&admin, "link_download", link.id).await?;
        let zips: Vec<&str> =
            entries.iter().filter_map(|e| e.detail.as_deref()).filter(|d| d.contains("as zip: sent ")).collect();
        ensure!(zips.len() == 2, "{zips:?}");
        ensure!(zips.iter().all(|d| d.ends_with(" bytes (owner alice)")), "{zips:?}");
        Ok(())
    })
    .await?;

    // Path tricks, sent byte-exact: nothing outside the folder, only 400 or 404.
    let long = "a/".repeat(3000);
    let tricks = [
        "/download/../secret.txt".to_string(),
        "/download/..".to_string(),
        "/download/%2e%2e/secret.txt".to_string(),
        "/download/%2E%2E%2Fsecret.txt".to_string(),
        "/download/sub%2F..%2F..%2Fsecret.txt".to_string(),
        "/download/sub/../../secret.txt".to_string(),
        "/download/..%5Csecret.txt".to_string(),
        "/download/%5C..%5Csecret.txt".to_string(),
        "/download//secret.txt".to_string(),
        "/download/%2Fsecret.txt".to_string(),
        "/download/%2F..%2Fshare2%2Fsecret.txt".to_string(),
        "/download/./readme.txt".to_string(),
        "/download/readme.txt%00".to_string(),
        "/download/%00".to_string(),
        "/download/%ff%fe".to_string(),
        "/download/%zz".to_string(),
        format!("/download/{long}x"),
        "/browse/..".to_string(),
        "/browse/%2e%2e".to_string(),
        "/download/share2/secret.txt".to_string(),
        "/download/secret.txt".to_string(),
    ];
    for trick in &tricks {
        let r = raw_request(&gw.url, "GET", &format!("/s/{t}{trick}"), &[], b"").await?;
        ensure!(r.status == 400 || r.status == 404, "{trick}: {r}");
        ensure!(!r.body.windows(secret.len()).any(|w| w == secret.as_slice()), "{trick} leaked: {r}");
    }
    // An encoded slash is refused even where the plain spelling names a file inside (one
    // spelling per path, docs/API.md).
    public_get(&alice, &t, "/browse/sub/deep").await?.check(200)?;
    for encoded in ["/download/sub%2Fdeep%2Fbig.bin", "/download/sub%2fdeep", "/browse/sub%2Fdeep"] {
        let r = raw_request(&gw.url, "GET", &format!("/s/{t}{encoded}"), &[], b"").await?;
        ensure!(r.status == 400, "{encoded}: {r}");
    }
    // A file's link has nothing inside.
    let file_link = create(&alice, json!({"path": "/share/readme.txt", "mode": "view"})).await?;
    public_get(&alice, &file_link.token, "/download/readme.txt").await?.check(404)?;
    public_get(&alice, &file_link.token, "/browse/x").await?.check(404)?;
    // Tokens that are no tokens.
    for bad in ["/s/..%2Fapi", "/s/%2e%2e/download", "/s/a%00b/download"] {
        let r = raw_request(&gw.url, "GET", bad, &[], b"").await?;
        ensure!(r.status == 404 || r.status == 400, "{bad}: {r}");
    }
    Ok(())
});

backend_test!(link_passwords_are_checked_and_throttled, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    alice.put_file("/plan.txt", "the plan").await?.check(201)?;
    let link = create(&alice, json!({"path": "/plan.txt", "mode": "view", "password": "correct horse"})).await?;
    ensure!(link.has_password, "{link:?}");
    let t = &link.token;
    let basic = |user: &str, pass: &str| {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}")))
    };

    // Missing: 401, JSON for programs asking for Basic credentials, for browsers the page with
    // its password form (and no Basic prompt over it).
    let r = public_get(&alice, t, "/download").await?;
    r.check_error(401, "unauthorized")?;
    ensure!(r.header("www-authenticate").is_some_and(|h| h.starts_with("Basic")), "{r}");
    let r = public(&alice, Method::GET, t, "").header("accept", "text/html,*/*").send().await?;
    ensure!(r.status == 401 && r.header("content-type").is_some_and(|c| c.starts_with("text/html")), "{r}");
    ensure!(r.header("www-authenticate").is_none(), "{r}");
    ensure!(r.text().contains(&format!("<form method=\"post\" action=\"/s/{t}\">")), "{r}");
    // The header, or Basic with any username.
    let r =
        public(&alice, Method::GET, t, "/download").header("x-nimbus-link-password", "correct horse").send().await?;
    ensure!(r.status == 200 && r.body.as_ref() == b"the plan", "{r}");
    let r = public(&alice, Method::GET, t, "/download")
        .header("authorization", &basic("anyone", "correct horse"))
        .send()
        .await?;
    ensure!(r.status == 200 && r.body.as_ref() == b"the plan", "{r}");
    public(&alice, Method::GET, t, "").header("authorization", &basic("", "correct horse")).send().await?.check(200)?;
    // Wrong: 401.
    public(&alice, Method::GET, t, "/download").header("x-nimbus-link-password", "wrong").send().await?.check(401)?;
    public(&alice, Method::GET, t, "/download")
        .header("authorization", &basic("x", "Correct horse"))
        .send()
        .await?
        .check(401)?;

    // Repeated wrong tries from one address lock that address for this link (429 even with
    // the right password); another address is not affected.
    let here = alice.from_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))?;
    let mut locked = None;
    for i in 0..10 {
        let r = public(&here, Method::GET, t, "/download")
            .header("x-nimbus-link-password", &format!("guess {i}"))
            .send()
            .await?;
        if r.status == 429 {
            locked = Some(i);
            ensure!(r.header("retry-after").is_some(), "{r}");
            r.check_error(429, "too_many_requests")?;
            break;
        }
        r.check_error(401, "unauthorized")?;
    }
    ensure!(locked.is_some_and(|i| i <= 6), "never throttled after {locked:?} tries");
    public(&here, Method::GET, t, "/download")
        .header("x-nimbus-link-password", "correct horse")
        .send()
        .await?
        .check(429)?;
    let there = alice.from_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)))?;
    public(&there, Method::GET, t, "/download")
        .header("x-nimbus-link-password", "correct horse")
        .send()
        .await?
        .check(200)?;
    // Signing in from the locked address still works: link guesses are counted apart.
    here.login("alice", &nimbus_e2e::gateway::user_password("alice")).await?.check(200)?;
    // Failures are audited with the address.
    let admin = gw.admin().await?;
    let failed = audit(&admin, "link_password_failed", link.id).await?;
    ensure!(failed.iter().any(|e| e.ip.as_deref() == Some("127.0.0.2")), "{failed:?}");
    Ok(())
});

backend_test!(file_drops_take_files_and_charge_the_owner, |gw| async move {
    let quota = 3 * 1024 * 1024;
    let (_, alice) = gw.user("alice", Some(quota)).await?;
    alice.mkdir("/inbox").await?.check(201)?;
    alice.put_file("/inbox/already.txt", "mine").await?.check(201)?;
    let drop_link = create(&alice, json!({"path": "/inbox", "mode": "upload"})).await?;
    let t = &drop_link.token;
    let before: Me = alice.get("/api/v1/me").await?.ok(200)?;

    let content = data::bytes("dropped", 1024 * 1024 + 5);
    let r = public(&alice, Method::PUT, t, "/upload/from%20a%20visitor.bin").body(content.clone()).send().await?;
    r.check(201)?;
    ensure!(r.value()?["name"] == "from a visitor.bin" && r.value()?["size"] == content.len(), "{r}");
    // In the owner's space, charged to the owner.
    let r = alice.get_file("/inbox/from a visitor.bin").await?;
    ensure!(r.status == 200 && r.body.as_ref() == content.as_slice(), "{}", r.status);
    let after: Me = alice.get("/api/v1/me").await?.ok(200)?;
    ensure!(after.used_bytes == before.used_bytes + content.len() as u64, "{before:?} → {after:?}");
    // Never overwrites: the same name (any case), or the owner's own file: 409.
    for name in ["from%20a%20visitor.bin", "FROM%20A%20VISITOR.BIN", "already.txt"] {
        let r = public(&alice, Method::PUT, t, &format!("/upload/{name}")).body("other").send().await?;
        r.check(409).with_context(|| name.to_string())?;
        r.error_detail()?;
    }
    ensure!(alice.get_file("/inbox/already.txt").await?.body.as_ref() == b"mine");
    // Names are one plain name.
    for name in ["a%2Fb.txt", "..", "%2e%2e", "sub/x.txt", "a%5Cb"] {
        let r = raw_request(&gw.url, "PUT", &format!("/s/{t}/upload/{name}"), &[], b"x").await?;
        ensure!(r.status == 400 || r.status == 404, "{name}: {r}");
    }
    // The owner's quota holds for visitors too.
    let too_big = data::bytes("too big", 3 * 1024 * 1024);
    let r = public(&alice, Method::PUT, t, "/upload/too-big.bin").body(too_big).send().await?;
    r.check_error(413, "quota_exceeded")?;
    // A file drop shows and serves nothing of what it holds.
    let r = public_get(&alice, t, "").await?;
    ensure!(r.status == 200 && !r.text().contains("from a visitor") && !r.text().contains("already.txt"), "{r}");
    ensure!(r.text().contains(&format!("curl -T FILE {}/s/{t}/upload/NAME", gw.url)), "{r}");
    public_get(&alice, t, "/download").await?.check_error(403, "forbidden")?;
    public_get(&alice, t, "/download/already.txt").await?.check_error(403, "forbidden")?;
    public_get(&alice, t, "/browse/x").await?.check_error(403, "forbidden")?;
    // A method a link's route does not take: 405 with `Allow` and the JSON error body.
    for (method, tail) in [(Method::GET, "/upload/x.txt"), (Method::DELETE, "/download"), (Method::POST, "/upload/x")] {
        let r = public(&alice, method.clone(), t, tail).send().await?;
        r.check_error(405, "bad_request").with_context(|| format!("{method} {tail}"))?;
        ensure!(r.header("allow").is_some(), "{method} {tail}: {r}");
    }
    // And a view link takes nothing.
    let view = create(&alice, json!({"path": "/inbox", "mode": "view"})).await?;
    public(&alice, Method::PUT, &view.token, "/upload/new.txt")
        .body("x")
        .send()
        .await?
        .check_error(403, "forbidden")?;
    ensure!(alice.stat("/inbox/new.txt").await?.status == 404);
    // Switched to view, the drop's link takes no more uploads.
    alice.patch_json(&format!("/api/v1/links/{}", drop_link.id), &json!({"mode": "view"})).await?.check(200)?;
    public(&alice, Method::PUT, t, "/upload/late.txt").body("x").send().await?.check_error(403, "forbidden")?;
    let admin = gw.admin().await?;
    let uploads = audit(&admin, "link_upload", drop_link.id).await?;
    ensure!(uploads.len() == 1 && uploads[0].detail.as_deref().is_some_and(|d| d.contains("bytes")), "{uploads:?}");
    Ok(())
});

backend_test!(
    link_revocation_on_two_gateways,
    only = postgres_s3,
    opts = nimbus_e2e::GatewayOptions::default(),
    |gw| async move {
        let (_, alice) = gw.user("alice", None).await?;
        alice.put_file("/f.txt", "shared").await?.check(201)?;
        let link = create(&alice, json!({"path": "/f.txt", "mode": "view"})).await?;
        let other = gw.start_sibling().await?;
        let b = other.api.clone();
        let r = public_get(&b, &link.token, "/download").await?;
        ensure!(r.status == 200 && r.body.as_ref() == b"shared", "{r}");
        // A password set through A is asked for by B on the next request.
        alice
            .patch_json(&format!("/api/v1/links/{}", link.id), &json!({"password": "new secret"}))
            .await?
            .check(200)?;
        public_get(&b, &link.token, "/download").await?.check(401)?;
        // Revoked through A: B answers 404 on the very next request.
        alice.delete(&format!("/api/v1/links/{}", link.id)).await?.check(204)?;
        public(&b, Method::GET, &link.token, "/download")
            .header("x-nimbus-link-password", "new secret")
            .send()
            .await?
            .check_error(404, "not_found")?;
        Ok(())
    }
);

// The administrator's policies: a longest life for links (`--link-max-expiry`), and links
// turned off per user, which also closes the links they already made.
backend_test!(
    link_policies_max_expiry_and_links_off,
    opts = nimbus_e2e::GatewayOptions::default().arg("--link-max-expiry").arg("7d"),
    |gw| async move {
        let (alice_id, alice) = gw.user("alice", None).await?;
        alice.put_file("/f.txt", "policy").await?.check(201)?;
        let week = time::Duration::days(7);
        let now = time::OffsetDateTime::now_utc();
        let rfc =
            |t: time::OffsetDateTime| t.format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
        let parse = |s: &str| time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339);

        // No expiry asked: the longest allowed.
        let l = create(&alice, json!({"path": "/f.txt", "mode": "view"})).await?;
        let exp = parse(l.expires_at.as_deref().context("a link under a maximum expires")?)?;
        ensure!((exp - (now + week)).whole_minutes().abs() < 5, "expires {exp}, want a week from now");
        // Later than allowed: 400, saying the limit, and nothing made.
        let r = alice
            .post_json("/api/v1/links", &json!({"path": "/f.txt", "mode": "view", "expires_at": rfc(now + week * 2)}))
            .await?;
        let e = r.check_error(400, "bad_request")?;
        ensure!(e.message.contains("7d"), "{r}");
        // Earlier: as asked.
        let soon = rfc(now + time::Duration::days(1));
        let l2 = create(&alice, json!({"path": "/f.txt", "mode": "view", "expires_at": soon})).await?;
        ensure!(
            parse(l2.expires_at.as_deref().context("expiry")?)?
                <= now + time::Duration::days(1) + time::Duration::minutes(1)
        );
        // A change cannot lift it either: null means the longest allowed, later is 400.
        let r = alice.patch_json(&format!("/api/v1/links/{}", l2.id), &json!({"expires_at": null})).await?;
        let changed: LinkInfo = r.ok(200)?;
        ensure!(changed.expires_at.is_some(), "{changed:?}");
        alice
            .patch_json(&format!("/api/v1/links/{}", l2.id), &json!({"expires_at": rfc(now + week * 3)}))
            .await?
            .check_error(400, "bad_request")?;
        let links: LinkList = alice.get("/api/v1/links").await?.ok(200)?;
        ensure!(links.links.len() == 2, "{links:?}");

        // Links turned off for alice: no new ones, no changes, and her links close at once.
        public_get(&alice, &l.token, "/download").await?.check(200)?;
        let admin = gw.admin().await?;
        let r = admin.patch_json(&format!("/api/v1/admin/users/{alice_id}"), &json!({"links": false})).await?;
        ensure!(r.json::<serde_json::Value>()?["links"] == false, "{r}");
        let r = alice.post_json("/api/v1/links", &json!({"path": "/f.txt", "mode": "view"})).await?;
        let e = r.check_error(403, "forbidden")?;
        ensure!(e.message.contains("administrator"), "{r}");
        alice
            .patch_json(&format!("/api/v1/links/{}", l.id), &json!({"max_downloads": 3}))
            .await?
            .check_error(403, "forbidden")?;
        public_get(&alice, &l.token, "/download").await?.check_error(404, "not_found")?;
        public_get(&alice, &l.token, "").await?.check(404)?;
        // She can still see (as closed) and revoke them.
        let links: LinkList = alice.get("/api/v1/links").await?.ok(200)?;
        ensure!(links.links.len() == 2 && links.links.iter().all(|l| !l.active), "{links:?}");
        alice.delete(&format!("/api/v1/links/{}", l2.id)).await?.check(204)?;
        let log: AuditList = admin.get("/api/v1/admin/audit?action=user_update").await?.ok(200)?;
        ensure!(log.entries.iter().any(|e| e.detail.as_deref() == Some("public links turned off")), "{log:?}");
        // Back on: the link opens again.
        admin.patch_json(&format!("/api/v1/admin/users/{alice_id}"), &json!({"links": true})).await?.check(200)?;
        let r = public_get(&alice, &l.token, "/download").await?;
        ensure!(r.status == 200 && r.body.as_ref() == b"policy", "{r}");
        Ok(())
    }
);

/// A `multipart/form-data` body as a browser's upload form sends it: one `file` field per
/// (name, content).
fn form_files(files: &[(&str, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "----nimbus-e2e-boundary-7MA4YWxkTrZu0gW";
    let mut body = Vec::new();
    for (name, content) in files {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
                 Content-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(content);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

fn cookie_of(r: &Resp) -> anyhow::Result<String> {
    let set = r.header("set-cookie").with_context(|| format!("no cookie: {r}"))?;
    Ok(set.split(';').next().unwrap_or("").to_string())
}

// The link pages' forms as a browser posts them: the password form (a cookie for that link
// only, which a new password ends; wrong ones said so and throttled) and a file drop's upload
// form (files added, never one replaced: 409 in words). The plain-HTTP side is unchanged.
backend_test!(link_pages_take_passwords_and_files_by_form, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    alice.put_file("/plan.txt", "the plan").await?.check(201)?;
    alice.mkdir("/inbox").await?.check(201)?;
    alice.put_file("/inbox/already.txt", "mine").await?.check(201)?;
    let link = create(&alice, json!({"path": "/plan.txt", "mode": "view", "password": "correct horse"})).await?;
    let other = create(&alice, json!({"path": "/plan.txt", "mode": "view", "password": "another horse"})).await?;
    let t = link.token.clone();
    let form = [("content-type", "application/x-www-form-urlencoded"), ("accept", "text/html")];

    // Wrong: the form again, saying so, 401 without a Basic prompt; no cookie.
    let r = raw_request(&gw.url, "POST", &format!("/s/{t}"), &form, b"password=wrong+horse").await?;
    ensure!(r.status == 401 && r.text().contains("Wrong password; try again."), "{r}");
    ensure!(r.header("www-authenticate").is_none() && r.header("set-cookie").is_none(), "{r}");
    // Right: back to the page with a cookie for this link's path only.
    let r = raw_request(&gw.url, "POST", &format!("/s/{t}"), &form, b"password=correct+horse").await?;
    ensure!(r.status == 303 && r.header("location") == Some(format!("/s/{t}")), "{r}");
    let set = r.header("set-cookie").context("no cookie")?;
    for part in
        [format!("nimbus_link_{}=", link.id), format!("Path=/s/{t}"), "HttpOnly".into(), "SameSite=Strict".into()]
    {
        ensure!(set.contains(&part), "{part} missing in {set}");
    }
    ensure!(!set.contains("correct"), "the password is in the cookie: {set}");
    let cookie = cookie_of(&r)?;
    // The cookie opens the page and the download; nothing else does.
    let with = |c: &str, rest: &str| public(&alice, Method::GET, &t, rest).header("cookie", c).send();
    ensure!(with(&cookie, "/download").await?.body.as_ref() == b"the plan");
    with(&cookie, "").await?.check(200)?;
    public_get(&alice, &t, "/download").await?.check_error(401, "unauthorized")?;
    let (name, value) = cookie.split_once('=').context("cookie")?;
    let (exp, mac) = value.split_once('.').context("cookie value")?;
    let later: i64 = exp.parse::<i64>()? + 1000;
    let flipped = format!("{}{}", &mac[..mac.len() - 1], if mac.ends_with('0') { '1' } else { '0' });
    for bad in [
        format!("{name}={exp}.{flipped}"),
        format!("{name}={later}.{mac}"),
        format!("{name}=0.{mac}"),
        format!("{name}=garbage"),
        format!("nimbus_link_{}={value}", other.id),
    ] {
        with(&bad, "/download").await?.check_error(401, "unauthorized").with_context(|| bad.clone())?;
    }
    // Another link's page is not opened by it.
    public(&alice, Method::GET, &other.token, "/download")
        .header("cookie", &format!("{cookie}; nimbus_link_{}={value}", other.id))
        .send()
        .await?
        .check_error(401, "unauthorized")?;
    // The header and Basic still work as before, without any cookie.
    let r =
        public(&alice, Method::GET, &t, "/download").header("x-nimbus-link-password", "correct horse").send().await?;
    ensure!(r.status == 200 && r.header("set-cookie").is_none(), "{r}");
    // A new password ends the cookie.
    alice.patch_json(&format!("/api/v1/links/{}", link.id), &json!({"password": "a new horse"})).await?.check(200)?;
    with(&cookie, "/download").await?.check_error(401, "unauthorized")?;
    // Wrong passwords by form are throttled like the others: a 429 page in words.
    let mut last = None;
    for _ in 0..8 {
        let r = raw_request(&gw.url, "POST", &format!("/s/{}", other.token), &form, b"password=nope+nope").await?;
        let done = r.status == 429;
        last = Some(r);
        if done {
            break;
        }
    }
    let r = last.context("no answer")?;
    ensure!(r.status == 429 && r.text().contains("too many failed attempts"), "{r}");
    let fails = audit(&gw.admin().await?, "link_password_failed", other.id).await?;
    ensure!(fails.len() >= 5, "{fails:?}");

    // A file drop's page has an upload form; the form adds files under their names.
    let drop_link = create(&alice, json!({"path": "/inbox", "mode": "upload"})).await?;
    let d = &drop_link.token;
    let r = public(&alice, Method::GET, d, "").header("accept", "text/html").send().await?;
    ensure!(r.status == 200 && r.text().contains(&format!("action=\"/s/{d}/upload\"")), "{r}");
    ensure!(r.text().contains("enctype=\"multipart/form-data\"") && !r.text().contains("already.txt"), "{r}");
    let (ct, body) = form_files(&[("one.txt", b"first"), ("two words.bin", &[7u8; 70_000])]);
    let r = raw_request(&gw.url, "POST", &format!("/s/{d}/upload"), &[("content-type", &ct)], &body).await?;
    ensure!(r.status == 201 && r.text().contains("Added <strong>one.txt</strong>"), "{r}");
    ensure!(r.text().contains("Added <strong>two words.bin</strong>"), "{r}");
    ensure!(alice.get_file("/inbox/one.txt").await?.body.as_ref() == b"first");
    ensure!(alice.get_file("/inbox/two words.bin").await?.body.len() == 70_000);
    // A taken name (any case) is refused in words, the rest added, nothing replaced.
    let (ct, body) = form_files(&[("ALREADY.txt", b"visitor"), ("three.txt", b"third")]);
    let r = raw_request(&gw.url, "POST", &format!("/s/{d}/upload"), &[("content-type", &ct)], &body).await?;
    ensure!(r.status == 409 && r.text().contains("is already there; choose another name"), "{r}");
    ensure!(r.text().contains("Added <strong>three.txt</strong>"), "{r}");
    ensure!(alice.get_file("/inbox/already.txt").await?.body.as_ref() == b"mine");
    // Names that are no plain name are refused in words (400), never written elsewhere.
    let (ct, body) = form_files(&[("..", b"x"), ("a:b", b"x")]);
    let r = raw_request(&gw.url, "POST", &format!("/s/{d}/upload"), &[("content-type", &ct)], &body).await?;
    ensure!(r.status == 400 && r.text().matches("Not added").count() == 2, "{r}");
    // No file: 400; a view link's form: 403; the uploads are audited.
    let (ct, body) = form_files(&[]);
    let r = raw_request(&gw.url, "POST", &format!("/s/{d}/upload"), &[("content-type", &ct)], &body).await?;
    ensure!(r.status == 400, "{r}");
    let view = create(&alice, json!({"path": "/inbox", "mode": "view"})).await?;
    let (ct, body) = form_files(&[("new.txt", b"x")]);
    let r = raw_request(&gw.url, "POST", &format!("/s/{}/upload", view.token), &[("content-type", &ct)], &body).await?;
    ensure!(r.status == 403, "{r}");
    ensure!(alice.stat("/inbox/new.txt").await?.status == 404);
    let uploads = audit(&gw.admin().await?, "link_upload", drop_link.id).await?;
    ensure!(uploads.len() == 3, "{uploads:?}");
    Ok(())
});

/// The link pages in Debian's chromium, signed out (admin-ui/e2e/links.e2e.mjs): the password
/// form (wrong, throttled, right, the download), and a file drop's upload form (added, and a
/// taken name said in words).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_pages_in_chromium() -> anyhow::Result<()> {
    run_on(Backend::SqliteLocal, GatewayOptions::default(), |gw| async move {
        let base = gw.api().base().trim_end_matches('/').to_string();
        let log = run_e2e_script("e2e/links.e2e.mjs", &[base, ADMIN_PASSWORD.to_string()]).await?;
        println!("{log}");
        Ok(())
    })
    .await
}
