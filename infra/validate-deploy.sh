#!/usr/bin/env bash
# infra/validate-deploy.sh — validate the deployment artefacts under infra/deploy/ without
# running them (no container engine or cluster runs here). Part of infra/test.sh (one test).
#
#   bash infra/validate-deploy.sh        # exit 0 when everything is valid
#
# 1. The Go validator (infra/deploy/validate/, built by infra/install-deps.sh into
#    $NIMBUS_CACHE_DIR/bin/nimbus-deploy-validate; rebuilt here when its sources changed):
#    Kubernetes manifests strictly decoded into the k8s.io/api types plus our own checks, the
#    compose file loaded with compose-go (compose JSON schema), the Prometheus rules parsed with
#    Prometheus's rule parser; NIMBUS_* names (and values, where a flag has a fixed set) in every
#    artefact, the gateway command lines (container args, compose command, ExecStart, CMD),
#    probe paths and alert series and labels checked against `nimbus-gateway describe --json`,
#    which the built gateway prints from its own flag definitions (nothing scrapes its source).
# 2. systemd: `systemd-analyze verify` on copies of the units whose ExecStart points at a stub
#    executable (verify checks that the binary exists), failing on any diagnostic (unknown keys
#    are only warnings to systemd), and `systemd-analyze security --offline` with a threshold.
# 3. nginx: `nginx -t` on a copy of the compose nginx.conf with a temp prefix, the compose host
#    names swapped for 127.0.0.1 (nginx resolves upstream hosts at load time) and a throwaway
#    self-signed certificate.
# 4. Negative self-tests: deliberately broken copies (a misspelled `readinesProbe`, a string
#    for `replicas`, a wrong probe path, a misspelled compose key, an unknown metric, gateways
#    behind nginx without NIMBUS_TRUSTED_PROXIES, an invalid CIDR, a misspelled unit key, an
#    unknown variable, a value outside a flag's set, a flag the subcommand lacks, an alert on a
#    label the metric lacks, a gateway that no longer reads a variable) must be rejected, each
#    for the expected reason; a validator that accepts them fails this script.
#
# Needs the built gateway (`cargo build -p nimbus-gateway`; infra/test.sh builds it first).
# Environment: NIMBUS_GATEWAY_BIN (default $CARGO_TARGET_DIR/debug/nimbus-gateway, the target dir
# defaulting to /var/cache/nimbus/target), NIMBUS_CACHE_DIR (default /var/cache/nimbus),
# VALIDATE_VERBOSE=1 (list every check).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPLOY=$ROOT/infra/deploy
CACHE_DIR=${NIMBUS_CACHE_DIR:-/var/cache/nimbus}
VALIDATOR=$CACHE_DIR/bin/nimbus-deploy-validate
VALIDATOR_MARKER=$VALIDATOR.sources

log() { printf '[validate-deploy] %s\n' "$*"; }
die() { printf '[validate-deploy] ERROR: %s\n' "$*" >&2; exit 1; }

failures=0
pass() { log "PASS: $*"; }
fail() { log "FAIL: $*"; failures=$((failures + 1)); }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- the validator binary (same build as infra/install-deps.sh) ------------------------------
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
    export PATH="/usr/local/go/bin:$PATH"
