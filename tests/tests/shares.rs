//! Sharing between users over REST, against every backend: the owner shares a folder or a
//! file with a permission, lists, changes and revokes; the recipient finds it under
//! `/Shared with me/<name>`, reads (and with `write` changes) it there, and leaves it; and
//! every trick to reach past a share's edge answers as a missing path would.

use anyhow::{Context, ensure};
use nimbus_e2e::dav::lock;
use nimbus_e2e::s3::{new_key, s3_io};
use nimbus_e2e::{Api, backend_test, encode_path};
use nimbus_proto::wire::{
    AdminShareList, AuditList, CreatedS3Key, DirListing, Entry, IncomingShareList, Me, ShareInfo, ShareList,
    SharePermission, TrashList, VersionList,
};
use serde_json::json;

const SHARED: &str = "/Shared with me";

async fn share(owner: &Api, path: &str, with: &str, permission: &str) -> anyhow::Result<ShareInfo> {
    let r =
        owner.post_json("/api/v1/shares", &json!({"path": path, "username": with, "permission": permission})).await?;
    r.ok(201)
}

fn names(l: &DirListing) -> Vec<String> {
    l.entries.iter().map(|e| e.name.clone()).collect()
}

backend_test!(share_a_folder_read_then_write, |gw| async move {
    let (_, alice) = gw.user("alice", Some(4 << 20)).await?;
    let (_, bob) = gw.user("bob", None).await?;
    alice.put_file("/Projects/Plan/notes.txt", "the plan").await?.check(201)?;
    alice.put_file("/Projects/secret.txt", "not shared").await?.check(201)?;
    alice.put_file("/private.txt", "mine").await?.check(201)?;

    // Before: bob has no shares and no `Shared with me` folder.
    let r = bob.list_dir("/", None, None).await?;
    ensure!(!names(&r.ok(200)?).contains(&"Shared with me".to_string()), "{r}");
    bob.list_dir(SHARED, None, None).await?.ok::<DirListing>(200)?;
    bob.stat(&format!("{SHARED}/Plan")).await?.check_error(404, "not_found")?;

    let s = share(&alice, "/Projects/Plan", "bob", "read").await?;
    ensure!(s.path.as_deref() == Some("/Projects/Plan") && s.username.as_deref() == Some("bob"), "{s:?}");
    ensure!(s.permission == SharePermission::Read, "{s:?}");
    ensure!(s.created.ends_with('Z'), "{s:?}");
    let list: ShareList = alice.get("/api/v1/shares").await?.ok(200)?;
    ensure!(list.shares.len() == 1 && list.shares[0].id == s.id, "{list:?}");
    let incoming: IncomingShareList = bob.get("/api/v1/shares/incoming").await?.ok(200)?;
    ensure!(incoming.shares.len() == 1, "{incoming:?}");
    ensure!(incoming.shares[0].owner == "alice" && incoming.shares[0].name == "Plan", "{incoming:?}");

    // Bob sees it at the top of his space and reads it.
    let top: DirListing = bob.list_dir("/", None, None).await?.ok(200)?;
    ensure!(names(&top) == ["Shared with me"], "{top:?}");
    let shared: DirListing = bob.list_dir(SHARED, None, None).await?.ok(200)?;
    ensure!(names(&shared) == ["Plan"], "{shared:?}");
    let inside: DirListing = bob.list_dir(&format!("{SHARED}/Plan"), None, None).await?.ok(200)?;
    ensure!(names(&inside) == ["notes.txt"], "{inside:?}");
    ensure!(inside.entries[0].path == "/Shared with me/Plan/notes.txt", "the owner's path leaks: {inside:?}");
    let r = bob.get_file(&format!("{SHARED}/Plan/notes.txt")).await?;
    r.check(200)?;
    ensure!(r.body.as_ref() == b"the plan", "{r}");
    let e: Entry = bob.stat(&format!("{SHARED}/plan/NOTES.txt")).await?.ok(200)?;
    ensure!(e.path == "/Shared with me/Plan/notes.txt", "{e:?}");

    // Read-only: every write is 403 forbidden and changes nothing.
    bob.put_file(&format!("{SHARED}/Plan/new.txt"), "x").await?.check_error(403, "forbidden")?;
    bob.put_file(&format!("{SHARED}/Plan/notes.txt"), "x").await?.check_error(403, "forbidden")?;
    bob.delete("/api/v1/files/Shared%20with%20me/Plan/notes.txt").await?.check_error(403, "forbidden")?;
    bob.mkdir(&format!("{SHARED}/Plan/sub")).await?.check_error(403, "forbidden")?;
    bob.put_file(&format!("{SHARED}/mine.txt"), "x").await?.check_error(403, "forbidden")?;
    let r = alice.get_file("/Projects/Plan/notes.txt").await?;
    ensure!(r.body.as_ref() == b"the plan", "{r}");

    // Write: bob changes and adds files; they land in alice's space, on her quota.
    let r = alice.patch_json(&format!("/api/v1/shares/{}", s.id), &json!({"permission": "write"})).await?;
    ensure!(r.ok::<ShareInfo>(200)?.permission == SharePermission::Write, "{r}");
    bob.put_file(&format!("{SHARED}/Plan/notes.txt"), "bob's plan").await?.check(200)?;
    let e: Entry = bob.put_file(&format!("{SHARED}/Plan/Sub/new.txt"), "new").await?.ok(201)?;
    ensure!(e.path == "/Shared with me/Plan/Sub/new.txt", "{e:?}");
    let r = alice.get_file("/Projects/Plan/notes.txt").await?;
    ensure!(r.body.as_ref() == b"bob's plan", "{r}");
    alice.get_file("/Projects/Plan/Sub/new.txt").await?.check(200)?;
    let me: serde_json::Value = bob.get("/api/v1/me").await?.ok(200)?;
    ensure!(me["used_bytes"] == 0, "bob was charged for alice's files: {me}");
    let r = bob
        .post_json(
            "/api/v1/move",
            &json!({"from": "/Shared with me/Plan/Sub/new.txt", "to": "/Shared with me/Plan/renamed.txt"}),
        )
        .await?;
    ensure!(r.ok::<Entry>(200)?.path == "/Shared with me/Plan/renamed.txt", "{r}");
    alice.get_file("/Projects/Plan/renamed.txt").await?.check(200)?;
    // Versions through the share are the owner's.
    bob.get("/api/v1/versions/Shared%20with%20me/Plan/notes.txt").await?.check(200)?;

    // The share's edge: nothing outside it is reachable or shown.
    for probe in [
        "/Shared with me/Plan/../secret.txt",
        "/Shared with me/Plan/%2e%2e/secret.txt",
        "/Shared with me/Projects/secret.txt",
        "/Shared with me/alice/private.txt",
        "/Shared with me/Plan/../../private.txt",
    ] {
        let r = bob.get(&format!("/api/v1/files{}", probe.replace(' ', "%20"))).await?;
        ensure!(r.status == 404 || r.status == 400, "{probe}: {r}");
        ensure!(!r.text().contains("not shared") && !r.text().contains("mine"), "{probe} leaked: {r}");
    }
    // Refusals name paths as bob sees them, never alice's folders above the share, and a full
    // space is alice's, without her figures.
    let refusals = [
        bob.mkdir(&format!("{SHARED}/Plan/notes.txt/sub")).await?,
        bob.post_json(
            "/api/v1/move",
            &json!({"from": "/Shared with me/Plan/notes.txt", "to": "/Shared with me/Plan/Sub"}),
        )
        .await?,
        // Under the gateway's drain limit (8 MiB), so the refusal is read rather than reset.
        bob.put_file(&format!("{SHARED}/Plan/big.bin"), vec![7u8; 5 << 20]).await?,
        bob.get("/api/v1/versions/Shared%20with%20me/Plan/Sub").await?,
    ];
    for r in &refusals {
        ensure!((400..500).contains(&r.status), "{r}");
        ensure!(!r.text().contains("Projects") && !r.text().contains("4194304"), "leaks the owner's space: {r}");
    }
    ensure!(refusals[0].text().contains("/Shared with me/Plan/notes.txt"), "{}", refusals[0]);
    ensure!(refusals[2].text().contains("alice"), "{}", refusals[2]);

    // A copy out of the share into bob's own space copies the content (on bob's quota); the
    // moves and copies across the edge are tested in `moves_and_copies_across_the_edge`.
    let e: Entry = bob
        .post_json("/api/v1/copy", &json!({"from": "/Shared with me/Plan/notes.txt", "to": "/copy.txt"}))
        .await?
        .ok(201)?;
    ensure!(e.path == "/copy.txt", "{e:?}");
    ensure!(bob.get_file("/copy.txt").await?.body.as_ref() == b"bob's plan");
    // The share's own entry is alice's: bob leaves it rather than deleting it.
    bob.delete("/api/v1/files/Shared%20with%20me/Plan").await?.check_error(403, "forbidden")?;
    alice.stat("/Projects/Plan").await?.check(200)?;

    // Only the owner changes a share; others cannot see or touch it.
    let (_, carol) = gw.user("carol", None).await?;
    bob.patch_json(&format!("/api/v1/shares/{}", s.id), &json!({"permission": "read"}))
        .await?
        .check_error(403, "forbidden")?;
    carol
        .patch_json(&format!("/api/v1/shares/{}", s.id), &json!({"permission": "read"}))
        .await?
        .check_error(404, "not_found")?;
    carol.delete(&format!("/api/v1/shares/{}", s.id)).await?.check_error(404, "not_found")?;
    ensure!(carol.get("/api/v1/shares").await?.ok::<ShareList>(200)?.shares.is_empty());
    carol.stat(&format!("{SHARED}/Plan")).await?.check_error(404, "not_found")?;

    // What bob did through the share is in the audit log as he saw it, with whose it is;
    // listings are not, nor anything alice did in her own space.
    let admin = gw.admin().await?;
    let log: AuditList = admin.get("/api/v1/admin/audit?action=share_access").await?.ok(200)?;
    let details: Vec<String> = log.entries.iter().filter_map(|e| e.detail.clone()).collect();
    ensure!(log.entries.iter().all(|e| e.actor.as_deref() == Some("bob")), "{log:?}");
    ensure!(details.iter().any(|d| d == "read /Shared with me/Plan/notes.txt (shared by alice)"), "{details:?}");
    ensure!(
        details.iter().any(|d| d.starts_with("write /Shared with me/Plan/") && d.ends_with("(shared by alice)")),
        "{details:?}"
    );
    ensure!(!details.iter().any(|d| d.contains("Projects")), "the owner's path leaks: {details:?}");

    // Revocation holds at once.
    alice.delete(&format!("/api/v1/shares/{}", s.id)).await?.check(204)?;
    bob.get_file(&format!("{SHARED}/Plan/notes.txt")).await?.check_error(404, "not_found")?;
    let top: DirListing = bob.list_dir("/", None, None).await?.ok(200)?;
    ensure!(names(&top) == ["copy.txt"], "only bob's own copy is left: {top:?}");
    alice.delete(&format!("/api/v1/shares/{}", s.id)).await?.check_error(404, "not_found")?;
    Ok(())
});

