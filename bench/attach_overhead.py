"""What `feedscope attach` costs the job it reads, and what it costs itself, measured side by side.

1. The job: a CPU-bound PyTorch loop (a 2048-wide MLP on every core, so any CPU the reader takes
   is taken from it) runs on, printing its throughput every 2 s; windows with `feedscope attach`
   reading it alternate with windows without, N pairs, and the median of the per-pair ratios
   (attached / alone) is reported.
2. feedscope itself: a torchrun job of 2 ranks x 4 DataLoader workers (tests/python/ddp_job.py);
   attach reads its agent, and its CPU time, read from outside between --short seconds after its
   start and --window seconds later, over that window is its steady cost (start-up and the report
   left out: they varied by more than a window's cost).

    /usr/bin/python3 bench/attach_overhead.py --feedscope build/cli/feedscope [--pairs 5] [--part own]
"""

import argparse
import json
import os
import pathlib
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOOP = """
import time, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))
n, t0 = 0, time.monotonic()
while True:
    opt.zero_grad(); torch.nn.functional.cross_entropy(model(x), y).backward(); opt.step()
    n += 64
    if time.monotonic() - t0 >= 2:
        print(f"{time.monotonic():.3f} {n / (time.monotonic() - t0):.1f}", flush=True)
        n, t0 = 0, time.monotonic()
"""


class Rates:
    """The loop's printed rates, each with the time it was printed, read on a thread."""

    def __init__(self, process):
        self.lines = []
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process):
        for line in process.stdout:
            t, rate = line.split()
            self.lines.append((float(t), float(rate)))

    def between(self, begin, end):
        inside = [r for t, r in self.lines if begin + 2 <= t <= end]  # whole intervals only
        return statistics.median(inside) if inside else float("nan")


def attach(feedscope, pid, seconds, report_dir):
    r = subprocess.run([feedscope, "attach", "--duration", str(seconds), "--report-dir",
                        str(report_dir), str(pid)], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"attach failed: {r.stderr}")
    return json.loads((report_dir / "report.json").read_text())["program"]


def job_cost(args, tmp):
    """The loop's throughput with and without attach, alternating windows."""
    loop = subprocess.Popen([sys.executable, "-c", LOOP], stdout=subprocess.PIPE, text=True)
    rates = Rates(loop)
    try:
        time.sleep(6)  # imports, the first intervals
        ratios = []
        for i in range(args.pairs):
            order = ["alone", "attached"] if i % 2 == 0 else ["attached", "alone"]
            got = {}
            for kind in order:
                begin = time.monotonic()
                if kind == "alone":
                    time.sleep(args.window)
                else:
                    attach(args.feedscope, loop.pid, args.window, tmp / f"a{i}")
                got[kind] = rates.between(begin, time.monotonic())
            ratios.append(got["attached"] / got["alone"])
            print(f"pair {i + 1}: alone {got['alone']:.0f}, attached {got['attached']:.0f} "
                  f"samples/s, ratio {ratios[-1]:.3f}", flush=True)
        return ratios
    finally:
        loop.kill()
        loop.wait()


def cpu_seconds(pid):
    """A process's CPU time so far (all its threads), from /proc/PID/stat."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def steady_share(args, pid, report_dir):
    """feedscope attach's CPU per second between --short seconds after its start and --window
    seconds later, read from outside: its start-up (libraries, the first readings) and its report
    left out."""
    run = subprocess.Popen([args.feedscope, "attach", "--sample-hz", str(args.sample_hz),
                            "--duration", str(args.short + args.window + 3),
                            "--report-dir", str(report_dir), str(pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(args.short)
    t0, c0 = time.monotonic(), cpu_seconds(run.pid)
    time.sleep(args.window)
    t1, c1 = time.monotonic(), cpu_seconds(run.pid)
    _, err = run.communicate()
    if run.returncode != 0:
        raise SystemExit(f"attach failed: {err}")
    return (c1 - c0) / (t1 - t0), json.loads((report_dir / "report.json").read_text())["program"]


def own_cost(args, tmp):
    """feedscope's CPU per second reading a 2-rank x 4-worker torchrun job."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1",
         "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id",
         f"bench-{uuid.uuid4()}", "--nnodes", "1", "--nproc_per_node=2",
         str(ROOT / "tests" / "python" / "ddp_job.py"), "--steps", "1000000", "--num-workers", "4"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd=tmp)
    try:
        time.sleep(12)  # the agent, the rendezvous, the ranks' imports, their workers
        shares = []
        for i in range(args.pairs):
            steady, report = steady_share(args, job.pid, tmp / f"r{i}")
            shares.append(steady)
            print(f"round {i + 1}: {len(report['tree']['processes'])} processes, ranks "
                  f"{report['tree']['ranks']}; feedscope {100 * steady:.2f} % of one core", flush=True)
        return shares
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--feedscope", default=str(ROOT / "build" / "cli" / "feedscope"))
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--window", type=float, default=20, help="seconds of each window")
    p.add_argument("--short", type=float, default=5,
                   help="part 2: seconds after attach starts that its window begins")
    p.add_argument("--sample-hz", type=float, default=10, help="part 2: attach's --sample-hz")
    p.add_argument("--part", choices=["job", "own", "both"], default="both",
                   help="1 (job), 2 (own) or both")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ratios = job_cost(args, pathlib.Path(tmp)) if args.part != "own" else None
        shares = own_cost(args, pathlib.Path(tmp)) if args.part != "job" else None
    if ratios:
        print(f"attached/alone throughput: median {statistics.median(ratios):.3f} "
              f"({min(ratios):.3f} to {max(ratios):.3f}, {len(ratios)} pairs)")
    if shares:
        print(f"feedscope on a 2-rank x 4-worker job: median {100 * statistics.median(shares):.2f} % "
              f"of one core ({100 * min(shares):.2f} to {100 * max(shares):.2f})")


if __name__ == "__main__":
    main()
