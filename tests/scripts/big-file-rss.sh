#!/usr/bin/env bash
# Streams a large file (default 2 GiB) up to and back down from a fresh gateway on loopback
# and prints the gateway's resident memory while it works, plus the peak (VmHWM).
# Bounded: one upload and one download, then the gateway is stopped.
#
#   tests/scripts/big-file-rss.sh [SIZE_MIB]        (default 2048)
#
# Needs the debug or release gateway built (cargo build -p nimbus-gateway); uses curl.
set -euo pipefail

size_mib=${1:-2048}
target=${CARGO_TARGET_DIR:-/var/cache/nimbus/target}
bin=${NIMBUS_GATEWAY_BIN:-$target/debug/nimbus-gateway}
[ -x "$bin" ] || { echo "no gateway binary at $bin: run cargo build -p nimbus-gateway" >&2; exit 1; }

work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"
NIMBUS_ADMIN_PASSWORD=bigfile-admin-pw "$bin" serve --listen "127.0.0.1:$port" --data-dir "$work/data" >"$work/out" 2>"$work/err" &
gw=$!
sampler=""
cleanup() { [ -n "$sampler" ] && kill "$sampler" 2>/dev/null; kill "$gw" 2>/dev/null; wait "$gw" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

for _ in $(seq 1 100); do curl -sf "$url/healthz" >/dev/null && break; sleep 0.1; done
token=$(curl -sf -X POST "$url/api/v1/auth/login" -H 'content-type: application/json' \
    -d '{"username":"admin","password":"bigfile-admin-pw","device":"rss-script"}' | python3 -c 'import sys,json; print(json.load(sys.stdin)["token"])')

rss() { awk '/^VmRSS/ {print $2}' "/proc/$gw/status"; }
( while sleep 2; do echo "  gateway RSS: $(( $(rss) / 1024 )) MiB"; done ) &
sampler=$!

echo "RSS before: $(( $(rss) / 1024 )) MiB; streaming ${size_mib} MiB up ..."
# Deterministic pseudo-random content generated on the fly: never stored on disk.
gen() { python3 -c "
import sys, hashlib
out = sys.stdout.buffer
seed = b'nimbus-big-file'
for i in range($size_mib * 16):
    block = hashlib.shake_256(seed + i.to_bytes(8, 'little')).digest(65536)
    out.write(block)
"; }
up_hash=$(gen | tee >(curl -sf -H "Authorization: Bearer $token" -H "content-type: application/octet-stream" \
    -T - "$url/api/v1/files/big/file.bin" >"$work/put.json") | b2sum | cut -d' ' -f1)
sleep 1
cat "$work/put.json"; echo
echo "streaming it down ..."
down_hash=$(curl -sf -H "Authorization: Bearer $token" "$url/api/v1/files/big/file.bin" | b2sum | cut -d' ' -f1)
kill "$sampler" 2>/dev/null; sampler=""
peak=$(awk '/^VmHWM/ {print $2}' "/proc/$gw/status")
echo "content check: $([ "$up_hash" = "$down_hash" ] && echo "identical" || echo "DIFFERENT")"
echo "gateway peak RSS (VmHWM): $(( peak / 1024 )) MiB for a ${size_mib} MiB file"
[ "$up_hash" = "$down_hash" ]
