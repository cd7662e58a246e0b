#!/usr/bin/env bash
# Builds feedscope on a lent GPU machine and runs there what CI cannot: the tests that need a GPU,
# and the GPU measurements. That machine reaches no package registry: the Debian packages feedscope
# needs travel as .deb files that scripts/device_prepare.sh fetched beforehand, and are unpacked
# here into a prefix outside / (never into /: that can break the machine). libtorch is the
# machine's own CUDA one, from python3's torch.
#
# A device call runs at most 10 minutes, the machine stays warm only 30 s after it, and a session
# has 15 minutes of device time, the machine's start included: so one call, from a bare machine,
# that does everything it needs within a deadline and prints its table last:
#
#   bash scripts/device_prepare.sh; bash scripts/device_programs_prepare.sh EXAMPLES NANOGPT  (here)
#   run(command: "bash scripts/device_check.sh one-call", carry: [".device-debs", ".device-programs"],
#       timeout_s: 560)
#
# usage: scripts/device_check.sh [--allow-no-gpu] [--torch-prefix DIR|system] PHASE...
#   PHASE      one-call | tracing | gpu-tests | measure
#     one-call   everything, in one call under the deadline, most important first, each step under
#                its own budget: build every test and benchmark, the GPU tests; the copy hidden
#                behind the step (bench/h2d_bench --overlap-only); tracing's cost (the MLP loop
#                bare, watched with a no-op injection, traced whole, sampled; 2 interleaved
#                pairs) after round four's cases (round_four_cases: a sampled .item() loop, a
#                feedscope.DataLoader on CUDA, 2 DDP ranks, test_dataloader's GpuTest (a side-stream
#                prefetcher), imagenet's short epochs); the MLP's
#                batch and CPU predictions against 3 runs of each change, and `run` sampled beside
#                `run` traced whole (4 s each); public GPU programs
#                (imagenet at 2 workers and as advised, nanoGPT compiled, imagenet --dummy
#                resnet50, imagenet at 12 workers); the classic cases. Each step records what
#                feedscope received (FEEDSCOPE_RECORD_DIR) for tests/fixtures/gpu/. Ends with a
#                table of at most 30 lines.
#     tracing    a short second call: build feedscope and its injection library; the MLP through
#                `run`; tracing's cost split by part (FEEDSCOPE_CUPTI_RUNTIME/_DRIVER/_SYNC) and
#                sampled as in one-call (0.2 s in 2 s), between bare runs: FEEDSCOPE_TRACING_ROUNDS
#                rounds (default 1), then a last bare run.
#     gpu-tests  unpack the .debs into the prefix, configure (Release, CUDA on, sm_90), build every
#                test with all the machine's cores, print the compiler and where each library came
#                from; run the tests that need a GPU (ctest -R "$GPU_TESTS": every *Gpu* test and
#                the loaders of CUPTI, NVML and the CUDA probe); list what skipped and why; fail if
#                a GPU test skipped. CI runs every other test.
#     measure    unpack, configure and build only what the measurements run (feedscope,
#                h2d_bench, item_sync_bench); print which libcupti a GPU run loaded; H2D bandwidth
#                (bench/h2d_bench), the loader's copy hidden behind a step, and the classic cases
#                as feedscope runs, each writing its report.json. Every measurement has a time
#                budget, and none starts, or runs on, past the deadline.
#   --allow-no-gpu   a dry run on a machine without a GPU: the GPU tests and measurements then
#                    say "no device" without making the exit code non-zero
#   --torch-prefix   where TorchConfig.cmake is found: DIR, or 'system' for CMake's own search
#                    (Debian's libtorch-dev); default: python3's torch.utils.cmake_prefix_path
#
# Environment: OUT (results; the device tool sets it; default BUILD_DIR/device-out),
# BUILD_DIR (build-device), FEEDSCOPE_DEPS_PREFIX (/tmp/fsdeps), FEEDSCOPE_DEVICE_DEADLINE_S (480,
# counted from the script's start: what would end past it is skipped or stopped, so the summary
# is written well inside the device tool's 10-minute limit), FS_IMAGES_MODEL (the classic image
# run's model options), JOBS (build parallelism; default: every core), GPU_TESTS (the ctest regex
# of gpu-tests), FEEDSCOPE_DEVICE_ONLY (a regex: only the measurements whose name matches run, the
# others are left out without failing; e.g. '^watch-' to run a failing part again),
# FEEDSCOPE_DEVICE_CMAKE_ARGS (more configure options, e.g. "-DFEEDSCOPE_SANITIZE=address" with its
# own BUILD_DIR, to find a crash seen there), FEEDSCOPE_TRACING_ROUNDS (the tracing phase's rounds
# of its parts; default 1).
#
# What comes back under $OUT: device_check.log (everything printed), summary.md (the key figures)
# and reports.tar.gz (every report.json, trace.json of the GPU runs, bench output, ctest's JUnit).
# Exit code: 0 when the phase built, its tests passed with no GPU test skipped, and every
# measurement ran; 1 otherwise; 2 bad usage.
set -uo pipefail  # no -e: a failed measurement is recorded and the next one still runs

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${FEEDSCOPE_DEPS_PREFIX:-/tmp/fsdeps}"
build="${BUILD_DIR:-$root/build-device}"
out="${OUT:-$build/device-out}"
debs="$root/.device-debs"
work="$build/device-work"
deadline_s="${FEEDSCOPE_DEVICE_DEADLINE_S:-480}"
images_model="${FS_IMAGES_MODEL:---model cnn --hidden 1024 --layers 4}"
jobs="${JOBS:-$(nproc)}"
gpu_tests="${GPU_TESTS:-Gpu|CuptiApiTest|CuptiProbe|NvmlLibraryTest|NvmlSourceTest|DeviceProbe}"
only="${FEEDSCOPE_DEVICE_ONLY:-}"
extra_cmake=()
read -r -a extra_cmake <<<"${FEEDSCOPE_DEVICE_CMAKE_ARGS:-}"

usage() { sed -n '2,/^set -uo/{/^#/{s/^# \{0,1\}//;p}}' "${BASH_SOURCE[0]}"; }

allow_no_gpu=0
torch_prefix=""
phases=()
while [ $# -gt 0 ]; do
  case "$1" in
    --allow-no-gpu) allow_no_gpu=1 ;;
    --torch-prefix)
      [ $# -ge 2 ] || { usage >&2; exit 2; }
      torch_prefix="$2"
      shift ;;
    gpu-tests|measure|one-call|tracing) phases+=("$1") ;;
    -h|--help) usage; exit 0 ;;
    *) echo "device_check: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
