"""infra/bench-cache.sh — read throughput of the gateway's block cache against nginx and MinIO.

  infra/bench-cache.sh [--json FILE] [--duration SECS] [--warmup SECS] [--keep] [--no-build]

One run, same bytes, same client (wrk -t2 -c32), everything on 127.0.0.1:
  * data: N 4 KiB files, M 1 MiB files and one 1 GiB file of random bytes in a temp dir;
  * nginx serves that dir (sendfile, page cache);
  * MinIO holds the same files in an anonymous-readable bucket (read directly by wrk);
  * the gateway (release build, SQLite, MinIO as block store in another bucket,
    --cache-mem 512MiB --cache-size 4GiB) holds the same files, uploaded with PUT.
Then, after a warm-up pass per target:
  4 KiB files and 1 MiB files: nginx, MinIO direct, gateway (cache warm), gateway with
  `X-Nimbus-Cache: bypass` (cold path, straight from MinIO); as a reference (not a goal),
  MinIO again through SigV4-presigned URLs, so that it checks a signature per request as it
  does for the gateway's reads;
  random 4 KiB-aligned 4 KiB ranges of the 1 GiB file: nginx, gateway (cache warm).
The gateway's VmRSS is sampled from /proc during its runs, and the CPU time (user + system)
the gateway and MinIO each used during every run is read from /proc/PID/stat before and after
it. Prints a table and the ratios the cache is meant to reach, each with PASS/MISS: req/s
against nginx and MinIO, and, for the bypass runs, the gateway's CPU time per request against
MinIO's over the same run (both serve the same requests and bytes, so per request and per byte
are the same ratio); --json FILE also writes them as JSON.
A run that saw a non-2xx answer is replayed briefly from Python to show which statuses and
error bodies came back (plus the gateway's last error lines); ratios built on it are INVALID.
Takes about 4 minutes after the build with the defaults (10 s runs, 3 s warm-ups).

  --json FILE     also write the results as JSON to FILE
  --duration S    seconds per measured wrk run (default 10)
  --warmup S      seconds per warm-up wrk run (default 3)
  --keep          keep the temp dir (data, logs, wrk outputs) instead of deleting it
  --no-build      use the gateway release binary as it is

Exit status: 0 when every run answered only 2xx without socket errors (whether the goals are
met or not: that is reported, not enforced), 1 when any run saw a non-2xx response, a socket
error, or failed to run.

Environment:
  BENCH_SMALL_COUNT   number of 4 KiB files (default 1000)
  BENCH_MEDIUM_COUNT  number of 1 MiB files (default 64)
  BENCH_LARGE_MIB     size of the large file in MiB (default 1024)
  BENCH_THREADS       wrk threads (default 2)
  BENCH_CONNS         wrk connections (default 32)
  BENCH_CACHE_MEM     gateway --cache-mem (default 512MiB)
  BENCH_CACHE_SIZE    gateway --cache-size (default 4GiB)
  BENCH_DEADLINE      seconds after which the whole run is aborted (default 900)
  BENCH_PERF          1: `perf record` the gateway and MinIO during each measured gateway run
                      (flat profiles in TEMP/out/NAME.perf.txt; use with --keep; profiling
                      slows the gateway, so such a run's figures are not for comparison)
  NIMBUS_GATEWAY_BIN  gateway binary to use instead of building one (implies --no-build)
  NIMBUS_MINIO_BIN    MinIO binary (default /var/cache/nimbus/bin/minio, from install-deps.sh)
  CARGO_TARGET_DIR    default /var/cache/nimbus/target (or ./target when that is not writable)
  TMPDIR              where the temp dir (≈ 4.5 GiB with the defaults) is made (default /tmp)

Run through infra/bench-cache.sh (it installs nginx, wrk and boto3 when missing), or as
`python3 -m infra.bench.cache` from the checkout's root.
"""

import collections
import concurrent.futures
import http.client
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import urllib.request

from . import common
from .common import Fatal

