//! Two users, one gateway: user B (`alice2`) probes every door with every identifier of user A
//! (`alice`): paths, traversal spellings, version ids, trash ids, block hashes, token ids,
//! admin endpoints. B must never see A's data, and the answer for A's existing thing must be
//! identical (status and body) to the answer for a thing that does not exist.

use anyhow::{Context, bail, ensure};
use nimbus_e2e::http::{Api, encode_path, raw_request};
use nimbus_e2e::{Resp, backend_test};
use nimbus_proto::wire::{TokenList, TrashList, VersionList};

const SECRET: &[u8] = b"alice's secret: the launch code is 0000";

struct Probe {
    method: &'static str,
    target: String,
    body: Option<String>,
    /// The status B must get.
    want: u16,
}

fn probe(method: &'static str, target: impl Into<String>, want: u16) -> Probe {
    Probe { method, target: target.into(), body: None, want }
}

fn probe_json(method: &'static str, target: impl Into<String>, body: serde_json::Value, want: u16) -> Probe {
    Probe { method, target: target.into(), body: Some(body.to_string()), want }
}

async fn send(api: &Api, p: &Probe) -> anyhow::Result<Resp> {
    let auth = format!("Bearer {}", api.token().context("token")?);
    let mut headers = vec![("Authorization", auth.as_str())];
    if p.body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    raw_request(api.base(), p.method, &p.target, &headers, p.body.as_deref().unwrap_or("").as_bytes()).await
}

/// Status, content type and body: what must not differ between "A's thing" and "nothing".
fn observable(r: &Resp) -> Observed {
    (r.status, r.header("content-type"), r.text())
}

/// Replaces `id` where it stands as a whole token (not inside a longer run of digits/hex).
fn mask(text: &str, id: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(pos) = rest.find(id) {
        let before = rest[..pos].chars().next_back();
        let after = rest[pos + id.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_ascii_alphanumeric());
        out.push_str(&rest[..pos]);
        out.push_str(if boundary(before) && boundary(after) { "<ID>" } else { id });
        rest = &rest[pos + id.len()..];
    }
    out.push_str(rest);
    out
}

