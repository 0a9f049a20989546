//! Groups and shares with a group, against every backend: administrators make, rename and
//! delete groups and add or take out members by username; a file or folder shared with a
//! group reaches every member (but its owner) under `/Shared with me` through REST and
//! WebDAV, as a user share would, and nobody else by any path or id; membership changes,
//! leaving, revoking and deleting the group hold on the next request (also from a second
//! gateway on PostgreSQL).

use anyhow::ensure;
use nimbus_e2e::s3::{new_key, s3_io};
use nimbus_e2e::{Api, backend_test};
use nimbus_proto::wire::{
    AdminShareList, AuditList, DirListing, GroupInfo, GroupList, IncomingShareList, ShareInfo, ShareList,
    SharePermission,
};
use serde_json::json;

const SHARED: &str = "/Shared with me";

async fn group(admin: &Api, name: &str, members: &[&str]) -> anyhow::Result<GroupInfo> {
    let mut g: GroupInfo = admin.post_json("/api/v1/admin/groups", &json!({"name": name})).await?.ok(201)?;
    for m in members {
        g = admin
            .post_json(&format!("/api/v1/admin/groups/{}/members", g.id), &json!({"username": m}))
            .await?
            .ok(201)?;
    }
    Ok(g)
}

async fn share_group(owner: &Api, path: &str, group: &str, permission: &str) -> anyhow::Result<ShareInfo> {
    owner.post_json("/api/v1/shares", &json!({"path": path, "group": group, "permission": permission})).await?.ok(201)
}

async fn incoming(api: &Api) -> anyhow::Result<IncomingShareList> {
    api.get("/api/v1/shares/incoming").await?.ok(200)
}

async fn used(api: &Api) -> anyhow::Result<u64> {
    let me: serde_json::Value = api.get("/api/v1/me").await?.ok(200)?;
    Ok(me["used_bytes"].as_u64().unwrap_or(0))
}

/// `method path` on the WebDAV door with the caller's token.
async fn dav(api: &Api, method: &str, path: &str, depth: Option<&str>, body: &str) -> anyhow::Result<nimbus_e2e::Resp> {
    let mut r = api.req(reqwest::Method::from_bytes(method.as_bytes())?, path);
    if let Some(d) = depth {
        r = r.header("depth", d);
    }
    r.body(body.to_string()).send().await
}

