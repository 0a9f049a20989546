//! The TypeScript declarations of [`crate::api`], as one file the UI imports
//! (client/desktop/ui/src/generated/bindings.ts). Regenerate with
//! `NIMBUS_UPDATE_BINDINGS=1 cargo test -p nimbus-desktop-core bindings`; without that
//! variable the test fails when the committed file differs.

use ts_rs::{Config, TS};

use crate::api::*;

/// Where the committed bindings live, relative to this crate.
pub const BINDINGS_PATH: &str = "../desktop/ui/src/generated/bindings.ts";

pub fn typescript() -> String {
    let cfg = Config::new().with_large_int("number");
    let decls = [
        SignInRequest::decl(&cfg),
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
        CacheInfo::decl(&cfg),
        DesktopEvent::decl(&cfg),
        CommandError::decl(&cfg),
        ErrorCode::decl(&cfg),
        CommandName::decl(&cfg),
    ];
    let mut out = String::from(
        "// Generated from client/desktop-core/src/api.rs by ts-rs: do not edit.\n\
         // Regenerate: NIMBUS_UPDATE_BINDINGS=1 cargo test -p nimbus-desktop-core bindings\n\n",
    );
    for d in decls {
        out.push_str("export ");
        out.push_str(d.trim());
        out.push_str("\n\n");
    }
    out.push_str(&format!("export const EVENT_NAME = {EVENT_NAME:?};\n"));
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn bindings_are_up_to_date() -> Result<(), Box<dyn std::error::Error>> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(super::BINDINGS_PATH);
        let want = super::typescript();
        if std::env::var_os("NIMBUS_UPDATE_BINDINGS").is_some() {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&path, &want)?;
            return Ok(());
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is stale: run `NIMBUS_UPDATE_BINDINGS=1 cargo test -p nimbus-desktop-core bindings` and commit it",
            path.display()
        );
        Ok(())
    }
}