[ ${#phases[@]} -gt 0 ] || { echo "device_check: name a phase: one-call, gpu-tests or measure" >&2; usage >&2; exit 2; }
case "$prefix" in
  /|/usr|/usr/*|"") echo "device_check: FEEDSCOPE_DEPS_PREFIX=$prefix would unpack over the system" >&2; exit 2 ;;
esac

mkdir -p "$out" "$work"
exec > >(tee -a "$out/device_check.log") 2>&1

failures=()
phase_times=()
section() { printf '\n=== %s (%d s in) ===\n' "$1" "$SECONDS"; }
fail() { failures+=("$1"); echo "device_check: FAILED: $1"; }
timed() {  # timed NAME COMMAND...: runs a phase, records its seconds
  local name="$1" begin=$SECONDS
  shift
  "$@"
  local rc=$?
  phase_times+=("$name $((SECONDS - begin)) s")
  echo "device_check: phase $name took $((SECONDS - begin)) s (exit $rc)"
  return $rc
}

# --- The machine ----------------------------------------------------------------------------------
section "machine"
[ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null && export PATH="/usr/local/cuda/bin:$PATH"
grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release 2>/dev/null || echo "os: no /etc/os-release"
echo "kernel $(uname -r) $(uname -m), $(nproc) cores," \
     "$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) memory"
gpu_present=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L; then
  gpu_present=1
  nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
             --format=csv,noheader || true
else
  echo "nvidia-smi: no GPU listed"
fi
if command -v nvcc >/dev/null; then nvcc --version | tail -n 2; else echo "nvcc: not found"; fi
echo "c++: $(c++ --version 2>/dev/null | head -n 1)"
echo "cmake: $(cmake --version | head -n 1), ninja $(ninja --version 2>/dev/null || echo 'not found')"
python3 - <<'EOF' || echo "python3: torch could not be imported"
import sys, torch
print(f"python3 {sys.version.split()[0]} ({sys.executable}); torch {torch.__version__}, "
      f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
      f"sees a GPU: {torch.cuda.is_available()}"
      + (f" ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else ""))
print(f"torch C++ ABI: _GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}; "
      f"cmake prefix: {torch.utils.cmake_prefix_path}")
EOF
if [ $gpu_present -eq 0 ]; then
  if [ $allow_no_gpu -eq 1 ]; then
    echo "device_check: no device on this machine (--allow-no-gpu: a dry run)"
  else
    fail "no GPU on this machine (nvidia-smi lists none); --allow-no-gpu for a dry run"
  fi
fi
if [ -z "$torch_prefix" ]; then
  torch_prefix="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
  if [ -z "$torch_prefix" ]; then
    echo "device_check: python3 has no torch; --torch-prefix DIR|system says where libtorch is" >&2
    exit 1
  fi
  # Debian's libraries use the C++11 std::string; a torch built without it cannot link with them.
  if [ "$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')" != 1 ]; then
    echo "device_check: this torch was built with _GLIBCXX_USE_CXX11_ABI=0; the Debian packages" \
         "need 1" >&2
    exit 1
  fi
elif [ "$torch_prefix" = system ]; then
  torch_prefix=""
fi
multiarch="$(c++ -print-multiarch 2>/dev/null)"
multiarch="${multiarch:-x86_64-linux-gnu}"
libdir="$prefix/usr/lib/$multiarch"

# --- The Debian packages, unpacked into $prefix -------------------------------------------------------
# Their CMake configs and .pc files may name /usr; their symlinks may point into /. Each is turned
# to the prefix, or, for a base library device_prepare.sh left out (zlib), to the system's copy.
fix_symlinks() {
  local link target base stem rest soname system ldconfig
  ldconfig="$(command -v ldconfig || echo /sbin/ldconfig)"
  while IFS= read -r link; do
    target="$(readlink "$link")"
    case "$target" in /*) ;; *) continue ;; esac
    if [ -e "$prefix$target" ]; then
      ln -sfn "$prefix$target" "$link"
      echo "  symlink ${link#"$prefix"} -> $prefix$target"
      continue
    fi
    base="$(basename "$target")"  # libz.so.1.2.13: the system has it as libz.so.1
    stem="${base%%.so.*}"
    rest="${base#*.so.}"
    soname="$stem.so.${rest%%.*}"
    system="$("$ldconfig" -p | awk -v n="$soname" '$1 == n && /x86-64/ {print $NF; exit}')"
    if [ -n "$system" ]; then
      ln -sfn "$system" "$link"
      echo "  symlink ${link#"$prefix"} -> $system (the system's $soname; its package was left out)"
    else
      echo "  WARNING: symlink ${link#"$prefix"} -> $target: neither in the prefix nor a system $soname"
    fi
  done < <(find "$prefix" -type l)
}

fix_configs() {
  local configs=() f
  mapfile -t configs < <(grep -rlE '"/usr[/"]' "$prefix" --include='*.cmake')
  for f in "${configs[@]}"; do
    sed -i -E "s#\"/usr([/\"])#\"$prefix/usr\\1#g" "$f"
    echo "  cmake config ${f#"$prefix"}: /usr -> $prefix/usr"
  done
  # feedscope links prometheus-cpp::core only; the config would otherwise look for libcurl (for
  # the push library), which device_prepare.sh leaves behind with its dependencies.
  f="$libdir/cmake/prometheus-cpp/prometheus-cpp-config.cmake"
  sed -i 's/^set(PROMETHEUS_CPP_ENABLE_PUSH ON)$/set(PROMETHEUS_CPP_ENABLE_PUSH OFF)/' "$f"
  if ! grep -q '^set(PROMETHEUS_CPP_ENABLE_PUSH OFF)$' "$f"; then
    echo "device_check: could not turn prometheus-cpp's push component off in $f" >&2
    return 1
  fi
  echo "  cmake config ${f#"$prefix"}: push component off (no libcurl)"
  mapfile -t configs < <(find "$prefix" -name '*.pc')
  sed -i -E "s#^((exec_)?prefix|libdir|includedir)=/usr#\\1=$prefix/usr#; s#(-[IL])/usr/#\\1$prefix/usr/#g" \
    "${configs[@]}"
  echo "  pkg-config: ${#configs[@]} .pc files point into $prefix/usr"
  if grep -rnE '"/usr[/"]' "$prefix" --include='*.cmake'; then
    echo "device_check: the CMake configs above still name /usr" >&2
    return 1
  fi
}

unpack_debs() {
  local stamp f packages=("$debs"/*.deb)
  if ! ls "$debs"/*.deb >/dev/null 2>&1; then
    echo "device_check: no .deb files in $debs: run scripts/device_prepare.sh where apt works," \
         "and name .device-debs in the device call's carry" >&2
    return 1
  fi
  stamp="$(cd "$debs" && cksum ./*.deb)"
  if [ -f "$prefix/.unpacked" ] && [ "$(cat "$prefix/.unpacked")" = "$stamp" ]; then
    echo "device_check: $prefix holds these .debs already"
    return 0
  fi
  [ -f "$debs/MANIFEST" ] && head -n 1 "$debs/MANIFEST"
  rm -rf "$prefix"
  mkdir -p "$prefix"
  for f in "$debs"/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$f" "$prefix" || return 1
    else  # a system without dpkg: a .deb is an ar archive holding data.tar.*
      (cd "$prefix" && ar p "$f" "$(ar t "$f" | grep '^data\.tar')" | tar -xf - ) || return 1
    fi
  done
  echo "device_check: unpacked ${#packages[@]} packages into $prefix"
  fix_symlinks
  fix_configs || return 1
  if find "$prefix" -xtype l | grep .; then
    echo "  (the symlinks above point into packages left out; nothing feedscope uses)"
  fi
  echo "$stamp" >"$prefix/.unpacked"
}

use_prefix() {
  export PKG_CONFIG_PATH="$libdir/pkgconfig:$prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  # Test discovery runs the test programs during the build, and a library in the prefix may need
  # another one there (a dependency's RUNPATH is not the executable's).
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"  # torch's config: Hopper only
}

# --- build ----------------------------------------------------------------------------------------
# Where each of the packages' CMake configs, and each linked library, was found.
report_resolution() {
  local var value lib path bad=0 bin
  echo "device_check: CMake packages (want: under $prefix)"
  for var in TBB_DIR yaml-cpp_DIR prometheus-cpp_DIR civetweb_DIR spdlog_DIR fmt_DIR GTest_DIR \
             benchmark_DIR libjpeg-turbo_DIR CLI11_DIR nlohmann_json_DIR ZLIB_LIBRARY_RELEASE \
             Torch_DIR CUDAToolkit_BIN_DIR CUDAToolkit_CUPTI_INCLUDE_DIR CUDA_cupti_LIBRARY; do
    value="$(sed -n "s|^$var:[A-Z]*=||p" "$build/CMakeCache.txt" | head -n 1)"
    case "$var:$value" in
      Torch_DIR:*|CUDA*) printf '  %-32s %s\n' "$var" "${value:-unset}" ;;
      *:"$prefix"/*) printf '  %-32s %s\n' "$var" "$value" ;;
      *) printf '  %-32s %s   <-- NOT from the prefix\n' "$var" "${value:-unset}"; bad=1 ;;
    esac
  done
  echo "device_check: static libraries linked (GoogleTest)"
  grep -oE '[^ ]*lib(gtest|gtest_main|gmock)\.a' "$build/build.ninja" | sort -u | sed 's/^/  /'
  for bin in "$build/cli/feedscope" "$build/bench/loader_bench"; do
    [ -x "$bin" ] || continue
    echo "device_check: shared libraries of ${bin#"$build"/} (ldd)"
    while read -r lib _ path _; do
      case "$lib" in
        libtbb*|libyaml-cpp*|libprometheus*|libjpeg*|libturbojpeg*|libspdlog*|libfmt*|libbenchmark*|libcivetweb*)
          case "$path" in
            "$prefix"/*) printf '  %-28s %s\n' "$lib" "$path" ;;
            *) printf '  %-28s %s   <-- NOT from the prefix\n' "$lib" "$path"; bad=1 ;;
          esac ;;
        libz.so*) printf '  %-28s %s (the system'"'"'s: zlib1g is left out)\n' "$lib" "$path" ;;
        libtorch*|libc10*|libcudart*|libcupti*) printf '  %-28s %s\n' "$lib" "$path" ;;
      esac
    done < <(ldd "$bin")
  done
  return $bad
}

# build TARGET...: unpacks the .debs, configures where there is no build folder yet (a bare
# machine), builds the targets with every core; prints the compiler and where each library came
# from. A build folder kept from an earlier call on a still-warm machine only builds what changed.
build() {
  local begin=$SECONDS
  unpack_debs || { fail "unpacking the .debs"; return 1; }
  use_prefix
  if [ ! -f "$build/build.ninja" ]; then
    section "configure"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      "-DCMAKE_PREFIX_PATH=$prefix/usr${torch_prefix:+;$torch_prefix}" \
      -DFEEDSCOPE_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DFEEDSCOPE_WERROR=OFF \
      "-DCMAKE_CXX_FLAGS=-isystem $prefix/usr/include/$multiarch" "${extra_cmake[@]}" \
      || { fail "configure"; rm -f "$build/build.ninja"; return 1; }
  fi
  # This machine's compiler, not CI's GCC 12: what built the binaries measured here.
  local lang
  for lang in CXX CUDA; do
    echo "device_check: the $lang compiler CMake chose: $(sed -n -E \
      "s/^set\(CMAKE_${lang}_COMPILER(_ID|_VERSION)? \"(.*)\"\)$/\2/p" \
      "$build"/CMakeFiles/*/"CMake${lang}Compiler.cmake" | tr '\n' ' ')"
  done
  section "build ($jobs jobs): $*"
  local log="$work/build.log"
  if ! cmake --build "$build" -j "$jobs" --target "$@" 2>&1 | tee "$log"; then
    fail "build of $*"
    return 1
  fi
  echo "device_check: $(grep -c 'warning:' "$log") compiler warning lines in what this call built" \
       "(warnings are not errors here: FEEDSCOPE_WERROR=OFF)"
  report_resolution | tee "$work/resolution.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "a library came from outside $prefix (above)"
  phase_times+=("build $((SECONDS - begin)) s")
  echo "device_check: configure and build took $((SECONDS - begin)) s"
  return 0
}