backend_test!(share_a_file_rename_trash_and_leave, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    alice.put_file("/Report.pdf", "v1").await?.check(201)?;
    alice.put_file("/Other/Report.pdf", "other").await?.check(201)?;
    let a = share(&alice, "/Report.pdf", "bob", "read").await?;
    let b = share(&alice, "/Other/Report.pdf", "bob", "write").await?;
    // Two shares with one name: the second gets its own.
    let incoming: IncomingShareList = bob.get("/api/v1/shares/incoming").await?.ok(200)?;
    let mut got: Vec<String> = incoming.shares.iter().map(|s| s.name.clone()).collect();
    got.sort();
    ensure!(got == ["Report (2).pdf", "Report.pdf"], "{incoming:?}");
    let r = bob.get_file(&format!("{SHARED}/Report.pdf")).await?;
    ensure!(r.body.as_ref() == b"v1", "{r}");

    // The recipient renames their own entry of a share (a move within `Shared with me`, over
    // REST and WebDAV); the owner's file keeps its name. Another share's name is taken (409).
    let r = bob
        .post_json("/api/v1/move", &mv(&format!("{SHARED}/Report (2).pdf"), &format!("{SHARED}/From alice.pdf")))
        .await?;
    ensure!(r.ok::<Entry>(200)?.path == "/Shared with me/From alice.pdf", "{r}");
    let r = bob.get_file(&format!("{SHARED}/From alice.pdf")).await?;
    ensure!(r.body.as_ref() == b"other", "{r}");
    bob.get_file(&format!("{SHARED}/Report (2).pdf")).await?.check_error(404, "not_found")?;
    let r = alice.get_file("/Other/Report.pdf").await?;
    ensure!(r.body.as_ref() == b"other", "{r}");
    let r = bob
        .post_json("/api/v1/move", &mv(&format!("{SHARED}/From alice.pdf"), &format!("{SHARED}/report.PDF")))
        .await?;
    r.check_error(409, "already_exists")?;
    let to = "/dav/Shared%20with%20me/Alice.pdf";
    let r = bob
        .req(reqwest::Method::from_bytes(b"MOVE")?, "/dav/Shared%20with%20me/From%20alice.pdf")
        .header("destination", to)
        .send()
        .await?;
    ensure!(r.status == 201, "{r}");
    let incoming: IncomingShareList = bob.get("/api/v1/shares/incoming").await?.ok(200)?;
    let mut got: Vec<String> = incoming.shares.iter().map(|s| s.name.clone()).collect();
    got.sort();
    ensure!(got == ["Alice.pdf", "Report.pdf"], "{incoming:?}");
    let r = bob.get_file(&format!("{SHARED}/Alice.pdf")).await?;
    ensure!(r.body.as_ref() == b"other", "{r}");
    // Only an entry of `Shared with me` is renamed this way: not alice's, not the folder itself.
    let r = alice.post_json("/api/v1/move", &mv(&format!("{SHARED}/Alice.pdf"), &format!("{SHARED}/Mine.pdf"))).await?;
    ensure!(r.status == 404 || r.status == 403, "{r}");
    let r = bob.post_json("/api/v1/move", &mv(SHARED, "/Elsewhere")).await?;
    r.check_error(403, "forbidden")?;

    // The share follows the file when the owner renames it.
    alice.post_json("/api/v1/move", &json!({"from": "/Report.pdf", "to": "/Archive/Final.pdf"})).await?.check(200)?;
    let list: ShareList = alice.get("/api/v1/shares").await?.ok(200)?;
    ensure!(list.shares.iter().any(|s| s.id == a.id && s.path.as_deref() == Some("/Archive/Final.pdf")), "{list:?}");
    let r = bob.get_file(&format!("{SHARED}/Report.pdf")).await?;
    ensure!(r.body.as_ref() == b"v1", "{r}");

    // In the trash it leads nowhere; restored, it is back.
    alice.delete("/api/v1/files/Archive/Final.pdf").await?.check(204)?;
    bob.get_file(&format!("{SHARED}/Report.pdf")).await?.check_error(404, "not_found")?;
    let incoming: IncomingShareList = bob.get("/api/v1/shares/incoming").await?.ok(200)?;
    ensure!(incoming.shares.len() == 1, "{incoming:?}");

    // Bad requests change nothing.
    for body in [
        json!({"path": "/", "username": "bob", "permission": "read"}),
        json!({"path": "/Other", "username": "alice", "permission": "read"}),
        json!({"path": "/Other", "username": "nobody", "permission": "read"}),
        json!({"path": "/Other", "username": "bob", "permission": "admin"}),
        json!({"path": "/Other", "username": "bob"}),
        json!({"path": "/../x", "username": "bob", "permission": "read"}),
    ] {
        let r = alice.post_json("/api/v1/shares", &body).await?;
        ensure!((400..500).contains(&r.status) && r.status != 401, "{body}: {r}");
    }
    alice
        .post_json("/api/v1/shares", &json!({"path": "/Missing", "username": "bob", "permission": "read"}))
        .await?
        .check_error(404, "not_found")?;
    // Sharing the same thing twice with one user is refused.
    alice
        .post_json("/api/v1/shares", &json!({"path": "/Other/Report.pdf", "username": "bob", "permission": "read"}))
        .await?
        .check_error(409, "already_exists")?;
    // A recipient cannot pass on what was shared with them.
    bob.post_json(
        "/api/v1/shares",
        &json!({"path": "/Shared with me/Alice.pdf", "username": "alice", "permission": "read"}),
    )
    .await?
    .check_error(400, "bad_request")?;

    // No door makes a folder or file of that name at the top of a space, where it would hide,
    // nor a new name directly in it: 403 `forbidden` (docs/API.md, Sharing), for a recipient
    // (bob) and for someone with no share (alice), in any case of the name.
    for api in [&bob, &alice] {
        for top in ["/Shared with me", "/shared WITH me"] {
            api.mkdir(top).await?.check_error(403, "forbidden").with_context(|| format!("mkdir {top}"))?;
            api.put_file(top, "x").await?.check_error(403, "forbidden").with_context(|| format!("PUT {top}"))?;
            let child = format!("{top}/New");
            api.mkdir(&child).await?.check_error(403, "forbidden").with_context(|| format!("mkdir {child}"))?;
            api.put_file(&format!("{child}.txt"), "x").await?.check_error(403, "forbidden")?;
            for dav_path in [format!("/dav/{}", encode_path(top)), format!("/dav/{}", encode_path(&child))] {
                let r = api.req(reqwest::Method::from_bytes(b"MKCOL")?, &dav_path).send().await?;
                ensure!(r.status == 403, "MKCOL {dav_path}: {r}");
            }
        }
    }
    ensure!(
        alice
            .list_dir("/", None, None)
            .await?
            .ok::<DirListing>(200)?
            .entries
            .iter()
            .all(|e| e.name != "shared WITH me")
    );

    // The recipient leaves; the owner's file stays.
    bob.delete(&format!("/api/v1/shares/{}", b.id)).await?.check(204)?;
    ensure!(bob.get("/api/v1/shares/incoming").await?.ok::<IncomingShareList>(200)?.shares.is_empty());
    alice.get_file("/Other/Report.pdf").await?.check(200)?;
    ensure!(alice.get("/api/v1/shares").await?.ok::<ShareList>(200)?.shares.len() == 1);
    Ok(())
});

backend_test!(
    share_changes_hold_at_once_on_every_gateway,
    only = postgres_s3,
    opts = nimbus_e2e::GatewayOptions::default(),
    |gw| async move {
        let (_, alice) = gw.user("alice", None).await?;
        let (_, bob_a) = gw.user("bob", None).await?;
        let other = gw.start_sibling().await?;
        let bob_b = other.api.with_token(bob_a.token().unwrap_or_default());
        alice.put_file("/Team/doc.txt", "one").await?.check(201)?;
        let s = share(&alice, "/Team", "bob", "write").await?;

        // Bob works through gateway B on what alice shared through gateway A.
        let r = bob_b.get_file(&format!("{SHARED}/Team/doc.txt")).await?;
        ensure!(r.body.as_ref() == b"one", "{r}");
        bob_b.put_file(&format!("{SHARED}/Team/doc.txt"), "two").await?.check(200)?;
        ensure!(alice.get_file("/Team/doc.txt").await?.body.as_ref() == b"two");

        // Read-only on A: B refuses the very next write (no waiting: the share is read per request).
        alice.patch_json(&format!("/api/v1/shares/{}", s.id), &json!({"permission": "read"})).await?.check(200)?;
        bob_b.put_file(&format!("{SHARED}/Team/doc.txt"), "three").await?.check_error(403, "forbidden")?;
        // Revoked on A: B answers 404 at once, for reads and listings.
        alice.delete(&format!("/api/v1/shares/{}", s.id)).await?.check(204)?;
        bob_b.get_file(&format!("{SHARED}/Team/doc.txt")).await?.check_error(404, "not_found")?;
        bob_b.list_dir(&format!("{SHARED}/Team"), None, None).await?.check_error(404, "not_found")?;
        ensure!(alice.get_file("/Team/doc.txt").await?.body.as_ref() == b"two");
        Ok(())
    }
);

