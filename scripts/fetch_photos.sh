#!/usr/bin/env bash
# Real photographs for the accuracy checks of images:DIR (tests/integration/photo_parity_test.cc
# and docs/benchmarks.md's accuracy table), from a Debian package: mate-backgrounds' nature
# photographs and its elephant photograph at three sizes (640x480 to 5640x3172), laid out as an ImageFolder.
# Nothing is installed: the .deb is fetched with apt-get download and unpacked into a scratch folder.
#   ./scripts/fetch_photos.sh [DIR]      (default: ${TMPDIR:-/tmp}/feedscope-photos)
set -euo pipefail
out="${1:-${TMPDIR:-/tmp}/feedscope-photos}"
if [ -d "$out/nature" ] && [ -d "$out/elephants" ]; then
  echo "$out"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download mate-backgrounds >/dev/null 2>&1) || {
  echo "fetch_photos: apt-get download mate-backgrounds failed (no Debian archive reachable?)" >&2
  exit 4
}
dpkg-deb -x "$work"/mate-backgrounds_*.deb "$work/x"
mkdir -p "$out/nature" "$out/elephants"
cp "$work"/x/usr/share/backgrounds/mate/nature/*.jpg "$out/nature/"
cp "$work"/x/usr/share/backgrounds/mate/abstract/Elephants*.jpg "$out/elephants/"
echo "$out"
