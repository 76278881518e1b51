#!/usr/bin/env bash
# test_cli_api.sh -- the CLI is a client of the public API only (issue #45): no file of
# cli/ includes a header of src/, and no object file of the CLI refers to a library
# internal (an undefined crd__ symbol in `nm -u`).
#
# usage: tests/test_cli_api.sh SOURCE_DIR 'OBJ;OBJ;...'   (ctest cli_public_api)
#
# Before it looks at the real files it shows that each check can fail: a probe object that
# calls crd__probe and a probe source that includes "internal.h" must both be caught.
set -euo pipefail
src=${1:?usage: test_cli_api.sh SOURCE_DIR OBJECTS}
IFS=';' read -r -a objs <<< "${2:?usage: test_cli_api.sh SOURCE_DIR OBJECTS}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/credisson-cli-api.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "cli_public_api: FAILED: $*" >&2
    exit 1
}

internal_symbols() { nm -u "$@" | awk '$NF ~ /^crd__/ {print $NF}' | sort -u; }
src_includes() {
    # Every #include of cli/ that names a header of src/ in quotes (by name or by path: every
    # layer's folder, src/base/base.h ... src/client/inspect.h, and src/internal.h), or any
    # header by a path through src/. A system header of the same name in angle brackets
    # (<sys/wait.h> and src/wait/wait.h) is not one.
    local headers
    headers=$(cd "$src/src" && find . -name '*.h' -printf '%f\n' | sort -u | paste -sd'|')
    grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*(\"([^\"]*/)?($headers|internal\.h)\"|[<\"]([^>\"]*/)?src/)" \
        "$@" || true
}

# The checks catch what they are meant to catch.
cc=${CC:-cc}
printf 'extern void crd__probe(void);\nvoid probe(void) { crd__probe(); }\n' >"$tmp/probe.c"
"$cc" -c -o "$tmp/probe.o" "$tmp/probe.c"
[[ -n $(internal_symbols "$tmp/probe.o") ]] || fail "the nm check does not see crd__probe"
printf '#include "internal.h"\n#include <credisson.h>\n' >"$tmp/probe_include.c"
[[ -n $(src_includes "$tmp/probe_include.c") ]] || fail "the include check does not see internal.h"
printf '#include "locks.h"\n' >"$tmp/probe_layer.c"
[[ -n $(src_includes "$tmp/probe_layer.c") ]] || fail "the include check does not see a layer's header"

# The real CLI.
[[ ${#objs[@]} -gt 5 ]] || fail "expected the CLI's object files, got: ${objs[*]}"
bad=$(internal_symbols "${objs[@]}")
[[ -z $bad ]] || fail "the CLI's objects use library internals: $(echo $bad)"
inc=$(src_includes "$src"/cli/*.c "$src"/cli/*.h)
[[ -z $inc ]] || fail "cli/ includes headers of src/: $inc"
grep -q 'crd_' <(nm -u "${objs[@]}") || fail "the CLI's objects use no crd_ function at all?"
echo "cli_public_api: ${#objs[@]} objects, no crd__ symbol; cli/ includes no header of src/"