# --- test -------------------------------------------------------------------------------------------
do_gpu_tests() {
  build all || return 1
  run_gpu_tests $((deadline_s - SECONDS))
}

# run_gpu_tests BUDGET: the tests that need a GPU, stopped after BUDGET seconds (never past the
# deadline); fails the phase where one failed or, on a GPU machine, skipped.
run_gpu_tests() {
  section "the tests that need a GPU: ctest -R '$gpu_tests'"
  local junit="$work/ctest.xml" rc left=$((deadline_s - SECONDS))
  [ "$1" -ge $left ] || left="$1"
  rm -f "$junit"
  if [ $left -lt 30 ]; then
    fail "GPU tests not run: ${left} s left before the ${deadline_s} s deadline"
    return 1
  fi
  # Four at a time: the GPU tests share one device, and some time what it does.
  timeout -s INT -k 10 "$left" \
    ctest --test-dir "$build" -R "$gpu_tests" --output-on-failure --timeout 300 -j 4 \
          --output-junit "$junit"
  rc=$?
  [ $rc -ne 124 ] || fail "ctest stopped after its ${left} s"
  [ $rc -eq 0 ] || [ $rc -eq 124 ] || fail "ctest: some tests failed (above)"
  [ -f "$junit" ] || { fail "ctest wrote no $junit"; return 1; }
  grep -q '<testcase' "$junit" || { fail "ctest -R '$gpu_tests' found no test"; return 1; }
  # Which tests skipped, why, and whether a GPU test is among them: a test named *GpuTest.* or
  # *.Gpu*, or one that skipped for want of a device, must run on this machine.
  local verdict
  python3 - "$junit" "$work/ctest-summary.json" <<'EOF'
import json, re, sys, xml.etree.ElementTree as ET
cases = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
skipped, failed = [], []
for c in cases:
    name, status, text = c.get("name"), c.get("status", ""), c.findtext("system-out") or ""
    if status == "fail" or c.find("failure") is not None:
        failed.append(name)
    if status in ("notrun", "disabled") or c.find("skipped") is not None:
        m = re.search(r"Skipped\n(.*?)\n*\[  SKIPPED \]", text, re.S)
        reason = " ".join(m.group(1).split()) if m else "(no reason printed)"
        needs_gpu = bool(re.search(r"GpuTest\.|\.Gpu", name) or
                         re.search(r"no CUDA device|CUPTI is not installed|built without CUDA", reason))
        skipped.append({"name": name, "reason": reason, "needs_gpu": needs_gpu})
summary = {"tests": len(cases), "failed": failed, "skipped": skipped,
           "gpu_tests_skipped": [s["name"] for s in skipped if s["needs_gpu"]]}
json.dump(summary, open(sys.argv[2], "w"), indent=2)
print(f"\ndevice_check: {len(cases)} tests, {len(failed)} failed, {len(skipped)} skipped")
for s in skipped:
    print(f"  skipped{'  <-- A GPU TEST' if s['needs_gpu'] else ''}: {s['name']}: {s['reason']}")
sys.exit(3 if summary["gpu_tests_skipped"] else 0)
EOF
  verdict=$?
  [ $verdict -eq 0 ] || [ $verdict -eq 3 ] || fail "reading ctest's results"
  if [ $verdict -eq 3 ]; then
    if [ $allow_no_gpu -eq 1 ] && [ $gpu_present -eq 0 ]; then
      echo "device_check: GPU tests skipped: no device here (--allow-no-gpu)"
    else
      fail "GPU tests skipped on a machine that should run them (marked above)"
    fi
  fi
  return 0
}

