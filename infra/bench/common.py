"""What every benchmark under infra/bench needs: logging and fatal errors, arguments and
environment numbers, processes that are stopped on every exit path, free ports, waiting for a
server or a mount, /proc readings (CPU time, RSS), the release build, MinIO and the gateway.

Standard library only: boto3 is imported where S3 is spoken (the wrappers install it)."""

import concurrent.futures
import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE_DIR = os.environ.get("NIMBUS_CACHE_DIR", "/var/cache/nimbus")
MINIO_USER = "nimbus-bench"
MINIO_SECRET = "nimbus-bench-secret"
ADMIN_PASSWORD = "bench-admin-password"
CLK_TCK = os.sysconf("SC_CLK_TCK")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


# --- logging, fatal errors, the run's frame ---------------------------------------------------

class Fatal(Exception):
    """A setup stage that cannot go on: logged as `ERROR: ...`, exit status 1."""


class Interrupted(Exception):
    """SIGINT, SIGTERM or the deadline: the run is stopped, exit status 130."""


class Log:
    """`[tag] message` lines on stderr."""

    def __init__(self, tag):
        self.tag = tag

    def __call__(self, msg):
        print(f"[{self.tag}] {msg}", file=sys.stderr, flush=True)

    def error(self, msg):
        self(f"ERROR: {msg}")


def run_main(log, body, cleanup):
    """Runs body() and then cleanup() on every way out (return, Fatal, Ctrl-C, TERM, deadline),
    and exits with body's status, 1 after a Fatal, 130 after a signal or the deadline. A second
    signal during cleanup ends the process at once, as the shell scripts' traps did."""

    def on_signal(signum, _frame):
        raise Interrupted("interrupted")

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    rc = 1
    try:
        rc = body() or 0
    except Fatal as e:
        log.error(str(e))
        rc = 1
    except Interrupted as e:
        log(str(e))
        rc = 130
    except Exception:   # noqa: BLE001 - a bug or an unforeseen failure: shown, then cleaned up
        import traceback
        traceback.print_exc()
        log.error("the run failed (traceback above)")
        rc = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.alarm(0)
        cleanup()
    sys.exit(rc)


def run_bench(log, make):
    """run_main for a benchmark object: make() builds it (a settings error is a Fatal too),
    then its run() is the body and its cleanup() ends whatever it started."""
    made = []

    def body():
        made.append(make())
        return made[0].run()

    run_main(log, body, lambda: made and made[0].cleanup())


def set_deadline(log, seconds):
    """After `seconds`, the run is aborted like a SIGTERM (cleanup runs, exit status 130)."""

    def on_alarm(_signum, _frame):
        log.error(f"deadline of {seconds}s reached, aborting")
        raise Interrupted("interrupted")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(seconds))


# --- arguments and environment ---------------------------------------------------------------

