"""Unit tests of infra/bench/mount.py: settings, fio and log parsing, the goals and the report,
the RSS sampler, the copy check."""

import os
import tempfile
import threading
import time
import unittest

from infra.bench import mount
from infra.bench.common import Fatal

FIO = """note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "r",
      "error" : 0,
      "read" : {
        "iops" : 51234.56789,
        "clat_ns" : {"mean" : 73456.2, "percentile" : {"99.000000" : 183296, "99.900000" : 400000}}
      }
    }
  ]
}
"""


def rec(step, **kw):
    return dict({"step": step, "wall_s": 1.0, "cpu_s": {"nimbus": 0.5}, "start_epoch": 0}, **kw)


META = {"large_mib": 1024, "write_count": 1000, "dir_count": 10000, "cache_mem": "128MiB"}


def sample_records():
    return [
        rec("nimbus-cold-seq", mb_s=300.0), rec("rclone-cold-seq", mb_s=200.0), rec("s3fs-cold-seq", mb_s=400.0),
        rec("nimbus-warm-seq", mb_s=900.0), rec("bindfs-warm-seq", mb_s=1000.0), rec("bindfs-mt-warm-seq", mb_s=1500.0),
        rec("nimbus-warm-seq", mb_s=1100.0), rec("bindfs-warm-seq", mb_s=1000.0), rec("bindfs-mt-warm-seq", mb_s=1500.0),
        rec("nimbus-warm-seq", mb_s=700.0), rec("bindfs-warm-seq", mb_s=1200.0), rec("bindfs-mt-warm-seq", mb_s=1500.0),
        rec("nimbus-warm-rand", iops=30000.0, drive_cache_delta={"hits": 12, "misses": 0, "capacity_bytes": 9}),
        rec("bindfs-warm-rand", iops=50000.0), rec("bindfs-mt-warm-rand", iops=60000.0),
        rec("nimbus-ls", median_s=0.05), rec("bindfs-ls", median_s=0.02),
        dict(rec("nimbus-rename-dir"), wall_s=0.4),
        dict(rec("nimbus-write", on_server_s=2.5, listed_after_loop=990), wall_s=2.0),
        dict(rec("rclone-write", on_server_s=9.0), wall_s=5.0),
    ]


RSS = {("nimbus", "nimbus-warm-seq"): 150 * 1024, ("nimbus", "idle"): 90 * 1024,
       ("nimbus.Threads", "nimbus-warm-seq"): 23, ("gateway", "idle"): 300 * 1024}


class ConfigTest(unittest.TestCase):
    def test_defaults(self):
        c = mount.config([], {})
        self.assertEqual((c["large_mib"], c["dir_count"], c["write_count"], c["ls_reps"], c["deadline"]),
                         (1024, 10000, 1000, 5, 1200))
        self.assertEqual((c["runtime"], c["reps"], c["cache_mem"], c["cache_size"]), (15, 3, "128MiB", "4GiB"))
        self.assertEqual((c["gateway_cache"], c["direct_reads"], c["drive_env"], c["build"], c["keep"], c["json"]),
                         (False, False, {}, True, False, ""))

    def test_binaries_given_mean_no_build(self):
        self.assertFalse(mount.config([], {"NIMBUS_CLI_BIN": "/x/nimbus"})["build"])
        self.assertFalse(mount.config(["--no-build"], {})["build"])

    def test_options_and_environment(self):
        c = mount.config(["--runtime", "2", "--reps", "1", "--json", "/tmp/m.json"],
                         {"BENCH_LS_REPS": "2", "BENCH_GATEWAY_CACHE": "1", "BENCH_DIRECT_READS": "1",
                          "BENCH_DRIVE_ENV": "MALLOC_ARENA_MAX=2 RUST_LOG=debug"})
        self.assertEqual((c["runtime"], c["reps"], c["ls_reps"], c["json"]), (2, 1, 2, "/tmp/m.json"))
        self.assertTrue(c["gateway_cache"])
        self.assertTrue(c["direct_reads"])
        self.assertEqual(c["drive_env"], {"MALLOC_ARENA_MAX": "2", "RUST_LOG": "debug"})

    def test_bad_settings(self):
        with self.assertRaisesRegex(Fatal, r"^REPS must be a positive integer \(got 'x'\)$"):
            mount.config(["--reps", "x"], {})
        with self.assertRaisesRegex(Fatal, r"^--reps needs a count$"):
            mount.config(["--reps"], {})
        with self.assertRaisesRegex(Fatal, r"BENCH_DRIVE_ENV: 'oops' is not NAME=VALUE"):
            mount.config([], {"BENCH_DRIVE_ENV": "A=1 oops"})


