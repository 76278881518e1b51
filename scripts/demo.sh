#!/usr/bin/env bash
# demo.sh -- several processes contend for one counter in Redis, first without a lock,
# then with `credisson run` around each increment.
#
# usage: scripts/demo.sh BUILD_DIR      (BUILD_DIR holds the built `credisson` binary)
#
# Starts a private redis-server on a free loopback port (no persistence, in a temporary
# directory, stopped on exit), runs 6 workers x 25 read-modify-write increments (GET,
# then SET) of a shared counter in both modes, and prints the lost updates. Exits 0
# when the locked run lost nothing, non-zero otherwise. Environment: REDIS_SERVER and
# REDIS_CLI override the programs found on PATH; DEMO_WORKERS and DEMO_ROUNDS the sizes.
set -euo pipefail

build_dir=${1:?usage: scripts/demo.sh BUILD_DIR}
cli="$build_dir/credisson"
[[ -x $cli ]] || { echo "demo: no credisson binary at $cli (build it first)" >&2; exit 2; }
cli=$(cd "$(dirname "$cli")" && pwd)/credisson
redis_server=${REDIS_SERVER:-redis-server}
redis_cli=${REDIS_CLI:-redis-cli}
command -v "$redis_server" >/dev/null || { echo "demo: $redis_server not found" >&2; exit 2; }
command -v "$redis_cli" >/dev/null || { echo "demo: $redis_cli not found" >&2; exit 2; }
workers=${DEMO_WORKERS:-6}
rounds=${DEMO_ROUNDS:-25}
total=$((workers * rounds))

tmp=$(mktemp -d "${TMPDIR:-/tmp}/credisson-demo.XXXXXX")
server_pid=
cleanup() {
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- a private redis-server on a free port ------------------------------------------
# Sets $port and $server_pid.
port=
start_server() {
    local attempt deadline
    for attempt in 1 2 3 4 5 6 7 8 9 10; do
        port=$((20000 + RANDOM % 40000))
        "$redis_server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$tmp" --daemonize no --logfile "$tmp/redis.log" >/dev/null 2>&1 &
        server_pid=$!
        deadline=$((SECONDS + 5))
        while ((SECONDS < deadline)); do
            if "$redis_cli" -p "$port" PING 2>/dev/null | grep -q PONG; then
                return 0
            fi
            kill -0 "$server_pid" 2>/dev/null || break # port taken: try another
            sleep 0.05
        done
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=
    done
    echo "demo: could not start $redis_server (see $tmp/redis.log)" >&2
    return 1
}
start_server
url="redis://127.0.0.1:$port"
rcli() { "$redis_cli" -p "$port" "$@"; }

echo "demo: redis-server on 127.0.0.1:$port; $workers workers x $rounds increments of one counter"

# --- one worker: $rounds read-modify-write increments ---------------------------------
# $1 = "nolock" or "lock", $2 = counter key. Each increment reads the counter with GET
# and writes value+1 with SET: two round trips with a gap in between, the classic lost
# update when nothing keeps two workers apart.
increment='v=$("$0" -p "$1" GET "$2"); "$0" -p "$1" SET "$2" $((${v:-0} + 1)) >/dev/null'
worker() {
    local mode=$1 key=$2 i
    for ((i = 0; i < rounds; i++)); do
        if [[ $mode == lock ]]; then
            "$cli" --url "$url" run demo:lock -- sh -c "$increment" "$redis_cli" "$port" "$key" || return 1
        else
            sh -c "$increment" "$redis_cli" "$port" "$key" || return 1
        fi
    done
}

run_workers() {
    local mode=$1 key=$2 pids=() w failed=0 t0=$SECONDS
    rcli SET "$key" 0 >/dev/null
    for ((w = 0; w < workers; w++)); do
        worker "$mode" "$key" &
        pids+=($!)
    done
    for w in "${pids[@]}"; do
        wait "$w" || failed=1
    done
    if ((failed)); then
        echo "demo: a worker failed ($mode)" >&2
        return 1
    fi
    local got
    got=$(rcli GET "$key")
    echo "$((total - got)) $got $((SECONDS - t0))"
}

# (a) without a lock
read -r lost_nolock got_nolock secs <<<"$(run_workers nolock demo:counter:nolock)"
printf '  (a) without a lock:   counter = %4d of %d  -> %d increments lost (%ds)\n' \
    "$got_nolock" "$total" "$lost_nolock" "$secs"

# What a held lock looks like, read from inside a critical section.
echo "  'credisson status' while a process holds demo:lock:"
"$cli" --url "$url" run demo:lock -- "$cli" --url "$url" status demo:lock | sed 's/^/      /'

# (b) with credisson run around every increment
read -r lost_lock got_lock secs <<<"$(run_workers lock demo:counter:lock)"
printf '  (b) with credisson:   counter = %4d of %d  -> %d increments lost (%ds)\n' \
    "$got_lock" "$total" "$lost_lock" "$secs"

if [[ $("$cli" --url "$url" status --json demo:lock) != *'"kind":"none"'* ]]; then
    echo "demo: demo:lock is still held after every worker finished" >&2
    exit 1
fi
echo "demo: $total increments, $lost_nolock lost without a lock, $lost_lock lost with credisson"
if ((lost_lock != 0)); then
    echo "demo: FAILED: the lock let updates through" >&2
    exit 1
fi
