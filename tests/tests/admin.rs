//! Admin endpoints: user CRUD, what each change does to the user, devices, sorting (non-admins
//! refused and bad input are in api_contract.rs, in process).

use anyhow::{Context, ensure};
use nimbus_e2e::backend_test;
use nimbus_e2e::gateway::user_password;
use nimbus_e2e::http::{Api, check_rfc3339_utc};
use nimbus_proto::wire::{
    AuditList, CreatedUser, IdentitySource, LoginResponse, Me, Role, StatsHistory, TokenList, UserInfo, UserList,
};

backend_test!(user_crud, |gw| async move {
    let admin = gw.admin().await?;
    let r = admin
        .post_json(
            "/api/v1/admin/users",
            &serde_json::json!({"username": "grace", "password": "grace-password-1", "quota_bytes": 5_000_000, "role": "user"}),
        )
        .await?;
    let c: CreatedUser = r.ok(201)?;
    ensure!(c.generated_password.is_none(), "{r}");
    ensure!(!r.text().contains("grace-password-1"), "the password is echoed: {r}");
    let grace = c.user.clone();
    ensure!(
        grace.username == "grace"
            && grace.role == Role::User
            && grace.quota_bytes == Some(5_000_000)
            && grace.used_bytes == 0
            && !grace.disabled,
        "{grace:?}"
    );
    check_rfc3339_utc(&grace.created)?;

    // Without a password: one is generated, shown once, and works.
    let r = admin.post_json("/api/v1/admin/users", &serde_json::json!({"username": "heidi", "role": "user"})).await?;
    let heidi: CreatedUser = r.ok(201)?;
    let pw = heidi.generated_password.clone().context("generated_password")?;
    ensure!(pw.len() >= 12, "a weak generated password");
    gw.api().login_ok("heidi", &pw).await?;
    let again: UserInfo = admin.get(&format!("/api/v1/admin/users/{}", heidi.user.id)).await?.ok(200)?;
    // The same user, now with the sign-in just made.
    ensure!(heidi.user.last_login.is_none() && again.last_login.is_some(), "{again:?}");
    ensure!(UserInfo { last_login: None, ..again.clone() } == heidi.user, "{again:?} vs {:?}", heidi.user);
    ensure!(!admin.get("/api/v1/admin/users").await?.text().contains(&pw), "the generated password is listed");

    // Duplicates (case-insensitively) and invalid names.
    admin
        .post_json(
            "/api/v1/admin/users",
            &serde_json::json!({"username": "GRACE", "password": "x-password-2", "role": "user"}),
        )
        .await?
        .check_error(409, "already_exists")?;
    for bad in ["", "-lead", "a b", "a/b", "x".repeat(65).as_str()] {
        admin
            .post_json(
                "/api/v1/admin/users",
                &serde_json::json!({"username": bad, "password": "x-password-2", "role": "user"}),
            )
            .await?
            .check(400)
            .with_context(|| format!("username {bad:?}"))?;
    }

    // List, filter, page.
    let l: UserList = admin.get("/api/v1/admin/users").await?.ok(200)?;
    let names: Vec<&str> = l.users.iter().map(|u| u.username.as_str()).collect();
    for n in ["admin", "grace", "heidi"] {
        ensure!(names.contains(&n), "{n} missing from {names:?}");
    }
    // Each entry is what the user's own page shows: identity columns included (source, two-factor,
    // last sign-in), so the console's list needs no request per row.
    let listed = l.users.iter().find(|u| u.username == "heidi").context("heidi listed")?;
    ensure!(*listed == again && listed.source == IdentitySource::Local && !listed.totp, "{listed:?} vs {again:?}");
    let l: UserList = admin.get("/api/v1/admin/users?q=gra").await?.ok(200)?;
    ensure!(l.users.len() == 1 && l.users[0].username == "grace", "{:?}", l.users);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => format!("/api/v1/admin/users?limit=1&cursor={}", nimbus_proto::names::percent_encode(c)),
            None => "/api/v1/admin/users?limit=1".to_string(),
        };
        let page: UserList = admin.get(&url).await?.ok(200)?;
        ensure!(page.users.len() <= 1);
        seen.extend(page.users.into_iter().map(|u| u.username));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
        ensure!(seen.len() < 10, "paging does not end: {seen:?}");
    }
    seen.sort();
    ensure!(seen == ["admin", "grace", "heidi"], "{seen:?}");

    let got: UserInfo = admin.get(&format!("/api/v1/admin/users/{}", grace.id)).await?.ok(200)?;
    ensure!(got == grace, "{got:?}");
    admin.get("/api/v1/admin/users/987654321").await?.check_error(404, "not_found")?;

    // PATCH: quota, then unlimited.
    let user_path = format!("/api/v1/admin/users/{}", grace.id);
    let u: UserInfo = admin.patch_json(&user_path, &serde_json::json!({"quota_bytes": 123})).await?.ok(200)?;
    ensure!(u.quota_bytes == Some(123) && u.role == Role::User && !u.disabled, "{u:?}");
    let grace_api = gw.api().login_ok("grace", "grace-password-1").await?;
    let me: Me = grace_api.get("/api/v1/me").await?.ok(200)?;
    ensure!(me.quota_bytes == Some(123), "{me:?}");
    let u: UserInfo = admin.patch_json(&user_path, &serde_json::json!({"quota_bytes": null})).await?.ok(200)?;
    ensure!(u.quota_bytes.is_none(), "{u:?}");
    // A field the request cannot change (or a typo) is refused, and nothing changes.
    for body in [serde_json::json!({"username": "grace2"}), serde_json::json!({"quota": 5, "disabled": true})] {
        admin.patch_json(&user_path, &body).await?.check_error(400, "bad_request")?;
    }
    let u: UserInfo = admin.get(&user_path).await?.ok(200)?;
    ensure!(u.username == "grace" && !u.disabled, "{u:?}");
    // An absent field leaves it alone.
    let u: UserInfo = admin.patch_json(&user_path, &serde_json::json!({"disabled": false})).await?.ok(200)?;
    ensure!(u.quota_bytes.is_none(), "{u:?}");

    // Role: promoted users reach admin endpoints; demoted ones are refused at once.
    let u: UserInfo = admin.patch_json(&user_path, &serde_json::json!({"role": "admin"})).await?.ok(200)?;
    ensure!(u.role == Role::Admin);
    let promoted = gw.api().login_ok("grace", "grace-password-1").await?;
    promoted.get("/api/v1/admin/users").await?.check(200)?;
    admin.patch_json(&user_path, &serde_json::json!({"role": "user"})).await?.check(200)?;
    promoted.get("/api/v1/admin/users").await?.check_error(403, "forbidden")?;
    grace_api.get("/api/v1/admin/users").await?.check_error(403, "forbidden")?;

    // Password reset: old tokens and the old password stop working.
    grace_api.get("/api/v1/me").await?.check(200)?;
    admin.patch_json(&user_path, &serde_json::json!({"password": "grace-password-2"})).await?.check(200)?;
    grace_api.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    promoted.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    gw.api().login("grace", "grace-password-1").await?.check_error(401, "unauthorized")?;
    let grace_api = gw.api().login_ok("grace", "grace-password-2").await?;

    // Delete: token dead, user gone, files gone (a new user of that name starts empty).
    grace_api.put_file("/private/diary.txt", "dear diary").await?.entry(201)?;
    admin.delete(&user_path).await?.check(204)?;
    grace_api.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    admin.get(&user_path).await?.check_error(404, "not_found")?;
    admin.delete(&user_path).await?.check_error(404, "not_found")?;
    admin.patch_json(&user_path, &serde_json::json!({"disabled": true})).await?.check_error(404, "not_found")?;
    gw.api().login("grace", "grace-password-2").await?.check_error(401, "unauthorized")?;
    let l: UserList = admin.get("/api/v1/admin/users").await?.ok(200)?;
    ensure!(l.users.iter().all(|u| u.username != "grace"), "deleted user listed");
    let (_, reborn) = gw.user("grace", None).await?;
    reborn.get_file("/private/diary.txt").await?.check_error(404, "not_found")?;
    let me: Me = reborn.get("/api/v1/me").await?.ok(200)?;
    ensure!(me.used_bytes == 0 && me.id != grace.id, "{me:?}");

    // Audit log: newest first, records what happened.
    let a: AuditList = admin.get("/api/v1/admin/audit").await?.ok(200)?;
    ensure!(!a.entries.is_empty(), "empty audit log");
    for w in a.entries.windows(2) {
        let (newer, older) = (check_rfc3339_utc(&w[0].at)?, check_rfc3339_utc(&w[1].at)?);
        ensure!(newer >= older && w[0].id > w[1].id, "audit not newest first: {:?} then {:?}", w[0], w[1]);
    }
    let a1: AuditList = admin.get("/api/v1/admin/audit?limit=1").await?.ok(200)?;
    ensure!(a1.entries.len() == 1 && a1.next_cursor.is_some(), "audit paging");
    let action = a.entries[0].action.clone();
    let by_action: AuditList = admin
        .get(&format!("/api/v1/admin/audit?action={}", nimbus_proto::names::percent_encode(&action)))
        .await?
        .ok(200)?;
    ensure!(
        !by_action.entries.is_empty() && by_action.entries.iter().all(|e| e.action == action),
        "?action={action}: {:?}",
        by_action.entries
    );
    let by_user: AuditList = admin.get("/api/v1/admin/audit?user=heidi").await?.ok(200)?;
    ensure!(!by_user.entries.is_empty(), "?user=heidi found nothing although heidi logged in");
    let none: AuditList = admin.get("/api/v1/admin/audit?user=nobody-at-all").await?.ok(200)?;
    ensure!(none.entries.is_empty(), "?user=nobody-at-all: {:?}", none.entries);
    Ok(())
});

