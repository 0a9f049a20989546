//! Builds the UI (ui/) when it is stale, as gateway/build.rs does for the admin console (the
//! same rules: infra/frontend_build.rs), then lets Tauri embed ui/dist (tauri.conf.json's
//! frontendDist) at compile time.

#[path = "../../infra/frontend_build.rs"]
mod frontend_build;

fn main() {
    // The manifest dir at run time, not `env!` at the build script's compile time: a build
    // script compiled for a checkout elsewhere can be reused from a shared target dir.
    let root = std::env::var_os("CARGO_MANIFEST_DIR").map(std::path::PathBuf::from).unwrap_or_default();
    let ui = root.join("ui");
    if let Err(e) = frontend_build::bring_up_to_date(&ui, "client/desktop/ui", &["dist"]) {
        panic!("the desktop UI did not build: {e}");
    }
    // Without it `generate_context!` fails with a message that does not say how to get it.
    let dist = ui.join("dist/index.html");
    if !dist.exists() {
        panic!(
            "{} is missing and npm is not installed (or NIMBUS_UI_BUILD=0): install Node.js >= 20.19 \
             (infra/install-deps.sh) and build again, or build the UI with infra/desktop-ui.sh",
            dist.display()
        );
    }
    println!("cargo:rerun-if-changed=ui/dist");
    tauri_build::build();
}
