//! Accounts from an LDAP directory or Active Directory (docs/IDENTITY.md).
//!
//! The directory is reached through the small [`Directory`] trait: [`client::LdapDirectory`]
//! speaks LDAP (ldap3), the sync logic ([`sync`]) and the sign-in branch only see the trait, so
//! they are unit-tested against an in-memory directory. Nimbus never stores a directory
//! password: a directory user's row carries [`UNUSABLE_PASSWORD_HASH`], and signing in binds to
//! the directory as that user.

pub mod client;
pub mod sync;

use std::sync::Arc;

use crate::error::{ApiError, ApiResult};
use crate::meta::UserRow;

pub use client::LdapDirectory;

/// What a directory user's `password_hash` holds: not a PHC string, so no password ever
/// verifies against it (the WebDAV door's account passwords included).
pub const UNUSABLE_PASSWORD_HASH: &str = "!ldap";

/// The `users.source` of directory accounts.
pub const SOURCE: &str = "ldap";

/// The audit log's actor for what the sync (and a first sign-in) does.
pub const SYNC_ACTOR: &str = "ldap-sync";

/// A user as the directory describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirUser {
    pub dn: String,
    /// The value of `--ldap-username-attr`.
    pub username: String,
    /// A member of `--ldap-admin-group`.
    pub admin: bool,
    /// May use Nimbus: no `--ldap-user-group`, or a member of it (or of the admin group).
    pub allowed: bool,
    /// Disabled in the directory (`--ldap-disabled-attr`).
    pub disabled: bool,
    /// `--ldap-email-attr`'s value, if the entry has one.
    pub email: Option<String>,
    /// `--ldap-display-name-attr`'s value, if the entry has one.
    pub display_name: Option<String>,
    /// `--ldap-quota-attr`'s value: None when the entry has none (or it is not a size), so the
    /// quota is left as it is; Some(None): no quota.
    pub quota: Option<Option<u64>>,
}

#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// The directory does not answer, or refuses the service account: nobody can be checked.
    #[error("the directory is unavailable: {0}")]
    Unavailable(String),
    /// The TLS handshake (ldaps:// or StartTLS) failed: most often a certificate this gateway
    /// does not trust (`--ldap-ca-file`). Never retried in clear.
    #[error(
        "the directory is unavailable: its TLS connection failed ({0}); check --ldap-ca-file and the server's certificate"
    )]
    Tls(String),
}

/// The answer to a sign-in attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The directory accepted the password.
    Accepted(DirUser),
    /// Unknown name, ambiguous name, or wrong password.
    Refused,
}

/// A directory of users: all that the sync and the sign-in need from LDAP.
#[async_trait::async_trait]
pub trait Directory: Send + Sync {
    /// Every user the configured filter finds under the user base.
    async fn users(&self) -> Result<Vec<DirUser>, DirError>;
    /// Finds `username` (one entry exactly) and binds as it with `password`.
    async fn authenticate(&self, username: &str, password: &str) -> Result<Verdict, DirError>;
    /// Whether roles follow the directory (an admin group is configured); otherwise the sync
    /// leaves roles as administrators set them.
    fn manages_roles(&self) -> bool;
    /// `--ldap-default-quota`: the quota of the accounts it creates (Some(None): none), or None
    /// to use the gateway's `--default-quota-bytes`.
    fn default_quota(&self) -> Option<Option<u64>> {
        None
    }
}

pub type DynDirectory = Arc<dyn Directory>;

/// The sign-in branch of `POST /api/v1/auth/login` for a name that is not a local account
/// (`user` is the row with that name, if any, and then it is a directory account): checks the
/// password against the directory, creates the account on its first sign-in, and returns the
/// row and whether the password was right. An unreachable directory is a 503.
pub async fn sign_in(
    meta: &crate::meta::Meta,
    default_quota: Option<u64>,
    dir: &DynDirectory,
    username: &str,
    password: &str,
    user: Option<UserRow>,
) -> ApiResult<(Option<UserRow>, bool)> {
    // Names the gateway would never create cannot be directory accounts: such a name (`*`,
    // `)(uid=*`, a NUL...) never reaches the directory. An empty password would be an
    // unauthenticated bind, which directories answer with success (RFC 4513 5.1.2).
    if nimbus_proto::names::validate_username(username).is_err() || password.is_empty() || password.len() > 1024 {
        return Ok((user, false));
    }
    let found = match dir.authenticate(username, password).await {
        Ok(Verdict::Accepted(d)) if d.allowed && !d.disabled => d,
        Ok(_) => return Ok((user, false)),
        Err(e @ DirError::Tls(_)) => {
            tracing::warn!(error = %e, "LDAP sign-in impossible");
            // Retrying will not help: say what an administrator has to fix.
            return Err(ApiError::DirectoryUnavailable(
                "the account directory (LDAP) cannot be reached securely: this gateway does not trust its TLS \
                 certificate, so directory accounts cannot sign in; an administrator must fix the gateway's \
                 directory settings (--ldap-ca-file)"
                    .into(),
            ));
        }
        Err(e) => {
            tracing::warn!(error = %e, "LDAP sign-in impossible");
            return Err(ApiError::DirectoryUnavailable(
                "the account directory (LDAP) does not answer, so directory accounts cannot sign in right now; \
                 try again shortly"
                    .into(),
            ));
        }
    };
    let row = match user {
        Some(u) => sync::apply(meta, dir.as_ref(), u, &found).await?,
        // First sign-in before the sync has seen this user: created now, as the sync would.
        None => sync::create(meta, dir.as_ref(), &found, default_quota).await?,
    };
    Ok((Some(row), true))
}