/// Signs `user` in from a named device and returns that device's API handle.
async fn sign_in_from(
    gw: &nimbus_e2e::gateway::Gateway,
    user: &str,
    password: &str,
    device: &str,
) -> anyhow::Result<Api> {
    let r = gw
        .api()
        .post_json("/api/v1/auth/login", &serde_json::json!({"username": user, "password": password, "device": device}))
        .await?;
    let login: LoginResponse = r.ok(200)?;
    Ok(gw.api().with_token(login.token))
}

backend_test!(devices, |gw| async move {
    let admin = gw.admin().await?;
    let (kim, _) = gw.create_user("kim", None).await?;
    let (lee, _) = gw.create_user("lee", None).await?;
    let (pw, lee_pw) = (user_password("kim"), user_password("lee"));
    let laptop = sign_in_from(&gw, "kim", &pw, "kim-laptop").await?;
    let phone = sign_in_from(&gw, "kim", &pw, "kim-phone").await?;
    let lee_api = sign_in_from(&gw, "lee", &lee_pw, "lee-desktop").await?;
    laptop.get("/api/v1/me").await?.check(200)?;

    // Last use is recorded in the background after the request: wait for it (bounded).
    let mut list: TokenList = admin.get(&format!("/api/v1/admin/users/{kim}/devices")).await?.ok(200)?;
    for _ in 0..50 {
        if list.tokens.iter().any(|t| t.device == "kim-laptop" && t.last_used.is_some()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        list = admin.get(&format!("/api/v1/admin/users/{kim}/devices")).await?.ok(200)?;
    }
    let names: Vec<&str> = list.tokens.iter().map(|t| t.device.as_str()).collect();
    ensure!(names.contains(&"kim-laptop") && names.contains(&"kim-phone"), "{names:?}");
    ensure!(!names.contains(&"lee-desktop"), "another user's device listed: {names:?}");
    ensure!(list.tokens.iter().all(|t| !t.current), "the admin's own token marked current on kim's list");
    let laptop_token = list.tokens.iter().find(|t| t.device == "kim-laptop").context("laptop")?;
    ensure!(laptop_token.last_used.is_some(), "last use not recorded: {laptop_token:?}");
    check_rfc3339_utc(laptop_token.last_used.as_deref().unwrap_or_default())?;
    let lee_tokens: TokenList = admin.get(&format!("/api/v1/admin/users/{lee}/devices")).await?.ok(200)?;
    let lee_token = lee_tokens.tokens.iter().find(|t| t.device == "lee-desktop").context("lee's token")?.id;

    // A token id of another user through kim's path: no such device, and lee stays signed in.
    admin.delete(&format!("/api/v1/admin/users/{kim}/devices/{lee_token}")).await?.check_error(404, "not_found")?;
    lee_api.get("/api/v1/me").await?.check(200)?;
    for bad in ["abc", "-1", "99999999999999999999"] {
        admin.delete(&format!("/api/v1/admin/users/{kim}/devices/{bad}")).await?.check_error(404, "not_found")?;
    }
    admin.get("/api/v1/admin/users/987654321/devices").await?.check_error(404, "not_found")?;

    // Revoke one: that device is out, the other still in.
    admin.delete(&format!("/api/v1/admin/users/{kim}/devices/{}", laptop_token.id)).await?.check(204)?;
    laptop.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    phone.get("/api/v1/me").await?.check(200)?;
    admin
        .delete(&format!("/api/v1/admin/users/{kim}/devices/{}", laptop_token.id))
        .await?
        .check_error(404, "not_found")?;

    // Revoke all: every device out; signing in again works (the account is not disabled).
    admin.delete(&format!("/api/v1/admin/users/{kim}/devices")).await?.check(204)?;
    phone.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    let list: TokenList = admin.get(&format!("/api/v1/admin/users/{kim}/devices")).await?.ok(200)?;
    ensure!(list.tokens.is_empty(), "{:?}", list.tokens);
    gw.api().login_ok("kim", &pw).await?;
    lee_api.get("/api/v1/me").await?.check(200)?;

    // The admin cannot sign themselves out everywhere by accident.
    let me: Me = admin.get("/api/v1/me").await?.ok(200)?;
    admin.delete(&format!("/api/v1/admin/users/{}/devices", me.id)).await?.check_error(409, "conflict")?;
    let own: TokenList = admin.get(&format!("/api/v1/admin/users/{}/devices", me.id)).await?.ok(200)?;
    ensure!(own.tokens.iter().filter(|t| t.current).count() == 1, "{:?}", own.tokens);

    let audit: AuditList = admin.get("/api/v1/admin/audit?action=device_revoke").await?.ok(200)?;
    ensure!(audit.entries.iter().any(|e| e.target.as_deref() == Some("kim")), "{:?}", audit.entries);
    let audit: AuditList = admin.get("/api/v1/admin/audit?action=device_revoke_all").await?.ok(200)?;
    ensure!(audit.entries.len() == 1, "{:?}", audit.entries);
    Ok(())
});

backend_test!(user_sorting, |gw| async move {
    let admin = gw.admin().await?;
    // Usage 0 (admin), 3000, 1000, 2000, 1000: ties must neither repeat nor vanish across pages.
    for (name, bytes) in [("nina", 3000usize), ("omar", 1000), ("pia", 2000), ("quinn", 1000)] {
        let (_, api) = gw.user(name, None).await?;
        api.put_file("/f.bin", vec![7u8; bytes]).await?.entry(201)?;
    }
    let walk = |sort: &'static str| {
        let admin = admin.clone();
        async move {
            let mut seen = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let mut url = format!("/api/v1/admin/users?limit=2&sort={sort}");
                if let Some(c) = &cursor {
                    url.push_str(&format!("&cursor={}", nimbus_proto::names::percent_encode(c)));
                }
                let page: UserList = admin.get(&url).await?.ok(200)?;
                seen.extend(page.users.into_iter().map(|u| (u.username, u.used_bytes)));
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
                ensure!(seen.len() < 20, "paging does not end: {seen:?}");
            }
            anyhow::Ok(seen)
        }
    };
    let names = |v: &[(String, u64)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    ensure!(names(&walk("name").await?) == ["admin", "nina", "omar", "pia", "quinn"]);
    let down = walk("-name").await?;
    ensure!(names(&down) == ["quinn", "pia", "omar", "nina", "admin"], "{down:?}");
    let by_usage = walk("-usage").await?;
    ensure!(by_usage.len() == 5, "{by_usage:?}");
    ensure!(by_usage.windows(2).all(|w| w[0].1 >= w[1].1), "not by usage, descending: {by_usage:?}");
    ensure!(by_usage[0].0 == "nina" && by_usage[4].0 == "admin", "{by_usage:?}");
    let up = walk("usage").await?;
    ensure!(up.windows(2).all(|w| w[0].1 <= w[1].1) && up.len() == 5, "{up:?}");
    ensure!(names(&walk("created").await?) == ["admin", "nina", "omar", "pia", "quinn"]);
    ensure!(names(&walk("-created").await?) == ["quinn", "pia", "omar", "nina", "admin"]);
    // Sorting composes with search.
    let l: UserList = admin.get("/api/v1/admin/users?q=i&sort=-usage").await?.ok(200)?;
    let got: Vec<&str> = l.users.iter().map(|u| u.username.as_str()).collect();
    ensure!(got == ["nina", "pia", "quinn", "admin"], "{got:?}");

    admin.get("/api/v1/admin/users?sort=password").await?.check_error(400, "bad_request")?;
    admin.get("/api/v1/admin/users?sort=usage&cursor=nina").await?.check_error(400, "bad_request")?;
    admin.get("/api/v1/admin/users?sort=usage&cursor=1:x").await?.check_error(400, "bad_request")?;
    // A cursor belongs to the sort (and direction) that made it: under another one it would
    // place the page by another column's value, so it is refused, as a malformed one is.
    let first_cursor = |sort: &'static str| {
        let admin = admin.clone();
        async move {
            let page: UserList = admin.get(&format!("/api/v1/admin/users?limit=2&sort={sort}")).await?.ok(200)?;
            page.next_cursor.with_context(|| format!("{sort}: a second page"))
        }
    };
    let sorts = ["name", "-name", "usage", "-usage", "created", "-created"];
    for made in sorts {
        let c = first_cursor(made).await?;
        for used in sorts {
            let url =
                format!("/api/v1/admin/users?limit=2&sort={used}&cursor={}", nimbus_proto::names::percent_encode(&c));
            let r = admin.get(&url).await?;
            if used == made {
                r.ok::<UserList>(200)?;
            } else {
                r.check_error(400, "bad_request").with_context(|| format!("a {made} cursor under sort={used}"))?;
            }
        }
    }
    for bad in ["", ":", "name", "name:", "usage:1", "usage:x:1", "usage:1:2:3", "size:1:2"] {
        let sort = if bad.starts_with("name") { "name" } else { "usage" };
        let url = format!("/api/v1/admin/users?sort={sort}&cursor={}", nimbus_proto::names::percent_encode(bad));
        admin.get(&url).await?.check_error(400, "bad_request").with_context(|| format!("cursor {bad:?}"))?;
    }
    Ok(())
});

