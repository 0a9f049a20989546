#!/usr/bin/env bash
# infra/admin-ui.sh — install the admin console's npm packages and build it, only when needed.
#
#   ./infra/admin-ui.sh          npm ci (when node_modules is missing or older than the lock),
#                                npm run build (when dist is missing or older than its sources)
#   ./infra/admin-ui.sh test     the above, then the vitest suite (npm test)
#
# The gateway serves admin-ui/dist at /admin (see docs/ADMIN-UI.md). Needs Node >= 20.19.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
exec bash "$ROOT/infra/frontend.sh" "$ROOT/admin-ui" admin-ui "$@"
