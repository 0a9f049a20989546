"""Unit tests of infra/bench/common.py: arguments, /proc parsing, maths, processes, waits (with a
local HTTP server on 127.0.0.1). Run: python3 -m unittest discover -s infra/bench -t ."""

import contextlib
import http.server
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from infra.bench import common
from infra.bench.common import Fatal


class DummyServer:
    """A threaded HTTP server on 127.0.0.1: routes maps (method, path) to (status, body bytes or
    a JSON-able value); every request is recorded as (method, path, headers, body)."""

    def __init__(self, routes):
        self.routes, self.requests = routes, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True   # no 40 ms pause between a response's header and body

            def answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                outer.requests.append((self.command, self.path, dict(self.headers), body))
                status, out = outer.routes.get((self.command, self.path), (404, b"no route"))
                if not isinstance(out, bytes):
                    out = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_PUT = do_POST = answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def quiet_log():
    return common.Log("test")


class ArgsTest(unittest.TestCase):
    SPEC = {"--json": ("json", "a file"), "--reps": ("reps", "a count"), "--keep": ("keep", None)}

    def test_values_and_flags(self):
        a = common.parse_args(["--json", "out.json", "--keep", "--reps", "4"], self.SPEC, "usage")
        self.assertEqual(a, {"json": "out.json", "keep": True, "reps": "4"})

    def test_absent_flags_are_false_and_absent_values_missing(self):
        self.assertEqual(common.parse_args([], self.SPEC, "usage"), {"keep": False})

    def test_option_without_its_value(self):
        with self.assertRaisesRegex(Fatal, r"^--json needs a file$"):
            common.parse_args(["--json"], self.SPEC, "usage")

    def test_unknown_argument_prints_usage(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaisesRegex(Fatal, r"^unknown argument: --nope$"):
            common.parse_args(["--keep", "--nope"], self.SPEC, "the usage text")
        self.assertIn("the usage text", err.getvalue())

    def test_help_prints_usage_and_exits_0(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as cm:
            common.parse_args(["--reps", "2", "--help"], self.SPEC, "the usage text")
        self.assertEqual(cm.exception.code, 0)
        self.assertIn("the usage text", err.getvalue())

    def test_positive_ints_take_option_then_environment_then_default(self):
        spec = {"reps": (None, "3"), "large_mib": ("BENCH_LARGE_MIB", "1024"), "dir_count": ("BENCH_DIR_COUNT", "10")}
        self.assertEqual(common.positive_ints(spec, {"BENCH_LARGE_MIB": "64", "BENCH_DIR_COUNT": ""}, {"reps": "2"}),
                         {"reps": 2, "large_mib": 64, "dir_count": 10})
        with self.assertRaisesRegex(Fatal, r"^REPS must be a positive integer \(got ''\)$"):
            common.positive_ints(spec, {}, {"reps": ""})

    def test_positive_int(self):
        self.assertEqual(common.positive_int("N", "1"), 1)
        self.assertEqual(common.positive_int("N", "1200"), 1200)
        for bad in ("0", "-1", "01", "1.5", "ten", "", " 3"):
            with self.assertRaisesRegex(Fatal, rf"^DURATION must be a positive integer \(got '{bad}'\)$"):
                common.positive_int("DURATION", bad)


STAT = ("4242 (a (strange) name) S 1 4242 4242 0 -1 4194560 1234 0 0 0 "
        "250 130 0 0 20 0 7 0 123456 1000000 2000 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0")


class ProcTest(unittest.TestCase):
    def test_stat_cpu_counts_fields_after_the_command_name(self):
        self.assertAlmostEqual(common.parse_stat_cpu(STAT, clk=100), 3.8)

    def test_stat_cpu_of_a_process(self):
        t0 = common.cpu_seconds(os.getpid())
        end = time.process_time() + 0.05
        while time.process_time() < end:
            pass
        t1 = common.cpu_seconds(os.getpid())
        self.assertIsNotNone(t0)
        self.assertGreater(t1, t0)

    def test_cpu_of_a_missing_process_is_none(self):
        p = subprocess.Popen(["true"])
        p.wait()
        self.assertIsNone(common.cpu_seconds(p.pid))

    def test_cpu_delta_skips_unknown_readings(self):
        before = {"gateway": 1.0, "minio": None, "nimbus": 2.5}
        after = {"gateway": 3.456, "minio": 4.0, "nimbus": 2.5, "new": 1.0}
        self.assertEqual(common.cpu_delta(before, after), {"gateway": 2.46, "nimbus": 0.0})

    def test_status_fields(self):
        text = "Name:\tnimbus\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nRssAnon:\t 90000 kB\nThreads:\t12\n"
        self.assertEqual(common.status_fields(text, ("VmRSS", "VmHWM", "Threads", "RssFile")),
                         {"VmRSS": 102400, "VmHWM": 204800, "Threads": 12})

    def test_status_of_this_process(self):
        self.assertGreater(common.proc_status(os.getpid(), ("VmRSS",))["VmRSS"], 0)

    def test_mounted_paths_decode_escapes(self):
        text = ("proc /proc proc rw 0 0\n"
                "nimbus /tmp/b\\040c/mnt/nimbus fuse.nimbus rw,nosuid 0 0\n")
        self.assertEqual(common.mounted_paths(text), ["/proc", "/tmp/b c/mnt/nimbus"])

    def test_loadavg_has_three_fields(self):
        self.assertEqual(len(common.loadavg().split()), 3)


class MathsTest(unittest.TestCase):
    def test_sizes(self):
        self.assertEqual(common.size_bytes("512MiB"), 512 << 20)
        self.assertEqual(common.size_bytes("4GiB"), 4 << 30)
        self.assertEqual(common.size_bytes("100MB"), 100_000_000)
        self.assertEqual(common.size_bytes(" 4096 "), 4096)
        self.assertEqual(round(common.size_bytes("512MiB") / 2**20), 512)
        with self.assertRaises(ValueError):
            common.size_bytes("lots")

    def test_percentile_nearest_rank(self):
        v = list(range(40, 0, -1))   # 1..40, unsorted
        self.assertEqual(common.percentile(v, 95), 38)
        self.assertEqual(common.percentile(v, 100), 40)
        self.assertEqual(common.percentile(list(range(1, 11)), 95), 10)
        self.assertEqual(common.percentile(list(range(1, 11)), 50), 5)
        self.assertEqual(common.percentile([7.5], 95), 7.5)
        with self.assertRaises(ValueError):
            common.percentile([], 95)

    def test_strip_ansi(self):
        self.assertEqual(common.strip_ansi("\x1b[2m2026\x1b[0m \x1b[33m WARN\x1b[0m x"), "2026  WARN x")


class WaitTest(unittest.TestCase):
    def test_free_port_can_be_bound(self):
        import socket
        port = common.free_port()
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))

    def test_http_ok(self):
        with DummyServer({("GET", "/ok"): (200, b"yes"), ("GET", "/gone"): (503, b"no")}) as srv:
            self.assertTrue(common.http_ok(srv.url + "/ok"))
            self.assertFalse(common.http_ok(srv.url + "/gone"))
            self.assertFalse(common.http_ok(srv.url + "/missing"))
        self.assertFalse(common.http_ok(f"http://127.0.0.1:{common.free_port()}/", timeout=0.5))

    def test_wait_ready_outcomes(self):
        calls = []
        self.assertIsNone(common.wait_ready(lambda: calls.append(1) or len(calls) >= 3, None, 10, 0.01))
        self.assertEqual(len(calls), 3)
        self.assertEqual(common.wait_ready(lambda: False, None, 3, 0.01), "timeout")
        done = subprocess.Popen(["true"])
        done.wait()
        self.assertEqual(common.wait_ready(lambda: False, done, 100, 0.01), "exited")

    def test_wait_http_until_the_server_answers(self):
        srv = DummyServer({("GET", "/readyz"): (200, b"ok")})
        threading.Timer(0.3, lambda: srv.__enter__()).start()
        sleeper = subprocess.Popen(["sleep", "30"])
        try:
            common.wait_http("dummy", srv.url + "/readyz", sleeper, "/nonexistent.log", tries=100, interval=0.05)
        finally:
            sleeper.kill()
            sleeper.wait()
            srv.__exit__()

    def test_wait_http_failures_show_the_log(self):
        with tempfile.NamedTemporaryFile("w", suffix=".log") as f:
            f.write("".join(f"line {i}\n" for i in range(40)))
            f.flush()
            url = f"http://127.0.0.1:{common.free_port()}/readyz"
            done = subprocess.Popen(["true"])
            done.wait()
            err = io.StringIO()
            with contextlib.redirect_stderr(err), self.assertRaisesRegex(Fatal, r"^dummy exited during startup$"):
                common.wait_http("dummy", url, done, f.name, tries=5, interval=0.01)
            self.assertIn("line 39", err.getvalue())
            self.assertNotIn("line 9\n", err.getvalue())   # 30 lines: 10..39
            with contextlib.redirect_stderr(io.StringIO()), \
                    self.assertRaisesRegex(Fatal, r"^dummy not answering .* after 0.05 s$"):
                common.wait_http("dummy", url, None, f.name, tries=5, interval=0.01)

    def test_tail(self):
        with tempfile.NamedTemporaryFile("w") as f:
            f.write("a\nb\nc\n")
            f.flush()
            self.assertEqual(common.tail(f.name, 2), "b\nc")
        self.assertEqual(common.tail("/nonexistent", 2), "")


