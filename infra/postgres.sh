#!/usr/bin/env bash
# infra/postgres.sh — a throwaway PostgreSQL 15 cluster for tests (and for trying the
# PostgreSQL metadata backend by hand).
#
#   infra/postgres.sh start    # initdb on first use, start; prints the URL (no-op if running)
#   infra/postgres.sh url      # prints postgres://postgres@127.0.0.1:PORT/postgres
#   infra/postgres.sh status   # exit 0 when running
#   infra/postgres.sh stop     # stop it (data kept, so the next start is quick)
#   infra/postgres.sh destroy  # stop and delete the cluster
#
# Environment:
#   NIMBUS_PG_DIR   cluster root (default /tmp/nimbus-pg): data in $NIMBUS_PG_DIR/data, the
#                   Unix socket in the data dir, the server log in $NIMBUS_PG_DIR/postgres.log.
#                   Must be reachable by the `postgres` user when run as root.
#   NIMBUS_PG_PORT  TCP port (default 55432), bound to 127.0.0.1 only.
#   NIMBUS_PG_BIN   server binaries (default Debian's /usr/lib/postgresql/15/bin).
#
# TEST-ONLY: trust authentication for every local and 127.0.0.1 connection, fsync off.
set -euo pipefail

PG_BIN=${NIMBUS_PG_BIN:-/usr/lib/postgresql/15/bin}
PG_DIR=${NIMBUS_PG_DIR:-/tmp/nimbus-pg}
PG_PORT=${NIMBUS_PG_PORT:-55432}
DATA=$PG_DIR/data
LOG=$PG_DIR/postgres.log
URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"

log() { printf '[postgres] %s\n' "$*" >&2; }
die() { printf '[postgres] ERROR: %s\n' "$*" >&2; exit 1; }

# initdb refuses to run as root: run the server tools as the `postgres` OS user then.
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd "$PG_DIR" && runuser -u postgres -- "$@")
    else
        (cd "$PG_DIR" && "$@")
    fi
}

running() {
    [ -f "$DATA/PG_VERSION" ] && as_pg "$PG_BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

ensure_cluster() {
    [ -x "$PG_BIN/initdb" ] || die "$PG_BIN/initdb not found; run infra/install-deps.sh (Debian postgresql-15)"
    mkdir -p "$PG_DIR"
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || die "no 'postgres' OS user (install Debian's postgresql package)"
        chown postgres:postgres "$PG_DIR"
        if [ -d "$DATA" ]; then chown -R postgres:postgres "$DATA"; fi
        if [ -f "$LOG" ]; then chown postgres:postgres "$LOG"; fi
    fi
    if [ ! -f "$DATA/PG_VERSION" ]; then
        # Missing or half-made by an interrupted run: start over.
        rm -rf "$DATA"
        log "initdb $DATA"
        as_pg "$PG_BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
    fi
}

cmd_start() {
    if running; then
        log "already running ($DATA)"
        echo "$URL"
        return 0
    fi
    ensure_cluster
    log "starting on 127.0.0.1:$PG_PORT (log: $LOG)"
    local opts="-p $PG_PORT -k $DATA -c listen_addresses=127.0.0.1"
    opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
    if ! as_pg "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG" -o "$opts" -w -t 60 start >/dev/null; then
        tail -n 20 "$LOG" >&2 || true
        die "PostgreSQL did not start (port $PG_PORT busy?)"
    fi
    "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 10 || die "PostgreSQL started but does not accept connections"
    echo "$URL"
}

cmd_stop() {
    if running; then
        as_pg "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null
        log "stopped"
    else
        log "not running"
    fi
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    url) echo "$URL" ;;
    status)
        if running; then log "running: $URL"; else log "not running"; exit 1; fi ;;
    destroy)
        cmd_stop
        rm -rf "$PG_DIR"
        log "removed $PG_DIR" ;;
    *)
        echo "usage: $0 start|stop|url|status|destroy" >&2
        exit 2 ;;
esac
