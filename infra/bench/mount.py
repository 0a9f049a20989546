"""infra/bench-mount.sh — the drive (`nimbus mount`) against bindfs, rclone mount and s3fs.

  infra/bench-mount.sh [--json FILE] [--runtime SECS] [--reps N] [--keep] [--no-build]

One run, everything on this machine on 127.0.0.1, the same bytes from the same MinIO:
  * data: one 1 GiB file of random bytes, and a directory of 10,000 empty files;
  * MinIO holds the 1 GiB file in bucket `bench-peers` (for rclone and s3fs), and is the
    gateway's block store (bucket `nimbus-bench`); the gateway's own cache is off by default so
    that every block the drive fetches comes from MinIO, as for the peers;
  * the gateway (release build, SQLite) holds the same file under /bench, uploaded with PUT,
    and the 10,000 empty files under /bench/dir10k;
  * the drive: `nimbus login` + `nimbus mount` (detached, fresh cache dir);
  * bindfs (passthrough FUSE) over the local copy of the data; a second bindfs with
    --multithreaded for reference rows;
  * rclone mount of the bucket with --vfs-cache-mode full (empty cache dir), s3fs of the bucket.
Steps (the kernel page cache is dropped, `echo 3 > /proc/sys/vm/drop_caches`, before every read):
  cold sequential read of the 1 GiB file (dd bs=1M): drive (fresh cache), rclone, s3fs;
  warm sequential read (the drive's cache holds the file): drive vs bindfs, median of --reps;
  warm 4 KiB random reads (fio randread, 4 jobs, --runtime s): drive vs bindfs;
  `ls -l` of the 10,000-entry directory (once to warm, then 5 timed runs back to back, median);
  rename of that directory through the drive (absolute);
  writing 1,000 files of 4 KiB (open/write/close each) through the drive and rclone mount.
The VmRSS of every daemon (FUSE peers, gateway, MinIO) is sampled every 0.25 s; the drive's
maximum is a goal. CPU seconds per daemon and the drive's cache counters are taken per step.
Prints a table (metric, nimbus, peer, ratio, goal, PASS/MISS); --json FILE writes it as JSON.

  --json FILE     also write the results as JSON to FILE
  --runtime S     seconds per fio random-read run (default 15)
  --reps N        timed repetitions of the warm sequential read (default 3)
  --keep          keep the temp dir (logs, fio/dd outputs; data is deleted anyway) on exit
  --no-build      use the release binaries as they are

Exit status: 0 when every step ran (whether the goals are met or not: that is reported, not
enforced), 1 when a step or a setup stage failed to run (the step is shown as ERROR).
Must run as root (drop_caches, FUSE mounts). infra/bench-mount.sh installs bindfs, rclone,
s3fs and fio with apt when they are missing, and boto3 with pip.

Environment:
  BENCH_LARGE_MIB      size of the large file in MiB (default 1024)
  BENCH_DIR_COUNT      files in the directory listed and renamed (default 10000)
  BENCH_WRITE_COUNT    4 KiB files written (default 1000)
  BENCH_LS_REPS        timed `ls -l` runs after the warm-up run, median reported (default 5)
  BENCH_CACHE_MEM      drive --cache-mem (default 128MiB, twice the drive's own default of 64MiB)
  BENCH_CACHE_SIZE     drive --cache-size (default 4GiB)
  BENCH_GATEWAY_CACHE  1: leave the gateway's own block cache on (default 0: off, so cold
                       reads through the drive come from MinIO like the peers')
  BENCH_DIRECT_READS   1: start the gateway with --s3-direct-reads (the drive then reads cold
                       blocks straight from MinIO; default 0: through the gateway)
  BENCH_DRIVE_ENV      extra NAME=VALUE words for the drive's environment (diagnosis, e.g.
                       MALLOC_ARENA_MAX=2); empty by default
  BENCH_DEADLINE       seconds after the build after which the run is aborted (default 1200)
  BENCH_PERF           1: `perf record` the drive, gateway and MinIO during each drive step (flat
                       profiles in TEMP/out/*.perf.txt; use with --keep; it slows the drive's
                       steps, so such a run's figures are not for comparison)
  NIMBUS_GATEWAY_BIN, NIMBUS_CLI_BIN  binaries to use instead of building (implies --no-build)
  NIMBUS_MINIO_BIN     MinIO binary (default /var/cache/nimbus/bin/minio, from install-deps.sh)
  CARGO_TARGET_DIR     default /var/cache/nimbus/target (or ./target when that is not writable)
  TMPDIR               where the temp dir (≈ 4.5 GiB with the defaults) is made (default /tmp)

Run through infra/bench-mount.sh, or as `python3 -m infra.bench.mount` from the checkout's root.
"""

import collections
import http.client
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

from . import common
from .common import Fatal

log = common.Log("bench-mount")
PEER_BUCKET = "bench-peers"
GATEWAY_BUCKET = "nimbus-bench"

OPTIONS = {"--json": ("json", "a file"), "--runtime": ("runtime", "seconds"), "--reps": ("reps", "a count"),
           "--keep": ("keep", None), "--no-build": ("no_build", None)}


