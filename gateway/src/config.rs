//! Command line and environment: every flag is also a `NIMBUS_*` variable.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Read by `serve` on an empty database: the first administrator's password (otherwise one is
/// generated and printed once). Not a flag, so that it never shows in a process listing.
pub const ADMIN_PASSWORD_ENV: &str = "NIMBUS_ADMIN_PASSWORD";

#[derive(Debug, Parser)]
#[command(name = "nimbus-gateway", version, about = "Nimbus gateway: private cloud storage over an S3 store")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway.
    Serve(Box<ServeArgs>),
    /// Apply the retention policy (older versions, trash), then remove blocks no version
    /// references once unused for the grace period; also repairs usage counts.
    Gc(Box<GcArgs>),
    /// Check that every block is in the store intact; optionally repair.
    Fsck(Box<FsckArgs>),
    /// Apply pending database migrations and exit (`serve` also applies them at start).
    Migrate(Box<MigrateArgs>),
    /// Print what this binary accepts: every subcommand's flags with their `NIMBUS_*` variables
    /// and defaults, the other variables it reads, its health routes and metrics.
    Describe(DescribeArgs),
    /// Sync the accounts from the LDAP directory once (what `serve` does every
    /// `--ldap-sync-interval`) and print what changed.
    LdapSync(Box<LdapSyncArgs>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    /// Blocks in a directory under the data dir (the embedded default).
    Local,
    /// Blocks in an S3-compatible bucket (MinIO, Garage, AWS S3, ...).
    S3,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on. Plain HTTP is allowed without asking only on loopback.
    #[arg(long, env = "NIMBUS_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Where the gateway keeps its SQLite database, local blocks and TLS material.
    #[arg(long, env = "NIMBUS_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// Metadata database: `sqlite://PATH` or `postgres://...`. Default: SQLite in the data dir.
    #[arg(long, env = "NIMBUS_DATABASE_URL")]
    pub database_url: Option<String>,

    /// PostgreSQL: the URL of the one connection that LISTENs for the other gateways'
    /// invalidations. Default: `--database-url`. Set it when the database URL goes through a
    /// pooler in transaction mode (PgBouncer), which does not carry LISTEN.
    #[arg(long, env = "NIMBUS_DATABASE_LISTEN_URL")]
    pub database_listen_url: Option<String>,

    /// SQLite: `full` makes every acknowledged commit survive a power cut (one more fsync per
    /// commit); `normal` survives a crash of the gateway but may lose the last commits on a
    /// power cut or kernel crash (never corrupting the database).
    #[arg(long, env = "NIMBUS_SQLITE_SYNCHRONOUS", value_enum, default_value = "full")]
    pub sqlite_synchronous: crate::meta::SqliteSync,

    #[arg(long, env = "NIMBUS_STORE", value_enum, default_value = "local")]
    pub store: StoreKind,

    /// Blocks directory for `--store local`. Default: DATA_DIR/blocks.
    #[arg(long, env = "NIMBUS_BLOCKS_DIR")]
    pub blocks_dir: Option<PathBuf>,

    /// S3 endpoint URL, e.g. http://127.0.0.1:9000. Default: the AWS endpoint for the region.
    #[arg(long, env = "NIMBUS_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,

    #[arg(long, env = "NIMBUS_S3_BUCKET", default_value = "nimbus")]
    pub s3_bucket: String,

    #[arg(long, env = "NIMBUS_S3_REGION", default_value = "us-east-1")]
    pub s3_region: String,

    /// Use virtual-hosted-style bucket addressing instead of path style (MinIO wants path style).
    #[arg(long, env = "NIMBUS_S3_VIRTUAL_HOSTED")]
    pub s3_virtual_hosted: bool,

    /// Access key; by default the standard AWS_ACCESS_KEY_ID / profile chain is used.
    #[arg(long, env = "NIMBUS_S3_ACCESS_KEY")]
    pub s3_access_key: Option<String>,

    #[arg(long, env = "NIMBUS_S3_SECRET_KEY", hide_env_values = true)]
    pub s3_secret_key: Option<String>,

    /// Key prefix inside the bucket, so several installations can share one.
    #[arg(long, env = "NIMBUS_S3_PREFIX", default_value = "")]
    pub s3_prefix: String,

    /// Clients that ask (the drive does) read blocks the gateway's cache does not hold straight
    /// from the store, on a URL signed for that one block and valid for a few minutes, and check
    /// them against their hash themselves: the gateway carries none of those bytes. Only for a
    /// store that clients reach at `--s3-endpoint`; a client that cannot falls back to the gateway.
    #[arg(long, env = "NIMBUS_S3_DIRECT_READS")]
    pub s3_direct_reads: bool,

    /// `self-signed`: generate (once) and use a certificate kept in the data dir.
    #[arg(long, env = "NIMBUS_TLS", value_parser = ["self-signed"])]
    pub tls: Option<String>,

    #[arg(long, env = "NIMBUS_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    #[arg(long, env = "NIMBUS_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Serve plain HTTP on a non-loopback `--listen` / `--s3-listen` address (only behind a
    /// TLS-terminating proxy).
    #[arg(long, env = "NIMBUS_PLAIN_HTTP")]
    pub plain_http: bool,

    /// Lifetime of a login token.
    #[arg(long, env = "NIMBUS_TOKEN_TTL_SECS", default_value_t = 30 * 24 * 3600)]
    pub token_ttl_secs: u64,

    /// The longest a public link may live (e.g. `30d`): a link made without an expiry gets
    /// this one, and a later expiry is refused. Unset: links may live until revoked.
    #[arg(long, env = "NIMBUS_LINK_MAX_EXPIRY", value_parser = crate::timefmt::parse_duration)]
    pub link_max_expiry: Option<std::time::Duration>,

    /// Quota for new users when the admin gives none (bytes; 0 = unlimited).
    #[arg(long, env = "NIMBUS_DEFAULT_QUOTA_BYTES", default_value_t = 0)]
    pub default_quota_bytes: u64,

    /// Deadline for one object-store request (an upload or download of one block).
    #[arg(long, env = "NIMBUS_STORE_TIMEOUT_SECS", default_value_t = 60)]
    pub store_timeout_secs: u64,

    /// SSD cache directory (one gateway per directory). Default: DATA_DIR/cache.
    #[arg(long, env = "NIMBUS_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,

    /// SSD cache size bound, e.g. `50GiB`; `0` turns the SSD tier off.
    #[arg(long, env = "NIMBUS_CACHE_SIZE", default_value = "8GiB", value_parser = nimbus_proto::size::parse_size)]
    pub cache_size: u64,

    /// Memory cache size bound, e.g. `512MiB`; `0` turns the memory tier off.
    #[arg(long, env = "NIMBUS_CACHE_MEM", default_value = "256MiB", value_parser = nimbus_proto::size::parse_size)]
    pub cache_mem: u64,

    /// Seconds between two points of the console's request-rate and hit-ratio charts (the last
    /// hour is kept in memory).
    #[arg(long, env = "NIMBUS_STATS_INTERVAL", default_value_t = 10)]
    pub stats_interval_secs: u64,

    /// Serve the admin console from this directory (a built admin-ui/dist) instead of the copy
    /// inside the binary: for working on the console.
    #[arg(long, env = "NIMBUS_ADMIN_UI_DIR")]
    pub admin_ui_dir: Option<PathBuf>,
    /// Serve the users' web app from this directory (a built admin-ui/dist-web) instead of the
    /// copy inside the binary: for working on the web app.
    #[arg(long, env = "NIMBUS_WEB_UI_DIR")]
    pub web_ui_dir: Option<PathBuf>,
    /// Server key (32 bytes) that seals users' S3 secrets in the database; created with mode
    /// 0600 on first start. Keep it out of database backups. Default: DATA_DIR/s3-secrets.key.
    #[arg(long, env = "NIMBUS_S3_KEY_FILE")]
    pub s3_key_file: Option<PathBuf>,

    /// Reverse proxies / load balancers in front of the gateway, `CIDR[,CIDR...]` (a bare
    /// address is that address). From these peers the client is the rightmost address of
    /// `X-Forwarded-For` that is not itself trusted: the address that sign-in throttling, the
    /// audit log and the device list use. Default: none (the header is ignored).
    #[arg(long, env = "NIMBUS_TRUSTED_PROXIES", value_name = "CIDR[,CIDR...]")]
    pub trusted_proxies: Option<crate::auth::TrustedProxies>,

    /// Who must sign in with two factors (password and TOTP code): `none`, `admins` or `all`.
    /// Someone required who has not set it up yet can, after the password, only set it up
    /// (docs/IDENTITY.md, Two-factor sign-in).
    #[arg(long, env = "NIMBUS_REQUIRE_TOTP", value_enum, default_value = "none")]
    pub require_totp: crate::auth::totp::RequireTotp,

    /// Password hashes (argon2id, ~19 MiB and tens of ms of CPU each) computed at once; more
    /// sign-ins wait briefly, then get 429. Default: the number of CPU cores.
    #[arg(long, env = "NIMBUS_PASSWORD_HASH_CONCURRENCY", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub password_hash_concurrency: Option<u16>,

    /// Close a connection that has had no request in progress for this long (HTTP/1 between
    /// requests, HTTP/2, one that never sends a request), and one whose client has accepted
    /// nothing the gateway sends for this long. Requests in progress (downloads, long polls)
    /// are never idle.
    #[arg(long, env = "NIMBUS_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_positive_duration)]
    pub idle_timeout: std::time::Duration,

    /// HTTP/1: a request's headers must arrive within this (slow senders are cut). hyper also
    /// runs this clock while a connection waits for its next request.
    #[arg(long, env = "NIMBUS_HEADER_READ_TIMEOUT", default_value = "30s", value_parser = parse_positive_duration)]
    pub header_read_timeout: std::time::Duration,

    /// Most connections open at once, all listeners together; further ones are closed at once.
    #[arg(long, env = "NIMBUS_MAX_CONNECTIONS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,

    /// HTTP/2: most requests (streams) in progress on one connection; clients queue the rest,
    /// and streams opened beyond it are refused (REFUSED_STREAM, safe to retry).
    #[arg(long = "http2-max-streams", env = "NIMBUS_HTTP2_MAX_STREAMS", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub http2_max_streams: u32,

    /// Log filter, e.g. `info` or `nimbus_gateway=debug,info`. The S3 library's line for every
    /// S3 error answer (s3s logs them at ERROR, even a 404) is off unless the filter names `s3s`.
    #[arg(long, env = "NIMBUS_LOG", default_value = "info")]
    pub log: String,

    /// Threads that serve requests, each with a runtime and a listening socket of its own
    /// (SO_REUSEPORT); `0` (the default): one fewer than the machine's cores, at least one (the
    /// store, the database and the kernel's network work need the rest; see docs/OPERATIONS.md).
    #[arg(long, env = "NIMBUS_WORKER_THREADS", default_value_t = 0)]
    pub worker_threads: usize,

    /// Also serve the S3-compatible API (path-style, SigV4 with per-user access keys) on this
    /// address, e.g. `127.0.0.1:9100`. Off by default. Uses the gateway's TLS settings; like
    /// `--listen`, plain HTTP only on loopback (or with `--plain-http`).
    #[arg(long, env = "NIMBUS_S3_LISTEN")]
    pub s3_listen: Option<SocketAddr>,

    /// Which older versions of a file are kept: comma-separated `AGE:all` / `AGE:EVERY` steps
    /// with growing ages (younger than AGE: every version, or the newest per EVERY), older ones
    /// go; `forever` keeps all, `none` keeps no older version. Applied by the maintenance worker
    /// and by `gc`; a write that would pass the quota also expires the oldest versions first.
    #[arg(long, env = "NIMBUS_VERSION_RETENTION", default_value = crate::meta::retention::DEFAULT_VERSION_RETENTION,
          value_parser = crate::meta::retention::parse_version_policy)]
    pub version_retention: crate::meta::retention::VersionPolicy,

    /// How long deleted items stay in the trash (e.g. `30d`), or `forever`.
    #[arg(long, env = "NIMBUS_TRASH_RETENTION", default_value = crate::meta::retention::DEFAULT_TRASH_RETENTION,
          value_parser = parse_trash_retention)]
    pub trash_retention: TrashRetention,

    /// How often the gateway applies retention and collects garbage blocks (as `gc` does), e.g.
    /// `1h`; `0` turns the worker off (then run `nimbus-gateway gc` on a schedule).
    #[arg(long, env = "NIMBUS_MAINTENANCE_INTERVAL", default_value = "1h", value_parser = crate::timefmt::parse_duration)]
    pub maintenance_interval: std::time::Duration,

    /// Garbage collection removes only blocks nobody reported present or uploaded for this long
    /// (e.g. `24h`, `30m`, `0`): longer than any client takes from upload to commit.
    #[arg(long = "gc-grace", alias = "grace", env = "NIMBUS_GC_GRACE", default_value = "24h",
          value_parser = crate::timefmt::parse_duration)]
    pub gc_grace: std::time::Duration,

    /// S3 multipart uploads started longer ago than this and never completed are aborted by
    /// garbage collection (their parts then become garbage like any other unreferenced block).
    #[arg(long = "gc-upload-expiry", alias = "upload-expiry", env = "NIMBUS_GC_UPLOAD_EXPIRY", default_value = "7d",
          value_parser = crate::timefmt::parse_duration)]
    pub gc_upload_expiry: std::time::Duration,

    #[command(flatten)]
    pub ldap: LdapArgs,

    /// OpenID Connect single sign-on (docs/IDENTITY.md).
    #[command(flatten)]
    pub oidc: OidcArgs,
}

