//! The WebDAV door (`/dav/`) against the real gateway: Debian's litmus (basic, copymove, props,
//! locks), rclone's webdav backend (tree in and out, rename, delete, 64 MiB streamed, ranges),
//! a davfs2 mount, sign-in rules, isolation between users and the shared path rules, locks
//! honoured by the REST API, Depth: infinity, quota properties and the quota itself, and
//! atomic uploads (an aborted PUT leaves the old version).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use nimbus_e2e::dav::{dav, lock};
use nimbus_e2e::{Api, Gateway, backend_test, data, raw_request};
use nimbus_proto::wire::Entry;
use reqwest::Method;
use tokio::io::AsyncWriteExt;

/// litmus suites and how many tests each runs; every one must pass (see docs/DOORS.md).
const LITMUS: &[(&str, u32)] = &[("basic", 16), ("copymove", 13), ("props", 30), ("locks", 41)];

fn method(m: &str) -> anyhow::Result<Method> {
    Method::from_bytes(m.as_bytes()).context("method")
}

/// HTTP Basic credentials (the test crate has no base64 dependency; this is the whole codec).
fn basic(user: &str, secret: &str) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("{user}:{secret}");
    let b = input.as_bytes();
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Basic {out}")
}

const PROPFIND_ALL: &str =
    r#"<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>"#;

/// Hrefs of a PROPFIND answer (a light scan: the XML is dav-server's, element names are `D:`).
fn hrefs(body: &str) -> Vec<String> {
    body.split("<D:href>").skip(1).filter_map(|s| s.split("</D:href>").next()).map(str::to_string).collect()
}

/// The text of the first `<D:name>` element.
fn prop(body: &str, name: &str) -> Option<String> {
    let open = format!("<D:{name}>");
    let start = body.find(&open)? + open.len();
    let end = body[start..].find("</D:")?;
    Some(body[start..start + end].to_string())
}

/// A file's bytes read through the REST API (`path` unencoded, in the space).
async fn rest_bytes(api: &Api, path: &str) -> anyhow::Result<Vec<u8>> {
    let r = api.get_file(path).await?;
    r.check(200)?;
    Ok(r.body.to_vec())
}

fn token_of(api: &Api) -> anyhow::Result<String> {
    api.token().map(str::to_string).context("a signed-in client")
}

backend_test!(webdav_litmus, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let token = token_of(&alice)?;
    let url = format!("{}/dav/", gw.url);
    for (suite, expected) in LITMUS {
        let out = tokio::time::timeout(
            Duration::from_secs(300),
            tokio::process::Command::new("litmus")
                .args([url.as_str(), "alice", token.as_str()])
                .env("TESTS", suite)
                .current_dir(std::env::temp_dir())
                .stdin(Stdio::null())
                .output(),
        )
        .await
        .context("litmus timed out")?
        .context("run litmus (Debian package `litmus`, see infra/install-deps.sh)")?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let summary = text
            .lines()
            .find(|l| l.contains(&format!("summary for `{suite}'")))
            .with_context(|| format!("no litmus summary for {suite}:\n{text}"))?;
        // "<- summary for `basic': of 16 tests run: 16 passed, 0 failed. 100.0%"
        let nums: Vec<u32> = summary
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .filter_map(|s| s.parse().ok())
            .collect();
        let (run, passed, failed) = match nums.as_slice() {
            [run, passed, failed, ..] => (*run, *passed, *failed),
            _ => bail!("unexpected litmus summary: {summary}"),
        };
        let failures: Vec<&str> = text.lines().filter(|l| l.contains("FAIL")).collect();
        ensure!(
            run >= *expected && passed == run && failed == 0,
            "litmus {suite}: {summary}\n{}\n(every test passed when this was written; see docs/DOORS.md)",
            failures.join("\n")
        );
        println!("litmus {suite}: {passed}/{run} passed");
    }
    Ok(())
});

/// `rclone` with a remote `dav:` on the gateway's door, signed in as `user` with `token`.
fn rclone(gw: &Gateway, cfg_dir: &Path, user: &str, obscured: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new("rclone");
    c.env("RCLONE_CONFIG", cfg_dir.join("rclone.conf"))
        .env("RCLONE_CONFIG_DAV_TYPE", "webdav")
        .env("RCLONE_CONFIG_DAV_URL", format!("{}/dav/", gw.url))
        .env("RCLONE_CONFIG_DAV_VENDOR", "other")
        .env("RCLONE_CONFIG_DAV_USER", user)
        .env("RCLONE_CONFIG_DAV_PASS", obscured)
        .stdin(Stdio::null());
    c
}

async fn run(mut c: tokio::process::Command, what: &str) -> anyhow::Result<Vec<u8>> {
    let out = tokio::time::timeout(Duration::from_secs(300), c.output())
        .await
        .with_context(|| format!("{what}: timed out"))?
        .with_context(|| format!("{what}: cannot run"))?;
    ensure!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).chars().take(3000).collect::<String>()
    );
    Ok(out.stdout)
}

/// Every file below `root` with its bytes, by relative path.
fn read_tree(root: &Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let p = e.path();
            if e.file_type()?.is_dir() {
                walk(root, &p, out)?;
            } else {
                let rel = p.strip_prefix(root)?.to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p)?));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, root, &mut out)?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

