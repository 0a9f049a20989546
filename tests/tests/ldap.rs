//! LDAP / Active Directory accounts (docs/IDENTITY.md) against a real OpenLDAP `slapd`
//! started by the test (tests/src/ldap.rs, the worked example of the docs): directory users
//! sign in with `POST /api/v1/auth/login` (the gateway binds as them), the admin group makes
//! admins, `nimbus-gateway ldap-sync` creates, refuses (local-name clash), disables and enables
//! again, a removed user's tokens stop working, a directory that is down means a clear 503 for
//! directory sign-ins only, and LDAP filter characters in usernames get nowhere.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use nimbus_e2e::backend::Backend;
use nimbus_e2e::gateway::{ADMIN_PASSWORD, Gateway, GatewayOptions};
use nimbus_e2e::ldap::{self, Slapd};
use nimbus_e2e::run_on;
use nimbus_proto::wire::{LoginResponse, Me};

fn options(slapd: &Slapd, sync_interval: &str) -> GatewayOptions {
    let mut opts = GatewayOptions::default().arg("--ldap-sync-interval").arg(sync_interval);
    for a in slapd.gateway_args() {
        opts = opts.arg(a);
    }
    opts
}

/// `nimbus-gateway ldap-sync` beside the running gateway: its stdout, after checking it
/// succeeded.
async fn ldap_sync(gw: &Gateway) -> anyhow::Result<String> {
    let out = gw.tool("ldap-sync").output().await.context("run ldap-sync")?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(
        out.status.success(),
        "ldap-sync failed ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(stdout)
}

/// The line of `ldap-sync`'s output about `user` (`ACTION user: detail`).
fn line_about<'a>(out: &'a str, action: &str, user: &str) -> anyhow::Result<&'a str> {
    out.lines()
        .find(|l| {
            l.split_whitespace().next() == Some(action) && l.split_whitespace().nth(1) == Some(&format!("{user}:"))
        })
        .with_context(|| format!("ldap-sync printed no `{action} {user}:` line:\n{out}"))
}

