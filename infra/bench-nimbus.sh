#!/usr/bin/env bash
# infra/bench-nimbus.sh — one `nimbus bench` run with every target, as docs/BENCHMARKS.md shows.
#
#   infra/bench-nimbus.sh [--preset quick|full] [--out DIR] [--no-build]
#
# Installs what is missing (fuse3 with apt, boto3 with pip), then runs infra/bench/nimbus.py: a
# private MinIO, a release gateway on SQLite + that MinIO with its SSD cache, a FUSE mount of the
# admin's space and the local disk as targets of `nimbus bench` (preset `full` by default); the
# report (JSON, HTML, table) is copied to --out (default ./bench-report). `--help` says more.
set -euo pipefail

BENCH_TAG=bench-nimbus
. "$(dirname "${BASH_SOURCE[0]}")/bench/install.sh"
bench_help_first nimbus "$@"
bench_apt fusermount3:fuse3
bench_boto3 "creates the MinIO buckets"
bench_run nimbus "$@"
