// Generated from client/desktop-core/src/api.rs by ts-rs: do not edit.
// Regenerate: NIMBUS_UPDATE_BINDINGS=1 cargo test -p nimbus-desktop-core bindings

export type SignInRequest = { server_url: string, username: string, password: string, trusted_fingerprint?: string | null, };

export type SsoSignInRequest = { server_url: string, trusted_fingerprint?: string | null, };

export type SignInOutcome = { "kind": "signed_in", account: Account, } | { "kind": "untrusted_certificate", server_url: string, fingerprint: string, };

export type Account = { server_url: string, username: string, token_storage: TokenStorage, 
/**
 * Set when a self-signed certificate was trusted by fingerprint.
 */
certificate_fingerprint?: string | null, };

export type TokenStorage = { "kind": "keychain" } | { "kind": "file", path: string, };

export type SignOutRequest = { force: boolean, };

export type SignOutOutcome = { "kind": "signed_out", revoked: boolean, warning?: string | null, } | { "kind": "pending_uploads", pending: number, };

export type MountRequest = { mountpoint?: string | null, };

export type Status = { account?: Account | null, mount: MountState, connectivity: Connectivity, quota?: Quota | null, activity: Activity, cache?: CacheInfo | null, 
/**
 * The last failure of a background action (mount died, status refresh failed).
 */
last_error?: string | null, };

export type MountState = { mounted: boolean, 
/**
 * The folder (Linux, macOS) or drive letter (Windows) while mounted, else the last one used.
 */
location?: string | null, };

export type Connectivity = "online" | "offline" | "signed_out";

export type Quota = { used_bytes: number, 
/**
 * `null`: no quota.
 */
total_bytes: number | null, };

export type Activity = { 
/**
 * Files with changes not yet committed on the server.
 */
pending_uploads: number, uploads_in_flight: number, commits_in_progress: number, 
/**
 * Recent upload errors, newest last; "retry" uploads again.
 */
errors: Array<string>, conflicts: Array<Conflict>, 
/**
 * Changes the server refused (quota, someone else's lock, a name taken), kept on this
 * computer until resolved with `resolve_problem`: retry, save a copy, discard.
 */
problems: Array<DriveProblem>, };

export type Conflict = { path: string, copy: string, };

export type DriveProblem = { 
/**
 * The file's path in the space (as it is now, if it was renamed since).
 */
path: string, reason: ProblemReason, 
/**
 * For people: what happened and what can be done.
 */
message: string, 
/**
 * The gateway's own words.
 */
detail: string, 
/**
 * When the change was first refused (RFC 3339).
 */
since: string, 
/**
 * How many times it was tried.
 */
attempts: number, 
/**
 * What can be done (every problem offers all three today; a front end shows these).
 */
actions: Array<ProblemAction>, };

export type ProblemReason = "quota" | "locked" | "name_conflict" | "invalid_name" | "denied" | "failed";

export type ProblemAction = "retry" | "save_copy" | "discard";

export type ResolveRequest = { 
/**
 * The file's path in the space, as [`DriveProblem::path`] gives it.
 */
path: string, action: ProblemAction, };

export type ResolveReply = { ok: boolean, 
/**
 * What was done ("uploaded", "saved as /a/b (copy ...).txt") or why not.
 */
message: string, };

export type CacheInfo = { dir: string, used_bytes: number, capacity_bytes: number, };

export type DesktopEvent = { "kind": "status_changed", status: Status, };

export type CommandError = { code: ErrorCode, message: string, };

export type ErrorCode = "bad_credentials" | "unreachable" | "certificate_changed" | "not_signed_in" | "already_mounted" | "not_mounted" | "invalid" | "storage" | "mount" | "server";

export type CommandName = "sign_in" | "sign_in_sso" | "sign_out" | "get_status" | "mount" | "unmount" | "retry_uploads" | "resolve_problem" | "free_cache" | "open_in_file_manager";

export const EVENT_NAME = "nimbus://event";
