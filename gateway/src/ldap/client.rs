//! [`Directory`] over LDAP with ldap3: a service bind to search, a bind as the user to check a
//! password. Each operation opens its own connection (sign-ins are rare next to file traffic,
//! and a fresh connection never carries another user's bind).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use ldap3::adapters::{Adapter, EntriesOnly, PagedResults};
use ldap3::{Ldap, LdapConnAsync, LdapConnSettings, Scope, SearchEntry, ldap_escape};
use rustls::ClientConfig;

use super::{DirError, DirUser, Directory, Verdict};
use crate::config::LdapArgs;

/// `invalidCredentials` (RFC 4511): wrong password, or (Active Directory) a disabled, locked or
/// expired account.
const INVALID_CREDENTIALS: u32 = 49;
/// Active Directory's userAccountControl bit for a disabled account (ACCOUNTDISABLE).
const AD_ACCOUNT_DISABLE: u64 = 0x2;
/// Entries per page of the sync's search (Active Directory answers at most 1000 without paging).
const PAGE_SIZE: i32 = 500;
const NO_SUCH_OBJECT: u32 = 32;
const SIZE_LIMIT_EXCEEDED: u32 = 4;
/// Nested groups: how deep they are followed, how many are read in all, and how many member
/// DNs one search asks about.
const MAX_NESTING: usize = 8;
const MAX_GROUPS: usize = 1000;
const GROUP_BATCH: usize = 200;

/// What `--ldap-*` configure, checked.
#[derive(Clone)]
pub struct LdapConfig {
    pub url: String,
    pub bind_dn: Option<String>,
    pub bind_password: String,
    pub user_base: String,
    pub user_filter: String,
    pub username_attr: String,
    pub admin_group: Option<String>,
    pub user_group: Option<String>,
    pub disabled_attr: Option<String>,
    pub email_attr: Option<String>,
    pub display_name_attr: Option<String>,
    pub quota_attr: Option<String>,
    /// `--ldap-default-quota` (Some(None): unlimited).
    pub default_quota: Option<Option<u64>>,
    pub starttls: bool,
    pub tls: Arc<ClientConfig>,
    pub timeout: Duration,
}

impl std::fmt::Debug for LdapConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the bind password.
        f.debug_struct("LdapConfig").field("url", &self.url).field("bind_dn", &self.bind_dn).finish_non_exhaustive()
    }
}

impl LdapConfig {
    /// The configuration `args` describe; None when `--ldap-url` is not set.
    pub fn from_args(args: &LdapArgs) -> anyhow::Result<Option<LdapConfig>> {
        let Some(url) = args.ldap_url.clone() else { return Ok(None) };
        let parsed = url::Url::parse(&url).with_context(|| format!("--ldap-url {url} is not a URL"))?;
        let host = parsed.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_string();
        match parsed.scheme() {
            "ldaps" => {
                if args.ldap_starttls {
                    bail!("--ldap-starttls is for ldap:// URLs; ldaps:// is TLS from the start");
                }
            }
            "ldap" => {
                let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback());
                if !args.ldap_starttls && !loopback && !args.ldap_plain {
                    bail!(
                        "--ldap-url {url} would send passwords in clear: use ldaps://, or --ldap-starttls \
                         (or --ldap-plain on a network you trust)"
                    );
                }
            }
            other => bail!("--ldap-url: `{other}://` is not LDAP; use ldaps://HOST or ldap://HOST"),
        }
        let user_base = args.ldap_user_base.clone().context("--ldap-url needs --ldap-user-base")?;
        let bind_password = match (&args.ldap_bind_dn, &args.ldap_bind_password_file) {
            (Some(_), Some(file)) => read_secret(file)?,
            (Some(_), None) => bail!("--ldap-bind-dn needs --ldap-bind-password-file"),
            (None, Some(_)) => bail!("--ldap-bind-password-file needs --ldap-bind-dn"),
            (None, None) => String::new(),
        };
        // A filter ldap3 cannot parse would fail every search; say so at start.
        let probe = format!("(&{}({}=x))", args.ldap_user_filter, args.ldap_username_attr);
        ldap3::parse_filter(&probe).map_err(|_| {
            anyhow::anyhow!(
                "--ldap-user-filter {} / --ldap-username-attr {} do not make a valid LDAP filter",
                args.ldap_user_filter,
                args.ldap_username_attr
            )
        })?;
        Ok(Some(LdapConfig {
            url,
            bind_dn: args.ldap_bind_dn.clone(),
            bind_password,
            user_base,
            user_filter: args.ldap_user_filter.clone(),
            username_attr: args.ldap_username_attr.clone(),
            admin_group: args.ldap_admin_group.clone(),
            user_group: args.ldap_user_group.clone(),
            disabled_attr: Some(args.ldap_disabled_attr.clone()).filter(|a| !a.is_empty()),
            email_attr: Some(args.ldap_email_attr.trim().to_string()).filter(|a| !a.is_empty()),
            display_name_attr: Some(args.ldap_display_name_attr.trim().to_string()).filter(|a| !a.is_empty()),
            quota_attr: args.ldap_quota_attr.as_ref().map(|a| a.trim().to_string()).filter(|a| !a.is_empty()),
            // 0 is unlimited, as for --default-quota-bytes.
            default_quota: args.ldap_default_quota.map(|q| (q > 0).then_some(q)),
            starttls: args.ldap_starttls,
            tls: Arc::new(tls_config(args.ldap_ca_file.as_deref())?),
            timeout: args.ldap_timeout,
        }))
    }
}

