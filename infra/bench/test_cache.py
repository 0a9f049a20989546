"""Unit tests of infra/bench/cache.py: settings, wrk output, ratios, the report, the probe."""

import contextlib
import io
import json
import os
import tempfile
import unittest

from infra.bench import cache
from infra.bench.common import Fatal
from infra.bench.test_common import DummyServer

WRK = """Running 10s test @ http://127.0.0.1:41234
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.63ms    5.23ms  81.10ms   97.12%
    Req/Sec    31.43k     3.21k   38.10k    70.00%
  Latency Distribution
     50%  411.00us
     75%  612.00us
     90%    1.01ms
     99%   52.32ms
  624790 requests in 10.00s, 2.53GB read
Requests/sec:  62479.00
Transfer/sec:    259.20MB
"""

WRK_ERRORS = """Running 10s test @ http://127.0.0.1:41234
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    11.34ms    2.00ms   1.20s    90.00%
  Latency Distribution
     99%    1.20s
  28360 requests in 10.00s, 118.00MB read
  Socket errors: connect 0, read 3, write 0, timeout 1
  Non-2xx or 3xx responses: 12
Requests/sec:   2836.00
Transfer/sec:     11.80MB
"""

RUNS = ["4k-nginx", "4k-minio", "4k-minio-signed", "4k-gateway-warm", "4k-gateway-bypass",
        "1m-nginx", "1m-minio", "1m-minio-signed", "1m-gateway-warm", "1m-gateway-bypass",
        "range-nginx", "range-gateway-warm"]


def run(rps, rss=None, non2xx=0):
    r = {"rps": rps, "transfer_bytes_per_sec": rps * 4096, "requests": int(rps * 10), "non_2xx_3xx": non2xx,
         "socket_errors": {}, "latency_avg_ms": 1.0, "latency_p99_ms": 3.0}
    if rss is not None:
        r["gateway_rss_max_mib"] = rss
    return r


def sample_runs():
    rps = {"4k-nginx": 60000, "4k-minio": 7000, "4k-minio-signed": 5600, "4k-gateway-warm": 42000,
           "4k-gateway-bypass": 2800, "1m-nginx": 2700, "1m-minio": 1500, "1m-minio-signed": 1200,
           "1m-gateway-warm": 3000, "1m-gateway-bypass": 700, "range-nginx": 32000, "range-gateway-warm": 19200}
    runs = {n: run(v, rss=600.0 if "gateway" in n else None) for n, v in rps.items()}
    # CPU seconds over each 10 s run: 4 KiB bypass 28,000 requests, 1 MiB bypass 7,000.
    runs["4k-gateway-bypass"]["cpu_s"] = {"gateway": 4.2, "minio": 10.5}
    runs["1m-gateway-bypass"]["cpu_s"] = {"gateway": 6.3, "minio": 9.0}
    runs["4k-minio"]["cpu_s"] = {"gateway": 0.01, "minio": 14.0}
    return runs


class ConfigTest(unittest.TestCase):
    def test_defaults(self):
        c = cache.config([], {})
        self.assertEqual((c["small_count"], c["medium_count"], c["large_mib"], c["threads"], c["conns"]),
                         (1000, 64, 1024, 2, 32))
        self.assertEqual((c["duration"], c["warmup"], c["deadline"]), (10, 3, 900))
        self.assertEqual((c["cache_mem"], c["cache_size"], c["json"], c["keep"], c["build"], c["perf"]),
                         ("512MiB", "4GiB", "", False, True, False))

    def test_options_and_environment(self):
        c = cache.config(["--json", "r.json", "--duration", "2", "--warmup", "1", "--keep", "--no-build"],
                         {"BENCH_SMALL_COUNT": "50", "BENCH_CACHE_MEM": "64MiB", "BENCH_PERF": "1",
                          "NIMBUS_GATEWAY_BIN": "/x/gw"})
        self.assertEqual(c["json"], os.path.join(os.getcwd(), "r.json"))
        self.assertEqual((c["duration"], c["warmup"], c["small_count"], c["cache_mem"]), (2, 1, 50, "64MiB"))
        self.assertEqual((c["keep"], c["build"], c["perf"], c["gateway_bin"]), (True, False, True, "/x/gw"))

    def test_bad_numbers_are_named(self):
        with self.assertRaisesRegex(Fatal, r"^SMALL_COUNT must be a positive integer \(got 'many'\)$"):
            cache.config([], {"BENCH_SMALL_COUNT": "many"})
        with self.assertRaisesRegex(Fatal, r"^DURATION must be a positive integer \(got '0'\)$"):
            cache.config(["--duration", "0"], {})


