//! Where the binaries under test are: `NIMBUS_GATEWAY_BIN` / `NIMBUS_CLI_BIN`, else next to the
//! test executable (`target/debug/deps/<test>-<hash>` → `target/debug/<binary>`).

use std::path::PathBuf;

use anyhow::{Context, bail};

/// The `nimbus-gateway` binary.
pub fn gateway_bin() -> anyhow::Result<PathBuf> {
    locate("NIMBUS_GATEWAY_BIN", "nimbus-gateway", "cargo build -p nimbus-gateway")
}

/// `nimbus-gateway describe --json`: the gateway's flags, variables, health routes and metrics,
/// as the binary under test states them.
pub fn gateway_describe() -> anyhow::Result<serde_json::Value> {
    let bin = gateway_bin()?;
    let out = std::process::Command::new(&bin)
        .args(["describe", "--json"])
        .output()
        .with_context(|| format!("cannot run {}", bin.display()))?;
    if !out.status.success() {
        bail!("{} describe --json: {}: {}", bin.display(), out.status, String::from_utf8_lossy(&out.stderr));
    }
    serde_json::from_slice(&out.stdout).context("describe --json printed no JSON")
}

/// The `nimbus` CLI binary.
pub fn cli_bin() -> anyhow::Result<PathBuf> {
    locate("NIMBUS_CLI_BIN", "nimbus", "cargo build -p nimbus-cli")
}

fn locate(var: &str, name: &str, build_hint: &str) -> anyhow::Result<PathBuf> {
    let path = match std::env::var_os(var) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => profile_dir()?.join(name),
    };
    if !path.is_file() {
        bail!("{name} not found at {} (set {var}, or build it: `{build_hint}`)", path.display());
    }
    Ok(path)
}

/// `target/<profile>`: the parent of the `deps` directory holding the running test executable.
fn profile_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the test executable")?;
    let mut dir = exe.parent().context("the test executable has no directory")?.to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    Ok(dir)
}
