#!/usr/bin/env bash
# infra/bench-mount.sh — the drive (`nimbus mount`) against bindfs, rclone mount and s3fs.
#
#   infra/bench-mount.sh [--json FILE] [--runtime SECS] [--reps N] [--keep] [--no-build]
#
# One run, everything on this machine on 127.0.0.1, the same bytes from the same MinIO:
#   * data: one 1 GiB file of random bytes, and a directory of 10,000 empty files;
#   * MinIO holds the 1 GiB file in bucket `bench-peers` (for rclone and s3fs), and is the
#     gateway's block store (bucket `nimbus-bench`); the gateway's own cache is off by default so
#     that every block the drive fetches comes from MinIO, as for the peers;
#   * the gateway (release build, SQLite) holds the same file under /bench, uploaded with PUT,
#     and the 10,000 empty files under /bench/dir10k;
#   * the drive: `nimbus login` + `nimbus mount` (detached, fresh cache dir);
#   * bindfs (passthrough FUSE) over the local copy of the data; a second bindfs with
#     --multithreaded for reference rows;
#   * rclone mount of the bucket with --vfs-cache-mode full (empty cache dir), s3fs of the bucket.
# Steps (the kernel page cache is dropped, `echo 3 > /proc/sys/vm/drop_caches`, before every read):
#   cold sequential read of the 1 GiB file (dd bs=1M): drive (fresh cache), rclone, s3fs;
#   warm sequential read (the drive's cache holds the file): drive vs bindfs, median of --reps;
#   warm 4 KiB random reads (fio randread, 4 jobs, --runtime s): drive vs bindfs;
#   `ls -l` of the 10,000-entry directory (once to warm, then 5 timed runs back to back, median);
#   rename of that directory through the drive (absolute);
#   writing 1,000 files of 4 KiB (open/write/close each) through the drive and rclone mount.
# The VmRSS of every daemon (FUSE peers, gateway, MinIO) is sampled every 0.25 s; the drive's
# maximum is a goal. CPU seconds per daemon and the drive's cache counters are taken per step.
# Prints a table (metric, nimbus, peer, ratio, goal, PASS/MISS); --json FILE writes it as JSON.
#
#   --json FILE     also write the results as JSON to FILE
#   --runtime S     seconds per fio random-read run (default 15)
#   --reps N        timed repetitions of the warm sequential read (default 3)
#   --keep          keep the temp dir (logs, fio/dd outputs; data is deleted anyway) on exit
#   --no-build      use the release binaries as they are
#
# Exit status: 0 when every step ran (whether the goals are met or not: that is reported, not
# enforced), 1 when a step or a setup stage failed to run (the step is shown as ERROR).
# Must run as root (drop_caches, FUSE mounts). Installs bindfs, rclone, s3fs and fio with apt
# when they are missing, and boto3 with pip.
#
# Environment:
#   BENCH_LARGE_MIB      size of the large file in MiB (default 1024)
#   BENCH_DIR_COUNT      files in the directory listed and renamed (default 10000)
#   BENCH_WRITE_COUNT    4 KiB files written (default 1000)
#   BENCH_LS_REPS        timed `ls -l` runs after the warm-up run, median reported (default 5)
#   BENCH_CACHE_MEM      drive --cache-mem (default 128MiB, twice the drive's own default of 64MiB)
#   BENCH_CACHE_SIZE     drive --cache-size (default 4GiB)
#   BENCH_GATEWAY_CACHE  1: leave the gateway's own block cache on (default 0: off, so cold
#                        reads through the drive come from MinIO like the peers')
#   BENCH_DRIVE_ENV      extra NAME=VALUE words for the drive's environment (diagnosis, e.g.
#                        MALLOC_ARENA_MAX=2); empty by default
#   BENCH_DEADLINE       seconds after the build after which the run is aborted (default 1200)
#   BENCH_PERF           1: `perf record` the drive, gateway and MinIO during each drive step (flat
#                        profiles in TEMP/out/*.perf.txt; use with --keep; it slows the drive's
#                        steps, so such a run's figures are not for comparison)
#   NIMBUS_GATEWAY_BIN, NIMBUS_CLI_BIN  binaries to use instead of building (implies --no-build)
#   NIMBUS_MINIO_BIN     MinIO binary (default /var/cache/nimbus/bin/minio, from install-deps.sh)
#   CARGO_TARGET_DIR     default /var/cache/nimbus/target (or ./target when that is not writable)
#   TMPDIR               where the temp dir (≈ 4.5 GiB with the defaults) is made (default /tmp)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

LARGE_MIB=${BENCH_LARGE_MIB:-1024}
DIR_COUNT=${BENCH_DIR_COUNT:-10000}
WRITE_COUNT=${BENCH_WRITE_COUNT:-1000}
CACHE_MEM=${BENCH_CACHE_MEM:-128MiB}
CACHE_SIZE=${BENCH_CACHE_SIZE:-4GiB}
GATEWAY_CACHE=${BENCH_GATEWAY_CACHE:-0}
DRIVE_ENV=${BENCH_DRIVE_ENV:-}
DEADLINE=${BENCH_DEADLINE:-1200}
MINIO_BIN=${NIMBUS_MINIO_BIN:-${NIMBUS_CACHE_DIR:-/var/cache/nimbus}/bin/minio}
RUNTIME=15
REPS=3
LS_REPS=${BENCH_LS_REPS:-5}
JSON_OUT=""
KEEP=0
BUILD=1

MINIO_USER=nimbus-bench
MINIO_SECRET=nimbus-bench-secret
PEER_BUCKET=bench-peers
GATEWAY_BUCKET=nimbus-bench
ADMIN_PASSWORD=bench-admin-password

log() { printf '[bench-mount] %s\n' "$*" >&2; }
die() { printf '[bench-mount] ERROR: %s\n' "$*" >&2; exit 1; }

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --json) [ $# -ge 2 ] || die "--json needs a file"; JSON_OUT=$2; shift 2 ;;
        --runtime) [ $# -ge 2 ] || die "--runtime needs seconds"; RUNTIME=$2; shift 2 ;;
        --reps) [ $# -ge 2 ] || die "--reps needs a count"; REPS=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --no-build) BUILD=0; shift ;;
        -h | --help) usage; exit 0 ;;
        *) usage; die "unknown argument: $1" ;;
    esac
done
for v in LARGE_MIB DIR_COUNT WRITE_COUNT DEADLINE RUNTIME REPS LS_REPS; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer (got '${!v}')"
done
if [ -n "$JSON_OUT" ]; then
    # Resolve now: the script changes directory later.
    JSON_OUT=$(cd "$(dirname "$JSON_OUT")" && pwd)/$(basename "$JSON_OUT")
fi
[ "$(id -u)" -eq 0 ] || die "run as root: the benchmark drops the page cache and mounts FUSE file systems"

# --- processes and cleanup -------------------------------------------------------------------
T=""
MINIO_PID=""
GW_PID=""
BINDFS_PID=""
BINDFS_MT_PID=""
RCLONE_PID=""
S3FS_PID=""
SAMPLER_PID=""
WATCHDOG_PID=""
CHILD_PID=""
DRIVE_MOUNTED=0

