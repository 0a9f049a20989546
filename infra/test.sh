#!/usr/bin/env bash
# infra/test.sh — install everything the tests need and run the whole suite.
#
#   ./infra/test.sh [ARGS...]          full suite
#   ./infra/test.sh --fast [ARGS...]   fast tier only: no installs, no PostgreSQL, no MinIO;
#                                      runs the Python unit tests of infra/bench and
#                                      `cargo test --workspace --exclude nimbus-e2e`
#   ./infra/test.sh --clippy [ARGS...] the full suite, its build also being the
#                                      `cargo clippy --workspace --all-targets -D warnings` pass
#                                      (clippy-driver compiles the workspace crates: one build
#                                      instead of a check build plus a test build; .ci/run uses it)
# ARGS go to `cargo test --workspace` as they are: a test-name filter and/or `-- --nocapture`, e.g.
#   ./infra/test.sh postgres -- --nocapture
#
# The full suite:
#   0. python3 -m unittest discover -s infra/bench -t .   (the benchmarks' unit tests, seconds;
#      their counts join the closing line; also in --fast)
#   1. infra/install-deps.sh (Debian packages, MinIO built into /var/cache/nimbus/bin; cached)
#   2. cargo build --workspace --all-targets   (so the nimbus-gateway and nimbus binaries exist;
#      nimbus-gateway's build script builds the admin console, npm ci included, when stale)
#      then the vitest suites of the admin console and the desktop app's UI (their counts join
#      the closing line), and infra/validate-deploy.sh (the deployment artefacts
#      under infra/deploy/, validated not run; one test in the closing line)
#   3. infra/postgres.sh start                 (stopped again on exit if this script started it)
#   4. cargo test --workspace ARGS, with
#        NIMBUS_TEST_PG_URL       postgres://postgres@127.0.0.1:PORT/postgres (tests create their own DBs)
#        NIMBUS_TEST_MINIO_BIN    /var/cache/nimbus/bin/minio (tests start their own MinIO processes)
#        NIMBUS_TEST_GARAGE_BIN   /var/cache/nimbus/garage/bin/garage (tests start their own Garage
#                                 nodes; not set under NIMBUS_SKIP_GARAGE=1, which skips that backend,
#                                 nor under NIMBUS_GARAGE_IF_CACHED=1 while Garage is not built yet)
#        NIMBUS_TEST_REQUIRE_ALL  1 (a test whose component is missing fails instead of skipping)
# Exits with cargo test's status.
#
# CARGO_TARGET_DIR defaults to /var/cache/nimbus/target so every clone on this machine shares
# one build.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

log() { printf '[test] %s\n' "$*" >&2; }

