"""infra/bench-nimbus.sh — one `nimbus bench` run with every target, as docs/BENCHMARKS.md shows:
a private MinIO, a release gateway on SQLite + that MinIO with its SSD cache, a FUSE mount of
the admin's space, and the local disk; then `nimbus bench` (preset `full` by default).

  infra/bench-nimbus.sh [--preset quick|full] [--out DIR] [--no-build]

Everything listens on 127.0.0.1 and lives in a temp dir removed at the end (the report is
copied to --out, default ./bench-report). Needs MinIO (infra/install-deps.sh) and fuse3.
Binaries from $CARGO_TARGET_DIR/release (default target dir /var/cache/nimbus/target).
"""

import argparse
import os
import shutil
import subprocess
import sys

from . import common

log = common.Log("bench-nimbus")
GATEWAY_BUCKET = "nimbus"
STORE_BUCKET = "nimbus-bench-store"   # `nimbus bench`'s store target writes and reads here


class Bench:
    def __init__(self, a):
        self.a = a
        self.tmp = common.make_temp_dir("nimbus-bench.")
        self.procs = common.Procs(log)
        self.drive = None

    def run(self):
        a, tmp = self.a, self.tmp
        target = common.cargo_target_dir()
        if a.build:
            common.cargo_build_release(log, ["nimbus-gateway", "nimbus-cli"])
        gateway, cli = f"{target}/release/nimbus-gateway", f"{target}/release/nimbus"
        for b in (gateway, cli):
            common.require_executable(b, " (build it, or drop --no-build)")
        common.require_boto3()
        for d in ("minio", "drive", "disk"):
            os.makedirs(f"{tmp}/{d}")
        minio_port, console_port, gw_port = (common.free_port() for _ in range(3))
        minio_url = f"http://127.0.0.1:{minio_port}"
        common.start_minio(self.procs, common.minio_bin(), f"{tmp}/minio", minio_port, console_port,
                           f"{tmp}/minio.log")
        s3 = common.s3client(minio_url)
        for bucket in (GATEWAY_BUCKET, STORE_BUCKET):
            s3.create_bucket(Bucket=bucket)
        common.start_gateway(self.procs, gateway, gw_port, f"{tmp}/gw",
                             [*common.s3_store(minio_url, GATEWAY_BUCKET), "--cache-size", "4GiB",
                              "--cache-mem", "256MiB"], f"{tmp}/gw.log", wait="/healthz")

        self.drive = common.Drive(log, cli, f"{tmp}/cli", f"{tmp}/drive")
        self.drive.login(f"http://127.0.0.1:{gw_port}")
        self.drive.mount(f"{tmp}/drive-cache")

        # `nimbus bench` reads the store directly with these credentials.
        env = {"AWS_ACCESS_KEY_ID": common.MINIO_USER, "AWS_SECRET_ACCESS_KEY": common.MINIO_SECRET,
               "AWS_REGION": "us-east-1"}
        argv = [cli, "bench", "--preset", a.preset, "--output", f"{tmp}/report", "--disk-dir", f"{tmp}/disk",
                "--mount", f"{tmp}/drive", "--s3-endpoint", minio_url, "--s3-bucket", STORE_BUCKET]
        rc = tee(argv, dict(os.environ, NIMBUS_CONFIG_DIR=f"{tmp}/cli", **env), f"{tmp}/table.txt")
        if rc != 0:
            raise common.Fatal(f"nimbus bench failed (exit status {rc})")
        os.makedirs(a.out, exist_ok=True)
        for f in (f"{tmp}/report/report.json", f"{tmp}/report/report.html", f"{tmp}/table.txt"):
            shutil.copy(f, a.out)
        print(f"report: {a.out}/report.html", flush=True)
        return 0

    def cleanup(self):
        if self.drive is not None:
            self.drive.unmount()
        self.procs.stop_all()
        if not any(m.startswith(self.tmp + "/") for m in common.mounts()):
            common.remove_tree(self.tmp)
        else:
            log(f"something is still mounted under {self.tmp}; not deleting it")


def tee(argv, env, path):
    """Runs argv with its stdout shown as it comes and also written to path; its exit status."""
    with open(path, "w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            out.write(line)
        return proc.wait()


def main(argv=None):
    p = argparse.ArgumentParser(prog="infra/bench-nimbus.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="full", help="nimbus bench preset: quick or full (default full)")
    p.add_argument("--out", default=os.path.join(os.getcwd(), "bench-report"),
                   help="where the report is copied (default ./bench-report)")
    p.add_argument("--no-build", dest="build", action="store_false", help="use the release binaries as they are")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    a.out = os.path.abspath(a.out)
    common.run_bench(log, lambda: Bench(a))


if __name__ == "__main__":
    main()