class ParseTest(unittest.TestCase):
    def test_fio_after_notes(self):
        self.assertEqual(mount.parse_fio(FIO), {"iops": 51234.6, "errors": 0, "clat_mean_us": 73.5,
                                                "clat_p99_us": 183.3})

    def test_drive_warnings(self):
        log = ("2026-11-23T10:00:00Z  INFO nimbus_mount: mounted\n"
               "\x1b[2m2026-11-23T10:00:01Z\x1b[0m \x1b[33m WARN\x1b[0m lookup INodeNo(17) failed\n"
               "2026-11-23T10:00:02Z  WARN lookup INodeNo(4242) failed\n"
               "2026-11-23T10:00:03Z ERROR upload of " + "x" * 300 + "\n")
        n, top = mount.warning_summary(log)
        self.assertEqual(n, 3)
        self.assertEqual(top[0], (2, "WARN lookup INodeNo(N) failed"))
        self.assertEqual(top[1][0], 1)
        self.assertEqual(len(top[1][1]), 160)

    def test_read_rss_keeps_the_maximum(self):
        with tempfile.NamedTemporaryFile("w") as f:
            f.write("idle nimbus 1000\nnimbus-cold-seq nimbus 5000\nidle nimbus 3000\nidle gateway 7\n")
            f.flush()
            self.assertEqual(mount.read_rss(f.name), {("nimbus", "idle"): 3000, ("nimbus", "nimbus-cold-seq"): 5000,
                                                      ("gateway", "idle"): 7})
        self.assertEqual(mount.read_rss("/nonexistent"), {})

    def test_counters_delta(self):
        self.assertEqual(mount.counters_delta({"hits": 3, "used_bytes": 10}, {"hits": 5, "used_bytes": 4, "dir": "x",
                                                                              "new": 1}),
                         {"hits": 2, "used_bytes": -6, "new": 1})
        self.assertIsNone(mount.counters_delta(None, {"hits": 1}))


class ReportTest(unittest.TestCase):
    def test_goal_rows(self):
        doc = mount.build_report(dict(META), sample_records(), RSS, [])
        rows = {r["metric"]: r for r in doc["goals"]}
        warm = rows["warm seq read 1 GiB (MB/s)"]
        self.assertEqual((warm["nimbus"], warm["peer"], warm["ratio"], warm["result"]), (900.0, 1000.0, 0.9, "PASS"))
        cold = rows["cold seq read 1 GiB vs s3fs (MB/s)"]
        self.assertEqual((cold["ratio"], cold["result"]), (0.75, "MISS"))
        self.assertEqual(rows["cold seq read 1 GiB vs rclone (MB/s)"]["result"], "PASS")
        rand = rows["warm 4 KiB random read, 4 jobs (IOPS)"]
        self.assertEqual((rand["ratio"], rand["result"]), (0.6, "MISS"))
        write = rows["write 1000 x 4 KiB files (s, loop wall time)"]
        self.assertEqual((write["nimbus"], write["peer"], write["ratio"], write["result"]), (2.0, 5.0, 2.5, "PASS"))
        self.assertIn("nimbus 2.5 s (990 listed when the loop ended), rclone 9.0 s", write["note"])
        ls = rows["ls -l of a warm 10000-entry dir (s)"]
        self.assertEqual((ls["ratio"], ls["result"]), (2.5, "MISS"))
        self.assertEqual(rows["rename a dir of 10000 files (s)"]["result"], "PASS")
        rss = rows["drive VmRSS max during the steps (MiB)"]
        self.assertEqual((rss["nimbus"], rss["result"], rss["note"]), (150.0, "PASS", "--cache-mem 128MiB"))
        self.assertEqual(doc["reference"], [
            {"what": "bindfs-mt-warm-seq (mb_s)", "value": 1500.0, "nimbus_ratio": 0.6},
            {"what": "bindfs-mt-warm-rand (iops)", "value": 60000.0, "nimbus_ratio": 0.5}])
        self.assertEqual(doc["rss_max_mib"], {"nimbus/nimbus-warm-seq": 150.0, "nimbus/idle": 90.0,
                                              "gateway/idle": 300.0})
        self.assertEqual(doc["drive_threads_max"], 23)
        self.assertEqual(set(doc), {"meta", "goals", "reference", "steps", "rss_max_mib", "drive_threads_max",
                                    "failed_steps"})

    def test_missing_steps_are_errors(self):
        meta = dict(META, large_mib=64)
        doc = mount.build_report(meta, [rec("nimbus-cold-seq", mb_s=300.0)], {}, ["rclone-mount", "s3fs-mount"])
        results = {r["metric"]: r["result"] for r in doc["goals"]}
        self.assertEqual(results["cold seq read 64 MiB vs rclone (MB/s)"], "ERROR")
        self.assertEqual(results["rename a dir of 10000 files (s)"], "ERROR")
        self.assertEqual(results["drive VmRSS max during the steps (MiB)"], "ERROR")
        self.assertEqual(doc["failed_steps"], ["rclone-mount", "s3fs-mount"])

    def test_format(self):
        doc = mount.build_report(dict(META), sample_records(), RSS, ["s3fs-verify"])
        text = mount.format_report(doc, RSS)
        lines = text.splitlines()
        self.assertEqual(lines[1].split(), ["metric", "nimbus", "peer", "ratio", "goal", "result"])
        self.assertEqual(set(lines[2]), {"-"})
        self.assertIn("warm seq read 1 GiB (MB/s)                        900.0   bindfs 1,000.0   0.900  "
                      ">= 0.8x                    PASS", text)
        self.assertIn("MISS (measured 0.750)", text)
        self.assertIn("  writes: on the server (from the loop start): nimbus 2.5 s", text)
        self.assertIn("  reference: bindfs-mt-warm-seq (mb_s): 1,500.0 (nimbus / it: 0.600)", text)
        self.assertIn("  nimbus-warm-rand              1.000 s  cpu {'nimbus': 0.5}  drive: hits=12", text)
        self.assertIn("  nimbus           idle 90, nimbus-warm-seq 150", text)
        self.assertIn("  nimbus.Threads   nimbus-warm-seq 23", text)
        self.assertEqual(lines[-1], "steps that failed to run: s3fs-verify")

    def test_judge_and_fmt(self):
        self.assertEqual(mount.judge(None, 1), "ERROR")
        self.assertEqual(mount.judge(1.0, 1.0), "PASS")
        self.assertEqual(mount.judge(2.1, 2.0, higher_is_better=False), "MISS")
        self.assertEqual((mount.fmt(None), mount.fmt(1.23456), mount.fmt(12345.67)), ("-", "1.235", "12,345.7"))
        self.assertIsNone(mount.quotient(0.0, 5))
        self.assertEqual(mount.quotient(1, 4), 0.25)


