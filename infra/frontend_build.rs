// infra/frontend_build.rs: the build scripts' twin of infra/frontend.sh, included with
// `#[path]` by gateway/build.rs (the admin console, embedded into nimbus-gateway) and
// client/desktop/build.rs (the desktop app's UI, embedded by Tauri). Same rules as the script,
// so that either one finds the other's work up to date and nothing is built twice:
//   - `npm ci` when node_modules is missing or older than package-lock.json;
//   - `npm run build` (tsc -b && vite build) when an output (dist, and for admin-ui also dist-web:
//     the users' web app is a second build of the same Vite project) is missing or older than
//     its sources.
// Without npm on PATH, or with NIMBUS_UI_BUILD=0, nothing runs and the caller embeds whatever
// dist holds (possibly nothing).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// What `bring_up_to_date` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// dist is up to date with the sources (built now or already).
    Fresh,
    /// npm is not on PATH: dist was left as it is.
    NoNpm,
    /// NIMBUS_UI_BUILD=0: dist was left as it is.
    Skipped,
}

/// The inputs of a build, relative to the front end's directory (what frontend.sh compares);
/// `web` and `vite.web.config.ts` are the users' web app's (admin-ui only; absent elsewhere).
const INPUTS: [&str; 8] = [
    "src",
    "web",
    "index.html",
    "vite.config.ts",
    "vite.web.config.ts",
    "tsconfig.json",
    "package.json",
    "package-lock.json",
];

/// Brings the `outputs` of `ui` (directories its `npm run build` writes, each with an
/// index.html) up to date (see the top of this file) and tells cargo when to run the build
/// script again. `label` names the front end in messages.
pub fn bring_up_to_date(ui: &Path, label: &str, outputs: &[&str]) -> Result<Outcome, String> {
    println!("cargo:rerun-if-env-changed=NIMBUS_UI_BUILD");
    // Only the inputs, never dist or the whole directory: the build writes those, and a
    // build script that writes what it watches runs (and recompiles its crate) twice.
    for input in INPUTS {
        println!("cargo:rerun-if-changed={}", ui.join(input).display());
    }
    let skipped = std::env::var_os("NIMBUS_UI_BUILD").is_some_and(|v| v == "0");
    let npm = if skipped { None } else { find_npm() };
    let Some(npm) = npm else {
        // dist is then built by hand, or npm installed later: watch for both.
        println!("cargo:rerun-if-env-changed=PATH");
        println!("cargo:rerun-if-changed={}", ui.display());
        return Ok(if skipped { Outcome::Skipped } else { Outcome::NoNpm });
    };

    // Two builds of the same checkout (say clippy and test with different target dirs) must
    // not run npm in the same directory at once.
    let lock = std::fs::File::open(ui.join("package.json")).map_err(|e| format!("{label}/package.json: {e}"))?;
    lock.lock().map_err(|e| format!("cannot lock {label}/package.json: {e}"))?;

    // npm writes node_modules/.package-lock.json on every install: older than the lock = stale.
    if older(&ui.join("node_modules/.package-lock.json"), &[ui.join("package-lock.json")]) {
        // Strict, as in frontend.sh: a lock npm ci refuses is out of date and must be fixed.
        npm_run(&npm, ui, label, &["ci", "--no-audit", "--no-fund", "--prefer-offline"])?;
    }
    let inputs: Vec<PathBuf> = INPUTS.iter().map(|i| ui.join(i)).collect();
    if outputs.iter().any(|o| older(&ui.join(o).join("index.html"), &inputs)) {
        npm_run(&npm, ui, label, &["run", "build"])?;
    }
    Ok(Outcome::Fresh)
}

/// npm on PATH (npm.cmd on Windows).
fn find_npm() -> Option<PathBuf> {
    let name = if cfg!(windows) { "npm.cmd" } else { "npm" };
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

fn npm_run(npm: &Path, ui: &Path, label: &str, args: &[&str]) -> Result<(), String> {
    // Captured, not inherited: cargo reads the build script's stdout for `cargo:` lines.
    let out = Command::new(npm)
        .args(args)
        .current_dir(ui)
        .output()
        .map_err(|e| format!("{label}: cannot run npm {}: {e}", args.join(" ")))?;
    if out.status.success() {
        return Ok(());
    }
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
    Err(format!(
        "{label}: `npm {}` failed ({}):\n{tail}\n\
         Fix the front end, or build without running npm with NIMBUS_UI_BUILD=0 (dist is then embedded as it is).",
        args.join(" "),
        out.status
    ))
}

/// Whether `target` is missing or older than any file under `inputs` (directories walked).
fn older(target: &Path, inputs: &[PathBuf]) -> bool {
    let Some(built) = mtime(target) else { return true };
    inputs.iter().any(|i| newest(i).is_some_and(|t| t > built))
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// The newest modification time of a file, or of any file under a directory.
fn newest(p: &Path) -> Option<SystemTime> {
    let meta = std::fs::metadata(p).ok()?;
    if !meta.is_dir() {
        return meta.modified().ok();
    }
    let mut best = meta.modified().ok();
    for entry in std::fs::read_dir(p).ok()?.flatten() {
        if let Some(t) = newest(&entry.path()) {
            best = Some(best.map_or(t, |b| b.max(t)));
        }
    }
    best
}
