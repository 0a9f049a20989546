//! JSON bodies of the REST API. Timestamps are RFC 3339 strings in UTC; ids are integers;
//! sizes are bytes. docs/API.md lists the endpoints that carry each type.

use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// Every error response: `{"error":{"code":"...","message":"..."}}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ErrorDetail {
    /// Stable, machine-readable; docs/API.md lists them with their statuses.
    pub code: ErrorCode,
    /// For people: what is wrong and what to do.
    pub message: String,
}

/// Every `code` the gateway puts in an error body. The gateway maps its errors to these in one
/// place (gateway/src/error.rs); clients and the front ends compare against them instead of
/// spelling the strings. A code is only ever added, never renamed: clients of an older release
/// keep the raw string of a code they do not know (`nimbus_client::Error::Api`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: a malformed request (query, body, header).
    BadRequest,
    /// 400: a path the name rules refuse as a whole (too long, empty component, bad encoding).
    InvalidPath,
    /// 400: a name the name rules refuse.
    InvalidName,
    /// 400: an uploaded block does not match its hash.
    HashMismatch,
    /// 400: a commit names blocks the space does not hold.
    MissingBlocks,
    /// 401: missing, invalid, expired or revoked credentials.
    Unauthorized,
    /// 401: the password is right, and the account has two-factor sign-in on: send the login
    /// again with `totp` (a current code or a recovery code).
    TotpRequired,
    /// 403: this token may only set up two-factor sign-in (the administrator requires it and
    /// the account has none yet): `/api/v1/me`, `/api/v1/auth/totp*` and logout answer.
    TotpSetupRequired,
    /// 403: authenticated, but not allowed.
    Forbidden,
    /// 404
    NotFound,
    /// 409: changed meanwhile (a stale base version), or a state that forbids the change.
    Conflict,
    /// 409: the target name is taken.
    AlreadyExists,
    /// 409: a path goes through a file.
    NotADirectory,
    /// 409: a file operation on a folder.
    IsADirectory,
    /// 413: the quota would be exceeded.
    QuotaExceeded,
    /// 413: a body over the limit.
    PayloadTooLarge,
    /// 412: `If-Match` / `If-None-Match` failed.
    PreconditionFailed,
    /// 423: a WebDAV lock guards the path.
    Locked,
    /// 416
    RangeNotSatisfiable,
    /// 415: no thumbnail can be made of this file (not an image of a kind the gateway decodes,
    /// damaged, or too large).
    UnsupportedMediaType,
    /// 429: throttled sign-ins or too many password checks at once (`Retry-After`).
    TooManyRequests,
    /// 503: the object store does not answer.
    StoreUnavailable,
    /// 503: the LDAP directory does not answer, so its accounts cannot sign in.
    DirectoryUnavailable,
    /// 500: details in the gateway log only.
    Internal,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub const ALL: [ErrorCode; 24] = [
        ErrorCode::BadRequest,
        ErrorCode::InvalidPath,
        ErrorCode::InvalidName,
        ErrorCode::HashMismatch,
        ErrorCode::MissingBlocks,
        ErrorCode::Unauthorized,
        ErrorCode::TotpRequired,
        ErrorCode::TotpSetupRequired,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::AlreadyExists,
        ErrorCode::NotADirectory,
        ErrorCode::IsADirectory,
        ErrorCode::QuotaExceeded,
        ErrorCode::PayloadTooLarge,
        ErrorCode::PreconditionFailed,
        ErrorCode::Locked,
        ErrorCode::RangeNotSatisfiable,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::TooManyRequests,
        ErrorCode::StoreUnavailable,
        ErrorCode::DirectoryUnavailable,
        ErrorCode::Internal,
    ];

    /// The wire string (what serde writes).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::InvalidPath => "invalid_path",
            ErrorCode::InvalidName => "invalid_name",
            ErrorCode::HashMismatch => "hash_mismatch",
            ErrorCode::MissingBlocks => "missing_blocks",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::TotpRequired => "totp_required",
            ErrorCode::TotpSetupRequired => "totp_setup_required",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::AlreadyExists => "already_exists",
            ErrorCode::NotADirectory => "not_a_directory",
            ErrorCode::IsADirectory => "is_a_directory",
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::PreconditionFailed => "precondition_failed",
            ErrorCode::Locked => "locked",
            ErrorCode::RangeNotSatisfiable => "range_not_satisfiable",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::TooManyRequests => "too_many_requests",
            ErrorCode::StoreUnavailable => "store_unavailable",
            ErrorCode::DirectoryUnavailable => "directory_unavailable",
            ErrorCode::Internal => "internal",
        }
    }

    /// The code a wire string names; None for a code this build does not know.
    pub fn parse(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[default]
    User,
    Admin,
}

