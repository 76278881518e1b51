#!/usr/bin/env bash
# Builds hiredis 1.x from Debian's own source package (trixie's) into a private prefix
# for `make test-hiredis1`: scripts/hiredis1.sh DIR puts everything under DIR and prints
# the prefix (DIR/prefix) on its last line.
#
# apt is pointed at a sources list, a package-list directory and a cache of its own
# (DIR/apt), holding one deb-src line for trixie: the system's sources, package lists,
# installed packages and dpkg state are never touched, and `apt-get source` is the only
# thing that list is used for. Nothing is installed system-wide: hiredis is built with
# CMake (so that credisson finds it through hiredis's CMake package, as users of hiredis
# 1.x do) and installed into DIR/prefix. A second run reuses what the first fetched.
# Needs dpkg-dev (dpkg-source, in scripts/deps.sh), cmake and a C compiler; as any user.
set -euo pipefail
dir=${1:?usage: scripts/hiredis1.sh DIR}
suite=${HIREDIS1_SUITE:-trixie}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
apt="$dir/apt"
prefix="$dir/prefix"

if [ ! -f "$prefix/lib/cmake/hiredis/hiredis-config.cmake" ] &&
   [ ! -f "$prefix/share/hiredis/hiredis-config.cmake" ]; then
    if ! ls -d "$dir"/src/hiredis-1.*/ >/dev/null 2>&1; then
        mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/sources.list.d" \
            "$dir/src"
        printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
            "${HIREDIS1_MIRROR:-http://deb.debian.org/debian}" "$suite" >"$apt/sources.list"
        aptopts=(-o "Dir::Etc::SourceList=$apt/sources.list"
                 -o "Dir::Etc::SourceParts=$apt/sources.list.d"
                 -o "Dir::State::Lists=$apt/lists"
                 -o "Dir::Cache=$apt/cache"
                 -o "APT::Sandbox::User=$(id -un)"
                 -o "Acquire::Languages=none")
        echo "hiredis1: apt-get update of a private deb-src list ($suite; $apt)"
        apt-get "${aptopts[@]}" update -qq
        echo "hiredis1: apt-get source hiredis/$suite"
        (cd "$dir/src" && apt-get "${aptopts[@]}" source -qq "hiredis/$suite" >/dev/null)
    fi
    src=$(ls -d "$dir"/src/hiredis-1.*/ | head -n 1)
    echo "hiredis1: building $(basename "$src") into $prefix"
    log="$dir/hiredis-build.log"
    if ! { cmake -S "$src" -B "$dir/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
               -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
               -DDISABLE_TESTS=ON -DENABLE_SSL=OFF &&
           cmake --build "$dir/build" -j"${JOBS:-2}" &&
           cmake --install "$dir/build"; } >"$log" 2>&1; then
        cat "$log" >&2
        echo "hiredis1: the hiredis build failed (output above, in $log)" >&2
        exit 1
    fi
fi
echo "$prefix"
