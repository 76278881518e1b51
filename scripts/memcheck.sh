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
# When a log has errors, prints them before failing (CI keeps no log): each such log's
# error blocks and definite-leak records (160 lines at most in all), then one line per
# log with its name, its ERROR SUMMARY count and its errors' first lines.
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

# The error part of memcheck log $1 in at most $2 lines: its error blocks (each stack cut
# to its first 12 frames) and its definite-leak records, without the "==PID== " prefix,
# the header, the summaries and the close() warnings of Criterion's workers.
excerpt() {
    sed 's/^==[0-9]*== \{0,1\}//' "$1" | awk -v max="$2" '
        function out(line) {
            if (n < max - 1) print line
            n++
        }
        BEGIN { RS = ""; FS = "\n" }
        NR == 1 && /Memcheck, a memory error detector/ { next }
        /(^|\n)HEAP SUMMARY:/ { heap = 1; next }
        heap && !/^[0-9,]+ bytes in [0-9,]+ blocks are definitely lost/ { next }
        {
            kept = 0
            for (i = 1; i <= NF; i++) {
                if ($i ~ /^Warning: invalid file descriptor|^ +Use --log-fd=/) continue
                if ($i ~ /^ +at /) frames = 0
                if ($i ~ /^ +(at|by) / && ++frames > 12) {
                    if (frames == 13) out("   ...")
                    continue
                }
                out($i)
                kept++
            }
            if (kept > 0) out("")
        }
        END { if (n > max - 1) print "(" n - max + 1 " more lines in the log)" }'
}

# What the errors of memcheck log $1 are: the first line of each error block and leak
# record (the first 4, then their count), on one line.
heads() {
    sed 's/^==[0-9]*== \{0,1\}//' "$1" | awk '
        BEGIN { RS = ""; FS = "\n" }
        NR == 1 && /Memcheck, a memory error detector/ { next }
        /(^|\n)HEAP SUMMARY:/ { heap = 1; next }
        heap && !/^[0-9,]+ bytes in [0-9,]+ blocks are definitely lost/ { next }
        $1 ~ /^Warning: invalid file descriptor/ { next }
        { n++; if (n <= 4) s = s (n > 1 ? "; " : "") $1 }
        END { print s (n > 4 ? "; and " n - 4 " more" : "") }'
}

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
mapfile -t bad < <(grep -l 'ERROR SUMMARY: [1-9]' "$logs"/*.log)
if [ "${#bad[@]}" -gt 0 ]; then
    # CI keeps only the run's output, and shows its tail: each log's errors, at most 160
    # lines in all, then one line per log (its name, its error count, what its errors
    # are), then the verdict.
    left=160
    for f in "${bad[@]}"; do
        [ "$left" -gt 20 ] || break
        text=$(excerpt "$f" "$((left - 1))")
        printf -- '---- %s\n%s\n' "$f" "$text"
        left=$((left - 1 - $(wc -l <<<"$text")))
    done
    for f in "${bad[@]:0:10}"; do
        printf '%s: %s: %s\n' "$f" "$(grep -o 'ERROR SUMMARY: [0-9]* errors' "$f" | tail -n 1)" \
            "$(heads "$f")"
    done
    [ "${#bad[@]}" -le 10 ] || echo "(and $((${#bad[@]} - 10)) more logs with errors in $logs)"
    echo "valgrind: errors in the logs above"
    exit 1
fi
if [ -n "$failed" ]; then
    echo "valgrind: failed: $failed(output in $logs/*.out)"
    exit 1
fi
exit 0