/// Accounts from an LDAP directory or Active Directory (docs/IDENTITY.md); off without
/// `--ldap-url`.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "LDAP / Active Directory")]
pub struct LdapArgs {
    /// The directory: `ldaps://HOST[:636]`, or `ldap://HOST[:389]` with `--ldap-starttls`
    /// (plain `ldap://` only on loopback or with `--ldap-plain`). Turns LDAP accounts on.
    #[arg(long, env = "NIMBUS_LDAP_URL")]
    pub ldap_url: Option<String>,

    /// The service account that searches the directory, e.g.
    /// `cn=nimbus,ou=services,dc=example,dc=org` (AD: also `nimbus@example.org`). Default:
    /// anonymous search.
    #[arg(long, env = "NIMBUS_LDAP_BIND_DN", requires = "ldap_url")]
    pub ldap_bind_dn: Option<String>,

    /// A file holding the service account's password (a trailing newline is ignored).
    #[arg(long, env = "NIMBUS_LDAP_BIND_PASSWORD_FILE", requires = "ldap_bind_dn")]
    pub ldap_bind_password_file: Option<PathBuf>,

    /// Where users are searched (the whole subtree), e.g. `ou=people,dc=example,dc=org`.
    #[arg(long, env = "NIMBUS_LDAP_USER_BASE", requires = "ldap_url")]
    pub ldap_user_base: Option<String>,

