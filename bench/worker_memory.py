#!/usr/bin/env python3
"""The DataLoader "memory leak" with torchvision's ImageFolder, and feedscope.DataLoader on the same
files: each loads an image folder of many small files for two epochs under `feedscope watch`, and
the table is what watch measured of each process's private memory (smaps_rollup) and the memory
finding it made.

    python3 bench/worker_memory.py [--files 100000] [--workers 2] [--keep DIR]

torchvision's ImageFolder keeps its listing as a Python list of (path, class) tuples; each forked
worker that indexes it writes the tuples' and strings' reference counts, so it copies the pages
they are on (copy-on-access, pytorch/pytorch#13246). feedscope.DataLoader's workers are threads
of one process and its listing is held in C++: nothing is copied. Run from a built checkout
(build/cli/feedscope, build/python); docs/diagnosis.md#memory has the figures."""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
MIB = 1 << 20


def make_folder(feedscope, folder, files):
    if (folder / "done").exists():
        return
    subprocess.run([feedscope, "make-dataset", "images", "--out", str(folder), "--count", str(files),
                    "--size", "16x16", "--classes", "10"], check=True, capture_output=True)
    (folder / "done").write_text(str(files))


def watch(feedscope, report_dir, loader, folder, args):
    command = [sys.executable, str(ROOT / "tests" / "python" / "memory_program.py"), "--data", "folder",
               "--root", str(folder), "--loader", loader, "--workers", str(args.workers),
               "--batch", "64", "--epochs", "2", "--pace-s", str(args.pace_s)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "build" / "python")}
    run = subprocess.run([feedscope, "watch", "--report-dir", str(report_dir), "--no-try-loader", "--"] + command,
                         env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"worker_memory: {loader}: watch exited {run.returncode}:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    return json.loads((report_dir / "report.json").read_text())


def rate_text(values):
    known = [v for v in values if v is not None]
    if not known:
        return "not measured"
    return ", ".join(f"{v / MIB:+.2f}" for v in known) + " MiB/s"


def row(loader, report):
    processes = report["program"]["tree"]["processes"]
    trainer = [p for p in processes if p["role"] == "trainer"]
    workers = [p for p in processes if p["role"] == "loader_worker" and p.get("memory")]
    def growth(ps):
        return [p["memory"]["private_bytes_per_s"] for p in ps if p.get("memory")]
    def peaks(ps):
        return [round(p["memory"]["private_peak_bytes"] / MIB, 1) for p in ps if p.get("memory")]
    findings = report["diagnosis"].get("memory") or []
    return {"loader": loader, "processes": len(processes),
            "trainer_private": rate_text(growth(trainer)), "workers_private": rate_text(growth(workers)),
            "trainer_peak_mib": peaks(trainer), "workers_peak_mib": peaks(workers),
            "private_peak_mib": round(sum(peaks(trainer)) + sum(peaks(workers)), 1),
            "finding": "; ".join(f"{f['kind']} ({f['role']})" for f in findings) or "none",
            "throughput": report["throughput"].get("samples_per_s")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--feedscope", default=str(ROOT / "build" / "cli" / "feedscope"))
    ap.add_argument("--pace-s", type=float, default=0.005, help="the loop's time per batch (its step)")
    ap.add_argument("--keep", default="", help="make (or reuse) the image folder here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="feedscope-worker-memory-") as tmp:
        tmp = pathlib.Path(tmp)
        folder = pathlib.Path(args.keep) if args.keep else tmp / "images"
        make_folder(args.feedscope, folder, args.files)
        rows = [row(loader, watch(args.feedscope, tmp / loader, loader, folder, args))
                for loader in ("torch", "feedscope")]
    print(f"{args.files} files of 16x16, {args.workers} workers, two epochs")
    print(f"{'loader':<10} {'processes':>9}  {'private MiB: trainer; workers':<34} {'total':>6}  "
          f"{'growth: trainer; workers':<44} finding")
    for r in rows:
        held = f"{r['trainer_peak_mib']}; {r['workers_peak_mib'] or 'none'}"
        growth = f"{r['trainer_private']}; {r['workers_private']}"
        print(f"{r['loader']:<10} {r['processes']:>9}  {held:<34} {r['private_peak_mib']:>6}  {growth:<44} {r['finding']}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
