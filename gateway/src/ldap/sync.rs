//! The directory sync: run every `--ldap-sync-interval` by the gateway and once by
//! `nimbus-gateway ldap-sync`. It creates the accounts the directory's filter finds, keeps
//! their role in step with the admin group, disables (and so revokes every token of) the
//! accounts that left the filter or are disabled in the directory, and enables again the ones
//! it disabled that are back. It never deletes a user or a space, and never touches an account
//! that is not from the directory: a directory name that is already a local account is refused.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use nimbus_proto::names::{name_key, validate_username};
use serde::Serialize;

use super::{DirError, DirUser, Directory, DynDirectory, SOURCE, SYNC_ACTOR, UNUSABLE_PASSWORD_HASH};
use crate::meta::{Meta, MetaError, MetaResult, NewAudit, UserRow, UserUpdate};

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Directory(#[from] DirError),
    #[error("database: {0}")]
    Meta(#[from] MetaError),
    /// A filter or base that finds nobody is far likelier a mistake than an empty company.
    #[error(
        "the directory's user filter found nobody, so the {0} directory account(s) were left as they are \
         (check --ldap-user-base, --ldap-user-filter and --ldap-user-group)"
    )]
    FoundNobody(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Created,
    Updated,
    Disabled,
    Enabled,
    Refused,
}

impl Action {
    fn word(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Updated => "updated",
            Action::Disabled => "disabled",
            Action::Enabled => "enabled",
            Action::Refused => "refused",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SyncChange {
    pub action: Action,
    pub username: String,
    pub detail: String,
}

#[derive(Debug, Default, Serialize)]
pub struct SyncReport {
    /// Users the filter found in the directory.
    pub directory_users: usize,
    pub dry_run: bool,
    pub changes: Vec<SyncChange>,
}

impl SyncReport {
    fn push(&mut self, action: Action, username: &str, detail: impl Into<String>) {
        self.changes.push(SyncChange { action, username: username.to_string(), detail: detail.into() });
    }

    pub fn count(&self, action: Action) -> usize {
        self.changes.iter().filter(|c| c.action == action).count()
    }
}

/// The lines `ldap-sync` prints: one per change, then a summary.
pub fn human(r: &SyncReport) -> String {
    let mut out = String::new();
    for c in &r.changes {
        out.push_str(&format!("{:<9} {}: {}\n", c.action.word(), c.username, c.detail));
    }
    out.push_str(&format!(
        "ldap-sync: {} users in the directory; {} created, {} updated, {} disabled, {} enabled, {} refused{}",
        r.directory_users,
        r.count(Action::Created),
        r.count(Action::Updated),
        r.count(Action::Disabled),
        r.count(Action::Enabled),
        r.count(Action::Refused),
        if r.dry_run { " (dry run: nothing was changed)" } else { "" }
    ));
    out
}

#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    /// The quota of created accounts (`--default-quota-bytes`).
    pub default_quota: Option<u64>,
    /// Report what would change, change nothing.
    pub dry_run: bool,
}

fn role_of(d: &DirUser) -> &'static str {
    if d.admin { "admin" } else { "user" }
}

async fn audit(meta: &Meta, action: &str, target: &str, detail: String) -> MetaResult<()> {
    meta.audit(NewAudit {
        actor_id: None,
        actor: Some(SYNC_ACTOR.into()),
        action: action.into(),
        target: Some(target.into()),
        detail: Some(detail),
        ip: None,
    })
    .await
}

fn db_quota(q: Option<u64>) -> Option<i64> {
    q.map(|q| i64::try_from(q).unwrap_or(i64::MAX))
}

fn quota_text(q: Option<i64>) -> String {
    q.map_or("unlimited".to_string(), |b| nimbus_proto::size::format_size(b.max(0).unsigned_abs()))
}