    /// Which entries are Nimbus users. AD: `(&(objectCategory=person)(objectClass=user))`.
    #[arg(long, env = "NIMBUS_LDAP_USER_FILTER", default_value = "(objectClass=inetOrgPerson)")]
    pub ldap_user_filter: String,

    /// The attribute that is the Nimbus username. AD: `sAMAccountName`.
    #[arg(long, env = "NIMBUS_LDAP_USERNAME_ATTR", default_value = "uid")]
    pub ldap_username_attr: String,

    /// A group (its DN) whose `member`s, and the members of groups nested in it, are
    /// administrators; everyone else is a user. Without it, roles are left as administrators
    /// set them in the console.
    #[arg(long, env = "NIMBUS_LDAP_ADMIN_GROUP", requires = "ldap_url")]
    pub ldap_admin_group: Option<String>,

    /// A group (its DN) whose `member`s (nested groups' too) may use Nimbus (and the admin
    /// group's). Default: everyone the user filter finds.
    #[arg(long, env = "NIMBUS_LDAP_USER_GROUP", requires = "ldap_url")]
    pub ldap_user_group: Option<String>,

    /// The attribute that marks an account disabled in the directory: present (OpenLDAP's
    /// `pwdAccountLockedTime`), or for `userAccountControl` (AD) the ACCOUNTDISABLE bit (2).
    /// Empty: none.
    #[arg(long, env = "NIMBUS_LDAP_DISABLED_ATTR", default_value = "pwdAccountLockedTime")]
    pub ldap_disabled_attr: String,

