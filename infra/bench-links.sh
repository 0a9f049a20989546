#!/usr/bin/env bash
# infra/bench-links.sh — a 1 GiB download through a public link against the API, and a folder
# of the same bytes as a zip stream: bytes/s, the gateway's CPU per GiB and its peak RSS.
#
#   infra/bench-links.sh [--size-mib N] [--rounds N] [--gateway BIN] [--json FILE]
#
# Runs infra/bench/links.py (MinIO and a release gateway on loopback, curl as the client).
# `--help` says more; docs/BENCHMARKS.md has a run.
set -euo pipefail

BENCH_TAG=bench-links
. "$(dirname "${BASH_SOURCE[0]}")/bench/install.sh"
bench_help_first links "$@"
bench_apt curl
bench_run links "$@"
