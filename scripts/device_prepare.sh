#!/usr/bin/env bash
# Runs HERE, on Debian 12 with apt: downloads into .device-debs/ the .deb files that
# scripts/device_check.sh unpacks on a lent GPU machine (again in each of its two calls, each from
# a bare machine), which reaches no package registry. They are the -dev packages of the libraries
# scripts/setup.sh installs, and the shared libraries those need to build and run, less what every
# system that runs nvcc and python3 already has (the exclusions below, each with why). No root
# needed: `apt-get download` only fetches. Idempotent: a file already there is kept, one no longer
# wanted is removed. Prints the total size, which travels with every device call (64 MiB limit for
# the whole working tree).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/.device-debs"

# What CMakeLists.txt finds. Not libtorch-dev or python3-torch (the device's CUDA torch replaces
# them), clang (fuzzing only), wrk (bench/scrape_load.sh only), prometheus (promtool and the
# server: without them MetricsExporterTest's three promtool checks and
# PrometheusIntegrationTest.RealServerScrapesARunningFeedscope skip, as on any machine without it).
wanted=(
  libtbb-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev libturbojpeg0-dev
  libjpeg-dev libcli11-dev nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev
  # images:DIR's other formats (loader/image_decoder.h).
  libpng-dev libwebp-dev libtiff-dev libstb-dev
)

# Left out of the dependency closure; a package left out is not followed further.
excluded=(
  # The C runtime and compiler runtime of every Linux system. Debian 12's libraries need glibc 2.36
  # and GCC 12's libstdc++ at most; Ubuntu 24.04 has 2.39 and GCC 14's. Loading Debian's older
  # copies over the system's would break the system's own programs.
  libc6 libgcc-s1 libstdc++6 gcc-12-base zlib1g libzstd1 libudev1
  # The C development files a compiler needs: nvcc cannot work without them, so the device has
  # its own (libjpeg62-turbo-dev and zlib1g-dev depend on libc-dev only for <stdio.h> and kin).
  libc6-dev libc-dev-bin linux-libc-dev libcrypt-dev libcrypt1 libnsl-dev libnsl2 libtirpc-dev
  libtirpc3 libtirpc-common rpcsvc-proto
  # prometheus-cpp-dev depends on libcurl only for its push library, which feedscope does not link
  # (it links prometheus-cpp::core); device_check.sh turns push off in the unpacked CMake config,
  # so libcurl and its thirteen dependencies (TLS, LDAP, Kerberos, HTTP/2, ...) stay behind.
  libcurl4-openssl-dev libcurl4
  # Build-time companions nothing of feedscope reads: spdlog's own test framework (its headers and
  # CMake config never include it) and GoogleTest's sources (libgtest-dev has the built libraries).
  catch2 googletest
)

if [ "$(dpkg --print-architecture)" != amd64 ]; then
  echo "device_prepare: this machine's packages are $(dpkg --print-architecture); the device is" \
       "x86-64 (amd64). Fetch with apt-get -oAPT::Architecture=amd64 (see the device README)." >&2
  exit 1
fi

is_excluded() {
  local p
  for p in "${excluded[@]}"; do [ "$p" = "$1" ] && return 0; done
  return 1
}

# The closure, a level at a time (one apt-cache call per level): Depends and Pre-Depends, no
# Recommends; virtual packages (<libc-dev>) are provided by excluded ones.
declare -A seen=()
keep=()
skipped=()
level=("${wanted[@]}")
while [ ${#level[@]} -gt 0 ]; do
  todo=()
  for p in "${level[@]}"; do
    [ -n "${seen[$p]:-}" ] && continue
    seen[$p]=1
    if is_excluded "$p"; then
      skipped+=("$p")
    else
      keep+=("$p")
      todo+=("$p")
    fi
  done
  level=()
  [ ${#todo[@]} -gt 0 ] || break
  while read -r dep; do
    level+=("$dep")
  done < <(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
             --no-replaces --no-enhances "${todo[@]}" |
           awk '$1 ~ /^\|?(Pre)?Depends:$/ && $2 !~ /^</ {print $2}')
done

# Each package's file in the pool (the version apt would install), in one call.
declare -A pool_name=()
while read -r p f; do
  pool_name[$p]="$(basename "$f")"
done < <(apt-cache show --no-all-versions "${keep[@]}" 2>/dev/null |
         awk '/^Package:/ {p = $2} /^Filename:/ {print p, $2}')
mkdir -p "$out"
files=()
fetch=()
for p in "${keep[@]}"; do
  if [ -z "${pool_name[$p]:-}" ]; then
    echo "device_prepare: apt knows no package '$p'; run 'sudo apt-get update' first" >&2
    exit 1
  fi
  files+=("${pool_name[$p]}")
  [ -f "$out/${pool_name[$p]}" ] || fetch+=("$p")
done
if [ ${#fetch[@]} -gt 0 ]; then
  echo "device_prepare: fetching ${fetch[*]}"
  partial="$out/.partial"
  rm -rf "$partial"
  mkdir -p "$partial"
  # apt drops to the _apt user to download; into a root-owned folder it warns and fetches as root.
  (cd "$partial" && apt-get download -q "${fetch[@]}") 2>&1 | { grep -v "unsandboxed as root" || true; }
  # apt-get download writes an epoch into the name (libjpeg62-turbo_1%3a2.1.5-2_amd64.deb); keep
  # the pool's name, which has none.
  for p in "${fetch[@]}"; do
    for f in "$partial/${p}_"*.deb; do
      [ -e "$f" ] && mv "$f" "$out/${pool_name[$p]}"
    done
  done
  rm -rf "$partial"
fi

# Files of versions no longer wanted (an apt update moved a package on) would unpack twice.
for f in "$out"/*.deb; do
  [ -e "$f" ] || continue
  name="$(basename "$f")"
  wanted_file=0
  for w in "${files[@]}"; do [ "$w" = "$name" ] && wanted_file=1; done
  if [ $wanted_file -eq 0 ]; then
    echo "device_prepare: removing $name (not wanted now)"
    rm -f "$f"
  fi
done

missing=0
for f in "${files[@]}"; do
  if [ ! -f "$out/$f" ]; then
    echo "device_prepare: $f did not download" >&2
    missing=1
  fi
done
[ $missing -eq 0 ] || exit 1

# What device_check.sh prints there, so a log says which versions were built against.
{
  echo "# .device-debs: made by scripts/device_prepare.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for f in "${files[@]}"; do echo "$f"; done
  echo "# left out: ${skipped[*]}"
} >"$out/MANIFEST"

bytes="$(cat "$out"/*.deb | wc -c)"
echo "device_prepare: ${#files[@]} packages in $out, $((bytes / 1024)) KiB" \
     "($(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}') MiB of the 64 MiB a device call carries)"
echo "device_prepare: left out (see the script for why): ${skipped[*]}"
echo "device_prepare: next, scripts/device_programs_prepare.sh, then one device call (docs/gpu.md: The" \
     "device check): 'bash scripts/device_check.sh one-call' with carry [\".device-debs\", \".device-programs\"]"
