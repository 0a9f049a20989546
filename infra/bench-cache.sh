#!/usr/bin/env bash
# infra/bench-cache.sh — read throughput of the gateway's block cache against nginx and MinIO.
#
#   infra/bench-cache.sh [--json FILE] [--duration SECS] [--warmup SECS] [--keep] [--no-build]
#
# One run, same bytes, same client (wrk -t2 -c32), everything on 127.0.0.1:
#   * data: N 4 KiB files, M 1 MiB files and one 1 GiB file of random bytes in a temp dir;
#   * nginx serves that dir (sendfile, page cache);
#   * MinIO holds the same files in an anonymous-readable bucket (read directly by wrk);
#   * the gateway (release build, SQLite, MinIO as block store in another bucket,
#     --cache-mem 512MiB --cache-size 4GiB) holds the same files, uploaded with PUT.
# Then, after a warm-up pass per target:
#   4 KiB files and 1 MiB files: nginx, MinIO direct, gateway (cache warm), gateway with
#   `X-Nimbus-Cache: bypass` (cold path, straight from MinIO); as a reference (not a goal),
#   MinIO again through SigV4-presigned URLs, so that it checks a signature per request as it
#   does for the gateway's reads;
#   random 4 KiB-aligned 4 KiB ranges of the 1 GiB file: nginx, gateway (cache warm).
# The gateway's VmRSS is sampled from /proc during its runs. Prints a table and the ratios the
# cache is meant to reach, each with PASS/MISS; --json FILE also writes them as JSON.
# A run that saw a non-2xx answer is replayed briefly from Python to show which statuses and
# error bodies came back (plus the gateway's last error lines); ratios built on it are INVALID.
# Takes about 4 minutes after the build with the defaults (10 s runs, 3 s warm-ups).
#
#   --json FILE     also write the results as JSON to FILE
#   --duration S    seconds per measured wrk run (default 10)
#   --warmup S      seconds per warm-up wrk run (default 3)
#   --keep          keep the temp dir (data, logs, wrk outputs) instead of deleting it
#   --no-build      use the gateway release binary as it is
#
# Exit status: 0 when every run answered only 2xx without socket errors (whether the goals are
# met or not: that is reported, not enforced), 1 when any run saw a non-2xx response, a socket
# error, or failed to run.
#
# Environment:
#   BENCH_SMALL_COUNT   number of 4 KiB files (default 1000)
#   BENCH_MEDIUM_COUNT  number of 1 MiB files (default 64)
#   BENCH_LARGE_MIB     size of the large file in MiB (default 1024)
#   BENCH_THREADS       wrk threads (default 2)
#   BENCH_CONNS         wrk connections (default 32)
#   BENCH_CACHE_MEM     gateway --cache-mem (default 512MiB)
#   BENCH_CACHE_SIZE    gateway --cache-size (default 4GiB)
#   BENCH_DEADLINE      seconds after which the whole run is aborted (default 900)
#   BENCH_PERF          1: `perf record` the gateway and MinIO during each measured gateway run
#                       (flat profiles in TEMP/out/NAME.perf.txt; use with --keep; profiling
#                       slows the gateway, so such a run's figures are not for comparison)
#   NIMBUS_GATEWAY_BIN  gateway binary to use instead of building one (implies --no-build)
#   NIMBUS_MINIO_BIN    MinIO binary (default /var/cache/nimbus/bin/minio, from install-deps.sh)
#   CARGO_TARGET_DIR    default /var/cache/nimbus/target (or ./target when that is not writable)
#   TMPDIR              where the temp dir (≈ 4.5 GiB with the defaults) is made (default /tmp)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

SMALL_COUNT=${BENCH_SMALL_COUNT:-1000}
MEDIUM_COUNT=${BENCH_MEDIUM_COUNT:-64}
LARGE_MIB=${BENCH_LARGE_MIB:-1024}
THREADS=${BENCH_THREADS:-2}
CONNS=${BENCH_CONNS:-32}
CACHE_MEM=${BENCH_CACHE_MEM:-512MiB}
CACHE_SIZE=${BENCH_CACHE_SIZE:-4GiB}
DEADLINE=${BENCH_DEADLINE:-900}
MINIO_BIN=${NIMBUS_MINIO_BIN:-${NIMBUS_CACHE_DIR:-/var/cache/nimbus}/bin/minio}
DURATION=10
WARMUP=3
JSON_OUT=""
KEEP=0
BUILD=1

MINIO_USER=nimbus-bench
MINIO_SECRET=nimbus-bench-secret
DIRECT_BUCKET=bench-direct
GATEWAY_BUCKET=nimbus-bench
ADMIN_PASSWORD=bench-admin-password
GW_DIR=bench   # the files live under /bench in the admin's space

log() { printf '[bench] %s\n' "$*" >&2; }
die() { printf '[bench] ERROR: %s\n' "$*" >&2; exit 1; }

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --json) [ $# -ge 2 ] || die "--json needs a file"; JSON_OUT=$2; shift 2 ;;
        --duration) [ $# -ge 2 ] || die "--duration needs seconds"; DURATION=$2; shift 2 ;;
        --warmup) [ $# -ge 2 ] || die "--warmup needs seconds"; WARMUP=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --no-build) BUILD=0; shift ;;
        -h | --help) usage; exit 0 ;;
        *) usage; die "unknown argument: $1" ;;
    esac