class WrkTest(unittest.TestCase):
    def test_parse(self):
        r = cache.parse_wrk(WRK)
        self.assertEqual(r["rps"], 62479.0)
        self.assertAlmostEqual(r["transfer_bytes_per_sec"], 259.2 * 2**20)
        self.assertEqual(r["requests"], 624790)
        self.assertAlmostEqual(r["latency_avg_ms"], 1.63)
        self.assertAlmostEqual(r["latency_p99_ms"], 52.32)
        self.assertEqual((r["non_2xx_3xx"], r["socket_errors"]), (0, {}))

    def test_parse_errors_and_units(self):
        r = cache.parse_wrk(WRK_ERRORS)
        self.assertEqual(r["non_2xx_3xx"], 12)
        self.assertEqual(r["socket_errors"], {"connect": 0, "read": 3, "write": 0, "timeout": 1})
        self.assertAlmostEqual(r["latency_avg_ms"], 11.34)
        self.assertAlmostEqual(r["latency_p99_ms"], 1200.0)

    def test_parse_nothing(self):
        r = cache.parse_wrk("unable to connect to 127.0.0.1:1 Connection refused\n")
        self.assertEqual((r["rps"], r["requests"], r["latency_avg_ms"]), (None, None, None))

    def test_load_runs_with_rss(self):
        with tempfile.TemporaryDirectory() as d:
            for name, text in (("4k-nginx", WRK), ("4k-gateway-warm", WRK)):
                with open(f"{d}/{name}.wrk", "w") as f:
                    f.write(text)
            with open(f"{d}/4k-gateway-warm.rss", "w") as f:
                f.write("512000\n634000\n600000\n")
            runs = cache.load_runs(d, ["4k-nginx", "4k-gateway-warm"])
        self.assertNotIn("gateway_rss_max_mib", runs["4k-nginx"])
        self.assertEqual(runs["4k-gateway-warm"]["gateway_rss_max_mib"], 619.1)


