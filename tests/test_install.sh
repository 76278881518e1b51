#!/usr/bin/env bash
# test_install.sh -- the installed credisson works the way C libraries are used.
#
# usage: tests/test_install.sh BUILD_DIR SOURCE_DIR     (registered with ctest as "install")
#
#   1. `cmake --install BUILD_DIR --prefix SCRATCH`: the header, the shared library with
#      its SONAME links, the static library, the CMake package, the pkg-config file, the
#      CLI and its man page are where they belong.
#   2. A consumer project built with find_package(credisson) (CMAKE_PREFIX_PATH=SCRATCH),
#      linked once to credisson::credisson and once to credisson::credisson_static, and
#      one built with `pkg-config --cflags --libs credisson` (PKG_CONFIG_PATH=SCRATCH),
#      once run with LD_LIBRARY_PATH and once linked with an rpath to the .pc's libdir
#      and run without: each takes, checks and releases a lock on a redis-server this
#      script starts. The installed CLI carries the library's code itself (it links the
#      library's internals statically), so it runs with no LD_LIBRARY_PATH from any
#      prefix, also after the whole prefix is moved elsewhere.
#   3. `cpack -G DEB`: the three packages (libcredissonN, libcredisson-dev, credisson),
#      unpacked with `dpkg -x` into a scratch root (nothing is installed system-wide);
#      the unpacked CLI runs (no LD_LIBRARY_PATH), and the consumers build and run
#      against the unpacked tree.
# Everything lives in one temporary directory, removed at exit with the server.
set -euo pipefail

build=$(cd "${1:?usage: test_install.sh BUILD_DIR SOURCE_DIR}" && pwd)
src=$(cd "${2:?usage: test_install.sh BUILD_DIR SOURCE_DIR}" && pwd)
redis_server=${CRD_REDIS_SERVER:-redis-server}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/credisson-install.XXXXXX")
server_pid=
cleanup() {
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

step() { printf 'install-test: %s\n' "$*"; }
fail() {
    printf 'install-test: FAILED: %s\n' "$*" >&2
    exit 1
}
# Runs a command quietly; on failure shows its output and fails.
quiet() {
    local log="$tmp/last.log"
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        fail "$*"
    fi
}

# --- a private redis-server on a free loopback port -------------------------------------
# shellcheck source=scripts/redis_child.sh
source "$src/scripts/redis_child.sh"
start_redis_child "$redis_server" "$tmp" || fail "could not start $redis_server"
url="redis://127.0.0.1:$port"

# --- the consumer: one source, two ways to build it -----------------------------------
mkdir -p "$tmp/consumer"
cat >"$tmp/consumer/main.c" <<'C'
#include <credisson.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    if (strcmp(crd_version(), CRD_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s, library %s\n", CRD_VERSION_STRING, crd_version());
        return 1;
    }
    crd_options o;
    crd_options_init(&o);
    o.url = argv[1];
    crd_client *c = NULL;
    crd_status st = crd_client_new(&o, &c);
    if (st != CRD_OK) {
        fprintf(stderr, "client: %s: %s\n", crd_strerror(st), crd_client_errmsg(c));
        crd_client_free(c);
        return 1;
    }
    crd_lock *l = NULL;
    bool held = false;
    int rc = 1;
    if (crd_lock_new(c, argv[2], &l) == CRD_OK && crd_lock_acquire(l, 5000, CRD_LEASE_WATCHDOG) == CRD_OK &&
        crd_lock_is_held(l, &held) == CRD_OK && held && crd_lock_release(l) == CRD_OK)
        rc = 0;
    crd_metrics m;
    if (crd_client_metrics(c, &m, sizeof m) != CRD_OK || m.acquisitions != 1)
        rc = 1;
    crd_lock_free(l);
    crd_client_free(c);
    printf("consumer %s: %s\n", crd_version(), rc == 0 ? "lock taken and released" : "FAILED");
    return rc;
}
C
cat >"$tmp/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(credisson_consumer LANGUAGES C)
find_package(credisson 0.1 REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE credisson::credisson)
add_executable(consumer_static main.c)
target_link_libraries(consumer_static PRIVATE credisson::credisson_static)
CM

