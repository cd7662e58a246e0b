"""What `feedscope watch` costs on a big torch.distributed job: a synthetic tree of R ranks (RANK,
WORLD_SIZE and MASTER_* in their environment, as torchrun sets them) each with W forked loader
workers, all of them mostly asleep (a few hundred microseconds of work every 50 ms), watched at
10 Hz for S seconds. Reports the CPU feedscope took per second of watching, per rank, and checks
that every rank and every worker was seen.

    /usr/bin/python3 bench/watch_ranks_overhead.py --feedscope build/cli/feedscope [--ranks 16 --workers 8]

Run as the job's launcher (the program watch starts): --launch R W S.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def busy_sleep(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        x = 0
        for i in range(200):
            x += i
        time.sleep(0.05)


def rank_process(workers, seconds):
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # a DataLoader worker: a forked copy of the rank
            busy_sleep(seconds)
            os._exit(0)
        children.append(pid)
    busy_sleep(seconds)
    for pid in children:
        os.waitpid(pid, 0)


def launch(ranks, workers, seconds):
    procs = []
    for r in range(ranks):
        env = {**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(ranks),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999", "TORCHELASTIC_RUN_ID": "synthetic"}
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank-process", str(workers),
                                       str(seconds)], env=env))
    for p in procs:
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--feedscope", default="build/cli/feedscope")
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--launch", nargs=3, type=float)
    ap.add_argument("--rank-process", nargs=2, type=float)
    args = ap.parse_args()
    if args.rank_process:
        return rank_process(int(args.rank_process[0]), args.rank_process[1])
    if args.launch:
        return launch(int(args.launch[0]), int(args.launch[1]), args.launch[2])
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([args.feedscope, "watch", "--report-dir", tmp, "--sample-hz", "10", "--",
                        sys.executable, __file__, "--launch", str(args.ranks), str(args.workers),
                        str(args.seconds)], check=True, capture_output=True)
        report = json.load(open(os.path.join(tmp, "report.json")))
    p = report["program"]
    per_rank = 100 * p["watcher_cpu_s"] / p["wall_s"] / args.ranks
    ranks = report.get("ranks", [])
    workers = sum(r["num_workers"] for r in ranks)
    print(json.dumps({"ranks_seen": len(ranks), "workers_seen": workers, "wall_s": round(p["wall_s"], 1),
                      "watcher_cpu_s": round(p["watcher_cpu_s"], 2),
                      "watcher_percent_of_a_core": round(100 * p["watcher_cpu_s"] / p["wall_s"], 2),
                      "per_rank_percent_of_a_core": round(per_rank, 3)}))
    if len(ranks) != args.ranks or workers != args.ranks * args.workers:
        sys.exit(f"watch saw {len(ranks)} ranks and {workers} workers of {args.ranks} x {args.workers}")


if __name__ == "__main__":
    main()