    /// The attribute holding a user's e-mail address (shown in the console and `/api/v1/me`).
    /// Empty: none.
    #[arg(long, env = "NIMBUS_LDAP_EMAIL_ATTR", default_value = "mail")]
    pub ldap_email_attr: String,

    /// The attribute holding a user's display name (shown in the console, the web app and
    /// `/api/v1/me`). Empty: none.
    #[arg(long, env = "NIMBUS_LDAP_DISPLAY_NAME_ATTR", default_value = "displayName")]
    pub ldap_display_name_attr: String,

    /// The quota of accounts the directory creates (e.g. `10GiB`; `0`: unlimited). Default:
    /// `--default-quota-bytes`.
    #[arg(long, env = "NIMBUS_LDAP_DEFAULT_QUOTA", requires = "ldap_url", value_parser = nimbus_proto::size::parse_size)]
    pub ldap_default_quota: Option<u64>,

    /// An attribute holding a user's quota (bytes or a size such as `20GiB`; `0`, `none` or
    /// `unlimited`: no quota). Where an entry has it, the quota follows the directory at every
    /// sync and sign-in; entries without it keep the quota they have.
    #[arg(long, env = "NIMBUS_LDAP_QUOTA_ATTR", requires = "ldap_url")]
    pub ldap_quota_attr: Option<String>,

