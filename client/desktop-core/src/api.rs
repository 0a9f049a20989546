//! The contract between the app's logic and its front end: every command's arguments and
//! answer, the status snapshot and the events. Declared once here; `bindings.rs` exports them
//! to TypeScript (client/desktop/ui/src/generated/bindings.ts), and a test fails when that
//! committed file is stale.
//!
//! Field names are snake_case on both sides (serde's default), so the TypeScript code reads
//! exactly what Rust sends. Byte counts are `number` in TypeScript (exact below 2^53).

pub use nimbus_proto::drive::{DriveProblem, ProblemAction, ProblemReason, ResolveReply, ResolveRequest};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// `sign_in`: where and who. `trusted_fingerprint` is set only after the user accepted a
/// self-signed certificate's fingerprint shown by an earlier [`SignInOutcome::UntrustedCertificate`].
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
pub struct SignInRequest {
    pub server_url: String,
    pub username: String,
    pub password: String,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub trusted_fingerprint: Option<String>,
}

/// `sign_in_sso`: single sign-on through the system browser (the server's identity provider),
/// ending with a device token like `sign_in`. `trusted_fingerprint` as in [`SignInRequest`].
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
pub struct SsoSignInRequest {
    pub server_url: String,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub trusted_fingerprint: Option<String>,
}

/// The answer to `sign_in` and `sign_in_sso` (a wrong password and the like are errors, see
/// [`CommandError`]).
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SignInOutcome {
    SignedIn {
        account: Account,
    },
    /// The server's certificate is not trusted: show `fingerprint` and ask; retry with it in
    /// `trusted_fingerprint` if the user accepts.
    UntrustedCertificate {
        server_url: String,
        fingerprint: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct Account {
    pub server_url: String,
    pub username: String,
    pub token_storage: TokenStorage,
    /// Set when a self-signed certificate was trusted by fingerprint.
    #[ts(optional = nullable)]
    pub certificate_fingerprint: Option<String>,
}

/// Where the device token is kept; the UI shows a note for the file fallback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TokenStorage {
    /// The OS keychain (Keychain, Credential Manager, Secret Service).
    Keychain,
    /// No keychain is running: a file only this user can read (mode 0600).
    File { path: String },
}

/// `sign_out`. With `force: false` it refuses while uploads are pending.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
pub struct SignOutRequest {
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SignOutOutcome {
    /// Signed out; `revoked` says whether the server revoked the token (else `warning`).
    SignedOut {
        revoked: bool,
        #[ts(optional = nullable)]
        warning: Option<String>,
    },
    /// Nothing was done: `pending` files have changes not yet on the server. Unmount (which
    /// uploads them) or retry, or sign out with `force` (they stay in the local journal and
    /// go up at the next mount after signing in again).
    PendingUploads { pending: u32 },
}

/// `mount`: where (default: `~/Nimbus`, created if missing).
#[derive(Debug, Clone, Default, Serialize, Deserialize, TS)]
pub struct MountRequest {
    #[serde(default)]
    #[ts(optional = nullable)]
    pub mountpoint: Option<String>,
}

/// Everything the main window and the tray show, sent whole on every change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct Status {
    #[ts(optional = nullable)]
    pub account: Option<Account>,
    pub mount: MountState,
    pub connectivity: Connectivity,
    #[ts(optional = nullable)]
    pub quota: Option<Quota>,
    pub activity: Activity,
    #[ts(optional = nullable)]
    pub cache: Option<CacheInfo>,
    /// The last failure of a background action (mount died, status refresh failed).
    #[ts(optional = nullable)]
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct MountState {
    pub mounted: bool,
    /// The folder (Linux, macOS) or drive letter (Windows) while mounted, else the last one used.
    #[ts(optional = nullable)]
    pub location: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum Connectivity {
    Online,
    /// The gateway cannot be reached: cached files stay readable, writes wait in the journal.
    Offline,
    SignedOut,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct Quota {
    #[ts(type = "number")]
    pub used_bytes: u64,
    /// `null`: no quota.
    #[ts(type = "number | null")]
    pub total_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct Activity {
    /// Files with changes not yet committed on the server.
    pub pending_uploads: u32,
    pub uploads_in_flight: u32,
    pub commits_in_progress: u32,
    /// Recent upload errors, newest last; "retry" uploads again.
    pub errors: Vec<String>,
    pub conflicts: Vec<Conflict>,
    /// Changes the server refused (quota, someone else's lock, a name taken), kept on this
    /// computer until resolved with `resolve_problem`: retry, save a copy, discard.
    pub problems: Vec<DriveProblem>,
}

/// A file both this device and another changed: `path` holds the other version, `copy` this
/// device's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct Conflict {
    pub path: String,
    pub copy: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct CacheInfo {
    pub dir: String,
    #[ts(type = "number")]
    pub used_bytes: u64,
    #[ts(type = "number")]
    pub capacity_bytes: u64,
}

/// Events the back end emits; the Tauri shell sends each under its `EVENT_*` name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DesktopEvent {
    StatusChanged { status: Status },
}

/// The name of the one event channel.
pub const EVENT_NAME: &str = "nimbus://event";

/// What a failed command returns to the front end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct CommandError {
    pub code: ErrorCode,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadCredentials,
    Unreachable,
    CertificateChanged,
    NotSignedIn,
    AlreadyMounted,
    NotMounted,
    Invalid,
    Storage,
    Mount,
    Server,
}

/// The commands, by name (the Tauri shell registers one function per name; the UI's
/// `backend.ts` calls them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum CommandName {
    SignIn,
    /// Opens the system browser at the server's single sign-on and waits for it to come back
    /// ([`SsoSignInRequest`]); answers a [`SignInOutcome`].
    SignInSso,
    SignOut,
    GetStatus,
    Mount,
    Unmount,
    RetryUploads,
    /// Retry, save a copy of, or discard one refused change ([`ResolveRequest`]); answers a
    /// [`ResolveReply`] with what was done.
    ResolveProblem,
    FreeCache,
    OpenInFileManager,
}
