#!/usr/bin/env bash
# infra/desktop-ui.sh — install the desktop app's front-end packages and build it, only when needed.
#
#   ./infra/desktop-ui.sh          npm ci (when node_modules is missing or older than the lock),
#                                  npm run build (when dist is missing or older than its sources)
#   ./infra/desktop-ui.sh test     the above, then the vitest suite (npm test)
#
# client/desktop/ui/dist is embedded into the Tauri app at compile time; nimbus-desktop's build
# script runs the same steps when they are stale (client/desktop/build.rs), so a plain
# `cargo build -p nimbus-desktop` works too. tests/tests/desktop_ui.rs drives the build in chromium.
# Needs Node >= 20.19.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
exec bash "$ROOT/infra/frontend.sh" "$ROOT/client/desktop/ui" desktop-ui "$@"