backend_test!(
    stats_history,
    only = sqlite_local,
    opts = nimbus_e2e::GatewayOptions::default().arg("--stats-interval-secs").arg("1"),
    |gw| async move {
        let admin = gw.admin().await?;
        let (_, user) = gw.user("rita", None).await?;
        user.put_file("/hot.bin", vec![1u8; 64 * 1024]).await?.entry(201)?;
        // Requests and cache lookups spread over a few sampling intervals.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let history = loop {
            for _ in 0..20 {
                user.get_file("/hot.bin").await?.check(200)?;
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let h: StatsHistory = admin.get("/api/v1/admin/stats/history").await?.ok(200)?;
            let busy = h.samples.iter().any(|s| s.requests_per_sec > 0.0 && s.cache_hit_ratio.is_some());
            if (busy && h.samples.len() >= 3) || std::time::Instant::now() > deadline {
                break h;
            }
        };
        ensure!(history.interval_secs == 1, "{history:?}");
        ensure!(history.samples.len() >= 3, "no samples after 30 s: {history:?}");
        let mut last = None;
        for s in &history.samples {
            let at = check_rfc3339_utc(&s.at)?;
            ensure!(last.is_none_or(|l| l < at), "samples not oldest first: {history:?}");
            last = Some(at);
            ensure!(s.requests_per_sec >= 0.0 && s.server_errors_per_sec == 0.0, "{s:?}");
            ensure!(s.cache_hit_ratio.is_none_or(|r| (0.0..=1.0).contains(&r)), "{s:?}");
        }
        let busy = history.samples.iter().find(|s| s.requests_per_sec > 0.0 && s.cache_hit_ratio.is_some());
        let busy = busy.context("no interval saw both requests and cache lookups")?;
        // The same small file read again and again: after the first read, lookups hit.
        ensure!(busy.cache_hit_ratio.unwrap_or(0.0) > 0.5, "{busy:?}");
        ensure!(history.samples.iter().any(|s| s.cache_used_bytes > 0), "{history:?}");
        Ok(())
    }
);

