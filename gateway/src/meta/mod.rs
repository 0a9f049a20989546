//! Metadata in SQL: users, tokens, the per-space node tree, versions and their block lists,
//! the block registry, trash, change journal and audit log.
//!
//! Two engines, one code path: SQLite (embedded default) and PostgreSQL. Every query is written
//! once in the SQL both engines share and run through the small seam in [`engine`] (a pool or a
//! transaction of either engine). Migrations differ only in DDL and live in
//! `migrations/{sqlite,postgres}`.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

mod changes;
pub(crate) mod engine;
mod files;
mod gc;
mod groups;
mod hot;
mod journal;
mod links;
pub(crate) mod locks;
mod notify;
mod oidc;
mod quota;
pub mod retention;
mod s3keys;
mod s3objects;
mod shares;
mod space_id;
mod throttle;
mod thumbs;
mod totp;
mod tree;
pub(crate) mod usage;
#[cfg(test)]
mod usage_model;
mod users;

use engine::{Db, Tx, sql};

pub use changes::{ChangeRow, FeedShare};
pub use files::{Base, Claim, CommitSpec, Manifest};
pub use gc::BlockRow;
pub use groups::{GroupRow, GroupWithMembers};
pub use hot::ChangeWatch;
pub use links::{LinkRow, LinkUpdate, NewLink, PublicLink};
pub use locks::{LockRow, LockTokens, PropPatch, PropRow, lock_key};
pub use oidc::{OidcCode, OidcFlow};
pub use retention::{Expired, Retention};
pub use s3keys::{S3KeyAuthRow, S3KeyRow};
pub use s3objects::{PartRow, S3ObjectMeta, UploadRow};
pub use shares::{Grant, IncomingShare, OutgoingShare, SharePermission, ShareRow};
pub use space_id::SpaceId;
pub use thumbs::{MAX_THUMBNAILS, StoredThumbnail};
pub use totp::TotpRow;
pub use tree::{ChildRow, TrashItem};
pub use usage::{Limit, Usage};
pub use users::{AuditFilter, NewAudit, UserCursor, UserOrder, UserSort, UserUpdate};

#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    NotADirectory(String),
    #[error("{0}")]
    IsADirectory(String),
    #[error("{0}")]
    QuotaExceeded(String),
    #[error("{0}")]
    MissingBlocks(String),
    #[error("{0}")]
    Invalid(String),
    /// A live WebDAV lock guards the path and the caller did not send its token.
    #[error("{0}")]
    Locked(String),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl MetaError {
    /// Unique-constraint violations become a user-facing "already exists".
    fn from_insert(e: sqlx::Error, what: impl FnOnce() -> String) -> MetaError {
        match e.as_database_error() {
            Some(d) if d.is_unique_violation() => MetaError::AlreadyExists(what()),
            _ => MetaError::Db(e),
        }
    }
}

impl From<nimbus_proto::NameError> for MetaError {
    fn from(e: nimbus_proto::NameError) -> Self {
        MetaError::Invalid(e.to_string())
    }
}

pub type MetaResult<T> = Result<T, MetaError>;

/// SQLite's `synchronous` setting (with the WAL journal), `--sqlite-synchronous`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SqliteSync {
    /// Every commit is on disk before it is acknowledged (an fsync of the WAL per commit).
    #[default]
    Full,
    /// Commits survive a crash of the process; a power cut may lose the last ones.
    Normal,
}

/// How to open the metadata database, beyond its URL.
#[derive(Debug, Clone, Copy, Default)]
pub struct MetaOptions {
    pub sqlite_synchronous: SqliteSync,
}

/// Handle to the metadata database; cheap to clone.
#[derive(Clone)]
pub struct Meta {
    pool: Db,
    hot: std::sync::Arc<hot::HotCache>,
}

macro_rules! node_cols {
    () => {
        "id, space_id, parent_id, name, kind, size, version_id, created_at, modified_at"
    };
}
pub(crate) use node_cols;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct NodeRow {
    pub id: i64,
    pub space_id: i64,
    pub parent_id: Option<i64>,
    pub name: String,
    pub kind: String,
    pub size: i64,
    pub version_id: Option<i64>,
    pub created_at: i64,
    pub modified_at: i64,
}

