#!/usr/bin/env bash
# Installs what feedscope needs to build, test and benchmark on Debian 12. Idempotent: when every
# package is present already it only checks and returns (no apt-get update, no network).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev libtbb-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libturbojpeg0-dev libjpeg-dev
  # images:DIR's other formats, each through its own library (loader/image_decoder.h).
  libpng-dev libwebp-dev libtiff-dev libstb-dev
  # gzip-compressed webdataset shards (.tar.gz).
  zlib1g-dev
  libcli11-dev nlohmann-json3-dev libyaml-cpp-dev
  # Debian's libtorch finds BLAS through the libblas.so.3 alternative, which is the reference
  # BLAS unless OpenBLAS is installed: a 3072-512-512-10 MLP step takes 160 ms instead of 6 ms.
  libopenblas0-pthread
  python3-torch python3-torchvision
  # The advice corpus's tqdm case (tests/corpus/imagenet_style.py --log tqdm) draws a real tqdm bar.
  python3-tqdm
  # The packaging tests (tests/install/): the wheel from an sdist into a venv, offline; the .deb's
  # Depends (dpkg-shlibdeps, with build-essential's dpkg-dev).
  python3-venv python3-wheel python3-build python3-setuptools
  # scripts/fuzz.sh (libFuzzer comes with clang's runtime) and the scrape-load test and bench.
  clang libclang-rt-14-dev wrk
)
# promtool and the real Prometheus server for the scrape tests; recommends would pull in a UI stack.
# A real one-node Slurm (slurm-wlm 22.05's daemons and client, munge) and a real Open MPI for the
# launcher tests (tests/python/test_slurm.py, test_mpi.py), PyYAML for the Kubernetes manifests'.
no_recommends=(prometheus slurmctld slurmd slurm-client munge openmpi-bin python3-yaml)

missing=()
for p in "${packages[@]}" "${no_recommends[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]}+${#no_recommends[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q "${packages[@]}"
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${no_recommends[@]}"