log = common.Log("bench")
HERE = os.path.dirname(os.path.abspath(__file__))
WRK_LUA = os.path.join(HERE, "wrk.lua")
DIRECT_BUCKET = "bench-direct"
GATEWAY_BUCKET = "nimbus-bench"
GW_DIR = "bench"   # the files live under /bench in the admin's space

OPTIONS = {"--json": ("json", "a file"), "--duration": ("duration", "seconds"),
           "--warmup": ("warmup", "seconds"), "--keep": ("keep", None), "--no-build": ("no_build", None)}


def config(argv, environ):
    """Options and environment, checked: the settings of one run."""
    a = common.parse_args(argv, OPTIONS, common.usage_of(__doc__))
    c = common.positive_ints({
        "small_count": ("BENCH_SMALL_COUNT", "1000"), "medium_count": ("BENCH_MEDIUM_COUNT", "64"),
        "large_mib": ("BENCH_LARGE_MIB", "1024"), "threads": ("BENCH_THREADS", "2"),
        "conns": ("BENCH_CONNS", "32"), "deadline": ("BENCH_DEADLINE", "900"),
        "duration": (None, "10"), "warmup": (None, "3"),
    }, environ, a)
    c["cache_mem"] = environ.get("BENCH_CACHE_MEM") or "512MiB"
    c["cache_size"] = environ.get("BENCH_CACHE_SIZE") or "4GiB"
    c["perf"] = environ.get("BENCH_PERF") == "1"
    # Resolved now: relative to where the script was started.
    c["json"] = os.path.abspath(a["json"]) if a.get("json") else ""
    c["keep"] = a["keep"]
    c["build"] = not a["no_build"]
    c["gateway_bin"] = environ.get("NIMBUS_GATEWAY_BIN") or ""
    return c


# --- data, uploads, checks -------------------------------------------------------------------

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


def upload_minio(data, endpoint, bucket):
    s3 = common.s3client(endpoint)
    s3.create_bucket(Bucket=bucket)
    policy = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": ["*"]}, "Action": ["s3:GetObject"],
        "Resource": [f"arn:aws:s3:::{bucket}/*"]}]}
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    files = all_files(data)
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda p: s3.upload_file(f"{data}/{p}", bucket, p), files))
    log(f"uploaded {len(files)} objects to s3://{bucket}")


def presign(list_file, out_file, endpoint, bucket):
    """The list's paths as SigV4-presigned GETs (path and query only, valid 2 h): MinIO then
    checks a signature on every request, as it does for the gateway's own reads."""
    s3 = common.s3client(endpoint)
    base = f"{endpoint}/{bucket}/"
    with open(list_file) as f, open(out_file, "w") as out:
        for line in f:
            key = line.strip()
            if key:
                url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key},
                                                ExpiresIn=7200)
                if not url.startswith(base):
                    raise Fatal(f"unexpected presigned URL {url}")
                out.write(url[len(base):] + "\n")


def upload_gateway(data, port, token, prefix):
    def put(conn, p):
        common.put_file(conn, f"{prefix}/{p}", f"{data}/{p}", token)

    files = all_files(data)
    # The large file first, alone, then the rest in parallel.
    common.put_parallel(port, files[-1:], put, workers=1, timeout=300)
    common.put_parallel(port, files[:-1], put, timeout=300)
    log(f"uploaded {len(files)} files through the gateway")


def fetch(url, headers):
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.status, r.read()


def verify(data, targets):
    """Every target returns the same bytes for a few files and a range of the large file."""
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
                raise Fatal(f"{t['name']}: GET {p} gave HTTP {st}, {len(got)} bytes, not the file")
        h = dict(t["headers"], Range=f"bytes={123 * 4096}-{124 * 4096 - 1}")
        st, got = fetch(t["base"] + "large.bin", h)
        if st != 206 or got != want_range:
            raise Fatal(f"{t['name']}: ranged GET gave HTTP {st}, {len(got)} bytes, not the range")
    log("all targets return the same bytes")