impl NodeRow {
    pub fn is_dir(&self) -> bool {
        self.kind == "dir"
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UserRow {
    pub id: i64,
    pub username: String,
    pub password_hash: String,
    pub role: String,
    pub quota_bytes: Option<i64>,
    /// Everything the space holds: the sum of the four parts below (see `usage.rs`).
    pub used_bytes: i64,
    pub current_bytes: i64,
    pub versions_bytes: i64,
    pub trash_bytes: i64,
    pub pending_bytes: i64,
    pub disabled: bool,
    /// May the user share with others (an administrator's policy)?
    pub sharing: bool,
    /// May the user make public links (an administrator's policy)?
    pub links: bool,
    /// `local`, `ldap` or `oidc` (`IdentitySource`).
    pub source: String,
    pub totp_enabled: bool,
    pub last_login_at: Option<i64>,
    pub created_at: i64,
    /// From the directory (`--ldap-email-attr`); None when it gives none.
    pub email: Option<String>,
    /// From the directory (`--ldap-display-name-attr`); None when it gives none.
    pub display_name: Option<String>,
}

impl UserRow {
    pub fn usage(&self) -> Usage {
        Usage {
            current: self.current_bytes,
            versions: self.versions_bytes,
            trash: self.trash_bytes,
            pending: self.pending_bytes,
        }
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TokenAuthRow {
    pub token_id: i64,
    pub user_id: i64,
    pub device: String,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
    pub last_used_at: Option<i64>,
    /// The client address of the last recorded use (or of the sign-in).
    pub last_ip: Option<String>,
    pub username: String,
    pub role: String,
    pub disabled: bool,
    /// The token may only set up two-factor sign-in (`--require-totp`).
    pub totp_setup_only: bool,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TokenRow {
    pub id: i64,
    pub device: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub last_used_at: Option<i64>,
    pub last_ip: Option<String>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct VersionRow {
    pub id: i64,
    pub node_id: i64,
    pub size: i64,
    pub block_size: i64,
    pub device: Option<String>,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct BlockEntry {
    pub hash: String,
    pub size: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AuditRow {
    pub id: i64,
    pub at: i64,
    pub actor: Option<String>,
    pub action: String,
    pub target: Option<String>,
    pub detail: Option<String>,
    pub ip: Option<String>,
}

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

impl Meta {
    /// Opens (creating if needed) the database and applies pending migrations.
    pub async fn connect(url: &str) -> MetaResult<Meta> {
        Meta::connect_with(url, MetaOptions::default()).await
    }

    /// [`Meta::connect`] with options.
    pub async fn connect_with(url: &str, opts: MetaOptions) -> MetaResult<Meta> {
        let pool = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool =
                PgPoolOptions::new().max_connections(16).acquire_timeout(Duration::from_secs(10)).connect(url).await?;
            POSTGRES_MIGRATIONS.run(&pool).await.map_err(schema_error)?;
            Db::Postgres(pool)
        } else if url.starts_with("sqlite:") {
            let opts = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                // A commit is acknowledged to clients (an upload, a revocation): with FULL it
                // is on disk by then. NORMAL is crash-safe for the process, not a power cut.
                .synchronous(match opts.sqlite_synchronous {
                    SqliteSync::Full => SqliteSynchronous::Full,
                    SqliteSync::Normal => SqliteSynchronous::Normal,
                })
                .foreign_keys(true)
                .busy_timeout(Duration::from_secs(30));
            let pool = SqlitePoolOptions::new()
                .max_connections(8)
                .acquire_timeout(Duration::from_secs(30))
                .connect_with(opts)
                .await?;
            SQLITE_MIGRATIONS.run(&pool).await.map_err(schema_error)?;
            Db::Sqlite(pool)
        } else {
            return Err(MetaError::Invalid(format!(
                "unsupported database URL `{url}`: use sqlite://PATH or postgres://USER@HOST:PORT/DB"
            )));
        };
        // On a shared database the hot cache waits for the invalidation listener
        // (`listen_for_other_gateways`); SQLite has one node, which sees every change itself.
        let hot = match pool {
            Db::Postgres(_) => hot::HotCache::distrusted(),
            Db::Sqlite(_) => hot::HotCache::default(),
        };
        Ok(Meta { pool, hot: std::sync::Arc::new(hot) })
    }

    pub fn engine(&self) -> &'static str {
        match self.pool {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    /// Readiness probe: one round trip.
    pub async fn ping(&self) -> MetaResult<()> {
        sql("SELECT 1").execute(&mut self.db()).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await
    }

    /// The pool, to run queries on (each takes a connection for itself).
    pub(crate) fn db(&self) -> Db {
        self.pool.clone()
    }

    /// See [`Db::begin_write`].
    pub(crate) async fn begin_write(&self) -> Result<Tx, sqlx::Error> {
        self.pool.begin_write().await
    }

    /// See [`Db::begin_space`].
    pub(crate) async fn begin_space(&self, space: i64) -> Result<Tx, sqlx::Error> {
        self.pool.begin_space(space).await
    }
}

/// Migrations only move forward: a database migrated by a newer binary has versions this
/// one does not know, and running on it could corrupt what the newer one wrote.
fn schema_error(e: sqlx::migrate::MigrateError) -> MetaError {
    match e {
        sqlx::migrate::MigrateError::VersionMissing(v) => MetaError::Invalid(format!(
            "the database schema is newer than this nimbus-gateway {}: it has migration {v} applied, which this \
             binary does not know. Run the newer nimbus-gateway (or restore the backup taken before the upgrade); \
             refusing to touch it",
            env!("CARGO_PKG_VERSION")
        )),
        e => MetaError::Migrate(e),
    }
}

pub fn now_ms() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp_nanos() as i64 / 1_000_000
}

#[cfg(test)]
mod migration_tests {
    /// Two branches once gave their migrations one version, and every start failed on it:
    /// versions are unique, and both engines have the same ones.
    #[test]
    fn migration_versions_are_unique_and_match() {
        let versions = |m: &sqlx::migrate::Migrator| m.iter().map(|m| m.version).collect::<Vec<_>>();
        let (sqlite, postgres) = (versions(&super::SQLITE_MIGRATIONS), versions(&super::POSTGRES_MIGRATIONS));
        let mut unique = sqlite.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), sqlite.len(), "two SQLite migrations share a version: {sqlite:?}");
        assert_eq!(sqlite, postgres, "the engines' migrations differ");
    }
}
