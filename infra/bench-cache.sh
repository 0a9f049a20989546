#!/usr/bin/env bash
# infra/bench-cache.sh — read throughput of the gateway's block cache against nginx and MinIO.
#
#   infra/bench-cache.sh [--json FILE] [--duration SECS] [--warmup SECS] [--keep] [--no-build]
#
# Installs what the benchmark needs and is missing (nginx and wrk with apt, boto3 with pip), then
# runs it: infra/bench/cache.py, which builds the gateway (release), starts nginx, MinIO and the
# gateway on 127.0.0.1, runs wrk against each and prints the table and the goals' PASS/MISS.
# `--help` prints its options and environment (BENCH_*, NIMBUS_GATEWAY_BIN, NIMBUS_MINIO_BIN,
# CARGO_TARGET_DIR, TMPDIR); docs/BENCHMARKS.md describes the run and its results.
set -euo pipefail

BENCH_TAG=bench
. "$(dirname "${BASH_SOURCE[0]}")/bench/install.sh"
bench_help_first cache "$@"
bench_apt nginx wrk
bench_boto3 "signs the MinIO uploads and the bucket policy"
bench_run cache "$@"
