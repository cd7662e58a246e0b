#!/usr/bin/env bash
# After a failed ctest run: each failed test's own output again, last, where a CI log's tail
# shows it (ctest prints it mid-run, among the other tests' lines). Usage:
#   ./scripts/show_failures.sh BUILD_DIR
set -uo pipefail
dir="${1:?usage: show_failures.sh BUILD_DIR}"
failed="$dir/Testing/Temporary/LastTestsFailed.log"
log="$dir/Testing/Temporary/LastTest.log"
[ -s "$failed" ] || exit 0
echo "== failed tests in $dir, their output again:"
cut -d: -f2- "$failed" | while IFS= read -r name; do
  echo "---- $name"
  # The block from '<n>/<total> Testing: NAME' to its 'end time' line, at most its last 80 lines.
  awk -v name="$name" '
    $0 ~ "^[0-9]+/[0-9]+ Testing: " && substr($0, index($0, "Testing: ") + 9) == name { on = 1 }
    on { print }
    on && index($0, "\"" name "\" end time") == 1 { exit }
  ' "$log" | tail -n 80
done
