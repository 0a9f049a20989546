#!/usr/bin/env bash
# infra/check-windows.sh — type-check and lint, on this Linux machine, the Windows build
# (x86_64-pc-windows-msvc) of the drive and the desktop app: `cargo check`, then
# `cargo clippy --all-targets -- -D warnings`, of nimbus-blockcache, nimbus-client,
# nimbus-mount (with the WinFsp adapter), nimbus-cli, nimbus-desktop-core and nimbus-desktop
# (the Tauri shell). Exits 0 only when both pass. Nothing is linked or run: what that leaves to
# a Windows machine is in docs/MOUNT-WINDOWS.md ("What Linux CI verifies").
#
#   bash infra/check-windows.sh          install what is missing, check, lint
#   bash infra/check-windows.sh --install  only install what is missing (apt)
#   bash infra/check-windows.sh --warm   exit 0 if the build cache holds a finished check with
#                                        the installed toolchain (a run then takes seconds to a
#                                        few minutes, not the cold ~20; .ci/run decides with it)
#
# No prebuilt Windows std can be downloaded here, so the toolchain is Debian's rustc-web 1.96
# (rustc, cargo, clippy, std sources) building std itself (-Zbuild-std, hence RUSTC_BOOTSTRAP),
# called by absolute path with a PATH that does not reach rustup's proxies (they would follow
# rust-toolchain.toml's 1.95 pin, which has no Windows std). The pinned 1.95 stays the toolchain
# for everything else. C and assembly parts are stood in for: infra/windows-check/config.toml
# overrides the aws-lc-sys and mimalloc build scripts and selects winfsp-sys's pre-generated
# bindings (mount/Cargo.toml); `blake3/pure` avoids MASM. Warnings that tauri's build script
# prints about the resource compiler ("GNU compiler is not supported") are expected here.
#
# Environment: NIMBUS_CACHE_DIR (default /var/cache/nimbus): build cache $NIMBUS_CACHE_DIR/target-windows.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET_DIR=${NIMBUS_CACHE_DIR:-/var/cache/nimbus}/target-windows
STAMP=$TARGET_DIR/toolchain.version
log() { printf '[check-windows] %s\n' "$*" >&2; }

if [ "${1:-}" = --warm ]; then
    # The biggest dependencies (tauri, winfsp) and std built by the installed toolchain.
    deps=$TARGET_DIR/x86_64-pc-windows-msvc/debug/deps
    [ -x /usr/bin/rustc ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$(/usr/bin/rustc --version)" ] &&
        compgen -G "$deps/libtauri-*.rmeta" >/dev/null && compgen -G "$deps/libwinfsp-*.rmeta" >/dev/null &&
        compgen -G "$deps/libstd-*.rlib" >/dev/null
    exit
fi

packages=(rustc-web cargo-web rust-web-src rust-web-clippy)
missing=()
for p in "${packages[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    log "apt: installing ${missing[*]}"
    sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fi
[ "${1:-}" = --install ] && exit 0

# The Tauri shell embeds the desktop UI at compile time.
bash "$ROOT/infra/desktop-ui.sh"

version=$(/usr/bin/rustc --version)
mkdir -p "$TARGET_DIR"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$version" ]; then
    # Another toolchain's artefacts would never be used again: start clean.
    log "new toolchain ($version): emptying $TARGET_DIR"
    find "$TARGET_DIR" -mindepth 1 -delete
    echo "$version" >"$STAMP"
fi

cd "$ROOT"
# A clean environment: nothing of rustup's (RUSTUP_TOOLCHAIN, RUSTC, ...) may leak in.
cargo_env=(env -i HOME="$HOME" PATH=/usr/bin:/bin CARGO=/usr/bin/cargo RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$TARGET_DIR")
[ -n "${CARGO_HOME:-}" ] && cargo_env+=(CARGO_HOME="$CARGO_HOME")
args=(--config infra/windows-check/config.toml --locked --features blake3/pure
    -p nimbus-blockcache -p nimbus-client -p nimbus-mount -p nimbus-cli -p nimbus-desktop-core -p nimbus-desktop)
start=$SECONDS
log "cargo check ($version)"
"${cargo_env[@]}" /usr/bin/cargo check "${args[@]}"
log "cargo clippy --all-targets -- -D warnings"
# cargo-clippy by path: `cargo clippy` would find rustup's proxy in ~/.cargo/bin first.
"${cargo_env[@]}" /usr/bin/cargo-clippy clippy "${args[@]}" --all-targets -- -D warnings
log "passed in $((SECONDS - start)) s"