// The last administrators demoting, disabling or deleting each other at the same moment never
// leave the installation without one (each change is checked against the others under one
// lock); an administrator resetting their own password stays signed in there.
backend_test!(never_without_an_administrator, |gw| async move {
    let mut first = gw.admin().await?;
    let me: Me = first.get("/api/v1/me").await?.ok(200)?;
    let first_path = format!("/api/v1/admin/users/{}", me.id);
    let body = serde_json::json!({"username": "second", "password": "second-password-1", "role": "admin"});
    let second_id = first.post_json("/api/v1/admin/users", &body).await?.ok::<CreatedUser>(201)?.user.id;
    let mut second = gw.api().login_ok("second", "second-password-1").await?;
    let second_path = format!("/api/v1/admin/users/{second_id}");
    let admins = |api: Api| async move {
        let l: UserList = api.get("/api/v1/admin/users?limit=1000").await?.ok(200)?;
        Ok::<_, anyhow::Error>(l.users.iter().filter(|u| u.role == Role::Admin && !u.disabled).count())
    };
    for round in 0..12 {
        let disable = round % 2 == 1;
        let change = if disable { serde_json::json!({"disabled": true}) } else { serde_json::json!({"role": "user"}) };
        let (a, b) = tokio::join!(first.patch_json(&second_path, &change), second.patch_json(&first_path, &change));
        let (a, b) = (a?, b?);
        let oks = [a.status, b.status].iter().filter(|s| **s == 200).count();
        ensure!(oks == 1, "round {round}: {oks} of the two changes went through: {a} / {b}");
        let first_won = a.status == 200;
        let lost = if first_won { &b } else { &a };
        // Refused by the check, or the winner's change came first (no longer an administrator,
        // or signed out by the disable).
        ensure!(matches!(lost.status, 401 | 403 | 409), "round {round}: {lost}");
        let (left, other_path) = if first_won { (&first, &second_path) } else { (&second, &first_path) };
        ensure!(admins(left.clone()).await? == 1, "round {round}: not exactly one administrator left");
        left.patch_json(other_path, &serde_json::json!({"role": "admin", "disabled": false})).await?.check(200)?;
        if disable {
            // Disabling signed the other out everywhere.
            if first_won {
                second = gw.api().login_ok("second", "second-password-1").await?;
            } else {
                first = gw.api().login_ok("admin", nimbus_e2e::gateway::ADMIN_PASSWORD).await?;
            }
        }
    }

    // An administrator resetting their own password: this sign-in stays, the others end.
    let elsewhere = gw.api().login_ok("second", "second-password-1").await?;
    second.patch_json(&second_path, &serde_json::json!({"password": "second-password-2"})).await?.check(200)?;
    second.get("/api/v1/me").await?.check(200)?;
    elsewhere.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    gw.api().login("second", "second-password-1").await?.check_error(401, "unauthorized")?;
    gw.api().login_ok("second", "second-password-2").await?;

    // Deleting each other at the same moment: one goes, one administrator stays.
    let (a, b) = tokio::join!(first.delete(&second_path), second.delete(&first_path));
    let (a, b) = (a?, b?);
    let gone = [a.status, b.status].iter().filter(|s| **s == 204).count();
    ensure!(gone == 1, "{gone} of the two deletes went through: {a} / {b}");
    let left = if a.status == 204 { &first } else { &second };
    ensure!(admins(left.clone()).await? == 1, "not exactly one administrator left after the deletes");
    Ok(())
});
