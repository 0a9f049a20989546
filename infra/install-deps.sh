#!/usr/bin/env bash
# infra/install-deps.sh — install everything the Nimbus tests need on a fresh Debian 12.
#
#   bash infra/install-deps.sh
#
# Idempotent and cache-friendly; safe to run before every test run:
#   * Debian packages: checked with dpkg first; `apt-get update` + install only when one is missing.
#   * MinIO (the real S3 store the e2e tests start): built from source with
#     `go install github.com/minio/minio@$MINIO_VERSION` into $NIMBUS_CACHE_DIR/bin (≈ 3 min on
#     2 cores), only when the binary is missing or the version recorded next to it differs.
#     Go's module and build caches live under $NIMBUS_CACHE_DIR/go, so a rebuild is quick.
#   * Garage (a second S3 store the e2e tests run against): built from source with
#     `cargo install garage@$GARAGE_VERSION --locked` into $NIMBUS_CACHE_DIR/garage/bin (≈ 12 min
#     on 2 cores), only when the binary is missing or does not report the wanted version and
#     features. Its build directory is $NIMBUS_CACHE_DIR/garage-target.
#   * openapi-spec-validator (tests/tests/docs.rs checks the served OpenAPI document with it):
#     pip-installed at $OPENAPI_VALIDATOR_VERSION into the virtualenv $NIMBUS_CACHE_DIR/openapi-venv,
#     linked as $NIMBUS_CACHE_DIR/bin/openapi-spec-validator; only when missing or another version.
#   * The tests' OpenID provider (tests/oidc-provider: the npm package oidc-provider, pinned in
#     its package-lock.json): `npm ci` there, only when node_modules is missing or stale.
#   * The deployment validator (infra/deploy/validate/, run by infra/validate-deploy.sh): built
#     with `go build` (module versions pinned in its go.mod/go.sum) into
#     $NIMBUS_CACHE_DIR/bin/nimbus-deploy-validate, only when the binary is missing or the hash of
#     its sources recorded next to it differs (≈ 1.5 min on 2 cores the first time).
#
# Environment:
#   NIMBUS_CACHE_DIR     cache root (default /var/cache/nimbus); MinIO ends up in $NIMBUS_CACHE_DIR/bin/minio,
#                        Garage in $NIMBUS_CACHE_DIR/garage/bin/garage
#   NIMBUS_SKIP_GARAGE   1: do not build or check Garage (infra/test.sh then skips the Garage backend)
#   NIMBUS_GARAGE_IF_CACHED  1: use Garage if it is already built, but do not build it now (a
#                        fresh machine's CI run: infra/test.sh then skips the Garage backend and
#                        names it in its closing line; .ci/run builds Garage after the tests when
#                        time allows, so the machine's next run includes it)
#
# Needs a Go toolchain new enough for MinIO (Go >= 1.24; the machines carry Go 1.26 in
# /usr/local/go) and a Rust toolchain (preinstalled; see rust-toolchain.toml). Neither is
# downloaded here.
set -euo pipefail

# MinIO publishes RELEASE.* tags, which are not semver, so Go needs a pseudo-version.
# This one is the upstream master of 2026-02-12 (commit 7aac2a2c5b7c); verified to build with
# Go 1.26 and to serve /minio/health/live.
MINIO_MODULE=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c

# Garage from crates.io, without its default features (no LMDB, no K2V, no telemetry): SQLite
# metadata and bundled C libraries are all the tests need.
GARAGE_VERSION=2.5.0
GARAGE_FEATURES=bundled-libs,sqlite