/// Where an account comes from: created here, found in the LDAP directory, or made by an
/// OpenID Connect sign-in (docs/IDENTITY.md).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum IdentitySource {
    #[default]
    Local,
    Ldap,
    Oidc,
}

impl IdentitySource {
    pub fn as_str(self) -> &'static str {
        match self {
            IdentitySource::Local => "local",
            IdentitySource::Ldap => "ldap",
            IdentitySource::Oidc => "oidc",
        }
    }

    pub fn parse(s: &str) -> Option<IdentitySource> {
        match s {
            "local" => Some(IdentitySource::Local),
            "ldap" => Some(IdentitySource::Ldap),
            "oidc" => Some(IdentitySource::Oidc),
            _ => None,
        }
    }
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "user" => Some(Role::User),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LoginRequest {
    pub username: String,
    pub password: String,
    /// A name for this device's token, shown when listing and revoking tokens.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub device: Option<String>,
    /// The second factor when the account has two-factor sign-in on: the authenticator's
    /// current 6-digit code, or one of the recovery codes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub totp: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LoginResponse {
    pub token: String,
    pub expires_at: String,
    pub user: UserRef,
    /// Present (true) when the administrator requires two-factor sign-in for this account and
    /// it has none yet: the token only sets it up (`POST /api/v1/auth/totp`, then `/confirm`,
    /// which makes it a full token); anything else answers 403 `totp_setup_required`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "ts", ts(as = "Option<bool>", optional))]
    pub totp_setup_required: bool,
}

/// `GET /api/v1/auth/methods`: the ways to sign in this gateway offers, so that a front end
/// shows a "Sign in with single sign-on" button only where it works.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AuthMethods {
    /// `POST /api/v1/auth/login` with a username and password.
    pub password: bool,
    /// OpenID Connect single sign-on: `GET /api/v1/auth/oidc/start` (docs/IDENTITY.md).
    pub oidc: bool,
}

/// `POST /api/v1/auth/oidc/token`: a command-line or desktop client trades the one-time code its
/// loopback redirect received (RFC 8252) for a device token, proving with the PKCE verifier
/// whose challenge it gave to `/api/v1/auth/oidc/start`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct OidcTokenRequest {
    pub code: String,
    pub code_verifier: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct UserRef {
    pub id: i64,
    pub username: String,
    pub role: Role,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Me {
    pub id: i64,
    pub username: String,
    pub role: Role,
    /// `null` means no quota.
    pub quota_bytes: Option<u64>,
    /// Everything the space holds (the sum of `usage`); the quota applies to it.
    pub used_bytes: u64,
    pub usage: UsageBreakdown,
    /// Is two-factor sign-in (TOTP) on for this account?
    #[serde(default)]
    pub totp: bool,
    /// Where the account comes from.
    #[serde(default)]
    pub source: IdentitySource,
    /// The administrator requires two-factor sign-in for this account and it is not set up yet.
    #[serde(default)]
    pub totp_setup_required: bool,
    /// The administrator's policy (`--require-totp`) covers this account: two-factor sign-in
    /// must be on, so it cannot be turned off (`DELETE /api/v1/auth/totp` answers 403).
    #[serde(default)]
    pub totp_required: bool,
    /// The e-mail address the account's directory gives (LDAP `--ldap-email-attr`), if any.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub email: Option<String>,
    /// The display name the account's directory gives (LDAP `--ldap-display-name-attr`), if any.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub display_name: Option<String>,
}

/// A pending two-factor enrolment (`POST /api/v1/auth/totp`): the secret to put into an
/// authenticator app, as base32 text and as an `otpauth://` URL (for a QR code). Shown once.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TotpEnrollment {
    pub secret: String,
    pub otpauth_url: String,
}

/// A two-factor code: the authenticator's current 6-digit code (or, to turn it off, a
/// recovery code).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TotpCode {
    pub code: String,
}

/// Two-factor sign-in is on (`POST /api/v1/auth/totp/confirm`): single-use recovery codes,
/// shown this once (the gateway keeps only their hashes).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TotpRecoveryCodes {
    pub recovery_codes: Vec<String>,
}