backend_test!(admins_manage_groups, |gw| async move {
    let admin = gw.admin().await?;
    let (_, alice) = gw.user("alice", None).await?;
    gw.user("bob", None).await?;

    let g: GroupInfo = admin.post_json("/api/v1/admin/groups", &json!({"name": "Team-A"})).await?.ok(201)?;
    ensure!(g.name == "Team-A" && g.members.is_empty() && g.created.ends_with('Z'), "{g:?}");
    // Names follow the rules of usernames, unique case-insensitively.
    admin.post_json("/api/v1/admin/groups", &json!({"name": "team-a"})).await?.check_error(409, "already_exists")?;
    let long = "g".repeat(65);
    for bad in ["", " ", "-x", "a b", "a/b", "ü", long.as_str()] {
        admin.post_json("/api/v1/admin/groups", &json!({"name": bad})).await?.check_error(400, "bad_request")?;
    }
    admin.post_json("/api/v1/admin/groups", &json!({})).await?.check_error(400, "bad_request")?;
    admin
        .post_json("/api/v1/admin/groups", &json!({"name": "x", "extra": 1}))
        .await?
        .check_error(400, "bad_request")?;

    // Members by username; an unknown user is a bad request, a second add a conflict.
    let url = format!("/api/v1/admin/groups/{}", g.id);
    let g2: GroupInfo = admin.post_json(&format!("{url}/members"), &json!({"username": "BOB"})).await?.ok(201)?;
    ensure!(g2.members == ["bob"], "{g2:?}");
    let g2: GroupInfo = admin.post_json(&format!("{url}/members"), &json!({"username": "alice"})).await?.ok(201)?;
    ensure!(g2.members == ["alice", "bob"], "{g2:?}");
    admin
        .post_json(&format!("{url}/members"), &json!({"username": "bob"}))
        .await?
        .check_error(409, "already_exists")?;
    admin
        .post_json(&format!("{url}/members"), &json!({"username": "nobody"}))
        .await?
        .check_error(400, "bad_request")?;
    let list: GroupList = admin.get("/api/v1/admin/groups").await?.ok(200)?;
    ensure!(list.groups.len() == 1 && list.groups[0].members == ["alice", "bob"], "{list:?}");

    // Rename keeps the members; to a taken name is a conflict.
    admin.post_json("/api/v1/admin/groups", &json!({"name": "other"})).await?.check(201)?;
    let r: GroupInfo = admin.patch_json(&url, &json!({"name": "Team-B"})).await?.ok(200)?;
    ensure!(r.name == "Team-B" && r.members == ["alice", "bob"], "{r:?}");
    admin.patch_json(&url, &json!({"name": "OTHER"})).await?.check_error(409, "already_exists")?;
    admin.patch_json(&url, &json!({"name": "a b"})).await?.check_error(400, "bad_request")?;
    let got: GroupInfo = admin.get(&url).await?.ok(200)?;
    ensure!(got == r, "{got:?}");

    // Not for users, whatever the route.
    alice.get("/api/v1/admin/groups").await?.check_error(403, "forbidden")?;
    alice.post_json("/api/v1/admin/groups", &json!({"name": "mine"})).await?.check_error(403, "forbidden")?;
    alice.get(&url).await?.check_error(403, "forbidden")?;
    alice.patch_json(&url, &json!({"name": "mine"})).await?.check_error(403, "forbidden")?;
    alice.delete(&url).await?.check_error(403, "forbidden")?;
    alice.post_json(&format!("{url}/members"), &json!({"username": "alice"})).await?.check_error(403, "forbidden")?;
    alice.delete(&format!("{url}/members/bob")).await?.check_error(403, "forbidden")?;

    // Taking out: 204, then 404 (not a member, or no such user).
    admin.delete(&format!("{url}/members/Bob")).await?.check(204)?;
    admin.delete(&format!("{url}/members/bob")).await?.check_error(404, "not_found")?;
    admin.delete(&format!("{url}/members/nobody")).await?.check_error(404, "not_found")?;
    ensure!(admin.get(&url).await?.ok::<GroupInfo>(200)?.members == ["alice"]);

    // Deleted: gone; unknown and malformed ids are 404.
    admin.delete(&url).await?.check(204)?;
    admin.get(&url).await?.check_error(404, "not_found")?;
    admin.delete(&url).await?.check_error(404, "not_found")?;
    admin.get("/api/v1/admin/groups/x").await?.check_error(404, "not_found")?;
    admin.patch_json("/api/v1/admin/groups/0", &json!({"name": "z"})).await?.check_error(404, "not_found")?;
    admin
        .post_json("/api/v1/admin/groups/999999/members", &json!({"username": "bob"}))
        .await?
        .check_error(404, "not_found")?;

    // Audited.
    let log: AuditList = admin.get("/api/v1/admin/audit?limit=100").await?.ok(200)?;
    for (action, target) in [
        ("group_create", "Team-A"),
        ("group_member_add", "Team-A"),
        ("group_rename", "Team-B"),
        ("group_member_remove", "Team-B"),
        ("group_delete", "Team-B"),
    ] {
        ensure!(
            log.entries.iter().any(|e| e.action == action && e.target.as_deref() == Some(target)),
            "{action} {target} not audited: {log:?}"
        );
    }
    Ok(())
});