stop_pid() {
    local pid=$1 name=$2
    [ -n "$pid" ] || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    log "$name (pid $pid) still running after 10 s, killing it"
    kill -KILL "$pid" 2>/dev/null || true
}

is_mounted() { awk -v mp="$1" '$2 == mp { found = 1 } END { exit !found }' /proc/self/mounts; }

# unmount_fuse MOUNTPOINT PID NAME: let go of a peer's FUSE mount, then stop its process.
unmount_fuse() {
    local mp=$1 pid=$2 name=$3
    if [ -n "$mp" ] && is_mounted "$mp"; then
        fusermount3 -u "$mp" 2>/dev/null || fusermount -u "$mp" 2>/dev/null || true
    fi
    stop_pid "$pid" "$name"
    if [ -n "$mp" ] && is_mounted "$mp"; then
        log "$name: $mp still mounted, lazy unmount"
        umount -l "$mp" 2>/dev/null || true
    fi
}

nimbus_cli() { NIMBUS_CONFIG_DIR=$T/cfg "$NIMBUS_BIN" "$@"; }

drive_pid() {
    nimbus_cli status --json 2>/dev/null |
        python3 -c 'import json, sys; m = json.load(sys.stdin)["mounts"]; print(m[0]["pid"] if m else "")' 2>/dev/null || true
}

unmount_drive() {
    [ "$DRIVE_MOUNTED" = 1 ] || return 0
    local pid
    pid=$(drive_pid)
    timeout 120 env NIMBUS_CONFIG_DIR="$T/cfg" "$NIMBUS_BIN" unmount "$T/mnt/nimbus" >&2 ||
        log "nimbus unmount failed or took over 120 s"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        log "the drive (pid $pid) is still running after unmount, killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    if is_mounted "$T/mnt/nimbus"; then
        fusermount3 -u "$T/mnt/nimbus" 2>/dev/null || umount -l "$T/mnt/nimbus" 2>/dev/null || true
    fi
    DRIVE_MOUNTED=0
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$CHILD_PID" ]; then
        # The helper running when the run was stopped, with its dd/fio.
        kill -TERM -- "-$CHILD_PID" 2>/dev/null || true
        sleep 1
        kill -KILL -- "-$CHILD_PID" 2>/dev/null || true
    fi
    stop_pid "$SAMPLER_PID" "rss sampler"
    if [ -n "$T" ]; then
        unmount_drive
        unmount_fuse "$T/mnt/rclone" "$RCLONE_PID" rclone
        unmount_fuse "$T/mnt/s3fs" "$S3FS_PID" s3fs
        unmount_fuse "$T/mnt/bindfs" "$BINDFS_PID" bindfs
        unmount_fuse "$T/mnt/bindfs-mt" "$BINDFS_MT_PID" "bindfs --multithreaded"
    fi
    stop_pid "$GW_PID" gateway
    stop_pid "$MINIO_PID" minio
    stop_pid "$WATCHDOG_PID" watchdog
    wait 2>/dev/null || true
    if [ -n "$T" ] && [ -d "$T" ]; then
        if awk -v t="$T/" 'index($2, t) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
            # Never rm -rf through a live mount.
            log "something is still mounted under $T; not deleting it"
        elif [ "$KEEP" = 1 ]; then
            cp "$T/drive-cache/mount.log" "$T/out/" 2>/dev/null || true
            rm -rf "$T/data" "$T/minio" "$T/drive-cache" "$T/rclone-cache" "$T/gw"
            log "kept $T (logs and outputs; the data is deleted)"
        else
            rm -rf "$T"
        fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# --- dependencies ----------------------------------------------------------------------------
missing=()
command -v bindfs >/dev/null 2>&1 || missing+=(bindfs)
command -v rclone >/dev/null 2>&1 || missing+=(rclone)
command -v s3fs >/dev/null 2>&1 || missing+=(s3fs)
command -v fio >/dev/null 2>&1 || missing+=(fio)
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
if [ "${#missing[@]}" -gt 0 ]; then
    log "apt: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fi
for tool in python3 curl dd mountpoint; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (infra/install-deps.sh installs it)"
done
if ! python3 -c 'import boto3' 2>/dev/null; then
    log "pip: installing boto3 (uploads to MinIO, counts objects)"
    python3 -m pip install --quiet boto3 || die "could not install boto3"
fi
[ -x "$MINIO_BIN" ] || die "$MINIO_BIN not found; run infra/install-deps.sh first"
[ -w /proc/sys/vm/drop_caches ] || die "/proc/sys/vm/drop_caches is not writable"
[ -e /dev/fuse ] || die "/dev/fuse is missing"

# The source the binaries are built from ("+dirty": uncommitted changes in the crates they use).
GIT_REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$ROOT" status --porcelain -- gateway proto mount client blockcache 2>/dev/null || true)" ]; then
    GIT_REV="$GIT_REV+dirty"
fi
if [ -n "${NIMBUS_GATEWAY_BIN:-}" ] || [ -n "${NIMBUS_CLI_BIN:-}" ]; then
    BUILD=0
fi
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if [ -z "${CARGO_TARGET_DIR:-}" ]; then
    if mkdir -p /var/cache/nimbus/target 2>/dev/null && [ -w /var/cache/nimbus/target ]; then
        CARGO_TARGET_DIR=/var/cache/nimbus/target
    else
        CARGO_TARGET_DIR=$ROOT/target
    fi
fi
export CARGO_TARGET_DIR
GATEWAY_BIN=${NIMBUS_GATEWAY_BIN:-$CARGO_TARGET_DIR/release/nimbus-gateway}
NIMBUS_BIN=${NIMBUS_CLI_BIN:-$CARGO_TARGET_DIR/release/nimbus}
if [ "$BUILD" = 1 ]; then
    log "cargo build --release -p nimbus-gateway -p nimbus-cli (target dir $CARGO_TARGET_DIR)"
    (cd "$ROOT" && cargo build --release -p nimbus-gateway -p nimbus-cli)
fi
[ -x "$GATEWAY_BIN" ] || die "$GATEWAY_BIN not found (build it, or drop --no-build)"
[ -x "$NIMBUS_BIN" ] || die "$NIMBUS_BIN not found (build it, or drop --no-build)"

# Abort the whole run after $DEADLINE seconds from here (the EXIT trap then cleans up).
(
    trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
    sleep "$DEADLINE" &
    sleeper=$!
    wait "$sleeper"
    printf '[bench-mount] ERROR: deadline of %ss reached, aborting\n' "$DEADLINE" >&2
    kill -TERM $$
) &
WATCHDOG_PID=$!

# --- temp dir, ports -------------------------------------------------------------------------
T=$(mktemp -d "${TMPDIR:-/tmp}/nimbus-bench-mount.XXXXXX")
mkdir -p "$T/data/dir10k" "$T/minio" "$T/gw" "$T/gw-cache" "$T/cfg" "$T/out" "$T/rclone-cache" \
    "$T/mnt/nimbus" "$T/mnt/bindfs" "$T/mnt/bindfs-mt" "$T/mnt/rclone" "$T/mnt/s3fs"