def config(argv, environ):
    """Options and environment, checked: the settings of one run."""
    a = common.parse_args(argv, OPTIONS, common.usage_of(__doc__))
    c = common.positive_ints({
        "large_mib": ("BENCH_LARGE_MIB", "1024"), "dir_count": ("BENCH_DIR_COUNT", "10000"),
        "write_count": ("BENCH_WRITE_COUNT", "1000"), "deadline": ("BENCH_DEADLINE", "1200"),
        "runtime": (None, "15"), "reps": (None, "3"), "ls_reps": ("BENCH_LS_REPS", "5"),
    }, environ, a)
    c["cache_mem"] = environ.get("BENCH_CACHE_MEM") or "128MiB"
    c["cache_size"] = environ.get("BENCH_CACHE_SIZE") or "4GiB"
    c["gateway_cache"] = (environ.get("BENCH_GATEWAY_CACHE") or "0") == "1"
    c["direct_reads"] = (environ.get("BENCH_DIRECT_READS") or "0") == "1"
    c["drive_env"] = drive_env(environ.get("BENCH_DRIVE_ENV") or "")
    c["perf"] = environ.get("BENCH_PERF") == "1"
    c["json"] = os.path.abspath(a["json"]) if a.get("json") else ""
    c["keep"] = a["keep"]
    c["gateway_bin"] = environ.get("NIMBUS_GATEWAY_BIN") or ""
    c["cli_bin"] = environ.get("NIMBUS_CLI_BIN") or ""
    c["build"] = not a["no_build"] and not c["gateway_bin"] and not c["cli_bin"]
    return c


def drive_env(words):
    """BENCH_DRIVE_ENV's NAME=VALUE words as a dict."""
    out = {}
    for w in words.split():
        name, eq, value = w.partition("=")
        if not eq or not name:
            raise Fatal(f"BENCH_DRIVE_ENV: '{w}' is not NAME=VALUE")
        out[name] = value
    return out


class StepError(Exception):
    """A measured step that could not run; the run goes on and reports it."""


# --- state shared with the RSS sampler -------------------------------------------------------