class ProcessTest(unittest.TestCase):
    def test_procs_stop_all_in_reverse(self):
        with tempfile.TemporaryDirectory() as d:
            procs = common.Procs(quiet_log())
            a = procs.start("a", ["sleep", "30"], f"{d}/a.log")
            b = procs.start("b", ["sh", "-c", "echo started; exec sleep 30"], f"{d}/b.log")
            time.sleep(0.2)
            procs.stop_all()
            self.assertIsNotNone(a.poll())
            self.assertEqual(b.returncode, -signal.SIGTERM)
            with open(f"{d}/b.log") as f:
                self.assertEqual(f.read(), "started\n")

    def test_stop_kills_what_ignores_term(self):
        p = subprocess.Popen([sys.executable, "-c",
                              "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                              "print('ready', flush=True); time.sleep(30)"], stdout=subprocess.PIPE)
        p.stdout.readline()
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            common.stop_process(p, "stubborn", quiet_log(), grace=0.3)
        p.stdout.close()
        self.assertEqual(p.returncode, -signal.SIGKILL)
        self.assertIn("stubborn (pid", err.getvalue())

    def test_run_in_group_kills_the_whole_group(self):
        holder = []
        with tempfile.NamedTemporaryFile("r") as f:
            with self.assertRaises(subprocess.TimeoutExpired):
                common.run_in_group(["sh", "-c", f"sleep 30 & echo $! > {f.name}; wait"], 0.5, holder=holder)
            child = int(f.read().strip())
        self.assertEqual(holder, [])
        time.sleep(0.1)
        self.assertFalse(running(child), "the group's other process outlived the timeout")

    def test_run_in_group_result(self):
        p = common.run_in_group(["sh", "-c", "echo out; echo err >&2; exit 3"], 10,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (3, "out\n", "err\n"))


def running(pid):
    """True while pid exists and is not a zombie waiting for its (new) parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class MainTest(unittest.TestCase):
    def setUp(self):
        self.handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}

    def tearDown(self):
        for s, h in self.handlers.items():
            signal.signal(s, h)

    def run_main(self, body):
        cleaned = []
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as cm:
            common.run_main(common.Log("t"), body, lambda: cleaned.append(True))
        self.assertEqual(cleaned, [True])
        return cm.exception.code, err.getvalue()

    def test_status_of_each_way_out(self):
        self.assertEqual(self.run_main(lambda: 0)[0], 0)

        def fatal():
            raise Fatal("no gateway")
        self.assertEqual(self.run_main(fatal), (1, "[t] ERROR: no gateway\n"))

        def term():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        self.assertEqual(self.run_main(term), (130, "[t] interrupted\n"))

        def bug():
            return {}["missing"]
        code, err = self.run_main(bug)
        self.assertEqual(code, 1)
        self.assertIn("KeyError", err)

    def test_deadline(self):
        def slow():
            common.set_deadline(common.Log("t"), 1)
            time.sleep(10)
        code, err = self.run_main(slow)
        self.assertEqual(code, 130)
        self.assertIn("[t] ERROR: deadline of 1s reached, aborting", err)


class GatewayCallsTest(unittest.TestCase):
    def test_login(self):
        with DummyServer({("POST", "/api/v1/auth/login"): (200, {"token": "tok"})}) as srv:
            self.assertEqual(common.login(srv.port), "tok")
            self.assertEqual(json.loads(srv.requests[0][3]), {"username": "admin", "password": "bench-admin-password"})
        with DummyServer({("POST", "/api/v1/auth/login"): (401, {"error": "bad"})}) as srv:
            with self.assertRaisesRegex(Fatal, r"HTTP 401"):
                common.login(srv.port)

    def test_put_file(self):
        import http.client
        with DummyServer({("PUT", "/api/v1/files/bench/a.bin"): (201, {}),
                          ("PUT", "/api/v1/files/bench/b.bin"): (507, b"full")}) as srv, \
                tempfile.NamedTemporaryFile() as f:
            f.write(b"x" * 5000)
            f.flush()
            conn = http.client.HTTPConnection("127.0.0.1", srv.port)
            common.put_file(conn, "bench/a.bin", f.name, "tok")
            method, path, headers, body = srv.requests[0]
            self.assertEqual((method, headers["Authorization"], body), ("PUT", "Bearer tok", b"x" * 5000))
            with self.assertRaisesRegex(Fatal, r"PUT bench/b.bin: HTTP 507"):
                common.put_file(conn, "bench/b.bin", f.name, "tok")
            conn.close()

    def test_put_parallel_one_connection_per_thread(self):
        routes = {("PUT", f"/api/v1/files/d/f{i}"): (201, {}) for i in range(40)}
        with DummyServer(routes) as srv:
            common.put_parallel(srv.port, range(40),
                                lambda conn, i: common.put(conn, f"d/f{i}", b"%d" % i, len(b"%d" % i), "tok"))
            got = sorted((path, body) for _m, path, _h, body in srv.requests)
            self.assertEqual(got, sorted((f"/api/v1/files/d/f{i}", b"%d" % i) for i in range(40)))
            routes[("PUT", "/api/v1/files/d/f7")] = (500, b"boom")
            with self.assertRaisesRegex(Fatal, r"PUT d/f7: HTTP 500 b'boom'"):
                common.put_parallel(srv.port, range(10), lambda conn, i: common.put(conn, f"d/f{i}", b"", 0, "tok"))

    def test_s3_store_flags(self):
        self.assertEqual(common.s3_store("http://127.0.0.1:9", "b"),
                         ["--store", "s3", "--s3-endpoint", "http://127.0.0.1:9", "--s3-bucket", "b",
                          "--s3-region", "us-east-1"])


if __name__ == "__main__":
    unittest.main()
