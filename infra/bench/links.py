"""infra/bench-links.sh — downloads through a public link against the API, and folder zips.

  infra/bench-links.sh [--size-mib N] [--rounds N] [--gateway BIN] [--json FILE]

Starts MinIO and a release gateway on it (127.0.0.1, free ports; SQLite, the gateway's default
cache settings with its cache directory in a temp dir), uploads one file of N MiB (default
1024) of random bytes, and a folder of 16 files that are its 16 slices (the same blocks, so
the cache holds the same data for every phase). Then, after one warm-up of each, ROUNDS
rounds (default 3) of three downloads with curl, in a rotating order:

  api   GET /api/v1/files/bench/big.bin with the bearer token
  link  GET /s/{token}/download of a view link on that file (no account)
  zip   GET /s/{token}/download of a view link on the folder (the zip stream)

Prints per phase the median bytes/s, the gateway's CPU seconds per GiB and its peak RSS while
the phase ran (sampled from /proc every 20 ms), the ratios link/api and zip/api, and the RSS
the uploads left (the cache's memory tier holds their blocks) to read the peaks against.
The gateway is $NIMBUS_GATEWAY_BIN, else $CARGO_TARGET_DIR/release/nimbus-gateway (default
target dir /var/cache/nimbus/target). Loopback only; every step is bounded in time.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading

from . import common

log = common.Log("bench-links")
PHASES = ("api", "link", "zip")
SLICES = 16
GIB = 1 << 30


def order_of(round_no):
    """The phases of round `round_no`, rotated so that no phase always runs first (first
    runs find the page cache and the cache's memory tier as the previous phase left them)."""
    k = round_no % len(PHASES)
    return PHASES[k:] + PHASES[:k]


def summarize(samples):
    """{phase: [{"bytes", "seconds", "cpu", "rss_kib"}, ...]} -> {phase: {"mb_s" (median, 10^6
    bytes per second), "cpu_s_per_gib" (median), "peak_rss_mib", "runs"}}, plus the ratios
    "link_vs_api" and "zip_vs_api" of the median throughputs."""
    out = {}
    for phase, runs in samples.items():
        rates = [r["bytes"] / r["seconds"] / 1e6 for r in runs]
        cpu = [r["cpu"] / (r["bytes"] / GIB) for r in runs]
        out[phase] = {
            "mb_s": round(statistics.median(rates), 1),
            "cpu_s_per_gib": round(statistics.median(cpu), 3),
            "peak_rss_mib": round(max(r["rss_kib"] for r in runs) / 1024, 1),
            "runs": len(runs),
        }
    for phase in ("link", "zip"):
        if phase in out and "api" in out:
            out[f"{phase}_vs_api"] = round(out[phase]["mb_s"] / out["api"]["mb_s"], 3)
    return out


def format_report(summary, size_mib):
    lines = [f"1 file of {size_mib} MiB, and a folder of {SLICES} files of {size_mib // SLICES} MiB as a zip "
             f"(median of {summary['api']['runs']} runs)",
             f"{'phase':6} {'MB/s':>8} {'CPU s/GiB':>10} {'peak RSS MiB':>13}"]
    for phase in PHASES:
        s = summary[phase]
        lines.append(f"{phase:6} {s['mb_s']:8.1f} {s['cpu_s_per_gib']:10.3f} {s['peak_rss_mib']:13.1f}")
    lines.append(f"link / api: {summary['link_vs_api']:.3f}   zip / api: {summary['zip_vs_api']:.3f}")
    if "rss_before_mib" in summary:
        lines.append(f"gateway RSS after the uploads, before any download: {summary['rss_before_mib']:.1f} MiB")
    return "\n".join(lines)


class RssPeak:
    """The highest VmRSS of a process while it is watched (a thread samples it every 20 ms)."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, 0, threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)

    def watch(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, common.proc_status(self.pid, ["VmRSS"]).get("VmRSS", 0))
            self.stop.wait(0.02)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_):
        self.stop.set()
        self.thread.join()


def curl_get(url, headers=(), timeout=600):
    """Downloads url to /dev/null with curl: (bytes, seconds). Fatal on an HTTP error."""
    cmd = ["curl", "-sS", "-o", "/dev/null", "--max-time", str(timeout), "-w", "%{http_code} %{size_download} %{time_total}"]
    for h in headers:
        cmd += ["-H", h]
    out = subprocess.run([*cmd, url], capture_output=True, text=True, timeout=timeout + 30)
    parts = out.stdout.split()
    if out.returncode != 0 or len(parts) != 3 or parts[0] != "200":
        raise common.Fatal(f"GET {url}: curl {out.returncode} {out.stdout!r} {out.stderr[-300:]!r}")
    return int(parts[1]), float(parts[2])


class Bench:
    def __init__(self, gateway, size_mib, rounds, json_out):
        self.gateway, self.size_mib, self.rounds, self.json_out = gateway, size_mib, rounds, json_out
        self.tmp = common.make_temp_dir("nimbus-bench-links.")
        self.procs = common.Procs(log)

    def run(self):
        common.set_deadline(log, 1800)
        minio_bin = common.minio_bin()
        common.require_executable(minio_bin, "; run infra/install-deps.sh first")
        t = self.tmp
        minio_port, console_port, port = common.free_port(), common.free_port(), common.free_port()
        common.start_minio(self.procs, minio_bin, f"{t}/minio", minio_port, console_port, f"{t}/minio.log")
        minio_url = f"http://127.0.0.1:{minio_port}"
        gw = common.start_gateway(self.procs, self.gateway, port, f"{t}/data",
                                  [*common.s3_store(minio_url, "nimbus-links"), "--cache-dir", f"{t}/cache"],
                                  f"{t}/gw.log")
        token = common.login(port)
        urls = self.upload(port, token)
        log(f"gateway {common.gateway_info(port)}")

        def once(phase):
            headers = [f"Authorization: Bearer {token}"] if phase == "api" else []
            before = common.cpu_seconds(gw.pid)
            with RssPeak(gw.pid) as rss:
                size, secs = curl_get(urls[phase], headers)
            return {"bytes": size, "seconds": secs, "cpu": common.cpu_seconds(gw.pid) - before, "rss_kib": rss.peak}

        # What the uploads left (the cache's memory tier holds their blocks): the downloads'
        # peaks are read against it.
        rss_before = round(common.proc_status(gw.pid, ["VmRSS"]).get("VmRSS", 0) / 1024, 1)
        for phase in PHASES:
            log(f"warm-up: {phase} {once(phase)}")
        samples = {p: [] for p in PHASES}
        for r in range(self.rounds):
            for phase in order_of(r):
                s = once(phase)
                log(f"round {r + 1}: {phase} {s['bytes'] / s['seconds'] / 1e6:.1f} MB/s, RSS {s['rss_kib'] // 1024} MiB")
                samples[phase].append(s)
        summary = summarize(samples)
        summary["rss_before_mib"] = rss_before
        print(format_report(summary, self.size_mib), flush=True)
        if self.json_out:
            doc = {"when": common.utc_now_iso(), "host": common.host_meta(), "size_mib": self.size_mib,
                   "rev": common.git_rev(["gateway", "infra/bench"]), "summary": summary, "samples": samples}
            with open(self.json_out, "w") as f:
                json.dump(doc, f, indent=2)
        return 0

    def upload(self, port, token):
        """The file, its slices as a folder, and a view link on each: {phase: url}."""
        import http.client
        size = self.size_mib << 20
        src = f"{self.tmp}/big.bin"
        with open(src, "wb") as f:
            for _ in range(self.size_mib):
                f.write(os.urandom(1 << 20))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        common.put_file(conn, "bench/big.bin", src, token)
        part = size // SLICES
        with open(src, "rb") as f:
            for i in range(SLICES):
                common.put(conn, f"bench/folder/part-{i:02}.bin", f.read(part), part, token)
        conn.close()
        os.remove(src)
        links = {}
        for phase, path in (("link", "/bench/big.bin"), ("zip", "/bench/folder")):
            st, body = common.http_json(port, "POST", "/api/v1/links", {"path": path, "mode": "view"}, token)
            if st != 201:
                raise common.Fatal(f"POST /api/v1/links {path}: {st} {body}")
            links[phase] = f"http://127.0.0.1:{port}/s/{body['token']}/download"
        return {"api": f"http://127.0.0.1:{port}/api/v1/files/bench/big.bin", **links}

    def cleanup(self):
        self.procs.stop_all()
        common.remove_tree(self.tmp)


def main(argv=None):
    p = argparse.ArgumentParser(prog="infra/bench-links.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-mib", type=int, default=1024, help="the file's size in MiB (default 1024)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds (default 3)")
    p.add_argument("--gateway", help="gateway binary")
    p.add_argument("--json", help="also write the figures and every sample to this file")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if a.size_mib < SLICES or a.size_mib % SLICES or a.rounds < 1:
        p.error(f"--size-mib must be a multiple of {SLICES}, and --rounds at least 1")
    gateway = a.gateway or os.environ.get("NIMBUS_GATEWAY_BIN") or f"{common.cargo_target_dir()}/release/nimbus-gateway"
    if not os.access(gateway, os.X_OK):
        print(f"no gateway binary at {gateway}: cargo build --release -p nimbus-gateway, or pass --gateway",
              file=sys.stderr)
        sys.exit(2)
    common.run_bench(log, lambda: Bench(gateway, a.size_mib, a.rounds, a.json))


if __name__ == "__main__":
    main()
