#!/usr/bin/env bash
# Installs the Debian packages credisson needs to build and test, if any are missing
# (libmicrohttpd-dev: the CLI's exporter; prometheus: promtool and the server the metrics
# tests run).
# As root it runs apt-get itself; otherwise it prints the one command to run and fails.
set -euo pipefail
pkgs=(cmake make gcc g++ pkg-config libhiredis-dev uuid-dev libcriterion-dev libjansson-dev
      redis-server redis-sentinel redis-tools dpkg-dev libssl-dev openssl libuv1-dev
      libevent-dev python3 python3-pytest python3-venv python3-pip python3-wheel
      libmicrohttpd-dev prometheus)
# make test-fuzz and make test-valgrind need more; they ask for it with DEPS_EXTRA.
read -r -a extra <<< "${DEPS_EXTRA:-}"
pkgs+=("${extra[@]}")
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # apt's own chatter is kept out of the way: shown only when it fails.
    log=$(mktemp "${TMPDIR:-/tmp}/credisson-deps.XXXXXX")
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
        >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "deps: apt-get failed" >&2
        exit 1
    fi
    rm -f "$log"
else
    echo "deps: missing packages; run:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
