#!/usr/bin/env bash
# The README's second command: install, build, and run the whole test suite with ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/build.sh"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure --timeout 600 -j "$(nproc)" || {
  rc=$?
  bash "$root/scripts/show_failures.sh" .
  exit "$rc"
}