backend_test!(admins_see_and_revoke_any_share, |gw| async move {
    let admin = gw.admin().await?;
    let (alice_id, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    let (_, carol) = gw.user("carol", None).await?;
    alice.put_file("/A/x.txt", "a").await?.check(201)?;
    carol.put_file("/C/y.txt", "c").await?.check(201)?;
    let s1 = share(&alice, "/A", "bob", "read").await?;
    let s2 = share(&carol, "/C/y.txt", "alice", "write").await?;

    let all: AdminShareList = admin.get("/api/v1/admin/shares").await?.ok(200)?;
    let ids: Vec<i64> = all.shares.iter().map(|s| s.id).collect();
    ensure!(ids == [s2.id, s1.id], "newest first: {all:?}");
    ensure!(all.shares[1].owner == "alice" && all.shares[1].username.as_deref() == Some("bob"), "{all:?}");
    ensure!(all.shares[1].path.as_deref() == Some("/A"), "{all:?}");
    // Those one user gave or got.
    let bobs: AdminShareList = admin.get("/api/v1/admin/shares?user=bob").await?.ok(200)?;
    ensure!(bobs.shares.len() == 1 && bobs.shares[0].id == s1.id, "{bobs:?}");
    let alices: AdminShareList = admin.get("/api/v1/admin/shares?user=ALICE").await?.ok(200)?;
    ensure!(alices.shares.len() == 2, "{alices:?}");
    ensure!(admin.get("/api/v1/admin/shares?user=nobody").await?.ok::<AdminShareList>(200)?.shares.is_empty());
    admin.get("/api/v1/admin/shares?limit=0").await?.check_error(400, "bad_request")?;

    // Not for users.
    alice.get("/api/v1/admin/shares").await?.check_error(403, "forbidden")?;
    alice.delete(&format!("/api/v1/admin/shares/{}", s2.id)).await?.check_error(403, "forbidden")?;

    // The policy: with sharing turned off, alice shares nothing new; what she shared stays.
    let r = admin.patch_json(&format!("/api/v1/admin/users/{alice_id}"), &json!({"sharing": false})).await?;
    ensure!(r.json::<serde_json::Value>()?["sharing"] == false, "{r}");
    alice.put_file("/B/z.txt", "b").await?.check(201)?;
    alice
        .post_json("/api/v1/shares", &json!({"path": "/B", "username": "carol", "permission": "read"}))
        .await?
        .check_error(403, "forbidden")?;
    bob.stat(&format!("{SHARED}/A")).await?.check(200)?;
    // Nor does she give more through what she shared: not writable, though read-only stays.
    let at = format!("/api/v1/shares/{}", s1.id);
    alice.patch_json(&at, &json!({"permission": "write"})).await?.check_error(403, "forbidden")?;
    alice.patch_json(&at, &json!({"permission": "read"})).await?.check(200)?;
    bob.put_file(&format!("{SHARED}/A/new.txt"), "b").await?.check(403)?;
    admin.patch_json(&format!("/api/v1/admin/users/{alice_id}"), &json!({"sharing": true})).await?.check(200)?;
    share(&alice, "/B", "carol", "read").await?;
    let audit: serde_json::Value = admin.get("/api/v1/admin/audit?action=user_update").await?.ok(200)?;
    ensure!(audit.to_string().contains("sharing turned off"), "{audit}");

    // Revoked by an administrator: gone for the recipient at once, audited.
    admin.delete(&format!("/api/v1/admin/shares/{}", s1.id)).await?.check(204)?;
    bob.stat(&format!("{SHARED}/A")).await?.check_error(404, "not_found")?;
    admin.delete(&format!("/api/v1/admin/shares/{}", s1.id)).await?.check_error(404, "not_found")?;
    admin.delete("/api/v1/admin/shares/x").await?.check_error(404, "not_found")?;
    let audit: serde_json::Value = admin.get("/api/v1/admin/audit?action=share_revoked").await?.ok(200)?;
    ensure!(audit.to_string().contains(&format!("share {}", s1.id)), "{audit}");
    let audit: serde_json::Value = admin.get("/api/v1/admin/audit?action=share_created").await?.ok(200)?;
    ensure!(audit.to_string().contains("/A with bob"), "{audit}");
    Ok(())
});

/// `method path` on the WebDAV door with the caller's token and `headers`.
async fn dav(
    api: &Api,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> anyhow::Result<nimbus_e2e::Resp> {
    let mut r = api.req(reqwest::Method::from_bytes(method.as_bytes())?, path);
    for (k, v) in headers {
        r = r.header(k, v);
    }
    r.body(body.to_string()).send().await
}

backend_test!(share_through_webdav, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    alice.put_file("/Projects/Plan/notes.txt", "the plan").await?.check(201)?;
    alice.put_file("/Projects/secret.txt", "not shared").await?.check(201)?;
    bob.put_file("/own.txt", "bob's").await?.check(201)?;
    let s = share(&alice, "/Projects/Plan", "bob", "read").await?;

    // Listings: the virtual folder at the top, the share in it, the share's content.
    let top = dav(&bob, "PROPFIND", "/dav/", &[("depth", "1")], "").await?;
    ensure!(top.status == 207 && top.text().contains("Shared%20with%20me") && top.text().contains("own.txt"), "{top}");
    let index = dav(&bob, "PROPFIND", "/dav/Shared%20with%20me/", &[("depth", "1")], "").await?;
    ensure!(index.status == 207 && index.text().contains("/dav/Shared%20with%20me/Plan"), "{index}");
    let inside = dav(&bob, "PROPFIND", "/dav/Shared%20with%20me/Plan/", &[("depth", "1")], "").await?;
    ensure!(inside.status == 207 && inside.text().contains("notes.txt"), "{inside}");
    ensure!(!inside.text().contains("Projects") && !inside.text().contains("secret"), "{inside}");
    let r = dav(&bob, "GET", "/dav/Shared%20with%20me/Plan/notes.txt", &[], "").await?;
    ensure!(r.status == 200 && r.body.as_ref() == b"the plan", "{r}");
    let log: AuditList = gw.admin().await?.get("/api/v1/admin/audit?action=share_access").await?.ok(200)?;
    let read = "read /Shared with me/Plan/notes.txt (shared by alice)";
    ensure!(log.entries.iter().any(|e| e.detail.as_deref() == Some(read)), "{log:?}");

    // Read-only: writes refused, nothing changes.
    for (method, path, headers) in [
        ("PUT", "/dav/Shared%20with%20me/Plan/notes.txt", vec![]),
        ("PUT", "/dav/Shared%20with%20me/Plan/new.txt", vec![]),
        ("MKCOL", "/dav/Shared%20with%20me/Plan/sub", vec![]),
        ("DELETE", "/dav/Shared%20with%20me/Plan/notes.txt", vec![]),
        ("PUT", "/dav/Shared%20with%20me/mine.txt", vec![]),
    ] {
        let r = dav(&bob, method, path, &headers, if method == "PUT" { "x" } else { "" }).await?;
        ensure!(r.status == 403, "{method} {path}: {r}");
    }
    ensure!(alice.get_file("/Projects/Plan/notes.txt").await?.body.as_ref() == b"the plan");

    // Writable: bob's changes land in alice's space.
    alice.patch_json(&format!("/api/v1/shares/{}", s.id), &json!({"permission": "write"})).await?.check(200)?;
    let r = dav(&bob, "PUT", "/dav/Shared%20with%20me/Plan/notes.txt", &[], "bob's plan").await?;
    ensure!(r.status == 204 || r.status == 201, "{r}");
    ensure!(alice.get_file("/Projects/Plan/notes.txt").await?.body.as_ref() == b"bob's plan");
    dav(&bob, "MKCOL", "/dav/Shared%20with%20me/Plan/Sub", &[], "").await?.check(201)?;
    let r = dav(
        &bob,
        "MOVE",
        "/dav/Shared%20with%20me/Plan/notes.txt",
        &[("destination", "/dav/Shared%20with%20me/Plan/Sub/moved.txt")],
        "",
    )
    .await?;
    ensure!(r.status == 201 || r.status == 204, "{r}");
    alice.get_file("/Projects/Plan/Sub/moved.txt").await?.check(200)?;

    // The edge: out of the share (a copy, then the source to alice's trash), into it, onto the
    // share's entry, past it.
    let r = dav(&bob, "MOVE", "/dav/Shared%20with%20me/Plan/Sub/moved.txt", &[("destination", "/dav/taken.txt")], "")
        .await?;
    ensure!(r.status == 201, "{r}");
    ensure!(bob.get_file("/taken.txt").await?.body.as_ref() == b"bob's plan");
    alice.get_file("/Projects/Plan/Sub/moved.txt").await?.check_error(404, "not_found")?;
    let r = dav(&bob, "COPY", "/dav/own.txt", &[("destination", "/dav/Shared%20with%20me/Plan/own.txt")], "").await?;
    ensure!(r.status == 201, "{r}");
    ensure!(alice.get_file("/Projects/Plan/own.txt").await?.body.as_ref() == b"bob's");
    ensure!(dav(&bob, "DELETE", "/dav/Shared%20with%20me/Plan", &[], "").await?.status == 403);
    ensure!(
        dav(&bob, "MOVE", "/dav/Shared%20with%20me/Plan", &[("destination", "/dav/Mine")], "").await?.status == 403
    );
    for probe in ["/dav/Shared%20with%20me/Plan/%2e%2e/secret.txt", "/dav/Shared%20with%20me/Projects/secret.txt"] {
        let r = dav(&bob, "GET", probe, &[], "").await?;
        ensure!((400..500).contains(&r.status) && !r.text().contains("not shared"), "{probe}: {r}");
    }
    alice.stat("/Projects/Plan").await?.check(200)?;
    ensure!(bob.get_file("/stolen.txt").await?.status == 404);

    // Revoked: the folder and the virtual one are gone for bob.
    alice.delete(&format!("/api/v1/shares/{}", s.id)).await?.check(204)?;
    ensure!(dav(&bob, "GET", "/dav/Shared%20with%20me/Plan/Sub/moved.txt", &[], "").await?.status == 404);
    let top = dav(&bob, "PROPFIND", "/dav/", &[("depth", "1")], "").await?;
    ensure!(top.status == 207 && !top.text().contains("Shared%20with%20me"), "{top}");
    Ok(())
});

async fn current_bytes(api: &Api) -> anyhow::Result<u64> {
    Ok(api.get("/api/v1/me").await?.ok::<Me>(200)?.usage.current)
}

fn mv(from: &str, to: &str) -> serde_json::Value {
    json!({"from": from, "to": to})
}

// Moves and copies between bob's own space, alice's read share and dave's write share, over
// REST and WebDAV: a copy across copies the content onto the destination owner's quota; a move
// across is a copy and the source to its owner's trash, and needs write on both sides.
backend_test!(moves_and_copies_across_the_edge, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, dave) = gw.user("dave", Some(64 << 10)).await?;
    let (_, bob) = gw.user("bob", None).await?;
    alice.put_file("/Projects/Plan/notes.txt", "the plan").await?.check(201)?;
    alice.put_file("/Projects/Plan/Deep/a.txt", "deep").await?.check(201)?;
    alice.put_file("/Projects/secret.txt", "not shared").await?.check(201)?;
    dave.put_file("/Box/inbox.txt", "dave's").await?.check(201)?;
    dave.put_file("/Private/p.txt", "dave private").await?.check(201)?;
    bob.put_file("/own.txt", "bob's").await?.check(201)?;
    bob.put_file("/OwnDir/x.txt", "x in bob's folder").await?.check(201)?;
    share(&alice, "/Projects/Plan", "bob", "read").await?;
    share(&dave, "/Box", "bob", "write").await?;
    let bob_before = current_bytes(&bob).await?;

    // Read share -> own space: a copy copies the whole folder, onto bob's quota.
    let e: Entry = bob.post_json("/api/v1/copy", &mv("/Shared with me/Plan", "/PlanCopy")).await?.ok(201)?;
    ensure!(e.path == "/PlanCopy" && e.name == "PlanCopy", "{e:?}");
    ensure!(bob.get_file("/PlanCopy/notes.txt").await?.body.as_ref() == b"the plan");
    ensure!(bob.get_file("/PlanCopy/Deep/a.txt").await?.body.as_ref() == b"deep");
    ensure!(current_bytes(&bob).await? == bob_before + 12, "bob is charged for his copy");
    // ... and it is bob's: changing it leaves alice's alone.
    bob.put_file("/PlanCopy/notes.txt", "bob's copy").await?.check(200)?;
    ensure!(alice.get_file("/Projects/Plan/notes.txt").await?.body.as_ref() == b"the plan");
    // A move out of a read share, a copy or move into it, and moving the share itself: 403.
    for (op, from, to) in [
        ("move", "/Shared with me/Plan/notes.txt", "/stolen.txt"),
        ("move", "/Shared with me/Plan/Deep", "/StolenDeep"),
        ("copy", "/own.txt", "/Shared with me/Plan/own.txt"),
        ("move", "/own.txt", "/Shared with me/Plan/own.txt"),
        ("move", "/Shared with me/Plan", "/Mine"),
        ("move", "/Shared with me/Box", "/Mine"),
        ("copy", "/own.txt", "/Shared with me/Box"),
        ("move", "/own.txt", "/Shared with me/new-share"),
        ("move", "/Shared with me/Box/inbox.txt", "/Shared with me/Plan/inbox.txt"),
        ("move", "/Shared with me/Plan/notes.txt", "/Shared with me/Box/notes.txt"),
    ] {
        let r = bob.post_json(&format!("/api/v1/{op}"), &mv(from, to)).await?;
        r.check_error(403, "forbidden").map_err(|e| anyhow::anyhow!("{op} {from} -> {to}: {e}"))?;
    }
    ensure!(alice.get_file("/Projects/Plan/notes.txt").await?.body.as_ref() == b"the plan");
    ensure!(dave.get_file("/Box/inbox.txt").await?.body.as_ref() == b"dave's");
    bob.get_file("/stolen.txt").await?.check_error(404, "not_found")?;
    bob.stat("/Mine").await?.check_error(404, "not_found")?;
    alice.stat("/Projects/Plan/own.txt").await?.check_error(404, "not_found")?;

    // One owner's share -> another's: copied into dave's space, on dave's quota, not bob's.
    let bob_now = current_bytes(&bob).await?;
    let e: Entry = bob
        .post_json("/api/v1/copy", &mv("/Shared with me/Plan/notes.txt", "/Shared with me/Box/notes.txt"))
        .await?
        .ok(201)?;
    ensure!(e.path == "/Shared with me/Box/notes.txt", "{e:?}");
    ensure!(dave.get_file("/Box/notes.txt").await?.body.as_ref() == b"the plan");
    ensure!(current_bytes(&dave).await? == 6 + 12 + 8, "dave pays for what lands in his space");
    ensure!(current_bytes(&bob).await? == bob_now, "bob pays nothing for it");

    // Write share -> own space: a move is a copy, then dave's file goes to dave's trash.
    let e: Entry =
        bob.post_json("/api/v1/move", &mv("/Shared with me/Box/notes.txt", "/from-dave.txt")).await?.ok(200)?;
    ensure!(e.path == "/from-dave.txt", "{e:?}");
    ensure!(bob.get_file("/from-dave.txt").await?.body.as_ref() == b"the plan");
    dave.get_file("/Box/notes.txt").await?.check_error(404, "not_found")?;
    let trash: TrashList = dave.get("/api/v1/trash").await?.ok(200)?;
    let item = trash.entries.iter().find(|t| t.original_path == "/Box/notes.txt").context("not in dave's trash")?;
    let dave_trash_id = item.id;
    let bob_trash: TrashList = bob.get("/api/v1/trash").await?.ok(200)?;
    ensure!(bob_trash.entries.iter().all(|t| t.name != "notes.txt"), "{bob_trash:?}");
    // Own space -> write share, a file and a folder.
    let e: Entry = bob.post_json("/api/v1/move", &mv("/own.txt", "/Shared with me/Box/own.txt")).await?.ok(200)?;
    ensure!(e.path == "/Shared with me/Box/own.txt", "{e:?}");
    ensure!(dave.get_file("/Box/own.txt").await?.body.as_ref() == b"bob's");
    bob.get_file("/own.txt").await?.check_error(404, "not_found")?;
    let r = bob.post_json("/api/v1/move", &mv("/OwnDir", "/Shared with me/Box/OwnDir")).await?;
    ensure!(r.ok::<Entry>(200)?.path == "/Shared with me/Box/OwnDir", "{r}");
    ensure!(dave.get_file("/Box/OwnDir/x.txt").await?.body.as_ref() == b"x in bob's folder");
    bob.stat("/OwnDir").await?.check_error(404, "not_found")?;

    // An existing name: 409 unless overwrite, then a new version of the destination.
    bob.post_json("/api/v1/copy", &mv("/from-dave.txt", "/Shared with me/Box/inbox.txt"))
        .await?
        .check_error(409, "already_exists")?;
    let r = bob
        .post_json(
            "/api/v1/copy",
            &json!({"from": "/from-dave.txt", "to": "/Shared with me/Box/inbox.txt", "overwrite": true}),
        )
        .await?;
    r.check(201)?;
    ensure!(dave.get_file("/Box/inbox.txt").await?.body.as_ref() == b"the plan");
    let versions: VersionList = dave.get("/api/v1/versions/Box/inbox.txt").await?.ok(200)?;
    ensure!(versions.versions.len() == 2, "the old content stays a version: {versions:?}");
    bob.post_json("/api/v1/copy", &mv("/PlanCopy", "/Shared with me/Box/OwnDir"))
        .await?
        .check_error(409, "already_exists")?;

    // Dave's quota decides what lands in his space, and the refusal names him, not his figures.
    bob.put_file("/big.bin", vec![1u8; 100 << 10]).await?.check(201)?;
    let r = bob.post_json("/api/v1/copy", &mv("/big.bin", "/Shared with me/Box/big.bin")).await?;
    r.check_error(413, "quota_exceeded")?;
    ensure!(r.text().contains("dave") && !r.text().contains("65536"), "{r}");
    let r = bob.post_json("/api/v1/move", &mv("/big.bin", "/Shared with me/Box/big.bin")).await?;
    r.check_error(413, "quota_exceeded")?;
    bob.stat("/big.bin").await?.check(200)?;
    dave.stat("/Box/big.bin").await?.check_error(404, "not_found")?;

    // Names past the edge, in either end: as missing (or invalid) paths, nothing leaks.
    for (from, to) in [
        ("/Shared with me/Plan/../secret.txt", "/got.txt"),
        ("/Shared with me/Plan/%2e%2e/secret.txt", "/got.txt"),
        ("/Shared with me/Plan%2F..%2Fsecret.txt", "/got.txt"),
        ("/Shared with me/Projects/secret.txt", "/got.txt"),
        ("/Shared with me/secret.txt", "/got.txt"),
        ("/Shared with me/Box/../Private/p.txt", "/got.txt"),
        ("/Shared with me/Box/../../Private/p.txt", "/got.txt"),
        ("/from-dave.txt", "/Shared with me/Box/../Private/evil.txt"),
        ("/from-dave.txt", "/Shared with me/Box%2F..%2FPrivate/evil.txt"),
        ("/from-dave.txt", "/Shared with me/Private/evil.txt"),
    ] {
        for op in ["copy", "move"] {
            let r = bob.post_json(&format!("/api/v1/{op}"), &mv(from, to)).await?;
            ensure!(matches!(r.status, 400 | 403 | 404), "{op} {from} -> {to}: {r}");
            // The owners' own paths (`/Projects/...`, `/Box/...`) never appear, nor their content.
            let t = r.text();
            ensure!(
                !t.contains("/Projects/Plan") && !t.contains("`/Box") && !t.contains("not shared"),
                "{op} {from}: {r}"
            );
        }
    }
    bob.stat("/got.txt").await?.check_error(404, "not_found")?;
    dave.stat("/Private/evil.txt").await?.check_error(404, "not_found")?;
    ensure!(dave.get_file("/Private/p.txt").await?.body.as_ref() == b"dave private");
    ensure!(bob.get_file("/from-dave.txt").await?.status == 200, "a refused move took the source");

    // Ids of dave's versions and trash items reach nothing through the share or bob's space.
    let private: Entry = dave.stat("/Private/p.txt").await?.ok(200)?;
    let pv = private.version.context("a file has a version")?;
    bob.get(&format!("/api/v1/files/Shared%20with%20me/Box/inbox.txt?version={pv}"))
        .await?
        .check_error(404, "not_found")?;
    bob.post_json("/api/v1/versions/Shared%20with%20me/Box/inbox.txt", &json!({"version": pv}))
        .await?
        .check_error(404, "not_found")?;
    // (Deleting versions is the owner's alone: refused through a share whatever the id.)
    bob.delete(&format!("/api/v1/versions/Shared%20with%20me/Box/inbox.txt?version={pv}"))
        .await?
        .check_error(403, "forbidden")?;
    bob.post_json(&format!("/api/v1/trash/{dave_trash_id}/restore"), &json!({}))
        .await?
        .check_error(404, "not_found")?;
    bob.delete(&format!("/api/v1/trash/{dave_trash_id}")).await?.check_error(404, "not_found")?;
    let trash: TrashList = dave.get("/api/v1/trash").await?.ok(200)?;
    ensure!(trash.entries.iter().any(|t| t.id == dave_trash_id), "{trash:?}");
    ensure!(dave.get_file("/Private/p.txt").await?.body.as_ref() == b"dave private");

    // Locks: dave's lock on a file in the share holds against bob's move or overwrite from
    // either side, and a token of a lock bob took in his own space opens nothing of dave's.
    dave.put_file("/Box/locked.txt", "locked").await?.check(201)?;
    let dave_token = lock(&dave, "/dav/Box/locked.txt", &[]).await?;
    bob.put_file("/mine-locked.txt", "mine").await?.check(201)?;
    let bob_token = lock(&bob, "/dav/mine-locked.txt", &[]).await?;
    for (op, from, to, overwrite) in [
        ("move", "/Shared with me/Box/locked.txt", "/took-locked.txt", false),
        ("copy", "/from-dave.txt", "/Shared with me/Box/locked.txt", true),
        ("move", "/from-dave.txt", "/Shared with me/Box/locked.txt", true),
    ] {
        let body = json!({"from": from, "to": to, "overwrite": overwrite});
        let r = bob.req(reqwest::Method::POST, &format!("/api/v1/{op}")).json(&body).send().await?;
        r.check_error(423, "locked")?;
        let r = bob
            .req(reqwest::Method::POST, &format!("/api/v1/{op}"))
            .header("x-nimbus-lock-token", &bob_token)
            .json(&body)
            .send()
            .await?;
        r.check_error(423, "locked")?;
    }
    bob.stat("/took-locked.txt").await?.check_error(404, "not_found")?;
    ensure!(dave.get_file("/Box/locked.txt").await?.body.as_ref() == b"locked");
    ensure!(bob.get_file("/from-dave.txt").await?.status == 200);
    // dave's lock does not stop a copy of the locked file out (it is only read), and bob's
    // lock guards his own file against a move from the share.
    bob.post_json("/api/v1/copy", &mv("/Shared with me/Box/locked.txt", "/locked-copy.txt")).await?.check(201)?;
    bob.post_json(
        "/api/v1/move",
        &json!({"from": "/Shared with me/Box/inbox.txt", "to": "/mine-locked.txt", "overwrite": true}),
    )
    .await?
    .check_error(423, "locked")?;
    ensure!(dave.get_file("/Box/inbox.txt").await?.status == 200, "a refused move took the source");
    dav(&dave, "UNLOCK", "/dav/Box/locked.txt", &[("lock-token", &format!("<{dave_token}>"))], "").await?.check(204)?;

    // The owner: moving a node that is shared with others to another owner's space would end
    // its shares, so it is refused (409); a copy is fine; within her space the share follows.
    bob.mkdir("/Inbox").await?.check(201)?;
    share(&bob, "/Inbox", "alice", "write").await?;
    for from in ["/Projects/Plan", "/Projects"] {
        let r = alice.post_json("/api/v1/move", &mv(from, "/Shared with me/Inbox/Plan")).await?;
        r.check_error(409, "conflict")?;
    }
    let r = alice.post_json("/api/v1/move", &mv("/Projects/secret.txt", "/Shared with me/Inbox/secret.txt")).await?;
    ensure!(r.ok::<Entry>(200)?.path == "/Shared with me/Inbox/secret.txt", "{r}");
    ensure!(bob.get_file("/Inbox/secret.txt").await?.body.as_ref() == b"not shared");
    alice.post_json("/api/v1/copy", &mv("/Projects/Plan", "/Shared with me/Inbox/Plan")).await?.check(201)?;
    ensure!(bob.get_file("/Inbox/Plan/Deep/a.txt").await?.body.as_ref() == b"deep");
    ensure!(bob.get_file("/Shared with me/Plan/notes.txt").await?.body.as_ref() == b"the plan", "the share holds");

    // WebDAV: the same rules (COPY of a folder, MOVE of a file and of a folder, refusals).
    let d = |p: &str| format!("/dav/{}", p.replace(' ', "%20"));
    dav(&bob, "COPY", &d("Shared with me/Plan"), &[("destination", &d("DavCopy"))], "").await?.check(201)?;
    ensure!(bob.get_file("/DavCopy/Deep/a.txt").await?.body.as_ref() == b"deep");
    dav(&bob, "MOVE", &d("Shared with me/Box/own.txt"), &[("destination", &d("back.txt"))], "").await?.check(201)?;
    ensure!(bob.get_file("/back.txt").await?.body.as_ref() == b"bob's");
    dave.stat("/Box/own.txt").await?.check_error(404, "not_found")?;
    dav(&bob, "MOVE", &d("DavCopy"), &[("destination", &d("Shared with me/Box/DavCopy"))], "").await?.check(201)?;
    ensure!(dave.get_file("/Box/DavCopy/notes.txt").await?.body.as_ref() == b"the plan");
    bob.stat("/DavCopy").await?.check_error(404, "not_found")?;
    for (m, from, to) in [
        ("MOVE", "Shared with me/Plan/notes.txt", "stolen.txt"),
        ("COPY", "back.txt", "Shared with me/Plan/back.txt"),
        ("MOVE", "back.txt", "Shared with me/Plan/back.txt"),
        ("MOVE", "Shared with me/Plan", "Mine"),
        ("MOVE", "Shared with me/Box", "Mine"),
    ] {
        let r = dav(&bob, m, &d(from), &[("destination", &d(to))], "").await?;
        ensure!(r.status == 403, "{m} {from} -> {to}: {r}");
    }
    for (from, to) in [
        ("/dav/Shared%20with%20me/Plan%2F..%2F..%2FProjects%2Fsecret.txt", "/dav/got.txt"),
        ("/dav/Shared%20with%20me/Plan/%2e%2e/secret.txt", "/dav/got.txt"),
        ("/dav/back.txt", "/dav/Shared%20with%20me/Box%2F..%2FPrivate%2Fevil.txt"),
        ("/dav/back.txt", "/dav/Shared%20with%20me/Box/%2e%2e/Private/evil.txt"),
    ] {
        for m in ["COPY", "MOVE"] {
            let r = dav(&bob, m, from, &[("destination", to)], "").await?;
            ensure!((400..500).contains(&r.status), "{m} {from} -> {to}: {r}");
        }
    }
    bob.stat("/got.txt").await?.check_error(404, "not_found")?;
    dave.stat("/Private/evil.txt").await?.check_error(404, "not_found")?;
    ensure!(bob.get_file("/back.txt").await?.status == 200);
    dav(&bob, "MKCOL", &d("Shared with me/Box/Made"), &[], "").await?.check(201)?;
    dav(&bob, "DELETE", &d("Shared with me/Box/Made"), &[], "").await?.check(204)?;

    // The owners' audit logs say what crossed, as bob saw it.
    let log: AuditList = gw.admin().await?.get("/api/v1/admin/audit?action=share_access").await?.ok(200)?;
    let by_bob = log.entries.iter().filter(|e| e.actor.as_deref() == Some("bob"));
    let details: Vec<String> = by_bob.filter_map(|e| e.detail.clone()).collect();
    for want in [
        "copy /Shared with me/Plan to /PlanCopy (shared by alice)",
        "move /Shared with me/Box/notes.txt to /from-dave.txt (shared by dave)",
        "move /own.txt to /Shared with me/Box/own.txt (shared by dave)",
        // WebDAV's moves, copies, new folders and deletes are audited as REST's are.
        "copy /Shared with me/Plan/notes.txt to /DavCopy/notes.txt (shared by alice)",
        "move /Shared with me/Box/own.txt to /back.txt (shared by dave)",
        "move /DavCopy to /Shared with me/Box/DavCopy (shared by dave)",
        "create folder /Shared with me/Box/Made (shared by dave)",
        "delete /Shared with me/Box/Made (shared by dave)",
    ] {
        ensure!(details.iter().any(|d| d == want), "no `{want}` in {details:?}");
    }
    ensure!(!details.iter().any(|d| d.contains("Projects")), "{details:?}");
    Ok(())
});