done
for v in SMALL_COUNT MEDIUM_COUNT LARGE_MIB THREADS CONNS DEADLINE DURATION WARMUP; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer (got '${!v}')"
done
if [ -n "$JSON_OUT" ]; then
    # Resolve now: the script changes directory later.
    JSON_OUT=$(cd "$(dirname "$JSON_OUT")" && pwd)/$(basename "$JSON_OUT")
fi

# --- processes and cleanup -------------------------------------------------------------------
T=""
NGINX_PID=""
MINIO_PID=""
GW_PID=""
SAMPLER_PID=""
WATCHDOG_PID=""

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

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_pid "$SAMPLER_PID" "rss sampler"
    stop_pid "$GW_PID" gateway
    stop_pid "$MINIO_PID" minio
    stop_pid "$NGINX_PID" nginx
    stop_pid "$WATCHDOG_PID" watchdog
    wait 2>/dev/null || true
    if [ -n "$T" ] && [ -d "$T" ]; then
        if [ "$KEEP" = 1 ]; then
            log "kept $T"
        else
            rm -rf "$T"
        fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# Abort the whole run after $DEADLINE seconds (the EXIT trap then cleans up).
(
    trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
    sleep "$DEADLINE" &
    sleeper=$!
    wait "$sleeper"
    printf '[bench] ERROR: deadline of %ss reached, aborting\n' "$DEADLINE" >&2
    kill -TERM $$
) &
WATCHDOG_PID=$!

# --- dependencies ----------------------------------------------------------------------------
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else die "need root (or sudo) to run: $*"
    fi
}
missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
if [ "${#missing[@]}" -gt 0 ]; then
    log "apt: installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" </dev/null
fi
NGINX_BIN=$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)
command -v python3 >/dev/null 2>&1 || die "python3 not found (infra/install-deps.sh installs it)"
command -v curl >/dev/null 2>&1 || die "curl not found (infra/install-deps.sh installs it)"
if ! python3 -c 'import boto3' 2>/dev/null; then
    log "pip: installing boto3 (signs the MinIO uploads and the bucket policy)"
    python3 -m pip install --quiet boto3 || die "could not install boto3"
fi
[ -x "$MINIO_BIN" ] || die "$MINIO_BIN not found; run infra/install-deps.sh first"

# The source the gateway is built from ("+dirty": uncommitted changes in gateway/ or proto/).
GIT_REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$ROOT" status --porcelain -- gateway proto 2>/dev/null || true)" ]; then
    GIT_REV="$GIT_REV+dirty"
fi
if [ -n "${NIMBUS_GATEWAY_BIN:-}" ]; then
    GATEWAY_BIN=$NIMBUS_GATEWAY_BIN
else
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
    GATEWAY_BIN=$CARGO_TARGET_DIR/release/nimbus-gateway
    if [ "$BUILD" = 1 ]; then
        log "cargo build --release -p nimbus-gateway (target dir $CARGO_TARGET_DIR)"
        (cd "$ROOT" && cargo build --release -p nimbus-gateway)
    fi
fi
[ -x "$GATEWAY_BIN" ] || die "$GATEWAY_BIN not found (build it, or drop --no-build)"

# --- temp dir, ports -------------------------------------------------------------------------
T=$(mktemp -d "${TMPDIR:-/tmp}/nimbus-bench.XXXXXX")
# nginx's workers may run as another user: they must be able to read the data.
chmod 0755 "$T"
mkdir -p "$T/data" "$T/lists" "$T/nginx/tmp" "$T/minio" "$T/gw" "$T/gw-cache" "$T/out"
cd "$T"
log "temp dir $T"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
NGINX_PORT=$(free_port)
MINIO_PORT=$(free_port)
MINIO_CONSOLE_PORT=$(free_port)
GW_PORT=$(free_port)

# --- helpers in Python (data, uploads, checks, report) ----------------------------------------
cat >"$T/bench.py" <<'PYEOF'
import concurrent.futures, http.client, json, os, re, sys, threading, urllib.request

def gen(data, lists, n_small, n_medium, large_mib):
    os.makedirs(f"{data}/s", exist_ok=True)
    os.makedirs(f"{data}/m", exist_ok=True)
    small = [f"s/f{i:05d}.bin" for i in range(n_small)]
    medium = [f"m/f{i:03d}.bin" for i in range(n_medium)]
    for p in small:
        with open(f"{data}/{p}", "wb") as f:
            f.write(os.urandom(4096))
    for p in medium:
        with open(f"{data}/{p}", "wb") as f:
            f.write(os.urandom(1 << 20))
    with open(f"{data}/large.bin", "wb") as f:
        for _ in range(large_mib):
            f.write(os.urandom(1 << 20))
    for name, paths in (("small", small), ("medium", medium)):
        with open(f"{lists}/{name}.txt", "w") as f:
            f.write("".join(p + "\n" for p in paths))

def all_files(data):
    out = []
    for d in ("s", "m"):
        out += [f"{d}/{n}" for n in sorted(os.listdir(f"{data}/{d}"))]
    return out + ["large.bin"]