# --- measure ----------------------------------------------------------------------------------------
steps_tsv="$work/reports/steps.tsv"
strict_budgets=0  # 1: a step is stopped at its budget (the one-call phase)
record_root=""    # set: each step's run records what feedscope received under record_root/NAME
# descendants PID: the pids of PID's children, grandchildren and so on (a watched program).
descendants() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do
    echo "$child"
    descendants "$child"
  done
}
# watch_maps FILE COMMAND...: runs COMMAND, appending to FILE "PID NAME LIBRARY" for every CUDA
# library the /proc/PID/maps of it and of each process under it shows while it runs: which
# libcupti each traced with, and whether one process had two.
watch_maps() {
  local file="$1" pid p
  shift
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for p in "$pid" $(descendants "$pid"); do
      grep -oE '/[^[:space:]]*/lib(cupti|cudart|cuda|nvidia-ml|torch_cuda)\.so[^[:space:]]*' \
        "/proc/$p/maps" 2>/dev/null | sort -u | sed "s|^|$p $(cat "/proc/$p/comm" 2>/dev/null) |" >>"$file"
    done
    sleep 0.2
  done
  wait "$pid"
}
export -f watch_maps descendants

# The libraries watch_maps saw; more than one libcupti in one process fails the phase, and so does
# none in the process that traced (`tracer`: its name in /proc/PID/comm, e.g. feedscope for `run`,
# python3 for the program `watch` ran).
report_maps() {
  local file="$1" tracer="$2" counts
  [ -f "$file" ] || { echo "device_check: no $file"; return 0; }
  sort -u -o "$file" "$file"
  echo "device_check: CUDA libraries mapped, by process (/proc/PID/maps): PID NAME LIBRARY"
  sed 's/^/  /' "$file"
  counts="$(awk '$3 ~ /\/libcupti\.so/ {n[$1 " " $2]++} END {for (p in n) print p, n[p]}' "$file")"
  if echo "$counts" | awk '$3 > 1 {bad = 1} END {exit !bad}'; then
    fail "two CUPTIs in one process: $(echo "$counts" | awk '$3 > 1' | tr '\n' ';')"
  elif [ $gpu_present -eq 1 ] && ! echo "$counts" | awk -v t="$tracer" '$2 == t && $3 == 1 {ok = 1} END {exit !ok}'; then
    fail "the $tracer process of this run mapped no libcupti: it traced nothing"
  fi
}

# step NAME SECONDS COMMAND...: runs one measurement, its output also into reports/NAME.log, unless
# fewer than SECONDS remain before the deadline. A GPU step's "no device" (exit 77, or exit 4 from
# feedscope) is a failure only where there is a GPU.
step() {
  local name="$1" estimate="$2" rc begin=$SECONDS
  shift 2
  if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then
    printf '%s\tnot selected\t0\n' "$name" >>"$steps_tsv"
    return 0
  fi
  if [ $((SECONDS + estimate)) -gt "$deadline_s" ]; then
    echo "device_check: skipping $name: ${estimate} s would pass the ${deadline_s} s deadline"
    printf '%s\tskipped (deadline)\t0\n' "$name" >>"$steps_tsv"
    fail "$name skipped for time"
    return 0
  fi
  # Up to three times the budget when it overruns (the one-call phase: the budget itself), never
  # past the deadline.
  local limit=$((estimate * 3 + 30))
  [ "$strict_budgets" -eq 0 ] || limit=$estimate
  [ $limit -le $((deadline_s - SECONDS)) ] || limit=$((deadline_s - SECONDS))
  section "$name (budget ${estimate} s, stopped after ${limit} s)"
  echo "+ $*"
  # What feedscope received (the GPU records, the rest of the diagnosis's input) is recorded for
  # a CPU replay (docs/gpu.md, Recordings) where record_root is set: the one-call phase.
  local record=()
  [ -z "$record_root" ] || record=(env "FEEDSCOPE_RECORD_DIR=$record_root/$name")
  timeout -s INT -k 10 "$limit" "${record[@]}" "$@" 2>&1 | tee "$work/reports/$name.log"
  rc=${PIPESTATUS[0]}
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - begin))" >>"$steps_tsv"
  if [ "$rc" -ne 0 ]; then
    if [ $gpu_present -eq 0 ] && { [ "$rc" -eq 77 ] || [ "$rc" -eq 4 ]; }; then
      echo "device_check: $name: no device (exit $rc)"
      [ $allow_no_gpu -eq 1 ] || fail "$name: no device"
    else
      fail "$name (exit $rc)"
    fi
  fi
}

# The measurements, in groups both phases run. Each group reads fs (the feedscope binary), rep (the
# reports folder) and gpu_programs from do_measure or do_one_call.

# The copy engine's H2D against a bare cudaMemcpyAsync, pinned and pageable, 1 MiB to 1 GiB, then
# the loader's copy overlapped with a step.
measure_h2d() {
  step h2d 60 "$build/bench/h2d_bench" --json "$rep/h2d.json"
}

# mlp_cases RUNS: a 3->100->3 MLP at batch 100 on the GPU (launch overhead), then RUNS runs each of
# the two changes its diagnosis can advise, the batch it names and the CPU, for the median. 102400
# samples: every batch full at 100, 1600 and 12800 (a last short batch would make the advised
# batch's run read slower than the prediction, which is per full batch).
mlp_cases() {
  local runs="$1" i batch
  local mlp_loop=(--dataset synthetic:3 --synthetic-samples 102400 --classes 3 --model mlp
                  --hidden 100 --layers 1 --num-workers 1 --warmup 50)
  local mlp_model=("${mlp_loop[@]}" --steps 3000)
  rm -f "$rep/mlp-gpu.maps"
  step mlp-gpu 25 bash -c 'watch_maps "$@"' _ "$rep/mlp-gpu.maps" \
    "$fs" run "${mlp_model[@]}" --batch-size 100 --device cuda --report-dir "$rep/mlp-gpu"
  report_maps "$rep/mlp-gpu.maps" feedscope
  batch="$(advised "$rep/mlp-gpu" batch_size 1600)"
  for i in $(seq "$runs"); do
    step "mlp-gpu-batch-$i" 20 "$fs" run "${mlp_model[@]}" --batch-size "$batch" --device cuda \
      --report-dir "$rep/mlp-gpu-batch-$i"
    step "mlp-cpu-$i" 20 "$fs" run "${mlp_model[@]}" --batch-size 100 --device cpu \
      --report-dir "$rep/mlp-cpu-$i"
    # The CPU prediction's baseline: the GPU loop untraced, as the CPU runs (and as the user's).
    step "mlp-gpu-untraced-$i" 20 env FEEDSCOPE_GPU_TRACE=0 "$fs" run "${mlp_model[@]}" \
      --batch-size 100 --device cuda --report-dir "$rep/mlp-gpu-untraced-$i"
  done
  # In-process sampled tracing (the 3000 steps above end inside the 5-s lead, so they are traced
  # whole): 4 s at a fifth's duty from the first kernel, which must read every window, beside the
  # same 4 s traced whole: what sampling saves `run`.
  step mlp-gpu-sampled 20 "$fs" run "${mlp_loop[@]}" --batch-size 100 \
    --device cuda --duration 4 --gpu-trace 0.2/1 --gpu-trace-lead 0 --report-dir "$rep/mlp-gpu-sampled"
  step mlp-gpu-whole 20 "$fs" run "${mlp_loop[@]}" --batch-size 100 \
    --device cuda --duration 4 --gpu-trace whole --report-dir "$rep/mlp-gpu-whole"
}

