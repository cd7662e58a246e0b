#!/usr/bin/env bash
# After a failed ctest run: each failed test's own output again, last, where a CI log's tail
# shows it (ctest prints it mid-run, among the other tests' lines). Usage:
#   ./scripts/show_failures.sh BUILD_DIR
set -uo pipefail
dir="${1:?usage: show_failures.sh BUILD_DIR}"
failed="$dir/Testing/Temporary/LastTestsFailed.log"
[ -s "$failed" ] || exit 0
echo "== failed tests in $dir, their output again:"
cut -d: -f2- "$failed" | while IFS= read -r name; do
  echo "---- $name"
  bash "$(dirname "${BASH_SOURCE[0]}")/test_output.sh" "$dir" "$name" | tail -n 80
done