# consumers PREFIX LIBDIR TAG: builds and runs the three consumers against PREFIX.
consumers() {
    local prefix=$1 libdir=$2 tag=$3 out="$tmp/build-$3"
    step "$tag: find_package(credisson) consumer (shared and static)"
    quiet cmake -S "$tmp/consumer" -B "$out" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release
    grep -q "credisson_DIR:PATH=$prefix/" "$out/CMakeCache.txt" ||
        fail "$tag: find_package found $(grep credisson_DIR "$out/CMakeCache.txt"), not the one in $prefix"
    quiet cmake --build "$out"
    [[ $(LD_LIBRARY_PATH="$libdir" ldd "$out/consumer") == *"libcredisson.so.0 => $libdir/"* ]] ||
        fail "$tag: consumer does not load $libdir/libcredisson.so.0"
    [[ $(ldd "$out/consumer_static") != *libcredisson* ]] || fail "$tag: consumer_static is not static"
    LD_LIBRARY_PATH="$libdir" "$out/consumer" "$url" "install:$tag:cmake" || fail "$tag: cmake consumer"
    "$out/consumer_static" "$url" "install:$tag:static" || fail "$tag: static consumer"

    step "$tag: pkg-config consumer"
    local flags
    flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" \
        pkg-config --cflags --libs credisson) || fail "$tag: pkg-config does not know credisson"
    [[ $flags == *"-I$prefix/"* || $flags == *"-I$libdir/"* ]] || fail "$tag: pkg-config flags point elsewhere: $flags"
    # shellcheck disable=SC2086
    quiet cc -o "$out/consumer_pc" "$tmp/consumer/main.c" $flags
    LD_LIBRARY_PATH="$libdir" "$out/consumer_pc" "$url" "install:$tag:pkgconfig" || fail "$tag: pkg-config consumer"

    # What the README tells a consumer outside the system prefix: an rpath to the
    # .pc's libdir, and then no LD_LIBRARY_PATH.
    step "$tag: pkg-config consumer with -Wl,-rpath,\$(pkg-config --variable=libdir credisson)"
    local pc_libdir
    pc_libdir=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --variable=libdir credisson)
    [[ $(cd "$pc_libdir" && pwd -P) == $(cd "$libdir" && pwd -P) ]] ||
        fail "$tag: the .pc's libdir $pc_libdir is not $libdir"
    # shellcheck disable=SC2086
    quiet cc -o "$out/consumer_rpath" "$tmp/consumer/main.c" $flags -Wl,-rpath,"$pc_libdir"
    [[ $(loaded_from "$out/consumer_rpath") == "$(realpath "$libdir/libcredisson.so.0")" ]] ||
        fail "$tag: the rpath consumer does not load $libdir/libcredisson.so.0"
    env -u LD_LIBRARY_PATH "$out/consumer_rpath" "$url" "install:$tag:rpath" || fail "$tag: rpath consumer"
}

# loaded_from PROGRAM: the real path of the libcredisson.so.0 it loads with no
# LD_LIBRARY_PATH ("" when none is found).
loaded_from() {
    local so
    so=$(env -u LD_LIBRARY_PATH ldd "$1" | awk '$1 == "libcredisson.so.0" && $3 ~ /^\// {print $3}')
    [[ -z $so ]] || realpath "$so"
}

# installed_cli BIN TAG: the CLI at BIN runs with no LD_LIBRARY_PATH and needs no
# libcredisson.so at all (it links the library's internals statically).
installed_cli() {
    local bin=$1 tag=$2
    step "$tag: $bin without LD_LIBRARY_PATH"
    [[ $(objdump -p "$bin" | awk '$1 == "NEEDED" {print $2}') != *libcredisson* ]] ||
        fail "$tag: the CLI needs a shared libcredisson: $(objdump -p "$bin" | grep NEEDED)"
    [[ $(env -u LD_LIBRARY_PATH "$bin" --version) =~ ^credisson\ [0-9]+\.[0-9]+\.[0-9]+$ ]] ||
        fail "$tag: installed CLI --version"
    env -u LD_LIBRARY_PATH "$bin" --url "$url" run "install:$tag:cli" -- true || fail "$tag: installed CLI run"
}

# --- 1. cmake --install -----------------------------------------------------------------
prefix="$tmp/prefix"
step "cmake --install into $prefix"
quiet cmake --install "$build" --prefix "$prefix"
libdir=$(dirname "$(find "$prefix" -name 'libcredisson.so.*.*.*' | head -1)")
[[ -d $libdir ]] || fail "no libcredisson.so.X.Y.Z installed"
for f in include/credisson.h include/credisson/libuv.h include/credisson/libevent.h \
    bin/credisson share/man/man1/credisson.1; do
    [[ -f $prefix/$f ]] || fail "missing $f"
done
for f in libcredisson.so libcredisson.so.0 libcredisson.a pkgconfig/credisson.pc \
    cmake/credisson/credissonConfig.cmake cmake/credisson/credissonConfigVersion.cmake \
    cmake/credisson/credissonTargets.cmake; do
    [[ -e $libdir/$f ]] || fail "missing ${libdir#"$prefix"/}/$f"
done
[[ $(readlink "$libdir/libcredisson.so") == libcredisson.so.0 ]] || fail "libcredisson.so does not link to .so.0"
soname=$(objdump -p "$libdir/libcredisson.so.0" | awk '$1 == "SONAME" {print $2}')
[[ $soname == libcredisson.so.0 ]] || fail "SONAME is '$soname'"
cmp -s "$src/man/credisson.1" "$prefix/share/man/man1/credisson.1" || fail "installed man page differs from man/credisson.1"
if command -v groff >/dev/null; then
    warnings=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$prefix/share/man/man1/credisson.1" 2>&1)
    [[ -z $warnings ]] || fail "man page: $warnings"