/// Creates the account of a directory user (no password of theirs is stored), with its
/// e-mail, display name and quota from the directory (else `--ldap-default-quota`, else
/// `default_quota`).
pub async fn create(meta: &Meta, dir: &dyn Directory, d: &DirUser, default_quota: Option<u64>) -> MetaResult<UserRow> {
    let quota = db_quota(d.quota.or(dir.default_quota()).unwrap_or(default_quota));
    let role = role_of(d);
    match meta.create_user_from(&d.username, UNUSABLE_PASSWORD_HASH, role, quota, SOURCE).await {
        Ok(mut row) => {
            if d.email.is_some() || d.display_name.is_some() {
                let upd = UserUpdate {
                    email: Some(d.email.clone()),
                    display_name: Some(d.display_name.clone()),
                    ..Default::default()
                };
                row = meta.update_user(row.id, &upd).await?;
            }
            audit(
                meta,
                "user_create",
                &row.username,
                format!("from the directory ({}), role {role}, quota {}", d.dn, quota_text(quota)),
            )
            .await?;
            Ok(row)
        }
        // Another gateway's sync (or sign-in) made it meanwhile.
        Err(MetaError::AlreadyExists(m)) => match meta.user_by_name(&d.username).await? {
            Some(row) if row.source == SOURCE => Ok(row),
            _ => Err(MetaError::AlreadyExists(m)),
        },
        Err(e) => Err(e),
    }
}

/// What the directory says of an account that differs from its row: the update and its words
/// (`role admin`, `e-mail a@example.org`, ...). The role only when the directory manages roles,
/// the quota only when the entry has a quota attribute.
fn changes(dir: &dyn Directory, row: &UserRow, d: &DirUser) -> (UserUpdate, Vec<String>) {
    let mut upd = UserUpdate::default();
    let mut words = Vec::new();
    let role = role_of(d);
    if dir.manages_roles() && row.role != role {
        upd.role = Some(role.into());
        words.push(format!("role {role}"));
    }
    if row.email != d.email {
        words.push(format!("e-mail {}", d.email.as_deref().unwrap_or("(none)")));
        upd.email = Some(d.email.clone());
    }
    if row.display_name != d.display_name {
        words.push(format!("display name {}", d.display_name.as_deref().unwrap_or("(none)")));
        upd.display_name = Some(d.display_name.clone());
    }
    if let Some(q) = d.quota.map(db_quota)
        && row.quota_bytes != q
    {
        words.push(format!("quota {}", quota_text(q)));
        upd.quota_bytes = Some(q);
    }
    (upd, words)
}

/// Brings a directory account in step with its entry: the role from the admin group (when the
/// directory manages roles), e-mail, display name, and the quota from `--ldap-quota-attr`.
pub async fn apply(meta: &Meta, dir: &dyn Directory, row: UserRow, d: &DirUser) -> MetaResult<UserRow> {
    let (upd, words) = changes(dir, &row, d);
    if words.is_empty() {
        return Ok(row);
    }
    let row = meta.update_user(row.id, &upd).await?;
    audit(meta, "user_update", &row.username, format!("from the directory: {}", words.join(", "))).await?;
    Ok(row)
}

async fn set_disabled(meta: &Meta, row: &UserRow, disabled: bool, why: &str) -> MetaResult<()> {
    // Disabling revokes every token of the user in the same transaction (Meta::update_user).
    meta.update_user(row.id, &UserUpdate { disabled: Some(disabled), ..Default::default() }).await?;
    let word = if disabled { "disabled" } else { "enabled" };
    audit(meta, "user_update", &row.username, format!("{word}: {why}")).await
}

