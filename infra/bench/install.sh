# infra/bench/install.sh — sourced by the infra/bench-*.sh wrappers: installs what a benchmark
# needs and is missing, then runs its Python program (infra/bench/NAME.py).
#
#   BENCH_TAG=bench-mount; . "$ROOT/infra/bench/install.sh"
#   bench_help_first mount "$@"      # -h/--help: print the program's usage, install nothing
#   bench_apt bindfs fusermount3:fuse3
#   bench_boto3 "uploads to MinIO"
#   bench_run mount "$@"             # exec python3 -m infra.bench.mount "$@"
# shellcheck shell=bash

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

bench_log() { printf '[%s] %s\n' "${BENCH_TAG:-bench}" "$*" >&2; }
bench_die() { printf '[%s] ERROR: %s\n' "${BENCH_TAG:-bench}" "$*" >&2; exit 1; }

bench_as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else bench_die "need root (or sudo) to run: $*"
    fi
}

# bench_apt COMMAND[:PACKAGE]...: installs with apt the packages whose command is missing
# (PACKAGE defaults to COMMAND; /usr/sbin counts, for a user whose PATH lacks it).
bench_apt() {
    local spec cmd missing=()
    for spec in "$@"; do
        cmd=${spec%%:*}
        command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("${spec#*:}")
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    bench_log "apt: installing ${missing[*]}"
    bench_as_root apt-get update -qq
    bench_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" </dev/null
}

# bench_boto3 WHY: pip installs boto3 when python3 cannot import it.
bench_boto3() {
    python3 -c 'import boto3' 2>/dev/null && return 0
    bench_log "pip: installing boto3 ($1)"
    python3 -m pip install --quiet boto3 || bench_die "could not install boto3"
}

# bench_run NAME ARGS...: the benchmark itself, with the checkout on Python's path.
bench_run() {
    local name=$1
    shift
    command -v python3 >/dev/null 2>&1 || bench_die "python3 not found (infra/install-deps.sh installs it)"
    PYTHONPATH="$BENCH_ROOT${PYTHONPATH:+:$PYTHONPATH}" exec python3 -m "infra.bench.$name" "$@"
}

# bench_help_first NAME ARGS...: with -h or --help among ARGS, the usage at once (no installs).
bench_help_first() {
    local name=$1 a
    shift
    for a in "$@"; do
        case "$a" in -h | --help) bench_run "$name" --help ;; esac
    done
}