def minio(data, endpoint, bucket, user, secret):
    import boto3
    from botocore.config import Config
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=user, aws_secret_access_key=secret,
                      config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                    max_pool_connections=8))
    s3.create_bucket(Bucket=bucket)
    policy = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": ["*"]}, "Action": ["s3:GetObject"],
        "Resource": [f"arn:aws:s3:::{bucket}/*"]}]}
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    files = all_files(data)
    def put(p):
        s3.upload_file(f"{data}/{p}", bucket, p)
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        list(ex.map(put, files))
    print(f"uploaded {len(files)} objects to s3://{bucket}")

def presign(list_file, out_file, endpoint, bucket, user, secret):
    """The list's paths as SigV4-presigned GETs (path and query only, valid 2 h): MinIO then
    checks a signature on every request, as it does for the gateway's own reads."""
    import boto3
    from botocore.config import Config
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=user, aws_secret_access_key=secret,
                      config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    base = f"{endpoint}/{bucket}/"
    with open(list_file) as f, open(out_file, "w") as out:
        for line in f:
            key = line.strip()
            if key:
                url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key},
                                                ExpiresIn=7200)
                if not url.startswith(base):
                    raise SystemExit(f"unexpected presigned URL {url}")
                out.write(url[len(base):] + "\n")

def gateway(data, port, token, prefix):
    local = threading.local()
    def put(p):
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        path = f"{data}/{p}"
        with open(path, "rb") as f:
            conn.request("PUT", f"/api/v1/files/{prefix}/{p}", body=f,
                         headers={"Authorization": f"Bearer {token}",
                                  "Content-Length": str(os.path.getsize(path))})
            r = conn.getresponse()
            body = r.read()
        if r.status not in (200, 201):
            raise SystemExit(f"PUT {p}: HTTP {r.status} {body[:300]!r}")
    files = all_files(data)
    # The large file first, alone, then the rest in parallel.
    put(files[-1])
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        list(ex.map(put, files[:-1]))
    print(f"uploaded {len(files)} files through the gateway")

def fetch(url, headers):
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.status, r.read()

def verify(data, targets_json):
    """Every target returns the same bytes for a few files and a range of the large file."""
    targets = json.loads(targets_json)
    with open(f"{data}/large.bin", "rb") as f:
        f.seek(123 * 4096)
        want_range = f.read(4096)
    samples = ["s/f00000.bin", "m/f000.bin"]
    for t in targets:
        for p in samples:
            with open(f"{data}/{p}", "rb") as f:
                want = f.read()
            st, got = fetch(t["base"] + p, t["headers"])
            if st != 200 or got != want:
                raise SystemExit(f"{t['name']}: GET {p} gave HTTP {st}, {len(got)} bytes, not the file")
        if t.get("range"):
            h = dict(t["headers"], Range=f"bytes={123 * 4096}-{124 * 4096 - 1}")
            st, got = fetch(t["base"] + "large.bin", h)
            if st != 206 or got != want_range:
                raise SystemExit(f"{t['name']}: ranged GET gave HTTP {st}, {len(got)} bytes, not the range")
    print("all targets return the same bytes")

def probe(base, what, arg, size, headers_json):
    """After a run with non-2xx answers: which statuses, and what the error bodies say."""
    import collections, random
    headers = json.loads(headers_json)
    if what == "list":
        with open(arg) as f:
            paths = [l.strip() for l in f if l.strip()]
    counts, samples = collections.Counter(), {}
    lock = threading.Lock()
    def worker(seed):
        rnd = random.Random(seed)
        conn = http.client.HTTPConnection(base.split("//")[1], timeout=30)
        for _ in range(100):
            h = dict(headers)
            if what == "list":
                path = rnd.choice(paths)
            else:
                off = rnd.randrange(int(size) // 4096) * 4096
                path, h["Range"] = arg, f"bytes={off}-{off + 4095}"
            conn.request("GET", path, headers=h)
            r = conn.getresponse()
            body = r.read()
            with lock:
                counts[r.status] += 1
                if r.status >= 300 and r.status not in samples:
                    samples[r.status] = f"{path} {h.get('Range', '')}: {body[:300]!r}"
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(worker, range(8)))
    print(f"  probe of {sum(counts.values())} requests: statuses {dict(sorted(counts.items()))}")
    for st, text in sorted(samples.items()):
        print(f"  HTTP {st}: {text}")

UNITS = {"": 1, "B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3, "TB": 1024 ** 4}

def parse_wrk(text):
    r = {}
    m = re.search(r"Requests/sec:\s*([\d.]+)", text)
    r["rps"] = float(m.group(1)) if m else None
    m = re.search(r"Transfer/sec:\s*([\d.]+)([KMGT]?B)", text)
    r["transfer_bytes_per_sec"] = float(m.group(1)) * UNITS[m.group(2)] if m else None
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+), ([\d.]+)([KMGT]?B) read", text)
    r["requests"] = int(m.group(1)) if m else None
    m = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", text)
    r["non_2xx_3xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    r["socket_errors"] = dict(zip(("connect", "read", "write", "timeout"), map(int, m.groups()))) if m else {}
    def ms(v, u):
        return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[u]
    m = re.search(r"Latency\s+([\d.]+)(us|ms|s|m)\b", text)
    r["latency_avg_ms"] = ms(*m.groups()) if m else None
    m = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s|m)\b", text, re.M)
    r["latency_p99_ms"] = ms(*m.groups()) if m else None
    return r