/// Probes on paths: the same requests are sent before and after A creates her files.
fn path_probes() -> Vec<Probe> {
    let mut v = vec![
        probe("GET", "/api/v1/files/secret/a.txt", 404),
        probe("HEAD", "/api/v1/files/secret/a.txt", 404),
        probe("DELETE", "/api/v1/files/secret/a.txt", 404),
        probe("GET", "/api/v1/stat/secret/a.txt", 404),
        probe("GET", "/api/v1/stat/secret", 404),
        probe("GET", "/api/v1/dirs/secret", 404),
        probe("GET", "/api/v1/dirs/docs", 404),
        probe("GET", "/api/v1/dirs/", 200),
        probe("GET", "/api/v1/versions/secret/a.txt", 404),
        probe("GET", "/api/v1/manifests/secret/a.txt", 404),
        probe_json("POST", "/api/v1/move", serde_json::json!({"from": "/secret/a.txt", "to": "/stolen.txt"}), 404),
        probe_json("POST", "/api/v1/copy", serde_json::json!({"from": "/secret/a.txt", "to": "/stolen.txt"}), 404),
        probe_json("POST", "/api/v1/copy", serde_json::json!({"from": "/docs", "to": "/stolen"}), 404),
        probe_json(
            "POST",
            "/api/v1/move",
            serde_json::json!({"from": "../alice/secret/a.txt", "to": "/stolen.txt"}),
            400,
        ),
        probe_json("POST", "/api/v1/copy", serde_json::json!({"from": "/../secret/a.txt", "to": "/stolen.txt"}), 400),
        probe_json("POST", "/api/v1/copy", serde_json::json!({"from": "..\\secret\\a.txt", "to": "/stolen.txt"}), 400),
        probe("GET", "/api/v1/trash", 200),
    ];
    // Traversal spellings: each must be rejected (400) or resolve inside B's own space (404).
    for (target, want) in [
        ("/api/v1/files/..%2falice%2fsecret%2fa.txt", 400),
        ("/api/v1/files/..%2f..%2fsecret%2fa.txt", 400),
        ("/api/v1/files/..%2F..%2F..%2Fetc%2Fpasswd", 400),
        ("/api/v1/files/%2e%2e/secret/a.txt", 400),
        ("/api/v1/files/%2E%2E/%2E%2E/alice/secret/a.txt", 400),
        ("/api/v1/files/.%2e/alice/secret/a.txt", 400),
        ("/api/v1/files/../alice/secret/a.txt", 400),
        ("/api/v1/files/./secret/a.txt", 400),
        ("/api/v1/files/secret/./a.txt", 400),
        ("/api/v1/files/secret/../secret/a.txt", 400),
        ("/api/v1/files/..\\secret\\a.txt", 400),
        ("/api/v1/files/%5c..%5csecret%5ca.txt", 400),
        ("/api/v1/files/..%5csecret%5ca.txt", 400),
        ("/api/v1/files/secret%5ca.txt", 400),
        ("/api/v1/files/secret//a.txt", 400),
        ("/api/v1/files/secret%2f%2fa.txt", 400),
        ("/api/v1/files//secret/a.txt", 400),
        ("/api/v1/files/secret/a.txt%00", 400),
        ("/api/v1/files/secret%00/a.txt", 400),
        ("/api/v1/files/%c0%ae%c0%ae/secret/a.txt", 400),
        // Decoded exactly once: `%252e%252e` is the literal (valid) name `%2e%2e`, absent in B's space.
        ("/api/v1/files/%252e%252e/secret/a.txt", 404),
        ("/api/v1/files/%252e%252e%252fsecret%252fa.txt", 404),
        ("/api/v1/stat/..%2falice", 400),
        ("/api/v1/dirs/..%2f", 400),
        ("/api/v1/dirs/%2e%2e", 400),
        ("/api/v1/versions/..%2fsecret%2fa.txt", 400),
        ("/api/v1/manifests/%2e%2e/secret/a.txt", 400),
    ] {
        v.push(probe("GET", target, want));
    }
    v.push(probe("DELETE", "/api/v1/files/..%2fsecret", 400));
    v.push(probe("DELETE", "/api/v1/files/%2e%2e", 400));
    v
}

/// B's answers to [`path_probes`], plus every expectation they broke (all collected, so one run
/// reports every hole).
async fn run_path_probes(b: &Api) -> anyhow::Result<(Vec<(String, Observed)>, Vec<String>)> {
    let mut out = Vec::new();
    let mut failures = Vec::new();
    for p in path_probes() {
        let r = send(b, &p).await?;
        let label = format!("{} {} {}", p.method, p.target, p.body.as_deref().unwrap_or(""));
        if r.status != p.want {
            failures.push(format!("B: {label}: want {}, got: {r}", p.want));
        } else if r.status >= 400
            && p.method != "HEAD"
            && let Err(e) = r.error_detail()
        {
            failures.push(format!("B: {label}: {e:#}"));
        }
        ensure!(!contains(&r.body, SECRET), "B saw A's data: {r}");
        out.push((label, observable(&r)));
    }
    Ok((out, failures))
}

type Observed = (u16, Option<String>, String);

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

