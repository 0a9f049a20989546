#!/usr/bin/env bash
# infra/run.sh — build and run the Nimbus gateway on a fresh Debian 12 machine.
#
#   ./infra/run.sh [EXTRA GATEWAY FLAGS...]
#
# Installs the build dependencies if missing (apt: build-essential pkg-config cmake; a Rust
# toolchain is expected to be there), builds `nimbus-gateway` and the `nimbus` CLI in release
# mode, then runs
#   nimbus-gateway serve --listen ${NIMBUS_LISTEN:-127.0.0.1:8080} --data-dir ${NIMBUS_DATA_DIR:-./data} EXTRA...
# (./data is relative to the directory you run this from.) On first start the gateway prints
# where to log in and the generated admin password (set NIMBUS_ADMIN_PASSWORD to choose it).
# Every gateway flag is also a NIMBUS_* variable, e.g. NIMBUS_DATABASE_URL, NIMBUS_STORE.
#
# CARGO_TARGET_DIR defaults to /var/cache/nimbus/target (shared with tests and CI on this
# machine), or ./target in the repository when that cache is not writable.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { printf '[run] %s\n' "$*" >&2; }
die() { printf '[run] ERROR: %s\n' "$*" >&2; exit 1; }

# --- build dependencies ----------------------------------------------------------------------
missing=()
for pkg in build-essential pkg-config cmake; do
    [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    log "apt: installing ${missing[*]}"
    sudo_cmd=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "need root (or sudo) to install ${missing[*]}"
        sudo_cmd=(sudo)
    fi
    "${sudo_cmd[@]}" apt-get update -qq
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" </dev/null
fi

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 || die "no Rust toolchain (cargo) found; see rust-toolchain.toml"

# --- build -----------------------------------------------------------------------------------
if [ -z "${CARGO_TARGET_DIR:-}" ]; then
    if mkdir -p /var/cache/nimbus/target 2>/dev/null && [ -w /var/cache/nimbus/target ]; then
        CARGO_TARGET_DIR=/var/cache/nimbus/target
    else
        CARGO_TARGET_DIR=$ROOT/target
    fi
fi
export CARGO_TARGET_DIR

log "cargo build --release -p nimbus-gateway -p nimbus-cli (target dir $CARGO_TARGET_DIR)"
(cd "$ROOT" && cargo build --release -p nimbus-gateway -p nimbus-cli)

BIN=$CARGO_TARGET_DIR/release

# The admin console is inside the binary: the cargo build above built it (npm ci / vite build
# only when stale); without npm cargo warned and /admin says how to get it.
log "admin console: http://${NIMBUS_LISTEN:-127.0.0.1:8080}/admin"
log "CLI: $BIN/nimbus  (e.g. $BIN/nimbus login http://${NIMBUS_LISTEN:-127.0.0.1:8080} --username admin)"

# --- run -------------------------------------------------------------------------------------
exec "$BIN/nimbus-gateway" serve \
    --listen "${NIMBUS_LISTEN:-127.0.0.1:8080}" \
    --data-dir "${NIMBUS_DATA_DIR:-./data}" \
    "$@"