/// One sync of the directory into the users table.
pub async fn run(meta: &Meta, dir: &dyn Directory, opts: &SyncOptions) -> Result<SyncReport, SyncError> {
    let found = dir.users().await?;
    let rows = meta.users_from(SOURCE).await?;
    let mut report = SyncReport { directory_users: found.len(), dry_run: opts.dry_run, changes: Vec::new() };
    let enabled_rows = rows.iter().filter(|r| !r.disabled).count();
    if found.is_empty() && enabled_rows > 0 {
        return Err(SyncError::FoundNobody(enabled_rows));
    }
    let by_key: HashMap<String, &UserRow> = rows.iter().map(|r| (name_key(&r.username), r)).collect();
    let mut entries: HashMap<String, usize> = HashMap::new();
    for d in &found {
        *entries.entry(name_key(&d.username)).or_default() += 1;
    }
    // Accounts the directory still vouches for (or that it names ambiguously: left alone).
    let mut keep: HashSet<String> = HashSet::new();
    let write = !opts.dry_run;
    for d in &found {
        let key = name_key(&d.username);
        if let Err(why) = validate_username(&d.username) {
            report.push(Action::Refused, &d.username, format!("not usable as a Nimbus username ({why}); {}", d.dn));
            continue;
        }
        if entries.get(&key).copied().unwrap_or(0) > 1 {
            keep.insert(key);
            report.push(Action::Refused, &d.username, format!("several directory entries have this name ({})", d.dn));
            continue;
        }
        if !d.allowed {
            continue;
        }
        keep.insert(key.clone());
        match by_key.get(&key) {
            Some(row) => {
                if d.disabled && !row.disabled {
                    if write {
                        set_disabled(meta, row, true, "disabled in the directory; tokens revoked").await?;
                    }
                    report.push(Action::Disabled, &row.username, "disabled in the directory; tokens revoked");
                } else if !d.disabled && row.disabled {
                    // Only what the sync disabled comes back: an administrator's decision stays.
                    if meta.last_enablement_actor(&row.username).await?.as_deref() == Some(SYNC_ACTOR) {
                        if write {
                            set_disabled(meta, row, false, "back in the directory").await?;
                        }
                        report.push(Action::Enabled, &row.username, "back in the directory");
                    }
                }
                let (_, words) = changes(dir, row, d);
                if !words.is_empty() {
                    if write {
                        apply(meta, dir, (*row).clone(), d).await?;
                    }
                    report.push(Action::Updated, &row.username, words.join(", "));
                }
            }
            None if d.disabled => {}
            None => match meta.user_by_name(&d.username).await? {
                Some(other) => report.push(
                    Action::Refused,
                    &d.username,
                    format!(
                        "a {} account already has this name; the directory's {} is not used (rename or remove one \
                         of them; accounts are never merged)",
                        other.source, d.dn
                    ),
                ),
                None => {
                    if write {
                        create(meta, dir, d, opts.default_quota).await?;
                    }
                    report.push(Action::Created, &d.username, format!("role {} ({})", role_of(d), d.dn));
                }
            },
        }
    }
    for row in rows.iter().filter(|r| !r.disabled && !keep.contains(&name_key(&r.username))) {
        let why = "no longer found by the directory's user filter; tokens revoked";
        if write {
            set_disabled(meta, row, true, why).await?;
        }
        report.push(Action::Disabled, &row.username, why);
    }
    Ok(report)
}

