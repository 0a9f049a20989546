//! The TypeScript declarations of [`crate::wire`], as one file the web front ends import
//! (admin-ui/src/api/generated.ts), so no JSON shape is copied by hand. Regenerate with
//! `NIMBUS_UPDATE_BINDINGS=1 cargo test -p nimbus-proto bindings`; without that variable the
//! test fails when the committed file differs, which is how CI catches a stale copy.

use std::path::Path;

use ts_rs::{Config, TS};

use crate::wire::*;

/// Where the committed bindings live, relative to this crate.
pub const BINDINGS_PATH: &str = "../admin-ui/src/api/generated.ts";

pub fn typescript() -> String {
    // Sizes and ids are u64/i64 in Rust; JSON numbers stay exact below 2^53, far above any
    // byte count or id the gateway hands out.
    let cfg = Config::new().with_large_int("number");
    let decls = [
        ErrorBody::decl(&cfg),
        ErrorDetail::decl(&cfg),
        ErrorCode::decl(&cfg),
        Role::decl(&cfg),
        IdentitySource::decl(&cfg),
        LoginRequest::decl(&cfg),
        LoginResponse::decl(&cfg),
        AuthMethods::decl(&cfg),
        OidcTokenRequest::decl(&cfg),
        UserRef::decl(&cfg),
        Me::decl(&cfg),
        TotpEnrollment::decl(&cfg),
        TotpCode::decl(&cfg),
        TotpRecoveryCodes::decl(&cfg),
        UsageBreakdown::decl(&cfg),
        RetentionInfo::decl(&cfg),
        ServerInfo::decl(&cfg),
        EntryKind::decl(&cfg),
        Entry::decl(&cfg),
        DirListing::decl(&cfg),
        MoveRequest::decl(&cfg),
        BlockRef::decl(&cfg),
        MissingBlocksRequest::decl(&cfg),
        MissingBlocksResponse::decl(&cfg),
        CommitRequest::decl(&cfg),
        Manifest::decl(&cfg),
        VersionInfo::decl(&cfg),
        VersionList::decl(&cfg),
        RestoreVersionRequest::decl(&cfg),
        TrashEntry::decl(&cfg),
        TrashList::decl(&cfg),
        RestoreTrashRequest::decl(&cfg),
        TokenInfo::decl(&cfg),
        TokenList::decl(&cfg),
        CreateUserRequest::decl(&cfg),
        UserInfo::decl(&cfg),
        CreatedUser::decl(&cfg),
        UserList::decl(&cfg),
        UpdateUserRequest::decl(&cfg),
        AuditEntry::decl(&cfg),
        AuditList::decl(&cfg),
        ChangeOp::decl(&cfg),
        Change::decl(&cfg),
        ChangeList::decl(&cfg),
        UsageSummary::decl(&cfg),
        UserUsage::decl(&cfg),
        CreateS3KeyRequest::decl(&cfg),
        CreatedS3Key::decl(&cfg),
        S3KeyInfo::decl(&cfg),
        S3KeyList::decl(&cfg),
        SharePermission::decl(&cfg),
        CreateShareRequest::decl(&cfg),
        UpdateShareRequest::decl(&cfg),
        ShareInfo::decl(&cfg),
        ShareList::decl(&cfg),
        IncomingShareInfo::decl(&cfg),
        IncomingShareList::decl(&cfg),
        AdminShareInfo::decl(&cfg),
        AdminShareList::decl(&cfg),
        GroupInfo::decl(&cfg),
        GroupList::decl(&cfg),
        GroupRequest::decl(&cfg),
        GroupMemberRequest::decl(&cfg),
        LinkMode::decl(&cfg),
        CreateLinkRequest::decl(&cfg),
        UpdateLinkRequest::decl(&cfg),
        LinkInfo::decl(&cfg),
        LinkList::decl(&cfg),
        CacheStats::decl(&cfg),
        WarmRequest::decl(&cfg),
        WarmState::decl(&cfg),
        WarmStatus::decl(&cfg),
        StatsSample::decl(&cfg),
        StatsHistory::decl(&cfg),
    ];
    // The codes as a value too, so the front ends can tell a known code from anything else.
    let codes: Vec<String> = ErrorCode::ALL.iter().map(|c| format!("{:?}", c.as_str())).collect();
    let error_codes = format!("const ERROR_CODES: readonly ErrorCode[] = [{}];", codes.join(", "));
    render(
        "// Generated from proto/src/wire.rs by ts-rs: do not edit.\n\
         // Regenerate: NIMBUS_UPDATE_BINDINGS=1 cargo test -p nimbus-proto bindings\n\n",
        decls.into_iter().chain([error_codes]),
    )
}

/// One TypeScript module: `header`, then every declaration exported.
pub fn render(header: &str, decls: impl IntoIterator<Item = String>) -> String {
    let mut out = String::from(header);
    for d in decls {
        out.push_str("export ");
        out.push_str(d.trim());
        out.push_str("\n\n");
    }
    out
}

/// The test every crate with committed bindings runs: with `NIMBUS_UPDATE_BINDINGS` set it
/// writes `want` to `path`; otherwise it fails, naming `regenerate`, when the file differs.
pub fn check_committed(path: &Path, want: &str, regenerate: &str) -> Result<(), String> {
    if std::env::var_os("NIMBUS_UPDATE_BINDINGS").is_some() {
        return std::fs::write(path, want).map_err(|e| format!("cannot write {}: {e}", path.display()));
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    if have == want {
        Ok(())
    } else {
        Err(format!("{} is stale: run `NIMBUS_UPDATE_BINDINGS=1 {regenerate}` and commit it", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn bindings_are_up_to_date() -> Result<(), String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(super::BINDINGS_PATH);
        super::check_committed(&path, &super::typescript(), "cargo test -p nimbus-proto bindings")
    }
}
