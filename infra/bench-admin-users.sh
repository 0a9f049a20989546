#!/usr/bin/env bash
# infra/bench-admin-users.sh — is the admin user list still fast at 10,000 users?
#
#   infra/bench-admin-users.sh [--users N] [--gateway BIN]
#
# Runs infra/bench/admin_users.py: a gateway on SQLite (and on PostgreSQL when
# NIMBUS_BENCH_PG_URL names a database it may reset) times the console's calls with 100 users,
# then with N (default 10000) added straight into the database; median, p95 and the ratio per
# call. `--help` says more; docs/BENCHMARKS.md has a run.
set -euo pipefail

BENCH_TAG=bench-admin-users
. "$(dirname "${BASH_SOURCE[0]}")/bench/install.sh"
bench_run admin_users "$@"