/// What a space holds, by kind (bytes). Every version counts at its full size.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct UsageBreakdown {
    /// Current versions of the files in the space.
    pub current: u64,
    /// Older versions of those files (expired by the retention policy, or to make room).
    pub versions: u64,
    /// Files in the trash, with their older versions.
    pub trash: u64,
    /// Blocks uploaded that no version uses yet (uploads in progress or abandoned).
    pub pending: u64,
}

/// The gateway's retention settings (`--version-retention`, `--trash-retention`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RetentionInfo {
    /// `AGE:all` / `AGE:EVERY` steps, `forever` or `none`, e.g. `24h:all,30d:1d,365d:7d`.
    pub versions: String,
    /// How long an item stays in the trash, e.g. `30d`, or `forever`.
    pub trash: String,
    /// The trash retention in seconds; `null`: forever.
    pub trash_secs: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ServerInfo {
    pub version: String,
    /// Files are split into blocks of exactly this size (the last may be shorter).
    pub block_size: u64,
    /// The version retention policy, as `--version-retention` takes it.
    pub version_retention: String,
    /// The trash retention, as `--trash-retention` takes it.
    pub trash_retention: String,
    pub retention: RetentionInfo,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Dir,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
        }
    }
}

/// A file or directory as listed and returned by writes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Entry {
    pub id: i64,
    pub name: String,
    /// Absolute path inside the caller's space, starting with `/`.
    pub path: String,
    pub kind: EntryKind,
    pub size: u64,
    pub modified: String,
    /// The current version id of a file; `null` for directories.
    pub version: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct DirListing {
    pub entries: Vec<Entry>,
    /// Pass as `?cursor=` to get the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// Body of `POST /move` and `POST /copy`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct MoveRequest {
    pub from: String,
    pub to: String,
    /// Replace an existing file at `to` (directories are never replaced).
    #[serde(default)]
    pub overwrite: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct BlockRef {
    pub hash: String,
    pub size: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct MissingBlocksRequest {
    pub hashes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct MissingBlocksResponse {
    /// The subset of the asked hashes this space does not hold yet, in the asked order.
    pub missing: Vec<String>,
}

/// Body of `POST /manifests/{path}`: make this block list the file's new version.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CommitRequest {
    /// The version this edit started from; `null` when creating a new file.
    /// If the file's current version differs, the commit fails with 409 `conflict`.
    pub base_version: Option<i64>,
    pub blocks: Vec<BlockRef>,
    /// Replace whatever is there without checking `base_version`.
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Manifest {
    pub path: String,
    pub version: i64,
    pub size: u64,
    pub block_size: u64,
    pub modified: String,
    pub blocks: Vec<BlockRef>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct VersionInfo {
    pub version: i64,
    pub size: u64,
    pub created: String,
    pub current: bool,
    pub device: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct VersionList {
    pub versions: Vec<VersionInfo>,
}

/// Body of `POST /versions/{path}`: make an earlier version current again (as a new version).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RestoreVersionRequest {
    pub version: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TrashEntry {
    pub id: i64,
    pub name: String,
    pub original_path: String,
    pub kind: EntryKind,
    /// What its files hold (current versions).
    pub size: u64,
    /// Their older versions, also freed by a purge.
    pub versions_bytes: u64,
    pub deleted_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TrashList {
    pub entries: Vec<TrashEntry>,
    pub next_cursor: Option<String>,
}

/// Body of `POST /trash/{id}/restore`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RestoreTrashRequest {
    /// Where to put it back; by default its original path.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub to: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TokenInfo {
    pub id: i64,
    pub device: String,
    pub created: String,
    pub expires_at: String,
    pub last_used: Option<String>,
    /// The client address of the last recorded use (or of the sign-in): behind a trusted
    /// proxy, the client it forwarded for. Absent from older gateways.
    #[serde(default)]
    pub last_ip: Option<String>,
    /// This is the token the request was made with.
    pub current: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CreateUserRequest {
    pub username: String,
    /// Omit to have the server generate one; it is returned once as `generated_password`.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub password: Option<String>,
    /// `null` or omitted: the server's default quota.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub quota_bytes: Option<u64>,
    #[serde(default)]
    pub role: Role,
    /// `oidc`: an account that signs in only through single sign-on (no password; what
    /// `--oidc-provision existing` lets in). Omitted or `local`: a password account.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub source: Option<IdentitySource>,
}

/// A user as admins see it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct UserInfo {
    pub id: i64,
    pub username: String,
    pub role: Role,
    pub quota_bytes: Option<u64>,
    pub used_bytes: u64,
    pub usage: UsageBreakdown,
    pub disabled: bool,
    /// May the user share files and folders with others (`true` unless an administrator
    /// turned it off)?
    #[serde(default = "yes")]
    pub sharing: bool,
    /// May the user make public links (`true` unless an administrator turned them off; while
    /// off, the user's links do not open)?
    #[serde(default = "yes")]
    pub links: bool,
    /// Where the account comes from.
    #[serde(default)]
    pub source: IdentitySource,
    /// Is two-factor sign-in (TOTP) on?
    #[serde(default)]
    pub totp: bool,
    /// The last successful sign-in (RFC 3339), `null` if never.
    #[serde(default)]
    pub last_login: Option<String>,
    pub created: String,
    /// From the directory (LDAP `--ldap-email-attr`), `null` if none.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub email: Option<String>,
    /// From the directory (LDAP `--ldap-display-name-attr`), `null` if none.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub display_name: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CreatedUser {
    #[serde(flatten)]
    pub user: UserInfo,
    /// Set only when the server generated the password; shown once, never stored in clear.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub generated_password: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct UserList {
    pub users: Vec<UserInfo>,
    pub next_cursor: Option<String>,
}

/// Body of `PATCH /admin/users/{id}`: every field optional; `"quota_bytes": null` removes
/// the quota, an absent field leaves it as it is.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
// A field this request does not change (`username`, a typo) is refused, not silently ignored.
#[serde(deny_unknown_fields)]
pub struct UpdateUserRequest {
    #[serde(default, skip_serializing_if = "Option::is_none", with = "present")]
    #[cfg_attr(feature = "ts", ts(optional, type = "number | null"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>))]
    pub quota_bytes: Option<Option<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub disabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub role: Option<Role>,
    /// Turns sharing with others on or off for the user (shares made before stay until
    /// revoked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub sharing: Option<bool>,
    /// Turns public links on or off for the user; while off, their links do not open either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub links: Option<bool>,
}

fn yes() -> bool {
    true
}

/// `"field": null` (Some(None)) versus an absent field (None, by `#[serde(default)]`).
mod present {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn deserialize<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
    {
        Option::<T>::deserialize(d).map(Some)
    }

    pub fn serialize<S, T>(v: &Option<Option<T>>, s: S) -> Result<S::Ok, S::Error>
    where
        S: Serializer,
        T: Serialize,
    {
        v.as_ref().and_then(Option::as_ref).serialize(s)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AuditEntry {
    pub id: i64,
    pub at: String,
    pub actor: Option<String>,
    pub action: String,
    pub target: Option<String>,
    pub detail: Option<String>,
    pub ip: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AuditList {
    pub entries: Vec<AuditEntry>,
    pub next_cursor: Option<String>,
}

/// What happened to a path, in the change feed.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum ChangeOp {
    /// A new file (first version) or a copy (of a file or a whole folder) at `path`.
    Create,
    /// A new version of the file at `path` (upload, commit, version restore).
    Update,
    /// A folder created at `path` (explicitly or as a missing parent).
    Mkdir,
    /// `path` went to the trash, with everything under it.
    Delete,
    /// Moved or renamed from `from` to `path`, with everything under it.
    Move,
    /// Back from the trash at `path`, with everything under it.
    Restore,
    /// Removed from the trash for good (`path` is where it was when deleted).
    Purge,
}

impl ChangeOp {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeOp::Create => "create",
            ChangeOp::Update => "update",
            ChangeOp::Mkdir => "mkdir",
            ChangeOp::Delete => "delete",
            ChangeOp::Move => "move",
            ChangeOp::Restore => "restore",
            ChangeOp::Purge => "purge",
        }
    }

    pub fn parse(s: &str) -> Option<ChangeOp> {
        Some(match s {
            "create" => ChangeOp::Create,
            "update" => ChangeOp::Update,
            "mkdir" => ChangeOp::Mkdir,
            "delete" => ChangeOp::Delete,
            "move" => ChangeOp::Move,
            "restore" => ChangeOp::Restore,
            "purge" => ChangeOp::Purge,
            _ => return None,
        })
    }
}

/// One namespace change of the caller's space (`GET /changes`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Change {
    /// Position in the journal: increasing, not contiguous (spaces share the sequence).
    pub seq: i64,
    pub op: ChangeOp,
    /// Canonical path the change is about (after it, for a move).
    pub path: String,
    /// The canonical path before a move; only present for `move`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub from: Option<String>,
    pub kind: EntryKind,
    /// The node's id (for `purge`, of a node that no longer exists).
    pub node_id: Option<i64>,
    pub at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ChangeList {
    /// Oldest first.
    pub changes: Vec<Change>,
    /// Pass as `?cursor=` next time: the seq of the last change here, else the cursor given
    /// (or, without one, the space's latest).
    pub cursor: String,
    /// The cursor is beyond anything this space has (e.g. the server's database was restored
    /// from a backup): drop every cached listing and attribute, list again, and continue from
    /// `cursor`.
    pub reset: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_distinguishes_null_from_absent() -> Result<(), serde_json::Error> {
        let absent: UpdateUserRequest = serde_json::from_str(r#"{"disabled":true}"#)?;
        assert_eq!(absent.quota_bytes, None);
        let null: UpdateUserRequest = serde_json::from_str(r#"{"quota_bytes":null}"#)?;
        assert_eq!(null.quota_bytes, Some(None));
        let set: UpdateUserRequest = serde_json::from_str(r#"{"quota_bytes":5}"#)?;
        assert_eq!(set.quota_bytes, Some(Some(5)));
        // And back: clients (the CLI) send exactly what they mean.
        assert_eq!(serde_json::to_string(&absent)?, r#"{"disabled":true}"#);
        assert_eq!(serde_json::to_string(&null)?, r#"{"quota_bytes":null}"#);
        assert_eq!(serde_json::to_string(&set)?, r#"{"quota_bytes":5}"#);
        Ok(())
    }

    #[test]
    fn error_body_shape() -> Result<(), serde_json::Error> {
        let body = ErrorBody { error: ErrorDetail { code: ErrorCode::NotFound, message: "no such file".into() } };
        assert_eq!(serde_json::to_string(&body)?, r#"{"error":{"code":"not_found","message":"no such file"}}"#);
        Ok(())
    }

    #[test]
    fn error_codes_are_their_serde_strings() -> Result<(), serde_json::Error> {
        for code in ErrorCode::ALL {
            // as_str and parse must agree with what serde writes and reads.
            assert_eq!(serde_json::to_string(&code)?, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<ErrorCode>(&format!("\"{code}\""))?, code);
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::parse("no_such_code"), None);
        Ok(())
    }

    #[test]
    fn change_shape() -> Result<(), serde_json::Error> {
        let c = Change {
            seq: 7,
            op: ChangeOp::Mkdir,
            path: "/a".into(),
            from: None,
            kind: EntryKind::Dir,
            node_id: Some(3),
            at: "2026-01-01T00:00:00Z".into(),
        };
        assert_eq!(
            serde_json::to_string(&c)?,
            r#"{"seq":7,"op":"mkdir","path":"/a","kind":"dir","node_id":3,"at":"2026-01-01T00:00:00Z"}"#
        );
        let m: Change = serde_json::from_str(
            r#"{"seq":8,"op":"move","path":"/b","from":"/a","kind":"file","node_id":null,"at":"x"}"#,
        )?;
        assert_eq!((m.op, m.from.as_deref(), m.node_id), (ChangeOp::Move, Some("/a"), None));
        for op in [
            ChangeOp::Create,
            ChangeOp::Update,
            ChangeOp::Mkdir,
            ChangeOp::Delete,
            ChangeOp::Move,
            ChangeOp::Restore,
            ChangeOp::Purge,
        ] {
            assert_eq!(ChangeOp::parse(op.as_str()), Some(op));
            assert_eq!(serde_json::to_string(&op)?, format!("\"{}\"", op.as_str()));
        }
        Ok(())
    }
}

/// `GET /api/v1/admin/usage`: storage aggregates for the admin dashboard.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct UsageSummary {
    pub users: u64,
    /// Users not disabled.
    pub active_users: u64,
    pub total_bytes: u64,
    /// Live (not trashed) files over all spaces.
    pub files: u64,
    /// The users storing the most, largest first.
    pub top_users: Vec<UserUsage>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct UserUsage {
    pub id: i64,
    pub username: String,
    pub used_bytes: u64,
    pub quota_bytes: Option<u64>,
}

/// `POST /api/v1/keys`: create an S3 access key for yourself.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CreateS3KeyRequest {
    /// A label to tell keys apart (default "S3 key").
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub name: Option<String>,
}

/// A new S3 access key. `secret_access_key` is shown here once and never again.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CreatedS3Key {
    pub id: i64,
    pub access_key_id: String,
    pub secret_access_key: String,
    pub name: String,
    pub created: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct S3KeyInfo {
    pub id: i64,
    pub access_key_id: String,
    pub name: String,
    pub created: String,
    pub last_used: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct S3KeyList {
    pub keys: Vec<S3KeyInfo>,
}

/// What a share lets its recipient do: `read` (list, read, download) or `write` (also create,
/// change, rename and delete inside).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum SharePermission {
    Read,
    Write,
}

/// Body of `POST /api/v1/shares`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct CreateShareRequest {
    /// A file or folder of your space (not the whole space).
    pub path: String,
    /// The user to share it with; give either this or `group`.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub username: Option<String>,
    /// The group to share it with (each member but you gets it); give either this or
    /// `username`.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub group: Option<String>,
    pub permission: SharePermission,
}

/// Body of `PATCH /api/v1/shares/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct UpdateShareRequest {
    pub permission: SharePermission,
}

/// A share you gave.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ShareInfo {
    pub id: i64,
    /// Where the shared file or folder is in your space now; `null` while it is in the trash
    /// (the share then leads nowhere until it is restored).
    pub path: Option<String>,
    /// The user it is shared with; `null` for a share with a group.
    pub username: Option<String>,
    /// The group it is shared with; `null` for a share with a user.
    #[serde(default)]
    pub group: Option<String>,
    pub permission: SharePermission,
    pub created: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ShareList {
    pub shares: Vec<ShareInfo>,
}

/// A share given to you: reach it at `/Shared with me/<name>`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct IncomingShareInfo {
    pub id: i64,
    /// Who shared it.
    pub owner: String,
    /// Its entry under `/Shared with me`.
    pub name: String,
    pub kind: EntryKind,
    /// What you may do: the higher permission when a share with you and a share with a group
    /// of yours give the same file or folder (one entry).
    pub permission: SharePermission,
    /// The group it was shared with you through; `null` if shared with you yourself.
    #[serde(default)]
    pub group: Option<String>,
    pub created: String,
}

/// A share as an administrator sees it (`GET /api/v1/admin/shares`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AdminShareInfo {
    pub id: i64,
    /// Who shared it.
    pub owner: String,
    /// Where it is in the owner's space now; `null` while it is in the trash.
    pub path: Option<String>,
    /// The user it is shared with; `null` for a share with a group.
    pub username: Option<String>,
    /// The group it is shared with; `null` for a share with a user.
    #[serde(default)]
    pub group: Option<String>,
    pub permission: SharePermission,
    pub created: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AdminShareList {
    pub shares: Vec<AdminShareInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct IncomingShareList {
    pub shares: Vec<IncomingShareInfo>,
}

/// A group of users (`/api/v1/admin/groups`): what a share can be given to besides one user.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct GroupInfo {
    pub id: i64,
    pub name: String,
    /// The members' usernames, by name.
    pub members: Vec<String>,
    pub created: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct GroupList {
    pub groups: Vec<GroupInfo>,
}

/// Body of `POST /api/v1/admin/groups` and `PATCH /api/v1/admin/groups/{id}` (a new name).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct GroupRequest {
    /// 1-64 characters of letters, digits, `.`, `_` and `-`, starting with a letter or digit;
    /// unique case-insensitively.
    pub name: String,
}

/// Body of `POST /api/v1/admin/groups/{id}/members`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct GroupMemberRequest {
    pub username: String,
}

/// What a public link lets its visitors do.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum LinkMode {
    /// Download the file, or browse the folder and download it (files, or all as a zip).
    #[default]
    View,
    /// A file drop on a folder: visitors add files, and never see or overwrite any.
    Upload,
}

impl LinkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkMode::View => "view",
            LinkMode::Upload => "upload",
        }
    }

    pub fn parse(s: &str) -> Option<LinkMode> {
        match s {
            "view" => Some(LinkMode::View),
            "upload" => Some(LinkMode::Upload),
            _ => None,
        }
    }
}

/// Body of `POST /api/v1/links`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CreateLinkRequest {
    /// The file or folder of your space the link opens.
    pub path: String,
    pub mode: LinkMode,
    /// Visitors must send it (`X-Nimbus-Link-Password`, or the HTTP Basic password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub password: Option<String>,
    /// RFC 3339; the link answers 404 from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub expires_at: Option<String>,
    /// Downloads allowed (view links); the link answers 404 once they are used up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub max_downloads: Option<u64>,
}

/// Body of `PATCH /api/v1/links/{id}`: an absent field stays as it is, `null` removes it
/// (the password, the expiry, the download limit).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct UpdateLinkRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub mode: Option<LinkMode>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "present")]
    #[cfg_attr(feature = "ts", ts(optional, type = "string | null"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub password: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "present")]
    #[cfg_attr(feature = "ts", ts(optional, type = "string | null"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub expires_at: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "present")]
    #[cfg_attr(feature = "ts", ts(optional, type = "number | null"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>))]
    pub max_downloads: Option<Option<u64>>,
}

/// A public link as its owner sees it (creation, listing, change).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LinkInfo {
    pub id: i64,
    /// The secret part of the URL (`/s/{token}`).
    pub token: String,
    /// The link's page, as this gateway was addressed when asked.
    pub url: String,
    /// Where the target is now (links follow renames and moves).
    pub path: String,
    pub mode: LinkMode,
    pub expires_at: Option<String>,
    pub max_downloads: Option<u64>,
    /// Downloads counted so far (see docs/API.md, "Public links").
    pub downloads: u64,
    pub created: String,
    pub has_password: bool,
    /// False while the link opens nothing: its target is in the trash, it expired, or its
    /// downloads are used up.
    pub active: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LinkList {
    pub links: Vec<LinkInfo>,
}

/// `GET /admin/cache`: the gateway's block cache, counted since the gateway started.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CacheStats {
    pub mem_capacity_bytes: u64,
    pub mem_used_bytes: u64,
    pub mem_entries: u64,
    pub disk_enabled: bool,
    pub disk_dir: Option<String>,
    pub disk_capacity_bytes: u64,
    pub disk_used_bytes: u64,
    pub disk_entries: u64,
    pub hits_mem: u64,
    pub hits_disk: u64,
    pub misses: u64,
    pub bypassed: u64,
    /// Hits over hits + misses (0 before the first lookup).
    pub hit_ratio: f64,
    pub bytes_served_mem: u64,
    pub bytes_served_disk: u64,
    pub bytes_fetched_store: u64,
    pub store_fetches: u64,
    pub admission_rejects: u64,
    pub evictions_mem: u64,
    pub evictions_disk: u64,
    pub corrupt_entries: u64,
    pub write_errors: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum WarmState {
    Listing,
    Warming,
    Done,
    Failed,
}

impl WarmState {
    pub fn finished(self) -> bool {
        matches!(self, WarmState::Done | WarmState::Failed)
    }
}

/// Body of `POST /admin/cache/warm`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct WarmRequest {
    pub user_id: i64,
    /// A folder (or file) of that user's space; default the whole space.
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub path: Option<String>,
}

/// A cache warm-up job (`POST /admin/cache/warm`, `GET /admin/cache/warm/{id}`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct WarmStatus {
    pub id: u64,
    pub user_id: i64,
    pub path: String,
    pub state: WarmState,
    pub files_total: u64,
    pub files_done: u64,
    pub bytes_total: u64,
    pub bytes_done: u64,
    pub error: Option<String>,
}

/// One point of `GET /admin/stats/history`: rates over the interval that ended at `at`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct StatsSample {
    pub at: String,
    /// HTTP requests answered per second (every route, every status).
    pub requests_per_sec: f64,
    /// Of those, answers with a 5xx status per second.
    pub server_errors_per_sec: f64,
    /// Cache hits over lookups in the interval; `null` when nothing was looked up.
    pub cache_hit_ratio: Option<f64>,
    /// Bytes in the cache (memory + disk tiers) at `at`.
    pub cache_used_bytes: u64,
}

/// This gateway's recent activity, oldest sample first (kept in memory for the last hour).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct StatsHistory {
    pub interval_secs: u64,
    pub samples: Vec<StatsSample>,
}