backend_test!(webdav_rclone, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let token = token_of(&alice)?;
    let tmp = tempfile::tempdir()?;
    let obscured = run(
        {
            let mut c = tokio::process::Command::new("rclone");
            c.args(["obscure", &token]);
            c
        },
        "rclone obscure",
    )
    .await?;
    let obscured = String::from_utf8(obscured)?.trim().to_string();

    // A tree with nested folders, spaces, non-ASCII names, an empty file and a 64 MiB file.
    let src = tmp.path().join("src");
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("a.txt", b"hello webdav\n".to_vec()),
        ("empty.bin", Vec::new()),
        ("folder one/b.txt", data::bytes("b", 10_000)),
        ("folder one/deeper/c.bin", data::bytes("c", 5 * 1024 * 1024 + 7)),
        ("Ünïcødé €/d.txt", b"unicode\n".to_vec()),
        ("big.bin", data::bytes("big", 64 * 1024 * 1024)),
    ];
    for (rel, bytes) in &files {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().context("parent")?)?;
        std::fs::write(&p, bytes)?;
    }
    let mut c = rclone(&gw, tmp.path(), "alice", &obscured);
    c.args(["copy", "--transfers", "2"]).arg(&src).arg("dav:tree");
    run(c, "rclone copy up").await?;

    // Read back through REST: identical bytes.
    for (rel, bytes) in &files {
        let got = rest_bytes(&alice, &format!("/tree/{rel}")).await?;
        ensure!(&got == bytes, "{rel}: REST read back {} bytes, expected {}", got.len(), bytes.len());
    }

    // And down again through WebDAV: byte-for-byte the same tree.
    let back = tmp.path().join("back");
    let mut c = rclone(&gw, tmp.path(), "alice", &obscured);
    c.args(["copy", "dav:tree"]).arg(&back);
    run(c, "rclone copy down").await?;
    let (a, b) = (read_tree(&src)?, read_tree(&back)?);
    ensure!(a.len() == b.len(), "trees differ: {:?} vs {:?}", names(&a), names(&b));
    for ((na, da), (nb, db)) in a.iter().zip(&b) {
        ensure!(na == nb && da == db, "{na} vs {nb}: content differs");
    }

    // Ranged read of the big file (rclone cat --offset/--count is a Range GET).
    let mut c = rclone(&gw, tmp.path(), "alice", &obscured);
    c.args(["cat", "--offset", "33554430", "--count", "100000", "dav:tree/big.bin"]);
    let got = run(c, "rclone cat range").await?;
    ensure!(got == data::slice("big", 33_554_430, 100_000), "ranged read differs");

    // Rename (MOVE), delete (DELETE goes to the trash).
    let mut c = rclone(&gw, tmp.path(), "alice", &obscured);
    c.args(["moveto", "dav:tree/a.txt", "dav:tree/folder one/renamed.txt"]);
    run(c, "rclone moveto").await?;
    alice.stat("/tree/a.txt").await?.check(404)?;
    ensure!(rest_bytes(&alice, "/tree/folder one/renamed.txt").await? == b"hello webdav\n");
    let mut c = rclone(&gw, tmp.path(), "alice", &obscured);
    c.args(["purge", "dav:tree/folder one/deeper"]);
    run(c, "rclone purge").await?;
    alice.stat("/tree/folder one/deeper").await?.check(404)?;
    let trash = alice.get("/api/v1/trash").await?.value()?;
    ensure!(trash.to_string().contains("/tree/folder one/deeper"), "the deleted folder is in the trash: {trash}");
    let mut c = rclone(&gw, tmp.path(), "alice", &obscured);
    c.args(["deletefile", "dav:tree/empty.bin"]);
    run(c, "rclone deletefile").await?;
    alice.stat("/tree/empty.bin").await?.check(404)?;

    // Written through REST, read through WebDAV: identical.
    let rest_written = data::bytes("rest", 3 * 1024 * 1024 + 11);
    alice.put_file("/tree/from-rest.bin", rest_written.clone()).await?.check(201)?;
    let mut c = rclone(&gw, tmp.path(), "alice", &obscured);
    c.args(["cat", "dav:tree/from-rest.bin"]);
    ensure!(run(c, "rclone cat").await? == rest_written, "REST → WebDAV differs");
    Ok(())
});

fn names(t: &[(String, Vec<u8>)]) -> Vec<&str> {
    t.iter().map(|(n, _)| n.as_str()).collect()
}

/// A davfs2 mount, unmounted on drop.
struct DavMount {
    dir: PathBuf,
    mounted: bool,
}

impl Drop for DavMount {
    fn drop(&mut self) {
        if self.mounted {
            let _ = std::process::Command::new("umount").arg(&self.dir).status();
        }
    }
}

/// Why davfs2 cannot run here, if it cannot.
fn davfs2_unavailable() -> Option<String> {
    // SAFETY-free check of root: the effective uid from /proc.
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false);
    if !root {
        return Some("mounting davfs2 needs root".into());
    }
    if !Path::new("/usr/sbin/mount.davfs").exists() && !Path::new("/sbin/mount.davfs").exists() {
        return Some("mount.davfs is not installed (Debian package davfs2)".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing".into());
    }
    None
}

backend_test!(webdav_davfs2, only = sqlite_local, opts = nimbus_e2e::GatewayOptions::default(), |gw| async move {
    if let Some(why) = davfs2_unavailable() {
        println!("SKIPPED webdav_davfs2: {why}");
        return Ok(());
    }
    let (_, alice) = gw.user("alice", None).await?;
    let token = token_of(&alice)?;
    let tmp = tempfile::Builder::new().prefix("nimbus-davfs-").tempdir()?;
    let (mnt, cache) = (tmp.path().join("mnt"), tmp.path().join("cache"));
    std::fs::create_dir_all(&mnt)?;
    std::fs::create_dir_all(&cache)?;
    // mount.davfs drops to the davfs2 user: the cache and the paths to it must be reachable.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777))?;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755))?;
    let secrets = tmp.path().join("secrets");
    std::fs::write(&secrets, format!("{} alice {token}\n", mnt.display()))?;
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600))?;
    let conf = tmp.path().join("davfs2.conf");
    std::fs::write(&conf, format!("secrets {}\ncache_dir {}\nuse_locks 1\n", secrets.display(), cache.display()))?;
    let status = tokio::process::Command::new("mount")
        .args(["-t", "davfs", &format!("{}/dav/", gw.url)])
        .arg(&mnt)
        .arg("-o")
        .arg(format!("conf={},uid=0,gid=0", conf.display()))
        .stdin(Stdio::null())
        .status()
        .await?;
    ensure!(status.success(), "mount -t davfs failed: {status}");
    let mut guard = DavMount { dir: mnt.clone(), mounted: true };

    let big = data::bytes("davfs", 16 * 1024 * 1024 + 3);
    let m = mnt.clone();
    let big2 = big.clone();
    let listing = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<Vec<String>>> {
        std::fs::write(m.join("big.bin"), &big2)?;
        std::fs::create_dir(m.join("sub"))?;
        std::fs::write(m.join("sub/a.txt"), b"from davfs2\n")?;
        std::fs::rename(m.join("sub/a.txt"), m.join("sub/b.txt"))?;
        std::fs::write(m.join("gone.txt"), b"x")?;
        std::fs::remove_file(m.join("gone.txt"))?;
        ensure!(std::fs::read(m.join("big.bin"))? == big2, "read back through the mount differs");
        ensure!(std::fs::read(m.join("sub/b.txt"))? == b"from davfs2\n");
        // davfs2 1.6.1 cannot list directories on recent kernels (FUSE_READDIR fails with
        // EINVAL against any server, rclone's too); everything by name works.
        Ok(std::fs::read_dir(&m).ok().and_then(|d| {
            d.map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned())).collect::<Result<Vec<_>, _>>().ok()
        }))
    })
    .await??;
    match listing {
        Some(names) => {
            ensure!(names.contains(&"big.bin".to_string()) && names.contains(&"sub".to_string()), "{names:?}")
        }
        None => {
            println!("note: davfs2 could not list the mount (davfs2 1.6.1 readdir on this kernel); checked by name")
        }
    }
    // Unmounting flushes davfs2's cache to the gateway.
    let status = tokio::process::Command::new("umount").arg(&mnt).status().await?;
    ensure!(status.success(), "umount failed: {status}");
    guard.mounted = false;

    ensure!(rest_bytes(&alice, "/big.bin").await? == big, "REST sees what davfs2 wrote");
    ensure!(rest_bytes(&alice, "/sub/b.txt").await? == b"from davfs2\n");
    alice.stat("/sub/a.txt").await?.check(404)?;
    alice.stat("/gone.txt").await?.check(404)?;
    Ok(())
});

