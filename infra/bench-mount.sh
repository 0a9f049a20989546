#!/usr/bin/env bash
# infra/bench-mount.sh — the drive (`nimbus mount`) against bindfs, rclone mount and s3fs.
#
#   infra/bench-mount.sh [--json FILE] [--runtime SECS] [--reps N] [--keep] [--no-build]
#
# Installs what the benchmark needs and is missing (bindfs, rclone, s3fs, fio and fuse3 with apt,
# boto3 with pip), then runs it: infra/bench/mount.py, which builds the gateway and the CLI
# (release), starts MinIO, the gateway, the drive and the FUSE peers, runs the measured steps and
# prints the table and the goals' PASS/MISS. Run it as root (drop_caches, FUSE mounts).
# `--help` prints its options and environment (BENCH_*, NIMBUS_GATEWAY_BIN, NIMBUS_CLI_BIN,
# NIMBUS_MINIO_BIN, CARGO_TARGET_DIR, TMPDIR); docs/BENCHMARKS.md describes the run and its results.
set -euo pipefail

BENCH_TAG=bench-mount
. "$(dirname "${BASH_SOURCE[0]}")/bench/install.sh"
bench_help_first mount "$@"
bench_apt bindfs rclone s3fs fio fusermount3:fuse3
bench_boto3 "uploads to MinIO, counts objects"
bench_run mount "$@"
