#!/usr/bin/env python3
"""num_workers=auto beside a sweep of the same data, in one run (docs/autotune.md).

Each case runs every static point of a small sweep and `--num-workers auto` on the same data, the
same number of seconds, counted from the start (no warm-up, so auto's start-up and moves are in
its rate), alternating the order from one repeat to the next so that a drift of the machine's
load falls on all points alike; a point's figure is the median of its repeats.

  decode   a decode-bound image run: auto's rate against the best static point's (goal >= 0.9)
  compute  a heavy step and light loading: auto's workers and stall, and its rate against the
           best static point's (goal: the fewest workers with stall < 5 %, rate >= 0.97)
  cold     cold shards (the page cache dropped before every epoch): whether auto deepens prefetch

Usage: bench/autotune_bench.py [decode] [compute] [cold]   (default: all three)
Environment: FEEDSCOPE (the binary, default build/cli/feedscope), BENCH_DIR (data and reports,
default /tmp/feedscope-autotune-bench), DURATION (seconds per run, default 30), REPEATS (2).
"""
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FEEDSCOPE = os.environ.get("FEEDSCOPE", os.path.join(ROOT, "build", "cli", "feedscope"))
DIR = os.environ.get("BENCH_DIR", "/tmp/feedscope-autotune-bench")
DURATION = os.environ.get("DURATION", "30")
REPEATS = int(os.environ.get("REPEATS", "2"))


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def make(kind, out, *args):
    if not os.path.exists(out):
        subprocess.run([FEEDSCOPE, "make-dataset", kind, "--out", out, *args], check=True,
                       stdout=subprocess.DEVNULL)


CASES = {
    "decode": {
        "data": lambda: make("images", f"{DIR}/images", "--count", "512"),
        "args": ["--dataset", f"images:{DIR}/images", "--model", "cnn", "--hidden", "8",
                 "--layers", "1", "--image-size", "112", "--batch-size", "32", "--device", "cpu"],
        "points": [["--num-workers", "0"], ["--num-workers", "1"], ["--num-workers", "2"]],
        "auto": ["--num-workers", "auto", "--prefetch", "auto"],
    },
    "compute": {
        "data": lambda: None,
        "args": ["--dataset", "synthetic:3x64x64", "--model", "mlp", "--hidden", "1024",
                 "--layers", "2", "--batch-size", "64", "--device", "cpu"],
        "points": [["--num-workers", "0"], ["--num-workers", "1"], ["--num-workers", "2"]],
        "auto": ["--num-workers", "auto", "--prefetch", "auto"],
    },
    "cold": {
        "data": lambda: make("records", f"{DIR}/records", "--count", "16384", "--sample-bytes",
                             "65536", "--shard-bytes", "64MiB"),
        "args": ["--dataset", f"records:{DIR}/records", "--hidden", "1", "--layers", "1",
                 "--batch-size", "64", "--shuffle", "on", "--cold-cache", "on", "--device", "cpu"],
        "points": [["--num-workers", "1", "--prefetch", p] for p in ("2", "4", "8")],
        "auto": ["--num-workers", "1", "--prefetch", "auto"],
    },
}


def run(case, name, extra, repeat):
    report = f"{DIR}/reports/{case}/{name}-{repeat}"
    cmd = [FEEDSCOPE, "run", *CASES[case]["args"], *extra, "--duration", DURATION,
           "--warmup", "0", "--sample-hz", "0", "--report-dir", report]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(f"{report}/report.json") as f:
        j = json.load(f)
    a = j.get("autotune")
    return {
        "cmd": " ".join(shlex.quote(c) for c in cmd[:1] + ["run"] + cmd[2:-2]),
        "samples_per_s": j["throughput"]["samples_per_s"],
        "stall": j["diagnosis"]["data_stall_ratio"],
        "step_ms": j["stages"]["step"]["mean_ms"],
        "final": a and a["final"],
        "moves": a and [f'{m["t_s"]:.1f}s {m["from"]["num_workers"]}w/p{m["from"]["prefetch"]}->'
                        f'{m["to"]["num_workers"]}w/p{m["to"]["prefetch"]}{"" if m["kept"] else " (not kept)"}'
                        for m in a["moves"]],
    }


def bench(case):
    CASES[case]["data"]()
    names = [" ".join(p) for p in CASES[case]["points"]] + ["auto"]
    extras = CASES[case]["points"] + [CASES[case]["auto"]]
    results = {n: [] for n in names}
    print(f"== {case}: load average before {load()}", flush=True)
    begin = time.time()
    for r in range(REPEATS):
        order = list(range(len(names)))
        if r % 2:
            order.reverse()
        for i in order:
            results[names[i]].append(run(case, names[i].replace(" ", "").replace("--", "_"), extras[i], r))
    print(f"   load average after {load()} ({time.time() - begin:.0f} s)")
    median = {n: statistics.median(x["samples_per_s"] for x in rs) for n, rs in results.items()}
    stall = {n: statistics.median(x["stall"] for x in rs) for n, rs in results.items()}
    best = max((n for n in names if n != "auto"), key=lambda n: median[n])
    for n in names:
        rs = results[n]
        print(f"   {n:32s} {median[n]:8.1f} samples/s  stall {100 * stall[n]:5.1f}%  "
              f"runs {' '.join('%.1f' % x['samples_per_s'] for x in rs)}")
        if n == "auto":
            for x in rs:
                print(f"      final {x['final']}  moves {x['moves']}")
    print(f"   auto / best static ({best}): {median['auto'] / median[best]:.3f}")
    print(f"   command: {results['auto'][0]['cmd']}")
    return {"case": case, "median": median, "stall": stall, "best": best,
            "ratio": median["auto"] / median[best], "runs": results}


def main():
    cases = sys.argv[1:] or list(CASES)
    os.makedirs(DIR, exist_ok=True)
    out = [bench(c) for c in cases]
    with open(f"{DIR}/autotune_bench.json", "w") as f:
        json.dump(out, f, indent=2)
    print(f"results: {DIR}/autotune_bench.json")


if __name__ == "__main__":
    main()
