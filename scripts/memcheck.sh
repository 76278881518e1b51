#!/usr/bin/env bash
# scripts/memcheck.sh BUILD_TESTS_DIR LOG_DIR SUPPRESSIONS PARALLEL PROGRAM...
#
# make test-valgrind's runner: each PROGRAM (a test binary in BUILD_TESTS_DIR) under
# memcheck with the arguments ctest gives it (its --jobs, read from CTestTestfile.cmake),
# PARALLEL programs at a time. Memcheck runs a process's threads one at a time, so one
# program keeps about one core busy: on two cores two programs take about half the time
# of one after the other, each as fast as alone. The longest programs start first.
# A program fails when it exits non-zero; the whole run fails when any memcheck log (the
# program's, its Criterion workers', the CLI it execs, every child it forks) reports an
# error. Prints one line per program as it ends: "valgrind: NAME ARGS: exit RC, S s".
set -u
tests=$1 logs=$2 supp=$3 parallel=$4
shift 4

one() {
    local t=$1 a s rc
    a=$(sed -n "s|^add_test(.*/$t\"\(.*\))\$|\1|p" CTestTestfile.cmake | tr -d '"')
    s=$(date +%s)
    # shellcheck disable=SC2086 # $a is the argument list ctest uses
    valgrind --trace-children=yes --num-callers=40 \
        --trace-children-skip='*redis-server*,/bin/*,/usr/bin/*' \
        --leak-check=full --errors-for-leak-kinds=definite \
        --suppressions="$supp" --error-exitcode=99 \
        --log-file="$logs/$t.%p.log" "./$t" $a >"$logs/$t.out" 2>&1
    rc=$?
    echo "valgrind: $t$a: exit $rc, $(($(date +%s) - s)) s"
    if [ "$rc" -ne 0 ]; then
        tail -n 25 "$logs/$t.out"
        touch "$logs/$t.failed"
    fi
}
export -f one
export logs supp

cd "$tests" || exit 1
# Longest first (figures of a serial run on two cores, in seconds); the rest after.
order=""
for t in test_sentinel test_cluster test_cli test_watchdog test_partition test_loop \
    test_tls test_golden_sync test_lock test_faults test_rwlock test_exclusion; do
    case " $* " in *" $t "*) order="$order $t" ;; esac
done
for t in "$@"; do
    case " $order " in *" $t "*) ;; *) order="$order $t" ;; esac
done
# shellcheck disable=SC2086 # one program name per word
printf '%s\n' $order | xargs -P "$parallel" -I{} bash -c 'one "$1"' _ {}

failed=$(cd "$logs" && ls ./*.failed 2>/dev/null | sed 's|^\./||; s|\.failed$||' | tr '\n' ' ')
if grep -l 'ERROR SUMMARY: [1-9]' "$logs"/*.log; then
    echo "valgrind: errors in the logs above"
    exit 1
fi
if [ -n "$failed" ]; then
    echo "valgrind: failed: $failed(output in $logs/*.out)"
    exit 1
fi
exit 0