backend_test!(share_with_a_group, |gw| async move {
    let admin = gw.admin().await?;
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    let (_, carol) = gw.user("carol", None).await?;
    let (_, dave) = gw.user("dave", None).await?;
    alice.put_file("/Team/plan.txt", "the plan").await?.check(201)?;
    alice.put_file("/secret.txt", "not shared").await?.check(201)?;
    // The owner is in the group too: she gets no entry of her own.
    let team = group(&admin, "team", &["alice", "bob", "carol"]).await?;

    // Exactly one of `username` and `group`.
    for body in [
        json!({"path": "/Team", "permission": "read"}),
        json!({"path": "/Team", "username": "bob", "group": "team", "permission": "read"}),
    ] {
        alice.post_json("/api/v1/shares", &body).await?.check_error(400, "bad_request")?;
    }
    alice
        .post_json("/api/v1/shares", &json!({"path": "/Team", "group": "nope", "permission": "read"}))
        .await?
        .check_error(400, "bad_request")?;

    let r = alice.post_json("/api/v1/shares", &json!({"path": "/Team", "group": "TEAM", "permission": "read"})).await?;
    let raw: serde_json::Value = r.json()?;
    ensure!(r.status == 201 && raw["group"] == "team" && raw["username"].is_null(), "{r}");
    let s: ShareInfo = r.ok(201)?;
    ensure!(s.path.as_deref() == Some("/Team") && s.permission == SharePermission::Read, "{s:?}");
    alice
        .post_json("/api/v1/shares", &json!({"path": "/Team", "group": "team", "permission": "read"}))
        .await?
        .check_error(409, "already_exists")?;
    let list: ShareList = alice.get("/api/v1/shares").await?.ok(200)?;
    ensure!(list.shares.len() == 1 && list.shares[0].group.as_deref() == Some("team"), "{list:?}");
    ensure!(list.shares[0].username.is_none() && list.shares[0].id == s.id, "{list:?}");
    ensure!(incoming(&alice).await?.shares.is_empty(), "the owner got her own share");

    // Each member sees it and reads it, through REST and WebDAV.
    let mut entry_ids = Vec::new();
    for member in [&bob, &carol] {
        let inc = incoming(member).await?;
        ensure!(inc.shares.len() == 1, "{inc:?}");
        let e = &inc.shares[0];
        ensure!(e.owner == "alice" && e.name == "Team" && e.group.as_deref() == Some("team"), "{inc:?}");
        ensure!(e.permission == SharePermission::Read, "{inc:?}");
        entry_ids.push(e.id);
        let r = member.get_file(&format!("{SHARED}/Team/plan.txt")).await?;
        ensure!(r.status == 200 && r.body.as_ref() == b"the plan", "{r}");
        let l: DirListing = member.list_dir(&format!("{SHARED}/Team"), None, None).await?.ok(200)?;
        ensure!(l.entries.len() == 1 && l.entries[0].path == "/Shared with me/Team/plan.txt", "{l:?}");
        let r = dav(member, "GET", "/dav/Shared%20with%20me/Team/plan.txt", None, "").await?;
        ensure!(r.status == 200 && r.body.as_ref() == b"the plan", "{r}");
        let r = dav(member, "PROPFIND", "/dav/Shared%20with%20me/", Some("1"), "").await?;
        ensure!(r.status == 207 && r.text().contains("/dav/Shared%20with%20me/Team"), "{r}");
        // Read-only: every write is 403 forbidden.
        member.put_file(&format!("{SHARED}/Team/new.txt"), "x").await?.check_error(403, "forbidden")?;
        member.put_file(&format!("{SHARED}/Team/plan.txt"), "x").await?.check_error(403, "forbidden")?;
        ensure!(dav(member, "PUT", "/dav/Shared%20with%20me/Team/new.txt", None, "x").await?.status == 403);
    }
    ensure!(alice.get_file("/Team/plan.txt").await?.body.as_ref() == b"the plan");

    // A non-member reaches nothing, by any path or id.
    dave.stat(&format!("{SHARED}/Team")).await?.check_error(404, "not_found")?;
    dave.get_file(&format!("{SHARED}/Team/plan.txt")).await?.check_error(404, "not_found")?;
    dave.list_dir(&format!("{SHARED}/Team"), None, None).await?.check_error(404, "not_found")?;
    ensure!(dav(&dave, "GET", "/dav/Shared%20with%20me/Team/plan.txt", None, "").await?.status == 404);
    ensure!(incoming(&dave).await?.shares.is_empty());
    for id in [s.id, entry_ids[0], entry_ids[1]] {
        let url = format!("/api/v1/shares/{id}");
        dave.patch_json(&url, &json!({"permission": "write"})).await?.check_error(404, "not_found")?;
        dave.delete(&url).await?.check_error(404, "not_found")?;
    }
    // A member cannot change the group share, nor reach it by its id.
    bob.patch_json(&format!("/api/v1/shares/{}", entry_ids[0]), &json!({"permission": "write"}))
        .await?
        .check_error(403, "forbidden")?;
    bob.patch_json(&format!("/api/v1/shares/{}", s.id), &json!({"permission": "write"}))
        .await?
        .check_error(404, "not_found")?;
    bob.delete(&format!("/api/v1/shares/{}", s.id)).await?.check_error(404, "not_found")?;
    // The owner's members' entries are not hers to change one by one.
    alice
        .patch_json(&format!("/api/v1/shares/{}", entry_ids[0]), &json!({"permission": "write"}))
        .await?
        .check_error(404, "not_found")?;

    // Write: members change the owner's files, on the owner's quota.
    let r: ShareInfo =
        alice.patch_json(&format!("/api/v1/shares/{}", s.id), &json!({"permission": "write"})).await?.ok(200)?;
    ensure!(r.permission == SharePermission::Write && r.group.as_deref() == Some("team"), "{r:?}");
    ensure!(incoming(&carol).await?.shares[0].permission == SharePermission::Write);
    let before = used(&alice).await?;
    bob.put_file(&format!("{SHARED}/Team/bob.bin"), vec![1u8; 100_000]).await?.check(201)?;
    ensure!(used(&alice).await? >= before + 100_000, "the owner was not charged");
    ensure!(used(&bob).await? == 0, "the member was charged");
    ensure!(dav(&carol, "PUT", "/dav/Shared%20with%20me/Team/carol.txt", None, "c").await?.status == 201);
    alice.get_file("/Team/bob.bin").await?.check(200)?;
    ensure!(alice.get_file("/Team/carol.txt").await?.body.as_ref() == b"c");

    // A member renames their own entry; the other members' names and the owner's stay.
    let rename = json!({"from": format!("{SHARED}/Team"), "to": format!("{SHARED}/Alice team")});
    carol.post_json("/api/v1/move", &rename).await?.check(200)?;
    ensure!(incoming(&carol).await?.shares[0].name == "Alice team");
    ensure!(incoming(&bob).await?.shares[0].name == "Team");
    let r = carol.get_file(&format!("{SHARED}/Alice team/plan.txt")).await?;
    ensure!(r.body.as_ref() == b"the plan", "{r}");
    alice.stat("/Team").await?.check(200)?;

    // Bob leaves: gone for him only.
    bob.delete(&format!("/api/v1/shares/{}", entry_ids[0])).await?.check(204)?;
    ensure!(incoming(&bob).await?.shares.is_empty());
    bob.stat(&format!("{SHARED}/Team")).await?.check_error(404, "not_found")?;
    carol.get_file(&format!("{SHARED}/Alice team/plan.txt")).await?.check(200)?;
    ensure!(alice.get("/api/v1/shares").await?.ok::<ShareList>(200)?.shares.len() == 1);

    // Membership changes hold on the next request: carol out, dave in.
    let url = format!("/api/v1/admin/groups/{}", team.id);
    admin.delete(&format!("{url}/members/carol")).await?.check(204)?;
    carol.get_file(&format!("{SHARED}/Team/plan.txt")).await?.check_error(404, "not_found")?;
    ensure!(incoming(&carol).await?.shares.is_empty());
    admin.post_json(&format!("{url}/members"), &json!({"username": "dave"})).await?.check(201)?;
    ensure!(dave.get_file(&format!("{SHARED}/Team/plan.txt")).await?.body.as_ref() == b"the plan");

    // Administrators see the group share and the audit says who got it.
    let all: AdminShareList = admin.get("/api/v1/admin/shares").await?.ok(200)?;
    ensure!(all.shares.len() == 1 && all.shares[0].group.as_deref() == Some("team"), "{all:?}");
    ensure!(all.shares[0].username.is_none() && all.shares[0].owner == "alice", "{all:?}");
    let daves: AdminShareList = admin.get("/api/v1/admin/shares?user=dave").await?.ok(200)?;
    ensure!(daves.shares.len() == 1, "a member's view misses the group share: {daves:?}");
    let log: AuditList = admin.get("/api/v1/admin/audit?action=share_created").await?.ok(200)?;
    ensure!(log.entries.iter().any(|e| e.detail.as_deref() == Some("/Team with group team (read)")), "{log:?}");

    // An administrator revokes the group share: gone for every member at once, audited.
    alice.put_file("/Other/o.txt", "other").await?.check(201)?;
    share_group(&alice, "/Other", "team", "read").await?;
    admin.delete(&format!("/api/v1/admin/shares/{}", s.id)).await?.check(204)?;
    dave.get_file(&format!("{SHARED}/Team/plan.txt")).await?.check_error(404, "not_found")?;
    ensure!(dave.get_file(&format!("{SHARED}/Other/o.txt")).await?.body.as_ref() == b"other");
    let log: AuditList = admin.get("/api/v1/admin/audit?action=share_revoked").await?.ok(200)?;
    ensure!(log.entries.iter().any(|e| e.target.as_deref() == Some(&format!("share {}", s.id))), "{log:?}");

    // Deleting the group ends its shares for every member.
    admin.delete(&url).await?.check(204)?;
    dave.get_file(&format!("{SHARED}/Other/o.txt")).await?.check_error(404, "not_found")?;
    ensure!(incoming(&dave).await?.shares.is_empty());
    ensure!(alice.get("/api/v1/shares").await?.ok::<ShareList>(200)?.shares.is_empty());
    alice.get_file("/Team/carol.txt").await?.check(200)?;
    Ok(())
});

