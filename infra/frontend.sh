#!/usr/bin/env bash
# infra/frontend.sh — install a front end's npm packages and build it, only when needed. Shared
# by infra/admin-ui.sh and infra/desktop-ui.sh (same stack, same rules). The build scripts of
# nimbus-gateway and nimbus-desktop apply the same rules (infra/frontend_build.rs): keep them
# in step, so that neither rebuilds what the other built.
#
#   infra/frontend.sh DIR LABEL          npm ci (when node_modules is missing or older than the
#                                        lock), npm run build (when an output is missing or
#                                        older than its sources)
#   infra/frontend.sh DIR LABEL test     the above, then the vitest suite (npm test)
#
# OUTPUTS (default `dist`): the directories `npm run build` writes, each with an index.html
# (admin-ui: `dist dist-web`, the console and the users' web app). Needs Node >= 20.19 (vite 7).
set -euo pipefail

UI=$(cd "$1" && pwd)
LABEL=$2
cd "$UI"
log() { printf '[%s] %s\n' "$LABEL" "$*" >&2; }

command -v npm >/dev/null 2>&1 || { log "ERROR: npm is missing (install Node.js >= 20.19)"; exit 1; }

# npm writes node_modules/.package-lock.json on every install: older than the lock = stale.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    log "npm ci"
    # Strict: the lock lists every platform's optional packages (rollup's, esbuild's), so
    # `npm ci` accepts it on Linux, Windows and macOS. If it refuses, the lock is out of date:
    # fix it (`npm install --no-audit --no-fund` and commit the lock), never install around it.
    npm ci --no-audit --no-fund --prefer-offline
else
    log "node_modules is up to date with package-lock.json"
fi

stale=
for out in ${OUTPUTS:-dist}; do
    # The inputs infra/frontend_build.rs watches; `web` and vite.web.config.ts only exist in admin-ui.
    inputs=$(ls -d src web index.html vite.config.ts vite.web.config.ts tsconfig.json package.json package-lock.json 2>/dev/null || true)
    # shellcheck disable=SC2086
    if [ ! -f "$out/index.html" ] || [ -n "$(find $inputs -newer "$out/index.html" -print -quit)" ]; then
        stale=1
    fi
done
if [ -n "$stale" ]; then
    log "npm run build"
    npm run build
else
    log "${OUTPUTS:-dist} up to date"
fi

if [ "${3:-}" = "test" ]; then
    log "npm test (vitest)"
    npm test
fi