const PROPFIND_LOCKS: &str = r#"<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>"#;

// A WebDAV lock inside a write share is a lock on the owner's file: the recipient's lock stops
// the owner's writes (423) and the owner's stops the recipient's, through REST and WebDAV, as
// for the owner's own files; a read share takes no lock; the share's end releases the
// recipient's locks.
backend_test!(webdav_locks_inside_a_share, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    let (_, carol) = gw.user("carol", None).await?;
    alice.put_file("/Projects/Team/doc.txt", "v1").await?.check(201)?;
    alice.put_file("/Projects/Team/other.txt", "other").await?.check(201)?;
    let s = share(&alice, "/Projects/Team", "bob", "write").await?;
    share(&alice, "/Projects/Team", "carol", "read").await?;
    let bob_doc = "/dav/Shared%20with%20me/Team/doc.txt";

    // Bob's lock holds against alice in every door.
    let token = lock(&bob, bob_doc, &[("timeout", "Second-600")]).await?;
    alice.put_file("/Projects/Team/doc.txt", "alice").await?.check_error(423, "locked")?;
    alice.delete("/api/v1/files/Projects/Team/doc.txt").await?.check_error(423, "locked")?;
    alice
        .post_json("/api/v1/move", &mv("/Projects/Team/doc.txt", "/Projects/Team/moved.txt"))
        .await?
        .check_error(423, "locked")?;
    alice
        .post_json(
            "/api/v1/copy",
            &json!({"from": "/Projects/Team/other.txt", "to": "/Projects/Team/doc.txt", "overwrite": true}),
        )
        .await?
        .check_error(423, "locked")?;
    dav(&alice, "PUT", "/dav/Projects/Team/doc.txt", &[], "alice").await?.check(423)?;
    dav(&alice, "DELETE", "/dav/Projects/Team/doc.txt", &[], "").await?.check(423)?;
    // Also against bob's other clients without the token, and against the other recipient.
    bob.put_file(&format!("{SHARED}/Team/doc.txt"), "bob, no token").await?.check_error(423, "locked")?;
    ensure!(alice.get_file("/Projects/Team/doc.txt").await?.body.as_ref() == b"v1");
    // Both see it in lockdiscovery, each at the path they know; bob never at alice's.
    let r = dav(&alice, "PROPFIND", "/dav/Projects/Team/doc.txt", &[("depth", "0")], PROPFIND_LOCKS).await?;
    ensure!(r.status == 207 && r.text().contains(&token) && r.text().contains("/dav/Projects/Team/doc.txt"), "{r}");
    let r = dav(&bob, "PROPFIND", "/dav/Shared%20with%20me/Team/", &[("depth", "1")], PROPFIND_LOCKS).await?;
    ensure!(r.status == 207 && r.text().contains(&token) && !r.text().contains("Projects"), "{r}");
    // With the token bob writes, by WebDAV (If) and REST.
    let iff = format!("(<{token}>)");
    dav(&bob, "PUT", bob_doc, &[("if", &iff)], "bob v2").await?.check(204)?;
    let r = bob
        .req(reqwest::Method::PUT, "/api/v1/files/Shared%20with%20me/Team/doc.txt")
        .header("x-nimbus-lock-token", &token)
        .body("bob v3")
        .send()
        .await?;
    r.check(200)?;
    ensure!(alice.get_file("/Projects/Team/doc.txt").await?.body.as_ref() == b"bob v3");
    // Carol, with a read share, releases nothing, even with the token.
    let lt = format!("<{token}>");
    dav(&carol, "UNLOCK", "/dav/Shared%20with%20me/Team/doc.txt", &[("lock-token", &lt)], "").await?.check(403)?;
    alice.put_file("/Projects/Team/doc.txt", "alice").await?.check_error(423, "locked")?;
    dav(&bob, "UNLOCK", bob_doc, &[("lock-token", &lt)], "").await?.check(204)?;
    alice.put_file("/Projects/Team/doc.txt", "alice v4").await?.check(200)?;

    // Alice's lock holds against bob in every door (423, not 403).
    let a_token = lock(&alice, "/dav/Projects/Team/doc.txt", &[]).await?;
    dav(&bob, "PUT", bob_doc, &[], "bob").await?.check(423)?;
    dav(&bob, "DELETE", bob_doc, &[], "").await?.check(423)?;
    dav(&bob, "MOVE", bob_doc, &[("destination", "/dav/Shared%20with%20me/Team/moved.txt")], "").await?.check(423)?;
    bob.put_file(&format!("{SHARED}/Team/doc.txt"), "bob").await?.check_error(423, "locked")?;
    bob.delete("/api/v1/files/Shared%20with%20me/Team/doc.txt").await?.check_error(423, "locked")?;
    // Bob cannot take a lock over hers.
    let r = dav(&bob, "LOCK", bob_doc, &[], nimbus_e2e::dav::LOCKINFO).await?;
    r.check(423)?;
    ensure!(alice.get_file("/Projects/Team/doc.txt").await?.body.as_ref() == b"alice v4");
    dav(&alice, "UNLOCK", "/dav/Projects/Team/doc.txt", &[("lock-token", &format!("<{a_token}>"))], "")
        .await?
        .check(204)?;

    // A read share takes no lock (it would stop the owner's writes).
    let r = dav(&carol, "LOCK", "/dav/Shared%20with%20me/Team/doc.txt", &[], nimbus_e2e::dav::LOCKINFO).await?;
    r.check(403)?;
    dav(&carol, "LOCK", "/dav/Shared%20with%20me", &[], nimbus_e2e::dav::LOCKINFO).await?.check(403)?;
    alice.put_file("/Projects/Team/doc.txt", "alice v5").await?.check(200)?;

    // The share ends: bob's locks on alice's files go with it.
    lock(&bob, bob_doc, &[]).await?;
    lock(&bob, "/dav/Shared%20with%20me/Team/other.txt", &[]).await?;
    alice.put_file("/Projects/Team/other.txt", "x").await?.check_error(423, "locked")?;
    alice.delete(&format!("/api/v1/shares/{}", s.id)).await?.check(204)?;
    alice.put_file("/Projects/Team/doc.txt", "alice v6").await?.check(200)?;
    alice.put_file("/Projects/Team/other.txt", "alice").await?.check(200)?;
    Ok(())
});