backend_test!(two_users, |gw| async move {
    let (a_id, a) = gw.user("alice", None).await?;
    let (_, b) = gw.user("alice2", None).await?;

    let (before, mut failures) = run_path_probes(&b).await?;

    // A's things.
    a.put_file("/secret/a.txt", "first version").await?.entry(201)?;
    let a_entry = a.put_file("/secret/a.txt", SECRET.to_vec()).await?.entry(200)?;
    let a_version = a_entry.version.context("version")?;
    let a_versions: VersionList =
        a.get(&format!("/api/v1/versions/{}", encode_path("/secret/a.txt"))).await?.ok(200)?;
    let a_old_version = a_versions.versions.last().context("old version")?.version;
    a.put_file("/docs/x.txt", "docs").await?.entry(201)?;
    a.put_file("/docs-x/y.txt", "docs-x").await?.entry(201)?;
    a.put_file("/secret/old.txt", "old").await?.entry(201)?;
    a.delete(&nimbus_e2e::http::files_url("/secret/old.txt")).await?.check(204)?;
    let a_trash: TrashList = a.get("/api/v1/trash").await?.ok(200)?;
    let a_trash_id = a_trash.entries.first().context("A's trash entry")?.id;
    let a_tokens: TokenList = a.get("/api/v1/auth/tokens").await?.ok(200)?;
    let a_token_id = a_tokens.tokens.first().context("A's token")?.id;
    let a_hash = nimbus_e2e::data::hash_hex(SECRET);

    // 1. Paths: identical answers before and after A's files exist.
    let (after, _) = run_path_probes(&b).await?;
    for ((label, x), (_, y)) in before.iter().zip(&after) {
        if x != y {
            failures
                .push(format!("B's answer to {label} changed once A's data existed:\n before: {x:?}\n after:  {y:?}"));
        }
    }

    // 2. Identifiers: A's id versus an id that exists nowhere, answers identical once the id is masked.
    b.put_file("/mine.txt", "bob's own").await?.entry(201)?;
    let ghost_hash = nimbus_e2e::data::hash_hex(b"exists nowhere");
    let secret_len = SECRET.len();
    let id_probes = |id: String, hash: String| {
        vec![
            probe("GET", format!("/api/v1/files/mine.txt?version={id}"), 404),
            probe("GET", format!("/api/v1/files/secret/a.txt?version={id}"), 404),
            probe("HEAD", format!("/api/v1/files/mine.txt?version={id}"), 404),
            probe("GET", format!("/api/v1/manifests/mine.txt?version={id}"), 404),
            probe_json(
                "POST",
                "/api/v1/versions/mine.txt",
                serde_json::json!({ "version": id.parse::<i64>().unwrap_or(0) }),
                404,
            ),
            probe_json("POST", format!("/api/v1/trash/{id}/restore"), serde_json::json!({}), 404),
            probe_json("POST", format!("/api/v1/trash/{id}/restore"), serde_json::json!({"to": "/stolen"}), 404),
            probe("DELETE", format!("/api/v1/trash/{id}"), 404),
            probe("DELETE", format!("/api/v1/auth/tokens/{id}"), 404),
            probe("GET", format!("/api/v1/admin/users/{id}"), 403),
            probe_json("PATCH", format!("/api/v1/admin/users/{id}"), serde_json::json!({"disabled": true}), 403),
            probe("DELETE", format!("/api/v1/admin/users/{id}"), 403),
            probe("GET", format!("/api/v1/blocks/{hash}"), 404),
            probe("HEAD", format!("/api/v1/blocks/{hash}"), 404),
            probe_json("POST", "/api/v1/blocks/missing", serde_json::json!({ "hashes": [hash] }), 200),
            probe_json(
                "POST",
                "/api/v1/manifests/stolen.txt",
                serde_json::json!({"base_version": null, "blocks": [{"hash": hash, "size": secret_len}]}),
                400,
            ),
            probe_json(
                "POST",
                "/api/v1/manifests/mine.txt",
                serde_json::json!({"base_version": null, "blocks": [{"hash": hash, "size": secret_len}], "force": true}),
                400,
            ),
        ]
    };
    let ghost = 900_000_000i64;
    for (real, fake) in [
        (a_version.to_string(), (a_version + ghost).to_string()),
        (a_old_version.to_string(), (a_old_version + ghost).to_string()),
        (a_trash_id.to_string(), (a_trash_id + ghost).to_string()),
        (a_token_id.to_string(), (a_token_id + ghost).to_string()),
        (a_id.to_string(), (a_id + ghost).to_string()),
    ] {
        for (pr, pf) in id_probes(real.clone(), a_hash.clone()).iter().zip(id_probes(fake.clone(), ghost_hash.clone()))
        {
            let (rr, rf) = (send(&b, pr).await?, send(&b, &pf).await?);
            ensure!(!contains(&rr.body, SECRET), "B saw A's data: {rr}");
            if rr.status != pr.want {
                failures.push(format!("B: {} {}: want {}, got: {rr}", pr.method, pr.target, pr.want));
            }
            // Mask both identifiers in both answers (symmetric, so a `1` in a message cannot
            // differ just because A's id happens to be 1).
            let norm = |r: &Resp| {
                let (s, ct, body) = observable(r);
                let body = [&real, &fake, &a_hash, &ghost_hash].iter().fold(body, |b, id| mask(&b, id));
                (s, ct, body)
            };
            let (x, y) = (norm(&rr), norm(&rf));
            if x != y {
                failures.push(format!(
                    "B can tell A's identifier from a missing one:\n {} {} → {x:?}\n {} {} → {y:?}",
                    pr.method, pr.target, pf.method, pf.target
                ));
            }
        }
    }
    // The block probes in detail: per-space blocks.
    let m: nimbus_proto::wire::MissingBlocksResponse =
        b.post_json("/api/v1/blocks/missing", &serde_json::json!({ "hashes": [a_hash] })).await?.ok(200)?;
    ensure!(m.missing == std::slice::from_ref(&a_hash), "A's block counts as held by B: {m:?}");
    let blocks = [nimbus_proto::wire::BlockRef { hash: a_hash.clone(), size: secret_len as u64 }];
    b.commit("/stolen.txt", None, &blocks).await?.check_error(400, "missing_blocks")?;
    b.put_block(&a_hash, b"not the secret".to_vec()).await?.check_error(400, "hash_mismatch")?;
    b.get_file("/stolen.txt").await?.check_error(404, "not_found")?;

    // 3. Writes by B land in B's space only.
    b.put_file("/secret/a.txt", "bob data").await?.entry(201)?;
    let r = b.get_file("/secret/a.txt").await?;
    ensure!(r.body.as_ref() == b"bob data", "{r}");
    let r = a.get_file("/secret/a.txt").await?;
    ensure!(r.body.as_ref() == SECRET, "A's file changed: {r}");
    let vl: VersionList = a.get(&format!("/api/v1/versions/{}", encode_path("/secret/a.txt"))).await?.ok(200)?;
    ensure!(vl.versions.len() == 2, "A's versions changed: {:?}", vl.versions);
    b.delete(&nimbus_e2e::http::files_url("/secret/a.txt")).await?.check(204)?;
    b.delete("/api/v1/trash").await?.check(204)?;
    a.get_file("/secret/a.txt").await?.check(200)?;
    // B holding the same bytes legitimately (content-addressing across spaces) changes nothing for A.
    b.put_block(&a_hash, SECRET.to_vec()).await?.check(201)?;
    b.commit("/own-copy.txt", None, &blocks).await?.entry(201)?;
    b.delete(&nimbus_e2e::http::files_url("/own-copy.txt")).await?.check(204)?;
    b.delete("/api/v1/trash").await?.check(204)?;
    let r = a.get_file("/secret/a.txt").await?;
    ensure!(r.body.as_ref() == SECRET, "B's purge touched A's block: {r}");
    let r = a.get(&format!("/api/v1/blocks/{a_hash}")).await?;
    ensure!(r.body.as_ref() == SECRET, "A's block: {r}");

    // A's token, trash and listing are untouched.
    a.get("/api/v1/me").await?.check(200)?;
    let t: TrashList = a.get("/api/v1/trash").await?.ok(200)?;
    ensure!(t.entries.iter().any(|e| e.id == a_trash_id), "A's trash entry vanished");
    let root: Vec<String> = b.list_all("/", None).await?.into_iter().map(|e| e.name).collect();
    ensure!(root == ["mine.txt", "secret"], "B's root: {root:?}");
    ensure!(failures.is_empty(), "{} isolation expectation(s) broken:\n{}", failures.len(), failures.join("\n"));
    Ok(())
});