def probe(base, headers, paths=None, range_path=None, size=0):
    """After a run with non-2xx answers: which statuses, and what the error bodies say (800
    requests: of `paths` in random order, or random 4 KiB ranges of range_path)."""
    counts, samples = collections.Counter(), {}
    lock = threading.Lock()

    def worker(seed):
        rnd = random.Random(seed)
        conn = http.client.HTTPConnection(base.split("//")[1], timeout=30)
        try:
            requests(conn, rnd)
        finally:
            conn.close()

    def requests(conn, rnd):
        for _ in range(100):
            h = dict(headers)
            if paths is not None:
                path = rnd.choice(paths)
            else:
                off = rnd.randrange(size // 4096) * 4096
                path, h["Range"] = range_path, f"bytes={off}-{off + 4095}"
            conn.request("GET", path, headers=h)
            r = conn.getresponse()
            body = r.read()
            with lock:
                counts[r.status] += 1
                if r.status >= 300 and r.status not in samples:
                    samples[r.status] = f"{path} {h.get('Range', '')}: {body[:300]!r}"

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(worker, range(8)))
    print(f"  probe of {sum(counts.values())} requests: statuses {dict(sorted(counts.items()))}",
          file=sys.stderr)
    for st, text in sorted(samples.items()):
        print(f"  HTTP {st}: {text}", file=sys.stderr)


# --- wrk output, ratios, report --------------------------------------------------------------