def parse_args(argv, spec, usage):
    """Parses `argv` against `spec`: option -> (key, what) for an option with a value (`what`
    names it in the error: "--json needs a file"), or option -> (key, None) for a flag.
    Returns {key: value}; flags absent are False, values absent are not in the dict.
    -h/--help prints `usage` to stderr and exits 0; an unknown argument prints it and raises
    Fatal."""
    out = {key: False for key, what in spec.values() if what is None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(usage, file=sys.stderr)
            sys.exit(0)
        if a not in spec:
            print(usage, file=sys.stderr)
            raise Fatal(f"unknown argument: {a}")
        key, what = spec[a]
        if what is None:
            out[key] = True
            i += 1
        else:
            if i + 1 >= len(argv):
                raise Fatal(f"{a} needs {what}")
            out[key] = argv[i + 1]
            i += 2
    return out


def positive_int(name, value):
    """`value` (a string) as a positive integer; Fatal names `name` otherwise."""
    text = str(value)
    if not re.fullmatch(r"[1-9][0-9]*", text):
        raise Fatal(f"{name} must be a positive integer (got '{text}')")
    return int(text)


def positive_ints(spec, environ, opts):
    """{key: positive int} for spec's key -> (environment variable or None, default): the
    option of that key in opts when given, else the variable when set and not empty, else the
    default. An error names KEY in capitals (SMALL_COUNT, DURATION)."""
    out = {}
    for key, (var, default) in spec.items():
        text = opts[key] if key in opts else (var and environ.get(var)) or default
        out[key] = positive_int(key.upper(), text)
    return out


def usage_of(module_doc):
    """The usage text of a benchmark: its module docstring, without the trailing blank lines."""
    return module_doc.strip("\n")


# --- processes -------------------------------------------------------------------------------

def stop_process(proc, name, log, grace=10.0):
    """TERM, then KILL after `grace` seconds (logged); reaps it. A process already gone is fine."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=grace)
        return
    except subprocess.TimeoutExpired:
        pass
    log(f"{name} (pid {proc.pid}) still running after {grace:g} s, killing it")
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def kill_group(proc):
    """TERM, then KILL, the process group `proc` leads (a helper's dd or fio with its jobs)."""
    if proc is None:
        return
    for sig, pause in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        if pause:
            time.sleep(pause)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


class Procs:
    """The long-running processes of a run, stopped in reverse order of start on exit."""

    def __init__(self, log):
        self.log = log
        self.started = []   # (name, Popen)

    def start(self, name, argv, log_path, env=None, cwd=None):
        """Starts argv with stdin from /dev/null and stdout+stderr into log_path (nowhere when
        log_path is None: a process that writes its own log file)."""
        logf = open(log_path, "wb") if log_path else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env, cwd=cwd)
        finally:
            if log_path:
                logf.close()
        self.started.append((name, proc))
        return proc

    def stop(self, proc):
        for name, p in self.started:
            if p is proc:
                stop_process(p, name, self.log)

    def stop_all(self):
        for name, p in reversed(self.started):
            stop_process(p, name, self.log)


def run_in_group(cmd, timeout, holder=None, **kw):
    """subprocess.run in its own process group, so that an abort ends the whole group (fio's job
    processes too), not only its leader. `holder`, a list, holds the live process meanwhile so
    that a cleanup running from a signal can kill the group."""
    proc = subprocess.Popen(cmd, start_new_session=True, **kw)
    if holder is not None:
        holder.append(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        kill_group(proc)
        raise
    finally:
        if holder is not None and proc in holder:
            holder.remove(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def tail(path, n):
    """The last n lines of a text file ('' when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def print_tail(path, n):
    text = tail(path, n)
    if text:
        print(text, file=sys.stderr, flush=True)


# --- ports and waits -------------------------------------------------------------------------

def free_port():
    """A TCP port free on 127.0.0.1 at the time of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_ok(url, timeout=2.0):
    """True when a GET of url answers below 400 (as `curl -f` counts success)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            r.read()
            return r.status < 400
    except (OSError, http.client.HTTPException, ValueError):
        return False


def wait_ready(ready, proc, tries=300, interval=0.1):
    """Polls ready() up to `tries` times, `interval` apart, while proc lives. Returns None once
    ready, "exited" when proc ended first, "timeout" when the tries ran out."""
    for _ in range(tries):
        if ready():
            return None
        if proc is not None and proc.poll() is not None:
            return "exited"
        time.sleep(interval)
    return "timeout"


def wait_http(name, url, proc, log_file, tries=300, interval=0.1):
    """Waits until url answers (30 s by default); Fatal, with the log's tail, when it does not."""
    why = wait_ready(lambda: http_ok(url), proc, tries, interval)
    if why is None:
        return
    print_tail(log_file, 30)
    if why == "exited":
        raise Fatal(f"{name} exited during startup")
    raise Fatal(f"{name} not answering {url} after {tries * interval:g} s")


# --- /proc -----------------------------------------------------------------------------------

def parse_stat_cpu(text, clk=CLK_TCK):
    """User + system CPU seconds from the text of /proc/PID/stat (the command name, in
    parentheses, may itself hold spaces and parentheses: fields are counted after the last ')')."""
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / clk


def cpu_seconds(pid):
    """CPU seconds used so far by pid, or None when it cannot be read (gone, no permission)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return parse_stat_cpu(f.read())
    except (OSError, IndexError, ValueError):
        return None


def cpu_delta(before, after):
    """name -> CPU seconds between two {name: seconds or None} snapshots, rounded to 0.01."""
    out = {}
    for name, a in after.items():
        b = before.get(name)
        if a is not None and b is not None:
            out[name] = round(a - b, 2)
    return out


def status_fields(text, keys):
    """{key: int} of the `Key:   N kB` lines of /proc/PID/status that are present."""
    out = {}
    for key in keys:
        m = re.search(rf"^{key}:\s+(\d+)", text, re.M)
        if m:
            out[key] = int(m.group(1))
    return out


def proc_status(pid, keys):
    """status_fields of a live process ({} when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return status_fields(f.read(), keys)
    except OSError:
        return {}


def loadavg():
    """The first three fields of /proc/loadavg ("0.41 1.34 1.75")."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def mounted_paths(text):
    """The mount points listed in the text of /proc/self/mounts (octal escapes decoded)."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[1]))
    return out


def mounts():
    with open("/proc/self/mounts") as f:
        return mounted_paths(f.read())


def is_mounted(path):
    return path in mounts()


# --- sizes, maths, text ----------------------------------------------------------------------

SIZE_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
              "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def size_bytes(text):
    """Bytes in a size as the gateway's flags take it: "512MiB", "4GiB", "100MB", "4096"."""
    m = re.fullmatch(r"(\d+)\s*([KMGT]i?B|B)?", text.strip())
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return int(m.group(1)) * SIZE_UNITS[m.group(2) or "B"]


def percentile(values, q):
    """The nearest-rank q-th percentile (0 < q <= 100) of values: the smallest value with at
    least q% of them at or below it."""
    if not values:
        raise ValueError("percentile of no values")
    v = sorted(values)
    k = max(1, -(-len(v) * q // 100))   # ceil(n * q / 100), at least the first
    return v[int(k) - 1]


def strip_ansi(text):
    return ANSI.sub("", text)


def utc_now_iso():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def utc_now_minute():
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def host_meta():
    import platform
    return {"cpus": os.cpu_count(), "kernel": platform.release()}


def make_temp_dir(prefix):
    """A fresh temp dir under $TMPDIR (default /tmp)."""
    import tempfile
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TMPDIR") or "/tmp")


def remove_tree(path):
    shutil.rmtree(path, ignore_errors=True)


# --- build, git ------------------------------------------------------------------------------

def git_rev(paths):
    """The short commit of the checkout, "+dirty" when `paths` (crate dirs) have uncommitted
    changes: the source the binaries are built from."""
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=30).stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", *paths],
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def cargo_target_dir():
    """$CARGO_TARGET_DIR, else /var/cache/nimbus/target when it can be made and written, else
    ./target of the checkout; exported so that cargo uses the same."""
    d = os.environ.get("CARGO_TARGET_DIR")
    if not d:
        d = "/var/cache/nimbus/target"
        try:
            os.makedirs(d, exist_ok=True)
            if not os.access(d, os.W_OK):
                raise OSError
        except OSError:
            d = os.path.join(ROOT, "target")
        os.environ["CARGO_TARGET_DIR"] = d
    return d


def cargo_build_release(log, packages):
    """`cargo build --release -p ...` in the checkout (cargo from ~/.cargo/bin when not on PATH)."""
    cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
    target = cargo_target_dir()
    args = [a for p in packages for a in ("-p", p)]
    log(f"cargo build --release {' '.join(args)} (target dir {target})")
    if subprocess.run([cargo, "build", "--release", *args], cwd=ROOT).returncode != 0:
        raise Fatal("cargo build failed")


def require_executable(path, hint):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise Fatal(f"{path} not found{hint}")


def require_boto3():
    import importlib.util
    if importlib.util.find_spec("boto3") is None:
        raise Fatal("python module boto3 not found (the infra/bench-*.sh wrappers install it)")


def minio_bin():
    return os.environ.get("NIMBUS_MINIO_BIN") or f"{CACHE_DIR}/bin/minio"


# --- MinIO, the gateway ----------------------------------------------------------------------

def start_minio(procs, binary, data_dir, port, console_port, log_file, cwd=None):
    """MinIO on 127.0.0.1:port (user nimbus-bench), waited for until healthy."""
    env = dict(os.environ, MINIO_ROOT_USER=MINIO_USER, MINIO_ROOT_PASSWORD=MINIO_SECRET, MINIO_UPDATE="off")
    proc = procs.start("minio", [binary, "server", data_dir, "--quiet", "--address", f"127.0.0.1:{port}",
                                 "--console-address", f"127.0.0.1:{console_port}"], log_file, env=env, cwd=cwd)
    wait_http("minio", f"http://127.0.0.1:{port}/minio/health/live", proc, log_file)
    return proc


def s3_store(minio_url, bucket):
    """The gateway's flags for MinIO at minio_url as its block store (bucket `bucket`)."""
    return ["--store", "s3", "--s3-endpoint", minio_url, "--s3-bucket", bucket, "--s3-region", "us-east-1"]


def start_gateway(procs, binary, port, data_dir, extra, log_file, cwd=None, wait="/readyz"):
    """The gateway (SQLite in data_dir unless extra names a database, admin password
    bench-admin-password, MinIO credentials in its environment) on 127.0.0.1:port, waited for
    at `wait`."""
    env = dict(os.environ, AWS_ACCESS_KEY_ID=MINIO_USER, AWS_SECRET_ACCESS_KEY=MINIO_SECRET,
               AWS_REGION="us-east-1", NIMBUS_ADMIN_PASSWORD=ADMIN_PASSWORD)
    argv = [binary, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data_dir, *extra]
    proc = procs.start("gateway", argv, log_file, env=env, cwd=cwd)
    wait_http("gateway", f"http://127.0.0.1:{port}{wait}", proc, log_file)
    return proc


def http_json(port, method, path, body=None, token=None, timeout=30):
    """One JSON call to 127.0.0.1:port: (status, parsed body or raw bytes when not JSON)."""
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        r = conn.getresponse()
        data = r.read()
    finally:
        conn.close()
    try:
        return r.status, json.loads(data) if data else None
    except ValueError:
        return r.status, data


def gateway_info(port):
    """GET /api/v1/info as its raw text (logged and kept in the JSON as it is)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/info", timeout=5) as r:
        return r.read().decode()


def login(port, password=ADMIN_PASSWORD, username="admin"):
    """A bearer token for the admin."""
    st, body = http_json(port, "POST", "/api/v1/auth/login", {"username": username, "password": password},
                         timeout=10)
    if st != 200 or not isinstance(body, dict) or not body.get("token"):
        raise Fatal(f"login as {username} gave no token (HTTP {st})")
    return body["token"]


def put(conn, remote, body, size, token):
    """PUT body (bytes or a file) at /api/v1/files/REMOTE on a gateway connection; Fatal on
    an answer other than 200/201."""
    conn.request("PUT", f"/api/v1/files/{remote}", body=body,
                 headers={"Authorization": f"Bearer {token}", "Content-Length": str(size)})
    r = conn.getresponse()
    data = r.read()
    if r.status not in (200, 201):
        raise Fatal(f"PUT {remote}: HTTP {r.status} {data[:300]!r}")


def put_file(conn, remote, local, token):
    with open(local, "rb") as f:
        put(conn, remote, f, os.path.getsize(local), token)


def put_parallel(port, items, put_one, workers=4, timeout=600):
    """put_one(conn, item) for every item on `workers` threads, each with its own keep-alive
    connection to the gateway on 127.0.0.1:port."""
    local, conns = threading.local(), []

    def one(item):
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            conns.append(conn)
        put_one(conn, item)

    try:
        with concurrent.futures.ThreadPoolExecutor(workers) as ex:
            list(ex.map(one, items))
    finally:
        for conn in conns:
            conn.close()


def s3client(endpoint, user=MINIO_USER, secret=MINIO_SECRET, pool=8):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=user, aws_secret_access_key=secret,
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                      max_pool_connections=pool))


# --- the drive -------------------------------------------------------------------------------

class Drive:
    """The `nimbus` CLI with a config dir of its own, and the drive it mounts at `mountpoint`."""

    def __init__(self, log, nimbus_bin, config_dir, mountpoint):
        self.log, self.bin, self.config_dir, self.mountpoint = log, nimbus_bin, config_dir, mountpoint
        self.mounted = False

    def cli(self, *args, env=None, **kw):
        full_env = dict(os.environ, NIMBUS_CONFIG_DIR=self.config_dir, **(env or {}))
        return subprocess.run([self.bin, *args], env=full_env, **kw)

    def login(self, gw_url, *extra):
        self.log(f"nimbus login {gw_url} -u admin (config in {self.config_dir})")
        p = self.cli("login", gw_url, "-u", "admin", *extra, stdin=subprocess.DEVNULL, stdout=sys.stderr,
                     env={"NIMBUS_PASSWORD": ADMIN_PASSWORD})
        if p.returncode != 0:
            raise Fatal("nimbus login failed")

    def mount(self, cache_dir, extra=(), env=None):
        """`nimbus mount` (it returns once the drive serves, detached); the drive's pid."""
        self.log(f"nimbus mount {self.mountpoint} --cache-dir {cache_dir} {' '.join(extra)}".rstrip())
        p = self.cli("mount", self.mountpoint, "--cache-dir", cache_dir, *extra, stdin=subprocess.DEVNULL,
                     stdout=sys.stderr, env=env)
        if p.returncode != 0:
            print_tail(f"{cache_dir}/mount.log", 20)
            raise Fatal("nimbus mount failed")
        self.mounted = True
        pid = self.pid()
        if not pid:
            raise Fatal("nimbus status --json shows no mount pid")
        if not is_mounted(self.mountpoint):
            raise Fatal(f"nimbus mount returned but {self.mountpoint} is not a mount point")
        return pid

    def status(self):
        """The drive's entry of `nimbus status --json` (None when nothing is mounted)."""
        try:
            p = self.cli("status", "--json", capture_output=True, timeout=30)
            mounts = json.loads(p.stdout)["mounts"]
            return mounts[0] if mounts else None
        except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
            return None

    def pid(self):
        st = self.status()
        return st.get("pid") if st else None

    def unmount(self):
        """`nimbus unmount` (2 minutes at most), then the process killed and the mount let go of
        if either is still there."""
        if not self.mounted:
            return
        pid = self.pid()
        try:
            ok = self.cli("unmount", self.mountpoint, stdout=sys.stderr, timeout=120).returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
        if not ok:
            self.log("nimbus unmount failed or took over 120 s")
        if pid and pid_alive(pid):
            self.log(f"the drive (pid {pid}) is still running after unmount, killing it")
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if is_mounted(self.mountpoint):
            if subprocess.run(["fusermount3", "-u", self.mountpoint], stderr=subprocess.DEVNULL).returncode != 0:
                subprocess.run(["umount", "-l", self.mountpoint], stderr=subprocess.DEVNULL)
        self.mounted = False


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