fn read_secret(file: &Path) -> anyhow::Result<String> {
    let s = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    // Files written by `echo` end in a newline that is not part of the password.
    Ok(s.trim_end_matches(['\r', '\n']).to_string())
}

/// TLS for ldaps:// and StartTLS: the system's roots, or only the CA in `--ldap-ca-file`.
fn tls_config(ca_file: Option<&Path>) -> anyhow::Result<ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let roots = match ca_file {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(path)
                .with_context(|| format!("cannot read --ldap-ca-file {}", path.display()))?
            {
                let cert = cert.with_context(|| format!("--ldap-ca-file {}: not PEM certificates", path.display()))?;
                roots
                    .add(cert)
                    .with_context(|| format!("--ldap-ca-file {}: a certificate is unusable", path.display()))?;
            }
            if roots.is_empty() {
                bail!("--ldap-ca-file {} holds no certificate", path.display());
            }
            roots
        }
        None => crate::tls_client::native_roots(),
    };
    crate::tls_client::config(roots).context("TLS configuration")
}

pub struct LdapDirectory {
    cfg: LdapConfig,
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> DirError {
    DirError::Unavailable(format!("{what}: {e}"))
}

/// The `member` and `uniqueMember` values of an entry.
fn member_values(e: SearchEntry) -> Vec<String> {
    e.attrs
        .into_iter()
        .filter(|(attr, _)| attr.eq_ignore_ascii_case("member") || attr.eq_ignore_ascii_case("uniqueMember"))
        .flat_map(|(_, values)| values)
        .collect()
}

/// The RDNs two DNs end with alike (compared as [`dn_key`] does), as the first DN spells them:
/// where to look for groups nested in a group. Empty when they share nothing.
fn common_suffix(a: &str, b: &str) -> String {
    let ra: Vec<&str> = a.split(',').collect();
    let rb: Vec<&str> = b.split(',').collect();
    let same = ra.iter().rev().zip(rb.iter().rev()).take_while(|(x, y)| dn_key(x) == dn_key(y)).count();
    ra[ra.len() - same..].iter().map(|r| r.trim()).collect::<Vec<_>>().join(",")
}

/// `(attr=value)` for a DN's first RDN, the value escaped (RFC 4515); None when the RDN is
/// multi-valued, escaped, or not `attr=value` with a plain attribute name.
fn rdn_filter(dn: &str) -> Option<String> {
    let rdn = dn.split(',').next()?.trim();
    if rdn.contains(['+', '\\', '"']) {
        return None;
    }
    let (attr, value) = rdn.split_once('=')?;
    let (attr, value) = (attr.trim(), value.trim());
    let plain = !attr.is_empty() && attr.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    (plain && !value.is_empty()).then(|| format!("({attr}={})", ldap_escape(value)))
}

/// Compares DNs as directories do for our purposes: case and spaces around separators aside.
fn dn_key(dn: &str) -> String {
    dn.split(',')
        .map(|rdn| rdn.split('=').map(str::trim).collect::<Vec<_>>().join("="))
        .collect::<Vec<_>>()
        .join(",")
        .to_lowercase()
}

impl LdapDirectory {
    pub fn new(cfg: LdapConfig) -> Self {
        LdapDirectory { cfg }
    }