def report(out_dir, meta_json, json_out):
    meta = json.loads(meta_json)
    runs = {}
    for name in meta["runs"]:
        with open(f"{out_dir}/{name}.wrk") as f:
            runs[name] = parse_wrk(f.read())
        rss_file = f"{out_dir}/{name}.rss"
        if os.path.exists(rss_file):
            with open(rss_file) as f:
                kb = [int(x) for x in f.read().split()]
            runs[name]["gateway_rss_max_mib"] = round(max(kb) / 1024, 1) if kb else None
    bad = []
    for name, r in runs.items():
        problems = []
        if r["rps"] is None:
            problems.append("wrk printed no Requests/sec")
        if r["non_2xx_3xx"]:
            problems.append(f"{r['non_2xx_3xx']} non-2xx/3xx responses")
        errs = {k: v for k, v in r["socket_errors"].items() if v}
        if errs:
            problems.append(f"socket errors {errs}")
        r["valid"] = not problems
        bad += [f"{name}: {p}" for p in problems]

    print()
    print(f"{'run':<22} {'req/s':>10} {'MiB/s':>9} {'avg ms':>8} {'p99 ms':>8} {'RSS MiB':>8}")
    for name, r in runs.items():
        mib = (r["transfer_bytes_per_sec"] or 0) / 2 ** 20
        rss = r.get("gateway_rss_max_mib")
        print(f"{name:<22} {r['rps'] or 0:>10.1f} {mib:>9.1f} {r['latency_avg_ms'] or 0:>8.2f} "
              f"{r['latency_p99_ms'] or 0:>8.2f} {rss if rss is not None else '':>8}"
              f"{'' if r['valid'] else '  ERRORS (see below)'}")

    def rps(n):
        return runs[n]["rps"] or 0.0
    ratios = []
    def ratio(label, num, den, goal):
        v = rps(num) / rps(den) if rps(den) else 0.0
        valid = runs[num]["valid"] and runs[den]["valid"]
        ratios.append({"name": label, "numerator": num, "denominator": den, "value": round(v, 3),
                       "goal": goal, "valid": valid, "pass": valid and v >= goal,
                       "shortfall_pct": 0.0 if v >= goal else round((goal - v) / goal * 100, 1)})
    ratio("4KiB hot: gateway / nginx", "4k-gateway-warm", "4k-nginx", 0.5)
    ratio("4KiB hot: gateway / MinIO", "4k-gateway-warm", "4k-minio", 5.0)
    ratio("1MiB hot: gateway / nginx", "1m-gateway-warm", "1m-nginx", 0.8)
    ratio("1MiB hot: gateway / MinIO", "1m-gateway-warm", "1m-minio", 1.3)
    ratio("4KiB ranges of 1GiB: gateway / nginx", "range-gateway-warm", "range-nginx", 0.5)
    ratio("4KiB bypass: gateway / MinIO", "4k-gateway-bypass", "4k-minio", 0.8)
    ratio("1MiB bypass: gateway / MinIO", "1m-gateway-bypass", "1m-minio", 0.8)
    # Not goals: MinIO with a signature to check on every request, as for the gateway's reads.
    refs = []
    for label, num, den in (("4KiB bypass: gateway / MinIO signed", "4k-gateway-bypass", "4k-minio-signed"),
                            ("1MiB bypass: gateway / MinIO signed", "1m-gateway-bypass", "1m-minio-signed"),
                            ("4KiB: MinIO signed / MinIO anonymous", "4k-minio-signed", "4k-minio"),
                            ("1MiB: MinIO signed / MinIO anonymous", "1m-minio-signed", "1m-minio")):
        if num in runs and den in runs and rps(den):
            refs.append({"name": label, "numerator": num, "denominator": den,
                         "value": round(rps(num) / rps(den), 3),
                         "valid": runs[num]["valid"] and runs[den]["valid"]})

    rss_vals = [r["gateway_rss_max_mib"] for r in runs.values() if r.get("gateway_rss_max_mib") is not None]
    rss_max = max(rss_vals) if rss_vals else None
    rss_limit = meta["cache_mem_mib"] + 150
    rss = {"max_vmrss_mib_during_runs": rss_max, "vmhwm_mib_whole_life": meta.get("vmhwm_mib"),
           "limit_mib": rss_limit, "pass": rss_max is not None and rss_max <= rss_limit,
           "over_by_mib": None if rss_max is None else round(max(0.0, rss_max - rss_limit), 1)}

    print()
    print(f"{'ratio (req/s)':<40} {'value':>7} {'goal':>7}  result")
    for q in ratios:
        if not q["valid"]:
            res = "INVALID (a run behind it had errors)"
        else:
            res = "PASS" if q["pass"] else f"MISS ({q['shortfall_pct']}% short)"
        print(f"{q['name']:<40} {q['value']:>7.3f} {'>= ' + str(q['goal']):>7}  {res}")
    for q in refs:
        print(f"{q['name']:<40} {q['value']:>7.3f} {'(ref)':>7}  {'' if q['valid'] else 'INVALID'}")
    res = "PASS" if rss["pass"] else f"MISS (over by {rss['over_by_mib']} MiB)"
    print(f"{'gateway VmRSS max under load (MiB)':<40} {rss_max if rss_max is not None else '?':>7} "
          f"{'<= ' + str(rss_limit):>7}  {res}")
    print(f"(gateway VmHWM over its whole life, uploads included: {meta.get('vmhwm_mib')} MiB)")

    doc = {"meta": meta, "runs": runs, "ratios": ratios, "reference_ratios": refs, "rss": rss, "errors": bad}
    if json_out:
        with open(json_out, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        print(f"\nJSON written to {json_out}")
    if bad:
        print("\nERRORS:", file=sys.stderr)
        for b in bad:
            print("  " + b, file=sys.stderr)
        sys.exit(1)

if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "gen":
        gen(args[0], args[1], int(args[2]), int(args[3]), int(args[4]))
    elif cmd == "minio":
        minio(*args)
    elif cmd == "gateway":
        gateway(args[0], int(args[1]), args[2], args[3])
    elif cmd == "presign":
        presign(*args)
    elif cmd == "verify":
        verify(*args)
    elif cmd == "probe":
        probe(*args)
    elif cmd == "report":
        report(*args)
    else:
        raise SystemExit(f"unknown command {cmd}")
PYEOF

# --- wrk scripts -----------------------------------------------------------------------------
# rotate.lua PREFIX LISTFILE [HEADER...]: GET PREFIX..line for each line of LISTFILE in turn.
cat >"$T/rotate.lua" <<'LUAEOF'
local next_tid = 0
function setup(thread)
   thread:set("tid", next_tid)
   next_tid = next_tid + 1
end

local reqs = {}
local i = 0
function init(args)
   local prefix, list = args[1], args[2]
   local headers = {}
   for k = 3, #args do
      local name, value = args[k]:match("^([^:]+):%s*(.*)$")
      headers[name] = value
   end
   for line in io.lines(list) do
      if line ~= "" then
         reqs[#reqs + 1] = wrk.format("GET", prefix .. line, headers)
      end
   end
   -- Threads start at different places in the list.
   i = ((tid or 0) * 7919) % #reqs
end

function request()
   i = i % #reqs + 1
   return reqs[i]
end
LUAEOF

# range.lua PATH SIZE [HEADER...]: GET PATH with Range: a random 4 KiB-aligned 4 KiB block.
cat >"$T/range.lua" <<'LUAEOF'
local next_tid = 0
function setup(thread)
   thread:set("tid", next_tid)
   next_tid = next_tid + 1
end

local path, blocks
local headers = {}
function init(args)
   path = args[1]
   blocks = math.floor(tonumber(args[2]) / 4096)
   for k = 3, #args do
      local name, value = args[k]:match("^([^:]+):%s*(.*)$")
      headers[name] = value
   end
   math.randomseed(os.time() * 1000 + (tid or 0) * 7919)
end

function request()
   local off = (math.random(blocks) - 1) * 4096
   headers["Range"] = string.format("bytes=%d-%d", off, off + 4095)
   return wrk.format("GET", path, headers)
end
LUAEOF

# --- data ------------------------------------------------------------------------------------
log "generating $SMALL_COUNT x 4 KiB, $MEDIUM_COUNT x 1 MiB, 1 x $LARGE_MIB MiB"
python3 "$T/bench.py" gen "$T/data" "$T/lists" "$SMALL_COUNT" "$MEDIUM_COUNT" "$LARGE_MIB"
LARGE_SIZE=$((LARGE_MIB * 1024 * 1024))

# --- nginx -----------------------------------------------------------------------------------
cat >"$T/nginx/nginx.conf" <<EOF
worker_processes 2;
daemon off;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    default_type application/octet-stream;
    client_body_temp_path $T/nginx/tmp/body;
    proxy_temp_path $T/nginx/tmp/proxy;
    fastcgi_temp_path $T/nginx/tmp/fastcgi;
    uwsgi_temp_path $T/nginx/tmp/uwsgi;
    scgi_temp_path $T/nginx/tmp/scgi;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $T/data;
    }
}
EOF
log "starting nginx on 127.0.0.1:$NGINX_PORT"
"$NGINX_BIN" -p "$T/nginx" -e "$T/nginx/error.log" -c "$T/nginx/nginx.conf" >"$T/nginx/stdout.log" 2>&1 &
NGINX_PID=$!

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
wait_http nginx "http://127.0.0.1:$NGINX_PORT/s/f00000.bin" "$NGINX_PID" "$T/nginx/error.log"

