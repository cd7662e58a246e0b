#!/usr/bin/env bash
# The slow_samples check (docs/diagnosis.md#slow-samples): an image folder with a share of huge
# files beside the same folder without them, and beside the same folder with those files
# re-encoded at the size slow_samples advises, run in alternating rounds on feedscope's loader. It
# prints each folder's median rate, the ratios side by side, the rule's prediction for the skewed
# folder and the measured change.
#   bench/slow_samples.sh [FEEDSCOPE] [ROUNDS] [SECONDS]
# Env: COUNT (1000 files), SKEW (0.02:4000x3000), WORK (/tmp/feedscope-slow-samples), and RUN_ARGS
# (the run's own options; the default is the issue's: 2 workers, an MLP step).
set -euo pipefail
feedscope=${1:-build/cli/feedscope}
rounds=${2:-3}
seconds=${3:-15}
count=${COUNT:-1000}
skew=${SKEW:-0.02:4000x3000}
work=${WORK:-/tmp/feedscope-slow-samples}
run_args=${RUN_ARGS:---model mlp --hidden 64 --layers 1 --num-workers 2 --batch-size 32 --warmup 5}
share=${skew%%:*}
size=${skew#*:}
width=${size%x*}
height=${size#*x}
# The size slow_samples names for the 224 crop: the shorter side 256, the aspect kept.
if (( width >= height )); then side_w=$(( (width * 256 + height / 2) / height )); side_h=256
else side_w=256; side_h=$(( (height * 256 + width / 2) / width )); fi

mkdir -p "$work"
make_folder() {  # DIR [--skew ...]
  [[ -d "$work/$1" ]] || "$feedscope" make-dataset images --out "$work/$1" --count "$count" "${@:2}" >/dev/null
}
make_folder uniform
make_folder skewed --skew "$skew"
make_folder resized --skew "$share:${side_w}x${side_h}"

for ((r = 0; r < rounds; r++)); do
  for folder in uniform skewed resized; do
    # shellcheck disable=SC2086
    "$feedscope" run --dataset "images:$work/$folder" $run_args --duration "$seconds" \
      --report-dir "$work/reports/$folder-$r" >/dev/null 2>&1
    echo "round $r $folder done" >&2
  done
done

python3 - "$work" "$rounds" "$skew" "${side_w}x${side_h}" <<'EOF'
import json, statistics, sys
work, rounds, skew, resized = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def report(folder, r):
    return json.load(open(f"{work}/reports/{folder}-{r}/report.json"))
rates = {f: [report(f, r)["throughput"]["samples_per_s"] for r in range(rounds)]
         for f in ("uniform", "skewed", "resized")}
med = {f: statistics.median(v) for f, v in rates.items()}
print(f"folders: {skew} of the files huge (skewed), the same re-encoded at {resized} (resized)")
for f in ("uniform", "skewed", "resized"):
    print(f"  {f:8s} {med[f]:7.1f} samples/s (runs: {', '.join(f'{x:.1f}' for x in rates[f])})")
print(f"  skewed / uniform: {med['skewed'] / med['uniform']:.2f}x   "
      f"resized / skewed (measured gain of the fix): {med['resized'] / med['skewed']:.2f}x")
for f in ("uniform", "skewed", "resized"):
    fired, preds, stalls, steps = 0, [], [], []
    for r in range(rounds):
        j = report(f, r)
        d = j["diagnosis"]
        fired += "slow_samples" in d["rules"]
        preds += [x["predicted_speedup"] for x in d["recommendations"]
                  if x["setting"].startswith("slow files") and x["predicted_speedup"]]
        stalls.append(d["data_stall_ratio"] or 0)
        steps.append(j["stages"]["step"]["mean_ms"])
        s = j["samples"]
    line = (f"  {f:8s} slow_samples fired in {fired}/{rounds} runs; stall {100 * statistics.median(stalls):.1f}%, "
            f"step {statistics.median(steps):.1f} ms; p50 {s['load_ms']['p50']:.2f} ms, p99 {s['load_ms']['p99']:.2f} ms, "
            f"slowest 1% {100 * s['load_ms']['slowest_1pct_share']:.0f}% of load time")
    if preds:
        line += f"; predicted gain {statistics.median(preds):.2f}x"
    print(line)
EOF
