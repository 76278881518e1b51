#!/usr/bin/env bash
# demo.sh -- what credisson does, in four short scenes against a private redis-server:
#   (a) 6 worker processes do read-modify-write increments of one counter, first without
#       a lock (updates get lost), then each increment under `credisson run` (none lost);
#   (b) a job that outlives its lease: the watchdog keeps renewing it while another
#       process waits, and the waiter gets in only after the job ended;
#   (c) fair ordering: processes queued one after another on `credisson run --fair` get
#       the lock in exactly that order;
#   (d) a holder killed with SIGKILL: nobody releases, and the waiter takes over when
#       the lease runs out (`credisson watch` shows the expiry and the take-over).
#
# usage: scripts/demo.sh BUILD_DIR      (BUILD_DIR holds the built `credisson` binary)
#
# The redis-server listens on a free loopback port, keeps nothing on disk, runs in a
# temporary directory and is stopped on exit. The last line is the summary, e.g.
#   demo: 150 increments, 111 lost without a lock, 0 lost with credisson
# Exits 0 when every scene showed what it should, non-zero otherwise. Environment:
# REDIS_SERVER and REDIS_CLI override the programs found on PATH; DEMO_WORKERS and
# DEMO_ROUNDS the sizes of scene (a).
# The sh -c scripts below are single-quoted on purpose: their $0, $1 are sh's arguments.
# shellcheck disable=SC2016
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
    local j
    for j in $(jobs -p); do # anything a failed scene left running (not the server yet)
        [[ $j == "$server_pid" ]] || kill "$j" 2>/dev/null || true
    done
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Milliseconds on a monotonic-enough clock (for durations only).
now_ms() { local t; t=$(date +%s%N); echo $((t / 1000000)); }
secs() { printf '%d.%d' $(($1 / 1000)) $((($1 % 1000) / 100)); } # ms -> "1.2"
# wait_for DEADLINE_S CMD...: run CMD every 20 ms until it succeeds; fail after the deadline.
wait_for() {
    local limit=$(($(now_ms) + $1 * 1000))
    shift
    until "$@"; do
        (($(now_ms) < limit)) || { echo "demo: timed out waiting for: $*" >&2; return 1; }
        sleep 0.02
    done
}

# --- a private redis-server on a free port ------------------------------------------
# Sets $port and $server_pid.
# shellcheck source=scripts/redis_child.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis_child.sh"
start_redis_child "$redis_server" "$tmp" ||
    { echo "demo: could not start $redis_server (see $tmp/redis.log)" >&2; exit 1; }
url="redis://127.0.0.1:$port"
rcli() { "$redis_cli" -p "$port" "$@"; }

echo "demo: redis-server on 127.0.0.1:$port"

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

# --- (a) lost updates ------------------------------------------------------------------
echo "(a) $workers processes x $rounds read-modify-write increments of one counter"
read -r lost_nolock got_nolock secs <<<"$(run_workers nolock demo:counter:nolock)"
printf '    without a lock:   counter = %4d of %d  -> %d increments lost (%ds)\n' \
    "$got_nolock" "$total" "$lost_nolock" "$secs"
read -r lost_lock got_lock secs <<<"$(run_workers lock demo:counter:lock)"
printf '    with credisson:   counter = %4d of %d  -> %d increments lost (%ds)\n' \
    "$got_lock" "$total" "$lost_lock" "$secs"
if [[ $("$cli" --url "$url" status --json demo:lock) != *'"kind":"none"'* ]]; then
    echo "demo: demo:lock is still held after every worker finished" >&2
    exit 1
fi
if ((lost_lock != 0)); then
    echo "demo: FAILED: the lock let updates through" >&2
    exit 1
fi

is_held() { [[ $("$cli" --url "$url" status --json "$1") == *'"kind":"rlock"'* ]]; }
ttl_of() { "$cli" --url "$url" status --json "$1" | sed -n 's/.*"ttl_ms":\(-\{0,1\}[0-9]*\).*/\1/p'; }

# --- (b) the watchdog keeps a long job's lock ---------------------------------------------
echo "(b) a 4 s job on a 1.5 s lease (credisson --watchdog-ms 1500 run demo:job -- sleep 4)"
t0=$(now_ms)
"$cli" --url "$url" --watchdog-ms 1500 run demo:job -- sh -c 'sleep 4; echo "$(date +%s%N)" > "$0"' \
    "$tmp/job.end" &