    async fn connect(&self) -> Result<Ldap, DirError> {
        let settings = LdapConnSettings::new()
            .set_conn_timeout(self.cfg.timeout)
            .set_starttls(self.cfg.starttls)
            .set_config(self.cfg.tls.clone());
        let (conn, ldap) = LdapConnAsync::with_settings(settings, &self.cfg.url).await.map_err(|e| {
            if is_tls_failure(&e) {
                DirError::Tls(format!("{}: {e}", self.cfg.url))
            } else {
                unavailable(&format!("cannot connect to {}", self.cfg.url), e)
            }
        })?;
        tokio::spawn(async move {
            if let Err(e) = conn.drive().await {
                tracing::debug!(error = %e, "LDAP connection ended");
            }
        });
        Ok(ldap)
    }

    /// A connection bound as the service account (or anonymous without `--ldap-bind-dn`).
    async fn service(&self) -> Result<Ldap, DirError> {
        let mut ldap = self.connect().await?;
        if let Some(dn) = &self.cfg.bind_dn {
            ldap.simple_bind(dn, &self.cfg.bind_password)
                .await
                .map_err(|e| unavailable("service bind", e))?
                .success()
                .map_err(|e| unavailable(&format!("the directory refuses the service account {dn}"), e))?;
        }
        Ok(ldap)
    }

    fn attrs(&self) -> Vec<String> {
        let mut a = vec![self.cfg.username_attr.clone()];
        a.extend(self.cfg.disabled_attr.clone());
        a.extend(self.cfg.email_attr.clone());
        a.extend(self.cfg.display_name_attr.clone());
        a.extend(self.cfg.quota_attr.clone());
        a
    }

    /// The first value of `attr` (if configured), trimmed, when not empty and at most `max`
    /// characters (longer values are not names anyone reads; they are left out).
    fn text(e: &SearchEntry, attr: Option<&str>, max: usize) -> Option<String> {
        let v = Self::value(e, attr?)?.first()?.trim();
        (!v.is_empty() && v.chars().count() <= max && !v.chars().any(char::is_control)).then(|| v.to_string())
    }

    /// The entry's quota attribute: None when it has none or it is not a size.
    fn quota(&self, e: &SearchEntry) -> Option<Option<u64>> {
        let attr = self.cfg.quota_attr.as_ref()?;
        let raw = Self::value(e, attr)?.first()?.trim().to_string();
        parse_quota(&raw).or_else(|| {
            tracing::warn!(dn = %e.dn, attr = %attr, value = %raw, "the LDAP quota attribute is not a size; the quota is left as it is");
            None
        })
    }

    /// The direct member DNs of a group as written (empty if it has none or does not exist).
    async fn direct_members(&self, ldap: &mut Ldap, group: &str) -> Result<Vec<String>, DirError> {
        let res = ldap.search(group, Scope::Base, "(objectClass=*)", vec!["member", "uniqueMember"]).await;
        let (entries, result) = match res {
            Ok(r) => (r.0, r.1),
            Err(e) => return Err(unavailable(&format!("reading the group {group}"), e)),
        };
        // noSuchObject: a group that does not exist has no members.
        if result.rc != 0 && result.rc != NO_SUCH_OBJECT {
            return Err(unavailable(&format!("reading the group {group}"), result));
        }
        if result.rc == NO_SUCH_OBJECT {
            tracing::warn!(group, "the LDAP group does not exist; it has no members");
        }
        Ok(entries.into_iter().flat_map(|e| member_values(SearchEntry::construct(e))).collect())
    }

