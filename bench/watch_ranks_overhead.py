"""What `feedscope watch` costs on a torch.distributed node: a synthetic tree of R ranks each with W
forked loader workers, all of them mostly asleep (a few hundred microseconds of work every 50 ms:
the cost is in reading them), watched at 10 Hz (the default) for S seconds, in either form:

  launcher  one watch of the node's launcher (`feedscope watch -- torchrun ...`): the ranks carry
            RANK, WORLD_SIZE and MASTER_* as torchrun sets them.
  task      one watch per rank, as srun starts them (`srun feedscope watch -- python3 train.py`):
            each watch's environment carries an srun task's SLURM_* variables, and reads its rank
            and that rank's workers.

Reports feedscope's own CPU (every watch together, in % of one core), per rank and per process
watched, and checks that every rank and every worker was seen.

    /usr/bin/python3 bench/watch_ranks_overhead.py --feedscope build/cli/feedscope \\
        --sizes 2x2,8x12 --forms launcher,task [--seconds 20]

Internal: --launch R W S runs a launcher's tree; --rank-process W S one rank with its workers.
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


def watch_launcher(feedscope, ranks, workers, seconds, tmp):
    """One watch of the launcher: its CPU, wall, and the ranks and workers it saw."""
    subprocess.run([feedscope, "watch", "--report-dir", tmp, "--sample-hz", "10", "--",
                    sys.executable, __file__, "--launch", str(ranks), str(workers), str(seconds)],
                   check=True, capture_output=True)
    report = json.load(open(os.path.join(tmp, "report.json")))
    ranks_seen = report.get("ranks", [])
    p = report["program"]
    return p["watcher_cpu_s"], p["wall_s"], len(ranks_seen), sum(r["num_workers"] for r in ranks_seen)


def watch_tasks(feedscope, ranks, workers, seconds, tmp):
    """One watch per rank, each an srun task's: their CPU together, the longest wall, and what they saw."""
    watches = []
    for r in range(ranks):
        env = {**os.environ, "SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(r),
               "SLURM_LOCALID": str(r), "SLURM_NODEID": "0", "SLURM_NTASKS": str(ranks),
               "SLURM_STEP_NUM_TASKS": str(ranks), "SLURM_STEP_TASKS_PER_NODE": str(ranks)}
        watches.append(subprocess.Popen([feedscope, "watch", "--report-dir", tmp, "--sample-hz", "10", "--",
                                         sys.executable, __file__, "--rank-process", str(workers),
                                         str(seconds)], env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))
    for w in watches:
        if w.wait() != 0:
            sys.exit(f"a task's watch exited with {w.returncode}")
    cpu = wall = 0.0
    ranks_seen = workers_seen = 0
    for r in range(ranks):
        report = json.load(open(os.path.join(tmp, f"rank-{r}", "report.json")))
        cpu += report["program"]["watcher_cpu_s"]
        wall = max(wall, report["program"]["wall_s"])
        seen = [x for x in report.get("ranks", []) if x["rank"] == r]
        ranks_seen += len(seen)
        workers_seen += sum(x["num_workers"] for x in seen)
    return cpu, wall, ranks_seen, workers_seen


def measure(feedscope, form, ranks, workers, seconds):
    with tempfile.TemporaryDirectory() as tmp:
        run = watch_launcher if form == "launcher" else watch_tasks
        cpu, wall, ranks_seen, workers_seen = run(feedscope, ranks, workers, seconds, tmp)
    processes = ranks * (1 + workers) + (1 if form == "launcher" else 0)
    percent = 100 * cpu / wall
    result = {"form": form, "ranks": ranks, "workers_per_rank": workers, "processes_watched": processes,
              "watches": 1 if form == "launcher" else ranks, "wall_s": round(wall, 1),
              "watcher_cpu_s": round(cpu, 2), "percent_of_a_core": round(percent, 2),
              "per_rank_percent": round(percent / ranks, 3),
              "per_process_percent": round(percent / processes, 4),
              "ranks_seen": ranks_seen, "workers_seen": workers_seen}
    if ranks_seen != ranks or workers_seen != ranks * workers:
        result["error"] = f"saw {ranks_seen} ranks and {workers_seen} workers of {ranks} x {workers}"
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--feedscope", default="build/cli/feedscope")
    ap.add_argument("--sizes", default="16x8", help="RANKSxWORKERS, comma-separated")
    ap.add_argument("--forms", default="launcher", help="launcher, task, or both comma-separated")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--launch", nargs=3, type=float)
    ap.add_argument("--rank-process", nargs=2, type=float)
    args = ap.parse_args()
    if args.rank_process:
        return rank_process(int(args.rank_process[0]), args.rank_process[1])
    if args.launch:
        return launch(int(args.launch[0]), int(args.launch[1]), args.launch[2])
    failed = False
    for size in args.sizes.split(","):
        ranks, workers = (int(x) for x in size.split("x"))
        for form in args.forms.split(","):
            result = measure(args.feedscope, form, ranks, workers, args.seconds)
            print(json.dumps(result), flush=True)
            failed |= "error" in result
    if failed:
        sys.exit("watch did not see every rank and worker (above)")


if __name__ == "__main__":
    main()