job=$!
wait_for 5 is_held demo:job
"$cli" --url "$url" run --wait 10000 demo:job -- sh -c 'date +%s%N > "$0"' "$tmp/waiter.in" &
waiter=$!
sleep 2.5 # past the 1.5 s lease: only renewals keep the lock
ttl=$(ttl_of demo:job)
printf '    at %ss the job still holds it: ttl_ms=%s (renewed every 0.5 s); a waiter is queued\n' \
    "$(secs $(($(now_ms) - t0)))" "$ttl"
wait "$job" || { echo "demo: the job failed" >&2; exit 1; }
wait "$waiter" || { echo "demo: the waiter failed" >&2; exit 1; }
job_end=$(($(cat "$tmp/job.end") / 1000000))
waiter_in=$(($(cat "$tmp/waiter.in") / 1000000))
if ((waiter_in < job_end)) || ((ttl <= 0)); then
    echo "demo: FAILED: the waiter got in while the job held the lock" >&2
    exit 1
fi
printf '    the job ended at %ss; the waiter got in %d ms later\n' "$(secs $((job_end - t0)))" \
    $((waiter_in - job_end))

# --- (c) fair ordering ------------------------------------------------------------------
echo "(c) fair lock: 4 processes queue one after another (credisson run --fair demo:fair)"
queue_len() {
    "$cli" --url "$url" status --json demo:fair | sed 's/.*"queue":\[\([^]]*\)\].*/\1/' |
        grep -o '"owner"' | wc -l
}
queue_is() { [[ $(queue_len) -eq $1 ]]; }
"$cli" --url "$url" run --fair demo:fair -- sh -c 'while [ ! -e "$0" ]; do sleep 0.02; done' \
    "$tmp/fair.go" &
pids=($!)
wait_for 5 is_held demo:fair
for i in 1 2 3 4; do
    "$cli" --url "$url" run --fair --wait 20000 demo:fair -- sh -c 'echo "$1" >> "$0"' \
        "$tmp/fair.order" "$i" &
    pids+=($!)
    wait_for 5 queue_is "$i" # visible in the queue before the next one asks
done
printf '    queued in order 1 2 3 4 (status --json shows %d waiters); releasing\n' "$(queue_len)"
touch "$tmp/fair.go"
for p in "${pids[@]}"; do wait "$p" || { echo "demo: a fair waiter failed" >&2; exit 1; }; done
order=$(tr '\n' ' ' <"$tmp/fair.order")
order=${order% }
printf '    they got the lock in the order: %s\n' "$order"
[[ $order == "1 2 3 4" ]] || { echo "demo: FAILED: fair order broken" >&2; exit 1; }

# --- (d) a holder killed with SIGKILL ------------------------------------------------------
echo "(d) the holder is killed with SIGKILL (lease 2 s); a waiter takes over when it runs out"
"$cli" --url "$url" --watchdog-ms 2000 --label holder run demo:crash -- sleep 30 &
holder=$!
wait_for 5 is_held demo:crash
# watch prints the holder it finds ("held"), then the next two events.
"$cli" --url "$url" watch --count 2 --timeout 8000 demo:crash >"$tmp/watch.out" 2>&1 &
watcher=$!
has_output() { [[ -s $tmp/watch.out ]]; }
wait_for 5 has_output
"$cli" --url "$url" --label waiter run --wait 10000 demo:crash -- sh -c 'date +%s%N > "$0"; sleep 0.5' \
    "$tmp/crash.in" &
waiter=$!
sleep 0.3
child=$(pgrep -P "$holder" || true)
disown "$holder" # no "Killed" job notice from the shell
kill -KILL "$holder"
killed=$(now_ms)
[[ -z $child ]] || kill -KILL "$child" 2>/dev/null || true # its orphaned `sleep 30`
wait "$waiter" || { echo "demo: the waiter failed" >&2; exit 1; }
took=$(($(cat "$tmp/crash.in") / 1000000 - killed))
wait "$watcher" || { echo "demo: watch failed" >&2; exit 1; }
# Each event names the process behind it (its identity record: host, pid, command line,
# label); shown here with the pid and label only, the host and the command line being this
# machine's.
sed -E -e 's/ by="[^"]* pid ([0-9]+) .*\[([^]]*)\]"$/ by="pid \1 [\2]"/' \
    -e 's/^/    credisson watch: /' "$tmp/watch.out"
printf '    the waiter got in %s s after the kill (the rest of the lease; nobody unlocked)\n' \
    "$(secs "$took")"
((took < 3000)) || { echo "demo: FAILED: the take-over took $took ms" >&2; exit 1; }

echo "demo: $total increments, $lost_nolock lost without a lock, $lost_lock lost with credisson"
