#!/usr/bin/env bash
# Fuzzes every parser of outside input (fuzz/) with libFuzzer for a bounded time, one target after
# another: builds BUILD_DIR (default build-fuzz) with clang, ASan and UBSan, then runs each target
# for FUZZ_SECONDS (default 60) seconds. The checked-in corpus fuzz/corpus/<target> is a read-only
# seed; new inputs go to BUILD_DIR/corpus/<target>, crash artifacts to BUILD_DIR/crashes/<target>,
# libFuzzer's output to BUILD_DIR/logs/<target>.log. Exits 1 when a target crashed, leaked, timed
# out or ran out of memory, 2 when clang or libFuzzer is missing.
#   FUZZ_TARGETS="jpeg_fuzz config_fuzz"  only these targets
#   FUZZ_ARGS="-use_value_profile=1"       extra libFuzzer flags
# Non-interactive; the build uses all cores unless CMAKE_BUILD_PARALLEL_LEVEL says otherwise.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build-fuzz}"
seconds="${FUZZ_SECONDS:-60}"
read -r -a targets <<<"${FUZZ_TARGETS:-jpeg_fuzz records_index_fuzz config_fuzz proc_parsers_fuzz shards_fuzz}"
read -r -a extra <<<"${FUZZ_ARGS:-}"

missing() {
  echo "fuzz: $1. Install the Debian packages clang and libclang-rt-14-dev (libFuzzer's runtime):" >&2
  echo "  sudo apt-get install -y clang libclang-rt-14-dev" >&2
  exit 2
}
if ! command -v clang >/dev/null || ! command -v clang++ >/dev/null; then
  missing "clang/clang++ not found"
fi
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  >"$probe/probe.cc"
clang++ -fsanitize=fuzzer,address,undefined "$probe/probe.cc" -o "$probe/probe" 2>"$probe/err" ||
  missing "clang++ cannot link a libFuzzer target ($(head -c 300 "$probe/err"))"

if [ -f "$build/CMakeCache.txt" ] && ! grep -q '^FEEDSCOPE_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  echo "fuzz: $build is not a FEEDSCOPE_FUZZ build; remove it or set BUILD_DIR" >&2
  exit 2
fi
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DFEEDSCOPE_FUZZ=ON
fi
cmake --build "$build" --target "${targets[@]}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
mkdir -p "$build/logs"
failed=()
rows=()
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  crashes="$build/crashes/$t"
  log="$build/logs/$t.log"
  mkdir -p "$work" "$crashes"
  args=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
        -artifact_prefix="$crashes/")
  [ -f "$root/fuzz/$t.dict" ] && args+=(-dict="$root/fuzz/$t.dict")
  echo "fuzz: $t for ${seconds}s (log: $log)"
  status=0
  start=$SECONDS
  "$build/fuzz/$t" "${args[@]}" "${extra[@]}" "$work" "$root/fuzz/corpus/$t" </dev/null >"$log" 2>&1 ||
    status=$?
  elapsed=$((SECONDS - start))
  # libFuzzer's last status line ("#N DONE cov: C ft: F corp: ...") and its final stats.
  last="$(grep -E '^#[0-9]+[[:space:]].*cov: ' "$log" | tail -n 1 || true)"
  cov="$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")"
  ft="$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")"
  runs="$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log" | tail -n 1)"
  rate="$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+)/\1/p' "$log" | tail -n 1)"
  result="ok"
  if [ "$status" -ne 0 ]; then
    result="FAILED (exit $status)"
    failed+=("$t")
  fi
  rows+=("$(printf '%-20s %8s %12s %8s %6s %7s  %s' "$t" "$elapsed" "${runs:-?}" "${rate:-?}" \
    "${cov:-?}" "${ft:-?}" "$result")")
done

echo
printf '%-20s %8s %12s %8s %6s %7s  %s\n' target seconds executions exec/s cov ft result
printf '%s\n' "${rows[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo
  for t in "${failed[@]}"; do
    echo "fuzz: $t failed; the end of $build/logs/$t.log:"
    grep -E 'ERROR|SUMMARY|Test unit written|runtime error|terminate|aborting' "$build/logs/$t.log" |
      tail -n 8 | sed 's/^/  /'
    for a in "$build/crashes/$t"/*; do
      [ -e "$a" ] && echo "  reproduce: $build/fuzz/$t $a"
    done
  done
  exit 1
fi