fi
sources=$(cd "$DEPLOY/validate" && sha256sum go.mod go.sum ./*.go | sha256sum | cut -c1-64)
if [ -x "$VALIDATOR" ] && [ "$(cat "$VALIDATOR_MARKER" 2>/dev/null)" = "$sources" ]; then
    log "validator: $VALIDATOR is up to date"
else
    command -v go >/dev/null 2>&1 || die "go not found (needed to build the validator; see infra/install-deps.sh)"
    log "validator: building $VALIDATOR (sources changed or missing)..."
    mkdir -p "$CACHE_DIR/bin"
    (cd "$DEPLOY/validate" && GOMODCACHE=$CACHE_DIR/go/pkg/mod GOCACHE=$CACHE_DIR/go/cache \
        GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build -o "$VALIDATOR.tmp.$$" . )
    mv "$VALIDATOR.tmp.$$" "$VALIDATOR"
    printf '%s\n' "$sources" >"$VALIDATOR_MARKER"
fi

# --- what the gateway accepts, from the gateway itself ---------------------------------------
GATEWAY_BIN=${NIMBUS_GATEWAY_BIN:-${CARGO_TARGET_DIR:-/var/cache/nimbus/target}/debug/nimbus-gateway}
[ -x "$GATEWAY_BIN" ] || die "$GATEWAY_BIN not found: build it (cargo build -p nimbus-gateway) or set NIMBUS_GATEWAY_BIN"
# A binary older than the gateway's sources would describe flags that are no longer there.
newer=$(find "$ROOT/gateway/src" "$ROOT/gateway/Cargo.toml" -type f -newer "$GATEWAY_BIN" -print -quit)
[ -z "$newer" ] || die "$GATEWAY_BIN is older than $newer: rebuild it (cargo build -p nimbus-gateway)"
DESCRIBE=$tmp/describe.json
"$GATEWAY_BIN" describe --json >"$DESCRIBE" || die "$GATEWAY_BIN describe --json failed"
log "gateway: $GATEWAY_BIN describe --json"

verbose=()
[ "${VALIDATE_VERBOSE:-}" = 1 ] && verbose=(-v)

# validate DIR-OF-DEPLOY [extra args]: runs the validator over a deploy tree (the real one or a
# broken copy) against $DESCRIBE.
validate() {
    local d=$1
    shift
    "$VALIDATOR" "${verbose[@]}" -gateway-describe "$DESCRIBE" \
        -k8s "$d/k8s" \
        -compose "$d/compose/compose.yaml" -compose-env "$d/compose/.env.example" \
        -alerts "$d/prometheus/alerts.yaml" \
        -systemd "$d/systemd" \
        -dockerfile "$d/Dockerfile" "$@"
}

# --- 1. the artefacts themselves -------------------------------------------------------------
log "validator: $DEPLOY"
if validate "$DEPLOY"; then
    pass "validator accepts infra/deploy"
else
    fail "validator rejects infra/deploy (see FAIL lines above)"
fi

# --- 2. systemd ------------------------------------------------------------------------------
# verify_units DIR: systemd-analyze verify on the units of DIR, ExecStart pointed at a stub
# executable; any diagnostic counts as a failure. Prints the diagnostics.
verify_units() {
    local src=$1 dst
    dst=$(mktemp -d "$tmp/units.XXXX")
    cp "$src"/*.service "$src"/*.timer "$dst"/
    printf '#!/bin/sh\nexit 0\n' >"$dst/nimbus-gateway"
    chmod 0755 "$dst/nimbus-gateway"
    sed -i "s#^ExecStart=/usr/local/bin/nimbus-gateway #ExecStart=$dst/nimbus-gateway #" "$dst"/*.service
    local out rc=0
    out=$(cd "$dst" && systemd-analyze verify --man=no ./*.service ./*.timer 2>&1) || rc=$?
    printf '%s' "$out"
    [ "$rc" -eq 0 ] && [ -z "$out" ]
}
if ! command -v systemd-analyze >/dev/null 2>&1; then
    fail "systemd-analyze not found (apt: systemd)"
else
    if out=$(verify_units "$DEPLOY/systemd"); then
        pass "systemd-analyze verify: nimbus-gateway.service nimbus-gc.service nimbus-gc.timer"
    else
        printf '%s\n' "$out"
        fail "systemd-analyze verify"
    fi
    for unit in nimbus-gateway.service nimbus-gc.service; do
        # Exposure 0.0 (locked down) .. 10.0 (unprotected); fail above 2.0.
        if out=$(systemd-analyze security --offline=true --threshold=20 --no-pager "$DEPLOY/systemd/$unit" 2>&1); then
            pass "systemd-analyze security: $(printf '%s\n' "$out" | grep -o 'Overall exposure level.*' | tail -n1)"
        else
            printf '%s\n' "$out" | tail -n 5
            fail "systemd-analyze security $unit (exposure above 2.0)"
        fi
    done
fi

# --- 3. nginx --------------------------------------------------------------------------------
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$nginx_bin" ]; then
    fail "nginx not found (apt: nginx)"
else
    p=$tmp/nginx
    mkdir -p "$p/tls" "$p/logs"
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
        -keyout "$p/tls/key.pem" -out "$p/tls/cert.pem" >/dev/null 2>&1
    sed -e 's#\(server \)gateway-[0-9]*:#\1127.0.0.1:#' \
        -e "s#/etc/nginx/tls/#$p/tls/#" \
        -e "s#^pid .*#pid $p/nginx.pid;#" \
        "$DEPLOY/compose/nginx/nginx.conf" >"$p/nginx.conf"
    if out=$("$nginx_bin" -t -q -p "$p/" -c "$p/nginx.conf" -e "$p/logs/error.log" 2>&1); then
        pass "nginx -t: compose/nginx/nginx.conf ($("$nginx_bin" -v 2>&1 | sed 's/.*: //'))"
    else
        printf '%s\n' "$out"
        fail "nginx -t: compose/nginx/nginx.conf"
    fi
fi

# --- 4. negative self-tests ------------------------------------------------------------------
# expect_reject NAME PATTERN CMD...: CMD must fail and its output must match PATTERN (so it
# failed for the planted defect, not for another reason).
expect_reject() {
    local name=$1 pattern=$2 out rc=0
    shift 2
    out=$("$@" 2>&1) || rc=$?
    if [ "$rc" -eq 0 ]; then
        printf '%s\n' "$out" | tail -n 3
        fail "negative test '$name': accepted a broken artefact"
    elif ! printf '%s\n' "$out" | grep -qE "$pattern"; then
        printf '%s\n' "$out" | grep -E 'FAIL|rror' | head -n 5
        fail "negative test '$name': rejected, but not for /$pattern/"
    else
        pass "negative test '$name': rejected ($(printf '%s\n' "$out" | grep -E "$pattern" | head -n1 | cut -c1-160))"
    fi
}
# broken_copy NAME: a fresh copy of infra/deploy to plant one defect in.
broken_copy() {
    local d=$tmp/broken-$1
    mkdir -p "$d"
    cp -a "$DEPLOY/k8s" "$DEPLOY/compose" "$DEPLOY/prometheus" "$DEPLOY/systemd" "$DEPLOY/Dockerfile" "$d/"
    printf '%s' "$d"
}

# reject_planted NAME FILE SED PLANTED DESCRIPTION PATTERN: a copy of infra/deploy with the sed
# script SED applied to FILE (relative to it), which must then hold the text PLANTED (so the
# defect really is there; "" skips that check); the validator must reject the copy for PATTERN.
reject_planted() {
    local d
    d=$(broken_copy "$1")
    sed -i "$3" "$d/$2"
    [ -z "$4" ] || grep -qF -- "$4" "$d/$2" || die "could not plant '$4' in $2"
    expect_reject "$5" "$6" validate "$d"
}

reject_planted misspelled-field k8s/deployment.yaml 's/^\( *\)readinessProbe:/\1readinesProbe:/' readinesProbe \
    "k8s: misspelled field readinesProbe" 'unknown field .*readinesProbe'
reject_planted wrong-type k8s/deployment.yaml 's/^  replicas: 2$/  replicas: two/' 'replicas: two' \
    "k8s: wrong type (replicas: two)" 'cannot unmarshal string .*replicas'
reject_planted probe-path k8s/deployment.yaml 's#path: /healthz#path: /health#' "" \
    "k8s: liveness probe on a path the gateway does not serve" 'livenessProbe path "/health" is the gateway'
reject_planted compose-key compose/compose.yaml 's/^    healthcheck:/    healtcheck:/' healtcheck \
    "compose: misspelled key healtcheck" 'services\.[a-z0-9-]+\.healtcheck'
reject_planted metric prometheus/alerts.yaml 's/nimbus_store_corrupt_blocks_total/nimbus_store_corupt_blocks_total/' \
    nimbus_store_corupt_blocks_total "prometheus: unknown metric" 'nimbus_store_corupt_blocks_total'
# "": removed, or a text present before too: the rejection's reason shows the defect.
reject_planted trusted-proxies compose/compose.yaml '/^    NIMBUS_TRUSTED_PROXIES:/d' "" \
    "compose: gateways behind nginx without NIMBUS_TRUSTED_PROXIES" 'NIMBUS_TRUSTED_PROXIES .* names it'
reject_planted trusted-proxies-cidr k8s/configmap.yaml 's#^  NIMBUS_TRUSTED_PROXIES: .*#  NIMBUS_TRUSTED_PROXIES: "10.244.0.0/33"#' \
    10.244.0.0/33 "k8s: NIMBUS_TRUSTED_PROXIES that does not parse" 'NIMBUS_TRUSTED_PROXIES "10.244.0.0/33"'
reject_planted unknown-env compose/compose.yaml 's/^    NIMBUS_CACHE_MEM:/    NIMBUS_CACHE_MEMORY:/' NIMBUS_CACHE_MEMORY \
    "compose: a variable the gateway does not read" 'NIMBUS_CACHE_MEMORY is a variable the gateway reads'
reject_planted env-value k8s/configmap.yaml 's/^\(  NIMBUS_STORE: \).*/\1"s4"/' 'NIMBUS_STORE: "s4"' \
    "k8s: NIMBUS_STORE outside the flag's values" 'NIMBUS_STORE="s4" is one of \[local s3\]'
reject_planted k8s-flag k8s/gc-cronjob.yaml 's/args: \["gc", "--json"\]/args: ["gc", "--jsn"]/' '"--jsn"' \
    "k8s: a flag the gateway does not have" 'gc args: --jsn is a flag of nimbus-gateway gc'
reject_planted unit-flag systemd/nimbus-gc.service 's#^\(ExecStart=/usr/local/bin/nimbus-gateway gc --json\)$#\1 --repair#' \
    '--json --repair' "systemd: a flag of another subcommand (fsck's --repair on gc)" 'ExecStart: --repair is a flag of nimbus-gateway gc'
reject_planted alert-label prometheus/alerts.yaml 's/nimbus_logins_total{result=/nimbus_logins_total{reslt=/' 'reslt=' \
    "prometheus: a label the metric does not have" 'nimbus_logins_total has the label reslt'

# The validator follows the gateway: a gateway that stops reading a variable the artefacts set
# (here its describe output with NIMBUS_TRUSTED_PROXIES renamed) fails the real artefacts.
sed 's/"NIMBUS_TRUSTED_PROXIES"/"NIMBUS_TRUSTED_PROXIEZ"/' "$DESCRIBE" >"$tmp/describe-renamed.json"
grep -q NIMBUS_TRUSTED_PROXIEZ "$tmp/describe-renamed.json" || die "could not rename NIMBUS_TRUSTED_PROXIES"
DESCRIBE=$tmp/describe-renamed.json expect_reject "a variable the gateway no longer reads" \
    'NIMBUS_TRUSTED_PROXIES is a variable the gateway reads' validate "$DEPLOY"

if command -v systemd-analyze >/dev/null 2>&1; then
    d=$(broken_copy unit-key)
    sed -i 's/^ProtectSystem=strict/ProtectSytem=strict/' "$d/systemd/nimbus-gateway.service"
    expect_reject "systemd: misspelled key ProtectSytem" "Unknown key 'ProtectSytem'" verify_units "$d/systemd"
fi

if [ "$failures" -eq 0 ]; then
    log "all deployment checks passed"
else
    log "$failures deployment check(s) failed"
    exit 1
fi