class ReportTest(unittest.TestCase):
    META = {"cache_mem_mib": 512, "vmhwm_mib": 700.0, "runs": RUNS}

    def test_ratios_against_goals(self):
        doc = cache.analyse(sample_runs(), dict(self.META))
        by = {q["name"]: q for q in doc["ratios"]}
        hot = by["4KiB hot: gateway / nginx"]
        self.assertEqual((hot["value"], hot["goal"], hot["pass"], hot["valid"]), (0.7, 0.9, False, True))
        minio = by["4KiB hot: gateway / MinIO"]
        self.assertEqual((minio["value"], minio["pass"], minio["shortfall_pct"]), (6.0, True, 0.0))
        cpu4k = by["4KiB bypass: gateway CPU / MinIO CPU"]
        self.assertEqual((cpu4k["value"], cpu4k["goal"], cpu4k["pass"], cpu4k["shortfall_pct"]), (0.4, 0.35, False, 14.3))
        cpu1m = by["1MiB bypass: gateway CPU / MinIO CPU"]
        self.assertEqual((cpu1m["value"], cpu1m["pass"], cpu1m["at_most"]), (0.7, False, True))
        self.assertEqual(len(doc["ratios"]), 7)
        self.assertEqual(doc["runs"]["4k-gateway-bypass"]["cpu_us_per_request"], {"gateway": 150.0, "minio": 375.0})
        self.assertEqual(doc["runs"]["4k-minio"]["cpu_us_per_request"]["minio"], 200.0)
        refs = {q["name"]: q["value"] for q in doc["reference_ratios"]}
        self.assertEqual(refs["4KiB: MinIO signed / MinIO anonymous"], 0.8)
        self.assertEqual(refs["4KiB bypass: gateway / MinIO signed"], 0.5)
        self.assertEqual(refs["4KiB bypass: gateway / MinIO"], 0.4)
        self.assertEqual(doc["rss"], {"max_vmrss_mib_during_runs": 600.0, "vmhwm_mib_whole_life": 700.0,
                                      "limit_mib": 662, "pass": True, "over_by_mib": 0.0})
        self.assertEqual(doc["errors"], [])
        self.assertEqual(set(doc), {"meta", "runs", "ratios", "reference_ratios", "rss", "errors"})

    def test_cpu_goals_need_both_figures(self):
        runs = sample_runs()
        runs["1m-gateway-bypass"]["cpu_s"] = {"gateway": 6.3, "minio": None}
        doc = cache.analyse(runs, dict(self.META))
        by = {q["name"]: q for q in doc["ratios"]}
        self.assertEqual((by["1MiB bypass: gateway CPU / MinIO CPU"]["valid"],
                          by["1MiB bypass: gateway CPU / MinIO CPU"]["pass"]), (False, False))
        self.assertEqual(doc["errors"], ["1m-gateway-bypass: no CPU time measured for the gateway and MinIO"])

    def test_cpu_files_are_loaded(self):
        with tempfile.TemporaryDirectory() as d:
            with open(f"{d}/4k-gateway-bypass.wrk", "w") as f:
                f.write(WRK_ERRORS)
            with open(f"{d}/4k-gateway-bypass.cpu", "w") as f:
                json.dump({"gateway": 2.5, "minio": 7.0}, f)
            runs = cache.load_runs(d, ["4k-gateway-bypass"])
        self.assertEqual(runs["4k-gateway-bypass"]["cpu_s"], {"gateway": 2.5, "minio": 7.0})

    def test_a_run_with_errors_invalidates_its_ratios(self):
        runs = sample_runs()
        runs["4k-minio"]["non_2xx_3xx"] = 5
        runs["1m-nginx"]["socket_errors"] = {"connect": 0, "read": 2, "write": 0, "timeout": 0}
        runs["4k-gateway-warm"]["gateway_rss_max_mib"] = 700.0
        doc = cache.analyse(runs, dict(self.META))
        by = {q["name"]: q for q in doc["ratios"]}
        self.assertFalse(by["4KiB hot: gateway / MinIO"]["valid"])
        self.assertFalse(by["4KiB hot: gateway / MinIO"]["pass"])
        self.assertTrue(by["4KiB hot: gateway / nginx"]["valid"])
        self.assertEqual(doc["errors"], ["4k-minio: 5 non-2xx/3xx responses",
                                         "1m-nginx: socket errors {'read': 2}"])
        self.assertEqual((doc["rss"]["pass"], doc["rss"]["over_by_mib"]), (False, 38.0))

    def test_format(self):
        runs = sample_runs()
        runs["4k-minio"]["non_2xx_3xx"] = 5
        text = cache.format_report(cache.analyse(runs, dict(self.META)))
        lines = text.splitlines()
        self.assertEqual(lines[1].split(), ["run", "req/s", "MiB/s", "avg", "ms", "p99", "ms", "RSS", "MiB",
                                            "gw", "CPU", "us/req", "MinIO", "CPU", "us/req"])
        self.assertIn("4k-minio                   7000.0      27.3     1.00     3.00                                   200.0"
                      "  ERRORS (see below)", text)
        self.assertIn("4k-gateway-warm           42000.0     164.1     1.00     3.00    600.0", text)
        self.assertIn("4k-gateway-bypass          2800.0      10.9     1.00     3.00    600.0         150.0            375.0",
                      text)
        self.assertIn("4KiB hot: gateway / nginx                  0.700   >= 0.9  MISS (22.2% short)", text)
        self.assertIn("4KiB hot: gateway / MinIO                  6.000   >= 6.0  INVALID (a run behind it had errors",
                      text)
        self.assertIn("1MiB hot: gateway / nginx                  1.111   >= 0.8  PASS", text)
        self.assertIn("1MiB bypass: gateway CPU / MinIO CPU       0.700   <= 0.6  MISS (16.7% over)", text)
        self.assertIn("1MiB bypass: gateway / MinIO               0.467    (ref)  ", text)
        self.assertIn("1MiB: MinIO signed / MinIO anonymous       0.800    (ref)  ", text)
        self.assertIn("gateway VmRSS max under load (MiB)         600.0   <= 662  PASS", text)
        self.assertTrue(lines[-1].startswith("(gateway VmHWM over its whole life, uploads included: 700.0 MiB)"))

    def test_report_writes_json_and_says_whether_clean(self):
        with tempfile.TemporaryDirectory() as d:
            for name in RUNS:
                with open(f"{d}/{name}.wrk", "w") as f:
                    f.write(WRK_ERRORS if name == "1m-minio" else WRK)
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                ok = cache.report(d, dict(self.META), f"{d}/r.json")
            with open(f"{d}/r.json") as f:
                doc = json.load(f)
        self.assertFalse(ok)
        self.assertIn("ERRORS:\n  1m-minio: 12 non-2xx/3xx responses", err.getvalue())
        self.assertIn(f"JSON written to {d}/r.json", out.getvalue())
        self.assertEqual(list(doc["runs"]), RUNS)
        self.assertEqual(doc["meta"]["cache_mem_mib"], 512)


