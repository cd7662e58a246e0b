"""A program for `feedscope watch --try`'s test: a loop that computes in Python on one thread and
prints its rate as `N samples/s` (a format watch reads by default). With --fail-with-threads it
fails (exit 3) when run with OMP_NUM_THREADS set to more than one thread, as a program might that
cannot take the change tried."""

import argparse
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--workers", type=int, default=1)
parser.add_argument("--fail-with-threads", action="store_true")
args = parser.parse_args()

if args.fail_with_threads and int(os.environ.get("OMP_NUM_THREADS", "1")) > 1:
    print(f"try_target: OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} is not supported", file=sys.stderr)
    sys.exit(3)

batch = 32
for step in range(1, args.steps + 1):
    begin = time.perf_counter()
    x = 0
    while time.perf_counter() - begin < 0.1:  # a step's work on this thread
        x += sum(i * i for i in range(2000))
    print(f"step {step}: {batch / (time.perf_counter() - begin):.1f} samples/s", flush=True)
