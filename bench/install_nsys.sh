#!/usr/bin/env bash
# Unpack Debian's nsight-systems (non-free; nsys 2022.4) under bench/.nsys for `nsys stats`.
# Its package depends on libcuda, which a CPU machine lacks, so it is unpacked, not installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f /etc/apt/sources.list.d/census-nonfree.sources ]; then
  cat > /etc/apt/sources.list.d/census-nonfree.sources <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
apt-get update -qq
tmp=$(mktemp -d)
(cd "$tmp" && apt-get download -qq nsight-systems nsight-systems-target)
for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$here/.nsys"; done
rm -rf "$tmp"
find "$here/.nsys" -type f -name nsys -path '*target-linux-x64*'