# --- MinIO -----------------------------------------------------------------------------------
log "starting MinIO on 127.0.0.1:$MINIO_PORT"
MINIO_ROOT_USER=$MINIO_USER MINIO_ROOT_PASSWORD=$MINIO_SECRET MINIO_UPDATE=off \
    "$MINIO_BIN" server "$T/minio" --quiet \
    --address "127.0.0.1:$MINIO_PORT" --console-address "127.0.0.1:$MINIO_CONSOLE_PORT" \
    >"$T/minio.log" 2>&1 </dev/null &
MINIO_PID=$!
wait_http minio "http://127.0.0.1:$MINIO_PORT/minio/health/live" "$MINIO_PID" "$T/minio.log"
log "uploading the files to MinIO bucket $DIRECT_BUCKET (anonymous read)"
python3 "$T/bench.py" minio "$T/data" "http://127.0.0.1:$MINIO_PORT" "$DIRECT_BUCKET" \
    "$MINIO_USER" "$MINIO_SECRET" >&2

# --- gateway ---------------------------------------------------------------------------------
log "starting the gateway ($GATEWAY_BIN) on 127.0.0.1:$GW_PORT, cache mem $CACHE_MEM, ssd $CACHE_SIZE"
AWS_ACCESS_KEY_ID=$MINIO_USER AWS_SECRET_ACCESS_KEY=$MINIO_SECRET AWS_REGION=us-east-1 \
    NIMBUS_ADMIN_PASSWORD=$ADMIN_PASSWORD \
    "$GATEWAY_BIN" serve --listen "127.0.0.1:$GW_PORT" --data-dir "$T/gw" \
    --store s3 --s3-endpoint "http://127.0.0.1:$MINIO_PORT" --s3-bucket "$GATEWAY_BUCKET" \
    --s3-region us-east-1 --cache-dir "$T/gw-cache" --cache-size "$CACHE_SIZE" --cache-mem "$CACHE_MEM" \
    >"$T/gateway.log" 2>&1 </dev/null &