async fn login(gw: &Gateway, user: &str, password: &str) -> anyhow::Result<LoginResponse> {
    gw.api().login(user, password).await?.ok(200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_users_sign_in_and_the_admin_group_makes_admins() -> anyhow::Result<()> {
    let slapd = Slapd::start().await?;
    run_on(Backend::SqliteLocal, options(&slapd, "0"), |gw| async move {
        // alice is in cn=nimbus-admins: her first sign-in creates her account, as an admin.
        let alice = login(&gw, "alice", &ldap::password("alice")).await?;
        ensure!(alice.user.role.as_str() == "admin", "alice: {:?}", alice.user);
        let me: Me = gw.api().with_token(&alice.token).get("/api/v1/me").await?.ok(200)?;
        ensure!(me.source.as_str() == "ldap", "{me:?}");
        // Her token works on an admin endpoint.
        gw.api().with_token(&alice.token).get("/api/v1/admin/users").await?.check(200)?;

        let bob = login(&gw, "bob", &ldap::password("bob")).await?;
        ensure!(bob.user.role.as_str() == "user", "bob: {:?}", bob.user);
        // Names are case-insensitive, as for local accounts.
        login(&gw, "BOB", &ldap::password("bob")).await?;

        // Wrong, empty (an unauthenticated bind would "succeed") and another user's passwords.
        for (user, pw) in [("bob", "wrong-password"), ("bob", ""), ("bob", &ldap::password("alice")), ("nobody", "x")] {
            gw.api().login(user, pw).await?.check_error(401, "unauthorized").with_context(|| format!("{user}/{pw}"))?;
        }
        // The local administrator signs in with the local password as before.
        login(&gw, "admin", ADMIN_PASSWORD).await?;

        // Leaving the admin group (carol takes her place: a groupOfNames has a member) makes
        // alice a user at her next sign-in.
        slapd
            .modify(&format!(
                "dn: {}\nchangetype: modify\nreplace: member\nmember: {}\n",
                ldap::ADMIN_GROUP,
                ldap::user_dn("carol")
            ))
            .await?;
        let alice = login(&gw, "alice", &ldap::password("alice")).await?;
        ensure!(alice.user.role.as_str() == "user", "alice after leaving the group: {:?}", alice.user);

        // The accounts came from the directory, made by ldap-sync (audited), shown as LDAP.
        let admin = gw.admin().await?;
        let audit = admin.get("/api/v1/admin/audit?user=ldap-sync").await?.value()?;
        let entries = audit["entries"].as_array().context("audit entries")?;
        for user in ["alice", "bob"] {
            ensure!(
                entries.iter().any(|e| e["action"] == "user_create" && e["target"] == user),
                "no user_create of {user} by ldap-sync: {audit}"
            );
        }
        let users = admin.get("/api/v1/admin/users?q=bob").await?.value()?;
        ensure!(users["users"][0]["source"] == "ldap", "{users}");
        Ok(())
    })
    .await
}

/// E-mail, display name and quota come from the directory: stored at the first sign-in and at
/// every sync, shown by `/api/v1/me` and the admin user list. `--ldap-default-quota` for new
/// accounts, `--ldap-quota-attr` (here `description`: OpenLDAP's standard schemas have no
/// quota attribute) where an entry has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_display_name_and_quota_from_the_directory() -> anyhow::Result<()> {
    let slapd = Slapd::start().await?;
    slapd
        .modify(&format!(
            "dn: {}\nchangetype: modify\nadd: displayName\ndisplayName: Alice Liddell\n-\nadd: description\ndescription: 20MiB\n",
            ldap::user_dn("alice")
        ))
        .await?;
    let opts = options(&slapd, "0")
        .arg("--ldap-quota-attr")
        .arg("description")
        .arg("--ldap-default-quota")
        .arg("5MiB")
        .arg("--default-quota-bytes")
        .arg("1000");
    let s = &slapd;
    run_on(Backend::SqliteLocal, opts, |gw| async move {
        // First sign-ins create the accounts with what the directory says.
        let alice = login(&gw, "alice", &ldap::password("alice")).await?;
        let me: Me = gw.api().with_token(&alice.token).get("/api/v1/me").await?.ok(200)?;
        ensure!(me.email.as_deref() == Some("alice@example.org"), "{me:?}");
        ensure!(me.display_name.as_deref() == Some("Alice Liddell"), "{me:?}");
        ensure!(me.quota_bytes == Some(20 << 20), "the entry's quota: {me:?}");
        let bob = login(&gw, "bob", &ldap::password("bob")).await?;
        let me: Me = gw.api().with_token(&bob.token).get("/api/v1/me").await?.ok(200)?;
        ensure!(me.email.as_deref() == Some("bob@example.org") && me.display_name.is_none(), "{me:?}");
        ensure!(me.quota_bytes == Some(5 << 20), "--ldap-default-quota, not --default-quota-bytes: {me:?}");
        // A local account has neither, and the gateway's default quota.
        let (_, local) = gw.user("lou", None).await?;
        let me: Me = local.get("/api/v1/me").await?.ok(200)?;
        ensure!(me.email.is_none() && me.display_name.is_none(), "{me:?}");

        // The sync creates carol alike, then has nothing to change.
        let out = ldap_sync(&gw).await?;
        line_about(&out, "created", "carol")?;
        ensure!(out.contains("1 created, 0 updated"), "{out}");
        let admin = gw.admin().await?;
        let users = admin.get("/api/v1/admin/users?q=carol").await?.value()?;
        let carol = &users["users"][0];
        ensure!(carol["email"] == "carol@example.org" && carol["quota_bytes"] == 5 << 20, "{carol}");

        // Changes in the directory: the sync follows them...
        s.modify(&format!(
            "dn: {}\nchangetype: modify\nreplace: mail\nmail: a.liddell@example.org\n-\nreplace: displayName\n\
             displayName: Alice P. Liddell\n-\nreplace: description\ndescription: unlimited\n",
            ldap::user_dn("alice")
        ))
        .await?;
        let out = ldap_sync(&gw).await?;
        let line = line_about(&out, "updated", "alice")?;
        ensure!(
            line.contains("e-mail a.liddell@example.org")
                && line.contains("display name Alice P. Liddell")
                && line.contains("quota unlimited"),
            "{line}"
        );
        let users = admin.get("/api/v1/admin/users?q=alice").await?.value()?;
        let a = &users["users"][0];
        ensure!(
            a["email"] == "a.liddell@example.org" && a["display_name"] == "Alice P. Liddell" && a["quota_bytes"].is_null(),
            "{a}"
        );
        // ... and so does a sign-in, before any sync.
        s.modify(&format!(
            "dn: {}\nchangetype: modify\nadd: displayName\ndisplayName: Robert\n-\nadd: description\ndescription: 7MiB\n",
            ldap::user_dn("bob")
        ))
        .await?;
        let bob = login(&gw, "bob", &ldap::password("bob")).await?;
        let me: Me = gw.api().with_token(&bob.token).get("/api/v1/me").await?.ok(200)?;
        ensure!(me.display_name.as_deref() == Some("Robert") && me.quota_bytes == Some(7 << 20), "{me:?}");
        // An administrator's quota stays for an entry without the attribute (carol).
        let id = carol["id"].as_i64().context("id")?;
        admin
            .patch_json(&format!("/api/v1/admin/users/{id}"), &serde_json::json!({"quota_bytes": 1 << 30}))
            .await?
            .check(200)?;
        let out = ldap_sync(&gw).await?;
        ensure!(out.contains("0 created, 0 updated"), "{out}");
        let users = admin.get("/api/v1/admin/users?q=carol").await?.value()?;
        ensure!(users["users"][0]["quota_bytes"] == 1 << 30, "{users}");

        // Every change is audited by ldap-sync.
        let audit = admin.get("/api/v1/admin/audit?user=ldap-sync&target=alice").await?.value()?;
        ensure!(audit.to_string().contains("display name Alice P. Liddell"), "{audit}");
        Ok(())
    })
    .await
}

/// Nested groups: the admin group's members include the members of groups inside it, to a
/// bounded depth, and a cycle between groups ends (Active Directory's usual set-up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_groups_make_admins() -> anyhow::Result<()> {
    let slapd = Slapd::start().await?;
    slapd.add_person("dave").await?;
    slapd.add_person("erin").await?;
    let group = |cn: &str| format!("cn={cn},ou=groups,{}", ldap::SUFFIX);
    // nimbus-admins ∋ ops ∋ oncall ∋ carol; ops ∋ bob; oncall ∋ nimbus-admins (a cycle);
    // staff ∋ dave is not inside nimbus-admins.
    slapd
        .add(&format!(
            "dn: {oncall}\nobjectClass: groupOfNames\ncn: oncall\nmember: {carol}\nmember: {admins}\n\n\
             dn: {ops}\nobjectClass: groupOfNames\ncn: ops\nmember: {bob}\nmember: {oncall}\n\n\
             dn: {staff}\nobjectClass: groupOfNames\ncn: staff\nmember: {dave}\n",
            oncall = group("oncall"),
            ops = group("ops"),
            staff = group("staff"),
            carol = ldap::user_dn("carol"),
            bob = ldap::user_dn("bob"),
            dave = ldap::user_dn("dave"),
            admins = ldap::ADMIN_GROUP,
        ))
        .await?;
    slapd
        .modify(&format!("dn: {}\nchangetype: modify\nadd: member\nmember: {}\n", ldap::ADMIN_GROUP, group("ops")))
        .await?;
    run_on(Backend::SqliteLocal, options(&slapd, "0"), |gw| async move {
        // At sign-in: through one level (bob) and two (carol); alice directly; dave and erin not.
        for (user, role) in [("alice", "admin"), ("bob", "admin"), ("carol", "admin"), ("dave", "user")] {
            let l = login(&gw, user, &ldap::password(user)).await?;
            ensure!(l.user.role.as_str() == role, "{user}: {:?}", l.user);
        }
        // At sync: the same roles; erin is created as a user.
        let out = ldap_sync(&gw).await?;
        ensure!(line_about(&out, "created", "erin")?.contains("role user"), "{out}");
        ensure!(out.contains("1 created, 0 updated"), "{out}");
        Ok(())
    })
    .await
}

