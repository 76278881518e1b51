#!/usr/bin/env bash
# test_demo.sh -- the README's demo transcript is what `make demo` really prints.
#
# usage: tests/test_demo.sh BUILD_DIR SOURCE_DIR     (registered with ctest as "demo")
#
# Runs scripts/demo.sh BUILD_DIR (its own redis-server, about 15 s) and compares its
# output, line by line, with the ```text block of README.md that follows the marker
# comment "demo-transcript". Numbers, owner ids (full or shortened with "…") and runs of
# spaces are masked on both sides, so a count or a time may differ but a line added,
# dropped, reworded or reordered fails the test. Also checks the summary line that
# .ci/run greps for.
set -euo pipefail

build=$(cd "${1:?usage: test_demo.sh BUILD_DIR SOURCE_DIR}" && pwd)
src=$(cd "${2:?usage: test_demo.sh BUILD_DIR SOURCE_DIR}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/credisson-demo-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
    printf 'demo-test: FAILED: %s\n' "$*" >&2
    exit 1
}

# The shape of a transcript line: what stays when the numbers are gone.
shape() {
    LC_ALL=C sed -E -e 's/[0-9a-f]{8}(-[0-9a-f]+)*(-…)?/ID/g' -e 's/[0-9]+/N/g' \
        -e 's/([^ ])  +/\1 /g' -e 's/ +$//'
}

awk '/<!-- demo-transcript/ {m = 1; next}
     m == 1 && /^```text$/ {m = 2; next}
     m == 2 && /^```$/ {exit}
     m == 2 {print}' "$src/README.md" >"$tmp/readme.txt"
[[ -s $tmp/readme.txt ]] || fail "README.md has no \`\`\`text block after <!-- demo-transcript -->"

if ! "$src/scripts/demo.sh" "$build" >"$tmp/demo.txt" 2>&1; then
    cat "$tmp/demo.txt" >&2
    fail "scripts/demo.sh failed"
fi
grep -qE '^demo: [0-9]+ increments, [0-9]+ lost without a lock, 0 lost with credisson$' "$tmp/demo.txt" ||
    fail "no summary line of the form .ci/run expects"

shape <"$tmp/readme.txt" >"$tmp/readme.shape"
shape <"$tmp/demo.txt" >"$tmp/demo.shape"
if ! diff -u --label README.md --label 'make demo' "$tmp/readme.shape" "$tmp/demo.shape" >"$tmp/diff"; then
    echo "demo-test: the README's transcript (-) and the demo's real output (+) differ, numbers masked:" >&2
    cat "$tmp/diff" >&2
    echo "demo-test: the real output was:" >&2
    cat "$tmp/demo.txt" >&2
    fail "update the transcript in README.md"
fi
printf 'demo-test: README transcript matches the demo (%d lines)\n' "$(wc -l <"$tmp/demo.txt")"