backend_test!(webdav_auth_and_isolation, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    let (carol_id, carol) = gw.user("carol", None).await?;
    let (_, erin) = gw.user("erin", None).await?;
    let anon = alice.anonymous();
    let atok = token_of(&alice)?;
    let propfind = |api: &Api, auth: Option<String>| {
        let mut r = api.req(Method::from_bytes(b"PROPFIND").unwrap_or(Method::GET), "/dav/").header("depth", "1");
        if let Some(a) = auth {
            r = r.header("authorization", &a);
        }
        r.send()
    };

    // No credentials: 401 with a Basic challenge (what Explorer and davfs2 need to ask).
    let r = propfind(&anon, None).await?;
    r.check(401)?;
    let challenge = r.header("www-authenticate").unwrap_or_default();
    ensure!(challenge.starts_with("Basic realm=\"Nimbus\""), "{challenge}");
    anon.get("/dav/").await?.check(401)?;
    // Wrong token, as Basic or bearer.
    propfind(&anon, Some(basic("alice", "nmb_not-a-token"))).await?.check(401)?;
    propfind(&anon, Some("Bearer nmb_not-a-token".into())).await?.check(401)?;
    propfind(&anon, Some("Basic %%%".into())).await?.check(401)?;
    // The account password over plain HTTP: refused, saying what to use instead.
    let r = propfind(&anon, Some(basic("alice", &nimbus_e2e::gateway::user_password("alice")))).await?;
    r.check(401)?;
    ensure!(r.text().contains("app password"), "{r}");
    // A device token works as Basic password and as bearer; another user's name does not.
    propfind(&anon, Some(basic("alice", &atok))).await?.check(207)?;
    propfind(&anon, Some(basic("ALICE", &atok))).await?.check(207)?;
    propfind(&alice, None).await?.check(207)?;
    propfind(&anon, Some(basic("bob", &atok))).await?.check(401)?;

    // Revoked token and disabled user: refused at once.
    let second = gw.api().login_ok("carol", &nimbus_e2e::gateway::user_password("carol")).await?;
    propfind(&second, None).await?.check(207)?;
    second.post_json("/api/v1/auth/logout", &serde_json::json!({})).await?.check_any(&[200, 204])?;
    propfind(&anon, Some(basic("carol", &token_of(&second)?))).await?.check(401)?;
    propfind(&carol, None).await?.check(207)?;
    let admin = gw.admin().await?;
    admin
        .patch_json(&format!("/api/v1/admin/users/{carol_id}"), &serde_json::json!({"disabled": true}))
        .await?
        .check(200)?;
    propfind(&carol, None).await?.check(401)?;
    propfind(&anon, Some(basic("carol", &token_of(&carol)?))).await?.check(401)?;

    // Failed Basic sign-ins feed the login throttle: after five, a wrong app password waits,
    // but the right one still works (a valid token is never throttled by others' failures).
    let etok = token_of(&erin)?;
    for _ in 0..5 {
        propfind(&anon, Some(basic("erin", "nmb_wrong"))).await?.check(401)?;
    }
    let r = propfind(&anon, Some(basic("erin", "nmb_wrong"))).await?;
    r.check(429)?;
    ensure!(r.header("retry-after").is_some(), "{r}");
    propfind(&anon, Some(basic("erin", &etok))).await?.check(207)?;

    // Isolation: paths are per user. Bob's /dav/ is his own space, never Alice's.
    dav(&alice, "MKCOL", "/dav/private", &[], vec![]).await?.check(201)?;
    dav(&alice, "PUT", "/dav/private/secret.txt", &[], b"alice's secret".to_vec()).await?.check(201)?;
    dav(&alice, "PUT", "/dav/shared-name.txt", &[], b"alice".to_vec()).await?.check(201)?;
    dav(&bob, "GET", "/dav/private/secret.txt", &[], vec![]).await?.check(404)?;
    let r = dav(&bob, "PROPFIND", "/dav/", &[("depth", "1")], vec![]).await?;
    r.check(207)?;
    ensure!(!r.text().contains("private") && !r.text().contains("shared-name"), "bob sees alice's names: {r}");
    ensure!(hrefs(&r.text()).iter().all(|h| h.starts_with("/dav/")), "{r}");
    dav(&bob, "PROPFIND", "/dav/private/", &[("depth", "0")], vec![]).await?.check(404)?;
    dav(&bob, "PUT", "/dav/private/secret.txt", &[], b"bob".to_vec()).await?.check(409)?;
    dav(&bob, "DELETE", "/dav/private/secret.txt", &[], vec![]).await?.check(404)?;
    let dest = format!("{}/dav/stolen.txt", gw.url);
    dav(&bob, "MOVE", "/dav/private/secret.txt", &[("destination", &dest)], vec![]).await?.check(404)?;
    dav(&bob, "COPY", "/dav/private/secret.txt", &[("destination", &dest)], vec![]).await?.check(404)?;
    // Bob writing "the same name" writes his own file.
    dav(&bob, "PUT", "/dav/shared-name.txt", &[], b"bob".to_vec()).await?.check(201)?;
    dav(&bob, "PUT", "/dav/mine.txt", &[], b"bob's".to_vec()).await?.check(201)?;
    let into_alice = format!("{}/dav/private/secret.txt", gw.url);
    dav(&bob, "COPY", "/dav/mine.txt", &[("destination", &into_alice)], vec![]).await?.check(409)?;
    dav(&bob, "MOVE", "/dav/mine.txt", &[("destination", &into_alice)], vec![]).await?.check(409)?;
    ensure!(rest_bytes(&alice, "/private/secret.txt").await? == b"alice's secret");
    ensure!(rest_bytes(&alice, "/shared-name.txt").await? == b"alice");
    ensure!(rest_bytes(&bob, "/shared-name.txt").await? == b"bob");

    // The shared path rules: the same spellings get the same 4xx from REST and WebDAV, and
    // nothing is created.
    let before = alice.list_all("/", None).await?;
    for bad in [
        "%2e%2e/x.txt",
        "a/..%2fx.txt",
        "x/%2E%2E/%2E%2E/y",
        "a:b.txt",
        "CON",
        "con.txt",
        "x%5cy",
        "nul%00.txt",
        "trailing.",
        "a%2f..%2fb",
    ] {
        let rest = alice.req(Method::PUT, &format!("/api/v1/files/{bad}")).body("x").send().await?;
        let webdav = dav(&alice, "PUT", &format!("/dav/{bad}"), &[], b"x".to_vec()).await?;
        ensure!((400..500).contains(&rest.status), "REST accepted {bad}: {rest}");
        ensure!(webdav.status == rest.status, "{bad}: WebDAV {} but REST {}: {webdav}", webdav.status, rest.status);
        let mk = dav(&alice, "MKCOL", &format!("/dav/{bad}"), &[], vec![]).await?;
        ensure!(mk.status == rest.status, "MKCOL {bad}: {mk}");
    }
    // Raw `..` (no client normalisation) is refused too.
    let raw = raw_request(&gw.url, "GET", "/dav/private/../../x", &[("authorization", &format!("Bearer {atok}"))], b"")
        .await?;
    ensure!(raw.status == 400, "{raw}");
    // Destinations outside the door or with bad names: 4xx, nothing moves or appears.
    dav(&alice, "PUT", "/dav/a.txt", &[], b"stay".to_vec()).await?.check(201)?;
    let host = gw.url.clone();
    for (d, status) in [
        (format!("{host}/api/v1/files/b.txt"), 403),
        (format!("{host}/other/b.txt"), 403),
        (format!("{host}/davx/b.txt"), 403),
        (format!("{host}/dav/%2e%2e/b.txt"), 400),
        (format!("{host}/dav/private/..%2f..%2fb.txt"), 400),
        (format!("{host}/dav/a%3ab.txt"), 400),
        ("/dav/CON".to_string(), 400),
        (format!("{host}/dav/x/../../b.txt"), 400),
        // The root of the space is no destination (dav-server panicked on it).
        (format!("{host}/dav"), 403),
        (format!("{host}/dav/"), 403),
        ("/dav/".to_string(), 403),
    ] {
        for m in ["MOVE", "COPY"] {
            for overwrite in [None, Some("T")] {
                let mut headers = vec![("destination", d.as_str())];
                headers.extend(overwrite.map(|o| ("overwrite", o)));
                let r = dav(&alice, m, "/dav/a.txt", &headers, vec![]).await?;
                ensure!(r.status == status, "{m} to {d} ({overwrite:?}): expected {status}: {r}");
            }
        }
    }
    ensure!(rest_bytes(&alice, "/a.txt").await? == b"stay");
    // Overwrite is T or F, in either case; anything else is refused, not taken for T.
    alice.put_file("/kept.txt", "kept").await?.check(201)?;
    let kept = format!("{host}/dav/kept.txt");
    for (overwrite, status) in [("X", 400), ("", 400), ("f", 412), ("F", 412)] {
        for m in ["COPY", "MOVE"] {
            let r = dav(&alice, m, "/dav/a.txt", &[("destination", &kept), ("overwrite", overwrite)], vec![]).await?;
            ensure!(r.status == status, "{m} with Overwrite {overwrite:?}: expected {status}: {r}");
        }
    }
    ensure!(rest_bytes(&alice, "/kept.txt").await? == b"kept" && rest_bytes(&alice, "/a.txt").await? == b"stay");
    alice.delete("/api/v1/files/kept.txt").await?.check(204)?;
    let mut after = alice.list_all("/", None).await?;
    after.retain(|e: &Entry| e.name != "a.txt");
    ensure!(
        after.iter().map(|e| &e.name).collect::<Vec<_>>() == before.iter().map(|e| &e.name).collect::<Vec<_>>(),
        "the root changed: {before:?} → {after:?}"
    );
    Ok(())
});

