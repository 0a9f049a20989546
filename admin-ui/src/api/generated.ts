// Generated from proto/src/wire.rs by ts-rs: do not edit.
// Regenerate: NIMBUS_UPDATE_BINDINGS=1 cargo test -p nimbus-proto bindings

export type ErrorBody = { error: ErrorDetail, };

export type ErrorDetail = { 
/**
 * Stable, machine-readable; docs/API.md lists them with their statuses.
 */
code: ErrorCode, 
/**
 * For people: what is wrong and what to do.
 */
message: string, };

export type ErrorCode = "bad_request" | "invalid_path" | "invalid_name" | "hash_mismatch" | "missing_blocks" | "unauthorized" | "totp_required" | "totp_setup_required" | "forbidden" | "not_found" | "conflict" | "already_exists" | "not_a_directory" | "is_a_directory" | "quota_exceeded" | "payload_too_large" | "precondition_failed" | "locked" | "range_not_satisfiable" | "unsupported_media_type" | "too_many_requests" | "store_unavailable" | "directory_unavailable" | "internal";

export type Role = "user" | "admin";

export type IdentitySource = "local" | "ldap" | "oidc";

export type LoginRequest = { username: string, password: string, 
/**
 * A name for this device's token, shown when listing and revoking tokens.
 */
device?: string | null, 
/**
 * The second factor when the account has two-factor sign-in on: the authenticator's
 * current 6-digit code, or one of the recovery codes.
 */
totp?: string | null, };

export type LoginResponse = { token: string, expires_at: string, user: UserRef, 
/**
 * Present (true) when the administrator requires two-factor sign-in for this account and
 * it has none yet: the token only sets it up (`POST /api/v1/auth/totp`, then `/confirm`,
 * which makes it a full token); anything else answers 403 `totp_setup_required`.
 */
totp_setup_required?: boolean, };

export type AuthMethods = { 
/**
 * `POST /api/v1/auth/login` with a username and password.
 */
password: boolean, 
/**
 * OpenID Connect single sign-on: `GET /api/v1/auth/oidc/start` (docs/IDENTITY.md).
 */
oidc: boolean, };

export type OidcTokenRequest = { code: string, code_verifier: string, };

export type UserRef = { id: number, username: string, role: Role, };

export type Me = { id: number, username: string, role: Role, 
/**
 * `null` means no quota.
 */
quota_bytes: number | null, 
/**
 * Everything the space holds (the sum of `usage`); the quota applies to it.
 */
used_bytes: number, usage: UsageBreakdown, 
/**
 * Is two-factor sign-in (TOTP) on for this account?
 */
totp: boolean, 
/**
 * Where the account comes from.
 */
source: IdentitySource, 
/**
 * The administrator requires two-factor sign-in for this account and it is not set up yet.
 */
totp_setup_required: boolean, 
/**
 * The administrator's policy (`--require-totp`) covers this account: two-factor sign-in
 * must be on, so it cannot be turned off (`DELETE /api/v1/auth/totp` answers 403).
 */
totp_required: boolean, 
/**
 * The e-mail address the account's directory gives (LDAP `--ldap-email-attr`), if any.
 */
email?: string | null, 
/**
 * The display name the account's directory gives (LDAP `--ldap-display-name-attr`), if any.
 */
display_name?: string | null, };

export type TotpEnrollment = { secret: string, otpauth_url: string, };

export type TotpCode = { code: string, };

export type TotpRecoveryCodes = { recovery_codes: Array<string>, };

export type UsageBreakdown = { 
/**
 * Current versions of the files in the space.
 */
current: number, 
/**
 * Older versions of those files (expired by the retention policy, or to make room).
 */
versions: number, 
/**
 * Files in the trash, with their older versions.
 */
trash: number, 
/**
 * Blocks uploaded that no version uses yet (uploads in progress or abandoned).
 */
pending: number, };

export type RetentionInfo = { 
/**
 * `AGE:all` / `AGE:EVERY` steps, `forever` or `none`, e.g. `24h:all,30d:1d,365d:7d`.
 */
versions: string, 
/**
 * How long an item stays in the trash, e.g. `30d`, or `forever`.
 */
trash: string, 
/**
 * The trash retention in seconds; `null`: forever.
 */
trash_secs: number | null, };

