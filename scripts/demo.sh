#!/usr/bin/env bash
# The README's first command: install, build, and run `feedscope demo` (arguments pass through).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/build.sh"
exec "${BUILD_DIR:-$root/build}/cli/feedscope" demo "$@"
