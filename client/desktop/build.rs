fn main() {
    // The UI is embedded at compile time; without it `generate_context!` fails with a message
    // that does not say how to get it.
    // The manifest dir at run time, not `env!` at the build script's compile time: a build
    // script compiled for a checkout elsewhere can be reused from a shared target dir.
    let root = std::env::var_os("CARGO_MANIFEST_DIR").map(std::path::PathBuf::from).unwrap_or_default();
    let dist = root.join("ui/dist/index.html");
    if !dist.exists() {
        panic!("{} is missing: build the UI first with infra/desktop-ui.sh", dist.display());
    }
    println!("cargo:rerun-if-changed=ui/dist");
    tauri_build::build();
}