    /// The members of a group through nested groups (Active Directory and OpenLDAP alike): the
    /// DN keys of every entry that is a member of `group` or of a group inside it, at most
    /// [`MAX_NESTING`] levels deep and [`MAX_GROUPS`] groups in all (cycles end there too).
    /// Each level costs one search per [`GROUP_BATCH`] members, under the part of the DN that
    /// the group and `--ldap-user-base` share (e.g. `dc=example,dc=org`).
    async fn members(&self, ldap: &mut Ldap, group: &str) -> Result<HashSet<String>, DirError> {
        let base = common_suffix(group, &self.cfg.user_base);
        let mut out = HashSet::new();
        let mut groups_seen: HashSet<String> = HashSet::from([dn_key(group)]);
        let mut frontier = self.direct_members(ldap, group).await?;
        for _ in 0..MAX_NESTING {
            let fresh: Vec<String> = frontier.into_iter().filter(|m| out.insert(dn_key(m))).collect();
            if fresh.is_empty() || base.is_empty() {
                break;
            }
            frontier = Vec::new();
            for (dn, members) in self.groups_among(ldap, &base, &fresh).await? {
                if groups_seen.len() >= MAX_GROUPS {
                    tracing::warn!(group, "more than {MAX_GROUPS} nested LDAP groups; the rest are not followed");
                    return Ok(out);
                }
                if groups_seen.insert(dn_key(&dn)) {
                    frontier.extend(members);
                }
            }
        }
        Ok(out)
    }

    /// Which of the DNs `candidates` are groups, with their members: one search per
    /// [`GROUP_BATCH`] of them for group entries named by their first RDN, then only the exact
    /// DNs kept. A DN whose first RDN this cannot express as a filter (multi-valued, escaped
    /// characters) is not followed as a group.
    async fn groups_among(
        &self,
        ldap: &mut Ldap,
        base: &str,
        candidates: &[String],
    ) -> Result<Vec<(String, Vec<String>)>, DirError> {
        let mut out = Vec::new();
        let usable: Vec<(&String, String)> =
            candidates.iter().filter_map(|dn| rdn_filter(dn).map(|f| (dn, f))).collect();
        for chunk in usable.chunks(GROUP_BATCH) {
            let wanted: HashSet<String> = chunk.iter().map(|(dn, _)| dn_key(dn)).collect();
            let filter = format!(
                "(&(|(objectClass=groupOfNames)(objectClass=groupOfUniqueNames)(objectClass=group))(|{}))",
                chunk.iter().map(|(_, f)| f.as_str()).collect::<String>()
            );
            let found = ldap
                .search(base, Scope::Subtree, &filter, vec!["member", "uniqueMember"])
                .await
                .map_err(|e| unavailable("looking for nested groups", e))?;
            let (entries, result) = (found.0, found.1);
            // sizeLimitExceeded still brings entries; noSuchObject: no such base, no groups.
            if result.rc != 0 && result.rc != SIZE_LIMIT_EXCEEDED && result.rc != NO_SUCH_OBJECT {
                return Err(unavailable("looking for nested groups", result));
            }
            for e in entries {
                let e = SearchEntry::construct(e);
                if wanted.contains(&dn_key(&e.dn)) {
                    let dn = e.dn.clone();
                    out.push((dn, member_values(e)));
                }
            }
        }
        Ok(out)
    }