/// The new flags are in `describe --json` (the deployment validator reads it) with their
/// variables and defaults.
#[test]
fn describe_knows_the_directory_profile_flags() -> anyhow::Result<()> {
    let d = nimbus_e2e::bins::gateway_describe()?;
    let commands = d["commands"].as_array().context("commands")?;
    for command in ["serve", "ldap-sync"] {
        let cmd = commands.iter().find(|c| c["name"] == command).with_context(|| format!("no {command}"))?;
        let args = cmd["args"].as_array().context("args")?;
        let flag = |long: &str| args.iter().find(|a| a["long"] == long).cloned().context(long.to_string());
        for (long, env, default) in [
            ("ldap-email-attr", "NIMBUS_LDAP_EMAIL_ATTR", Some("mail")),
            ("ldap-display-name-attr", "NIMBUS_LDAP_DISPLAY_NAME_ATTR", Some("displayName")),
            ("ldap-default-quota", "NIMBUS_LDAP_DEFAULT_QUOTA", None),
            ("ldap-quota-attr", "NIMBUS_LDAP_QUOTA_ATTR", None),
        ] {
            let f = flag(long)?;
            ensure!(f["env"] == env && f["takes_value"] == true, "{command} --{long}: {f}");
            let defaults = f["defaults"].as_array().context("defaults")?;
            ensure!(defaults.first().and_then(|v| v.as_str()) == default, "{command} --{long}: {f}");
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ldap_filter_characters_in_usernames_get_nowhere() -> anyhow::Result<()> {
    let slapd = Slapd::start().await?;
    run_on(Backend::SqliteLocal, options(&slapd, "0"), |gw| async move {
        let alice_pw = ldap::password("alice");
        // With a filter built by pasting the name, `*` or `ali*` would find alice and her
        // password would let one in; `)(uid=*` would widen the filter.
        // (Fewer than 20 failures in all: the throttle locks an address after 20.)
        let names =
            ["*", "ali*", ")(uid=*", "alice)(uid=*", "*)(|(uid=*", "\\", "alice\\", "alice\0", "\0", "(uid=alice)"];
        let tries = names.iter().map(|n| (*n, alice_pw.as_str())).chain([("*", "x"), (")(uid=*", "")]);
        for (name, pw) in tries {
            let r = gw.api().login(name, pw).await?;
            r.check_error(401, "unauthorized").with_context(|| format!("username {name:?}"))?;
        }
        // The directory is still fine, and alice herself signs in.
        login(&gw, "alice", &alice_pw).await?;
        // No account was made for any of those names.
        let users = gw.admin().await?.get("/api/v1/admin/users").await?.value()?;
        let names: Vec<&str> =
            users["users"].as_array().context("users")?.iter().filter_map(|u| u["username"].as_str()).collect();
        ensure!(names == ["admin", "alice"], "{names:?}");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ldap_sync_creates_refuses_local_names_disables_and_enables_again() -> anyhow::Result<()> {
    let slapd = Slapd::start().await?;
    run_on(Backend::SqliteLocal, options(&slapd, "0"), |gw| async move {
        // A local account `dave` exists before the directory gets a `dave`.
        let (_, dave_local) = gw.user("dave", None).await?;
        slapd.add_person("dave").await?;
        slapd.add_person("erin").await?;

        let out = ldap_sync(&gw).await?;
        for user in ["alice", "bob", "carol", "erin"] {
            line_about(&out, "created", user)?;
        }
        let refused = line_about(&out, "refused", "dave")?;
        ensure!(refused.contains("local account"), "{refused}");
        ensure!(
            out.lines()
                .last()
                .is_some_and(|l| l.starts_with("ldap-sync: 5 users in the directory; 4 created, 0 updated")
                    && l.contains("1 refused")),
            "summary:\n{out}"
        );
        // alice is an admin from the group.
        ensure!(line_about(&out, "created", "alice")?.contains("role admin"), "{out}");

        // The clash was not merged: dave is still the local account, with the local password only.
        dave_local.get("/api/v1/me").await?.check(200)?;
        login(&gw, "dave", &nimbus_e2e::gateway::user_password("dave")).await?;
        gw.api().login("dave", &ldap::password("dave")).await?.check_error(401, "unauthorized")?;
        let me: Me = dave_local.get("/api/v1/me").await?.ok(200)?;
        ensure!(me.source.as_str() == "local", "{me:?}");

        // erin, created by the sync, signs in with her directory password.
        login(&gw, "erin", &ldap::password("erin")).await?;
        // A second sync has nothing to do but refuse dave again.
        let out = ldap_sync(&gw).await?;
        ensure!(
            out.lines().count() == 2 && out.contains("0 created, 0 updated, 0 disabled, 0 enabled, 1 refused"),
            "{out}"
        );

        // carol leaves the directory: disabled, her token refused, her space kept.
        let carol = login(&gw, "carol", &ldap::password("carol")).await?;
        slapd.delete(&ldap::user_dn("carol")).await?;
        let out = ldap_sync(&gw).await?;
        ensure!(line_about(&out, "disabled", "carol")?.contains("no longer found"), "{out}");
        gw.api().with_token(&carol.token).get("/api/v1/me").await?.check_error(401, "unauthorized")?;
        gw.api().login("carol", &ldap::password("carol")).await?.check_error(401, "unauthorized")?;

        // bob is locked in the directory (ppolicy's pwdAccountLockedTime): disabled too.
        slapd
            .modify(&format!(
                "dn: {}\nchangetype: modify\nreplace: pwdAccountLockedTime\npwdAccountLockedTime: 000001010000Z\n",
                ldap::user_dn("bob")
            ))
            .await?;
        let out = ldap_sync(&gw).await?;
        ensure!(line_about(&out, "disabled", "bob")?.contains("disabled in the directory"), "{out}");
        gw.api().login("bob", &ldap::password("bob")).await?.check_error(401, "unauthorized")?;

        // Both come back: enabled again, by the sync that disabled them.
        slapd.add_person("carol").await?;
        slapd
            .modify(&format!("dn: {}\nchangetype: modify\ndelete: pwdAccountLockedTime\n", ldap::user_dn("bob")))
            .await?;
        let out = ldap_sync(&gw).await?;
        line_about(&out, "enabled", "carol")?;
        line_about(&out, "enabled", "bob")?;
        login(&gw, "carol", &ldap::password("carol")).await?;
        login(&gw, "bob", &ldap::password("bob")).await?;

        // Every change is in the audit log, by ldap-sync.
        let audit = gw.admin().await?.get("/api/v1/admin/audit?user=ldap-sync&target=carol").await?.value()?;
        let details: Vec<&str> =
            audit["entries"].as_array().context("entries")?.iter().filter_map(|e| e["detail"].as_str()).collect();
        ensure!(details.len() == 3, "create, disable, enable of carol: {details:?}");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_that_is_down_stops_only_directory_sign_ins() -> anyhow::Result<()> {
    let slapd = Slapd::start().await?;
    run_on(Backend::SqliteLocal, options(&slapd, "0"), |gw| async move {
        let bob = login(&gw, "bob", &ldap::password("bob")).await?;
        slapd.stop().await;

        let e = gw.api().login("bob", &ldap::password("bob")).await?.check_error(503, "directory_unavailable")?;
        ensure!(e.message.contains("directory"), "{e:?}");
        // Existing tokens keep working, local accounts keep signing in.
        gw.api().with_token(&bob.token).get("/api/v1/me").await?.check(200)?;
        login(&gw, "admin", ADMIN_PASSWORD).await?;
        // ldap-sync says so and changes nothing.
        let out = gw.tool("ldap-sync").output().await?;
        ensure!(!out.status.success(), "ldap-sync with the directory down succeeded");
        ensure!(String::from_utf8_lossy(&out.stderr).contains("directory is unavailable"), "{out:?}");

        slapd.start_again().await?;
        login(&gw, "bob", &ldap::password("bob")).await?;
        Ok(())
    })
    .await
}

/// The gateway's own sync (every `--ldap-sync-interval`) disables a user who left the directory,
/// and a token that was just working stops at once (every gateway: the revocation goes
/// through the same invalidation as an administrator's).
async fn removed_user_loses_access(backend: Backend) -> anyhow::Result<()> {
    let slapd = Slapd::start().await?;
    run_on(backend, options(&slapd, "1s"), |gw| async move {
        let carol = login(&gw, "carol", &ldap::password("carol")).await?;
        let api = gw.api().with_token(&carol.token);
        api.put_file("/notes.txt", "kept").await?.check(201)?;
        api.get("/api/v1/me").await?.check(200)?;
        slapd.delete(&ldap::user_dn("carol")).await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = api.get("/api/v1/me").await?;
            if r.status == 401 {
                r.check_error(401, "unauthorized")?;
                break;
            }
            r.check(200)?;
            ensure!(Instant::now() < deadline, "carol's token still works 60 s after she left the directory");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        gw.api().login("carol", &ldap::password("carol")).await?.check_error(401, "unauthorized")?;
        // Disabled, not deleted: the administrator still sees her and her space.
        let admin = gw.admin().await?;
        let users = admin.get("/api/v1/admin/users?q=carol").await?.value()?;
        ensure!(users["users"][0]["disabled"] == true && users["users"][0]["used_bytes"] == 4, "{users}");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_user_loses_access_sqlite_local() -> anyhow::Result<()> {
    removed_user_loses_access(Backend::SqliteLocal).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_user_loses_access_postgres_s3() -> anyhow::Result<()> {
    removed_user_loses_access(Backend::PostgresS3).await
}

/// The flags of the worked example with `--ldap-url` replaced.
fn options_at(slapd: &Slapd, url: &str) -> GatewayOptions {
    let mut opts = GatewayOptions::default().arg("--ldap-sync-interval").arg("0");
    let mut args = slapd.gateway_args();
    if let Some(i) = args.iter().position(|a| a == "--ldap-url") {
        args[i + 1] = url.to_string();
    }
    for a in args {
        opts = opts.arg(a);
    }
    opts
}

/// A directory whose certificate the gateway does not trust: a 503 that says so (and what to
/// fix), never a fallback to a plain connection.
async fn untrusted(gw: &Gateway) -> anyhow::Result<()> {
    let e = gw.api().login("alice", &ldap::password("alice")).await?.check_error(503, "directory_unavailable")?;
    ensure!(e.message.contains("TLS certificate") && e.message.contains("--ldap-ca-file"), "{e:?}");
    // Local accounts are not affected.
    login(gw, "admin", ADMIN_PASSWORD).await?;
    Ok(())
}

/// StartTLS and ldaps:// with `--ldap-ca-file`: the password travels inside TLS; a directory
/// certificate the gateway does not trust (another CA, or the system's roots) is a clear 503,
/// never a plain fallback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starttls_and_ldaps_with_the_directorys_ca() -> anyhow::Result<()> {
    let slapd = Slapd::start().await?;
    let s = &slapd;
    let ca = slapd.ca_file().display().to_string();
    let other_ca = slapd.other_ca_file()?.display().to_string();

    let opts = options(&slapd, "0").arg("--ldap-starttls").arg("--ldap-ca-file").arg(&ca);
    run_on(Backend::SqliteLocal, opts, |gw| async move {
        login(&gw, "alice", &ldap::password("alice")).await?;
        let log = std::fs::read_to_string(s.log_path())?;
        ensure!(log.contains("oid=1.3.6.1.4.1.1466.20037"), "slapd saw no StartTLS:\n{}", s.log_tail(20));
        Ok(())
    })
    .await?;

    // ldaps://: TLS from the first byte, on slapd's second port.
    let opts = options_at(&slapd, &slapd.ldaps_url()).arg("--ldap-ca-file").arg(&ca);
    run_on(Backend::SqliteLocal, opts, |gw| async move {
        let bob = login(&gw, "bob", &ldap::password("bob")).await?;
        ensure!(bob.user.username == "bob", "{:?}", bob.user);
        gw.api().login("bob", "wrong-password").await?.check_error(401, "unauthorized")?;
        // The sync goes over ldaps too.
        let out = ldap_sync(&gw).await?;
        line_about(&out, "created", "alice")?;
        Ok(())
    })
    .await?;

    // Another CA: refused over ldaps and over StartTLS.
    let opts = options_at(&slapd, &slapd.ldaps_url()).arg("--ldap-ca-file").arg(&other_ca);
    run_on(Backend::SqliteLocal, opts, |gw| async move {
        untrusted(&gw).await?;
        let out = gw.tool("ldap-sync").output().await?;
        ensure!(!out.status.success(), "ldap-sync trusted a certificate of another CA");
        ensure!(String::from_utf8_lossy(&out.stderr).contains("TLS"), "{out:?}");
        Ok(())
    })
    .await?;
    let opts = options(&slapd, "0").arg("--ldap-starttls").arg("--ldap-ca-file").arg(&other_ca);
    run_on(Backend::SqliteLocal, opts, |gw| async move { untrusted(&gw).await }).await?;
    // The system's roots do not include the test CA.
    let opts = options(&slapd, "0").arg("--ldap-starttls");
    run_on(Backend::SqliteLocal, opts, |gw| async move { untrusted(&gw).await }).await
}