/// Runs the sync now and then every `interval` (nothing when it is zero), until the runtime
/// stops. Several gateways may all run it: each step is idempotent.
pub fn spawn(meta: Meta, dir: DynDirectory, opts: SyncOptions, interval: Duration) {
    if interval.is_zero() {
        tracing::info!("LDAP sync off (--ldap-sync-interval 0): run `nimbus-gateway ldap-sync` on a schedule");
        return;
    }
    tokio::spawn(async move {
        loop {
            match run(&meta, dir.as_ref(), &opts).await {
                Ok(r) => {
                    for c in &r.changes {
                        if c.action == Action::Refused {
                            tracing::warn!(user = %c.username, "LDAP sync refused: {}", c.detail);
                        } else {
                            tracing::info!(user = %c.username, "LDAP sync {}: {}", c.action.word(), c.detail);
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "LDAP sync failed; retrying next interval"),
            }
            tokio::time::sleep(interval).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::ldap::Verdict;

    /// A directory in memory: users and their passwords.
    #[derive(Default)]
    struct Fake {
        users: Mutex<Vec<(DirUser, String)>>,
        down: Mutex<bool>,
        roles: bool,
        default_quota: Option<Option<u64>>,
    }

    impl Fake {
        fn put(&self, name: &str, admin: bool) {
            let mut users = self.users.lock().expect("lock");
            users.retain(|(u, _)| u.username != name);
            users.push((
                DirUser {
                    dn: format!("uid={name},ou=people,dc=example,dc=org"),
                    username: name.into(),
                    admin,
                    allowed: true,
                    disabled: false,
                    email: None,
                    display_name: None,
                    quota: None,
                },
                format!("{name}-password"),
            ));
        }

        fn edit(&self, name: &str, f: impl FnOnce(&mut DirUser)) {
            let mut users = self.users.lock().expect("lock");
            if let Some((u, _)) = users.iter_mut().find(|(u, _)| u.username == name) {
                f(u);
            }
        }

        fn remove(&self, name: &str) {
            self.users.lock().expect("lock").retain(|(u, _)| u.username != name);
        }
    }

    #[async_trait::async_trait]
    impl Directory for Fake {
        async fn users(&self) -> Result<Vec<DirUser>, DirError> {
            if *self.down.lock().expect("lock") {
                return Err(DirError::Unavailable("down".into()));
            }
            Ok(self.users.lock().expect("lock").iter().map(|(u, _)| u.clone()).collect())
        }

        async fn authenticate(&self, username: &str, password: &str) -> Result<Verdict, DirError> {
            if *self.down.lock().expect("lock") {
                return Err(DirError::Unavailable("down".into()));
            }
            let users = self.users.lock().expect("lock");
            Ok(match users.iter().find(|(u, _)| u.username == username) {
                Some((u, p)) if p == password => Verdict::Accepted(u.clone()),
                _ => Verdict::Refused,
            })
        }

        fn manages_roles(&self) -> bool {
            self.roles
        }

        fn default_quota(&self) -> Option<Option<u64>> {
            self.default_quota
        }
    }

    async fn meta() -> (tempfile::TempDir, Meta) {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let meta = Meta::connect(&url).await.expect("connect");
        (dir, meta)
    }

    fn actions(r: &SyncReport) -> Vec<(Action, String)> {
        r.changes.iter().map(|c| (c.action, c.username.clone())).collect()
    }

    async fn get(meta: &Meta, name: &str) -> UserRow {
        meta.user_by_name(name).await.expect("query").expect("user exists")
    }

    #[tokio::test]
    async fn creates_updates_disables_and_enables_again() {
        let (_d, meta) = meta().await;
        let dir = Fake { roles: true, ..Default::default() };
        dir.put("alice", false);
        dir.put("carol", true);
        let opts = SyncOptions { default_quota: Some(1000), dry_run: false };

        let r = run(&meta, &dir, &opts).await.expect("sync");
        assert_eq!(actions(&r), [(Action::Created, "alice".into()), (Action::Created, "carol".into())]);
        let alice = get(&meta, "alice").await;
        assert_eq!((alice.source.as_str(), alice.role.as_str(), alice.quota_bytes), ("ldap", "user", Some(1000)));
        assert_eq!(alice.password_hash, UNUSABLE_PASSWORD_HASH);
        assert!(!crate::auth::verify_password("alice-password", &alice.password_hash));
        assert_eq!(get(&meta, "carol").await.role, "admin");

        // Nothing changed: nothing to do.
        assert!(run(&meta, &dir, &opts).await.expect("sync").changes.is_empty());

        // Into the admin group, out of the filter.
        dir.edit("alice", |u| u.admin = true);
        meta.insert_token(get(&meta, "carol").await.id, "h1", "laptop", i64::MAX, None).await.expect("token");
        dir.remove("carol");
        let r = run(&meta, &dir, &opts).await.expect("sync");
        assert_eq!(actions(&r), [(Action::Updated, "alice".into()), (Action::Disabled, "carol".into())]);
        assert_eq!(get(&meta, "alice").await.role, "admin");
        let carol = get(&meta, "carol").await;
        assert!(carol.disabled);
        assert!(meta.list_tokens(carol.id).await.expect("tokens").is_empty(), "tokens revoked");
        // The space stays.
        assert!(meta.user(carol.id).await.expect("query").is_some());

        // Back: enabled again.
        dir.put("carol", false);
        let r = run(&meta, &dir, &opts).await.expect("sync");
        assert_eq!(actions(&r), [(Action::Enabled, "carol".into()), (Action::Updated, "carol".into())]);
        let carol = get(&meta, "carol").await;
        assert!(!carol.disabled);
        assert_eq!(carol.role, "user");

        // Disabled in the directory.
        dir.edit("alice", |u| u.disabled = true);
        let r = run(&meta, &dir, &opts).await.expect("sync");
        assert_eq!(actions(&r), [(Action::Disabled, "alice".into())]);
        assert!(get(&meta, "alice").await.disabled);

        let audit = meta
            .list_audit(&crate::meta::AuditFilter { actor: Some(SYNC_ACTOR.into()), limit: 100, ..Default::default() })
            .await
            .expect("audit");
        assert_eq!(audit.len(), 7, "one entry per change: {audit:?}");
    }

    #[tokio::test]
    async fn email_display_name_and_quota_follow_the_directory() {
        let (_d, meta) = meta().await;
        let dir = Fake { default_quota: Some(Some(5000)), ..Default::default() };
        dir.put("hal", false);
        dir.edit("hal", |u| {
            u.email = Some("hal@example.org".into());
            u.display_name = Some("Hal Nine".into());
        });
        dir.put("ida", false);
        dir.edit("ida", |u| u.quota = Some(Some(7000)));
        let opts = SyncOptions { default_quota: Some(1000), dry_run: false };
        let r = run(&meta, &dir, &opts).await.expect("sync");
        assert_eq!(actions(&r), [(Action::Created, "hal".into()), (Action::Created, "ida".into())]);
        let hal = get(&meta, "hal").await;
        assert_eq!(hal.email.as_deref(), Some("hal@example.org"));
        assert_eq!(hal.display_name.as_deref(), Some("Hal Nine"));
        // --ldap-default-quota before the gateway's default; the entry's own before both.
        assert_eq!(hal.quota_bytes, Some(5000));
        let ida = get(&meta, "ida").await;
        assert_eq!((ida.email.as_deref(), ida.display_name.as_deref(), ida.quota_bytes), (None, None, Some(7000)));
        assert!(run(&meta, &dir, &opts).await.expect("sync").changes.is_empty());

        // An administrator's quota stays where the entry has none; the entry's wins where it has one.
        for u in [&hal, &ida] {
            meta.update_user(u.id, &UserUpdate { quota_bytes: Some(Some(9)), ..Default::default() })
                .await
                .expect("upd");
        }
        dir.edit("hal", |u| {
            u.email = None;
            u.display_name = Some("Hal 9000".into());
        });
        let r = run(&meta, &dir, &opts).await.expect("sync");
        assert_eq!(actions(&r), [(Action::Updated, "hal".into()), (Action::Updated, "ida".into())]);
        assert_eq!(r.changes[0].detail, "e-mail (none), display name Hal 9000");
        assert!(r.changes[1].detail.starts_with("quota "), "{:?}", r.changes[1]);
        let hal = get(&meta, "hal").await;
        assert_eq!(
            (hal.email.as_deref(), hal.display_name.as_deref(), hal.quota_bytes),
            (None, Some("Hal 9000"), Some(9))
        );
        assert_eq!(get(&meta, "ida").await.quota_bytes, Some(7000));

        // `none` in the directory: no quota.
        dir.edit("ida", |u| u.quota = Some(None));
        let r = run(&meta, &dir, &opts).await.expect("sync");
        assert_eq!(r.changes[0].detail, "quota unlimited");
        assert_eq!(get(&meta, "ida").await.quota_bytes, None);
    }

    #[tokio::test]
    async fn an_administrators_disabling_stays_and_local_names_are_refused() {
        let (_d, meta) = meta().await;
        let dir = Fake::default();
        meta.create_user("bob", "$argon2id$local", "user", None).await.expect("local bob");
        dir.put("bob", false);
        dir.put("dave", false);
        let opts = SyncOptions::default();
        let r = run(&meta, &dir, &opts).await.expect("sync");
        assert_eq!(actions(&r), [(Action::Refused, "bob".into()), (Action::Created, "dave".into())]);
        assert!(r.changes[0].detail.contains("local account"), "{:?}", r.changes[0]);
        let bob = get(&meta, "bob").await;
        assert_eq!((bob.source.as_str(), bob.password_hash.as_str()), ("local", "$argon2id$local"));

        // An administrator disables dave: the sync does not undo it.
        let dave = get(&meta, "dave").await;
        meta.update_user(dave.id, &UserUpdate { disabled: Some(true), ..Default::default() }).await.expect("upd");
        meta.audit(NewAudit {
            actor: Some("admin".into()),
            action: "user_update".into(),
            target: Some("dave".into()),
            detail: Some("disabled".into()),
            ..Default::default()
        })
        .await
        .expect("audit");
        let r = run(&meta, &dir, &opts).await.expect("sync");
        assert_eq!(actions(&r), [(Action::Refused, "bob".into())]);
        assert!(get(&meta, "dave").await.disabled);
        // Roles are the administrators' when no admin group is configured.
        dir.edit("dave", |u| u.admin = true);
        assert_eq!(actions(&run(&meta, &dir, &opts).await.expect("sync")), [(Action::Refused, "bob".into())]);
    }

    #[tokio::test]
    async fn refuses_bad_names_and_duplicates_and_an_empty_answer() {
        let (_d, meta) = meta().await;
        let dir = Fake::default();
        dir.put("erin", false);
        dir.put("x*y", false);
        let opts = SyncOptions::default();
        let r = run(&meta, &dir, &opts).await.expect("sync");
        assert_eq!(actions(&r), [(Action::Created, "erin".into()), (Action::Refused, "x*y".into())]);

        // Two entries whose names differ only in case: neither is used, erin stays enabled.
        dir.users.lock().expect("lock").push((
            DirUser {
                dn: "uid=ERIN,ou=other,dc=example,dc=org".into(),
                username: "ERIN".into(),
                admin: true,
                allowed: true,
                disabled: false,
                email: None,
                display_name: None,
                quota: None,
            },
            "x".into(),
        ));
        let r = run(&meta, &dir, &opts).await.expect("sync");
        assert_eq!(r.count(Action::Refused), 3, "{r:?}");
        assert!(!get(&meta, "erin").await.disabled);

        // A directory that finds nobody: an error, nobody disabled.
        dir.users.lock().expect("lock").clear();
        assert!(matches!(run(&meta, &dir, &opts).await, Err(SyncError::FoundNobody(1))));
        assert!(!get(&meta, "erin").await.disabled);
        // Down: an error, nothing changes.
        *dir.down.lock().expect("lock") = true;
        assert!(matches!(run(&meta, &dir, &opts).await, Err(SyncError::Directory(_))));
        assert!(!get(&meta, "erin").await.disabled);
    }

    #[tokio::test]
    async fn a_dry_run_changes_nothing_and_users_outside_the_user_group_are_not_created() {
        let (_d, meta) = meta().await;
        let dir = Fake::default();
        dir.put("fay", false);
        dir.put("gus", false);
        dir.edit("gus", |u| u.allowed = false);
        let r = run(&meta, &dir, &SyncOptions { dry_run: true, ..Default::default() }).await.expect("sync");
        assert_eq!(actions(&r), [(Action::Created, "fay".into())]);
        assert!(
            human(&r)
                .ends_with("1 created, 0 updated, 0 disabled, 0 enabled, 0 refused (dry run: nothing was changed)")
        );
        assert!(meta.user_by_name("fay").await.expect("query").is_none());
    }
}