    fn value<'a>(e: &'a SearchEntry, attr: &str) -> Option<&'a Vec<String>> {
        e.attrs.iter().find(|(k, _)| k.eq_ignore_ascii_case(attr)).map(|(_, v)| v)
    }

    fn is_disabled(&self, e: &SearchEntry) -> bool {
        let Some(attr) = &self.cfg.disabled_attr else { return false };
        let Some(values) = Self::value(e, attr) else { return false };
        if attr.eq_ignore_ascii_case("userAccountControl") {
            values.iter().any(|v| v.trim().parse::<u64>().is_ok_and(|n| n & AD_ACCOUNT_DISABLE != 0))
        } else {
            // e.g. OpenLDAP's pwdAccountLockedTime: present means locked.
            !values.is_empty()
        }
    }

    /// The DirUsers of search entries, with their group memberships.
    async fn users_of(&self, ldap: &mut Ldap, entries: Vec<SearchEntry>) -> Result<Vec<DirUser>, DirError> {
        let admins = match &self.cfg.admin_group {
            Some(g) => self.members(ldap, g).await?,
            None => HashSet::new(),
        };
        let allowed = match &self.cfg.user_group {
            Some(g) => Some(self.members(ldap, g).await?),
            None => None,
        };
        let mut out = Vec::new();
        for e in entries {
            let Some(username) = Self::value(&e, &self.cfg.username_attr).and_then(|v| v.first()).cloned() else {
                continue;
            };
            let key = dn_key(&e.dn);
            let admin = admins.contains(&key);
            out.push(DirUser {
                username,
                admin,
                allowed: admin || allowed.as_ref().is_none_or(|a| a.contains(&key)),
                disabled: self.is_disabled(&e),
                email: Self::text(&e, self.cfg.email_attr.as_deref(), 320),
                display_name: Self::text(&e, self.cfg.display_name_attr.as_deref(), 256),
                quota: self.quota(&e),
                dn: e.dn,
            });
        }
        Ok(out)
    }

    async fn all_users(&self) -> Result<Vec<DirUser>, DirError> {
        let mut ldap = self.service().await?;
        let adapters: Vec<Box<dyn Adapter<'_, String, Vec<String>>>> =
            vec![Box::new(EntriesOnly::new()), Box::new(PagedResults::new(PAGE_SIZE))];
        let mut stream = ldap
            .streaming_search_with(adapters, &self.cfg.user_base, Scope::Subtree, &self.cfg.user_filter, self.attrs())
            .await
            .map_err(|e| unavailable("searching the users", e))?;
        let mut entries = Vec::new();
        loop {
            match stream.next().await {
                Ok(Some(e)) => entries.push(SearchEntry::construct(e)),
                Ok(None) => break,
                Err(e) => return Err(unavailable("searching the users", e)),
            }
        }
        stream.finish().await.success().map_err(|e| unavailable("searching the users", e))?;
        let users = self.users_of(&mut ldap, entries).await;
        let _ = ldap.unbind().await;
        users
    }

    async fn check(&self, username: &str, password: &str) -> Result<Verdict, DirError> {
        let mut ldap = self.service().await?;
        // RFC 4515 escaping: `*`, `(`, `)`, `\` and NUL in a name match only themselves.
        let filter = format!("(&{}({}={}))", self.cfg.user_filter, self.cfg.username_attr, ldap_escape(username));
        let (entries, result) = ldap
            .search(&self.cfg.user_base, Scope::Subtree, &filter, self.attrs())
            .await
            .map_err(|e| unavailable("looking the user up", e))?
            .success()
            .map_err(|e| unavailable("looking the user up", e))?;
        let _ = result;
        let entries: Vec<SearchEntry> = entries.into_iter().map(SearchEntry::construct).collect();
        // The directory's match may be case-insensitive or broader than ours: keep only the name.
        let mut matching: Vec<SearchEntry> = entries
            .into_iter()
            .filter(|e| {
                Self::value(e, &self.cfg.username_attr).is_some_and(|v| {
                    v.iter().any(|n| nimbus_proto::names::name_key(n) == nimbus_proto::names::name_key(username))
                })
            })
            .collect();
        if matching.len() != 1 {
            let _ = ldap.unbind().await;
            return Ok(Verdict::Refused);
        }
        let entry = matching.remove(0);
        let mut users = self.users_of(&mut ldap, vec![entry]).await?;
        let _ = ldap.unbind().await;
        let Some(user) = users.pop() else { return Ok(Verdict::Refused) };
        // The password check: a bind as the user, on a connection of its own.
        let mut conn = self.connect().await?;
        let bound = conn.simple_bind(&user.dn, password).await;
        let _ = conn.unbind().await;
        match bound {
            Ok(r) if r.rc == 0 => Ok(Verdict::Accepted(user)),
            Ok(r) if r.rc == INVALID_CREDENTIALS => Ok(Verdict::Refused),
            Ok(r) => {
                tracing::info!(dn = %user.dn, rc = r.rc, text = %r.text, "LDAP bind refused");
                Ok(Verdict::Refused)
            }
            Err(e) => Err(unavailable("binding as the user", e)),
        }
    }

    async fn timed<T>(&self, what: &str, f: impl Future<Output = Result<T, DirError>>) -> Result<T, DirError> {
        // One bound for the whole exchange (connect, binds, searches, paging).
        let limit = self.cfg.timeout.saturating_mul(3);
        tokio::time::timeout(limit, f)
            .await
            .unwrap_or_else(|_| Err(unavailable(what, format!("no answer within {limit:?}"))))
    }
}

