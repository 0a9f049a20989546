//! Builds the admin console (admin-ui/) when it is stale, so that `cargo build` alone yields a
//! gateway that serves it, and copies admin-ui/dist to OUT_DIR/admin-ui, which api/console.rs
//! embeds. The copy makes the binary a function of what cargo watches (the console's sources):
//! deleting or rebuilding admin-ui/dist by hand does not change what the next build embeds. The rules are
//! infra/frontend.sh's (shared with the desktop app's build script, infra/frontend_build.rs).
//! Without npm the gateway still builds, with a warning, and answers /admin with a page saying
//! how to get the console.

#[path = "../infra/frontend_build.rs"]
mod frontend_build;

use frontend_build::Outcome;

fn main() {
    // The manifest dir at run time, not `env!` at the build script's compile time: a build
    // script compiled for a checkout elsewhere can be reused from a shared target dir.
    let root = std::env::var_os("CARGO_MANIFEST_DIR").map(std::path::PathBuf::from).unwrap_or_default();
    let ui = root.join("../admin-ui");
    let built = ui.join("dist/index.html").exists();
    match frontend_build::bring_up_to_date(&ui, "admin-ui") {
        Ok(Outcome::Fresh) => {}
        Ok(Outcome::NoNpm) if !built => println!(
            "cargo:warning=npm is not installed: nimbus-gateway is built WITHOUT its admin console \
             (/admin says how to get it). Install Node.js >= 20.19 (infra/install-deps.sh) and build again."
        ),
        Ok(Outcome::NoNpm) => println!(
            "cargo:warning=npm is not installed: embedding admin-ui/dist as it is, which may be older than admin-ui/src."
        ),
        Ok(Outcome::Skipped) if !built => println!(
            "cargo:warning=NIMBUS_UI_BUILD=0 and admin-ui/dist is missing: nimbus-gateway is built WITHOUT its admin console."
        ),
        Ok(Outcome::Skipped) => {}
        Err(e) => panic!("the admin console did not build: {e}"),
    }
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("admin-ui");
    if let Err(e) = copy_dist(&ui.join("dist"), &out) {
        panic!("cannot copy admin-ui/dist to {}: {e}", out.display());
    }
}

/// Replaces `to` with a copy of `from` (nothing when `from` is missing).
fn copy_dist(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to)?;
    }
    if !from.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dist(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