// RFC 4918 §9.8.5, §9.9.4: a Destination on another server is 502 and never acted on, as a
// path of the caller's space or otherwise. The same server is its Host (any case, a default
// port the same as none) or, from a trusted proxy, its X-Forwarded-Host and -Proto.
backend_test!(
    webdav_destination_on_another_server,
    opts = nimbus_e2e::GatewayOptions::default().arg("--trusted-proxies").arg("127.0.0.9"),
    |gw| async move {
        let (_, alice) = gw.user("alice", None).await?;
        dav(&alice, "PUT", "/dav/a.txt", &[], b"stay".to_vec()).await?.check(201)?;
        let host = gw.url.trim_start_matches("http://").to_string();
        let port: u16 = host.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).context("port")?;
        let moved = |m: &'static str, headers: Vec<(&'static str, String)>| {
            let alice = alice.clone();
            async move {
                let mut r = alice.req(method(m)?, "/dav/a.txt");
                for (k, v) in headers {
                    r = r.header(k, v.as_str());
                }
                r.send().await
            }
        };
        let unchanged = |alice: Api| async move {
            ensure!(rest_bytes(&alice, "/a.txt").await? == b"stay", "a.txt changed");
            let names: Vec<String> = alice.list_all("/", None).await?.into_iter().map(|e: Entry| e.name).collect();
            ensure!(names == ["a.txt"], "something was made: {names:?}");
            anyhow::Ok(())
        };
        for m in ["MOVE", "COPY"] {
            for dest in [
                format!("http://elsewhere.example:{port}/dav/b.txt"),
                "http://elsewhere.example/dav/b.txt".to_string(),
                format!("http://127.0.0.1:{}/dav/b.txt", port.wrapping_add(1)),
                format!("http://127.0.0.2:{port}/dav/b.txt"),
                format!("ftp://{host}/dav/b.txt"),
                "http://evil.example/api/v1/files/b.txt".to_string(),
            ] {
                for overwrite in ["T", "F"] {
                    let r = moved(m, vec![("destination", dest.clone()), ("overwrite", overwrite.into())]).await?;
                    r.check_error(502, "bad_request").with_context(|| format!("{m} to {dest}"))?;
                    ensure!(r.text().contains("another server"), "{r}");
                }
            }
            unchanged(alice.clone()).await?;
        }

        // This server by its own name, in another case, with the default port spelled out, or
        // a path: done.
        let as_host = |name: &str, dest: String| vec![("host", name.to_string()), ("destination", dest)];
        moved("COPY", as_host(&format!("Files.Example:{port}"), format!("http://files.EXAMPLE:{port}/dav/b.txt")))
            .await?
            .check(201)?;
        moved("COPY", as_host("files.example", "http://FILES.example:80/dav/c.txt".into())).await?.check(201)?;
        moved("COPY", as_host("files.example:80", "http://files.example/dav/d.txt".into())).await?.check(201)?;
        moved("COPY", vec![("destination", format!("{}/dav/e.txt", gw.url))]).await?.check(201)?;
        moved("COPY", vec![("destination", "/dav/f.txt".into())]).await?.check(201)?;
        for name in ["b.txt", "c.txt", "d.txt", "e.txt", "f.txt"] {
            ensure!(rest_bytes(&alice, &format!("/{name}")).await? == b"stay", "{name}");
        }

        // Behind a trusted proxy (127.0.0.9): the public name and scheme it forwards, the Host it
        // connected to; not another scheme. From anyone else the forwarded name means nothing.
        let proxy = alice.from_address("127.0.0.9".parse()?)?;
        let via = |api: &Api, m: &'static str, dest: &str| {
            api.req(method(m).unwrap_or(Method::GET), "/dav/a.txt")
                .header("x-forwarded-host", "files.example")
                .header("x-forwarded-proto", "https")
                .header("x-forwarded-for", "198.51.100.7")
                .header("destination", dest)
                .send()
        };
        via(&proxy, "COPY", "https://files.example/dav/g.txt").await?.check(201)?;
        via(&proxy, "COPY", "https://FILES.example:443/dav/h.txt").await?.check(201)?;
        via(&proxy, "COPY", &format!("https://{host}/dav/i.txt")).await?.check(201)?;
        via(&proxy, "COPY", "http://files.example/dav/j.txt").await?.check_error(502, "bad_request")?;
        via(&proxy, "MOVE", "https://files.example:8443/dav/j.txt").await?.check_error(502, "bad_request")?;
        via(&alice, "COPY", "https://files.example/dav/j.txt").await?.check_error(502, "bad_request")?;
        alice.get_file("/j.txt").await?.check(404)?;
        via(&proxy, "MOVE", "https://files.example/dav/moved.txt").await?.check(201)?;
        ensure!(rest_bytes(&alice, "/moved.txt").await? == b"stay");
        alice.get_file("/a.txt").await?.check(404)?;
        Ok(())
    }
);

