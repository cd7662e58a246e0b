#!/usr/bin/env bash
# Every side-by-side comparison of the README's "How it compares", in one run, as ratios: each
# pair is measured back to back on the same data, so a noisy machine moves both sides alike.
#   ./bench/compare.sh [IMAGE_DIR]     (makes 1024 ImageNet-like JPEGs there if missing)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
data="${1:-${TMPDIR:-/tmp}/feedscope-bench-images}"
fs="$build/cli/feedscope"
[ -d "$data" ] || "$fs" make-dataset images --out "$data" --count 1024 >/dev/null

echo "== images:DIR against PyTorch's DataLoader (torchvision ImageFolder + the same transforms), batch 64"
/usr/bin/python3 "$root/bench/torchvision_vs_feedscope.py" "$data" --feedscope "$fs"

echo
echo "== against libtorch's torch::data::DataLoader, the same decode and transform per sample, batch 64"
"$build/bench/libtorch_loader_bench" "$data"

echo
echo "== scaling from 1 to 2 workers, images:DIR, loader only"
rate() {
  "$fs" run --dataset "images:$data" --loader-only --num-workers "$1" --batch-size 64 \
    --steps 12 --warmup 2 --sample-hz 0 --report-dir "${TMPDIR:-/tmp}/feedscope-compare" --json \
    2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["throughput"]["samples_per_s"])'
}
one=$(rate 1); two=$(rate 2)
/usr/bin/python3 -c "print(f'  1 worker {float($one):.1f}/s, 2 workers {float($two):.1f}/s: {float($two)/float($one):.2f}x')"

echo
echo "== synthetic in-memory batches (no transform) against a plain memcpy of the same bytes"
"$build/bench/loader_bench" --benchmark_min_time=0.5 --benchmark_format=json 2>/dev/null |
  /usr/bin/python3 -c '
import json, sys
b = {x["name"]: x["bytes_per_second"] for x in json.load(sys.stdin)["benchmarks"]}
memcpy = b.pop("BM_Memcpy/real_time")
for name, rate in b.items():
    workers = name.split("/")[1]
    print(f"  {workers} worker(s): {rate / memcpy:.2f} of memcpy ({rate / 1e9:.2f} vs {memcpy / 1e9:.2f} GB/s)")'