    /// Upgrade an `ldap://` connection to TLS with StartTLS.
    #[arg(long, env = "NIMBUS_LDAP_STARTTLS")]
    pub ldap_starttls: bool,

    /// Allow a plain `ldap://` URL to a host other than loopback (passwords cross the network
    /// in clear).
    #[arg(long, env = "NIMBUS_LDAP_PLAIN")]
    pub ldap_plain: bool,

    /// Trust only the CA certificate(s) in this PEM file for the directory's TLS. Default: the
    /// system's roots.
    #[arg(long, env = "NIMBUS_LDAP_CA_FILE", requires = "ldap_url")]
    pub ldap_ca_file: Option<PathBuf>,

    /// How often `serve` syncs the accounts from the directory (creates, disables, sets
    /// roles); `0` turns it off (then run `nimbus-gateway ldap-sync` on a schedule).
    #[arg(long, env = "NIMBUS_LDAP_SYNC_INTERVAL", default_value = "15m", value_parser = crate::timefmt::parse_duration)]
    pub ldap_sync_interval: std::time::Duration,

    /// Deadline for one directory request (connect, bind, search).
    #[arg(long, env = "NIMBUS_LDAP_TIMEOUT", default_value = "10s", value_parser = parse_positive_duration)]
    pub ldap_timeout: std::time::Duration,
}

#[derive(Debug, Clone, Args)]
pub struct LdapSyncArgs {
    /// Print what would change, change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub serve: ServeArgs,
}

/// OpenID Connect single sign-on: on when `--oidc-issuer` is set (docs/IDENTITY.md).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "OpenID Connect single sign-on")]
pub struct OidcArgs {
    /// The provider's issuer URL, e.g. `https://keycloak.example.com/realms/acme`; its discovery
    /// document (`/.well-known/openid-configuration`) and keys are fetched from there. Unset:
    /// single sign-on is off.
    #[arg(long, env = "NIMBUS_OIDC_ISSUER", requires_all = ["oidc_client_id", "oidc_client_secret_file"])]
    pub oidc_issuer: Option<String>,

    /// This gateway's client id at the provider.
    #[arg(long, env = "NIMBUS_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,

    /// A file holding the client secret (read at start; trailing whitespace ignored).
    #[arg(long, env = "NIMBUS_OIDC_CLIENT_SECRET_FILE")]
    pub oidc_client_secret_file: Option<PathBuf>,