backend_test!(a_user_share_and_a_group_share_of_one_folder, |gw| async move {
    let admin = gw.admin().await?;
    let (alice_id, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    alice.put_file("/Docs/a.txt", "a").await?.check(201)?;
    group(&admin, "readers", &["bob"]).await?;
    group(&admin, "writers", &[]).await?;

    // A user share and a group share of the same folder: one entry, the higher permission.
    let user_share: ShareInfo = alice
        .post_json("/api/v1/shares", &json!({"path": "/Docs", "username": "bob", "permission": "read"}))
        .await?
        .ok(201)?;
    let g = share_group(&alice, "/Docs", "readers", "write").await?;
    let inc = incoming(&bob).await?;
    ensure!(inc.shares.len() == 1 && inc.shares[0].permission == SharePermission::Write, "{inc:?}");
    ensure!(inc.shares[0].id == user_share.id && inc.shares[0].group.is_none(), "{inc:?}");
    bob.put_file(&format!("{SHARED}/Docs/b.txt"), "b").await?.check(201)?;
    // The group share revoked: the user share stays, read-only again.
    alice.delete(&format!("/api/v1/shares/{}", g.id)).await?.check(204)?;
    bob.put_file(&format!("{SHARED}/Docs/c.txt"), "c").await?.check_error(403, "forbidden")?;
    bob.get_file(&format!("{SHARED}/Docs/b.txt")).await?.check(200)?;
    // Group share again, then the user share revoked: bob keeps the node through the group.
    share_group(&alice, "/Docs", "readers", "read").await?;
    alice.delete(&format!("/api/v1/shares/{}", user_share.id)).await?.check(204)?;
    let inc = incoming(&bob).await?;
    ensure!(inc.shares.len() == 1 && inc.shares[0].group.as_deref() == Some("readers"), "{inc:?}");
    bob.get_file(&format!("{SHARED}/Docs/a.txt")).await?.check(200)?;
    // A user share given while bob has the group's entry takes that entry over.
    let again: ShareInfo = alice
        .post_json("/api/v1/shares", &json!({"path": "/Docs", "username": "bob", "permission": "write"}))
        .await?
        .ok(201)?;
    let inc = incoming(&bob).await?;
    ensure!(inc.shares.len() == 1 && inc.shares[0].id == again.id && inc.shares[0].group.is_none(), "{inc:?}");
    ensure!(alice.get("/api/v1/shares").await?.ok::<ShareList>(200)?.shares.len() == 2);
    // Leaving it hides the folder for bob from both.
    bob.delete(&format!("/api/v1/shares/{}", again.id)).await?.check(204)?;
    ensure!(incoming(&bob).await?.shares.is_empty());
    bob.stat(&format!("{SHARED}/Docs")).await?.check_error(404, "not_found")?;

    // The sharing policy holds for groups too.
    admin.patch_json(&format!("/api/v1/admin/users/{alice_id}"), &json!({"sharing": false})).await?.check(200)?;
    alice.put_file("/More/x.txt", "x").await?.check(201)?;
    alice
        .post_json("/api/v1/shares", &json!({"path": "/More", "group": "writers", "permission": "read"}))
        .await?
        .check_error(403, "forbidden")?;
    Ok(())
});

backend_test!(
    group_changes_hold_at_once_on_every_gateway,
    only = postgres_s3,
    opts = nimbus_e2e::GatewayOptions::default(),
    |gw| async move {
        let admin = gw.admin().await?;
        let (_, alice) = gw.user("alice", None).await?;
        let (_, bob_a) = gw.user("bob", None).await?;
        let other = gw.start_sibling().await?;
        let bob_b = other.api.with_token(bob_a.token().unwrap_or_default());
        alice.put_file("/Team/doc.txt", "one").await?.check(201)?;
        let team = group(&admin, "team", &["bob"]).await?;
        let s = share_group(&alice, "/Team", "team", "write").await?;

        // Bob works through gateway B on what alice shared with his group through A.
        bob_b.put_file(&format!("{SHARED}/Team/doc.txt"), "two").await?.check(200)?;
        ensure!(alice.get_file("/Team/doc.txt").await?.body.as_ref() == b"two");
        // Read-only on A: B refuses the very next write.
        alice.patch_json(&format!("/api/v1/shares/{}", s.id), &json!({"permission": "read"})).await?.check(200)?;
        bob_b.put_file(&format!("{SHARED}/Team/doc.txt"), "three").await?.check_error(403, "forbidden")?;
        // Taken out of the group on A: B answers 404 at once; back in: B serves it again.
        let url = format!("/api/v1/admin/groups/{}/members", team.id);
        admin.delete(&format!("{url}/bob")).await?.check(204)?;
        bob_b.get_file(&format!("{SHARED}/Team/doc.txt")).await?.check_error(404, "not_found")?;
        admin.post_json(&url, &json!({"username": "bob"})).await?.check(201)?;
        ensure!(bob_b.get_file(&format!("{SHARED}/Team/doc.txt")).await?.body.as_ref() == b"two");
        // The group deleted on A: gone on B.
        admin.delete(&format!("/api/v1/admin/groups/{}", team.id)).await?.check(204)?;
        bob_b.list_dir(&format!("{SHARED}/Team"), None, None).await?.check_error(404, "not_found")?;
        Ok(())
    }
);

/// Carol's feed from `cursor` on: (op, path) of each change, and the next cursor.
async fn feed(api: &Api, cursor: &str) -> anyhow::Result<(Vec<(String, String)>, String)> {
    let list: nimbus_proto::wire::ChangeList = api
        .get(&format!("/api/v1/changes{}", nimbus_e2e::http::query_string(&[("cursor", cursor), ("wait", "0")])))
        .await?
        .ok(200)?;
    ensure!(!list.reset, "{list:?}");
    Ok((list.changes.iter().map(|c| (c.op.as_str().to_string(), c.path.clone())).collect(), list.cursor))
}

backend_test!(
    a_group_share_in_the_s3_door_and_the_change_feed,
    opts = nimbus_e2e::GatewayOptions::default().arg("--s3-listen").arg("127.0.0.1:0"),
    |gw| async move {
        let admin = gw.admin().await?;
        let (_, alice) = gw.user("alice", None).await?;
        let (_, carol) = gw.user("carol", None).await?;
        alice.put_file("/Team/plan.txt", "the plan").await?.check(201)?;
        let team = group(&admin, "team", &[]).await?;
        let s = share_group(&alice, "/Team", "team", "read").await?;
        let start: nimbus_proto::wire::ChangeList = carol.get("/api/v1/changes").await?.ok(200)?;

        // Added to the group: the entry appears in carol's feed, with `Shared with me` around it.
        let members = format!("/api/v1/admin/groups/{}/members", team.id);
        admin.post_json(&members, &json!({"username": "carol"})).await?.check(201)?;
        let (seen, cursor) = feed(&carol, &start.cursor).await?;
        let want = [("mkdir".to_string(), SHARED.to_string()), ("mkdir".to_string(), format!("{SHARED}/Team"))];
        ensure!(seen == want, "{seen:?}");

        // The S3 door: read, and a read-only share refuses a write.
        let endpoint = gw.s3_endpoint()?;
        let key = new_key(&carol).await?;
        let read = s3_io(&endpoint, &key, &["read", "carol", "Shared with me/Team/plan.txt"]).await?;
        ensure!(read == "the plan", "{read}");
        let put = s3_io(&endpoint, &key, &["code", "carol", "Shared with me/Team/new.txt"]).await?;
        ensure!(put == "AccessDenied 403", "{put}");
        alice.patch_json(&format!("/api/v1/shares/{}", s.id), &json!({"permission": "write"})).await?.check(200)?;
        ensure!(s3_io(&endpoint, &key, &["code", "carol", "Shared with me/Team/new.txt"]).await? == "OK");
        ensure!(alice.get_file("/Team/new.txt").await?.body.as_ref() == b"probe");

        // Taken out: gone from the bucket at once, and the feed says so.
        admin.delete(&format!("{members}/carol")).await?.check(204)?;
        let read = s3_io(&endpoint, &key, &["read", "carol", "Shared with me/Team/plan.txt"]).await?;
        ensure!(read == "NoSuchKey 404", "{read}");
        let (seen, _) = feed(&carol, &cursor).await?;
        ensure!(seen.iter().any(|(op, p)| op == "delete" && p == &format!("{SHARED}/Team")), "{seen:?}");
        ensure!(seen.last().is_some_and(|(op, p)| op == "delete" && p == SHARED), "{seen:?}");
        Ok(())
    }
);