APT_PACKAGES=(
    build-essential pkg-config ca-certificates git curl cmake
    postgresql   # Debian 12: postgresql-15, used by infra/postgres.sh
    fuse3        # real FUSE mounts in tests
    rsync        # tests/tests/mount.rs: ordinary programs on the drive
    python3
    nginx wrk    # infra/bench-cache.sh: reference HTTP server and load generator
    rclone sqlite3  # tests/tests/ops_*.rs: reach into the S3 store, edit and back up SQLite; limits.rs seeds a folder
    iproute2     # tests/tests/cluster.rs: the MinIO cluster listens on an extra loopback address
    chromium fonts-liberation  # tests/tests/admin_ui.rs and bench.rs: the console and the bench report in a real browser
    litmus davfs2  # tests/tests/webdav.rs: the WebDAV compliance suite and a real WebDAV mount
    python3-boto3  # tests/tests/bench.rs: creates the direct-store target's bucket
    python3-venv   # the OpenAPI validator's virtualenv (below)
    slapd ldap-utils  # tests/tests/ldap.rs: a real OpenLDAP per test (tests/src/ldap.rs); no system directory is configured (below)
    libwebkit2gtk-4.1-dev libayatana-appindicator3-dev librsvg2-dev libxdo-dev xvfb xauth webkit2gtk-driver  # client/desktop (Tauri): `cargo build -p nimbus-desktop`; tests/tests/desktop_app.rs: the app under Xvfb via WebKitWebDriver
)

CACHE_DIR=${NIMBUS_CACHE_DIR:-/var/cache/nimbus}
BIN_DIR=$CACHE_DIR/bin
MINIO_BIN=$BIN_DIR/minio
MINIO_MARKER=$BIN_DIR/minio.version
GARAGE_ROOT=$CACHE_DIR/garage
GARAGE_BIN=$GARAGE_ROOT/bin/garage
GARAGE_MARKER=$GARAGE_ROOT/garage.version
GARAGE_TARGET_DIR=$CACHE_DIR/garage-target