# Runs cargo test, then prints one closing line with the totals over every test binary
# ("N passed, N failed"): cargo's own last line is often a doc-test run of 0 tests.
status=0
# vitest's counts (admin-ui and the desktop app's UI), added to the closing line.
ui_passed=0
ui_failed=0
ui_status=0
# Runs `npm test` (vitest) in $1 and adds its counts to ui_passed/ui_failed; a failing run
# sets ui_status, so the whole run fails at the end, after the cargo tests have run too.
run_vitest() {
    local dir=$1 out line p f st
    out=$(mktemp)
    set +e
    (cd "$dir" && npm test) 2>&1 | tee "$out"
    st=${PIPESTATUS[0]}
    set -e
    # "Tests  1 failed | 8 passed (9)", colours stripped.
    line=$(sed 's/\x1b\[[0-9;]*m//g' "$out" | grep -E '^ *Tests ' | tail -1 || true)
    p=$(printf '%s' "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
    f=$(printf '%s' "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 0)
    if [ "$st" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    rm -f "$out"
    log "vitest in ${dir#"$ROOT"/}: $p passed, $f failed (exit $st)"
    ui_passed=$((ui_passed + p))
    ui_failed=$((ui_failed + f))
    if [ "$st" -ne 0 ]; then ui_status=$st; fi
}
# The Python benchmarks' unit tests (infra/bench/test_*.py, standard library, a few seconds):
# their counts join the closing line, and a failure fails the whole run at the end.
py_passed=0
py_failed=0
run_pyunit() {
    local out ran bad st
    out=$(mktemp)
    set +e
    python3 -m unittest discover -s infra/bench -t . 2>&1 | tee "$out"
    st=${PIPESTATUS[0]}
    set -e
    ran=$(sed -nE 's/^Ran ([0-9]+) tests? in .*/\1/p' "$out" | tail -1)
    # "FAILED (failures=1, errors=2)"
    bad=$(awk '/^FAILED \(/ { while (match($0, /(failures|errors)=[0-9]+/)) {
                  v = substr($0, RSTART, RLENGTH); sub(/.*=/, "", v); n += v; $0 = substr($0, RSTART + RLENGTH) } }
               END { print n + 0 }' "$out")
    if [ "$st" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
    rm -f "$out"
    py_passed=$(( ${ran:-0} - bad < 0 ? 0 : ${ran:-0} - bad ))
    py_failed=$bad
    log "python unit tests (infra/bench): $py_passed passed, $py_failed failed (exit $st)"
}
# infra/validate-deploy.sh (the deployment artefacts), one test in the closing line.
deploy_passed=0
deploy_failed=0
# A skipped backend is never silent: its tests are left out with cargo's --skip, counted, and
# named in the closing line ("skipped-sqlite_garage: N passed, N failed, K skipped").
skip_label=""
skipped=0
run_tests() {
    local out
    out=$(mktemp)
    set +e
    cargo test "$@" 2>&1 | tee "$out"
    status=${PIPESTATUS[0]}
    set -e
    awk -v p="$((ui_passed + deploy_passed + py_passed))" -v f="$((ui_failed + deploy_failed + py_failed))" -v s="$skipped" -v label="$skip_label" \
        '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } }
         END { if (label != "") printf "%s: %d passed, %d failed, %d skipped\n", label, p, f, s; else printf "%d passed, %d failed\n", p, f }' "$out"
    rm -f "$out"
}

fast=0
clippy=0
case "${1:-}" in
    --fast) fast=1; shift ;;
    --clippy) clippy=1; shift ;;
esac

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/nimbus/target}
# A suite run builds each clone once: incremental state would only pile up in the shared
# target dir, one set per checkout path (33 GB of it once filled this machine's disk).
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
export RUST_BACKTRACE=${RUST_BACKTRACE:-1}

# First, in both tiers: they take seconds and need nothing built.
run_pyunit

if [ "$fast" -eq 1 ]; then
    # nimbus-desktop (Tauri) needs webkit2gtk and the built UI: not in the fast tier.
    log "fast tier: cargo test --workspace --exclude nimbus-e2e --exclude nimbus-desktop $*"
    run_tests --workspace --exclude nimbus-e2e --exclude nimbus-desktop "$@"
    if [ "$status" -eq 0 ] && [ "$py_failed" -ne 0 ]; then
        status=1
    fi
    exit "$status"
fi

bash "$ROOT/infra/install-deps.sh"
if [ "$clippy" -eq 1 ]; then
    # cargo clippy is cargo check with clippy-driver as the workspace's compiler; as the
    # compiler of a real build it lints and generates code in one pass. The same variables stay
    # set for `cargo test` below, so it reuses this build (they are part of cargo's fingerprint).
    RUSTC_WORKSPACE_WRAPPER=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver) ||
        { log "clippy-driver not found (rustup component add clippy)"; exit 1; }
    export RUSTC_WORKSPACE_WRAPPER
    export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
    log "clippy: $RUSTC_WORKSPACE_WRAPPER compiles the workspace crates with -D warnings"
fi
# The desktop app embeds its built UI (client/desktop/ui/dist) at compile time.
bash "$ROOT/infra/desktop-ui.sh"

# Every build of a test target from another checkout path or source leaves its executable
# (hundreds of MB each) in the shared target dir; only the newest of each name is ever run.
sweep_stale_tests() {
    local deps="$CARGO_TARGET_DIR/debug/deps"
    [ -d "$deps" ] || return 0
    find "$deps" -maxdepth 1 -type f -perm -u+x ! -name '*.*' -printf '%T@ %f\n' | sort -rn |
        awk '{ n = $2; sub(/-[0-9a-f]+$/, "", n); if (seen[n]++) print $2 }' |
        while read -r f; do rm -f "$deps/$f"; done
}
sweep_stale_tests

log "cargo build --workspace --all-targets (target dir $CARGO_TARGET_DIR)"
cargo build --workspace --all-targets
sweep_stale_tests