/// `s3_io.py list` with delimiter `/` (or none), one page size; the `K`/`P` lines.
async fn s3_list(
    endpoint: &str,
    key: &CreatedS3Key,
    prefix: &str,
    max: &str,
    delim: &str,
) -> anyhow::Result<Vec<String>> {
    let out = s3_io(endpoint, key, &["list", "bob", prefix, max, delim]).await?;
    Ok(out.lines().filter(|l| !l.starts_with("PAGES")).map(str::to_string).collect())
}

backend_test!(
    share_through_s3,
    opts = nimbus_e2e::GatewayOptions::default().arg("--s3-listen").arg("127.0.0.1:0"),
    |gw| async move {
        let (_, alice) = gw.user("alice", None).await?;
        let (_, bob) = gw.user("bob", None).await?;
        alice.put_file("/Projects/Plan/notes.txt", "the plan").await?.check(201)?;
        alice.put_file("/Projects/Plan/sub/deep.txt", "deep").await?.check(201)?;
        alice.put_file("/Projects/secret.txt", "not shared").await?.check(201)?;
        bob.put_file("/mine.txt", "bob's").await?.check(201)?;
        bob.put_file("/Zeta/z.txt", "z").await?.check(201)?;
        let endpoint = gw.s3_endpoint()?;
        let key = new_key(&bob).await?;
        let io = |args: Vec<&str>| {
            let (endpoint, key) = (endpoint.clone(), key.clone());
            let args: Vec<String> = args.into_iter().map(str::to_string).collect();
            async move {
                let a: Vec<&str> = args.iter().map(String::as_str).collect();
                s3_io(&endpoint, &key, &a).await
            }
        };

        // Before any share: no `Shared with me/` in bob's bucket.
        ensure!(s3_list(&endpoint, &key, "", "1000", "/").await? == ["P Zeta/", "K mine.txt"]);
        let s = share(&alice, "/Projects/Plan", "bob", "read").await?;

        // The share is a prefix of bob's bucket, in key order, listed flat and by folder, and
        // page by page the same.
        let top = s3_list(&endpoint, &key, "", "1000", "/").await?;
        ensure!(top == ["P Shared with me/", "P Zeta/", "K mine.txt"], "{top:?}");
        let flat = s3_list(&endpoint, &key, "", "1000", "").await?;
        let want =
            ["K Shared with me/Plan/notes.txt", "K Shared with me/Plan/sub/deep.txt", "K Zeta/z.txt", "K mine.txt"];
        ensure!(flat == want, "{flat:?}");
        ensure!(s3_list(&endpoint, &key, "", "1", "").await? == want, "paged one by one");
        ensure!(s3_list(&endpoint, &key, "", "1", "/").await? == top, "paged one by one");
        let index = s3_list(&endpoint, &key, "Shared with me/", "1000", "/").await?;
        ensure!(index == ["P Shared with me/Plan/"], "{index:?}");
        let inside = s3_list(&endpoint, &key, "Shared with me/Plan/", "1000", "/").await?;
        ensure!(inside == ["K Shared with me/Plan/notes.txt", "P Shared with me/Plan/sub/"], "{inside:?}");
        ensure!(s3_list(&endpoint, &key, "Shared with me/Projects/", "1000", "").await?.is_empty());
        ensure!(io(vec!["read", "bob", "Shared with me/Plan/notes.txt"]).await? == "the plan");

        // Read-only: writes and deletes are AccessDenied; nothing outside the share is reachable.
        for (op, k) in [
            ("code", "Shared with me/Plan/new.txt"),
            ("marker", "Shared with me/Plan/dir/"),
            ("delete", "Shared with me/Plan/notes.txt"),
            ("code", "Shared with me/New.txt"),
        ] {
            let out = io(vec![op, "bob", k]).await?;
            ensure!(out == "AccessDenied 403", "{op} {k}: {out}");
        }
        for k in
            ["Shared with me/Projects/secret.txt", "Shared with me/Plan/secret.txt", "Shared with me/alice/secret.txt"]
        {
            let out = io(vec!["read", "bob", k]).await?;
            ensure!(out == "NoSuchKey 404", "{k}: {out}");
        }
        let out = io(vec!["read", "bob", "Shared with me/Plan/../secret.txt"]).await?;
        ensure!(!out.contains("not shared"), "{out}");

        // Write: bob adds, copies inside the share and deletes, all in alice's space; a copy
        // out of the share, deleting the share itself and multipart into it are refused.
        alice.patch_json(&format!("/api/v1/shares/{}", s.id), &json!({"permission": "write"})).await?.check(200)?;
        ensure!(io(vec!["code", "bob", "Shared with me/Plan/new.txt"]).await? == "OK");
        ensure!(alice.get_file("/Projects/Plan/new.txt").await?.body.as_ref() == b"probe");
        let out = io(vec!["copy", "bob", "Shared with me/Plan/copy.txt", "Shared with me/Plan/notes.txt"]).await?;
        ensure!(out == "OK", "{out}");
        ensure!(alice.get_file("/Projects/Plan/copy.txt").await?.body.as_ref() == b"the plan");
        // Across the share's edge a copy copies the content into the other space, charged to
        // its owner, as over REST and WebDAV: out to bob's own files, and in from them.
        let out = io(vec!["copy", "bob", "taken.txt", "Shared with me/Plan/notes.txt"]).await?;
        ensure!(out == "OK", "{out}");
        ensure!(io(vec!["read", "bob", "taken.txt"]).await? == "the plan");
        let out = io(vec!["copy", "bob", "Shared with me/Plan/mine.txt", "mine.txt"]).await?;
        ensure!(out == "OK", "{out}");
        ensure!(alice.get_file("/Projects/Plan/mine.txt").await?.body.as_ref() == b"bob's");
        // The same path in two spaces is a copy, not a metadata-only copy onto itself.
        bob.put_file("/Projects/Plan/notes.txt", "bob's notes").await?.check(201)?;
        let out = io(vec!["copy", "bob", "Projects/Plan/notes.txt", "Shared with me/Plan/notes.txt"]).await?;
        ensure!(out == "OK", "{out}");
        ensure!(bob.get_file("/Projects/Plan/notes.txt").await?.body.as_ref() == b"the plan");
        ensure!(alice.get_file("/Projects/Plan/notes.txt").await?.body.as_ref() == b"the plan");
        // Never from another user's bucket, whatever the key says.
        let out = io(vec!["copy", "bob", "stolen.txt", "../alice/Projects/secret.txt"]).await?;
        ensure!(out != "OK", "{out}");
        ensure!(io(vec!["read", "bob", "stolen.txt"]).await? == "NoSuchKey 404");
        ensure!(io(vec!["delete", "bob", "Shared with me/Plan/new.txt"]).await? == "OK");
        alice.stat("/Projects/Plan/new.txt").await?.check_error(404, "not_found")?;
        let trash: serde_json::Value = alice.get("/api/v1/trash").await?.ok(200)?;
        ensure!(trash.to_string().contains("new.txt"), "the deleted file is in alice's trash: {trash}");
        ensure!(io(vec!["delete", "bob", "Shared with me/Plan/"]).await? == "AccessDenied 403");
        let big = tempfile::NamedTempFile::new()?;
        std::fs::write(big.path(), vec![1u8; 64 * 1024])?;
        let path = big.path().to_str().unwrap_or_default().to_string();
        let out = io(vec!["mpu", "bob", "Shared with me/Plan/big.bin", &path, "32768"]).await?;
        ensure!(out == "NotImplemented 501", "{out}");
        ensure!(alice.list_all("/Projects/Plan", None).await?.len() == 4, "notes, copy, mine, sub");

        let admin = gw.admin().await?;
        let log: AuditList = admin.get("/api/v1/admin/audit?action=share_access").await?.ok(200)?;
        let details: Vec<String> = log.entries.iter().filter_map(|e| e.detail.clone()).collect();
        for want in [
            "read /Shared with me/Plan/notes.txt (shared by alice)",
            "write /Shared with me/Plan/new.txt (shared by alice)",
            "copy /Shared with me/Plan/notes.txt to /Shared with me/Plan/copy.txt (shared by alice)",
            "copy /Shared with me/Plan/notes.txt to /taken.txt (shared by alice)",
            "copy /mine.txt to /Shared with me/Plan/mine.txt (shared by alice)",
            "delete /Shared with me/Plan/new.txt (shared by alice)",
        ] {
            ensure!(details.iter().any(|d| d == want), "{want} missing in {details:?}");
        }

        // Revoked: gone from bob's bucket at once.
        alice.delete(&format!("/api/v1/shares/{}", s.id)).await?.check(204)?;
        ensure!(io(vec!["read", "bob", "Shared with me/Plan/notes.txt"]).await? == "NoSuchKey 404");
        let left = s3_list(&endpoint, &key, "", "1000", "/").await?;
        ensure!(left == ["P Projects/", "P Zeta/", "K mine.txt", "K taken.txt"], "{left:?}");
        Ok(())
    }
);