backend_test!(prefix_boundaries, |gw| async move {
    let (_, a) = gw.user("alice", None).await?;
    let (_, a2) = gw.user("alice2", None).await?;
    a.put_file("/docs/x.txt", "docs").await?.entry(201)?;
    a.put_file("/docs-x/y.txt", "docs-x").await?.entry(201)?;
    a.put_file("/docs.bak/z.txt", "docs.bak").await?.entry(201)?;
    a2.put_file("/docs/x.txt", "alice2 docs").await?.entry(201)?;

    let names = |v: Vec<nimbus_proto::wire::Entry>| v.into_iter().map(|e| e.name).collect::<Vec<_>>();
    ensure!(names(a.list_all("/docs", None).await?) == ["x.txt"]);
    // Moving /docs takes nothing of /docs-x or /docs.bak.
    a.post_json("/api/v1/move", &serde_json::json!({"from": "/docs", "to": "/moved"})).await?.entry(200)?;
    a.get_file("/docs-x/y.txt").await?.check(200)?;
    a.get_file("/docs.bak/z.txt").await?.check(200)?;
    ensure!(names(a.list_all("/moved", None).await?) == ["x.txt"]);
    a.post_json("/api/v1/move", &serde_json::json!({"from": "/moved", "to": "/docs"})).await?.entry(200)?;
    // Deleting /docs leaves its prefix-siblings.
    a.delete(&nimbus_e2e::http::files_url("/docs")).await?.check(204)?;
    let r = a.get_file("/docs-x/y.txt").await?;
    ensure!(r.status == 200 && r.body.as_ref() == b"docs-x", "{r}");
    a.get_file("/docs.bak/z.txt").await?.check(200)?;
    a.get_file("/docs/x.txt").await?.check_error(404, "not_found")?;
    // Purging A's /docs leaves alice2's /docs alone (alice vs alice2).
    a.delete("/api/v1/trash").await?.check(204)?;
    let r = a2.get_file("/docs/x.txt").await?;
    ensure!(r.status == 200 && r.body.as_ref() == b"alice2 docs", "{r}");
    ensure!(names(a.list_all("/", None).await?) == ["docs-x", "docs.bak"]);
    ensure!(names(a2.list_all("/", None).await?) == ["docs"]);
    // Usernames are not prefixes of each other's spaces either: deleting alice leaves alice2 whole.
    let admin = gw.admin().await?;
    let l: nimbus_proto::wire::UserList = admin.get("/api/v1/admin/users?q=alice").await?.ok(200)?;
    let alice = l.users.iter().find(|u| u.username == "alice").context("alice")?;
    admin.delete(&format!("/api/v1/admin/users/{}", alice.id)).await?.check(204)?;
    let r = a2.get_file("/docs/x.txt").await?;
    ensure!(r.status == 200 && r.body.as_ref() == b"alice2 docs", "deleting alice touched alice2: {r}");
    Ok(())
});

