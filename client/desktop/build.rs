fn main() {
    // The UI is embedded at compile time; without it `generate_context!` fails with a message
    // that does not say how to get it.
    let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui/dist/index.html");
    if !dist.exists() {
        panic!("{} is missing: build the UI first with infra/desktop-ui.sh", dist.display());
    }
    println!("cargo:rerun-if-changed=ui/dist");
    tauri_build::build();
}
