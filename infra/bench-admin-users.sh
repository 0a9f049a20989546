#!/usr/bin/env bash
# infra/bench-admin-users.sh — is the admin user list still fast at 10,000 users?
#
#   infra/bench-admin-users.sh [--users N] [--gateway BIN]
#
# Starts a gateway on SQLite in a temp dir (127.0.0.1, free port), times the console's calls
# (user list first page in each sort, a deep page, a search, the usage aggregates) with 100
# users, adds users up to N (default 10000) straight into the database (argon2 for 10,000
# passwords would take minutes and is not what is measured), restarts the gateway and times
# the same calls again. Prints median and p95 per call and the ratio N users / 100 users.
# With PostgreSQL too when NIMBUS_BENCH_PG_URL is set (a database it may fill; it is reset).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
USERS=10000
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/nimbus/target}
GW=${NIMBUS_GATEWAY_BIN:-$CARGO_TARGET_DIR/release/nimbus-gateway}
while [ $# -gt 0 ]; do
    case "$1" in
        --users) USERS=$2; shift 2 ;;
        --gateway) GW=$2; shift 2 ;;
        *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done
[ -x "$GW" ] || { echo "no gateway binary at $GW: cargo build --release -p nimbus-gateway, or pass --gateway" >&2; exit 2; }
TMP=$(mktemp -d /tmp/nimbus-bench-users.XXXXXX)
GW_PID=
cleanup() { [ -n "$GW_PID" ] && kill "$GW_PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export NIMBUS_ADMIN_PASSWORD=bench-admin-password

start() { # $1 = database url or empty
    local db=()
    [ -n "${1:-}" ] && db=(--database-url "$1")
    "$GW" serve --listen "127.0.0.1:$PORT" --data-dir "$TMP/data" "${db[@]}" >"$TMP/gw.log" 2>&1 &
    GW_PID=$!
    for _ in $(seq 200); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && return 0; sleep 0.1; done
    echo "the gateway did not start:" >&2; tail -20 "$TMP/gw.log" >&2; exit 1
}
stop() { kill "$GW_PID"; wait "$GW_PID" 2>/dev/null || true; GW_PID=; }

run() { # $1 = label, $2 = database url or empty
    rm -rf "$TMP/data"
    start "${2:-}"
    python3 "$ROOT/infra/bench_admin_users.py" seed --port "$PORT" --count 99 --db "${2:-sqlite:$TMP/data/nimbus.db}"
    python3 "$ROOT/infra/bench_admin_users.py" time --port "$PORT" --out "$TMP/small.json"
    stop
    python3 "$ROOT/infra/bench_admin_users.py" fill --count "$USERS" --db "${2:-sqlite:$TMP/data/nimbus.db}"
    start "${2:-}"
    python3 "$ROOT/infra/bench_admin_users.py" time --port "$PORT" --out "$TMP/big.json"
    stop
    python3 "$ROOT/infra/bench_admin_users.py" report --label "$1" --users "$USERS" "$TMP/small.json" "$TMP/big.json"
}

run sqlite
if [ -n "${NIMBUS_BENCH_PG_URL:-}" ]; then
    psql "$NIMBUS_BENCH_PG_URL" -qc 'DROP SCHEMA public CASCADE; CREATE SCHEMA public;' >/dev/null
    run postgresql "$NIMBUS_BENCH_PG_URL"
fi