cd "$T"
log "temp dir $T"
AVAIL_MIB=$(df -Pm "$T" | awk 'NR == 2 { print $4 }')
NEED_MIB=$((LARGE_MIB * 4 + 512))
[ "$AVAIL_MIB" -ge "$NEED_MIB" ] || die "$T has $AVAIL_MIB MiB free; the run needs about $NEED_MIB MiB"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
MINIO_PORT=$(free_port)
MINIO_CONSOLE_PORT=$(free_port)
GW_PORT=$(free_port)
MINIO_URL=http://127.0.0.1:$MINIO_PORT
GW_URL=http://127.0.0.1:$GW_PORT

# --- helpers in Python (data, uploads, measured steps, report) --------------------------------
cat >"$T/bench.py" <<'PYEOF'
import concurrent.futures, http.client, json, os, random, re, statistics, subprocess, sys, threading, time

T = os.environ["BENCH_T"]
RESULTS = f"{T}/out/results.jsonl"
STEP_FILE = f"{T}/out/step"
PIDS_FILE = f"{T}/out/pids"
CLK = os.sysconf("SC_CLK_TCK")

def now():
    return time.perf_counter()

def record(rec):
    with open(RESULTS, "a") as f:
        f.write(json.dumps(rec) + "\n")

def set_step(name):
    with open(STEP_FILE + ".tmp", "w") as f:
        f.write(name)
    os.replace(STEP_FILE + ".tmp", STEP_FILE)

def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")

def daemons():
    """name -> pid of the processes worth watching (FUSE daemons, gateway, MinIO)."""
    out = {}
    try:
        with open(PIDS_FILE) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[1].isdigit():
                    out[parts[0]] = int(parts[1])
    except FileNotFoundError:
        pass
    return out

def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK
    except (OSError, IndexError, ValueError):
        return None

def cpu_snapshot():
    return {name: cpu_seconds(pid) for name, pid in daemons().items()}

def cpu_delta(before, after):
    out = {}
    for name, a in after.items():
        b = before.get(name)
        if a is not None and b is not None:
            out[name] = round(a - b, 2)
    return out

def drive_status():
    """The drive's entry of `nimbus status --json` (None when nothing is mounted)."""
    try:
        p = subprocess.run([os.environ["BENCH_NIMBUS_BIN"], "status", "--json"], capture_output=True,
                           timeout=30, env=dict(os.environ, NIMBUS_CONFIG_DIR=f"{T}/cfg"))
        mounts = json.loads(p.stdout)["mounts"]
        return mounts[0] if mounts else None
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None

def drive_counters():
    st = drive_status()
    if not st:
        return None
    c = dict(st.get("cache", {}))
    c.pop("dir", None)
    return c

def counters_delta(before, after):
    if not before or not after:
        return None
    return {k: after[k] - before.get(k, 0) for k in after if isinstance(after[k], (int, float))}

class Step:
    """Context of a measured step: page cache dropped, RSS sampler told, CPU and drive counters."""
    def __init__(self, name, drop=True):
        self.name, self.drop = name, drop
    def __enter__(self):
        self.drive = self.name.startswith("nimbus")
        # The drive rewrites its status file (cache counters) once a second.
        self.cnt0 = drive_counters() if self.drive else None
        self.perf = None
        if self.drive and os.environ.get("BENCH_PERF") == "1":
            # A flat CPU profile of the drive, the gateway and MinIO during the step.
            pids = ",".join(str(p) for n, p in daemons().items() if n in ("nimbus", "gateway", "minio"))
            self.perf_data = f"{T}/out/{self.name}.{int(time.time() * 1000)}.perf.data"
            self.perf = subprocess.Popen(["perf", "record", "-F", "499", "-p", pids, "-o", self.perf_data,
                                          "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        if self.drop:
            drop_caches()
        set_step(self.name)
        self.cpu0 = cpu_snapshot()
        self.wall0 = now()
        self.epoch0 = time.time()
        return self
    def __exit__(self, *exc):
        self.wall = now() - self.wall0
        self.cpu = cpu_delta(self.cpu0, cpu_snapshot())
        set_step("idle")
        self.counters = None
        if self.perf is not None:
            self.perf.send_signal(2)
            self.perf.wait(timeout=60)
            with open(self.perf_data[: -len(".data")] + ".txt", "w") as f:
                subprocess.run(["perf", "report", "-i", self.perf_data, "--stdio", "--no-children",
                                "--sort", "comm,dso,sym", "--percent-limit", "0.7"],
                               stdout=f, stderr=subprocess.DEVNULL, timeout=300)
            os.remove(self.perf_data)
        return False
    def rec(self, **kw):
        if self.drive:
            time.sleep(1.2)
            self.counters = counters_delta(self.cnt0, drive_counters())
        r = {"step": self.name, "wall_s": round(self.wall, 3), "cpu_s": self.cpu, "start_epoch": self.epoch0}
        if self.counters is not None:
            r["drive_cache_delta"] = self.counters
        r.update(kw)
        record(r)
        return r

# --- setup ---

def gen(path, mib):
    with open(path, "wb") as f:
        for _ in range(int(mib)):
            f.write(os.urandom(1 << 20))

def gen_dir(path, count):
    for i in range(int(count)):
        open(f"{path}/f{i:05d}.txt", "wb").close()

def s3client(endpoint, user, secret):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=user, aws_secret_access_key=secret,
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                      max_pool_connections=8))

def minio_put(endpoint, user, secret, bucket, local, key):
    s3 = s3client(endpoint, user, secret)
    s3.create_bucket(Bucket=bucket)
    s3.upload_file(local, bucket, key)
    print(f"uploaded {local} to s3://{bucket}/{key}")

def s3_count(endpoint, user, secret, bucket, prefix):
    s3 = s3client(endpoint, user, secret)
    n = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        n += page.get("KeyCount", 0)
    return n

def gw_conn(port):
    return http.client.HTTPConnection("127.0.0.1", int(port), timeout=600)

def gw_put(port, token, local, remote):
    conn = gw_conn(port)
    with open(local, "rb") as f:
        conn.request("PUT", f"/api/v1/files/{remote}", body=f,
                     headers={"Authorization": f"Bearer {token}",
                              "Content-Length": str(os.path.getsize(local))})
        r = conn.getresponse()
        body = r.read()
    if r.status not in (200, 201):
        raise SystemExit(f"PUT {remote}: HTTP {r.status} {body[:300]!r}")
    print(f"uploaded {local} to /{remote} through the gateway")

def gw_many(port, token, remote_dir, count):
    local = threading.local()
    def put(i):
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = gw_conn(port)
        conn.request("PUT", f"/api/v1/files/{remote_dir}/f{i:05d}.txt", body=b"",
                     headers={"Authorization": f"Bearer {token}", "Content-Length": "0"})
        r = conn.getresponse()
        body = r.read()
        if r.status not in (200, 201):
            raise SystemExit(f"PUT {remote_dir}/f{i:05d}.txt: HTTP {r.status} {body[:300]!r}")
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        list(ex.map(put, range(int(count))))
    print(f"created {count} empty files in /{remote_dir} through the gateway")