/// A body of `len` bytes that sends all but its last 2 MiB, then waits for `gate` before the
/// rest: an upload still arriving when the test changes who may write.
fn gated_body(seed: &str, len: usize, gate: tokio::sync::oneshot::Receiver<()>) -> reqwest::Body {
    let data = nimbus_e2e::data::bytes(seed, len);
    let (head, tail) = data.split_at(len - (2 << 20));
    let (head, tail) = (bytes::Bytes::copy_from_slice(head), bytes::Bytes::copy_from_slice(tail));
    let first = futures::stream::iter(
        head.chunks(256 << 10).map(|c| Ok::<_, std::io::Error>(head.slice_ref(c))).collect::<Vec<_>>(),
    );
    let rest = futures::stream::once(async move {
        let _ = gate.await;
        Ok(tail)
    });
    reqwest::Body::wrap_stream(futures::StreamExt::chain(first, rest))
}

/// Pending bytes of `api`'s space (what a body on its way has stored so far).
async fn pending(api: &Api) -> anyhow::Result<u64> {
    Ok(api.get("/api/v1/me").await?.ok::<nimbus_proto::wire::Me>(200)?.usage.pending)
}

/// Runs one upload through `send` with a gated body of 8 MiB, waits until `charged`'s space
/// holds its first block, calls `revoke`, lets the rest of the body go, and returns the answer
/// (or None if the connection failed).
async fn upload_while<S, SF, R, RF>(charged: &Api, send: S, revoke: R) -> anyhow::Result<Option<(u16, String)>>
where
    S: FnOnce(reqwest::Body, u64) -> SF,
    SF: std::future::Future<Output = anyhow::Result<(u16, String)>> + Send + 'static,
    R: FnOnce() -> RF,
    RF: std::future::Future<Output = anyhow::Result<()>>,
{
    const LEN: usize = 8 << 20;
    // The upload before this one, if refused, let go of its blocks before it answered.
    let held = pending(charged).await?;
    ensure!(held == 0, "{held} bytes still pending after the last upload's answer");
    let (open, gate) = tokio::sync::oneshot::channel();
    // Content of its own each time: a block the space holds already is not charged again.
    static UPLOADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seed = format!("mid-upload {}", UPLOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let mut upload = tokio::spawn(send(gated_body(&seed, LEN, gate), LEN as u64));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if pending(charged).await? >= 4 << 20 {
            break;
        }
        ensure!(tokio::time::Instant::now() < deadline, "the upload's first block was not stored within 60 s");
        tokio::select! {
            done = &mut upload => bail!("the upload ended before its body did: {:?}", done?),
            _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
        }
    }
    revoke().await?;
    let _ = open.send(());
    let outcome =
        tokio::time::timeout(std::time::Duration::from_secs(60), upload).await.context("the upload hung")??;
    Ok(outcome.ok())
}

