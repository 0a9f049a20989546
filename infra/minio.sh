#!/usr/bin/env bash
# infra/minio.sh — a local MinIO for trying the S3 backend by hand.
# (The e2e tests start their own MinIO processes; they don't use this.)
#
#   infra/minio.sh start    # start (no-op if already running), wait until healthy, print the env
#                           # to export (stdout is shell: eval "$(infra/minio.sh start)" works)
#   infra/minio.sh stop     # stop the MinIO this script started
#   infra/minio.sh status   # exit 0 when running
#
# Environment:
#   NIMBUS_MINIO_PORT   S3 port on 127.0.0.1 (default 9000); the console uses the next port
#   NIMBUS_MINIO_DIR    state root (default /tmp/nimbus-minio): objects in ./data, plus
#                       minio.pid and minio.log
#   NIMBUS_MINIO_BIN    binary (default /var/cache/nimbus/bin/minio, built by infra/install-deps.sh)
#   MINIO_ROOT_USER     access key (default nimbus)
#   MINIO_ROOT_PASSWORD secret key (default nimbus-secret)
set -euo pipefail

MINIO_BIN=${NIMBUS_MINIO_BIN:-${NIMBUS_CACHE_DIR:-/var/cache/nimbus}/bin/minio}
PORT=${NIMBUS_MINIO_PORT:-9000}
CONSOLE_PORT=$((PORT + 1))
DIR=${NIMBUS_MINIO_DIR:-/tmp/nimbus-minio}
PIDFILE=$DIR/minio.pid
LOGFILE=$DIR/minio.log
USER_KEY=${MINIO_ROOT_USER:-nimbus}
SECRET_KEY=${MINIO_ROOT_PASSWORD:-nimbus-secret}
ENDPOINT="http://127.0.0.1:$PORT"
BUCKET=nimbus
REGION=us-east-1

log() { printf '[minio] %s\n' "$*" >&2; }
die() { printf '[minio] ERROR: %s\n' "$*" >&2; exit 1; }

# The pid from our pid file, if that process is alive and is a minio.
our_pid() {
    local pid
    [ -f "$PIDFILE" ] || return 1
    pid=$(cat "$PIDFILE")
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q minio || return 1
    echo "$pid"
}

healthy() {
    curl -fsS -o /dev/null --max-time 2 "$ENDPOINT/minio/health/live" 2>/dev/null
}

print_env() {
    cat <<EOF
# MinIO is up: S3 $ENDPOINT, console http://127.0.0.1:$CONSOLE_PORT (user $USER_KEY)
# for the gateway (or any S3 client):
export AWS_ACCESS_KEY_ID=$USER_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_REGION=$REGION

# gateway flags (the gateway creates the bucket if it is missing):
#   nimbus-gateway serve --store s3 --s3-endpoint $ENDPOINT --s3-bucket $BUCKET --s3-region $REGION
EOF
}

cmd_start() {
    if our_pid >/dev/null; then
        healthy || die "MinIO (pid $(our_pid)) is running but not healthy; see $LOGFILE"
        log "already running"
        print_env
        return 0
    fi
    [ -x "$MINIO_BIN" ] || die "$MINIO_BIN not found; run infra/install-deps.sh first"
    if healthy; then
        die "something else already answers on $ENDPOINT; pick another NIMBUS_MINIO_PORT"
    fi
    mkdir -p "$DIR/data"
    log "starting $MINIO_BIN on 127.0.0.1:$PORT (log: $LOGFILE)"
    MINIO_ROOT_USER=$USER_KEY MINIO_ROOT_PASSWORD=$SECRET_KEY MINIO_UPDATE=off \
        setsid nohup "$MINIO_BIN" server "$DIR/data" --quiet \
        --address "127.0.0.1:$PORT" --console-address "127.0.0.1:$CONSOLE_PORT" \
        >"$LOGFILE" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    for _ in $(seq 1 300); do
        if healthy; then
            print_env
            return 0
        fi
        if ! our_pid >/dev/null; then
            tail -n 20 "$LOGFILE" >&2 || true
            rm -f "$PIDFILE"
            die "MinIO exited during startup"
        fi
        sleep 0.1
    done
    tail -n 20 "$LOGFILE" >&2 || true
    die "MinIO not healthy after 30 s (still running; '$0 stop' ends it)"
}

cmd_stop() {
    local pid
    if ! pid=$(our_pid); then
        rm -f "$PIDFILE"
        log "not running"
        return 0
    fi
    kill -TERM "$pid"
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "still running after 10 s, killing"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$PIDFILE"
    log "stopped (pid $pid)"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status)
        if pid=$(our_pid); then log "running (pid $pid) on $ENDPOINT"; else log "not running"; exit 1; fi ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2 ;;
esac
