//! Windows only: delay-load the WinFsp DLL. It is not on the DLL search path (it lives in the
//! WinFsp installation), so a normal import would stop `nimbus.exe` from starting at all on a
//! machine without it; delay-loaded, the drive loads it from the installation when mounting
//! (`winfsp::winfsp_init`), and every other command works without WinFsp.
//!
//! These are the lines `winfsp::build::winfsp_link_delayload()` (winfsp 0.12.6) prints for
//! MSVC targets, written out so that no build (Linux, macOS, or this script itself) needs the
//! winfsp crate as a build dependency. See docs/MOUNT-WINDOWS.md. Elsewhere: a no-op.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "windows" {
        return;
    }
    let dll = match var("CARGO_CFG_TARGET_ARCH").as_str() {
        "x86_64" => "winfsp-x64.dll",
        "x86" => "winfsp-x86.dll",
        "aarch64" => "winfsp-a64.dll",
        other => {
            println!("cargo:warning=WinFsp has no DLL for {other}; the drive will not load");
            return;
        }
    };
    if var("CARGO_CFG_TARGET_ENV") == "msvc" {
        println!("cargo:rustc-link-lib=dylib=delayimp");
        println!("cargo:rustc-link-arg=/DELAYLOAD:{dll}");
    } else {
        // winfsp-sys itself only builds for MSVC targets.
        println!("cargo:warning=the WinFsp drive is built for MSVC targets only");
    }
}