def gw_count(port, token, remote_dir):
    conn, n, cursor = gw_conn(port), 0, None
    while True:
        q = f"/api/v1/dirs/{remote_dir}?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        conn.request("GET", q, headers={"Authorization": f"Bearer {token}"})
        r = conn.getresponse()
        body = r.read()
        if r.status == 404:
            return -1
        if r.status != 200:
            raise SystemExit(f"GET {q}: HTTP {r.status} {body[:300]!r}")
        page = json.loads(body)
        n += len(page["entries"])
        cursor = page.get("next_cursor")
        if not cursor:
            return n

def verify(orig, path, name):
    """Compares the first, last and 6 random 1 MiB pieces of `path` with the original."""
    size = os.path.getsize(orig)
    got_size = os.path.getsize(path)
    if got_size != size:
        raise SystemExit(f"{name}: {path} has {got_size} bytes, the original {size}")
    rnd = random.Random(7)
    offs = [0, max(0, size - (1 << 20))] + [rnd.randrange(0, max(1, size - (1 << 20))) for _ in range(6)]
    with open(orig, "rb") as a, open(path, "rb") as b:
        for off in offs:
            a.seek(off)
            b.seek(off)
            if a.read(1 << 20) != b.read(1 << 20):
                raise SystemExit(f"{name}: {path} differs from the original at offset {off}")
    print(f"{name}: same bytes as the original ({len(offs)} pieces of 1 MiB compared)")

def wait_cached(size, timeout):
    """Waits until the drive's directory tier holds `size` bytes (written in the background)."""
    t0 = now()
    while now() - t0 < float(timeout):
        st = drive_status()
        used = (st or {}).get("cache", {}).get("used_bytes", 0)
        if used >= int(size):
            print(f"drive cache holds {used} bytes after {now() - t0:.1f} s more")
            return
        time.sleep(0.5)
    raise SystemExit(f"the drive's cache holds {used} bytes after {timeout} s, expected >= {size}")

# --- measured steps ---

def seqread(name, path, extra_json="{}"):
    with Step(name) as s:
        p = subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M"], capture_output=True, text=True,
                           timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"{name}: dd failed: {p.stderr.strip()}")
    m = re.search(r"^(\d+) bytes", p.stderr, re.M)
    nbytes = int(m.group(1)) if m else 0
    r = s.rec(kind="seqread", bytes=nbytes, mb_s=round(nbytes / 1e6 / s.wall, 1), **json.loads(extra_json))
    print(f"{name:<28} {r['mb_s']:>9.1f} MB/s  ({nbytes} bytes in {s.wall:.2f} s; cpu {r['cpu_s']})")

def randread(name, path, size, runtime):
    out = f"{T}/out/{name}.fio.json"
    cmd = ["fio", "--name=r", "--rw=randread", "--bs=4k", "--numjobs=4", f"--size={size}",
           f"--runtime={runtime}", "--time_based", f"--filename={path}", "--direct=0", "--readonly",
           "--group_reporting", "--output-format=json", f"--output={out}"]
    with Step(name) as s:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=int(runtime) + 120)
    if p.returncode != 0:
        raise SystemExit(f"{name}: fio failed ({p.returncode}): {p.stderr.strip()[:500]}")
    with open(out) as f:
        text = f.read()
    j = json.loads(text[text.index("{"):])
    job = j["jobs"][0]
    iops = job["read"]["iops"]
    lat = job["read"].get("clat_ns", {})
    p99 = lat.get("percentile", {}).get("99.000000")
    r = s.rec(kind="randread", iops=round(iops, 1), errors=job.get("error", 0),
              clat_mean_us=round(lat.get("mean", 0) / 1e3, 1),
              clat_p99_us=round(p99 / 1e3, 1) if p99 else None)
    if job.get("error"):
        raise SystemExit(f"{name}: fio reported error {job['error']}")
    print(f"{name:<28} {iops:>9.0f} IOPS  (mean {r['clat_mean_us']} us, p99 {r['clat_p99_us']} us; cpu {r['cpu_s']})")

def writes(name, directory, count, port, token, remote_dir, timeout):
    """The drive: the loop, then (at once) how many files the gateway lists and when it lists
    them all, counted from the start of the loop like rclone's."""
    count = int(count)
    payloads = [os.urandom(4096) for _ in range(count)]   # distinct: no dedup shortcut
    with Step(name, drop=False) as s:
        for i, data in enumerate(payloads):
            with open(f"{directory}/w{i:05d}.bin", "wb") as f:
                f.write(data)
    t0 = s.wall0
    first = n = gw_count(port, token, remote_dir)
    deadline = now() + float(timeout)
    while n < count and now() < deadline:
        time.sleep(0.1)
        n = gw_count(port, token, remote_dir)
    on_server = now() - t0
    r = s.rec(kind="writes", files=count, files_per_s=round(count / s.wall, 1), listed_after_loop=first,
              on_server_s=round(on_server, 2) if n >= count else None, listed=n)
    tail = (f"all {count} listed by the gateway {on_server:.2f} s after the loop started ({first} when it ended)"
            if n >= count else f"only {n} listed by the gateway after {timeout} s more")
    print(f"{name:<28} {s.wall:>9.2f} s     ({r['files_per_s']} files/s; {tail}; cpu {r['cpu_s']})")

def writes_rclone(name, directory, count, endpoint, user, secret, bucket, prefix, timeout):
    t0 = None
    # The loop itself, then the time until every object is in the bucket (rclone uploads later).
    count = int(count)
    payloads = [os.urandom(4096) for _ in range(count)]
    with Step(name, drop=False) as s:
        t0 = s.wall0
        for i, data in enumerate(payloads):
            with open(f"{directory}/w{i:05d}.bin", "wb") as f:
                f.write(data)
    n, deadline = 0, now() + float(timeout)
    while now() < deadline:
        n = s3_count(endpoint, user, secret, bucket, prefix)
        if n >= count:
            break
        time.sleep(0.5)
    on_server = now() - t0
    r = s.rec(kind="writes", files=count, files_per_s=round(count / s.wall, 1),
              on_server_s=round(on_server, 2) if n >= count else None, objects_seen=n)
    tail = (f"all {count} objects in the bucket {on_server:.1f} s after the loop started" if n >= count
            else f"only {n} objects in the bucket after {timeout} s more")
    print(f"{name:<28} {s.wall:>9.2f} s     ({r['files_per_s']} files/s; {tail}; cpu {r['cpu_s']})")

def ls(name, path, reps):
    """`ls -l` once to warm, then `reps` timed runs back to back (the kernel keeps attributes for
    about 1 s on both mounts, so no pause between runs); the median counts."""
    subprocess.run(["ls", "-l", path], stdout=subprocess.DEVNULL, check=True, timeout=300)   # warm-up
    times, lines = [], 0
    with Step(name, drop=False) as s:
        for i in range(int(reps)):
            t0 = now()
            p = subprocess.run(["ls", "-l", path], capture_output=True, timeout=300)
            times.append(now() - t0)
            if p.returncode != 0:
                raise SystemExit(f"{name}: ls -l failed: {p.stderr[:300]!r}")
            lines = p.stdout.count(b"\n") - 1
    r = s.rec(kind="ls", entries=lines, times_s=[round(t, 3) for t in times],
              median_s=round(statistics.median(times), 3))
    print(f"{name:<28} {r['median_s']:>9.3f} s     ({lines} entries; runs {r['times_s']}; cpu of all runs {r['cpu_s']})")