log() { printf '[install-deps] %s\n' "$*"; }
die() { printf '[install-deps] ERROR: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

# --- Debian packages -----------------------------------------------------------------------
is_installed() {
    [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    is_installed "$pkg" || missing+=("$pkg")
done
if [ "${#missing[@]}" -eq 0 ]; then
    log "apt: all ${#APT_PACKAGES[@]} packages already installed"
else
    log "apt: installing ${missing[*]}"
    # slapd's package would otherwise configure and start a system-wide directory; the tests
    # start their own.
    echo "slapd slapd/no_configuration boolean true" | as_root debconf-set-selections
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" </dev/null
    log "apt: installed ${missing[*]}"
fi

# --- Toolchains (checked, not installed) -----------------------------------------------------
if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if command -v cargo >/dev/null 2>&1; then
    log "rust: $(cargo --version)"
else
    log "WARNING: no cargo on PATH; a Rust toolchain (see rust-toolchain.toml) is needed to build Nimbus"
fi

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
    export PATH="/usr/local/go/bin:$PATH"
fi

# --- MinIO -----------------------------------------------------------------------------------
want="$MINIO_MODULE@$MINIO_VERSION"
as_root mkdir -p "$BIN_DIR" "$CACHE_DIR/go"

# One builder at a time (two CI runs or a developer and CI sharing the cache).
exec 9>"$CACHE_DIR/.install-deps.lock"
flock 9

have=""
[ -f "$MINIO_MARKER" ] && have=$(cat "$MINIO_MARKER")
if [ -x "$MINIO_BIN" ] && [ "$have" = "$want" ]; then
    log "minio: $MINIO_BIN is already $want"
else
    command -v go >/dev/null 2>&1 || die "go not found (need Go >= 1.24 to build MinIO; expected in /usr/local/go)"
    log "minio: building $want with $(go version) (about 3 minutes on 2 cores)..."
    export GOPATH=$CACHE_DIR/go
    export GOMODCACHE=$CACHE_DIR/go/pkg/mod
    export GOCACHE=$CACHE_DIR/go/cache
    export GOBIN=$BIN_DIR
    export GOFLAGS=-buildvcs=false
    # Never download another Go toolchain: there is no network for it here.
    export GOTOOLCHAIN=local
    rm -f "$MINIO_MARKER"
    start=$(date +%s)
    (cd "$CACHE_DIR" && go install "$want")
    printf '%s\n' "$want" >"$MINIO_MARKER"
    log "minio: built in $(( $(date +%s) - start ))s -> $MINIO_BIN"
fi

"$MINIO_BIN" --version >/dev/null 2>&1 || die "$MINIO_BIN does not run (delete it and rerun)"
log "minio: $("$MINIO_BIN" --version 2>/dev/null | head -n1)"

# --- Deployment validator --------------------------------------------------------------------
# infra/validate-deploy.sh computes the same hash and rebuilds the same way when it differs.
VALIDATOR_BIN=$BIN_DIR/nimbus-deploy-validate
VALIDATOR_MARKER=$VALIDATOR_BIN.sources
validator_src=$(cd "$(dirname "${BASH_SOURCE[0]}")/deploy/validate" && pwd)
want=$(cd "$validator_src" && sha256sum go.mod go.sum ./*.go | sha256sum | cut -c1-64)
have=""
[ -f "$VALIDATOR_MARKER" ] && have=$(cat "$VALIDATOR_MARKER")
if [ -x "$VALIDATOR_BIN" ] && [ "$have" = "$want" ]; then
    log "deploy validator: $VALIDATOR_BIN is up to date"
else
    command -v go >/dev/null 2>&1 || die "go not found (need Go >= 1.26 to build the deploy validator)"
    log "deploy validator: building $VALIDATOR_BIN with $(go version)..."
    rm -f "$VALIDATOR_MARKER"
    start=$(date +%s)
    (cd "$validator_src" && GOMODCACHE=$CACHE_DIR/go/pkg/mod GOCACHE=$CACHE_DIR/go/cache \
        GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build -o "$VALIDATOR_BIN.tmp" . )
    mv "$VALIDATOR_BIN.tmp" "$VALIDATOR_BIN"
    printf '%s\n' "$want" >"$VALIDATOR_MARKER"
    log "deploy validator: built in $(( $(date +%s) - start ))s -> $VALIDATOR_BIN"
fi

# --- OpenAPI validator -----------------------------------------------------------------------
OPENAPI_VALIDATOR_VERSION=0.9.0
OPENAPI_VENV=$CACHE_DIR/openapi-venv
OPENAPI_VALIDATOR_BIN=$BIN_DIR/openapi-spec-validator
openapi_validator_version() {
    "$OPENAPI_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("openapi-spec-validator"))' 2>/dev/null || true
}
if [ -x "$OPENAPI_VALIDATOR_BIN" ] && [ "$(openapi_validator_version)" = "$OPENAPI_VALIDATOR_VERSION" ]; then
    log "openapi-spec-validator: $OPENAPI_VALIDATOR_BIN is already $OPENAPI_VALIDATOR_VERSION"
else
    log "openapi-spec-validator: installing $OPENAPI_VALIDATOR_VERSION into $OPENAPI_VENV..."
    [ -x "$OPENAPI_VENV/bin/pip" ] || python3 -m venv "$OPENAPI_VENV"
    "$OPENAPI_VENV/bin/pip" install --quiet "openapi-spec-validator==$OPENAPI_VALIDATOR_VERSION" </dev/null
    ln -sfn "$OPENAPI_VENV/bin/openapi-spec-validator" "$OPENAPI_VALIDATOR_BIN"
    [ "$(openapi_validator_version)" = "$OPENAPI_VALIDATOR_VERSION" ] \
        || die "openapi-spec-validator $OPENAPI_VALIDATOR_VERSION did not install into $OPENAPI_VENV"
fi

# --- Garage ----------------------------------------------------------------------------------
# `garage --version` prints e.g. `garage cargo:2.5.0 [features: bundled-libs, sqlite]`.
garage_want="garage@$GARAGE_VERSION --no-default-features --features $GARAGE_FEATURES"
garage_report="garage cargo:$GARAGE_VERSION [features: ${GARAGE_FEATURES//,/, }]"
garage_reports() {
    [ -x "$GARAGE_BIN" ] && [ "$("$GARAGE_BIN" --version 2>/dev/null | head -n1)" = "$garage_report" ]
}

if [ "${NIMBUS_SKIP_GARAGE:-}" = 1 ]; then
    log "garage: skipped (NIMBUS_SKIP_GARAGE=1); the e2e tests skip the sqlite_garage backend"
elif [ "${NIMBUS_GARAGE_IF_CACHED:-}" = 1 ] && ! garage_reports; then
    log "garage: not built on this machine yet and NIMBUS_GARAGE_IF_CACHED=1: not building it now; the e2e tests skip the sqlite_garage backend"
else
    have=""
    [ -f "$GARAGE_MARKER" ] && have=$(cat "$GARAGE_MARKER")
    if garage_reports && [ "$have" = "$garage_want" ]; then
        log "garage: $GARAGE_BIN is already $garage_want"
    elif garage_reports && [ -z "$have" ]; then
        # Built by hand with the same command before this step existed: adopt it.
        printf '%s\n' "$garage_want" >"$GARAGE_MARKER"
        log "garage: $GARAGE_BIN already reports $garage_report; recorded it"
    else
        command -v cargo >/dev/null 2>&1 || die "cargo not found (needed to build Garage)"
        log "garage: building $garage_want with $(cargo --version) (about 12 minutes on 2 cores)..."
        as_root mkdir -p "$GARAGE_ROOT" "$GARAGE_TARGET_DIR"
        rm -f "$GARAGE_MARKER"
        start=$(date +%s)
        (cd "$CACHE_DIR" && cargo install "garage@$GARAGE_VERSION" --locked --no-default-features \
            --features "$GARAGE_FEATURES" --root "$GARAGE_ROOT" --target-dir "$GARAGE_TARGET_DIR")
        garage_reports || die "$GARAGE_BIN does not report $garage_report after the build"
        printf '%s\n' "$garage_want" >"$GARAGE_MARKER"
        log "garage: built in $(( $(date +%s) - start ))s -> $GARAGE_BIN"
    fi
    "$GARAGE_BIN" --version >/dev/null 2>&1 || die "$GARAGE_BIN does not run (delete it and rerun)"
    log "garage: $("$GARAGE_BIN" --version 2>/dev/null | head -n1)"
fi
# --- the OpenID provider of the tests ---------------------------------------------------------
# tests/tests/oidc.rs signs in through a real OpenID provider: the npm package oidc-provider
# (pinned with jose in tests/oidc-provider/package-lock.json), run by node. `npm ci` only when
# node_modules is missing or older than the lock (npm rewrites node_modules/.package-lock.json
# on every install).
OIDC_PROVIDER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/oidc-provider
if ! command -v npm >/dev/null 2>&1; then
    die "npm not found (Node.js >= 20 runs the tests' OpenID provider)"
elif [ -f "$OIDC_PROVIDER_DIR/node_modules/.package-lock.json" ] \
    && [ ! "$OIDC_PROVIDER_DIR/package-lock.json" -nt "$OIDC_PROVIDER_DIR/node_modules/.package-lock.json" ]; then
    log "oidc-provider: $OIDC_PROVIDER_DIR/node_modules is up to date"
else
    log "oidc-provider: npm ci in $OIDC_PROVIDER_DIR"
    (cd "$OIDC_PROVIDER_DIR" && npm ci --no-audit --no-fund --prefer-offline </dev/null)
fi
# --- tauri-driver ----------------------------------------------------------------------------
# tests/tests/desktop_app.rs drives the real desktop app through WebDriver: tauri-driver (from
# crates.io) in front of Debian's WebKitWebDriver (webkit2gtk-driver). About 2 minutes on 2 cores.
TAURI_DRIVER_VERSION=2.1.0
TAURI_DRIVER_BIN=$BIN_DIR/tauri-driver
TAURI_DRIVER_MARKER=$BIN_DIR/tauri-driver.version
# It has no --version: a marker file records what was built.
if [ -x "$TAURI_DRIVER_BIN" ] && [ "$(cat "$TAURI_DRIVER_MARKER" 2>/dev/null)" = "$TAURI_DRIVER_VERSION" ]; then
    log "tauri-driver: $TAURI_DRIVER_BIN is already $TAURI_DRIVER_VERSION"
else
    command -v cargo >/dev/null 2>&1 || die "cargo not found (needed to build tauri-driver)"
    log "tauri-driver: building $TAURI_DRIVER_VERSION..."
    rm -f "$TAURI_DRIVER_MARKER"
    (cd "$CACHE_DIR" && cargo install "tauri-driver@$TAURI_DRIVER_VERSION" --locked --force --root "$CACHE_DIR" \
        --target-dir "$CACHE_DIR/tauri-driver-target")
    printf '%s\n' "$TAURI_DRIVER_VERSION" >"$TAURI_DRIVER_MARKER"
fi
log "done"