UNITS = {"": 1, "B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3, "TB": 1024 ** 4}


def parse_wrk(text):
    """The figures of one `wrk --latency` output (None/0/{} where a line is missing)."""
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


def load_runs(out_dir, names):
    """name -> parse_wrk of out/NAME.wrk, with the gateway's max VmRSS from out/NAME.rss and the
    CPU seconds each server used during the run from out/NAME.cpu."""
    runs = {}
    for name in names:
        with open(f"{out_dir}/{name}.wrk") as f:
            runs[name] = parse_wrk(f.read())
        cpu_file = f"{out_dir}/{name}.cpu"
        if os.path.exists(cpu_file):
            with open(cpu_file) as f:
                runs[name]["cpu_s"] = json.load(f)
        rss_file = f"{out_dir}/{name}.rss"
        if os.path.exists(rss_file):
            with open(rss_file) as f:
                kb = [int(x) for x in f.read().split()]
            runs[name]["gateway_rss_max_mib"] = round(max(kb) / 1024, 1) if kb else None
    return runs


# (label, numerator run, denominator run, goal): the ratios of req/s the cache is meant to reach.
GOALS = [
    ("4KiB hot: gateway / nginx", "4k-gateway-warm", "4k-nginx", 0.9),
    ("4KiB hot: gateway / MinIO", "4k-gateway-warm", "4k-minio", 6.0),
    ("1MiB hot: gateway / nginx", "1m-gateway-warm", "1m-nginx", 0.8),
    ("1MiB hot: gateway / MinIO", "1m-gateway-warm", "1m-minio", 1.3),
    ("4KiB ranges of 1GiB: gateway / nginx", "range-gateway-warm", "range-nginx", 0.5),
]
# (label, run, goal): the gateway's CPU seconds over MinIO's in one bypass run, at most goal.
# Every request of the run goes to both, with the same payload: the ratio is per request at
# 4 KiB and per byte at 1 MiB. A cost, not a share of the two cores both compete for.
CPU_GOALS = [
    ("4KiB bypass: gateway CPU / MinIO CPU", "4k-gateway-bypass", 0.35),
    ("1MiB bypass: gateway CPU / MinIO CPU", "1m-gateway-bypass", 0.6),
]
# Not goals: the bypass runs' req/s (a share of two cores that wrk, MinIO and the gateway all
# compete for; the CPU goals above are their cost), and MinIO with a signature to check on every
# request, as for the gateway's reads.
REFERENCES = [
    ("4KiB bypass: gateway / MinIO", "4k-gateway-bypass", "4k-minio"),
    ("1MiB bypass: gateway / MinIO", "1m-gateway-bypass", "1m-minio"),
    ("4KiB bypass: gateway / MinIO signed", "4k-gateway-bypass", "4k-minio-signed"),
    ("1MiB bypass: gateway / MinIO signed", "1m-gateway-bypass", "1m-minio-signed"),
    ("4KiB: MinIO signed / MinIO anonymous", "4k-minio-signed", "4k-minio"),
    ("1MiB: MinIO signed / MinIO anonymous", "1m-minio-signed", "1m-minio"),
]


def analyse(runs, meta):
    """The report's document: runs marked valid or not, goal ratios, reference ratios, RSS."""
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

    def rps(n):
        return runs[n]["rps"] or 0.0
    ratios = []
    for label, num, den, goal in GOALS:
        v = rps(num) / rps(den) if rps(den) else 0.0
        valid = runs[num]["valid"] and runs[den]["valid"]
        ratios.append({"name": label, "numerator": num, "denominator": den, "value": round(v, 3),
                       "goal": goal, "valid": valid, "pass": valid and v >= goal,
                       "shortfall_pct": 0.0 if v >= goal else round((goal - v) / goal * 100, 1)})
    for label, name, goal in CPU_GOALS:
        cpu = runs.get(name, {}).get("cpu_s") or {}
        gw, mn = cpu.get("gateway"), cpu.get("minio")
        measured = gw is not None and bool(mn)
        v = gw / mn if measured else 0.0
        valid = measured and runs[name]["valid"]
        ratios.append({"name": label, "numerator": f"{name} gateway CPU", "denominator": f"{name} MinIO CPU",
                       "value": round(v, 3), "goal": goal, "at_most": True, "valid": valid,
                       "pass": valid and v <= goal,
                       "shortfall_pct": 0.0 if v <= goal else round((v - goal) / goal * 100, 1)})
        if not measured:
            bad.append(f"{name}: no CPU time measured for the gateway and MinIO")
    for r in runs.values():
        reqs, cpu = r.get("requests"), r.get("cpu_s")
        if reqs and cpu:
            r["cpu_us_per_request"] = {k: round(v / reqs * 1e6, 1) for k, v in cpu.items() if v is not None}
    refs = []
    for label, num, den in REFERENCES:
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
    return {"meta": meta, "runs": runs, "ratios": ratios, "reference_ratios": refs, "rss": rss, "errors": bad}


def format_report(doc):
    """The tables printed at the end of a run (runs, then ratios and RSS against the goals)."""
    runs, rss = doc["runs"], doc["rss"]
    lines = ["", f"{'run':<22} {'req/s':>10} {'MiB/s':>9} {'avg ms':>8} {'p99 ms':>8} {'RSS MiB':>8}"
                 f" {'gw CPU us/req':>13} {'MinIO CPU us/req':>16}"]
    for name, r in runs.items():
        mib = (r["transfer_bytes_per_sec"] or 0) / 2 ** 20
        rss_run = r.get("gateway_rss_max_mib")
        per = r.get("cpu_us_per_request") or {}
        gw_cpu = per.get("gateway") if "gateway" in name else None
        mn_cpu = per.get("minio") if "nginx" not in name else None
        lines.append(f"{name:<22} {r['rps'] or 0:>10.1f} {mib:>9.1f} {r['latency_avg_ms'] or 0:>8.2f} "
                     f"{r['latency_p99_ms'] or 0:>8.2f} {rss_run if rss_run is not None else '':>8}"
                     f" {gw_cpu if gw_cpu is not None else '':>13} {mn_cpu if mn_cpu is not None else '':>16}"
                     f"{'' if r['valid'] else '  ERRORS (see below)'}")
    lines += ["", f"{'ratio (req/s; CPU: per request)':<40} {'value':>7} {'goal':>8}  result"]
    for q in doc["ratios"]:
        at_most = q.get("at_most", False)
        if not q["valid"]:
            res = "INVALID (a run behind it had errors or no CPU figures)"
        elif q["pass"]:
            res = "PASS"
        else:
            res = f"MISS ({q['shortfall_pct']}% {'over' if at_most else 'short'})"
        goal = ("<= " if at_most else ">= ") + str(q["goal"])
        lines.append(f"{q['name']:<40} {q['value']:>7.3f} {goal:>8}  {res}")
    for q in doc["reference_ratios"]:
        lines.append(f"{q['name']:<40} {q['value']:>7.3f} {'(ref)':>8}  {'' if q['valid'] else 'INVALID'}")
    rss_max = rss["max_vmrss_mib_during_runs"]
    res = "PASS" if rss["pass"] else f"MISS (over by {rss['over_by_mib']} MiB)"
    lines.append(f"{'gateway VmRSS max under load (MiB)':<40} {rss_max if rss_max is not None else '?':>7} "
                 f"{'<= ' + str(rss['limit_mib']):>8}  {res}")
    lines.append(f"(gateway VmHWM over its whole life, uploads included: {doc['meta'].get('vmhwm_mib')} MiB)")
    return "\n".join(lines)


def report(out_dir, meta, json_out):
    """Prints the tables, writes the JSON; False when a run had errors (listed on stderr)."""
    doc = analyse(load_runs(out_dir, meta["runs"]), meta)
    print(format_report(doc), flush=True)
    if json_out:
        with open(json_out, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        print(f"\nJSON written to {json_out}", flush=True)
    if doc["errors"]:
        print("\nERRORS:", file=sys.stderr)
        for b in doc["errors"]:
            print("  " + b, file=sys.stderr)
        return False
    return True


# --- the run ---------------------------------------------------------------------------------

NGINX_CONF = """worker_processes 2;
daemon off;
pid {t}/nginx/nginx.pid;
error_log {t}/nginx/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    default_type application/octet-stream;
    client_body_temp_path {t}/nginx/tmp/body;
    proxy_temp_path {t}/nginx/tmp/proxy;
    fastcgi_temp_path {t}/nginx/tmp/fastcgi;
    uwsgi_temp_path {t}/nginx/tmp/uwsgi;
    scgi_temp_path {t}/nginx/tmp/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {t}/data;
    }}
}}
"""


class Bench:
    def __init__(self, c):
        self.c = c
        self.t = ""
        self.procs = common.Procs(log)
        self.gw = None
        self.minio = None
        self.failed = False
        self.runs = []

    def cleanup(self):
        self.procs.stop_all()
        if self.t and os.path.isdir(self.t):
            if self.c["keep"]:
                log(f"kept {self.t}")
            else:
                common.remove_tree(self.t)

    def gateway_bin(self):
        c = self.c
        if c["gateway_bin"]:
            return c["gateway_bin"]
        target = common.cargo_target_dir()
        if c["build"]:
            common.cargo_build_release(log, ["nimbus-gateway"])
        return f"{target}/release/nimbus-gateway"

    def sample_rss(self, path, stop):
        """The gateway's VmRSS (KiB) every 0.25 s into path, until stop is set."""
        with open(path, "w") as out:
            while not stop.is_set() and self.gw.poll() is None:
                kb = common.proc_status(self.gw.pid, ("VmRSS",)).get("VmRSS")
                if kb is not None:
                    out.write(f"{kb}\n")
                    out.flush()
                stop.wait(0.25)

    def cpu_now(self):
        """CPU seconds used so far by the gateway and MinIO (None for one not running)."""
        return {k: (common.cpu_seconds(p.pid) if p is not None and p.poll() is None else None)
                for k, p in (("gateway", self.gw), ("minio", self.minio))}

    def run_wrk(self, name, secs, measure, url, args):
        """One wrk run (args: wrk.lua's, `rotate PREFIX LISTFILE [HEADER...]` or `range PATH SIZE
        [HEADER...]`); errors are logged, probed and remembered."""
        t, c = self.t, self.c
        out = f"{t}/out/{name}.wrk" if measure else f"{t}/out/warmup-{name}.wrk"
        sampling = measure and "gateway" in name
        stop, sampler, perf = threading.Event(), None, None
        cpu_before = self.cpu_now() if measure else None
        if sampling:
            sampler = threading.Thread(target=self.sample_rss, args=(f"{t}/out/{name}.rss", stop), daemon=True)
            sampler.start()
            if c["perf"]:
                perf = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-p", f"{self.gw.pid},{self.minio.pid}",
                                         "-o", f"{t}/out/{name}.perf.data", "--quiet"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                stop.wait(0.5)
        try:
            with open(out, "wb") as f:
                rc = subprocess.run(["wrk", f"-t{c['threads']}", f"-c{c['conns']}", f"-d{secs}s", "--timeout", "10s",
                                     "--latency", "-s", WRK_LUA, url, "--", *args],
                                    stdout=f, stderr=subprocess.STDOUT).returncode
        finally:
            if perf is not None:
                perf.send_signal(2)
                perf.wait()
                report_perf(f"{t}/out/{name}.perf.data", f"{t}/out/{name}.perf.txt")
            stop.set()
            if sampler is not None:
                sampler.join()
        if cpu_before is not None:
            with open(f"{t}/out/{name}.cpu", "w") as f:
                json.dump(common.cpu_delta(cpu_before, self.cpu_now()), f)
        with open(out, errors="replace") as f:
            text = f.read()
        if rc != 0:
            log(f"ERROR: wrk failed for {name}:")
            print(text, file=sys.stderr, end="")
            self.failed = True
        m = re.search(r"^Requests/sec:\s*(\S+)", text, re.M)
        rps = m.group(1) if m else "?"
        m = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", text)
        if m:
            log(f"ERROR: {name}: {m.group(1)} non-2xx/3xx responses; probing with 800 of its requests:")
            self.failed = True
            try:
                self.probe_run(url, args)
            except Exception:   # noqa: BLE001 - the probe is a diagnosis; the run is failed anyway
                log("(the probe itself failed)")
            if "gateway" in name:
                log("gateway log, last WARN/ERROR lines:")
                print_log_errors(f"{t}/gateway.log", 3)
        m = re.search(r"^ *Socket errors:.*$", text, re.M)
        if m:
            log(f"ERROR: {name}:{m.group(0)}")
            self.failed = True
        if measure:
            self.runs.append(name)
            log(f"{name:<20} {rps:>10} req/s")
        else:
            log(f"warm-up {name:<12} {rps:>10} req/s")

    def probe_run(self, url, args):
        """The requests of a wrk run, replayed from Python with their statuses."""
        mode, first, second, header_args = args[0], args[1], args[2], args[3:]
        headers = dict(h.split(": ", 1) for h in header_args)
        if mode == "range":
            probe(url, headers, range_path=first, size=int(second))
        else:
            with open(second) as f:
                paths = [first + line.strip() for line in f if line.strip()]
            probe(url, headers, paths=paths)

    def run(self):
        c = self.c
        common.set_deadline(log, c["deadline"])

        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        for tool, path in (("nginx", nginx), ("wrk", shutil.which("wrk"))):
            if not path or not os.access(path, os.X_OK):
                raise Fatal(f"{tool} not found (infra/bench-cache.sh installs it)")
        common.require_boto3()
        minio_bin = common.minio_bin()
        common.require_executable(minio_bin, "; run infra/install-deps.sh first")

        git_rev = common.git_rev(["gateway", "proto"])
        gateway_bin = self.gateway_bin()
        common.require_executable(gateway_bin, " (build it, or drop --no-build)")

        # --- temp dir, ports ---
        t = self.t = common.make_temp_dir("nimbus-bench.")
        # nginx's workers may run as another user: they must be able to read the data.
        os.chmod(t, 0o755)
        for d in ("data", "lists", "nginx/tmp", "minio", "gw", "gw-cache", "out"):
            os.makedirs(f"{t}/{d}")
        log(f"temp dir {t}")
        nginx_port, minio_port, console_port, gw_port = (common.free_port() for _ in range(4))

        # --- data ---
        log(f"generating {c['small_count']} x 4 KiB, {c['medium_count']} x 1 MiB, 1 x {c['large_mib']} MiB")
        gen(f"{t}/data", f"{t}/lists", c["small_count"], c["medium_count"], c["large_mib"])
        large_size = c["large_mib"] * 1024 * 1024

        # --- nginx ---
        with open(f"{t}/nginx/nginx.conf", "w") as f:
            f.write(NGINX_CONF.format(t=t, port=nginx_port))
        log(f"starting nginx on 127.0.0.1:{nginx_port}")
        proc = self.procs.start("nginx", [nginx, "-p", f"{t}/nginx", "-e", f"{t}/nginx/error.log",
                                          "-c", f"{t}/nginx/nginx.conf"], f"{t}/nginx/stdout.log", cwd=t)
        common.wait_http("nginx", f"http://127.0.0.1:{nginx_port}/s/f00000.bin", proc, f"{t}/nginx/error.log")

        # --- MinIO ---
        log(f"starting MinIO on 127.0.0.1:{minio_port}")
        minio_url = f"http://127.0.0.1:{minio_port}"
        self.minio = common.start_minio(self.procs, minio_bin, f"{t}/minio", minio_port, console_port,
                                        f"{t}/minio.log", cwd=t)
        log(f"uploading the files to MinIO bucket {DIRECT_BUCKET} (anonymous read)")
        upload_minio(f"{t}/data", minio_url, DIRECT_BUCKET)

        # --- gateway ---
        log(f"starting the gateway ({gateway_bin}) on 127.0.0.1:{gw_port}, cache mem {c['cache_mem']}, "
            f"ssd {c['cache_size']}")
        self.gw = common.start_gateway(
            self.procs, gateway_bin, gw_port, f"{t}/gw",
            [*common.s3_store(minio_url, GATEWAY_BUCKET), "--cache-dir", f"{t}/gw-cache", "--cache-size", c["cache_size"], "--cache-mem", c["cache_mem"]],
            f"{t}/gateway.log", cwd=t)
        with open(f"{t}/gateway.log", errors="replace") as f:
            if "listening on" not in f.read():
                log("WARNING: the gateway did not print 'listening on'")
        log(f"gateway info: {common.gateway_info(gw_port)}")
        token = common.login(gw_port)
        log(f"uploading the files through the gateway (PUT /api/v1/files/{GW_DIR}/...)")
        upload_gateway(f"{t}/data", gw_port, token, GW_DIR)

        auth = f"Authorization: Bearer {token}"
        bypass = "X-Nimbus-Cache: bypass"
        nginx_url, gw_url = f"http://127.0.0.1:{nginx_port}", f"http://127.0.0.1:{gw_port}"
        auth_h = {"Authorization": f"Bearer {token}"}
        log("checking that every target serves the same bytes")
        verify(f"{t}/data", [
            {"name": "nginx", "base": nginx_url + "/", "headers": {}},
            {"name": "minio", "base": f"{minio_url}/{DIRECT_BUCKET}/", "headers": {}},
            {"name": "gateway", "base": f"{gw_url}/api/v1/files/{GW_DIR}/", "headers": auth_h},
            {"name": "gateway-bypass", "base": f"{gw_url}/api/v1/files/{GW_DIR}/",
             "headers": dict(auth_h, **{"X-Nimbus-Cache": "bypass"})},
        ])

        # --- runs ---
        small, medium = f"{t}/lists/small.txt", f"{t}/lists/medium.txt"
        log("presigning the MinIO GETs of both lists (the signed MinIO reference runs)")
        presign(small, f"{t}/lists/small-signed.txt", minio_url, DIRECT_BUCKET)
        presign(medium, f"{t}/lists/medium-signed.txt", minio_url, DIRECT_BUCKET)
        gw_prefix = f"/api/v1/files/{GW_DIR}/"
        gw_large = f"/api/v1/files/{GW_DIR}/large.bin"

        log("loading the whole large file through the gateway once")
        try:
            read_all(urllib.request.Request(gw_url + gw_large, headers=auth_h), 300)
        except OSError as e:
            raise Fatal(f"GET of the large file failed: {e}") from None
        with open(f"{t}/data/large.bin", "rb") as f:   # nginx's copy into the page cache
            while f.read(1 << 20):
                pass

        d = f"/{DIRECT_BUCKET}/"
        plan = [
            ("4k-nginx", nginx_url, ["rotate", "/", small]),
            ("4k-minio", minio_url, ["rotate", d, small]),
            ("4k-minio-signed", minio_url, ["rotate", d, f"{t}/lists/small-signed.txt"]),
            ("4k-gateway-warm", gw_url, ["rotate", gw_prefix, small, auth]),
            ("4k-gateway-bypass", gw_url, ["rotate", gw_prefix, small, auth, bypass]),
            ("1m-nginx", nginx_url, ["rotate", "/", medium]),
            ("1m-minio", minio_url, ["rotate", d, medium]),
            ("1m-minio-signed", minio_url, ["rotate", d, f"{t}/lists/medium-signed.txt"]),
            ("1m-gateway-warm", gw_url, ["rotate", gw_prefix, medium, auth]),
            ("1m-gateway-bypass", gw_url, ["rotate", gw_prefix, medium, auth, bypass]),
            ("range-nginx", nginx_url, ["range", "/large.bin", str(large_size)]),
            ("range-gateway-warm", gw_url, ["range", gw_large, str(large_size), auth]),
        ]
        log(f"warm-up: {c['warmup']}s per target (wrk -t{c['threads']} -c{c['conns']})")
        for name, url, args in plan:
            self.run_wrk(name, c["warmup"], False, url, args)
        load_before = common.loadavg()
        log(f"measuring: {c['duration']}s per run (load average before: {load_before})")
        for name, url, args in plan:
            self.run_wrk(name, c["duration"], True, url, args)
        load_after = common.loadavg()

        if self.gw.poll() is not None:
            raise Fatal(f"the gateway died during the runs (see {t}/gateway.log; --keep keeps it)")
        vmhwm_kb = common.proc_status(self.gw.pid, ("VmHWM",)).get("VmHWM", 0)

        # --- report ---
        meta = {
            "date": common.utc_now_iso(),
            "host": common.host_meta(),
            "wrk": {"threads": c["threads"], "connections": c["conns"], "duration_s": c["duration"],
                    "warmup_s": c["warmup"]},
            "data": {"small_files": c["small_count"], "medium_files": c["medium_count"],
                     "large_mib": c["large_mib"]},
            "gateway": {"cache_mem": c["cache_mem"], "cache_size": c["cache_size"],
                        "info": json.loads(common.gateway_info(gw_port)), "git": git_rev},
            "cache_mem_mib": round(common.size_bytes(c["cache_mem"]) / 2**20),
            "loadavg_before": load_before, "loadavg_after": load_after,
            "vmhwm_mib": round(vmhwm_kb / 1024, 1),
            "runs": self.runs,
        }
        print(f"\nwrk -t{c['threads']} -c{c['conns']} -d{c['duration']}s; load average {load_before} before, "
              f"{load_after} after; gateway {git_rev}; {common.utc_now_minute()}", flush=True)
        if not report(f"{t}/out", meta, c["json"]):
            self.failed = True
        if self.failed:
            raise Fatal("some runs had errors (above); the figures of those runs are not to be trusted")
        return 0


def read_all(req, timeout):
    with urllib.request.urlopen(req, timeout=timeout) as r:
        while r.read(1 << 20):
            pass


def report_perf(data, txt):
    """A flat profile (comm, dso, symbol) of a perf.data, its first 200 lines with a share."""
    p = subprocess.run(["perf", "report", "-i", data, "--no-children", "-g", "none", "--sort", "comm,dso,sym",
                        "--stdio"], capture_output=True, text=True, errors="replace")
    lines = [ln for ln in p.stdout.splitlines() if ln.strip() and "%" in ln][:200]
    with open(txt, "w") as f:
        f.write("".join(ln + "\n" for ln in lines))


def log_errors(text, n):
    """The last n WARN/ERROR lines of a gateway log (colours stripped; tower-http's on_failure
    lines left out: they repeat what the handler logged)."""
    lines = [ln for ln in common.strip_ansi(text).splitlines()
             if re.search(r" (WARN|ERROR) ", ln) and "on_failure" not in ln]
    return lines[-n:]


def print_log_errors(path, n):
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return
    for line in log_errors(text, n):
        print(line, file=sys.stderr)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    common.run_bench(log, lambda: Bench(config(argv, os.environ)))


if __name__ == "__main__":
    main()
