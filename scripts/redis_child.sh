# shellcheck shell=bash
# redis_child.sh -- sourced by scripts/demo.sh and tests/test_install.sh: a private
# redis-server on a free loopback port (bash).
#
# start_redis_child PROGRAM DIR: starts PROGRAM (a redis-server) on a free 127.0.0.1 port,
# keeping nothing on disk, in DIR with its log in DIR/redis.log. Another process may take
# the port first, so it tries up to 10 ports, each until it listens or 5 s have passed.
# Sets $port and $server_pid (empty when none runs); returns 0 when one listens, else 1.
start_redis_child() {
    local program=$1 dir=$2 deadline
    server_pid=
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
            echo $((20000 + RANDOM % 40000)))
        "$program" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
            --logfile "$dir/redis.log" >/dev/null 2>&1 &
        server_pid=$!
        deadline=$((SECONDS + 5))
        while ((SECONDS < deadline)); do
            if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
                return 0
            fi
            kill -0 "$server_pid" 2>/dev/null || break # port taken: try another
            sleep 0.025
        done
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=
    done
    return 1
}
