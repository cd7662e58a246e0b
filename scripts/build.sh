#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh), configures once, builds. Idempotent and incremental.
# BUILD_DIR (default: build) and CMAKE_ARGS (extra configure flags) may be set.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

bash "$root/scripts/setup.sh"
if [ ! -f "$build/build.ninja" ]; then
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$build" -G Ninja ${CMAKE_ARGS:-}
fi
cmake --build "$build"
