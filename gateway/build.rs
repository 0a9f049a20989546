//! Builds the two front ends of the admin-ui Vite project when they are stale, so that
//! `cargo build` alone yields a gateway that serves them: the admin console (admin-ui/dist, at
//! /admin) and the users' web app (admin-ui/dist-web, at /). Copies each to OUT_DIR (admin-ui,
//! web-ui), which api/console.rs embeds. The copy makes the binary a function of what cargo
//! watches (the sources): deleting or rebuilding a dist by hand does not change what the next
//! build embeds. The rules are infra/frontend.sh's (shared with the desktop app's build script,
//! infra/frontend_build.rs). Without npm the gateway still builds, with a warning, and answers
//! /admin and / with a page saying how to get them.

#[path = "../infra/frontend_build.rs"]
mod frontend_build;

use frontend_build::Outcome;

/// (dist directory in admin-ui, OUT_DIR subdirectory, what it is).
const FRONTS: [(&str, &str, &str); 2] = [("dist", "admin-ui", "admin console"), ("dist-web", "web-ui", "web app")];

fn main() {
    // The manifest dir at run time, not `env!` at the build script's compile time: a build
    // script compiled for a checkout elsewhere can be reused from a shared target dir.
    let root = std::env::var_os("CARGO_MANIFEST_DIR").map(std::path::PathBuf::from).unwrap_or_default();
    let ui = root.join("../admin-ui");
    let outputs = FRONTS.map(|(dist, _, _)| dist);
    let outcome = frontend_build::bring_up_to_date(&ui, "admin-ui", &outputs);
    for (dist, out_name, what) in FRONTS {
        let built = ui.join(dist).join("index.html").exists();
        match &outcome {
            Ok(Outcome::Fresh) => {}
            Ok(Outcome::NoNpm) if !built => println!(
                "cargo:warning=npm is not installed: nimbus-gateway is built WITHOUT its {what} \
                 (it says how to get it). Install Node.js >= 20.19 (infra/install-deps.sh) and build again."
            ),
            Ok(Outcome::NoNpm) => println!(
                "cargo:warning=npm is not installed: embedding admin-ui/{dist} as it is, which may be older than its sources."
            ),
            Ok(Outcome::Skipped) if !built => println!(
                "cargo:warning=NIMBUS_UI_BUILD=0 and admin-ui/{dist} is missing: nimbus-gateway is built WITHOUT its {what}."
            ),
            Ok(Outcome::Skipped) => {}
            Err(e) => panic!("the admin console and web app did not build: {e}"),
        }
        let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join(out_name);
        if let Err(e) = copy_dist(&ui.join(dist), &out) {
            panic!("cannot copy admin-ui/{dist} to {}: {e}", out.display());
        }
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