#[async_trait::async_trait]
impl Directory for LdapDirectory {
    async fn users(&self) -> Result<Vec<DirUser>, DirError> {
        self.timed("searching the users", self.all_users()).await
    }

    async fn authenticate(&self, username: &str, password: &str) -> Result<Verdict, DirError> {
        self.timed("checking a password", self.check(username, password)).await
    }

    fn manages_roles(&self) -> bool {
        self.cfg.admin_group.is_some()
    }

    fn default_quota(&self) -> Option<Option<u64>> {
        self.cfg.default_quota
    }
}

/// Whether connecting failed in the TLS handshake (tokio-rustls reports rustls' error, e.g. an
/// unknown issuer, inside an I/O error).
fn is_tls_failure(e: &ldap3::LdapError) -> bool {
    match e {
        ldap3::LdapError::Io { source } => source.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()),
        _ => false,
    }
}

/// A quota as a directory attribute gives it: bytes or a size (`20GiB`, `500 MB`); `0`,
/// `none` or `unlimited` for no quota. None: not a quota.
fn parse_quota(raw: &str) -> Option<Option<u64>> {
    let v = raw.trim();
    if v.eq_ignore_ascii_case("none") || v.eq_ignore_ascii_case("unlimited") {
        return Some(None);
    }
    let bytes = nimbus_proto::size::parse_size(v).ok()?;
    Some((bytes > 0).then_some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_compare_without_case_and_spaces() {
        assert_eq!(dn_key("uid=Alice, ou=People,dc=Example, dc=org"), dn_key("UID=alice,ou=people,dc=example,dc=org"));
        assert_ne!(dn_key("uid=alice,ou=people,dc=example,dc=org"), dn_key("uid=alice2,ou=people,dc=example,dc=org"));
    }

    #[test]
    fn nested_groups_are_looked_for_by_their_first_rdn_under_the_shared_suffix() {
        assert_eq!(
            common_suffix("cn=Admins, ou=Groups,DC=Example,dc=org", "ou=people,dc=example,dc=org"),
            "DC=Example,dc=org"
        );
        assert_eq!(common_suffix("cn=a,o=one", "ou=people,o=two"), "");
        assert_eq!(rdn_filter("CN=Nimbus Ops,OU=Groups,DC=corp").as_deref(), Some("(CN=Nimbus Ops)"));
        assert_eq!(rdn_filter("cn=a*b(c),ou=g").as_deref(), Some("(cn=a\\2ab\\28c\\29)"));
        for odd in ["cn=Smith\\, John,ou=x", "cn=a+sn=b,ou=x", "nonsense", "=x,ou=y", "c n=x"] {
            assert_eq!(rdn_filter(odd), None, "{odd}");
        }
    }

    #[test]
    fn quotas_from_the_directory() {
        assert_eq!(parse_quota("1073741824"), Some(Some(1 << 30)));
        assert_eq!(parse_quota(" 20GiB "), Some(Some(20 << 30)));
        assert_eq!(parse_quota("500 MB"), Some(Some(500_000_000)));
        for none in ["0", "none", "Unlimited"] {
            assert_eq!(parse_quota(none), Some(None), "{none}");
        }
        for bad in ["", "lots", "-5", "10 parsecs"] {
            assert_eq!(parse_quota(bad), None, "{bad}");
        }
    }

    #[test]
    fn usernames_are_escaped_in_filters() {
        assert_eq!(ldap_escape(")(uid=*"), "\\29\\28uid=\\2a");
        assert_eq!(ldap_escape("a\\b\0"), "a\\5cb\\00");
    }
}