def rename(name, src, dst):
    with Step(name, drop=False) as s:
        os.rename(src, dst)
    r = s.rec(kind="rename")
    print(f"{name:<28} {s.wall:>9.3f} s     (cpu {r['cpu_s']})")

def sampler():
    """VmRSS of every watched process every 0.25 s: lines `step name kib`."""
    parent = os.getppid()
    with open(f"{T}/out/rss.txt", "a") as out:
        while os.getppid() == parent:   # stops by itself if the script is gone
            try:
                with open(STEP_FILE) as f:
                    step = f.read().strip() or "idle"
            except OSError:
                step = "idle"
            for name, pid in daemons().items():
                try:
                    with open(f"/proc/{pid}/status") as f:
                        st = f.read()
                    m = re.search(r"^VmRSS:\s+(\d+)", st, re.M)
                    if m:
                        out.write(f"{step} {name} {m.group(1)}\n")
                    if name == "nimbus":
                        # The drive's RSS split (anonymous / file-backed) and its thread count.
                        for key in ("RssAnon", "RssFile", "Threads"):
                            m = re.search(rf"^{key}:\s+(\d+)", st, re.M)
                            if m:
                                out.write(f"{step} nimbus.{key} {m.group(1)}\n")
                except OSError:
                    pass
            out.flush()
            time.sleep(0.25)

# --- report ---