# watched_rounds ROUNDS PART...: the MLP loop as an unmodified PyTorch program, ROUNDS times: bare,
# then under `feedscope watch` once per PART ("NAME [VAR=VALUE...] [--watch-option VALUE...]": the
# part's environment, then watch's options), each figure the program's own printed rate. The part
# named `watched` (feedscope's tracing as it ships) has its CUDA libraries read from /proc
# (watch_maps into watch-mlp.maps).
watched_rounds() {
  local rounds="$1" i part word name maps mlp=(python3 "$gpu_programs" mlp --steps 4000)
  local said=(--throughput-pattern 'throughput: ([0-9.]+) samples/s') vars options
  shift
  for i in $(seq "$rounds"); do
    step "trace-bare-$i" 25 "${mlp[@]}"
    for part in "$@"; do
      read -r -a part <<<"$part"
      name="${part[0]}" vars=() options=()
      for word in "${part[@]:1}"; do
        if [ "${#options[@]}" -eq 0 ] && [[ "$word" == *=* ]]; then vars+=("$word"); else options+=("$word"); fi
      done
      maps=()
      [ "$name" != watched ] || maps=(bash -c 'watch_maps "$@"' _ "$rep/watch-mlp.maps")
      step "trace-$name-$i" 30 "${maps[@]}" env "${vars[@]}" "$fs" watch "${said[@]}" "${options[@]}" \
        --report-dir "$rep/trace-$name-$i" -- "${mlp[@]}"
    done
  done
}

# tracing_cost PAIRS: what watching costs a launch-bound program: bare, under `watch` with an
# injection library that does nothing (bench/noop_inject.cc: the sampler's cost), under watch with
# every record traced (--gpu-trace whole), and with the device's records sampled at watch's duty of
# a tenth (0.2 s of every 2 from the start: watch's 1/10 after 5 s, shrunk to fit the 4-s loop),
# interleaved PAIRS times. The sampled runs are also the in-memory loop's verdict: no DataLoader,
# data made on the GPU.
tracing_cost() {
  rm -f "$rep/watch-mlp.maps"
  watched_rounds "$1" "noop FEEDSCOPE_INJECTION_LIBRARY=$build/bench/libnoop_inject.so" \
    "whole --gpu-trace whole" "watched --gpu-trace 0.2/2 --gpu-trace-lead 0"
  report_maps "$rep/watch-mlp.maps" python3
  step watch-mlp-cpu 30 "$fs" watch --throughput-pattern 'throughput: ([0-9.]+) samples/s' \
    --report-dir "$rep/watch-mlp-cpu" -- python3 "$gpu_programs" mlp --steps 4000 --device cpu
}

# A 1000x1000 matmul loop with an .item() in every iteration, against one at the end: through the
# wrap API (`run`'s spans), then as unmodified programs under `feedscope watch`.
sync_cases() {
  local said=(--throughput-pattern 'throughput: ([0-9.]+) samples/s')
  step sync-step 25 "$build/bench/item_sync_bench" --sync step --report-dir "$rep/sync-step"
  step sync-end 25 "$build/bench/item_sync_bench" --sync end --report-dir "$rep/sync-end"
  step watch-matmul-item 40 "$fs" watch "${said[@]}" --report-dir "$rep/watch-matmul-item" -- python3 "$gpu_programs" matmul-item --steps 10000
  step watch-matmul-end 40 "$fs" watch "${said[@]}" --report-dir "$rep/watch-matmul-end" -- python3 "$gpu_programs" matmul-end --steps 10000
}

# Image training through 1 worker, then 8, then what the first run advised: decode-bound, then the
# GPU's convolutions. Then the copy stream in a real run: large synthetic batches from pinned, then
# pageable, memory.
image_and_copy_cases() {
  local images="$work/images" count=1024 model=() img
  [ $gpu_present -eq 1 ] || count=64  # a dry run checks the commands, not the figures
  rm -rf "$images"
  step make-images 40 "$fs" make-dataset images --out "$images" --count "$count"
  read -r -a model <<<"$images_model"
  img=(--dataset "images:$images" "${model[@]}" --batch-size 64 --warmup 5
       --trace-max-spans 100000 --device cuda)
  step images-1-worker 40 "$fs" run "${img[@]}" --num-workers 1 --steps 30 --report-dir "$rep/images-1-worker"
  step images-8-workers 40 "$fs" run "${img[@]}" --num-workers 8 --steps 60 --report-dir "$rep/images-8-workers"
  step images-advised 40 "$fs" run "${img[@]}" --num-workers "$(advised "$rep/images-1-worker" num_workers 8)" \
    --steps 60 --report-dir "$rep/images-advised"
  local big=(--dataset synthetic:3x224x224 --synthetic-samples 4096 --model cnn --hidden 64
             --layers 2 --batch-size 128 --num-workers 8 --steps 100 --warmup 10 --device cuda)
  step copy-pinned 30 "$fs" run "${big[@]}" --pin-memory=on --report-dir "$rep/copy-pinned"
  step copy-pageable 30 "$fs" run "${big[@]}" --pin-memory=off --report-dir "$rep/copy-pageable"
}