export type ServerInfo = { version: string, 
/**
 * Files are split into blocks of exactly this size (the last may be shorter).
 */
block_size: number, 
/**
 * The version retention policy, as `--version-retention` takes it.
 */
version_retention: string, 
/**
 * The trash retention, as `--trash-retention` takes it.
 */
trash_retention: string, retention: RetentionInfo, };

export type EntryKind = "file" | "dir";

export type Entry = { id: number, name: string, 
/**
 * Absolute path inside the caller's space, starting with `/`.
 */
path: string, kind: EntryKind, size: number, modified: string, 
/**
 * The current version id of a file; `null` for directories.
 */
version: number | null, };

export type DirListing = { entries: Array<Entry>, 
/**
 * Pass as `?cursor=` to get the next page; `null` on the last page.
 */
next_cursor: string | null, };

export type MoveRequest = { from: string, to: string, 
/**
 * Replace an existing file at `to` (directories are never replaced).
 */
overwrite: boolean, };

export type BlockRef = { hash: string, size: number, };

export type MissingBlocksRequest = { hashes: Array<string>, };

export type MissingBlocksResponse = { 
/**
 * The subset of the asked hashes this space does not hold yet, in the asked order.
 */
missing: Array<string>, };

export type CommitRequest = { 
/**
 * The version this edit started from; `null` when creating a new file.
 * If the file's current version differs, the commit fails with 409 `conflict`.
 */
base_version: number | null, blocks: Array<BlockRef>, 
/**
 * Replace whatever is there without checking `base_version`.
 */
force: boolean, };

export type Manifest = { path: string, version: number, size: number, block_size: number, modified: string, blocks: Array<BlockRef>, };

export type VersionInfo = { version: number, size: number, created: string, current: boolean, device: string | null, };

export type VersionList = { versions: Array<VersionInfo>, };

export type RestoreVersionRequest = { version: number, };

export type TrashEntry = { id: number, name: string, original_path: string, kind: EntryKind, 
/**
 * What its files hold (current versions).
 */
size: number, 
/**
 * Their older versions, also freed by a purge.
 */
versions_bytes: number, deleted_at: string, };

export type TrashList = { entries: Array<TrashEntry>, next_cursor: string | null, };

export type RestoreTrashRequest = { 
/**
 * Where to put it back; by default its original path.
 */
to?: string | null, };

export type TokenInfo = { id: number, device: string, created: string, expires_at: string, last_used: string | null, 
/**
 * The client address of the last recorded use (or of the sign-in): behind a trusted
 * proxy, the client it forwarded for. Absent from older gateways.
 */
last_ip: string | null, 
/**
 * This is the token the request was made with.
 */
current: boolean, };

export type TokenList = { tokens: Array<TokenInfo>, };

export type CreateUserRequest = { username: string, 
/**
 * Omit to have the server generate one; it is returned once as `generated_password`.
 */
password?: string | null, 
/**
 * `null` or omitted: the server's default quota.
 */
quota_bytes?: number | null, role: Role, 
/**
 * `oidc`: an account that signs in only through single sign-on (no password; what
 * `--oidc-provision existing` lets in). Omitted or `local`: a password account.
 */
source?: IdentitySource | null, };

export type UserInfo = { id: number, username: string, role: Role, quota_bytes: number | null, used_bytes: number, usage: UsageBreakdown, disabled: boolean, 
/**
 * May the user share files and folders with others (`true` unless an administrator
 * turned it off)?
 */
sharing: boolean, 
/**
 * May the user make public links (`true` unless an administrator turned them off; while
 * off, the user's links do not open)?
 */
links: boolean, 
/**
 * Where the account comes from.
 */
source: IdentitySource, 
/**
 * Is two-factor sign-in (TOTP) on?
 */
totp: boolean, 
/**
 * The last successful sign-in (RFC 3339), `null` if never.
 */
last_login: string | null, created: string, 
/**
 * From the directory (LDAP `--ldap-email-attr`), `null` if none.
 */
email?: string | null, 
/**
 * From the directory (LDAP `--ldap-display-name-attr`), `null` if none.
 */
display_name?: string | null, };