def report(meta_json, json_out, failed_json):
    meta = json.loads(meta_json)
    failed = json.loads(failed_json)
    recs = []
    if os.path.exists(RESULTS):
        with open(RESULTS) as f:
            recs = [json.loads(l) for l in f if l.strip()]
    by = {}
    for r in recs:
        by.setdefault(r["step"], []).append(r)
    def last(step):
        return by[step][-1] if step in by else None
    def med(step, key):
        vals = [r[key] for r in by.get(step, []) if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    rss = {}
    try:
        with open(f"{T}/out/rss.txt") as f:
            for line in f:
                step, name, kib = line.split()
                k = (name, step)
                rss[k] = max(rss.get(k, 0), int(kib))
    except OSError:
        pass
    def rss_max(name, steps=None):
        vals = [v for (n, s), v in rss.items() if n == name and (steps is None or s in steps)]
        return round(max(vals) / 1024, 1) if vals else None

    size = f"{meta['large_mib'] // 1024} GiB" if meta["large_mib"] % 1024 == 0 else f"{meta['large_mib']} MiB"
    rows = []
    def row(metric, unit, nimbus, peer_name, peer, ratio, goal_txt, ok, note=""):
        rows.append({"metric": metric, "unit": unit, "nimbus": nimbus, "peer_name": peer_name, "peer": peer,
                     "ratio": None if ratio is None else round(ratio, 3), "goal": goal_txt,
                     "result": ok, "note": note})
    def judge(ratio, goal, higher_is_better=True):
        if ratio is None:
            return "ERROR"
        return "PASS" if (ratio >= goal if higher_is_better else ratio <= goal) else "MISS"

    # Warm sequential read: median of the repetitions.
    n, b = med("nimbus-warm-seq", "mb_s"), med("bindfs-warm-seq", "mb_s")
    r = n / b if n and b else None
    row(f"warm seq read {size} (MB/s)", "MB/s", n, "bindfs", b, r, ">= 0.8x", judge(r, 0.8))
    n = med("nimbus-cold-seq", "mb_s")
    for peer in ("rclone", "s3fs"):
        p = med(f"{peer}-cold-seq", "mb_s")
        r = n / p if n and p else None
        row(f"cold seq read {size} vs {peer} (MB/s)", "MB/s", n, peer, p, r, ">= 1.2x", judge(r, 1.2))
    n, b = med("nimbus-warm-rand", "iops"), med("bindfs-warm-rand", "iops")
    r = n / b if n and b else None
    row("warm 4 KiB random read, 4 jobs (IOPS)", "IOPS", n, "bindfs", b, r, ">= 0.7x", judge(r, 0.7))
    n, p = last("nimbus-write"), last("rclone-write")
    c = n or {}
    nw, pw = (n or {}).get("wall_s"), (p or {}).get("wall_s")
    r = pw / nw if nw and pw else None
    row(f"write {meta['write_count']} x 4 KiB files (s, loop wall time)", "s", nw, "rclone", pw, r,
        ">= 2x (rclone s / nimbus s)", judge(r, 2.0),
        f"on the server (from the loop start): nimbus {c.get('on_server_s')} s ({c.get('listed_after_loop')} "
        f"listed when the loop ended), rclone {(p or {}).get('on_server_s')} s")
    n, b = last("nimbus-ls"), last("bindfs-ls")
    nm, bm = (n or {}).get("median_s"), (b or {}).get("median_s")
    r = nm / bm if nm and bm else None
    row(f"ls -l of a warm {meta['dir_count']}-entry dir (s)", "s", nm, "bindfs", bm, r, "<= 2x",
        judge(r, 2.0, higher_is_better=False))
    n = last("nimbus-rename-dir")
    nw = (n or {}).get("wall_s")
    row(f"rename a dir of {meta['dir_count']} files (s)", "s", nw, "", None, None, "< 1 s",
        "ERROR" if nw is None else ("PASS" if nw < 1.0 else "MISS"))
    mx = rss_max("nimbus")
    row("drive VmRSS max during the steps (MiB)", "MiB", mx, "", None, None, "<= 200 MiB",
        "ERROR" if mx is None else ("PASS" if mx <= 200 else "MISS"),
        f"--cache-mem {meta['cache_mem']}")

    info = []
    for step in ("bindfs-mt-warm-seq", "bindfs-mt-warm-rand"):
        key = "mb_s" if step.endswith("seq") else "iops"
        v = med(step, key)
        nimbus_v = med("nimbus-warm-seq" if key == "mb_s" else "nimbus-warm-rand", key)
        if v:
            info.append({"what": f"{step} ({key})", "value": v,
                         "nimbus_ratio": round(nimbus_v / v, 3) if nimbus_v else None})

    print()
    hdr = f"{'metric':<44} {'nimbus':>10} {'peer':>16} {'ratio':>7}  {'goal':<26} result"
    print(hdr)
    print("-" * len(hdr))
    def fmt(v):
        if v is None:
            return "-"
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    for x in rows:
        peer = f"{x['peer_name']} {fmt(x['peer'])}" if x["peer_name"] else ""
        res = x["result"]
        if res == "MISS" and x["ratio"] is not None:
            res += f" (measured {x['ratio']:.3f})"
        print(f"{x['metric']:<44} {fmt(x['nimbus']):>10} {peer:>16} {fmt(x['ratio']):>7}  {x['goal']:<26} {res}")
    for x in rows:
        if x["note"] and x["unit"] == "s" and "write" in x["metric"]:
            print(f"  writes: {x['note']}")
    for x in info:
        print(f"  reference: {x['what']}: {fmt(x['value'])} (nimbus / it: {fmt(x['nimbus_ratio'])})")
    print()
    print("per step: wall s, CPU s of each process during the step, drive cache counters delta")
    for r in recs:
        extra = ""
        if r.get("drive_cache_delta"):
            d = r["drive_cache_delta"]
            extra = "  drive: " + ", ".join(f"{k}={v}" for k, v in d.items() if v and k != "capacity_bytes")
        if "wall_s" in r:
            print(f"  {r['step']:<26} {r['wall_s']:>8.3f} s  cpu {r.get('cpu_s')}{extra}")
    print()
    print("VmRSS max (MiB) per process and step (nimbus.Threads: thread count):")
    names = sorted({n for n, _ in rss})
    def show(name, v):
        return f"{v}" if name.endswith("Threads") else f"{v / 1024:.0f}"
    for name in names:
        steps = sorted({s for n, s in rss if n == name})
        print(f"  {name:<16} " + ", ".join(f"{s} {show(name, rss[(name, s)])}" for s in steps))
    if failed:
        print()
        print("steps that failed to run: " + ", ".join(failed))
    out = {"meta": meta, "goals": rows, "reference": info, "steps": recs,
           "rss_max_mib": {f"{n}/{s}": round(v / 1024, 1) for (n, s), v in rss.items() if not n.endswith("Threads")},
           "drive_threads_max": max([v for (n, s), v in rss.items() if n == "nimbus.Threads"], default=None),
           "failed_steps": failed}
    if json_out:
        with open(json_out, "w") as f:
            json.dump(out, f, indent=2)
        print(f"\nJSON written to {json_out}")

if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    fn = {"gen": gen, "gen_dir": gen_dir, "minio_put": minio_put, "gw_put": gw_put, "gw_many": gw_many,
          "verify": verify, "wait_cached": wait_cached, "seqread": seqread, "randread": randread,
          "writes": writes, "writes_rclone": writes_rclone, "ls": ls,
          "rename": rename, "sampler": sampler, "report": report}.get(cmd)
    if cmd == "gw_count":
        print(gw_count(*args))
    elif fn is None:
        raise SystemExit(f"unknown command {cmd}")
    else:
        fn(*args)
PYEOF
export BENCH_T=$T BENCH_NIMBUS_BIN=$NIMBUS_BIN
# py CMD ARGS...: one helper call, in its own process group (it may run dd or fio) and waited for
# with `wait`, so that Ctrl-C, TERM or the deadline stop the run at once; cleanup ends the group.
py() {
    local rc=0
    setsid python3 "$T/bench.py" "$@" &
    CHILD_PID=$!
    wait "$CHILD_PID" || rc=$?
    CHILD_PID=""
    return "$rc"
}
echo idle >"$T/out/step"
: >"$T/out/pids"
FAILED_STEPS=()

# step NAME CMD...: run one measured step; a failure is recorded and the run goes on.
step() {
    local name=$1
    shift
    if ! "$@"; then
        log "ERROR: step $name failed"
        FAILED_STEPS+=("$name")
        return 1
    fi
}

wait_http() {
    local name=$1 url=$2 pid=$3 log_file=$4
    for _ in $(seq 1 300); do
        if curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; then return 0; fi
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 30 "$log_file" >&2 || true
            die "$name exited during startup"
        fi
        sleep 0.1
    done
    tail -n 30 "$log_file" >&2 || true
    die "$name not answering $url after 30 s"
}

# wait_mount NAME MOUNTPOINT PID LOG: until the kernel lists the mount (the process must live).
wait_mount() {
    local name=$1 mp=$2 pid=$3 log_file=$4
    for _ in $(seq 1 300); do
        if mountpoint -q "$mp"; then return 0; fi
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$log_file" >&2 || true
            log "ERROR: $name exited before mounting"
            return 1
        fi
        sleep 0.1
    done
    tail -n 20 "$log_file" >&2 || true
    log "ERROR: $name did not mount $mp within 30 s"
    return 1
}

# --- data ------------------------------------------------------------------------------------
LARGE_SIZE=$((LARGE_MIB * 1024 * 1024))
log "generating a $LARGE_MIB MiB file and a directory of $DIR_COUNT empty files"
py gen "$T/data/large.bin" "$LARGE_MIB"
py gen_dir "$T/data/dir10k" "$DIR_COUNT"

# --- MinIO -----------------------------------------------------------------------------------
log "starting MinIO on 127.0.0.1:$MINIO_PORT"
MINIO_ROOT_USER=$MINIO_USER MINIO_ROOT_PASSWORD=$MINIO_SECRET MINIO_UPDATE=off \
    "$MINIO_BIN" server "$T/minio" --quiet \
    --address "127.0.0.1:$MINIO_PORT" --console-address "127.0.0.1:$MINIO_CONSOLE_PORT" \
    >"$T/minio.log" 2>&1 </dev/null &
MINIO_PID=$!
wait_http minio "$MINIO_URL/minio/health/live" "$MINIO_PID" "$T/minio.log"
echo "minio $MINIO_PID" >>"$T/out/pids"
log "uploading the large file to MinIO bucket $PEER_BUCKET (for rclone and s3fs)"
py minio_put "$MINIO_URL" "$MINIO_USER" "$MINIO_SECRET" "$PEER_BUCKET" "$T/data/large.bin" large.bin >&2

# --- gateway ---------------------------------------------------------------------------------
if [ "$GATEWAY_CACHE" = 1 ]; then
    GW_CACHE_ARGS=(--cache-dir "$T/gw-cache" --cache-size 4GiB --cache-mem 256MiB)
else
    GW_CACHE_ARGS=(--cache-dir "$T/gw-cache" --cache-size 0 --cache-mem 0)
fi
log "starting the gateway ($GATEWAY_BIN) on 127.0.0.1:$GW_PORT, MinIO bucket $GATEWAY_BUCKET, cache: ${GW_CACHE_ARGS[*]}"
AWS_ACCESS_KEY_ID=$MINIO_USER AWS_SECRET_ACCESS_KEY=$MINIO_SECRET AWS_REGION=us-east-1 \
    NIMBUS_ADMIN_PASSWORD=$ADMIN_PASSWORD \
    "$GATEWAY_BIN" serve --listen "127.0.0.1:$GW_PORT" --data-dir "$T/gw" \
    --store s3 --s3-endpoint "$MINIO_URL" --s3-bucket "$GATEWAY_BUCKET" --s3-region us-east-1 \
    --s3-access-key "$MINIO_USER" --s3-secret-key "$MINIO_SECRET" "${GW_CACHE_ARGS[@]}" \
    >"$T/gateway.log" 2>&1 </dev/null &
GW_PID=$!
wait_http gateway "$GW_URL/readyz" "$GW_PID" "$T/gateway.log"
echo "gateway $GW_PID" >>"$T/out/pids"
GW_INFO=$(curl -fsS --max-time 5 "$GW_URL/api/v1/info")
log "gateway info: $GW_INFO"
TOKEN=$(curl -fsS --max-time 10 -H 'Content-Type: application/json' \
    -d "{\"username\":\"admin\",\"password\":\"$ADMIN_PASSWORD\"}" \
    "$GW_URL/api/v1/auth/login" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')
[ -n "$TOKEN" ] || die "login as admin gave no token"
log "uploading the large file through the gateway (PUT /api/v1/files/bench/large.bin)"
py gw_put "$GW_PORT" "$TOKEN" "$T/data/large.bin" bench/large.bin >&2
log "creating $DIR_COUNT empty files under /bench/dir10k through the gateway"
py gw_many "$GW_PORT" "$TOKEN" bench/dir10k "$DIR_COUNT" >&2

# --- the drive -------------------------------------------------------------------------------
log "nimbus login $GW_URL -u admin (config in $T/cfg)"
NIMBUS_PASSWORD=$ADMIN_PASSWORD nimbus_cli login "$GW_URL" -u admin --device bench-mount </dev/null >&2 ||
    die "nimbus login failed"
log "nimbus mount $T/mnt/nimbus --cache-dir $T/drive-cache --cache-size $CACHE_SIZE --cache-mem $CACHE_MEM"
# shellcheck disable=SC2086 # BENCH_DRIVE_ENV is a list of NAME=VALUE words
if env ${DRIVE_ENV} NIMBUS_CONFIG_DIR="$T/cfg" "$NIMBUS_BIN" mount "$T/mnt/nimbus" --cache-dir "$T/drive-cache" --cache-size "$CACHE_SIZE" \
    --cache-mem "$CACHE_MEM" </dev/null >&2; then
    DRIVE_MOUNTED=1
else
    tail -n 20 "$T/drive-cache/mount.log" >&2 2>/dev/null || true
    die "nimbus mount failed"
fi
DRIVE_PID=$(drive_pid)
[ -n "$DRIVE_PID" ] || die "nimbus status --json shows no mount pid"
mountpoint -q "$T/mnt/nimbus" || die "nimbus mount returned but $T/mnt/nimbus is not a mount point"
echo "nimbus $DRIVE_PID" >>"$T/out/pids"
log "drive mounted (pid $DRIVE_PID)"

# --- peers -----------------------------------------------------------------------------------
log "bindfs $T/data -> $T/mnt/bindfs (and --multithreaded -> $T/mnt/bindfs-mt)"
bindfs -f "$T/data" "$T/mnt/bindfs" >"$T/bindfs.log" 2>&1 </dev/null &
BINDFS_PID=$!
wait_mount bindfs "$T/mnt/bindfs" "$BINDFS_PID" "$T/bindfs.log" || die "bindfs did not mount"
echo "bindfs $BINDFS_PID" >>"$T/out/pids"
bindfs -f --multithreaded "$T/data" "$T/mnt/bindfs-mt" >"$T/bindfs-mt.log" 2>&1 </dev/null &
BINDFS_MT_PID=$!
wait_mount "bindfs --multithreaded" "$T/mnt/bindfs-mt" "$BINDFS_MT_PID" "$T/bindfs-mt.log" ||
    die "bindfs --multithreaded did not mount"
echo "bindfs-mt $BINDFS_MT_PID" >>"$T/out/pids"

log "rclone mount nbs3:$PEER_BUCKET -> $T/mnt/rclone (--vfs-cache-mode full, empty cache dir)"
: >"$T/rclone.conf"
# (-u AWS_CA_BUNDLE: rclone's S3 client refuses a custom CA bundle with its own transport.)
env -u AWS_CA_BUNDLE RCLONE_CONFIG="$T/rclone.conf" \
    RCLONE_CONFIG_NBS3_TYPE=s3 RCLONE_CONFIG_NBS3_PROVIDER=Minio \
    RCLONE_CONFIG_NBS3_ENDPOINT="$MINIO_URL" RCLONE_CONFIG_NBS3_REGION=us-east-1 \
    RCLONE_CONFIG_NBS3_ACCESS_KEY_ID=$MINIO_USER RCLONE_CONFIG_NBS3_SECRET_ACCESS_KEY=$MINIO_SECRET \
    rclone mount "nbs3:$PEER_BUCKET" "$T/mnt/rclone" --vfs-cache-mode full --cache-dir "$T/rclone-cache" \
    --log-file "$T/rclone.log" --log-level NOTICE </dev/null >/dev/null 2>&1 &
RCLONE_PID=$!
RCLONE_OK=1
wait_mount rclone "$T/mnt/rclone" "$RCLONE_PID" "$T/rclone.log" || { RCLONE_OK=0; FAILED_STEPS+=(rclone-mount); }
[ "$RCLONE_OK" = 0 ] || echo "rclone $RCLONE_PID" >>"$T/out/pids"

log "s3fs $PEER_BUCKET -> $T/mnt/s3fs (url=$MINIO_URL, use_path_request_style)"
printf '%s:%s\n' "$MINIO_USER" "$MINIO_SECRET" >"$T/s3fs.passwd"
chmod 600 "$T/s3fs.passwd"
s3fs "$PEER_BUCKET" "$T/mnt/s3fs" -f \
    -o "url=$MINIO_URL,use_path_request_style,passwd_file=$T/s3fs.passwd,dbglevel=warn,logfile=$T/s3fs.log" \
    </dev/null >"$T/s3fs.out" 2>&1 &
S3FS_PID=$!
S3FS_OK=1
wait_mount s3fs "$T/mnt/s3fs" "$S3FS_PID" "$T/s3fs.out" || { S3FS_OK=0; FAILED_STEPS+=(s3fs-mount); }
[ "$S3FS_OK" = 0 ] || echo "s3fs $S3FS_PID" >>"$T/out/pids"

python3 "$T/bench.py" sampler &
SAMPLER_PID=$!

# --- measured steps --------------------------------------------------------------------------
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
log "measuring (load average before: $LOAD_BEFORE)"
NLARGE=$T/mnt/nimbus/bench/large.bin

log "cold sequential reads of the $LARGE_MIB MiB file (dd bs=1M; page cache dropped before each)"
if step nimbus-cold-seq py seqread nimbus-cold-seq "$NLARGE" >&2; then
    step nimbus-verify py verify "$T/data/large.bin" "$NLARGE" nimbus >&2 || true
fi
if [ "$RCLONE_OK" = 1 ]; then
    if step rclone-cold-seq py seqread rclone-cold-seq "$T/mnt/rclone/large.bin" >&2; then
        step rclone-verify py verify "$T/data/large.bin" "$T/mnt/rclone/large.bin" rclone >&2 || true
    fi
fi
if [ "$S3FS_OK" = 1 ]; then
    if step s3fs-cold-seq py seqread s3fs-cold-seq "$T/mnt/s3fs/large.bin" >&2; then
        step s3fs-verify py verify "$T/data/large.bin" "$T/mnt/s3fs/large.bin" s3fs >&2 || true
    fi
fi

log "warm sequential reads: the drive (its cache holds the file) vs bindfs, $REPS runs each"
WARM_OK=1
step nimbus-wait-cache py wait_cached "$LARGE_SIZE" 120 >&2 || WARM_OK=0
if [ "$WARM_OK" = 1 ]; then
    for _ in $(seq 1 "$REPS"); do
        step nimbus-warm-seq py seqread nimbus-warm-seq "$NLARGE" >&2 || true
        step bindfs-warm-seq py seqread bindfs-warm-seq "$T/mnt/bindfs/large.bin" >&2 || true
        step bindfs-mt-warm-seq py seqread bindfs-mt-warm-seq "$T/mnt/bindfs-mt/large.bin" >&2 || true
    done
    log "warm 4 KiB random reads (fio randread, 4 jobs, ${RUNTIME}s each)"
    step nimbus-warm-rand py randread nimbus-warm-rand "$NLARGE" "$LARGE_SIZE" "$RUNTIME" >&2 || true
    step bindfs-warm-rand py randread bindfs-warm-rand "$T/mnt/bindfs/large.bin" "$LARGE_SIZE" "$RUNTIME" >&2 || true
    step bindfs-mt-warm-rand py randread bindfs-mt-warm-rand "$T/mnt/bindfs-mt/large.bin" "$LARGE_SIZE" "$RUNTIME" >&2 || true
fi

log "ls -l of the $DIR_COUNT-entry directory (one warm-up run, then $LS_REPS timed back to back)"
step nimbus-ls py ls nimbus-ls "$T/mnt/nimbus/bench/dir10k" "$LS_REPS" >&2 || true
step bindfs-ls py ls bindfs-ls "$T/mnt/bindfs/dir10k" "$LS_REPS" >&2 || true

log "renaming the $DIR_COUNT-file directory through the drive"
if step nimbus-rename-dir py rename nimbus-rename-dir "$T/mnt/nimbus/bench/dir10k" "$T/mnt/nimbus/bench/dir10k-renamed" >&2; then
    n_new=$(py gw_count "$GW_PORT" "$TOKEN" bench/dir10k-renamed)
    n_old=$(py gw_count "$GW_PORT" "$TOKEN" bench/dir10k)
    log "after the rename the gateway lists $n_new entries in /bench/dir10k-renamed, old path: $([ "$n_old" = -1 ] && echo gone || echo "$n_old entries")"
    if [ "$n_new" != "$DIR_COUNT" ] || [ "$n_old" != -1 ]; then
        log "ERROR: the rename is not what the gateway shows"
        FAILED_STEPS+=(nimbus-rename-check)
    fi
fi

log "writing $WRITE_COUNT files of 4 KiB (open, write, close each) through the drive and rclone mount"
mkdir "$T/mnt/nimbus/bench/writes" || FAILED_STEPS+=(nimbus-mkdir)
step nimbus-write py writes nimbus-write "$T/mnt/nimbus/bench/writes" "$WRITE_COUNT" \
    "$GW_PORT" "$TOKEN" bench/writes 120 >&2 || true
if [ "$RCLONE_OK" = 1 ]; then
    mkdir "$T/mnt/rclone/writes" || FAILED_STEPS+=(rclone-mkdir)
    step rclone-write py writes_rclone rclone-write "$T/mnt/rclone/writes" "$WRITE_COUNT" \
        "$MINIO_URL" "$MINIO_USER" "$MINIO_SECRET" "$PEER_BUCKET" writes/ 120 >&2 || true
fi
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
sleep 0.5
stop_pid "$SAMPLER_PID" "rss sampler"
SAMPLER_PID=""

if ! kill -0 "$DRIVE_PID" 2>/dev/null; then
    log "ERROR: the drive process $DRIVE_PID died during the run; its log:"
    tail -n 30 "$T/drive-cache/mount.log" >&2 || true
    FAILED_STEPS+=(drive-alive)
fi
DRIVE_HWM_KB=$(awk '/^VmHWM:/ { print $2 }' "/proc/$DRIVE_PID/status" 2>/dev/null || echo 0)
DRIVE_WARNINGS=$(sed 's/\x1b\[[0-9;]*m//g' "$T/drive-cache/mount.log" 2>/dev/null | grep -cE ' (WARN|ERROR) ' || true)
if [ "${DRIVE_WARNINGS:-0}" != 0 ]; then
    log "the drive logged $DRIVE_WARNINGS WARN/ERROR lines (count, message):"
    sed 's/\x1b\[[0-9;]*m//g' "$T/drive-cache/mount.log" | grep -E ' (WARN|ERROR) ' |
        sed -E 's/^[^ ]+ +//; s/INodeNo\([0-9]+\)/INodeNo(N)/g' | cut -c1-160 | sort | uniq -c | sort -rn |
        head -n 10 >&2 || true
fi

# --- report ----------------------------------------------------------------------------------
META=$(python3 -c '
import json, os, platform, sys, time
(large_mib, dir_count, write_count, cache_mem, cache_size, gw_cache, runtime, reps, load_before,
 load_after, hwm_kb, warnings, gw_info, git_rev, rclone_v, s3fs_v, bindfs_v, fio_v, built, nimbus_bin,
 gateway_bin) = sys.argv[1:]
print(json.dumps({
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "host": {"cpus": os.cpu_count(), "kernel": platform.release()},
    "large_mib": int(large_mib), "dir_count": int(dir_count), "write_count": int(write_count),
    "cache_mem": cache_mem, "cache_size": cache_size, "gateway_cache": gw_cache == "1",
    "fio_runtime_s": int(runtime), "reps": int(reps),
    "loadavg_before": load_before, "loadavg_after": load_after,
    "drive_vmhwm_mib": round(int(hwm_kb or 0) / 1024, 1), "drive_log_warnings": int(warnings or 0),
    "gateway_info": json.loads(gw_info), "git": git_rev, "built_now": built == "1",
    "binaries_mtime": {n: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(b)))
                       for n, b in (("nimbus", nimbus_bin), ("gateway", gateway_bin))},
    "versions": {"rclone": rclone_v, "s3fs": s3fs_v, "bindfs": bindfs_v, "fio": fio_v},
}))' "$LARGE_MIB" "$DIR_COUNT" "$WRITE_COUNT" "$CACHE_MEM" "$CACHE_SIZE" "$GATEWAY_CACHE" "$RUNTIME" \
    "$REPS" "$LOAD_BEFORE" "$LOAD_AFTER" "$DRIVE_HWM_KB" "$DRIVE_WARNINGS" "$GW_INFO" "$GIT_REV" \
    "$(rclone version 2>/dev/null | head -n1)" "$(s3fs --version 2>/dev/null | head -n1)" \
    "$(bindfs --version 2>/dev/null | head -n1)" "$(fio --version 2>/dev/null)" "$BUILD" "$NIMBUS_BIN" \
    "$GATEWAY_BIN")
FAILED_JSON=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${FAILED_STEPS[@]+"${FAILED_STEPS[@]}"}")

printf '\nnimbus %s%s; load average %s before, %s after; drive --cache-mem %s; %s\n' \
    "$GIT_REV" "$([ "$BUILD" = 1 ] || echo " (tree now; binaries not rebuilt)")" "$LOAD_BEFORE" "$LOAD_AFTER" \
    "$CACHE_MEM" "$(date -u '+%Y-%m-%d %H:%M UTC')"
py report "$META" "$JSON_OUT" "$FAILED_JSON" || FAILED_STEPS+=(report)

if [ "${#FAILED_STEPS[@]}" -gt 0 ]; then
    die "some steps failed to run: ${FAILED_STEPS[*]} (logs: $T, kept with --keep)"
fi
