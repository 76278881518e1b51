#!/usr/bin/env bash
# Installs valkey-server and valkey-tools (Valkey 8) from Debian's bookworm-backports for
# `make test-valkey`, if they are missing. Adds the bookworm-backports suite to apt's
# sources only when no source names it yet, and installs only these two packages from
# it (apt's default pin keeps everything else on bookworm). Both packages install beside
# redis-server and redis-tools: their programs are valkey-server, valkey-cli and so on
# (the redis-* names would come from valkey-redis-compat, which is not installed).
# As root it runs apt-get itself; otherwise it prints the commands to run and fails.
set -euo pipefail
pkgs=(valkey-server valkey-tools)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sources=/etc/apt/sources.list.d/backports.sources
has_backports() {
    grep -qsE '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
        /etc/apt/sources.list.d/*.sources
}
if [ "$(id -u)" -ne 0 ]; then
    echo "valkey-deps: missing packages; run:" >&2
    has_backports || echo "  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' | sudo tee $sources" >&2
    echo "  sudo apt-get update && sudo apt-get install -y -t bookworm-backports ${missing[*]}" >&2
    exit 1
fi
if ! has_backports; then
    echo "valkey-deps: adding bookworm-backports to apt's sources ($sources)"
    cat >"$sources" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
echo "valkey-deps: installing ${missing[*]} from bookworm-backports"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends -t bookworm-backports "${missing[@]}" >/dev/null