GW_PID=$!
wait_http gateway "http://127.0.0.1:$GW_PORT/readyz" "$GW_PID" "$T/gateway.log"
grep -q "listening on" "$T/gateway.log" || log "WARNING: the gateway did not print 'listening on'"
log "gateway info: $(curl -fsS --max-time 5 "http://127.0.0.1:$GW_PORT/api/v1/info")"

TOKEN=$(curl -fsS --max-time 10 -H 'Content-Type: application/json' \
    -d "{\"username\":\"admin\",\"password\":\"$ADMIN_PASSWORD\"}" \
    "http://127.0.0.1:$GW_PORT/api/v1/auth/login" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')
[ -n "$TOKEN" ] || die "login as admin gave no token"
log "uploading the files through the gateway (PUT /api/v1/files/$GW_DIR/...)"
python3 "$T/bench.py" gateway "$T/data" "$GW_PORT" "$TOKEN" "$GW_DIR" >&2

AUTH="Authorization: Bearer $TOKEN"
BYPASS="X-Nimbus-Cache: bypass"
NGINX_URL=http://127.0.0.1:$NGINX_PORT
MINIO_URL=http://127.0.0.1:$MINIO_PORT
GW_URL=http://127.0.0.1:$GW_PORT

log "checking that every target serves the same bytes"
python3 "$T/bench.py" verify "$T/data" "$(python3 -c '
import json, sys
nginx, minio, gw, bucket, gwdir, token = sys.argv[1:]
auth = {"Authorization": "Bearer " + token}
print(json.dumps([
    {"name": "nginx", "base": nginx + "/", "headers": {}, "range": True},
    {"name": "minio", "base": minio + "/" + bucket + "/", "headers": {}, "range": True},
    {"name": "gateway", "base": gw + "/api/v1/files/" + gwdir + "/", "headers": auth, "range": True},
    {"name": "gateway-bypass", "base": gw + "/api/v1/files/" + gwdir + "/",
     "headers": dict(auth, **{"X-Nimbus-Cache": "bypass"}), "range": True},
]))' "$NGINX_URL" "$MINIO_URL" "$GW_URL" "$DIRECT_BUCKET" "$GW_DIR" "$TOKEN")" >&2

# --- runs ------------------------------------------------------------------------------------
FAILED=0
RUNS=()

# probe_run URL SCRIPT ARGS...: the requests of a wrk run, replayed from Python with statuses.
probe_run() {
    local url=$1 script=$2
    shift 2
    local first=$1 second=$2   # rotate.lua: PREFIX LISTFILE; range.lua: PATH SIZE
    shift 2
    local headers
    headers=$(python3 -c '
import json, sys
print(json.dumps(dict(h.split(": ", 1) for h in sys.argv[1:])))' "$@")
    if [ "$(basename "$script")" = range.lua ]; then
        python3 "$T/bench.py" probe "$url" range "$first" "$second" "$headers"
    else
        # The probe takes full paths: write the list with the prefix applied.
        sed "s|^|$first|" "$second" >"$T/probe-list.txt"
        python3 "$T/bench.py" probe "$url" list "$T/probe-list.txt" 0 "$headers"
    fi
}

# run_wrk NAME SECONDS MEASURE(0|1) URL SCRIPT ARGS...
run_wrk() {
    local name=$1 secs=$2 measure=$3 url=$4 script=$5
    shift 5
    local out=$T/out/$name.wrk
    [ "$measure" = 1 ] || out=$T/out/warmup-$name.wrk
    local sampling=0
    if [ "$measure" = 1 ] && [[ "$name" == *gateway* ]]; then
        sampling=1
        : >"$T/out/$name.rss"
        (
            while kill -0 "$GW_PID" 2>/dev/null; do
                awk '/^VmRSS:/ { print $2 }' "/proc/$GW_PID/status" >>"$T/out/$name.rss" 2>/dev/null || true
                sleep 0.25
            done
        ) &
        SAMPLER_PID=$!
    fi
    local perf_pid=""
    if [ "$sampling" = 1 ] && [ "${BENCH_PERF:-0}" = 1 ]; then
        perf record -F 499 -g -p "$GW_PID,$MINIO_PID" -o "$T/out/$name.perf.data" --quiet \
            >/dev/null 2>&1 &
        perf_pid=$!
        sleep 0.5
    fi
    if ! wrk -t"$THREADS" -c"$CONNS" -d"${secs}s" --timeout 10s --latency -s "$script" "$url" -- "$@" \
        >"$out" 2>&1; then
        log "ERROR: wrk failed for $name:"
        cat "$out" >&2
        FAILED=1
    fi
    if [ -n "$perf_pid" ]; then
        kill -INT "$perf_pid" 2>/dev/null || true
        wait "$perf_pid" 2>/dev/null || true
        perf report -i "$T/out/$name.perf.data" --no-children -g none --sort comm,dso,sym --stdio 2>/dev/null |
            grep -v '^$' | grep '%' | head -n 200 >"$T/out/$name.perf.txt" || true
    fi
    if [ "$sampling" = 1 ]; then
        stop_pid "$SAMPLER_PID" "rss sampler"
        wait "$SAMPLER_PID" 2>/dev/null || true
        SAMPLER_PID=""
    fi
    local rps non2xx sockerr
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$out")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$out")
    sockerr=$(grep -m1 '^ *Socket errors:' "$out" || true)
    if [ -n "$non2xx" ]; then
        log "ERROR: $name: $non2xx non-2xx/3xx responses; probing with 800 of its requests:"
        FAILED=1
        probe_run "$url" "$script" "$@" >&2 || log "(the probe itself failed)"
        if [[ "$name" == *gateway* ]]; then
            log "gateway log, last WARN/ERROR lines:"
            sed 's/\x1b\[[0-9;]*m//g' "$T/gateway.log" | grep -E ' (WARN|ERROR) ' |
                grep -v 'on_failure' | tail -n 3 >&2 || true
        fi
    fi
    if [ -n "$sockerr" ]; then
        log "ERROR: $name:$sockerr"
        FAILED=1
    fi
    if [ "$measure" = 1 ]; then
        RUNS+=("$name")
        log "$(printf '%-20s %10s req/s' "$name" "${rps:-?}")"
    else
        log "$(printf 'warm-up %-12s %10s req/s' "$name" "${rps:-?}")"
    fi
}

SMALL=$T/lists/small.txt
MEDIUM=$T/lists/medium.txt
log "presigning the MinIO GETs of both lists (the signed MinIO reference runs)"
python3 "$T/bench.py" presign "$SMALL" "$T/lists/small-signed.txt" "$MINIO_URL" "$DIRECT_BUCKET" \
    "$MINIO_USER" "$MINIO_SECRET" >&2
python3 "$T/bench.py" presign "$MEDIUM" "$T/lists/medium-signed.txt" "$MINIO_URL" "$DIRECT_BUCKET" \
    "$MINIO_USER" "$MINIO_SECRET" >&2
GW_PREFIX=/api/v1/files/$GW_DIR/
GW_LARGE=/api/v1/files/$GW_DIR/large.bin

log "loading the whole large file through the gateway once"
curl -fsS --max-time 300 -o /dev/null -H "$AUTH" "$GW_URL$GW_LARGE" || die "GET of the large file failed"
cat "$T/data/large.bin" >/dev/null   # nginx's copy into the page cache

log "warm-up: ${WARMUP}s per target (wrk -t$THREADS -c$CONNS)"
run_wrk 4k-nginx "$WARMUP" 0 "$NGINX_URL" "$T/rotate.lua" / "$SMALL"
run_wrk 4k-minio "$WARMUP" 0 "$MINIO_URL" "$T/rotate.lua" "/$DIRECT_BUCKET/" "$SMALL"
run_wrk 4k-minio-signed "$WARMUP" 0 "$MINIO_URL" "$T/rotate.lua" "/$DIRECT_BUCKET/" "$T/lists/small-signed.txt"
run_wrk 4k-gateway-warm "$WARMUP" 0 "$GW_URL" "$T/rotate.lua" "$GW_PREFIX" "$SMALL" "$AUTH"
run_wrk 4k-gateway-bypass "$WARMUP" 0 "$GW_URL" "$T/rotate.lua" "$GW_PREFIX" "$SMALL" "$AUTH" "$BYPASS"
run_wrk 1m-nginx "$WARMUP" 0 "$NGINX_URL" "$T/rotate.lua" / "$MEDIUM"
run_wrk 1m-minio "$WARMUP" 0 "$MINIO_URL" "$T/rotate.lua" "/$DIRECT_BUCKET/" "$MEDIUM"
run_wrk 1m-minio-signed "$WARMUP" 0 "$MINIO_URL" "$T/rotate.lua" "/$DIRECT_BUCKET/" "$T/lists/medium-signed.txt"
run_wrk 1m-gateway-warm "$WARMUP" 0 "$GW_URL" "$T/rotate.lua" "$GW_PREFIX" "$MEDIUM" "$AUTH"
run_wrk 1m-gateway-bypass "$WARMUP" 0 "$GW_URL" "$T/rotate.lua" "$GW_PREFIX" "$MEDIUM" "$AUTH" "$BYPASS"
run_wrk range-nginx "$WARMUP" 0 "$NGINX_URL" "$T/range.lua" /large.bin "$LARGE_SIZE"
run_wrk range-gateway-warm "$WARMUP" 0 "$GW_URL" "$T/range.lua" "$GW_LARGE" "$LARGE_SIZE" "$AUTH"

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
log "measuring: ${DURATION}s per run (load average before: $LOAD_BEFORE)"
run_wrk 4k-nginx "$DURATION" 1 "$NGINX_URL" "$T/rotate.lua" / "$SMALL"
run_wrk 4k-minio "$DURATION" 1 "$MINIO_URL" "$T/rotate.lua" "/$DIRECT_BUCKET/" "$SMALL"
run_wrk 4k-minio-signed "$DURATION" 1 "$MINIO_URL" "$T/rotate.lua" "/$DIRECT_BUCKET/" "$T/lists/small-signed.txt"
run_wrk 4k-gateway-warm "$DURATION" 1 "$GW_URL" "$T/rotate.lua" "$GW_PREFIX" "$SMALL" "$AUTH"
run_wrk 4k-gateway-bypass "$DURATION" 1 "$GW_URL" "$T/rotate.lua" "$GW_PREFIX" "$SMALL" "$AUTH" "$BYPASS"
run_wrk 1m-nginx "$DURATION" 1 "$NGINX_URL" "$T/rotate.lua" / "$MEDIUM"
run_wrk 1m-minio "$DURATION" 1 "$MINIO_URL" "$T/rotate.lua" "/$DIRECT_BUCKET/" "$MEDIUM"
run_wrk 1m-minio-signed "$DURATION" 1 "$MINIO_URL" "$T/rotate.lua" "/$DIRECT_BUCKET/" "$T/lists/medium-signed.txt"
run_wrk 1m-gateway-warm "$DURATION" 1 "$GW_URL" "$T/rotate.lua" "$GW_PREFIX" "$MEDIUM" "$AUTH"
run_wrk 1m-gateway-bypass "$DURATION" 1 "$GW_URL" "$T/rotate.lua" "$GW_PREFIX" "$MEDIUM" "$AUTH" "$BYPASS"
run_wrk range-nginx "$DURATION" 1 "$NGINX_URL" "$T/range.lua" /large.bin "$LARGE_SIZE"
run_wrk range-gateway-warm "$DURATION" 1 "$GW_URL" "$T/range.lua" "$GW_LARGE" "$LARGE_SIZE" "$AUTH"
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

kill -0 "$GW_PID" 2>/dev/null || die "the gateway died during the runs (see $T/gateway.log; --keep keeps it)"
VMHWM_KB=$(awk '/^VmHWM:/ { print $2 }' "/proc/$GW_PID/status")

# --- report ----------------------------------------------------------------------------------
CACHE_MEM_MIB=$(python3 -c '
import re, sys
m = re.fullmatch(r"(\d+)\s*([KMGT]i?B|B)?", sys.argv[1].strip())
n, u = int(m.group(1)), (m.group(2) or "B")
f = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
     "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[u]
print(round(n * f / 2**20))' "$CACHE_MEM")
META=$(python3 -c '
import json, os, platform, sys, time
(runs, threads, conns, duration, warmup, small, medium, large_mib, cache_mem, cache_mem_mib,
 cache_size, load_before, load_after, vmhwm_kb, gw_info, git_rev) = sys.argv[1:]
print(json.dumps({
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "host": {"cpus": os.cpu_count(), "kernel": platform.release()},
    "wrk": {"threads": int(threads), "connections": int(conns), "duration_s": int(duration),
            "warmup_s": int(warmup)},
    "data": {"small_files": int(small), "medium_files": int(medium), "large_mib": int(large_mib)},
    "gateway": {"cache_mem": cache_mem, "cache_size": cache_size, "info": json.loads(gw_info),
                "git": git_rev},
    "cache_mem_mib": int(cache_mem_mib),
    "loadavg_before": load_before, "loadavg_after": load_after,
    "vmhwm_mib": round(int(vmhwm_kb) / 1024, 1),
    "runs": runs.split(),
}))' "${RUNS[*]}" "$THREADS" "$CONNS" "$DURATION" "$WARMUP" "$SMALL_COUNT" "$MEDIUM_COUNT" \
    "$LARGE_MIB" "$CACHE_MEM" "$CACHE_MEM_MIB" "$CACHE_SIZE" "$LOAD_BEFORE" "$LOAD_AFTER" "$VMHWM_KB" \
    "$(curl -fsS --max-time 5 "$GW_URL/api/v1/info")" "$GIT_REV")

printf '\nwrk -t%s -c%s -d%ss; load average %s before, %s after; gateway %s; %s\n' \
    "$THREADS" "$CONNS" "$DURATION" "$LOAD_BEFORE" "$LOAD_AFTER" "$GIT_REV" "$(date -u '+%Y-%m-%d %H:%M UTC')"
python3 "$T/bench.py" report "$T/out" "$META" "$JSON_OUT" || FAILED=1

if [ "$FAILED" != 0 ]; then
    die "some runs had errors (above); the figures of those runs are not to be trusted"
fi