backend_test!(webdav_locks_across_doors, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    dav(&alice, "PUT", "/dav/doc.txt", &[], b"v1".to_vec()).await?.check(201)?;
    alice.put_file("/other.txt", "other").await?.check(201)?;
    let token = lock(&alice, "/dav/doc.txt", &[("timeout", "Second-600")]).await?;
    ensure!(token.starts_with("opaquelocktoken:"), "{token}");

    // Seen in lockdiscovery.
    let r = dav(&alice, "PROPFIND", "/dav/doc.txt", &[("depth", "0")], PROPFIND_ALL.as_bytes().to_vec()).await?;
    ensure!(r.text().contains(&token), "lockdiscovery: {r}");

    // Every REST change of the locked file is refused with 423 `locked`, the file unchanged.
    alice.put_file("/doc.txt", "v2").await?.check_error(423, "locked")?;
    alice.delete("/api/v1/files/doc.txt").await?.check_error(423, "locked")?;
    let mv = serde_json::json!({"from": "/doc.txt", "to": "/moved.txt"});
    alice.post_json("/api/v1/move", &mv).await?.check_error(423, "locked")?;
    let over = serde_json::json!({"from": "/other.txt", "to": "/doc.txt", "overwrite": true});
    alice.post_json("/api/v1/move", &over).await?.check_error(423, "locked")?;
    alice.post_json("/api/v1/copy", &over).await?.check_error(423, "locked")?;
    // The drive's path: a block-list commit.
    let commit = serde_json::json!({"base_version": null, "force": true, "blocks": []});
    alice.post_json("/api/v1/manifests/doc.txt", &commit).await?.check_error(423, "locked")?;
    // WebDAV without the token too.
    dav(&alice, "PUT", "/dav/doc.txt", &[], b"v2".to_vec()).await?.check(423)?;
    dav(&alice, "DELETE", "/dav/doc.txt", &[], vec![]).await?.check(423)?;
    ensure!(rest_bytes(&alice, "/doc.txt").await? == b"v1");
    alice.stat("/moved.txt").await?.check(404)?;

    // With the token, REST (X-Nimbus-Lock-Token) and WebDAV (If) may write.
    let r =
        alice.req(Method::PUT, "/api/v1/files/doc.txt").header("x-nimbus-lock-token", &token).body("v2").send().await?;
    r.check(200)?;
    ensure!(rest_bytes(&alice, "/doc.txt").await? == b"v2");
    let iff = format!("(<{token}>)");
    dav(&alice, "PUT", "/dav/doc.txt", &[("if", &iff)], b"v3".to_vec()).await?.check(204)?;
    ensure!(rest_bytes(&alice, "/doc.txt").await? == b"v3");

    // Bob never sees or releases Alice's lock: his /dav/doc.txt is his own (absent) file.
    let lt = format!("<{token}>");
    let r = dav(&bob, "UNLOCK", "/dav/doc.txt", &[("lock-token", &lt)], vec![]).await?;
    ensure!(r.status != 204 && (400..500).contains(&r.status), "{r}");
    let r = dav(&bob, "PROPFIND", "/dav/", &[("depth", "1")], PROPFIND_ALL.as_bytes().to_vec()).await?;
    ensure!(!r.text().contains(&token), "bob sees alice's lock: {r}");
    dav(&bob, "PUT", "/dav/doc.txt", &[], b"bob".to_vec()).await?.check(201)?;
    dav(&bob, "DELETE", "/dav/doc.txt", &[], vec![]).await?.check(204)?;
    alice.put_file("/doc.txt", "v4").await?.check_error(423, "locked")?;

    // UNLOCK: REST works again.
    dav(&alice, "UNLOCK", "/dav/doc.txt", &[("lock-token", &lt)], vec![]).await?.check(204)?;
    alice.put_file("/doc.txt", "v4").await?.check(200)?;

    // A lock expires: Timeout: Second-2.
    let short = lock(&alice, "/dav/doc.txt", &[("timeout", "Second-2")]).await?;
    alice.put_file("/doc.txt", "v5").await?.check_error(423, "locked")?;
    tokio::time::sleep(Duration::from_millis(2600)).await;
    alice.put_file("/doc.txt", "v5").await?.check(200)?;
    // The client that held it, still naming its token in If, loses: the condition is false
    // (RFC 4918 §10.4: the token matches no lock on the file), 412, and the change made since
    // stays. So does a made-up token, or a live lock's token on another file.
    let other = lock(&alice, "/dav/other-locked.txt", &[("timeout", "Second-600")]).await?;
    for t in [short.as_str(), "opaquelocktoken:00000000-0000-0000-0000-000000000000", other.as_str()] {
        let iff = format!("(<{t}>)");
        dav(&alice, "PUT", "/dav/doc.txt", &[("if", &iff)], b"stale".to_vec()).await?.check(412)?;
        dav(&alice, "DELETE", "/dav/doc.txt", &[("if", &iff)], vec![]).await?.check(412)?;
    }
    ensure!(rest_bytes(&alice, "/doc.txt").await? == b"v5");
    alice.delete("/api/v1/files/doc.txt").await?.check(204)?;

    // A depth-infinity lock on a folder guards what is inside it, and the folder itself.
    dav(&alice, "MKCOL", "/dav/folder", &[], vec![]).await?.check(201)?;
    alice.put_file("/folder/in.txt", "in").await?.check(201)?;
    let ftoken = lock(&alice, "/dav/folder/", &[("depth", "infinity"), ("timeout", "Second-600")]).await?;
    alice.put_file("/folder/in.txt", "changed").await?.check_error(423, "locked")?;
    alice.put_file("/folder/new.txt", "new").await?.check_error(423, "locked")?;
    alice.delete("/api/v1/files/folder").await?.check_error(423, "locked")?;
    alice
        .post_json("/api/v1/move", &serde_json::json!({"from": "/folder", "to": "/f2"}))
        .await?
        .check_error(423, "locked")?;
    // Deleting an ancestor of a locked path is refused too.
    alice.put_file("/top/inner.txt", "x").await?.check(201)?;
    let itoken = lock(&alice, "/dav/top/inner.txt", &[]).await?;
    alice.delete("/api/v1/files/top").await?.check_error(423, "locked")?;
    let r = alice.req(Method::DELETE, "/api/v1/files/top").header("x-nimbus-lock-token", &itoken).send().await?;
    r.check(204)?;
    // The lock went with the deleted path: a new file there is not locked.
    alice.put_file("/top/inner.txt", "again").await?.check(201)?;
    let flt = format!("<{ftoken}>");
    dav(&alice, "UNLOCK", "/dav/folder/", &[("lock-token", &flt)], vec![]).await?.check(204)?;
    alice.put_file("/folder/in.txt", "changed").await?.check(200)?;

    // LOCK on an unmapped URL creates an empty file under the lock (RFC 4918 §7.3).
    let ntoken = lock(&alice, "/dav/new-locked.txt", &[]).await?;
    let e = alice.stat("/new-locked.txt").await?.entry(200)?;
    ensure!(e.size == 0, "{e:?}");
    alice.put_file("/new-locked.txt", "x").await?.check_error(423, "locked")?;
    let r = alice
        .req(Method::PUT, "/api/v1/files/new-locked.txt")
        .header("x-nimbus-lock-token", &format!("<{ntoken}>"))
        .body("x")
        .send()
        .await?;
    r.check(200)?;
    Ok(())
});