# The admin console and the users' web app were built (and their npm packages installed) by
# nimbus-gateway's build script above, into the binary that tests/tests/admin_ui.rs and
# web_app.rs drive in chromium. The vitest suites (admin-ui's covers both of its front ends),
# whose counts join the closing line.
run_vitest "$ROOT/admin-ui"
run_vitest "$ROOT/client/desktop/ui"

# The deployment artefacts (infra/deploy/): validated, not run; counts as one test.
if bash "$ROOT/infra/validate-deploy.sh"; then deploy_passed=1; else deploy_failed=1; fi
log "deployment artefacts: $deploy_passed passed, $deploy_failed failed"

started_pg=0
# shellcheck disable=SC2317  # called through the EXIT trap
stop_pg() {
    if [ "$started_pg" -eq 1 ]; then
        bash "$ROOT/infra/postgres.sh" stop || true
    fi
}
trap stop_pg EXIT
if ! bash "$ROOT/infra/postgres.sh" status 2>/dev/null; then
    started_pg=1
fi
NIMBUS_TEST_PG_URL=$(bash "$ROOT/infra/postgres.sh" start)

export NIMBUS_TEST_PG_URL
export NIMBUS_TEST_MINIO_BIN=${NIMBUS_CACHE_DIR:-/var/cache/nimbus}/bin/minio
# Under NIMBUS_GARAGE_IF_CACHED=1 install-deps.sh did not build a missing Garage; its marker is
# written only after a successful build, so no marker means no Garage: skip that backend, named.
if [ "${NIMBUS_GARAGE_IF_CACHED:-}" = 1 ] && [ "${NIMBUS_SKIP_GARAGE:-}" != 1 ] &&
    [ ! -f "${NIMBUS_CACHE_DIR:-/var/cache/nimbus}/garage/garage.version" ]; then
    log "Garage is not built on this machine yet (NIMBUS_GARAGE_IF_CACHED=1): skipping the sqlite_garage backend"
    export NIMBUS_SKIP_GARAGE=1
fi
if [ "${NIMBUS_SKIP_GARAGE:-}" != 1 ]; then
    export NIMBUS_TEST_GARAGE_BIN=${NIMBUS_CACHE_DIR:-/var/cache/nimbus}/garage/bin/garage
fi
export NIMBUS_TEST_REQUIRE_ALL=1

log "NIMBUS_TEST_PG_URL=$NIMBUS_TEST_PG_URL"
log "NIMBUS_TEST_MINIO_BIN=$NIMBUS_TEST_MINIO_BIN"
log "NIMBUS_TEST_GARAGE_BIN=${NIMBUS_TEST_GARAGE_BIN:-(unset: NIMBUS_SKIP_GARAGE=1)}"
log "NIMBUS_TEST_REQUIRE_ALL=$NIMBUS_TEST_REQUIRE_ALL"
# ARGS split at their first `--`: cargo's own, then the test binaries'.
cargo_args=()
test_args=()
after_dashes=0
for a in "$@"; do
    if [ "$after_dashes" -eq 0 ] && [ "$a" = "--" ]; then after_dashes=1; continue; fi
    if [ "$after_dashes" -eq 0 ]; then cargo_args+=("$a"); else test_args+=("$a"); fi
done
if [ "${NIMBUS_SKIP_GARAGE:-}" = 1 ]; then
    skip_label="skipped-sqlite_garage"
    skipped=$(cargo test --workspace "${cargo_args[@]}" -- "${test_args[@]}" --list 2>/dev/null |
        grep -c 'sqlite_garage.*: test$' || true)
    test_args+=(--skip sqlite_garage)
    log "Garage backend skipped (NIMBUS_SKIP_GARAGE=1): $skipped tests named in the closing line"
fi
# --no-fail-fast: every test binary runs even after one fails, so one run shows every failure.
log "cargo test --workspace --no-fail-fast ${cargo_args[*]} -- ${test_args[*]}"
run_tests --workspace --no-fail-fast "${cargo_args[@]}" -- "${test_args[@]}"
log "cargo test exited with $status"
if [ "$status" -eq 0 ] && [ "$ui_status" -ne 0 ]; then
    status=$ui_status
fi
if [ "$status" -eq 0 ] && [ "$deploy_failed" -ne 0 ]; then
    status=1
fi
if [ "$status" -eq 0 ] && [ "$py_failed" -ne 0 ]; then
    status=1
fi
exit "$status"