class LogTest(unittest.TestCase):
    def test_last_warn_and_error_lines(self):
        text = ("2026-11-23T10:00:00Z  INFO nimbus: listening on 127.0.0.1:1\n"
                "\x1b[2m2026-11-23T10:00:01Z\x1b[0m \x1b[33m WARN\x1b[0m store: slow\n"
                "2026-11-23T10:00:02Z ERROR tower_http: on_failure 500\n"
                "2026-11-23T10:00:03Z ERROR api: read failed\n"
                "2026-11-23T10:00:04Z  WARN cache: full\n")
        self.assertEqual(cache.log_errors(text, 2), ["2026-11-23T10:00:03Z ERROR api: read failed",
                                                     "2026-11-23T10:00:04Z  WARN cache: full"])
        self.assertEqual(cache.log_errors(text, 5)[0], "2026-11-23T10:00:01Z  WARN store: slow")


class ProbeTest(unittest.TestCase):
    def test_statuses_and_an_error_body(self):
        routes = {("GET", "/bench/a"): (200, b"a"), ("GET", "/bench/b"): (503, b"SlowDown")}
        with DummyServer(routes) as srv:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                cache.probe(srv.url, {"Authorization": "Bearer t"}, paths=["/bench/a", "/bench/b"])
        lines = err.getvalue().splitlines()
        self.assertRegex(lines[0], r"^  probe of 800 requests: statuses \{200: \d+, 503: \d+\}$")
        self.assertEqual(lines[1], "  HTTP 503: /bench/b : b'SlowDown'")
        self.assertTrue(all(r[2]["Authorization"] == "Bearer t" for r in srv.requests))

    def test_ranges(self):
        with DummyServer({("GET", "/large.bin"): (206, b"x")}) as srv:
            with contextlib.redirect_stderr(io.StringIO()):
                cache.probe(srv.url, {}, range_path="/large.bin", size=8 << 20)
        offs = [int(r[2]["Range"].split("=")[1].split("-")[0]) for r in srv.requests]
        self.assertEqual(len(offs), 800)
        self.assertTrue(all(o % 4096 == 0 and o < 8 << 20 for o in offs))

    def test_wrk_script_is_there(self):
        with open(cache.WRK_LUA) as f:
            text = f.read()
        for mode in ('"rotate"', '"range"'):
            self.assertIn(f"mode == {mode}", text)


if __name__ == "__main__":
    unittest.main()