    /// The ID token claim that names the Nimbus user (validated like any username).
    #[arg(long, env = "NIMBUS_OIDC_USERNAME_CLAIM", default_value = "preferred_username")]
    pub oidc_username_claim: String,

    /// The ID token claim that makes an administrator, with `--oidc-admin-values` (e.g. `groups`).
    /// Unset: the role is never changed by sign-in (new accounts are users).
    #[arg(long, env = "NIMBUS_OIDC_ADMIN_CLAIM", requires = "oidc_admin_values")]
    pub oidc_admin_claim: Option<String>,

    /// Comma-separated values of `--oidc-admin-claim` (a string or a list) meaning administrator;
    /// anyone else is a user. Checked at every sign-in.
    #[arg(long, env = "NIMBUS_OIDC_ADMIN_VALUES", value_delimiter = ',', requires = "oidc_admin_claim")]
    pub oidc_admin_values: Vec<String>,

    /// `existing`: only accounts an administrator created (source `oidc`) may sign in; `auto`:
    /// an account is created at its first sign-in.
    #[arg(long, env = "NIMBUS_OIDC_PROVISION", value_enum, default_value = "existing")]
    pub oidc_provision: crate::auth::oidc::OidcProvision,

    /// The callback URL registered at the provider. Default: this gateway's address as the
    /// browser reached it (`Host`, or `X-Forwarded-Host`/`-Proto` from `--trusted-proxies`)
    /// followed by `/api/v1/auth/oidc/callback`.
    #[arg(long, env = "NIMBUS_OIDC_REDIRECT_URL")]
    pub oidc_redirect_url: Option<String>,
}

/// `--trash-retention`: None keeps trash items until they are purged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrashRetention(pub Option<std::time::Duration>);

fn parse_trash_retention(s: &str) -> Result<TrashRetention, String> {
    crate::meta::retention::parse_trash_retention(s).map(TrashRetention)
}

/// A duration above zero (a zero timeout would close every connection at once).
fn parse_positive_duration(s: &str) -> Result<std::time::Duration, String> {
    match crate::timefmt::parse_duration(s)? {
        d if d.is_zero() => Err(format!("`{s}` must be longer than 0")),
        d => Ok(d),
    }
}

#[derive(Debug, Clone, Args)]
pub struct GcArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Clone, Args)]
pub struct FsckArgs {
    /// Check N registered blocks picked at random instead of all (and skip the orphan scan).
    #[arg(long)]
    pub sample: Option<u64>,

    /// Fix what can be fixed (see docs/OPERATIONS.md).
    #[arg(long)]
    pub repair: bool,

    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Clone, Args)]
pub struct DescribeArgs {
    /// Print JSON (for tools, e.g. the deployment validator) instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub serve: ServeArgs,
}

impl ServeArgs {
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(u) => u.clone(),
            None => format!("sqlite://{}", self.data_dir.join("nimbus.db").display()),
        }
    }

    pub fn blocks_dir(&self) -> PathBuf {
        self.blocks_dir.clone().unwrap_or_else(|| self.data_dir.join("blocks"))
    }

    pub fn cache_dir(&self) -> PathBuf {
        self.cache_dir.clone().unwrap_or_else(|| self.data_dir.join("cache"))
    }

    pub fn s3_key_file(&self) -> PathBuf {
        self.s3_key_file.clone().unwrap_or_else(|| self.data_dir.join("s3-secrets.key"))
    }

    pub fn default_quota(&self) -> Option<u64> {
        (self.default_quota_bytes > 0).then_some(self.default_quota_bytes)
    }

    pub fn retention(&self) -> crate::meta::Retention {
        crate::meta::Retention { versions: self.version_retention.clone(), trash: self.trash_retention.0 }
    }
}

