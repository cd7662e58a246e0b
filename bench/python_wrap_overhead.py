"""What the Python client costs a training loop: the same loop with a 1 ms step, unwrapped and
wrapped by feedscope.Session (wrap + step), run alternately in one process; prints each pair's
ratio and the median. docs/benchmarks.md's goal: under 1 %. Then the cost alone, less noisy on a busy
machine: the same two loops with an empty step, as microseconds per step.

    PYTHONPATH=build/python python3 bench/python_wrap_overhead.py [--steps 2000] [--pairs 7]
"""

import argparse
import statistics
import tempfile
import time

import feedscope


def busy(seconds):
    """A step of `seconds` of CPU work: a sleep would add the scheduler's wake-up jitter."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def plain(batches, step_s):
    begin = time.perf_counter()
    for x in batches:
        busy(step_s)
    return time.perf_counter() - begin


def wrapped(batches, step_s, report_dir):
    fs = feedscope.Session(report_dir, print=False, sample_hz=0)
    begin = time.perf_counter()
    for x in fs.wrap(batches):
        with fs.step(1):
            busy(step_s)
    elapsed = time.perf_counter() - begin
    fs.finish()
    fs.close()
    return elapsed


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--pairs", type=int, default=7)
    p.add_argument("--step-ms", type=float, default=1.0)
    args = p.parse_args()
    step_s = args.step_ms / 1000
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            batches = list(range(args.steps))
            a = plain(batches, step_s)
            b = wrapped(batches, step_s, f"{tmp}/r{i}")
            ratios.append(b / a)
            print(f"pair {i}: plain {a:.3f} s, wrapped {b:.3f} s, ratio {b / a:.4f}")
        print(f"median wrapped/plain over {args.pairs} pairs of {args.steps} steps at "
              f"{args.step_ms} ms: {statistics.median(ratios):.4f}")
        costs = []
        for i in range(args.pairs):
            batches = list(range(args.steps * 10))
            a = plain(batches, 0)
            b = wrapped(batches, 0, f"{tmp}/e{i}")
            costs.append((b - a) / len(batches) * 1e6)
        cost = statistics.median(costs)
        print(f"wrap + step cost: median {cost:.2f} us per step over {args.pairs} pairs of "
              f"{args.steps * 10} empty steps; {cost / (args.step_ms * 10):.3f} % of a "
              f"{args.step_ms} ms step")


if __name__ == "__main__":
    main()
