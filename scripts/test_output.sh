#!/usr/bin/env bash
# The output of one test in BUILD_DIR's last ctest run, from its '<n>/<total> Testing: NAME' line
# in Testing/Temporary/LastTest.log to its 'end time' line. Usage:
#   ./scripts/test_output.sh BUILD_DIR NAME
set -uo pipefail
dir="${1:?usage: test_output.sh BUILD_DIR NAME}"
name="${2:?usage: test_output.sh BUILD_DIR NAME}"
awk -v name="$name" '
  $0 ~ "^[0-9]+/[0-9]+ Testing: " && substr($0, index($0, "Testing: ") + 9) == name { on = 1 }
  on { print }
  on && index($0, "\"" name "\" end time") == 1 { exit }
' "$dir/Testing/Temporary/LastTest.log"