impl OidcArgs {
    /// The single sign-on settings these flags give; None when `--oidc-issuer` is unset (off).
    pub fn config(&self) -> anyhow::Result<Option<crate::auth::oidc::OidcConfig>> {
        use openidconnect::{ClientId, ClientSecret, IssuerUrl, RedirectUrl};
        let a = self;
        use anyhow::Context;
        let Some(issuer) = a.oidc_issuer.as_deref() else { return Ok(None) };
        // As the provider spells it (a trailing slash included): discovery compares it exactly.
        let issuer =
            IssuerUrl::new(issuer.to_string()).with_context(|| format!("--oidc-issuer `{issuer}` is not a URL"))?;
        let client_id = a.oidc_client_id.clone().filter(|c| !c.is_empty()).context("--oidc-client-id is required")?;
        let file = a.oidc_client_secret_file.as_ref().context("--oidc-client-secret-file is required")?;
        let secret = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read --oidc-client-secret-file {}", file.display()))?;
        let secret = secret.trim_end().to_string();
        anyhow::ensure!(!secret.is_empty(), "--oidc-client-secret-file {} is empty", file.display());
        let admin = match (&a.oidc_admin_claim, a.oidc_admin_values.is_empty()) {
            (Some(claim), false) => Some((
                claim.clone(),
                a.oidc_admin_values.iter().map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect(),
            )),
            _ => None,
        };
        let redirect_url = a
            .oidc_redirect_url
            .as_ref()
            .map(|u| RedirectUrl::new(u.clone()).with_context(|| format!("--oidc-redirect-url `{u}` is not a URL")))
            .transpose()?;
        Ok(Some(crate::auth::oidc::OidcConfig {
            issuer,
            client_id: ClientId::new(client_id),
            client_secret: ClientSecret::new(secret),
            username_claim: a.oidc_username_claim.clone(),
            admin,
            provision: a.oidc_provision,
            redirect_url,
        }))
    }
}

/// The filter of `--log`: `spec` (`info` if it does not parse), with the S3 library's lines off
/// unless `spec` names `s3s`. s3s logs each error answer of the S3 door at ERROR (a missing key,
/// an unsigned request, an unsupported call), and a malformed XML body with the body itself (a
/// client could write megabytes of log per request): that would bury real errors, trip alerts
/// on ERROR lines and fill disks; the door logs what is an error on our side itself
/// (`doors::s3::error`).
pub fn log_filter(spec: &str) -> tracing_subscriber::EnvFilter {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(spec).unwrap_or_else(|_| EnvFilter::new("info"));
    if spec.contains("s3s") {
        return filter;
    }
    match "s3s=off".parse() {
        Ok(quiet) => filter.add_directive(quiet),
        Err(_) => filter,
    }
}

impl ServeArgs {
    /// The request threads to start: `--worker-threads`, or by default one fewer than the
    /// cores, at least one. Measured on a 2-core host serving with its store beside it, two
    /// request threads (each its own runtime) served 12–41 % more hot 4 KiB reads per second than
    /// one, but cost 15–30 % more CPU per uncached read and 20 MiB more RSS; docs/BENCHMARKS.md.
    pub fn worker_threads(&self) -> usize {
        if self.worker_threads > 0 {
            return self.worker_threads;
        }
        std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
    }
}

#[cfg(test)]
mod tests {
    use crate::logfmt::Captured;

    /// What the gateway's log says, under `--log spec`, for s3s's line about a 404 and for an
    /// internal error of the S3 door.
    fn logged(spec: &str) -> anyhow::Result<String> {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(super::log_filter(spec))
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "s3s::ops", "op returns error: NoSuchKey");
            tracing::error!(target: "s3s::http::de", "malformed xml body: BODYBYTES");
            tracing::error!(target: "nimbus_gateway::doors::s3::error", "S3 door: internal error");
        });
        Ok(out.text())
    }

    #[test]
    fn the_s3_librarys_error_answers_are_not_logged_unless_asked_for() -> anyhow::Result<()> {
        for spec in ["info", "nimbus_gateway=debug,info"] {
            let log = logged(spec)?;
            assert!(!log.contains("NoSuchKey") && !log.contains("BODYBYTES"), "{spec}: {log}");
            assert!(log.contains("S3 door: internal error"), "{spec}: {log}");
        }
        let log = logged("info,s3s=debug")?;
        assert!(log.contains("NoSuchKey") && log.contains("S3 door: internal error"), "{log}");
        Ok(())
    }
}
