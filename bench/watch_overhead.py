"""What `feedscope watch` costs the program it watches, measured side by side.

Runs a CPU-bound PyTorch program (examples/plain_python_loop.py, in-memory data, the 2048-wide
MLP: every core busy, so any CPU the watcher takes is taken from it) alternately plain and under
`feedscope watch`, N pairs, and reports the median of the per-pair throughput ratios (watched /
plain, as the program prints it) and the CPU feedscope itself took per second of watching.

    /usr/bin/python3 bench/watch_overhead.py --feedscope build/cli/feedscope [--pairs 5]
"""

import argparse
import json
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROGRAM = [sys.executable, str(ROOT / "examples" / "plain_python_loop.py"), "--in-memory",
           "--workers", "0", "--model", "heavy", "--batch-size", "64"]
RATE = re.compile(r"throughput: ([0-9.]+) samples/s")


def rate(output):
    m = RATE.search(output)
    if not m:
        raise SystemExit("the program printed no throughput:\n" + output)
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--feedscope", default=str(ROOT / "build" / "cli" / "feedscope"))
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--sample-hz", default="10")
    args = p.parse_args()
    program = PROGRAM + ["--steps", str(args.steps)]
    ratios, watcher_share = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            # Alternate which goes first, so a drift in the machine's speed favours neither.
            order = ["plain", "watched"] if i % 2 == 0 else ["watched", "plain"]
            rates = {}
            for kind in order:
                if kind == "plain":
                    r = subprocess.run(program, capture_output=True, text=True, check=True)
                else:
                    report_dir = pathlib.Path(tmp) / f"w{i}"
                    r = subprocess.run([args.feedscope, "watch", "--sample-hz", args.sample_hz,
                                        "--report-dir", str(report_dir), "--"] + program,
                                       capture_output=True, text=True, check=True)
                    prog = json.loads((report_dir / "report.json").read_text())["program"]
                    watcher_share.append(prog["watcher_cpu_s"] / prog["wall_s"])
                rates[kind] = rate(r.stdout)
            ratios.append(rates["watched"] / rates["plain"])
            print(f"pair {i + 1}: plain {rates['plain']:.0f}, watched {rates['watched']:.0f} "
                  f"samples/s, ratio {ratios[-1]:.3f}", flush=True)
    print(f"median watched/plain throughput: {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {args.pairs} pairs)")
    print(f"feedscope's own CPU while watching at {args.sample_hz} Hz: "
          f"{100 * statistics.median(watcher_share):.2f} % of one core (median)")


if __name__ == "__main__":
    main()
