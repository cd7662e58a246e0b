#!/usr/bin/env bash
# Every side-by-side comparison of docs/benchmarks.md, in one run, as ratios: each
# pair is measured back to back on the same data, so a noisy machine moves both sides alike.
#   ./bench/compare.sh [IMAGE_DIR] [SHARD_DIR]
# (makes 1024 ImageNet-like JPEGs in IMAGE_DIR, and the same JPEGs as 8 webdataset tar shards in
# SHARD_DIR, where missing)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
data="${1:-${TMPDIR:-/tmp}/feedscope-bench-images}"
shards="${2:-${TMPDIR:-/tmp}/feedscope-bench-shards}"
fs="$build/cli/feedscope"
cmake --build "$build" --target feedscope loader_bench libtorch_loader_bench >/dev/null
[ -d "$data" ] || "$fs" make-dataset images --out "$data" --count 1024 >/dev/null
[ -d "$shards" ] || "$fs" make-dataset webdataset --out "$shards" --count 1024 --shard-samples 128 >/dev/null

echo "== images:DIR against PyTorch's DataLoader (torchvision ImageFolder + the same transforms), batch 64"
/usr/bin/python3 "$root/bench/torchvision_vs_feedscope.py" "$data" --feedscope "$fs"

echo
echo "== webdataset:DIR against an IterableDataset over tarfile + PIL + the same torchvision transforms, shards split over workers, batch 64"
/usr/bin/python3 "$root/bench/tarshards_vs_feedscope.py" "$shards" --feedscope "$fs"

echo
echo "== against libtorch's torch::data::DataLoader, batch 64, with three datasets: feedscope's own per-sample code (only the loader differs), a whole-image libjpeg-turbo decode with feedscope's transform, and one written as a libtorch user would (whole decode, torch ops)"
"$build/bench/libtorch_loader_bench" "$data"

echo
echo "== scaling from 1 to 2 workers, images:DIR, loader only (median of 3 alternating pairs)"
rate() {
  "$fs" run --dataset "images:$data" --loader-only --num-workers "$1" --batch-size 64 \
    --steps 24 --warmup 2 --sample-hz 0 --report-dir "${TMPDIR:-/tmp}/feedscope-compare" --json \
    2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["throughput"]["samples_per_s"])'
}
pairs=""
for _ in 1 2 3; do pairs="$pairs $(rate 1),$(rate 2)"; done
/usr/bin/python3 - $pairs <<'PY'
import statistics, sys
pairs = [tuple(map(float, p.split(","))) for p in sys.argv[1:]]
one = statistics.median(p[0] for p in pairs)
two = statistics.median(p[1] for p in pairs)
ratio = statistics.median(p[1] / p[0] for p in pairs)
print(f"  1 worker {one:.1f}/s, 2 workers {two:.1f}/s: {ratio:.2f}x")
PY

echo
echo "== synthetic in-memory batches (no transform) against a plain memcpy of the same bytes"
echo "   (9 runs of each, randomly interleaved; medians)"
"$build/bench/loader_bench" --benchmark_min_time=0.2 --benchmark_repetitions=9 \
  --benchmark_enable_random_interleaving=true --benchmark_format=json 2>/dev/null |
  /usr/bin/python3 -c '
import json, statistics, sys
runs = {}
for x in json.load(sys.stdin)["benchmarks"]:
    if x.get("run_type") == "iteration":
        runs.setdefault(x["run_name"], []).append(x["bytes_per_second"])
memcpy = statistics.median(runs.pop("BM_Memcpy/real_time"))
for name in sorted(runs):
    rate = statistics.median(runs[name])
    workers = name.split("/")[1]
    print(f"  {workers} worker(s): {rate / memcpy:.2f} of memcpy ({rate / 1e9:.2f} vs {memcpy / 1e9:.2f} GB/s)")'