backend_test!(
    revoked_while_uploading,
    opts = nimbus_e2e::GatewayOptions::default().arg("--s3-listen").arg("127.0.0.1:0"),
    |gw| async move {
        use reqwest::Method;
        let (_, alice) = gw.user("alice", None).await?;
        let (_, bob) = gw.user("bob", None).await?;
        alice.mkdir("/Team").await?.check(201)?;
        let share = |permission: &'static str| {
            let alice = alice.clone();
            async move {
                let body = serde_json::json!({"path": "/Team", "username": "bob", "permission": permission});
                alice.post_json("/api/v1/shares", &body).await?.ok::<nimbus_proto::wire::ShareInfo>(201)
            }
        };
        let rest_put = |api: &Api, path: &str| {
            let (api, url) = (api.clone(), format!("/api/v1/files/{}", encode_path(path)));
            move |body: reqwest::Body, len: u64| async move {
                let r = api.req(Method::PUT, &url).header("content-length", &len.to_string()).body(body).send().await?;
                Ok((r.status, r.text()))
            }
        };
        let gone_from_alice = |path: &'static str| {
            let alice = alice.clone();
            async move {
                let r = alice.stat(path).await?;
                ensure!(r.status == 404, "{path} was written after the revocation: {r}");
                Ok::<_, anyhow::Error>(())
            }
        };

        // The control: nothing revoked, the same gated upload through a share lands.
        let s = share("write").await?;
        let got = upload_while(&alice, rest_put(&bob, "/Shared with me/Team/kept.bin"), || async { Ok(()) }).await?;
        ensure!(matches!(&got, Some((201, _))), "the control upload: {got:?}");

        // A share withdrawn while bob's body is still arriving: nothing lands in alice's space.
        let got = upload_while(&alice, rest_put(&bob, "/Shared with me/Team/a.bin"), || async {
            alice.delete(&format!("/api/v1/shares/{}", s.id)).await?.check(204).map(|_| ())
        })
        .await?;
        ensure!(matches!(&got, Some((403 | 404, body)) if body.contains("\"error\"")), "share withdrawn: {got:?}");
        gone_from_alice("/Team/a.bin").await?;

        // Through WebDAV, a share turned read-only meanwhile.
        let s = share("write").await?;
        let dav = {
            let bob = bob.clone();
            move |body: reqwest::Body, len: u64| async move {
                let r = bob
                    .req(Method::PUT, "/dav/Shared%20with%20me/Team/b.bin")
                    .header("content-length", &len.to_string())
                    .body(body)
                    .send()
                    .await?;
                Ok((r.status, r.text()))
            }
        };
        let got = upload_while(&alice, dav, || async {
            let body = serde_json::json!({"permission": "read"});
            alice.patch_json(&format!("/api/v1/shares/{}", s.id), &body).await?.check(200).map(|_| ())
        })
        .await?;
        ensure!(matches!(&got, Some((403, _))), "WebDAV, share made read-only: {got:?}");
        gone_from_alice("/Team/b.bin").await?;

        // Bob's own space, his token revoked (he signed out elsewhere with it).
        let got = upload_while(&bob, rest_put(&bob, "/c.bin"), || async {
            bob.req(Method::POST, "/api/v1/auth/logout").send().await?.check(204).map(|_| ())
        })
        .await?;
        ensure!(matches!(&got, Some((401, _))), "token revoked: {got:?}");
        let bob = bob.login_ok("bob", &nimbus_e2e::gateway::user_password("bob")).await?;
        ensure!(bob.stat("/c.bin").await?.status == 404, "written with a revoked token");

        // A file drop withdrawn while a visitor's file is arriving.
        let link: nimbus_proto::wire::LinkInfo =
            alice.post_json("/api/v1/links", &serde_json::json!({"path": "/Team", "mode": "upload"})).await?.ok(201)?;
        let drop = {
            let (visitor, url) = (alice.anonymous(), format!("/s/{}/upload/d.bin", link.token));
            move |body: reqwest::Body, len: u64| async move {
                let r =
                    visitor.req(Method::PUT, &url).header("content-length", &len.to_string()).body(body).send().await?;
                Ok((r.status, r.text()))
            }
        };
        let got = upload_while(&alice, drop, || async {
            alice.delete(&format!("/api/v1/links/{}", link.id)).await?.check(204).map(|_| ())
        })
        .await?;
        ensure!(matches!(&got, Some((404, _))), "link withdrawn: {got:?}");
        gone_from_alice("/Team/d.bin").await?;

        // S3: the access key revoked during a (presigned) PutObject.
        let key = nimbus_e2e::s3::new_key(&bob).await?;
        let url = nimbus_e2e::s3::presign_v4(
            &gw.s3_endpoint()?,
            &key,
            "PUT",
            "/bob/e.bin",
            std::time::Duration::from_secs(600),
            std::time::SystemTime::now(),
        )?;
        let s3_put = move |body: reqwest::Body, len: u64| async move {
            let r = reqwest::Client::new().put(url).header("content-length", len).body(body).send().await?;
            let status = r.status().as_u16();
            Ok((status, r.text().await?))
        };
        let got = upload_while(&bob, s3_put, || async {
            bob.delete(&format!("/api/v1/keys/{}", key.id)).await?.check(204).map(|_| ())
        })
        .await?;
        ensure!(matches!(&got, Some((403, body)) if body.contains("AccessDenied")), "S3 key revoked: {got:?}");
        ensure!(bob.stat("/e.bin").await?.status == 404, "written with a revoked key");

        // Every refused upload let go of what it had stored, before it answered.
        for (who, api) in [("alice", &alice), ("bob", &bob)] {
            let p = pending(api).await?;
            ensure!(p == 0, "{who}: {p} bytes still pending");
        }
        Ok(())
    }
);
