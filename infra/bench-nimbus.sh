#!/usr/bin/env bash
# infra/bench-nimbus.sh — one `nimbus bench` run with every target, as docs/BENCHMARKS.md shows:
# a private MinIO, a release gateway on SQLite + that MinIO with its SSD cache, a FUSE mount of
# the admin's space, and the local disk; then `nimbus bench` (preset `full` by default).
#
#   infra/bench-nimbus.sh [--preset quick|full] [--out DIR] [--no-build]
#
# Everything listens on 127.0.0.1 and lives in a temp dir removed at the end (the report is
# copied to --out, default ./bench-report). Needs MinIO (infra/install-deps.sh) and fuse3.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PRESET=full
OUT=$PWD/bench-report
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --preset) PRESET=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/nimbus/target}
MINIO_BIN=${NIMBUS_MINIO_BIN:-${NIMBUS_CACHE_DIR:-/var/cache/nimbus}/bin/minio}
if [ "$BUILD" = 1 ]; then
    (cd "$ROOT" && cargo build --release -p nimbus-gateway -p nimbus-cli)
fi
GW=$CARGO_TARGET_DIR/release/nimbus-gateway
CLI=$CARGO_TARGET_DIR/release/nimbus

TMP=$(mktemp -d /tmp/nimbus-bench.XXXXXX)
PIDS=()
cleanup() {
    fusermount3 -u "$TMP/drive" 2>/dev/null || true
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
MINIO_PORT=$(free_port)
GW_PORT=$(free_port)
export AWS_ACCESS_KEY_ID=nimbus-bench AWS_SECRET_ACCESS_KEY=nimbus-bench-secret AWS_REGION=us-east-1

mkdir -p "$TMP/minio" "$TMP/drive" "$TMP/disk"
MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY MINIO_BROWSER=off \
    "$MINIO_BIN" server "$TMP/minio" --quiet --address "127.0.0.1:$MINIO_PORT" >"$TMP/minio.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$MINIO_PORT/minio/health/live" >/dev/null && break; sleep 0.2; done
python3 - "$MINIO_PORT" <<'EOF'
import sys, boto3
from botocore.client import Config
c = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", config=Config(s3={"addressing_style": "path"}))
for b in ("nimbus", "nimbus-bench-store"):
    try:
        c.create_bucket(Bucket=b)
    except c.exceptions.BucketAlreadyOwnedByYou:
        pass
EOF

NIMBUS_ADMIN_PASSWORD=bench-admin-password "$GW" serve --listen "127.0.0.1:$GW_PORT" --data-dir "$TMP/gw" \
    --store s3 --s3-endpoint "http://127.0.0.1:$MINIO_PORT" --s3-bucket nimbus \
    --cache-size 4GiB --cache-mem 256MiB >"$TMP/gw.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$GW_PORT/healthz" >/dev/null && break; sleep 0.2; done

export NIMBUS_CONFIG_DIR=$TMP/cli NIMBUS_PASSWORD=bench-admin-password
"$CLI" login "http://127.0.0.1:$GW_PORT" --username admin
"$CLI" mount "$TMP/drive" --cache-dir "$TMP/drive-cache" &
sleep 2
for _ in $(seq 100); do mountpoint -q "$TMP/drive" && break; sleep 0.2; done

"$CLI" bench --preset "$PRESET" --output "$TMP/report" --disk-dir "$TMP/disk" --mount "$TMP/drive" \
    --s3-endpoint "http://127.0.0.1:$MINIO_PORT" --s3-bucket nimbus-bench-store | tee "$TMP/table.txt"
mkdir -p "$OUT"
cp "$TMP/report/report.json" "$TMP/report/report.html" "$TMP/table.txt" "$OUT/"
echo "report: $OUT/report.html"