class Watch:
    """The processes worth watching (name -> pid) and the step now running, read by the sampler
    thread and by each step's CPU snapshots."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pids = {}
        self.step = "idle"

    def add(self, name, pid):
        with self.lock:
            self.pids[name] = pid

    def daemons(self):
        with self.lock:
            return dict(self.pids)

    def cpu_snapshot(self):
        return {name: common.cpu_seconds(pid) for name, pid in self.daemons().items()}


def sampler(watch, out_path, stop):
    """VmRSS of every watched process every 0.25 s: lines `step name kib` (and the drive's RSS
    split, anonymous / file-backed, and thread count as nimbus.RssAnon, nimbus.RssFile,
    nimbus.Threads)."""
    with open(out_path, "a") as out:
        while not stop.is_set():
            step = watch.step
            for name, pid in watch.daemons().items():
                keys = ("VmRSS", "RssAnon", "RssFile", "Threads") if name == "nimbus" else ("VmRSS",)
                st = common.proc_status(pid, keys)
                if "VmRSS" in st:
                    out.write(f"{step} {name} {st['VmRSS']}\n")
                for key in keys[1:]:
                    if key in st:
                        out.write(f"{step} nimbus.{key} {st[key]}\n")
            out.flush()
            stop.wait(0.25)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def counters_delta(before, after):
    """The change of every numeric counter between two cache-counter snapshots."""
    if not before or not after:
        return None
    return {k: after[k] - before.get(k, 0) for k in after if isinstance(after[k], (int, float))}


# --- the run ---------------------------------------------------------------------------------

class Bench:
    def __init__(self, c):
        self.c = c
        self.t = ""
        self.procs = common.Procs(log)
        self.watch = Watch()
        self.children = []          # the helper subprocess running now (dd, fio, ls), if any
        self.drive = None
        self.peers = []             # (mountpoint, Popen, name) of the FUSE peers
        self.sampler_stop = threading.Event()
        self.sampler = None
        self.failed = []
        self.results = []

    # --- the drive ---

    def drive_counters(self):
        st = self.drive.status()
        if not st:
            return None
        c = dict(st.get("cache", {}))
        c.pop("dir", None)
        return c

    def unmount_peer(self, mp, proc, name):
        """Lets go of a peer's FUSE mount, then stops its process."""
        if common.is_mounted(mp):
            if subprocess.run(["fusermount3", "-u", mp], stderr=subprocess.DEVNULL).returncode != 0:
                subprocess.run(["fusermount", "-u", mp], stderr=subprocess.DEVNULL)
        common.stop_process(proc, name, log)
        if common.is_mounted(mp):
            log(f"{name}: {mp} still mounted, lazy unmount")
            subprocess.run(["umount", "-l", mp], stderr=subprocess.DEVNULL)

    def cleanup(self):
        for child in list(self.children):
            # The helper running when the run was stopped, with its dd/fio.
            common.kill_group(child)
        self.stop_sampler()
        if self.drive is not None:
            self.drive.unmount()
        if self.t:
            for mp, proc, name in self.peers:
                self.unmount_peer(mp, proc, name)
        self.procs.stop_all()
        t = self.t
        if t and os.path.isdir(t):
            if any(m.startswith(t + "/") for m in common.mounts()):
                # Never rm -rf through a live mount.
                log(f"something is still mounted under {t}; not deleting it")
            elif self.c["keep"]:
                try:
                    shutil.copy(f"{t}/drive-cache/mount.log", f"{t}/out/")
                except OSError:
                    pass
                for d in ("data", "minio", "drive-cache", "rclone-cache", "gw"):
                    common.remove_tree(f"{t}/{d}")
                log(f"kept {t} (logs and outputs; the data is deleted)")
            else:
                common.remove_tree(t)

    def stop_sampler(self):
        if self.sampler is not None:
            self.sampler_stop.set()
            self.sampler.join()
            self.sampler = None

    # --- steps ---

    def step(self, name, fn, *args):
        """Runs one measured step; a failure is logged and recorded, and the run goes on."""
        try:
            fn(name, *args)
            return True
        except (StepError, OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
            print(str(e) if isinstance(e, StepError) else f"{name}: {e!r}", file=sys.stderr)
            log(f"ERROR: step {name} failed")
            self.failed.append(name)
            return False

    def run_helper(self, cmd, timeout, **kw):
        """A helper command in its own process group, which cleanup ends on an abort."""
        return common.run_in_group(cmd, timeout, holder=self.children, **kw)

    def record(self, rec):
        self.results.append(rec)
        with open(f"{self.t}/out/results.jsonl", "a") as f:
            f.write(json.dumps(rec) + "\n")

    def seqread(self, name, path):
        with Step(self, name) as s:
            p = self.run_helper(["dd", f"if={path}", "of=/dev/null", "bs=1M"], 600,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise StepError(f"{name}: dd failed: {p.stderr.strip()}")
        m = re.search(r"^(\d+) bytes", p.stderr, re.M)
        nbytes = int(m.group(1)) if m else 0
        r = s.rec(kind="seqread", bytes=nbytes, mb_s=round(nbytes / 1e6 / s.wall, 1))
        say(f"{name:<28} {r['mb_s']:>9.1f} MB/s  ({nbytes} bytes in {s.wall:.2f} s; cpu {r['cpu_s']})")

    def randread(self, name, path, size, runtime):
        out = f"{self.t}/out/{name}.fio.json"
        cmd = ["fio", "--name=r", "--rw=randread", "--bs=4k", "--numjobs=4", f"--size={size}",
               f"--runtime={runtime}", "--time_based", f"--filename={path}", "--direct=0", "--readonly",
               "--group_reporting", "--output-format=json", f"--output={out}"]
        with Step(self, name) as s:
            p = self.run_helper(cmd, int(runtime) + 120, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise StepError(f"{name}: fio failed ({p.returncode}): {p.stderr.strip()[:500]}")
        with open(out) as f:
            job = parse_fio(f.read())
        r = s.rec(kind="randread", **job)
        if job["errors"]:
            raise StepError(f"{name}: fio reported error {job['errors']}")
        say(f"{name:<28} {job['iops']:>9.0f} IOPS  (mean {r['clat_mean_us']} us, p99 {r['clat_p99_us']} us; "
            f"cpu {r['cpu_s']})")

    def writes(self, name, directory, count, timeout):
        """The drive: the loop, then (at once) how many files the gateway lists and when it lists
        them all, counted from the start of the loop like rclone's."""
        payloads = [os.urandom(4096) for _ in range(count)]   # distinct: no dedup shortcut
        with Step(self, name, drop=False) as s:
            write_files(directory, payloads)
        t0 = s.wall0
        first = n = self.gw_count("bench/writes")
        deadline = time.perf_counter() + timeout
        while n < count and time.perf_counter() < deadline:
            time.sleep(0.1)
            n = self.gw_count("bench/writes")
        on_server = time.perf_counter() - t0
        r = s.rec(kind="writes", files=count, files_per_s=round(count / s.wall, 1), listed_after_loop=first,
                  on_server_s=round(on_server, 2) if n >= count else None, listed=n)
        tail = (f"all {count} listed by the gateway {on_server:.2f} s after the loop started ({first} when it ended)"
                if n >= count else f"only {n} listed by the gateway after {timeout} s more")
        say(f"{name:<28} {s.wall:>9.2f} s     ({r['files_per_s']} files/s; {tail}; cpu {r['cpu_s']})")

    def writes_rclone(self, name, directory, count, timeout):
        """The loop itself, then the time until every object is in the bucket (rclone uploads
        later)."""
        payloads = [os.urandom(4096) for _ in range(count)]
        with Step(self, name, drop=False) as s:
            write_files(directory, payloads)
        t0 = s.wall0
        s3 = common.s3client(self.minio_url)
        n, deadline = 0, time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            n = s3_count(s3, PEER_BUCKET, "writes/")
            if n >= count:
                break
            time.sleep(0.5)
        on_server = time.perf_counter() - t0
        r = s.rec(kind="writes", files=count, files_per_s=round(count / s.wall, 1),
                  on_server_s=round(on_server, 2) if n >= count else None, objects_seen=n)
        tail = (f"all {count} objects in the bucket {on_server:.1f} s after the loop started" if n >= count
                else f"only {n} objects in the bucket after {timeout} s more")
        say(f"{name:<28} {s.wall:>9.2f} s     ({r['files_per_s']} files/s; {tail}; cpu {r['cpu_s']})")

    def ls(self, name, path, reps):
        """`ls -l` once to warm, then `reps` timed runs back to back (the kernel keeps attributes
        for about 1 s on both mounts, so no pause between runs); the median counts."""
        p = self.run_helper(["ls", "-l", path], 300, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise StepError(f"{name}: ls -l failed: {p.stderr[:300]!r}")
        times, lines = [], 0
        with Step(self, name, drop=False) as s:
            for _ in range(reps):
                t0 = time.perf_counter()
                p = self.run_helper(["ls", "-l", path], 300, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                times.append(time.perf_counter() - t0)
                if p.returncode != 0:
                    raise StepError(f"{name}: ls -l failed: {p.stderr[:300]!r}")
                lines = p.stdout.count(b"\n") - 1
        r = s.rec(kind="ls", entries=lines, times_s=[round(t, 3) for t in times],
                  median_s=round(statistics.median(times), 3))
        say(f"{name:<28} {r['median_s']:>9.3f} s     ({lines} entries; runs {r['times_s']}; "
            f"cpu of all runs {r['cpu_s']})")

    def rename(self, name, src, dst):
        with Step(self, name, drop=False) as s:
            os.rename(src, dst)
        r = s.rec(kind="rename")
        say(f"{name:<28} {s.wall:>9.3f} s     (cpu {r['cpu_s']})")

    def verify(self, name, orig, path):
        verify_copy(orig, path, name[: -len("-verify")])

    def wait_cached(self, _name, size, timeout):
        """Waits until the drive's directory tier holds `size` bytes (written in the background)."""
        t0 = time.perf_counter()
        used = 0
        while time.perf_counter() - t0 < timeout:
            used = ((self.drive.status() or {}).get("cache") or {}).get("used_bytes", 0)
            if used >= size:
                say(f"drive cache holds {used} bytes after {time.perf_counter() - t0:.1f} s more")
                return
            time.sleep(0.5)
        raise StepError(f"the drive's cache holds {used} bytes after {timeout} s, expected >= {size}")

    # --- the gateway's view ---

    def gw_count(self, remote_dir):
        """Entries of a gateway directory (all pages), -1 when it does not exist."""
        conn, n, cursor = http.client.HTTPConnection("127.0.0.1", self.gw_port, timeout=600), 0, None
        try:
            while True:
                q = f"/api/v1/dirs/{remote_dir}?limit=1000" + (f"&cursor={cursor}" if cursor else "")
                conn.request("GET", q, headers={"Authorization": f"Bearer {self.token}"})
                r = conn.getresponse()
                body = r.read()
                if r.status == 404:
                    return -1
                if r.status != 200:
                    raise StepError(f"GET {q}: HTTP {r.status} {body[:300]!r}")
                page = json.loads(body)
                n += len(page["entries"])
                cursor = page.get("next_cursor")
                if not cursor:
                    return n
        finally:
            conn.close()

    # --- setup ---

    def binaries(self):
        c = self.c
        target = common.cargo_target_dir()
        gateway = c["gateway_bin"] or f"{target}/release/nimbus-gateway"
        cli = c["cli_bin"] or f"{target}/release/nimbus"
        if c["build"]:
            common.cargo_build_release(log, ["nimbus-gateway", "nimbus-cli"])
        hint = " (build it, or drop --no-build)"
        common.require_executable(gateway, hint)
        common.require_executable(cli, hint)
        return gateway, cli

    def wait_mount(self, name, mp, proc, log_file):
        """Until the kernel lists the mount (the process must live); False, logged, otherwise."""
        why = common.wait_ready(lambda: common.is_mounted(mp), proc)
        if why is None:
            return True
        common.print_tail(log_file, 20)
        if why == "exited":
            log(f"ERROR: {name} exited before mounting")
        else:
            log(f"ERROR: {name} did not mount {mp} within 30 s")
        return False

    def start_peer(self, name, key, mp, argv, out_file, tail_file=None, env=None):
        """A FUSE peer in the foreground (output into out_file, or nowhere when None); its mount
        waited for. False when it did not mount (tail_file's end shown, out_file by default)."""
        proc = self.procs.start(name, argv, out_file, env=env, cwd=self.t)
        self.peers.append((mp, proc, name))
        if not self.wait_mount(name, mp, proc, tail_file or out_file):
            return False
        self.watch.add(key, proc.pid)
        return True

    def run(self):
        c = self.c
        if os.geteuid() != 0:
            raise Fatal("run as root: the benchmark drops the page cache and mounts FUSE file systems")
        for tool in ("bindfs", "rclone", "s3fs", "fio", "fusermount3", "dd"):
            if not shutil.which(tool):
                raise Fatal(f"{tool} not found (infra/bench-mount.sh installs it)")
        common.require_boto3()
        minio_bin = common.minio_bin()
        common.require_executable(minio_bin, "; run infra/install-deps.sh first")
        if not os.access("/proc/sys/vm/drop_caches", os.W_OK):
            raise Fatal("/proc/sys/vm/drop_caches is not writable")
        if not os.path.exists("/dev/fuse"):
            raise Fatal("/dev/fuse is missing")

        # The source the binaries are built from ("+dirty": uncommitted changes in their crates).
        git_rev = common.git_rev(["gateway", "proto", "mount", "client", "blockcache"])
        gateway_bin, nimbus_bin = self.binaries()
        # Counted from here, after the build.
        common.set_deadline(log, c["deadline"])

        # --- temp dir, ports ---
        t = self.t = common.make_temp_dir("nimbus-bench-mount.")
        for d in ("data/dir10k", "minio", "gw", "gw-cache", "cfg", "out", "rclone-cache",
                  "mnt/nimbus", "mnt/bindfs", "mnt/bindfs-mt", "mnt/rclone", "mnt/s3fs"):
            os.makedirs(f"{t}/{d}")
        log(f"temp dir {t}")
        st = os.statvfs(t)
        avail_mib = st.f_bavail * st.f_frsize // 2**20
        need_mib = c["large_mib"] * 4 + 512
        if avail_mib < need_mib:
            raise Fatal(f"{t} has {avail_mib} MiB free; the run needs about {need_mib} MiB")
        minio_port, console_port, self.gw_port = (common.free_port() for _ in range(3))
        self.minio_url = minio_url = f"http://127.0.0.1:{minio_port}"
        gw_url = f"http://127.0.0.1:{self.gw_port}"

        # --- data ---
        large = f"{t}/data/large.bin"
        large_size = c["large_mib"] * 1024 * 1024
        log(f"generating a {c['large_mib']} MiB file and a directory of {c['dir_count']} empty files")
        with open(large, "wb") as f:
            for _ in range(c["large_mib"]):
                f.write(os.urandom(1 << 20))
        for i in range(c["dir_count"]):
            open(f"{t}/data/dir10k/f{i:05d}.txt", "wb").close()

        # --- MinIO ---
        log(f"starting MinIO on 127.0.0.1:{minio_port}")
        minio = common.start_minio(self.procs, minio_bin, f"{t}/minio", minio_port, console_port,
                                   f"{t}/minio.log", cwd=t)
        self.watch.add("minio", minio.pid)
        log(f"uploading the large file to MinIO bucket {PEER_BUCKET} (for rclone and s3fs)")
        s3 = common.s3client(minio_url)
        s3.create_bucket(Bucket=PEER_BUCKET)
        s3.upload_file(large, PEER_BUCKET, "large.bin")
        log(f"uploaded {large} to s3://{PEER_BUCKET}/large.bin")

        # --- gateway ---
        if c["gateway_cache"]:
            cache_args = ["--cache-dir", f"{t}/gw-cache", "--cache-size", "4GiB", "--cache-mem", "256MiB"]
        else:
            cache_args = ["--cache-dir", f"{t}/gw-cache", "--cache-size", "0", "--cache-mem", "0"]
        if c["direct_reads"]:
            cache_args.append("--s3-direct-reads")
        log(f"starting the gateway ({gateway_bin}) on 127.0.0.1:{self.gw_port}, MinIO bucket {GATEWAY_BUCKET}, "
            f"cache: {' '.join(cache_args)}")
        gw = common.start_gateway(
            self.procs, gateway_bin, self.gw_port, f"{t}/gw",
            [*common.s3_store(minio_url, GATEWAY_BUCKET), "--s3-access-key", common.MINIO_USER,
             "--s3-secret-key", common.MINIO_SECRET, *cache_args],
            f"{t}/gateway.log", cwd=t)
        self.watch.add("gateway", gw.pid)
        gw_info = common.gateway_info(self.gw_port)
        log(f"gateway info: {gw_info}")
        self.token = common.login(self.gw_port)
        log("uploading the large file through the gateway (PUT /api/v1/files/bench/large.bin)")
        common.put_parallel(self.gw_port, ["bench/large.bin"],
                            lambda conn, remote: common.put_file(conn, remote, large, self.token), workers=1)
        log(f"uploaded {large} to /bench/large.bin through the gateway")
        log(f"creating {c['dir_count']} empty files under /bench/dir10k through the gateway")
        put_empty_files(self.gw_port, self.token, "bench/dir10k", c["dir_count"])

        # --- the drive ---
        mp = f"{t}/mnt/nimbus"
        self.drive = common.Drive(log, nimbus_bin, f"{t}/cfg", mp)
        self.drive.login(gw_url, "--device", "bench-mount")
        drive_pid = self.drive.mount(f"{t}/drive-cache", ["--cache-size", c["cache_size"], "--cache-mem", c["cache_mem"]],
                                     env=c["drive_env"])
        self.watch.add("nimbus", drive_pid)
        log(f"drive mounted (pid {drive_pid})")

        # --- peers ---
        log(f"bindfs {t}/data -> {t}/mnt/bindfs (and --multithreaded -> {t}/mnt/bindfs-mt)")
        if not self.start_peer("bindfs", "bindfs", f"{t}/mnt/bindfs", ["bindfs", "-f", f"{t}/data", f"{t}/mnt/bindfs"],
                               f"{t}/bindfs.log"):
            raise Fatal("bindfs did not mount")
        if not self.start_peer("bindfs --multithreaded", "bindfs-mt", f"{t}/mnt/bindfs-mt",
                               ["bindfs", "-f", "--multithreaded", f"{t}/data", f"{t}/mnt/bindfs-mt"],
                               f"{t}/bindfs-mt.log"):
            raise Fatal("bindfs --multithreaded did not mount")

        log(f"rclone mount nbs3:{PEER_BUCKET} -> {t}/mnt/rclone (--vfs-cache-mode full, empty cache dir)")
        open(f"{t}/rclone.conf", "w").close()
        rclone_env = dict(os.environ, RCLONE_CONFIG=f"{t}/rclone.conf", RCLONE_CONFIG_NBS3_TYPE="s3",
                          RCLONE_CONFIG_NBS3_PROVIDER="Minio", RCLONE_CONFIG_NBS3_ENDPOINT=minio_url,
                          RCLONE_CONFIG_NBS3_REGION="us-east-1",
                          RCLONE_CONFIG_NBS3_ACCESS_KEY_ID=common.MINIO_USER,
                          RCLONE_CONFIG_NBS3_SECRET_ACCESS_KEY=common.MINIO_SECRET)
        # rclone's S3 client refuses a custom CA bundle with its own transport.
        rclone_env.pop("AWS_CA_BUNDLE", None)
        rclone_ok = self.start_peer(
            "rclone", "rclone", f"{t}/mnt/rclone",
            ["rclone", "mount", f"nbs3:{PEER_BUCKET}", f"{t}/mnt/rclone", "--vfs-cache-mode", "full",
             "--cache-dir", f"{t}/rclone-cache", "--log-file", f"{t}/rclone.log", "--log-level", "NOTICE"],
            None, tail_file=f"{t}/rclone.log", env=rclone_env)
        if not rclone_ok:
            self.failed.append("rclone-mount")

        log(f"s3fs {PEER_BUCKET} -> {t}/mnt/s3fs (url={minio_url}, use_path_request_style)")
        with open(f"{t}/s3fs.passwd", "w") as f:
            f.write(f"{common.MINIO_USER}:{common.MINIO_SECRET}\n")
        os.chmod(f"{t}/s3fs.passwd", 0o600)
        s3fs_ok = self.start_peer(
            "s3fs", "s3fs", f"{t}/mnt/s3fs",
            ["s3fs", PEER_BUCKET, f"{t}/mnt/s3fs", "-f", "-o",
             f"url={minio_url},use_path_request_style,passwd_file={t}/s3fs.passwd,dbglevel=warn,"
             f"logfile={t}/s3fs.log"],
            f"{t}/s3fs.out")
        if not s3fs_ok:
            self.failed.append("s3fs-mount")

        self.sampler = threading.Thread(target=sampler, args=(self.watch, f"{t}/out/rss.txt", self.sampler_stop),
                                        daemon=True)
        self.sampler.start()

        # --- measured steps ---
        load_before = common.loadavg()
        log(f"measuring (load average before: {load_before})")
        nlarge = f"{mp}/bench/large.bin"
        log(f"cold sequential reads of the {c['large_mib']} MiB file (dd bs=1M; page cache dropped before each)")
        for peer, ok, path in (("nimbus", True, nlarge), ("rclone", rclone_ok, f"{t}/mnt/rclone/large.bin"),
                               ("s3fs", s3fs_ok, f"{t}/mnt/s3fs/large.bin")):
            if ok and self.step(f"{peer}-cold-seq", self.seqread, path):
                self.step(f"{peer}-verify", self.verify, large, path)

        log(f"warm sequential reads: the drive (its cache holds the file) vs bindfs, {c['reps']} runs each")
        if self.step("nimbus-wait-cache", self.wait_cached, large_size, 120):
            for _ in range(c["reps"]):
                self.step("nimbus-warm-seq", self.seqread, nlarge)
                self.step("bindfs-warm-seq", self.seqread, f"{t}/mnt/bindfs/large.bin")
                self.step("bindfs-mt-warm-seq", self.seqread, f"{t}/mnt/bindfs-mt/large.bin")
            log(f"warm 4 KiB random reads (fio randread, 4 jobs, {c['runtime']}s each)")
            self.step("nimbus-warm-rand", self.randread, nlarge, large_size, c["runtime"])
            self.step("bindfs-warm-rand", self.randread, f"{t}/mnt/bindfs/large.bin", large_size, c["runtime"])
            self.step("bindfs-mt-warm-rand", self.randread, f"{t}/mnt/bindfs-mt/large.bin", large_size,
                      c["runtime"])

        log(f"ls -l of the {c['dir_count']}-entry directory (one warm-up run, then {c['ls_reps']} timed back to back)")
        self.step("nimbus-ls", self.ls, f"{mp}/bench/dir10k", c["ls_reps"])
        self.step("bindfs-ls", self.ls, f"{t}/mnt/bindfs/dir10k", c["ls_reps"])

        log(f"renaming the {c['dir_count']}-file directory through the drive")
        if self.step("nimbus-rename-dir", self.rename, f"{mp}/bench/dir10k", f"{mp}/bench/dir10k-renamed"):
            n_new, n_old = self.gw_count("bench/dir10k-renamed"), self.gw_count("bench/dir10k")
            log(f"after the rename the gateway lists {n_new} entries in /bench/dir10k-renamed, old path: "
                f"{'gone' if n_old == -1 else f'{n_old} entries'}")
            if n_new != c["dir_count"] or n_old != -1:
                log("ERROR: the rename is not what the gateway shows")
                self.failed.append("nimbus-rename-check")

        log(f"writing {c['write_count']} files of 4 KiB (open, write, close each) through the drive and rclone mount")
        if not mkdir_logged(f"{mp}/bench/writes"):
            self.failed.append("nimbus-mkdir")
        self.step("nimbus-write", self.writes, f"{mp}/bench/writes", c["write_count"], 120)
        if rclone_ok:
            if not mkdir_logged(f"{t}/mnt/rclone/writes"):
                self.failed.append("rclone-mkdir")
            self.step("rclone-write", self.writes_rclone, f"{t}/mnt/rclone/writes", c["write_count"], 120)
        load_after = common.loadavg()
        time.sleep(0.5)
        self.stop_sampler()

        if not common.pid_alive(drive_pid):
            log(f"ERROR: the drive process {drive_pid} died during the run; its log:")
            common.print_tail(f"{t}/drive-cache/mount.log", 30)
            self.failed.append("drive-alive")
        hwm_kb = common.proc_status(drive_pid, ("VmHWM",)).get("VmHWM", 0)
        try:
            with open(f"{t}/drive-cache/mount.log", errors="replace") as f:
                warnings = warning_summary(f.read())
        except OSError:
            warnings = (0, [])
        if warnings[0]:
            log(f"the drive logged {warnings[0]} WARN/ERROR lines (count, message):")
            for n, msg in warnings[1][:10]:
                print(f"{n:>7} {msg}", file=sys.stderr)

        # --- report ---
        meta = {
            "date": common.utc_now_iso(),
            "host": common.host_meta(),
            "large_mib": c["large_mib"], "dir_count": c["dir_count"], "write_count": c["write_count"],
            "cache_mem": c["cache_mem"], "cache_size": c["cache_size"], "gateway_cache": c["gateway_cache"],
            "direct_reads": c["direct_reads"],
            "fio_runtime_s": c["runtime"], "reps": c["reps"],
            "loadavg_before": load_before, "loadavg_after": load_after,
            "drive_vmhwm_mib": round(hwm_kb / 1024, 1), "drive_log_warnings": warnings[0],
            "gateway_info": json.loads(gw_info), "git": git_rev, "built_now": c["build"],
            "binaries_mtime": {n: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(b)))
                               for n, b in (("nimbus", nimbus_bin), ("gateway", gateway_bin))},
            "versions": {"rclone": first_line(["rclone", "version"]), "s3fs": first_line(["s3fs", "--version"]),
                         "bindfs": first_line(["bindfs", "--version"]), "fio": first_line(["fio", "--version"])},
        }
        print(f"\nnimbus {git_rev}{'' if c['build'] else ' (tree now; binaries not rebuilt)'}; load average "
              f"{load_before} before, {load_after} after; drive --cache-mem {c['cache_mem']}; "
              f"{common.utc_now_minute()}", flush=True)
        rss = read_rss(f"{t}/out/rss.txt")
        doc = build_report(meta, self.results, rss, list(self.failed))
        print(format_report(doc, rss), flush=True)
        if c["json"]:
            with open(c["json"], "w") as f:
                json.dump(doc, f, indent=2)
            print(f"\nJSON written to {c['json']}", flush=True)
        if self.failed:
            raise Fatal(f"some steps failed to run: {' '.join(self.failed)} (logs: {t}, kept with --keep)")
        return 0


class Step:
    """Context of a measured step: page cache dropped, the sampler told, CPU and drive counters."""

    def __init__(self, bench, name, drop=True):
        self.b, self.name, self.drop = bench, name, drop

    def __enter__(self):
        b = self.b
        self.drive = self.name.startswith("nimbus")
        # The drive rewrites its status file (cache counters) once a second.
        self.cnt0 = b.drive_counters() if self.drive else None
        self.perf = None
        if self.drive and b.c["perf"]:
            # A flat CPU profile of the drive, the gateway and MinIO during the step.
            pids = ",".join(str(p) for n, p in b.watch.daemons().items() if n in ("nimbus", "gateway", "minio"))
            self.perf_data = f"{b.t}/out/{self.name}.{int(time.time() * 1000)}.perf.data"
            self.perf = subprocess.Popen(["perf", "record", "-F", "499", "-p", pids, "-o", self.perf_data, "--quiet"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        if self.drop:
            drop_caches()
        b.watch.step = self.name
        self.cpu0 = b.watch.cpu_snapshot()
        self.wall0 = time.perf_counter()
        self.epoch0 = time.time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall0
        self.cpu = common.cpu_delta(self.cpu0, self.b.watch.cpu_snapshot())
        self.b.watch.step = "idle"
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
            self.counters = counters_delta(self.cnt0, self.b.drive_counters())
        r = {"step": self.name, "wall_s": round(self.wall, 3), "cpu_s": self.cpu, "start_epoch": self.epoch0}
        if self.counters is not None:
            r["drive_cache_delta"] = self.counters
        r.update(kw)
        self.b.record(r)
        return r


# --- helpers without state -------------------------------------------------------------------

def say(msg):
    """A step's result line (on stderr, with the logs; the report is on stdout)."""
    print(msg, file=sys.stderr, flush=True)


def mkdir_logged(path):
    try:
        os.mkdir(path)
        return True
    except OSError as e:
        print(f"mkdir: {e}", file=sys.stderr)
        return False


def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.splitlines()[0] if out else ""


def write_files(directory, payloads):
    for i, data in enumerate(payloads):
        with open(f"{directory}/w{i:05d}.bin", "wb") as f:
            f.write(data)


def put_empty_files(port, token, remote_dir, count):
    common.put_parallel(port, range(count), lambda conn, i: common.put(conn, f"{remote_dir}/f{i:05d}.txt", b"", 0,
                                                                       token))
    log(f"created {count} empty files in /{remote_dir} through the gateway")


def s3_count(s3, bucket, prefix):
    n = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        n += page.get("KeyCount", 0)
    return n


def verify_copy(orig, path, name):
    """Compares the first, last and 6 random 1 MiB pieces of `path` with the original."""
    size = os.path.getsize(orig)
    got_size = os.path.getsize(path)
    if got_size != size:
        raise StepError(f"{name}: {path} has {got_size} bytes, the original {size}")
    rnd = random.Random(7)
    offs = [0, max(0, size - (1 << 20))] + [rnd.randrange(0, max(1, size - (1 << 20))) for _ in range(6)]
    with open(orig, "rb") as a, open(path, "rb") as b:
        for off in offs:
            a.seek(off)
            b.seek(off)
            if a.read(1 << 20) != b.read(1 << 20):
                raise StepError(f"{name}: {path} differs from the original at offset {off}")
    say(f"{name}: same bytes as the original ({len(offs)} pieces of 1 MiB compared)")


def parse_fio(text):
    """IOPS, error and completion latencies (mean, p99, in µs) of fio's JSON output (fio may
    print notes before the JSON)."""
    j = json.loads(text[text.index("{"):])
    job = j["jobs"][0]
    lat = job["read"].get("clat_ns", {})
    p99 = lat.get("percentile", {}).get("99.000000")
    return {"iops": round(job["read"]["iops"], 1), "errors": job.get("error", 0),
            "clat_mean_us": round(lat.get("mean", 0) / 1e3, 1),
            "clat_p99_us": round(p99 / 1e3, 1) if p99 else None}


def warning_summary(log_text):
    """(number of WARN/ERROR lines, [(count, message)] most frequent first) of the drive's log:
    colours and the timestamp stripped, inode numbers folded, messages cut at 160 characters."""
    lines = [ln for ln in common.strip_ansi(log_text).splitlines() if re.search(r" (WARN|ERROR) ", ln)]
    msgs = collections.Counter(re.sub(r"INodeNo\([0-9]+\)", "INodeNo(N)", re.sub(r"^[^ ]+ +", "", ln))[:160]
                               for ln in lines)
    return len(lines), [(n, m) for m, n in sorted(msgs.items(), key=lambda kv: (-kv[1], kv[0]))]


def read_rss(path):
    """(name, step) -> max KiB (or thread count) from the sampler's `step name value` lines."""
    rss = {}
    try:
        with open(path) as f:
            for line in f:
                step, name, kib = line.split()
                k = (name, step)
                rss[k] = max(rss.get(k, 0), int(kib))
    except OSError:
        pass
    return rss


def judge(r, goal, higher_is_better=True):
    if r is None:
        return "ERROR"
    return "PASS" if (r >= goal if higher_is_better else r <= goal) else "MISS"


def quotient(a, b):
    """a / b when both are there and non-zero (a missing or zero figure gives no ratio)."""
    return a / b if a and b else None


def build_report(meta, recs, rss, failed):
    """The report's document: goal rows, reference rows, the steps, RSS maxima."""
    by = {}
    for r in recs:
        by.setdefault(r["step"], []).append(r)

    def last(step):
        return by[step][-1] if step in by else {}

    def med(step, key):
        vals = [r[key] for r in by.get(step, []) if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    def rss_max(name):
        vals = [v for (n, _s), v in rss.items() if n == name]
        return round(max(vals) / 1024, 1) if vals else None

    size = f"{meta['large_mib'] // 1024} GiB" if meta["large_mib"] % 1024 == 0 else f"{meta['large_mib']} MiB"
    rows = []

    def row(metric, unit, nimbus, peer_name, peer, r, goal_txt, ok, note=""):
        rows.append({"metric": metric, "unit": unit, "nimbus": nimbus, "peer_name": peer_name, "peer": peer,
                     "ratio": None if r is None else round(r, 3), "goal": goal_txt, "result": ok, "note": note})

    # Warm sequential read: median of the repetitions.
    n, b = med("nimbus-warm-seq", "mb_s"), med("bindfs-warm-seq", "mb_s")
    r = quotient(n, b)
    row(f"warm seq read {size} (MB/s)", "MB/s", n, "bindfs", b, r, ">= 0.8x", judge(r, 0.8))
    n = med("nimbus-cold-seq", "mb_s")
    # Issue 21's goals: s3fs keeps no cache and is the leaner reader, rclone caches like us.
    for peer, goal in (("rclone", 1.5), ("s3fs", 1.0)):
        p = med(f"{peer}-cold-seq", "mb_s")
        r = quotient(n, p)
        row(f"cold seq read {size} vs {peer} (MB/s)", "MB/s", n, peer, p, r, f">= {goal}x", judge(r, goal))
    n, b = med("nimbus-warm-rand", "iops"), med("bindfs-warm-rand", "iops")
    r = quotient(n, b)
    row("warm 4 KiB random read, 4 jobs (IOPS)", "IOPS", n, "bindfs", b, r, ">= 0.7x", judge(r, 0.7))
    n, p = last("nimbus-write"), last("rclone-write")
    nw, pw = n.get("wall_s"), p.get("wall_s")
    r = quotient(pw, nw)
    row(f"write {meta['write_count']} x 4 KiB files (s, loop wall time)", "s", nw, "rclone", pw, r,
        ">= 2x (rclone s / nimbus s)", judge(r, 2.0),
        f"on the server (from the loop start): nimbus {n.get('on_server_s')} s ({n.get('listed_after_loop')} "
        f"listed when the loop ended), rclone {p.get('on_server_s')} s")
    nm, bm = last("nimbus-ls").get("median_s"), last("bindfs-ls").get("median_s")
    r = quotient(nm, bm)
    row(f"ls -l of a warm {meta['dir_count']}-entry dir (s)", "s", nm, "bindfs", bm, r, "<= 2x",
        judge(r, 2.0, higher_is_better=False))
    nw = last("nimbus-rename-dir").get("wall_s")
    row(f"rename a dir of {meta['dir_count']} files (s)", "s", nw, "", None, None, "< 1 s",
        "ERROR" if nw is None else ("PASS" if nw < 1.0 else "MISS"))
    mx = rss_max("nimbus")
    row("drive VmRSS max during the steps (MiB)", "MiB", mx, "", None, None, "<= 200 MiB",
        "ERROR" if mx is None else ("PASS" if mx <= 200 else "MISS"), f"--cache-mem {meta['cache_mem']}")

    info = []
    for step, key, nimbus_step in (("bindfs-mt-warm-seq", "mb_s", "nimbus-warm-seq"),
                                   ("bindfs-mt-warm-rand", "iops", "nimbus-warm-rand")):
        v = med(step, key)
        nimbus_v = med(nimbus_step, key)
        if v:
            info.append({"what": f"{step} ({key})", "value": v,
                         "nimbus_ratio": round(nimbus_v / v, 3) if nimbus_v else None})

    return {"meta": meta, "goals": rows, "reference": info, "steps": recs,
            "rss_max_mib": {f"{n}/{s}": round(v / 1024, 1) for (n, s), v in rss.items() if not n.endswith("Threads")},
            "drive_threads_max": max([v for (n, s), v in rss.items() if n == "nimbus.Threads"], default=None),
            "failed_steps": failed}


def fmt(v):
    if v is None:
        return "-"
    return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"


def format_report(doc, rss):
    """The tables printed at the end of a run (rss: read_rss's maxima)."""
    rows, info, recs = doc["goals"], doc["reference"], doc["steps"]
    lines = [""]
    hdr = f"{'metric':<44} {'nimbus':>10} {'peer':>16} {'ratio':>7}  {'goal':<26} result"
    lines += [hdr, "-" * len(hdr)]
    for x in rows:
        peer = f"{x['peer_name']} {fmt(x['peer'])}" if x["peer_name"] else ""
        res = x["result"]
        if res == "MISS" and x["ratio"] is not None:
            res += f" (measured {x['ratio']:.3f})"
        lines.append(f"{x['metric']:<44} {fmt(x['nimbus']):>10} {peer:>16} {fmt(x['ratio']):>7}  {x['goal']:<26} {res}")
    for x in rows:
        if x["note"] and x["unit"] == "s" and "write" in x["metric"]:
            lines.append(f"  writes: {x['note']}")
    for x in info:
        lines.append(f"  reference: {x['what']}: {fmt(x['value'])} (nimbus / it: {fmt(x['nimbus_ratio'])})")
    lines += ["", "per step: wall s, CPU s of each process during the step, drive cache counters delta"]
    for r in recs:
        extra = ""
        if r.get("drive_cache_delta"):
            d = r["drive_cache_delta"]
            extra = "  drive: " + ", ".join(f"{k}={v}" for k, v in d.items() if v and k != "capacity_bytes")
        if "wall_s" in r:
            lines.append(f"  {r['step']:<26} {r['wall_s']:>8.3f} s  cpu {r.get('cpu_s')}{extra}")
    lines += ["", "VmRSS max (MiB) per process and step (nimbus.Threads: thread count):"]

    def show(name, v):
        return f"{v}" if name.endswith("Threads") else f"{v / 1024:.0f}"
    for name in sorted({n for n, _ in rss}):
        steps = sorted({s for n, s in rss if n == name})
        lines.append(f"  {name:<16} " + ", ".join(f"{s} {show(name, rss[(name, s)])}" for s in steps))
    if doc["failed_steps"]:
        lines += ["", "steps that failed to run: " + ", ".join(doc["failed_steps"])]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    common.run_bench(log, lambda: Bench(config(argv, os.environ)))


if __name__ == "__main__":
    main()
