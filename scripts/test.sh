#!/usr/bin/env bash
# The README's second command: install, build, and run the whole test suite with ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/build.sh"
build="${BUILD_DIR:-$root/build}"
# Real photographs from a Debian package for images:DIR's accuracy test against torchvision
# (tests/integration/photo_parity_test.cc); fetched once into the build folder. Without a Debian
# archive that test skips, saying so.
if photos="$(bash "$root/scripts/fetch_photos.sh" "$build/photos")"; then
  export FEEDSCOPE_PHOTOS="$photos"
fi
cd "$build"
ctest --output-on-failure --timeout 600 -j "$(nproc)" || {
  rc=$?
  bash "$root/scripts/show_failures.sh" .
  exit "$rc"
}