export type CreatedUser = { 
/**
 * Set only when the server generated the password; shown once, never stored in clear.
 */
generated_password?: string, id: number, username: string, role: Role, quota_bytes: number | null, used_bytes: number, usage: UsageBreakdown, disabled: boolean, 
/**
 * May the user share files and folders with others (`true` unless an administrator
 * turned it off)?
 */
sharing: boolean, 
/**
 * May the user make public links (`true` unless an administrator turned them off; while
 * off, the user's links do not open)?
 */
links: boolean, 
/**
 * Where the account comes from.
 */
source: IdentitySource, 
/**
 * Is two-factor sign-in (TOTP) on?
 */
totp: boolean, 
/**
 * The last successful sign-in (RFC 3339), `null` if never.
 */
last_login: string | null, created: string, 
/**
 * From the directory (LDAP `--ldap-email-attr`), `null` if none.
 */
email?: string | null, 
/**
 * From the directory (LDAP `--ldap-display-name-attr`), `null` if none.
 */
display_name?: string | null, };

export type UserList = { users: Array<UserInfo>, next_cursor: string | null, };

export type UpdateUserRequest = { quota_bytes?: number | null, disabled?: boolean, password?: string, role?: Role, 
/**
 * Turns sharing with others on or off for the user (shares made before stay until
 * revoked).
 */
sharing?: boolean, 
/**
 * Turns public links on or off for the user; while off, their links do not open either.
 */
links?: boolean, };

export type AuditEntry = { id: number, at: string, actor: string | null, action: string, target: string | null, detail: string | null, ip: string | null, };

export type AuditList = { entries: Array<AuditEntry>, next_cursor: string | null, };

export type ChangeOp = "create" | "update" | "mkdir" | "delete" | "move" | "restore" | "purge";

export type Change = { 
/**
 * Position in the journal: increasing, not contiguous (spaces share the sequence).
 */
seq: number, op: ChangeOp, 
/**
 * Canonical path the change is about (after it, for a move).
 */
path: string, 
/**
 * The canonical path before a move; only present for `move`.
 */
from?: string, kind: EntryKind, 
/**
 * The node's id (for `purge`, of a node that no longer exists).
 */
node_id: number | null, at: string, };

export type ChangeList = { 
/**
 * Oldest first.
 */
changes: Array<Change>, 
/**
 * Pass as `?cursor=` next time: the seq of the last change here, else the cursor given
 * (or, without one, the space's latest).
 */
cursor: string, 
/**
 * The cursor is beyond anything this space has (e.g. the server's database was restored
 * from a backup): drop every cached listing and attribute, list again, and continue from
 * `cursor`.
 */
reset: boolean, };

export type UsageSummary = { users: number, 
/**
 * Users not disabled.
 */
active_users: number, total_bytes: number, 
/**
 * Live (not trashed) files over all spaces.
 */
files: number, 
/**
 * The users storing the most, largest first.
 */
top_users: Array<UserUsage>, };

export type UserUsage = { id: number, username: string, used_bytes: number, quota_bytes: number | null, };

export type CreateS3KeyRequest = { 
/**
 * A label to tell keys apart (default "S3 key").
 */
name?: string | null, };

export type CreatedS3Key = { id: number, access_key_id: string, secret_access_key: string, name: string, created: string, };

export type S3KeyInfo = { id: number, access_key_id: string, name: string, created: string, last_used: string | null, };

export type S3KeyList = { keys: Array<S3KeyInfo>, };

export type SharePermission = "read" | "write";

export type CreateShareRequest = { 
/**
 * A file or folder of your space (not the whole space).
 */
path: string, 
/**
 * The user to share it with; give either this or `group`.
 */
username?: string | null, 
/**
 * The group to share it with (each member but you gets it); give either this or
 * `username`.
 */
group?: string | null, permission: SharePermission, };

export type UpdateShareRequest = { permission: SharePermission, };

export type ShareInfo = { id: number, 
/**
 * Where the shared file or folder is in your space now; `null` while it is in the trash
 * (the share then leads nowhere until it is restored).
 */
path: string | null, 
/**
 * The user it is shared with; `null` for a share with a group.
 */
username: string | null, 
/**
 * The group it is shared with; `null` for a share with a user.
 */
group: string | null, permission: SharePermission, created: string, };

export type ShareList = { shares: Array<ShareInfo>, };

export type IncomingShareInfo = { id: number, 
/**
 * Who shared it.
 */
owner: string, 
/**
 * Its entry under `/Shared with me`.
 */
name: string, kind: EntryKind, 
/**
 * What you may do: the higher permission when a share with you and a share with a group
 * of yours give the same file or folder (one entry).
 */
permission: SharePermission, 
/**
 * The group it was shared with you through; `null` if shared with you yourself.
 */
group: string | null, created: string, };