backend_test!(webdav_props_quota_uploads, |gw| async move {
    let (alice_id, alice) = gw.user("alice", None).await?;
    let admin = gw.admin().await?;

    // Depth: infinity is refused with the RFC 4918 precondition (also for litmus' header).
    for extra in [None, Some(("x-litmus", "props: 1"))] {
        let mut h = vec![("depth", "infinity")];
        h.extend(extra);
        let r = dav(&alice, "PROPFIND", "/dav/", &h, vec![]).await?;
        r.check(403)?;
        ensure!(r.text().contains("propfind-finite-depth"), "{r}");
    }
    // Depth is 0, 1 or infinity (RFC 4918 §10.2): anything else is 400 saying so, never taken
    // for 1 (PROPFIND) or infinity (COPY, LOCK), and nothing happens.
    dav(&alice, "PUT", "/dav/depth.txt", &[], b"d".to_vec()).await?.check(201)?;
    for bad in ["5", "2", "", "one", "1,noroot", "-1"] {
        let r = dav(&alice, "PROPFIND", "/dav/", &[("depth", bad)], vec![]).await?;
        r.check_error(400, "bad_request").with_context(|| format!("PROPFIND Depth {bad:?}"))?;
        ensure!(r.text().contains("Depth"), "{r}");
        let to = [("depth", bad), ("destination", "/dav/depth-copy.txt")];
        dav(&alice, "COPY", "/dav/depth.txt", &to, vec![]).await?.check_error(400, "bad_request")?;
        let lockinfo = nimbus_e2e::dav::LOCKINFO.as_bytes().to_vec();
        dav(&alice, "LOCK", "/dav/depth.txt", &[("depth", bad)], lockinfo).await?.check_error(400, "bad_request")?;
    }
    let twice = dav(&alice, "PROPFIND", "/dav/", &[("depth", "1"), ("depth", "1")], vec![]).await?;
    twice.check_error(400, "bad_request")?;
    alice.get_file("/depth-copy.txt").await?.check(404)?;
    // Not locked by any of those LOCKs: a write without a token goes through.
    dav(&alice, "PUT", "/dav/depth.txt", &[], b"e".to_vec()).await?.check_any(&[200, 201, 204])?;
    for ok in ["0", "1", "Infinity"] {
        let status = if ok == "Infinity" { 403 } else { 207 };
        dav(&alice, "PROPFIND", "/dav/", &[("depth", ok)], vec![]).await?.check(status)?;
    }
    alice.delete("/api/v1/files/depth.txt").await?.check(204)?;

    // Quota properties follow the quota an administrator sets.
    alice.put_file("/seed.bin", data::bytes("seed", 100_000)).await?.check(201)?;
    admin
        .patch_json(&format!("/api/v1/admin/users/{alice_id}"), &serde_json::json!({"quota_bytes": 1_000_000}))
        .await?
        .check(200)?;
    let body = r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:quota-available-bytes/><D:quota-used-bytes/></D:prop></D:propfind>"#;
    let r = dav(&alice, "PROPFIND", "/dav/", &[("depth", "0")], body.as_bytes().to_vec()).await?;
    r.check(207)?;
    let me = alice.get("/api/v1/me").await?.value()?;
    let used = me["used_bytes"].as_u64().context("used_bytes")?;
    ensure!(used >= 100_000, "{me}");
    ensure!(prop(&r.text(), "quota-used-bytes") == Some(used.to_string()), "{r}");
    ensure!(prop(&r.text(), "quota-available-bytes") == Some((1_000_000 - used).to_string()), "{r}");
    // A subfolder shares the space's quota: the same figures (what Explorer shows there).
    dav(&alice, "MKCOL", "/dav/qdir", &[], vec![]).await?.check(201)?;
    let r = dav(&alice, "PROPFIND", "/dav/qdir/", &[("depth", "0")], body.as_bytes().to_vec()).await?;
    ensure!(prop(&r.text(), "quota-used-bytes") == Some(used.to_string()), "{r}");
    ensure!(prop(&r.text(), "quota-available-bytes") == Some((1_000_000 - used).to_string()), "{r}");

    // Windows' properties are accepted; dead properties are stored.
    let patch = r#"<?xml version="1.0" encoding="utf-8"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:" xmlns:X="urn:x-test:"><D:set><D:prop><Z:Win32CreationTime>Mon, 23 Nov 2026 10:00:00 GMT</Z:Win32CreationTime><Z:Win32LastModifiedTime>Mon, 23 Nov 2026 10:00:00 GMT</Z:Win32LastModifiedTime><Z:Win32LastAccessTime>Mon, 23 Nov 2026 10:00:00 GMT</Z:Win32LastAccessTime><Z:Win32FileAttributes>00000020</Z:Win32FileAttributes><X:colour>blue</X:colour></D:prop></D:set></D:propertyupdate>"#;
    let r = dav(&alice, "PROPPATCH", "/dav/seed.bin", &[], patch.as_bytes().to_vec()).await?;
    r.check(207)?;
    ensure!(r.text().contains("200 OK") && !r.text().contains("403") && !r.text().contains("409"), "{r}");
    // The Win32 times are applied to the file (Explorer keeps a copied file's dates).
    let e = alice.stat("/seed.bin").await?.entry(200)?;
    ensure!(e.modified.starts_with("2026-11-23T10:00:00"), "{e:?}");
    let r = dav(&alice, "PROPFIND", "/dav/seed.bin", &[("depth", "0")], vec![]).await?;
    ensure!(prop(&r.text(), "getlastmodified").as_deref() == Some("Mon, 23 Nov 2026 10:00:00 GMT"), "{r}");
    ensure!(prop(&r.text(), "creationdate").is_some_and(|c| c.starts_with("2026-11-23T10:00:00")), "{r}");
    // A PROPPATCH that fails as a whole (a protected property) applies nothing.
    let bad = r#"<?xml version="1.0" encoding="utf-8"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop><Z:Win32LastModifiedTime>Tue, 02 Jan 2001 03:04:05 GMT</Z:Win32LastModifiedTime><D:getcontentlength>5</D:getcontentlength></D:prop></D:set></D:propertyupdate>"#;
    let r = dav(&alice, "PROPPATCH", "/dav/seed.bin", &[], bad.as_bytes().to_vec()).await?;
    ensure!(r.status == 207 && r.text().contains("424"), "{r}");
    ensure!(alice.stat("/seed.bin").await?.entry(200)?.modified.starts_with("2026-11-23T10:00:00"));
    let get = r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:X="urn:x-test:"><D:prop><X:colour/></D:prop></D:propfind>"#;
    let r = dav(&alice, "PROPFIND", "/dav/seed.bin", &[("depth", "0")], get.as_bytes().to_vec()).await?;
    ensure!(r.text().contains("blue"), "{r}");

    // Over quota: 507, nothing changes (known length refused before the body; unknown length
    // refused as it passes the quota).
    dav(&alice, "PUT", "/dav/seed.bin", &[], data::bytes("big", 1_200_000)).await?.check(507)?;
    let (stream, _) = data::generated_stream("big2", 1_500_000, 64 * 1024, None);
    let r = alice.req(method("PUT")?, "/dav/new.bin").body(reqwest::Body::wrap_stream(stream)).send().await?;
    r.check(507)?;
    alice.stat("/new.bin").await?.check(404)?;
    ensure!(rest_bytes(&alice, "/seed.bin").await? == data::bytes("seed", 100_000));

    // Partial updates are refused and create nothing; OPTIONS advertises classes 1, 2 (and 3).
    let r = dav(&alice, "PUT", "/dav/part.txt", &[("content-range", "bytes 0-3/10")], b"abcd".to_vec()).await?;
    r.check(501)?;
    alice.stat("/part.txt").await?.check(404)?;
    let r = dav(&alice, "PUT", "/dav/seed.bin", &[("content-range", "bytes 0-3/100000")], b"abcd".to_vec()).await?;
    r.check(501)?;
    let h = [("content-type", "application/x-sabredav-partialupdate"), ("x-update-range", "append")];
    dav(&alice, "PATCH", "/dav/seed.bin", &h, b"abcd".to_vec()).await?.check(405)?;
    let r = dav(&alice, "OPTIONS", "/dav/", &[], vec![]).await?;
    ensure!(r.status == 200 && r.header("dav").is_some_and(|d| d.contains('2') && !d.contains("partial")), "{r}");

    // Ranged GET through WebDAV.
    let r = dav(&alice, "GET", "/dav/seed.bin", &[("range", "bytes=1000-1999")], vec![]).await?;
    r.check(206)?;
    ensure!(r.body.as_ref() == &data::slice("seed", 1000, 1000)[..], "range body differs");
    let r = dav(&alice, "GET", "/dav/seed.bin", &[("range", "bytes=-10")], vec![]).await?;
    ensure!(r.status == 206 && r.body.as_ref() == &data::slice("seed", 99_990, 10)[..], "{r}");

    // An upload that dies half-way leaves the old version (and creates nothing new).
    admin
        .patch_json(&format!("/api/v1/admin/users/{alice_id}"), &serde_json::json!({"quota_bytes": null}))
        .await?
        .check(200)?;
    let versions_before = alice.get("/api/v1/versions/seed.bin").await?.value()?;
    for target in ["/dav/seed.bin", "/dav/half.bin"] {
        let host = gw.url.strip_prefix("http://").context("http")?;
        let mut s = tokio::net::TcpStream::connect(host).await?;
        let token = token_of(&alice)?;
        let head = format!(
            "PUT {target} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nContent-Length: 10485760\r\n\r\n"
        );
        s.write_all(head.as_bytes()).await?;
        s.write_all(&data::bytes("partial", 6 * 1024 * 1024)).await?;
        s.flush().await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(s);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    ensure!(rest_bytes(&alice, "/seed.bin").await? == data::bytes("seed", 100_000), "old version kept");
    ensure!(alice.get("/api/v1/versions/seed.bin").await?.value()? == versions_before, "no new version");
    alice.stat("/half.bin").await?.check(404)?;

    // WebDAV → REST and REST → WebDAV, identical; ETag is the version, as in REST.
    let body = data::bytes("rt", 4 * 1024 * 1024 + 5);
    dav(&alice, "PUT", "/dav/rt.bin", &[], body.clone()).await?.check(201)?;
    let rest = alice.get_file("/rt.bin").await?;
    ensure!(rest.body.as_ref() == &body[..], "WebDAV → REST differs");
    let dget = dav(&alice, "GET", "/dav/rt.bin", &[], vec![]).await?;
    ensure!(dget.body.as_ref() == &body[..], "WebDAV read differs");
    ensure!(
        dget.header("etag").map(|e| e.trim_matches('"').to_string())
            == rest.header("etag").map(|e| e.trim_matches('"').to_string()),
        "ETags differ: {:?} vs {:?}",
        dget.header("etag"),
        rest.header("etag")
    );
    alice.put_file("/from-rest.txt", "rest").await?.check(201)?;
    ensure!(dav(&alice, "GET", "/dav/from-rest.txt", &[], vec![]).await?.body.as_ref() == b"rest");

    // MKCOL, COPY, MOVE of folders and DELETE to the trash, as a client does them.
    dav(&alice, "MKCOL", "/dav/d1", &[], vec![]).await?.check(201)?;
    dav(&alice, "MKCOL", "/dav/d1", &[], vec![]).await?.check(405)?;
    dav(&alice, "MKCOL", "/dav/missing/d2", &[], vec![]).await?.check(409)?;
    dav(&alice, "PUT", "/dav/d1/f.txt", &[], b"f".to_vec()).await?.check(201)?;
    // PUT on a folder (own, the top, `Shared with me`) is 405 with what a folder takes
    // (RFC 4918 §9.7.2), and the folder keeps its content.
    for target in ["/dav/d1", "/dav/d1/", "/dav/", "/dav/Shared%20with%20me"] {
        let r = dav(&alice, "PUT", target, &[], b"over".to_vec()).await?;
        ensure!(r.status == 405 && r.header("allow").is_some_and(|a| a.contains("PROPFIND")), "PUT {target}: {r}");
    }
    ensure!(rest_bytes(&alice, "/d1/f.txt").await? == b"f");
    ensure!(alice.stat("/d1").await?.entry(200)?.kind == nimbus_proto::wire::EntryKind::Dir);
    let d = format!("{}/dav/d2", gw.url);
    dav(&alice, "COPY", "/dav/d1", &[("destination", &d)], vec![]).await?.check(201)?;
    ensure!(rest_bytes(&alice, "/d2/f.txt").await? == b"f");
    let d = format!("{}/dav/D3", gw.url);
    dav(&alice, "MOVE", "/dav/d2", &[("destination", &d)], vec![]).await?.check(201)?;
    ensure!(rest_bytes(&alice, "/D3/f.txt").await? == b"f");
    // A case-only rename keeps the folder and its content.
    let d = format!("{}/dav/d3", gw.url);
    dav(&alice, "MOVE", "/dav/D3", &[("destination", &d)], vec![]).await?.check_any(&[201, 204])?;
    let e = alice.stat("/d3").await?.entry(200)?;
    ensure!(e.name == "d3", "{e:?}");
    ensure!(rest_bytes(&alice, "/d3/f.txt").await? == b"f");
    // Overwriting the folder that holds the source is refused; nothing moves.
    let d = format!("{}/dav/d3", gw.url);
    for m in ["MOVE", "COPY"] {
        let r = dav(&alice, m, "/dav/d3/f.txt", &[("destination", &d), ("overwrite", "T")], vec![]).await?;
        ensure!(r.status == 207 && r.text().contains("403 Forbidden"), "{m}: {r}");
        ensure!(rest_bytes(&alice, "/d3/f.txt").await? == b"f", "{m} onto its own folder lost the file");
    }
    dav(&alice, "DELETE", "/dav/d3", &[], vec![]).await?.check(204)?;
    alice.stat("/d3").await?.check(404)?;
    let trash = alice.get("/api/v1/trash").await?.value()?;
    let items = trash["entries"].as_array().cloned().unwrap_or_default();
    ensure!(
        items.iter().filter(|i| i["original_path"].as_str().is_some_and(|p| p.starts_with("/d3"))).count() == 1,
        "the folder went to the trash as one item: {trash}"
    );
    Ok(())
});

/// With the gateway's own TLS (`--tls self-signed`), Basic with the account password is
/// accepted (what Windows' "Map network drive" sends); a wrong one is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webdav_password_over_tls() -> anyhow::Result<()> {
    use nimbus_e2e::{ADMIN_PASSWORD, bins};
    let tmp = tempfile::Builder::new().prefix("nimbus-dav-tls-").tempdir()?;
    let data_dir = tmp.path().join("data");
    let stdout_path = tmp.path().join("gateway.stdout");
    let mut cmd = tokio::process::Command::new(bins::gateway_bin()?);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--tls", "self-signed", "--data-dir"]).arg(&data_dir);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("NIMBUS_") || k.starts_with("AWS_") {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd.env("NIMBUS_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path)?)
        .stderr(std::fs::File::create(tmp.path().join("gateway.stderr"))?)
        .kill_on_drop(true);
    let mut child = cmd.spawn().context("start the gateway")?;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let url = loop {
        let out = std::fs::read_to_string(&stdout_path).unwrap_or_default();
        if let Some(rest) = out.lines().find_map(|l| l.split_once("listening on ").map(|(_, r)| r.to_string())) {
            break rest.split_whitespace().next().unwrap_or_default().to_string();
        }
        if let Some(status) = child.try_wait()? {
            bail!(
                "the gateway exited during start-up ({status}): {}",
                std::fs::read_to_string(tmp.path().join("gateway.stderr"))?
            );
        }
        ensure!(std::time::Instant::now() < deadline, "no `listening on` line within 90 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    ensure!(url.starts_with("https://"), "{url}");
    let cert = reqwest::Certificate::from_pem(&std::fs::read(data_dir.join("tls/cert.pem"))?)?;
    let client =
        reqwest::Client::builder().no_proxy().tls_certs_only([cert]).timeout(Duration::from_secs(30)).build()?;
    let send = |m: &str, path: &str, auth: String, body: Vec<u8>| {
        let req = client
            .request(Method::from_bytes(m.as_bytes()).unwrap_or(Method::GET), format!("{url}{path}"))
            .header("authorization", auth)
            .header("depth", "1")
            .body(body);
        async move {
            let r = req.send().await?;
            let status = r.status().as_u16();
            let text = r.text().await?;
            Ok::<_, anyhow::Error>((status, text))
        }
    };
    let good = basic("admin", ADMIN_PASSWORD);
    let (s, t) = send("PROPFIND", "/dav/", good.clone(), vec![]).await?;
    ensure!(s == 207, "{s} {t}");
    let (s, t) = send("PUT", "/dav/over-tls.txt", good.clone(), b"tls".to_vec()).await?;
    ensure!(s == 201, "{s} {t}");
    let (s, t) = send("GET", "/dav/over-tls.txt", good.clone(), vec![]).await?;
    ensure!(s == 200 && t == "tls", "{s} {t}");
    // Verified passwords are remembered briefly: the second request is the cached path.
    let (s, _) = send("PROPFIND", "/dav/", good, vec![]).await?;
    ensure!(s == 207);
    let (s, t) = send("PROPFIND", "/dav/", basic("admin", "not-the-password"), vec![]).await?;
    ensure!(s == 401, "{s} {t}");
    let _ = child.start_kill();
    let _ = child.wait().await;
    Ok(())
}