# Public GPU training programs, unchanged (scripts/device_programs_prepare.sh copied them into
# .device-programs, which the call carries), each under `feedscope watch`, then with the change
# it advised; their data made here from a seed. pytorch/examples' imagenet on an ImageFolder of
# photo-sized JPEGs, resnet18, 2 workers (input-bound), then the advised count; nanoGPT compiled
# (torch.compile: Triton launches through the driver API); imagenet --dummy with resnet50 (the
# GPU itself); imagenet with 12 workers (no longer input-bound).
public_programs() {
  local programs="$root/.device-programs" inet="$work/imagenet" count=5120
  if [ ! -f "$programs/imagenet/main.py" ] || [ ! -f "$programs/nanogpt/train.py" ]; then
    fail "public programs not run: no $programs (run scripts/device_programs_prepare.sh here and carry .device-programs)"
    return 0
  fi
  [ $gpu_present -eq 1 ] || count=128
  local imagenet=(python3 "$programs/imagenet/main.py" -a resnet18 -b 256 -p 2 --epochs 10)
  # No --throughput-pattern: watch reads imagenet's `Time ... Data ...` lines, and the batch size
  # from its -b, by itself (docs/watch.md).
  local timed=(--duration 25)
  rm -rf "$inet"
  step make-imagenet 40 bash -c '"$1" make-dataset images --out "$2/train" --count "$3" &&
    "$1" make-dataset images --out "$2/val" --count 256' _ "$fs" "$inet" "$count"
  step imagenet-j2 35 "$fs" watch "${timed[@]}" --report-dir "$rep/imagenet-j2" -- "${imagenet[@]}" -j 2 "$inet"
  step imagenet-advised 35 "$fs" watch "${timed[@]}" --report-dir "$rep/imagenet-advised" -- \
    "${imagenet[@]}" -j "$(advised "$rep/imagenet-j2" num_workers 8)" "$inet"
  # nanoGPT reads data/shakespeare_char/{train,val}.bin and meta.pkl from its working folder.
  local ng="$work/nanogpt"
  rm -rf "$ng" && cp -r "$programs/nanogpt" "$ng" && mkdir -p "$ng/data/shakespeare_char"
  python3 - "$ng/data/shakespeare_char" <<'PY' || fail "making nanoGPT's data"
import os, pickle, sys
import numpy as np
out, rng = sys.argv[1], np.random.default_rng(0)
for split, n in (("train", 2_000_000), ("val", 200_000)):
    rng.integers(0, 65, n, dtype=np.uint16).tofile(os.path.join(out, f"{split}.bin"))
chars = [chr(32 + i) for i in range(65)]
pickle.dump({"vocab_size": 65, "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}},
            open(os.path.join(out, "meta.pkl"), "wb"))
PY
  step nanogpt-compile 90 bash -c 'cd "$1" && shift && exec "$@"' _ "$ng" \
    "$fs" watch --duration 80 --report-dir "$rep/nanogpt-compile" -- python3 train.py \
    config/train_shakespeare_char.py --compile=True --batch_size=64 --max_iters=500 \
    --eval_interval=100000 --eval_iters=1 --log_interval=10 "--out_dir=$ng/out"
  # Its first step takes 4 s (cuDNN's autotuning) and CUDA starts 13 s in: at watch's 1 s in 10
  # the 25 s held only the lead, its warm-up (2026-11-28). Windows of 1 s in 2 read its steady
  # state after the lead.
  step imagenet-dummy-r50 35 "$fs" watch "${timed[@]}" --gpu-trace 1/2 --report-dir "$rep/imagenet-dummy-r50" -- \
    python3 "$programs/imagenet/main.py" -a resnet50 -b 256 -p 2 -j 8 --dummy
  step imagenet-j12 35 "$fs" watch "${timed[@]}" --report-dir "$rep/imagenet-j12" -- "${imagenet[@]}" -j 12 "$inet"
}

# Round four's fixes (issue #54), where only a device can show them: a one-.item()-a-step loop
# traced 0.5 s of every 5 for 65 s (the syncs counted over each window's whole steps: 1.0 a step,
# the advice given); feedscope.DataLoader(device="cuda") under watch (the GPU's work per batch from
# the Session's batches and the trace); two DDP ranks on the one GPU, rank 1 doing four times the
# work (each rank diagnosed with its own trace, rank 1 named); pytorch/examples' imagenet with
# 8-step epochs at -j 8 (its workers started every epoch named; persistent_workers=True tried
# through watch --try's hook, measured against the prediction).
round_four_cases() {
  local said=(--throughput-pattern 'throughput: ([0-9.]+) samples/s') short="$work/short-epochs"
  step r4-item-sampled 75 "$fs" watch "${said[@]}" --duration 65 --gpu-trace 0.5/5 --gpu-trace-lead 5 \
    --report-dir "$rep/r4-item-sampled" -- python3 "$gpu_programs" matmul-item --steps 100000000
  step r4-loader-cuda 35 env PYTHONPATH="$build/python" "$fs" watch "${said[@]}" \
    --report-dir "$rep/r4-loader-cuda" -- python3 "$gpu_programs" loader --steps 2000
  step r4-ddp 45 "$fs" watch "${said[@]}" --duration 30 --report-dir "$rep/r4-ddp" -- \
    torchrun --nproc_per_node 2 "$gpu_programs" ddp --steps 3000 --slow-rank 1
  # feedscope.DataLoader on the device: batches equal to the host's, kept ones intact, and a
  # side-stream prefetcher's batches read whole on the default stream (issue #54, 7a).
  step r4-dataloader-gpu 30 env PYTHONPATH="$build/python" FEEDSCOPE_BINARY="$fs" \
    bash -c 'cd "$1/tests/python" && python3 -m unittest -v test_dataloader -k GpuTest' _ "$root"
  local programs="$root/.device-programs"
  if [ ! -f "$programs/imagenet/main.py" ]; then
    fail "r4-imagenet-churn not run: no $programs/imagenet (scripts/device_programs_prepare.sh)"
    return 0
  fi
  rm -rf "$short"
  step r4-make-short 30 bash -c '"$1" make-dataset images --out "$2/train" --count 2048 &&
    "$1" make-dataset images --out "$2/val" --count 256' _ "$fs" "$short"
  step r4-imagenet-churn 80 "$fs" watch --duration 20 --try --try-seconds 20 --try-rounds 1 \
    --report-dir "$rep/r4-imagenet-churn" -- python3 "$programs/imagenet/main.py" -a resnet18 -b 256 \
    -p 1 -j 8 --epochs 100 "$short"
}

# tracing_parts ROUNDS: what each part of the CUDA trace costs the MLP loop under `watch`, by
# turning parts off (FEEDSCOPE_CUPTI_RUNTIME, _DRIVER, _SYNC: profiler/detail/cupti_records.h),
# each traced whole, interleaved with bare runs: the default (the selected runtime calls, the
# driver's launches), no driver calls, no runtime calls (synchronization records instead), the
# device's records alone, and every runtime call.
tracing_parts() {
  watched_rounds "$1" "whole --gpu-trace whole" "watched --gpu-trace 0.2/2 --gpu-trace-lead 0" \
    "nodriver FEEDSCOPE_CUPTI_DRIVER=0 --gpu-trace whole" \
    "noruntime FEEDSCOPE_CUPTI_RUNTIME=none FEEDSCOPE_CUPTI_DRIVER=0 --gpu-trace whole" \
    "devonly FEEDSCOPE_CUPTI_RUNTIME=none FEEDSCOPE_CUPTI_DRIVER=0 FEEDSCOPE_CUPTI_SYNC=0 --gpu-trace whole" \
    "allruntime FEEDSCOPE_CUPTI_RUNTIME=all FEEDSCOPE_CUPTI_DRIVER=0 --gpu-trace whole"
}

# The tracing phase: a short second call, for when the one call left device time: builds only
# feedscope and its injection library, splits tracing's cost by part (tracing_parts), and runs
# the MLP through `run` (the in-process trace's mode).
do_tracing() {
  build feedscope feedscope_inject noop_inject || return 1
  start_budgeted_steps
  local mlp_model=(--dataset synthetic:3 --synthetic-samples 102400 --classes 3 --model mlp
                   --hidden 100 --layers 1 --num-workers 1 --steps 3000 --warmup 50)
  step mlp-gpu 25 "$fs" run "${mlp_model[@]}" --batch-size 100 --device cuda --report-dir "$rep/mlp-gpu"
  step mlp-gpu-untraced-1 20 env FEEDSCOPE_GPU_TRACE=0 "$fs" run "${mlp_model[@]}" \
    --batch-size 100 --device cuda --report-dir "$rep/mlp-gpu-untraced-1"
  step mlp-cpu-1 20 "$fs" run "${mlp_model[@]}" --batch-size 100 --device cpu \
    --report-dir "$rep/mlp-cpu-1"
  local rounds="${FEEDSCOPE_TRACING_ROUNDS:-1}"
  tracing_parts "$rounds"
  step "trace-bare-$((rounds + 1))" 25 python3 "$gpu_programs" mlp --steps 4000
  return 0
}

do_measure() {
  build feedscope feedscope_inject h2d_bench item_sync_bench noop_inject || return 1
  report_torch_cupti
  fs="$build/cli/feedscope" rep="$work/reports" gpu_programs="$root/bench/gpu_programs.py"
  rm -rf "$rep"
  mkdir -p "$rep"
  : >"$steps_tsv"
  step probe 10 "$fs" probe
  measure_h2d
  mlp_cases 1
  sync_cases
  tracing_cost 1
  image_and_copy_cases
  # The loader against PyTorch's DataLoader + torchvision on the same files, 1 to 16 workers.
  step torchvision 120 python3 "$root/bench/torchvision_vs_feedscope.py" "$work/images" --feedscope "$fs" \
    --workers 1,2,4,8,16 --batches 30 --json "$rep/torchvision.json"
  return 0
}

# Where python3's torch keeps its own CUPTI, if its wheel ships one: the one a GPU run should use.
report_torch_cupti() {
  python3 -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null |
    while read -r site; do
      echo "device_check: libcupti files under $site: $(find "$site" -name 'libcupti.so*' 2>/dev/null | tr '\n' ' ')"
    done
}

# The steps of one-call and tracing: each stopped at its own budget, each recorded. About 0.7 MB
# a recording: enough whole steps for the verdict, small enough to commit as fixtures.
start_budgeted_steps() {
  strict_budgets=1
  fs="$build/cli/feedscope" rep="$work/reports" gpu_programs="$root/bench/gpu_programs.py"
  rm -rf "$rep"
  mkdir -p "$rep"
  record_root="$rep/recordings"
  export FEEDSCOPE_RECORD_MAX_RECORDS="${FEEDSCOPE_RECORD_MAX_RECORDS:-20000}"
  : >"$steps_tsv"
}

# --- one call -------------------------------------------------------------------------------------
# Everything a lent machine is for, in one call from a bare machine, most important first, each
# step stopped at its own budget so that a slow one cannot starve the rest: the GPU tests; what
# round three fixed (the copy hidden behind the step, tracing's cost, the MLP's two predictions
# against three runs of each change, the in-memory loop's verdict); public GPU programs; the
# classic cases. Every step records what feedscope received under reports' recordings/, and the
# call ends with a table of at most 30 lines (scripts/device_table.py).
do_one_call() {
  build all feedscope_inject h2d_bench item_sync_bench noop_inject || return 1
  report_torch_cupti
  start_budgeted_steps
  local begin=$SECONDS
  run_gpu_tests 100
  printf 'gpu-tests\t%s\t%s\n' "$?" "$((SECONDS - begin))" >>"$steps_tsv"
  step overlap 40 "$build/bench/h2d_bench" --overlap-only --json "$rep/h2d.json"
  round_four_cases
  tracing_cost 2
  mlp_cases 3
  public_programs
  sync_cases
  image_and_copy_cases
  return 0
}

# advised REPORT_DIR KEY DEFAULT: the value of KEY (batch_size, num_workers) the run's diagnosis
# advised, DEFAULT where it advised none.
advised() {
  python3 - "$1/report.json" "$2" "$3" <<'EOF2' 2>/dev/null || echo "$3"
import json, sys
for r in json.load(open(sys.argv[1]))["diagnosis"]["recommendations"]:
    if r["setting"].startswith(sys.argv[2] + "="):
        print(r["setting"].split("=")[1]); break
else:
    print(sys.argv[3])
EOF2
}

# --- summary ------------------------------------------------------------------------------------------
write_summary() {
  section "summary"
  python3 - "$work" "$out/summary.md" "${phase_times[*]:-}" "$(nvidia-smi -L 2>/dev/null | head -n 1)" \
    <<'EOF' || fail "writing the summary"
import json, os, sys
work, path, phases, gpu = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rep = os.path.join(work, "reports")
def load(*parts):
    p = os.path.join(*parts)
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None
lines = [f"# feedscope on the device: {gpu or 'no GPU'}", ""]
if phases:
    lines += ["phases: " + phases.replace(" s ", " s, "), ""]
t = load(work, "ctest-summary.json")
if t:
    lines += [f"tests: {t['tests']} run, {len(t['failed'])} failed, {len(t['skipped'])} skipped; "
              f"GPU tests skipped: {', '.join(t['gpu_tests_skipped']) or 'none'}", ""]
    lines += [f"- skipped: {s['name']}: {s['reason']}" for s in t["skipped"]] + [""]
if os.path.exists(os.path.join(rep, "mlp-gpu.maps")):
    libs = sorted(set(open(os.path.join(rep, "mlp-gpu.maps")).read().split()))
    lines += ["CUDA libraries mapped by the mlp-gpu run: " + (", ".join(libs) or "none"), ""]
steps = {}
if os.path.exists(os.path.join(rep, "steps.tsv")):
    for row in open(os.path.join(rep, "steps.tsv")):
        name, rc, secs = row.rstrip("\n").split("\t")
        steps[name] = (rc, secs)
h = load(rep, "h2d.json")
if h and h.get("h2d"):
    lines += [f"## H2D on {h['device']}: feedscope's copy engine against a bare cudaMemcpyAsync (GB/s, the copy timed with events on both sides)", "",
              "| size | bare pinned | feedscope pinned | ratio | bare pageable | feedscope pageable | ratio | pinned/pageable | host clock: bare / feedscope pinned |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in h["h2d"]:
        hc = r.get("host_clock", {})
        lines.append(f"| {r['bytes'] >> 20} MiB | {r['bare_pinned_gbps']:.2f} | {r['engine_pinned_gbps']:.2f} | "
                     f"{r['engine_pinned_gbps'] / r['bare_pinned_gbps']:.3f} | {r['bare_pageable_gbps']:.2f} | "
                     f"{r['engine_pageable_gbps']:.2f} | {r['engine_pageable_gbps'] / r['bare_pageable_gbps']:.3f} | "
                     f"{r['engine_pinned_gbps'] / r['engine_pageable_gbps']:.2f} | "
                     f"{hc.get('bare_pinned_gbps', float('nan')):.2f} / {hc.get('engine_pinned_gbps', float('nan')):.2f} |")
o = (h or {}).get("overlap")
if o:
    lines += ["", f"Copy overlapped with the step ({o['batch_bytes'] >> 20} MiB batches, {o['workers']} workers), ms per step: "
              f"loader alone {o['loader_ms']:.2f}, copy alone (the engine's timing of the copy) {o['copy_ms']:.2f}, "
              f"loader + copy {o.get('loader_copy_ms', float('nan')):.2f}, step alone {o['step_ms']:.2f}, "
              f"step with the copy running ahead {o['with_prefetch_ms']:.2f} "
              f"(in series {o['step_ms'] + o['copy_ms']:.2f}): {100 * o['hidden_fraction']:.0f} % of the copy hidden, "
              f"{100 * o.get('over_compute_fraction', float('nan')):+.1f} % over the step alone (goal: at most +5 %)", ""]
tv = load(rep, "torchvision.json")
if tv:
    lines += [f"## Image loading: feedscope against PyTorch's DataLoader + torchvision (batch {tv['batch_size']}, {tv['batches']} batches)", "",
              "| workers | torchvision samples/s | feedscope samples/s | ratio |", "| --- | --- | --- | --- |"]
    for r in tv["rows"]:
        lines.append(f"| {r['workers']} | {r['torchvision_samples_per_s']:.0f} | {r['feedscope_samples_per_s']:.0f} | "
                     f"{r['feedscope_samples_per_s'] / r['torchvision_samples_per_s']:.2f}x |")
    if len(tv["rows"]) > 1:
        a, b = tv["rows"][0], tv["rows"][-1]
        lines.append(f"\nfeedscope from {a['workers']} to {b['workers']} workers: "
                     f"{b['feedscope_samples_per_s'] / a['feedscope_samples_per_s']:.2f}x")
    lines.append("")
expected = {"mlp-gpu": "launch_overhead", "sync-step": "launch_overhead", "sync-end": "gpu_compute",
            "trace-watched-1": "launch_overhead", "images-1-worker": "cpu_preprocess",
            "images-8-workers": "gpu_compute", "copy-pageable": "host_to_device",
            "imagenet-dummy-r50": "gpu_compute"}
cases = [(n, expected.get(n)) for n in steps if os.path.exists(os.path.join(rep, n, "report.json"))]
if not steps:
    cases = []
    lines += ["(measure did not run in this call)"]
else:
    lines += ["## Classic cases (feedscope's diagnosis of each)", "",
              "| run | device | bottleneck (expected) | samples/s | step ms | wait ms | h2d submit ms | data stall | GPU busy | kernels/step | syncs (per step) | H2D GB/s pinned / pageable |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
num = lambda v, f="{:.1f}": "-" if v is None else f.format(v)
verdicts, reports = [], {}
for name, expected in cases:
    if steps.get(name, ("",))[0] == "not selected":
        continue
    r = load(rep, name, "report.json")
    if not r:
        rc = steps.get(name, ("not run", ""))[0]
        lines.append(f"| {name} | | no report (exit {rc}) | | | | | | | | | |")
        continue
    reports[name] = r
    d, g, st = r["diagnosis"], r.get("gpu_trace", {}), r["stages"]
    got = d["bottleneck"]
    mark = "" if not expected else (" (as expected)" if got == expected else f" (EXPECTED {expected})")
    ms = lambda s: num(st.get(s, {}).get("mean_ms") if st.get(s, {}).get("count") else None, "{:.3f}")
    sub = r.get("h2d_submit") or {}
    if "unavailable" in g:
        busy = kps = syncs = h2d = "-"
    else:
        busy, kps = f"{g['gpu_busy_ratio']:.2f}", f"{g['kernels_per_step']:.1f}"
        syncs = f"{g['syncs']['count']} ({g['syncs']['per_step']:.2f})"
        h2d = f"{num(g['h2d']['pinned_gbps'])} / {num(g['h2d']['pageable_gbps'])}"
    lines.append(f"| {name} | {r['environment']['device']} | {got}{mark} | {num(r['throughput']['samples_per_s'])} | "
                 f"{ms('step')} | {ms('wait')} | {num(sub.get('mean_ms'), '{:.3f}')} | {num(d.get('data_stall_ratio'), '{:.3f}')} | "
                 f"{busy} | {kps} | {syncs} | {h2d} |")
    verdicts.append(f"- {name}: {d['verdict']}")
    verdicts += [f"  - watch note: {n}" for n in (r.get("program") or {}).get("notes", [])]
    verdicts += [f"  - {e}" for e in d["evidence"]]
    if r.get("trials"):
        verdicts.append(f"  - trials: {json.dumps(r['trials'])}")
    verdicts += [f"  - recommends: {x['action']} ({x['setting']}, predicted "
                 f"{num(x['predicted_speedup'], '{:.2f}x') if x['predicted_speedup'] else 'nothing: ' + x['basis']})"
                 for x in d["recommendations"]]
lines.append("")
if steps:
    lines += ["", "Verdicts:", ""] + verdicts + ["", "Steps (exit code, seconds):", ""]
    lines += [f"- {n}: exit {rc}, {s} s" for n, (rc, s) in steps.items() if rc != "not selected"]
open(path, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
  python3 "$root/scripts/device_table.py" "$work" "$work/table.md" >/dev/null && cat "$work/table.md" >>"$out/summary.md"
  # The recordings, for tests/fixtures/gpu/ (docs/gpu.md, Recordings), apart from the rest.
  if [ -d "$work/reports/recordings" ]; then
    tar -czf "$out/recordings.tar.gz" -C "$work/reports" recordings
    echo "device_check: $out/recordings.tar.gz: $(($(stat -c %s "$out/recordings.tar.gz") / 1024)) KiB"
  fi
  # Everything else in one archive (the device tool brings back 8 files, 16 MiB each).
  local tarball="$out/reports.tar.gz"
  cp -f "$work"/ctest.xml "$work"/ctest-summary.json "$work"/resolution.txt "$work/reports/" 2>/dev/null
  tar -czf "$tarball" -C "$work" --exclude=reports/recordings reports
  if [ "$(stat -c %s "$tarball")" -gt $((15 * 1024 * 1024)) ]; then
    echo "device_check: reports.tar.gz is over 15 MiB: leaving out every trace.json"
    tar -czf "$tarball" -C "$work" --exclude=reports/recordings --exclude='trace.json' \
        --exclude='*.html' reports
  fi
  echo "device_check: $tarball: $(($(stat -c %s "$tarball") / 1024)) KiB"
}

for phase in "${phases[@]}"; do
  case "$phase" in
    gpu-tests) timed gpu-tests do_gpu_tests ;;
    measure) timed measure do_measure ;;
    one-call) timed one-call do_one_call ;;
    tracing) timed tracing do_tracing ;;
  esac
done
[ -d "$work/reports" ] || mkdir -p "$work/reports"
write_summary

section "done"
echo "device_check: phases: ${phase_times[*]:-none}; ${SECONDS} s in all"
if [ ${#failures[@]} -gt 0 ]; then
  echo "device_check: ${#failures[@]} problem(s):"
  printf '  - %s\n' "${failures[@]}"
fi
# The table last: only the end of a device call's output comes back.
[ -f "$work/table.md" ] && { echo; cat "$work/table.md"; }
[ ${#failures[@]} -eq 0 ] || exit 1
echo "device_check: all done, nothing failed"