export type IncomingShareList = { shares: Array<IncomingShareInfo>, };

export type AdminShareInfo = { id: number, 
/**
 * Who shared it.
 */
owner: string, 
/**
 * Where it is in the owner's space now; `null` while it is in the trash.
 */
path: string | null, 
/**
 * The user it is shared with; `null` for a share with a group.
 */
username: string | null, 
/**
 * The group it is shared with; `null` for a share with a user.
 */
group: string | null, permission: SharePermission, created: string, };

export type AdminShareList = { shares: Array<AdminShareInfo>, };

export type GroupInfo = { id: number, name: string, 
/**
 * The members' usernames, by name.
 */
members: Array<string>, created: string, };

export type GroupList = { groups: Array<GroupInfo>, };

export type GroupRequest = { 
/**
 * 1-64 characters of letters, digits, `.`, `_` and `-`, starting with a letter or digit;
 * unique case-insensitively.
 */
name: string, };

export type GroupMemberRequest = { username: string, };

export type LinkMode = "view" | "upload";

export type CreateLinkRequest = { 
/**
 * The file or folder of your space the link opens.
 */
path: string, mode: LinkMode, 
/**
 * Visitors must send it (`X-Nimbus-Link-Password`, or the HTTP Basic password).
 */
password?: string, 
/**
 * RFC 3339; the link answers 404 from then on.
 */
expires_at?: string, 
/**
 * Downloads allowed (view links); the link answers 404 once they are used up.
 */
max_downloads?: number, };

export type UpdateLinkRequest = { mode?: LinkMode, password?: string | null, expires_at?: string | null, max_downloads?: number | null, };

export type LinkInfo = { id: number, 
/**
 * The secret part of the URL (`/s/{token}`).
 */
token: string, 
/**
 * The link's page, as this gateway was addressed when asked.
 */
url: string, 
/**
 * Where the target is now (links follow renames and moves).
 */
path: string, mode: LinkMode, expires_at: string | null, max_downloads: number | null, 
/**
 * Downloads counted so far (see docs/API.md, "Public links").
 */
downloads: number, created: string, has_password: boolean, 
/**
 * False while the link opens nothing: its target is in the trash, it expired, or its
 * downloads are used up.
 */
active: boolean, };

export type LinkList = { links: Array<LinkInfo>, };

export type CacheStats = { mem_capacity_bytes: number, mem_used_bytes: number, mem_entries: number, disk_enabled: boolean, disk_dir: string | null, disk_capacity_bytes: number, disk_used_bytes: number, disk_entries: number, hits_mem: number, hits_disk: number, misses: number, bypassed: number, 
/**
 * Hits over hits + misses (0 before the first lookup).
 */
hit_ratio: number, bytes_served_mem: number, bytes_served_disk: number, bytes_fetched_store: number, store_fetches: number, admission_rejects: number, evictions_mem: number, evictions_disk: number, corrupt_entries: number, write_errors: number, };

export type WarmRequest = { user_id: number, 
/**
 * A folder (or file) of that user's space; default the whole space.
 */
path?: string | null, };

export type WarmState = "listing" | "warming" | "done" | "failed";

export type WarmStatus = { id: number, user_id: number, path: string, state: WarmState, files_total: number, files_done: number, bytes_total: number, bytes_done: number, error: string | null, };

export type StatsSample = { at: string, 
/**
 * HTTP requests answered per second (every route, every status).
 */
requests_per_sec: number, 
/**
 * Of those, answers with a 5xx status per second.
 */
server_errors_per_sec: number, 
/**
 * Cache hits over lookups in the interval; `null` when nothing was looked up.
 */
cache_hit_ratio: number | null, 
/**
 * Bytes in the cache (memory + disk tiers) at `at`.
 */
cache_used_bytes: number, };

export type StatsHistory = { interval_secs: number, samples: Array<StatsSample>, };

export const ERROR_CODES: readonly ErrorCode[] = ["bad_request", "invalid_path", "invalid_name", "hash_mismatch", "missing_blocks", "unauthorized", "totp_required", "totp_setup_required", "forbidden", "not_found", "conflict", "already_exists", "not_a_directory", "is_a_directory", "quota_exceeded", "payload_too_large", "precondition_failed", "locked", "range_not_satisfiable", "unsupported_media_type", "too_many_requests", "store_unavailable", "directory_unavailable", "internal"];