fi
installed_cli "$prefix/bin/credisson" prefix
# A prefix is relocatable: the same tree moved elsewhere still runs.
cp -a "$prefix" "$tmp/moved"
installed_cli "$tmp/moved/bin/credisson" moved
consumers "$prefix" "$libdir" prefix

# The C++ header, installed beside the C one: a consumer of the standard's lock types.
if command -v c++ >/dev/null; then
    step "prefix: C++ consumer of <credisson.hpp> (std::unique_lock)"
    cat >"$tmp/consumer/main.cpp" <<'CPP'
#include <credisson.hpp>
#include <cstdio>
#include <mutex>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    try {
        credisson::client c(argv[1]);
        credisson::reentrant_lock l(c, argv[2]);
        std::unique_lock<credisson::reentrant_lock> held(l, std::defer_lock);
        if (!held.try_lock_for(std::chrono::seconds(5)) || !l.is_held())
            return 1;
    } catch (const credisson::error &e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    std::puts("C++ consumer: lock taken and released");
    return 0;
}
CPP
    quiet c++ -std=c++17 -Wall -Wextra -Werror -o "$tmp/consumer_cpp" "$tmp/consumer/main.cpp" \
        -I"$prefix/include" -L"$libdir" -lcredisson
    LD_LIBRARY_PATH="$libdir" "$tmp/consumer_cpp" "$url" "install:prefix:cpp" || fail "C++ consumer"
else
    step "prefix: no c++ compiler: the C++ consumer is skipped"
fi

# The Python package, installed the README's way (a virtual environment that sees Debian's
# packages, pip offline and without build isolation: nothing downloaded, nothing compiled),
# from a copy so that the build leaves nothing in the source tree; it finds the installed
# libcredisson.so.0 by its soname.
if [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import ensurepip, wheel' 2>/dev/null; then
    step "prefix: Python package (python3 -m venv --system-site-packages; pip install --no-index --no-build-isolation)"
    cp -r "$src/bindings/python" "$tmp/python-src"
    rm -rf "$tmp/python-src/tests"
    quiet /usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
    quiet "$tmp/venv/bin/pip" install --no-index --no-build-isolation "$tmp/python-src"
    (cd "$tmp" && env -u CREDISSON_LIBRARY -u PYTHONPATH LD_LIBRARY_PATH="$libdir" "$tmp/venv/bin/python" - "$url" <<'PY'
import sys
import credisson

assert credisson.library_path == "libcredisson.so.0", credisson.library_path
assert credisson.__file__.startswith(sys.prefix), credisson.__file__
client = credisson.Client(sys.argv[1])
with client.lock("install:prefix:python", wait=5) as lock:
    assert lock.is_held()
client.close()
print("Python consumer: lock taken and released")
PY
    ) || fail "Python package"
else
    step "prefix: no /usr/bin/python3 with ensurepip and wheel (python3-venv, python3-wheel): the Python package is skipped"
fi

# --- 2. cpack -G DEB, dpkg -x -----------------------------------------------------------
step "cpack -G DEB"
quiet cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/deb"
shopt -s nullglob
debs=("$tmp"/deb/*.deb)
((${#debs[@]} == 3)) || fail "expected 3 .deb files, got: ${debs[*]##*/}"
root="$tmp/root"
for d in "${debs[@]}"; do
    pkg=$(dpkg-deb -f "$d" Package)
    printf 'install-test:   %-20s %s  Depends: %s\n' "$pkg" "$(dpkg-deb -f "$d" Version)" "$(dpkg-deb -f "$d" Depends)"
    dpkg -x "$d" "$root"
done
for p in libcredisson0 libcredisson-dev credisson; do
    ls "$tmp"/deb/"${p}"_*.deb >/dev/null 2>&1 || fail "no package $p"
done
[[ $(dpkg-deb -f "$tmp"/deb/credisson_*.deb Depends) == *"libcredisson0 (= "* ]] || fail "CLI package does not depend on libcredisson0"
[[ $(dpkg-deb -f "$tmp"/deb/libcredisson-dev_*.deb Depends) == *"libcredisson0 (= "* ]] || fail "-dev package does not depend on libcredisson0"
[[ $(dpkg-deb -c "$tmp"/deb/libcredisson0_*.deb) != *include/* ]] || fail "the runtime package holds headers"
[[ $(dpkg-deb -c "$tmp"/deb/credisson_*.deb) == *man1/credisson.1* ]] || fail "no man page in the CLI package"
dlib=$(dirname "$(find "$root" -name 'libcredisson.so.0' | head -1)")
[[ $dlib == "$root"/usr/* ]] || fail "the packages do not install under /usr"
ver=$(LD_LIBRARY_PATH="$dlib" "$root/usr/bin/credisson" --version) || fail "unpacked CLI --version"
step "unpacked CLI: $ver"
installed_cli "$root/usr/bin/credisson" deb
[[ $(LD_LIBRARY_PATH="$dlib" "$root/usr/bin/credisson" --url "$url" status --json install:deb) == *'"kind":"none"'*'"identity":true}'* ]] ||
    fail "unpacked CLI status --json"
consumers "$root/usr" "$dlib" deb
step "ok"
