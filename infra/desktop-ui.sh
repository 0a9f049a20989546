#!/usr/bin/env bash
# infra/desktop-ui.sh — install the desktop app's front-end packages and build it, only when needed.
#
#   ./infra/desktop-ui.sh          npm ci (when node_modules is missing or older than the lock),
#                                  npm run build (when dist is missing or older than its sources)
#   ./infra/desktop-ui.sh test     the above, then the vitest suite (npm test)
#
# client/desktop/ui/dist is embedded into the Tauri app at compile time, so this must run before
# `cargo build`/`clippy` of nimbus-desktop. tests/tests/desktop_ui.rs drives the build in chromium.
# Needs Node >= 20.19.
set -euo pipefail

UI=$(cd "$(dirname "${BASH_SOURCE[0]}")/../client/desktop/ui" && pwd)
cd "$UI"
log() { printf '[desktop-ui] %s\n' "$*" >&2; }

command -v npm >/dev/null 2>&1 || { log "ERROR: npm is missing (install Node.js >= 20.19)"; exit 1; }

# npm writes node_modules/.package-lock.json on every install: older than the lock = stale.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    log "npm ci"
    # As in admin-ui.sh: npm 11 can reject its own lock over optional per-platform packages.
    npm ci --no-audit --no-fund || { log "npm ci refused the lock; npm install instead"; npm install --no-audit --no-fund; }
else
    log "node_modules is up to date with package-lock.json"
fi

if [ ! -f dist/index.html ] || [ -n "$(find src index.html vite.config.ts tsconfig.json package-lock.json -newer dist/index.html -print -quit)" ]; then
    log "npm run build"
    npm run build
else
    log "dist is up to date"
fi

if [ "${1:-}" = "test" ]; then
    log "npm test (vitest)"
    npm test
fi
