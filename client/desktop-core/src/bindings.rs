//! The TypeScript declarations of [`crate::api`], as one file the UI imports
//! (client/desktop/ui/src/generated/bindings.ts). Regenerate with
//! `NIMBUS_UPDATE_BINDINGS=1 cargo test -p nimbus-desktop-core bindings`; without that
//! variable the test fails when the committed file differs.

use nimbus_proto::bindings::render;
use ts_rs::{Config, TS};

use crate::api::*;

/// Where the committed bindings live, relative to this crate.
pub const BINDINGS_PATH: &str = "../desktop/ui/src/generated/bindings.ts";

pub fn typescript() -> String {
    let cfg = Config::new().with_large_int("number");
    let decls = [
        SignInRequest::decl(&cfg),
        SsoSignInRequest::decl(&cfg),
        SignInOutcome::decl(&cfg),
        Account::decl(&cfg),
        TokenStorage::decl(&cfg),
        SignOutRequest::decl(&cfg),
        SignOutOutcome::decl(&cfg),
        MountRequest::decl(&cfg),
        Status::decl(&cfg),
        MountState::decl(&cfg),
        Connectivity::decl(&cfg),
        Quota::decl(&cfg),
        Activity::decl(&cfg),
        Conflict::decl(&cfg),
        DriveProblem::decl(&cfg),
        ProblemReason::decl(&cfg),
        ProblemAction::decl(&cfg),
        ResolveRequest::decl(&cfg),
        ResolveReply::decl(&cfg),
        CacheInfo::decl(&cfg),
        DesktopEvent::decl(&cfg),
        CommandError::decl(&cfg),
        ErrorCode::decl(&cfg),
        CommandName::decl(&cfg),
    ];
    let mut out = render(
        "// Generated from client/desktop-core/src/api.rs by ts-rs: do not edit.\n\
         // Regenerate: NIMBUS_UPDATE_BINDINGS=1 cargo test -p nimbus-desktop-core bindings\n\n",
        decls,
    );
    out.push_str(&format!("export const EVENT_NAME = {EVENT_NAME:?};\n"));
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn bindings_are_up_to_date() -> Result<(), String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(super::BINDINGS_PATH);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        nimbus_proto::bindings::check_committed(
            &path,
            &super::typescript(),
            "cargo test -p nimbus-desktop-core bindings",
        )
    }
}