/// `/api/v1/blocks/{hash}` scoped to the file `path` (as the caller sees it).
fn block_url(hash: &str, path: Option<&str>) -> String {
    match path {
        Some(p) => format!("/api/v1/blocks/{hash}{}", nimbus_e2e::http::query_string(&[("path", p)])),
        None => format!("/api/v1/blocks/{hash}"),
    }
}

backend_test!(blocks_through_a_share_stay_inside_it, |gw| async move {
    use nimbus_proto::wire::{BlockRef, Manifest};
    use reqwest::Method;
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    alice.put_file("/Plan/notes.txt", "the plan").await?.check(201)?;
    alice.put_file("/Work/todo.txt", "to do").await?.check(201)?;
    alice.put_file("/private.txt", "alice's secret").await?.check(201)?;
    share(&alice, "/Plan", "bob", "read").await?;
    share(&alice, "/Work", "bob", "write").await?;
    let notes = "/Shared with me/Plan/notes.txt";

    // The manifest through the share names the file as bob sees it; its blocks are read with
    // the file's path, and only so.
    let m: Manifest = bob.get(&format!("/api/v1/manifests/{}", nimbus_e2e::http::encode_path(notes))).await?.ok(200)?;
    ensure!(m.path == notes && m.blocks.len() == 1, "{m:?}");
    let h = &m.blocks[0].hash;
    let r = bob.get(&block_url(h, Some(notes))).await?;
    r.check(200)?;
    ensure!(r.body.as_ref() == b"the plan", "{r}");
    bob.get(&block_url(h, None)).await?.check_error(404, "not_found")?;

    // An owner's block outside the share: unknown, whatever the path given.
    let secret: Manifest = alice.get("/api/v1/manifests/private.txt").await?.ok(200)?;
    let sh = &secret.blocks[0].hash;
    for p in [Some(notes), Some("/Shared with me/Plan"), Some("/Shared with me/Work/todo.txt"), None] {
        bob.get(&block_url(sh, p)).await?.check_error(404, "not_found")?;
    }
    bob.get(&block_url(sh, Some("/private.txt"))).await?.check_error(404, "not_found")?;
    let r = bob.get(&block_url(sh, Some("/Shared with me/Plan/../private.txt"))).await?;
    ensure!(matches!(r.status, 400 | 404), "{r}");

    // Nor can a write share be made to hold it: committing its hash is refused (the bytes
    // were never sent through the share), so it cannot be read back from there.
    let todo = "/Shared with me/Work/stolen.txt";
    let stolen = [BlockRef { hash: sh.clone(), size: secret.size }];
    bob.commit(todo, None, &stolen).await?.check_error(400, "missing_blocks")?;
    let missing: serde_json::Value = bob
        .post_json(
            &format!("/api/v1/blocks/missing{}", nimbus_e2e::http::query_string(&[("path", todo)])),
            &json!({"hashes": [sh]}),
        )
        .await?
        .ok(200)?;
    ensure!(missing["missing"] == json!([sh]), "the owner's holdings leak through `missing`: {missing}");

    // Uploading the bytes proves them: the block goes to alice's space, the commit is hers.
    let data = b"bob's addition".to_vec();
    let hash = blake3::hash(&data).to_hex().to_string();
    let put = |path: &str| bob.req(Method::PUT, &block_url(&hash, Some(path))).body(data.clone()).send();
    put("/Shared with me/Plan/new.txt").await?.check_error(403, "forbidden")?;
    put("/Shared with me/Work/new.txt").await?.check(201)?;
    let r = bob
        .commit("/Shared with me/Work/new.txt", None, &[BlockRef { hash: hash.clone(), size: data.len() as u64 }])
        .await?;
    ensure!(r.ok::<Entry>(201)?.path == "/Shared with me/Work/new.txt", "{r}");
    let r = alice.get_file("/Work/new.txt").await?;
    ensure!(r.body.as_ref() == data.as_slice(), "{r}");
    let me: serde_json::Value = bob.get("/api/v1/me").await?.ok(200)?;
    ensure!(me["used_bytes"] == 0, "bob was charged for a block of alice's space: {me}");
    let me: serde_json::Value = alice.get("/api/v1/me").await?.ok(200)?;
    ensure!(me["used_bytes"].as_u64().unwrap_or(0) >= data.len() as u64, "{me}");
    // Commits through a read share are refused; after revocation the blocks are gone for bob.
    bob.commit("/Shared with me/Plan/x.txt", None, &[BlockRef { hash: h.clone(), size: m.size }])
        .await?
        .check_error(403, "forbidden")?;
    let list: ShareList = alice.get("/api/v1/shares").await?.ok(200)?;
    for s in &list.shares {
        alice.delete(&format!("/api/v1/shares/{}", s.id)).await?.check(204)?;
    }
    bob.get(&block_url(h, Some(notes))).await?.check_error(404, "not_found")?;
    Ok(())
});