class SamplerTest(unittest.TestCase):
    def test_samples_name_the_step(self):
        watch = mount.Watch()
        watch.add("nimbus", os.getpid())
        watch.add("gone", 2**22 + 1)   # above pid_max's default: never a live process
        stop = threading.Event()
        with tempfile.TemporaryDirectory() as d:
            t = threading.Thread(target=mount.sampler, args=(watch, f"{d}/rss.txt", stop))
            t.start()
            time.sleep(0.1)
            watch.step = "nimbus-warm-seq"
            time.sleep(0.4)
            stop.set()
            t.join()
            rss = mount.read_rss(f"{d}/rss.txt")
        names = {n for n, _ in rss}
        self.assertEqual(names, {"nimbus", "nimbus.RssAnon", "nimbus.RssFile", "nimbus.Threads"})
        self.assertGreater(rss[("nimbus", "idle")], 1000)
        self.assertIn(("nimbus", "nimbus-warm-seq"), rss)
        self.assertGreaterEqual(rss[("nimbus.Threads", "nimbus-warm-seq")], 2)

    def test_cpu_snapshot(self):
        watch = mount.Watch()
        watch.add("me", os.getpid())
        self.assertGreater(watch.cpu_snapshot()["me"], 0)


class VerifyTest(unittest.TestCase):
    def test_copy_check(self):
        with tempfile.TemporaryDirectory() as d:
            data = os.urandom(3 << 20)
            for name, body in (("orig", data), ("same", data), ("short", data[:-1]),
                               ("changed", data[:-10] + bytes(10))):
                with open(f"{d}/{name}", "wb") as f:
                    f.write(body)
            import contextlib
            import io
            with contextlib.redirect_stderr(io.StringIO()) as err:
                mount.verify_copy(f"{d}/orig", f"{d}/same", "nimbus")
            self.assertEqual(err.getvalue(), "nimbus: same bytes as the original (8 pieces of 1 MiB compared)\n")
            with self.assertRaisesRegex(mount.StepError, r"has 3145727 bytes, the original 3145728"):
                mount.verify_copy(f"{d}/orig", f"{d}/short", "s3fs")
            with self.assertRaisesRegex(mount.StepError, r"differs from the original at offset 2097152"):
                mount.verify_copy(f"{d}/orig", f"{d}/changed", "rclone")


if __name__ == "__main__":
    unittest.main()
