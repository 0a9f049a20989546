#!/usr/bin/env bash
# infra/admin-ui.sh — install the admin console's npm packages and build it and the users' web
# app (the same Vite project: admin-ui/dist and admin-ui/dist-web), only when needed.
#
#   ./infra/admin-ui.sh          npm ci (when node_modules is missing or older than the lock),
#                                npm run build (when dist is missing or older than its sources)
#   ./infra/admin-ui.sh test     the above, then the vitest suite (npm test)
#
# `cargo build -p nimbus-gateway` does the same (gateway/build.rs, same rules) and embeds the
# result; this script is for working on them (serve them with --admin-ui-dir admin-ui/dist and
# --web-ui-dir admin-ui/dist-web, see docs/ADMIN-UI.md and docs/WEB.md). Needs Node >= 20.19.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUTPUTS="dist dist-web" exec bash "$ROOT/infra/frontend.sh" "$ROOT/admin-ui" admin-ui "$@"