/// Bob's feed from `cursor` on: (op, path, from) of each change, and the next cursor.
async fn feed(api: &Api, cursor: &str) -> anyhow::Result<(Vec<(String, String, Option<String>)>, String)> {
    let list: nimbus_proto::wire::ChangeList = api
        .get(&format!("/api/v1/changes{}", nimbus_e2e::http::query_string(&[("cursor", cursor), ("wait", "0")])))
        .await?
        .ok(200)?;
    ensure!(!list.reset, "{list:?}");
    let seen = list.changes.iter().map(|c| (c.op.as_str().to_string(), c.path.clone(), c.from.clone())).collect();
    Ok((seen, list.cursor))
}

fn ch(op: &str, path: &str, from: Option<&str>) -> (String, String, Option<String>) {
    (op.to_string(), path.to_string(), from.map(String::from))
}

backend_test!(the_feed_follows_shares_in_the_recipients_paths, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    alice.put_file("/Projects/Plan/notes.txt", "v1").await?.check(201)?;
    let start: nimbus_proto::wire::ChangeList = bob.get("/api/v1/changes").await?.ok(200)?;
    let mut cursor = start.cursor;

    // Granted: the folder appears, with `Shared with me` around it.
    let s = share(&alice, "/Projects/Plan", "bob", "read").await?;
    let (seen, c) = feed(&bob, &cursor).await?;
    ensure!(seen == [ch("mkdir", SHARED, None), ch("mkdir", "/Shared with me/Plan", None)], "{seen:?}");
    cursor = c;

    // Alice's changes inside, as bob sees them; hers outside are not reported.
    alice.put_file("/Projects/Plan/notes.txt", "v2").await?.check(200)?;
    alice.put_file("/Projects/secret.txt", "no").await?.check(201)?;
    alice.put_file("/Projects/Plan/Sub/new.txt", "new").await?.check(201)?;
    alice
        .post_json("/api/v1/move", &json!({"from": "/Projects/Plan/notes.txt", "to": "/Projects/Plan/renamed.txt"}))
        .await?
        .check(200)?;
    alice
        .post_json("/api/v1/move", &json!({"from": "/Projects/Plan/Sub/new.txt", "to": "/out.txt"}))
        .await?
        .check(200)?;
    alice
        .post_json("/api/v1/move", &json!({"from": "/Projects/secret.txt", "to": "/Projects/Plan/in.txt"}))
        .await?
        .check(200)?;
    alice.delete("/api/v1/files/Projects/Plan/in.txt").await?.check(204)?;
    let (seen, c) = feed(&bob, &cursor).await?;
    ensure!(
        seen == [
            ch("update", "/Shared with me/Plan/notes.txt", None),
            ch("mkdir", "/Shared with me/Plan/Sub", None),
            ch("create", "/Shared with me/Plan/Sub/new.txt", None),
            ch("move", "/Shared with me/Plan/renamed.txt", Some("/Shared with me/Plan/notes.txt")),
            ch("delete", "/Shared with me/Plan/Sub/new.txt", None),
            ch("create", "/Shared with me/Plan/in.txt", None),
            ch("delete", "/Shared with me/Plan/in.txt", None),
        ],
        "{seen:?}"
    );
    ensure!(
        seen.iter().all(|(_, p, f)| !p.contains("Projects") && f.as_deref().is_none_or(|f| !f.contains("Projects")))
    );
    cursor = c;
    // Nothing new: the same cursor back, and a busy owner outside the share adds nothing.
    for i in 0..5 {
        alice.put_file(&format!("/busy/{i}.txt"), "x").await?.check(201)?;
    }
    let (seen, c) = feed(&bob, &cursor).await?;
    ensure!(seen.is_empty(), "{seen:?}");
    cursor = c;

    // A long poll wakes for a change inside the share.
    let waiter = {
        let (bob, cursor) = (bob.clone(), cursor.clone());
        tokio::spawn(async move {
            bob.get(&format!(
                "/api/v1/changes{}",
                nimbus_e2e::http::query_string(&[("cursor", &cursor), ("wait", "30")])
            ))
            .await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    alice.put_file("/Projects/Plan/late.txt", "late").await?.check(201)?;
    let list: nimbus_proto::wire::ChangeList = waiter.await??.ok(200)?;
    ensure!(list.changes.iter().any(|c| c.path == "/Shared with me/Plan/late.txt"), "{list:?}");
    cursor = list.cursor;

    // Permission changed, then revoked: the entry changes, then goes, and `Shared with me` too.
    alice.patch_json(&format!("/api/v1/shares/{}", s.id), &json!({"permission": "write"})).await?.check(200)?;
    let (seen, c) = feed(&bob, &cursor).await?;
    ensure!(seen == [ch("update", "/Shared with me/Plan", None)], "{seen:?}");
    cursor = c;
    alice.delete(&format!("/api/v1/shares/{}", s.id)).await?.check(204)?;
    alice.put_file("/Projects/Plan/after.txt", "gone for bob").await?.check(201)?;
    let (seen, c) = feed(&bob, &cursor).await?;
    ensure!(seen == [ch("delete", "/Shared with me/Plan", None), ch("delete", SHARED, None)], "{seen:?}");
    cursor = c;

    // Shared again, then the owner trashes a folder above it and restores it.
    share(&alice, "/Projects/Plan", "bob", "read").await?;
    let (seen, c) = feed(&bob, &cursor).await?;
    ensure!(seen == [ch("mkdir", SHARED, None), ch("mkdir", "/Shared with me/Plan", None)], "{seen:?}");
    cursor = c;
    alice.delete("/api/v1/files/Projects").await?.check(204)?;
    let (seen, c) = feed(&bob, &cursor).await?;
    ensure!(seen == [ch("delete", "/Shared with me/Plan", None)], "{seen:?}");
    let _ = c;
    Ok(())
});

// What a `write` share does not give: erasing the owner's history (deleting older versions
// cannot be undone, so it is the owner's alone), and a full space of the recipient's own is
// never blamed on the owner the content came from. Restoring a version through a share is
// audited like the recipient's other changes.
backend_test!(a_recipient_cannot_erase_history, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", Some(1024)).await?;
    alice.put_file("/AF/v.txt", "v1").await?.check(201)?;
    alice.put_file("/AF/v.txt", "v2-longer").await?.check(200)?;
    share(&alice, "/AF", "bob", "write").await?;
    let at = format!("/api/v1/versions/{}", encode_path(&format!("{SHARED}/AF/v.txt")));
    let vl: VersionList = bob.get(&at).await?.ok(200)?;
    let old = vl.versions.iter().find(|v| !v.current).context("an older version")?.version;
    bob.delete(&format!("{at}?version={old}")).await?.check_error(403, "forbidden")?;
    let r = alice.get(&format!("/api/v1/files/AF/v.txt?version={old}")).await?;
    ensure!(r.status == 200 && r.body.as_ref() == b"v1", "the owner's older version: {r}");
    // Restoring is a change like an upload: allowed, and in the audit log as the share's.
    bob.post_json(&at, &json!({"version": old})).await?.check(200)?;
    ensure!(alice.get_file("/AF/v.txt").await?.body.as_ref() == b"v1");
    let admin = gw.admin().await?;
    let a: AuditList = admin.get("/api/v1/admin/audit?action=share_access&limit=100").await?.ok(200)?;
    let restore = a
        .entries
        .iter()
        .find(|e| e.detail.as_deref().is_some_and(|d| d.contains(&format!("restore version {old} of"))));
    let restore = restore.with_context(|| format!("no share_access entry for the restore: {:?}", a.entries))?;
    // Signed-in callers' entries carry their address like sign-ins do.
    ensure!(restore.ip.as_deref() == Some("127.0.0.1"), "{restore:?}");
    let a: AuditList = admin.get("/api/v1/admin/audit?action=share_created&limit=10").await?.ok(200)?;
    ensure!(a.entries.first().is_some_and(|e| e.ip.as_deref() == Some("127.0.0.1")), "{:?}", a.entries);
    // Bob's own space is full: the refusal of a copy out of the share is about his space.
    alice.put_file("/AF/big.bin", vec![7u8; 4096]).await?.check(201)?;
    for op in ["copy", "move"] {
        let body = json!({"from": format!("{SHARED}/AF/big.bin"), "to": "/big.bin"});
        let r = bob.post_json(&format!("/api/v1/{op}"), &body).await?;
        r.check_error(413, "quota_exceeded")?;
        ensure!(!r.text().contains("alice"), "{op}: the refusal blames the share's owner: {r}");
    }
    alice.stat("/AF/big.bin").await?.check(200)?;
    // Bob's trash restores into his own space only: never into a share, nor next to them.
    bob.put_file("/mine.txt", "m").await?.check(201)?;
    bob.delete(&nimbus_e2e::http::files_url("/mine.txt")).await?.check(204)?;
    let t: TrashList = bob.get("/api/v1/trash").await?.ok(200)?;
    let id = t.entries.iter().find(|e| e.name == "mine.txt").context("bob's trash entry")?.id;
    for to in [format!("{SHARED}/mine.txt"), format!("{SHARED}/AF/mine.txt"), "/shared WITH me/x.txt".into()] {
        let r = bob.post_json(&format!("/api/v1/trash/{id}/restore"), &json!({"to": to})).await?;
        r.check_error(403, "forbidden").with_context(|| to.clone())?;
    }
    alice.stat("/AF/mine.txt").await?.check_error(404, "not_found")?;
    bob.post_json(&format!("/api/v1/trash/{id}/restore"), &json!({})).await?.check(200)?;
    Ok(())
});
