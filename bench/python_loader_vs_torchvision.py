#!/usr/bin/python3
"""feedscope.DataLoader against PyTorch's DataLoader + torchvision, and against `feedscope run`.

On the same folder, at each worker count, three loaders take turns (alternating rounds, so a busy
machine slows all three alike; the median of the rounds is reported):
  torchvision  DataLoader(ImageFolder(root, RandomResizedCrop + flip + ToTensor + Normalize))
  python       feedscope.DataLoader("images:ROOT", pipeline="train"): the same transforms in C++
  run          `feedscope run --loader-only` on the same folder: the loader without Python
Each counts samples per second over the same batches after a warm-up. The ratios are what to
read: python / torchvision (issue #29's goal: 2.5x or more) and python / run (what Python costs per
batch; goal: within 10 %). Run with Debian's /usr/bin/python3 and PYTHONPATH=build/python:

  build/cli/feedscope make-dataset images --out /tmp/imgs --count 1024
  PYTHONPATH=build/python /usr/bin/python3 bench/python_loader_vs_torchvision.py /tmp/imgs
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import torch
from torchvision import datasets, transforms

import feedscope


def train_transform():
    return transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])


def loader_rate(loader, batches, warmup):
    """Samples per second over `batches` batches after `warmup` more, epochs chained."""
    done, samples, start = 0, 0, None
    while done < warmup + batches:
        for x, _ in loader:
            if done == warmup:
                start = time.perf_counter()
            elif done > warmup:
                samples += x.shape[0]
            done += 1
            if done >= warmup + batches:
                break
    # Timed from the end of the warm-up batch: batches - 1 batches in the window.
    return samples / (time.perf_counter() - start)


def torchvision_rate(root, workers, batch, batches, warmup):
    data = datasets.ImageFolder(root, train_transform())
    loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True, num_workers=workers,
                                         persistent_workers=workers > 0, drop_last=True)
    return loader_rate(loader, batches, warmup)


def python_rate(root, workers, batch, batches, warmup):
    with feedscope.DataLoader(f"images:{root}", batch_size=batch, num_workers=workers,
                              pipeline="train", image_size=224, shuffle=True,
                              drop_last=True) as loader:
        return loader_rate(loader, batches, warmup)


def run_rate(binary, root, workers, batch, batches, warmup):
    out = subprocess.run([binary, "run", "--dataset", f"images:{root}", "--loader-only",
                          "--num-workers", str(workers), "--batch-size", str(batch),
                          "--drop-last", "on", "--steps", str(batches), "--warmup", str(warmup),
                          "--sample-hz", "0", "--report-dir", "/tmp/feedscope-python-loader-bench",
                          "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["throughput"]["samples_per_s"]


def load_average():
    return os.getloadavg()[0]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", help="a make-dataset images folder (ImageFolder layout)")
    p.add_argument("--feedscope", default="build/cli/feedscope", help="the feedscope binary")
    p.add_argument("--workers", default="0,2")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--batches", type=int, default=24)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median is reported")
    p.add_argument("--json", help="also write the rows to this file")
    a = p.parse_args()
    torch.set_num_threads(1)  # as the DataLoader's workers run; the step's threads are not measured
    print(f"load average at start: {load_average():.2f}")
    print(f"{'workers':>7} {'python/torchvision':>19} {'python/run':>11}   (median of {a.rounds} "
          "alternating rounds; each round's ratios in brackets)")
    rows = []
    for w in (int(x) for x in a.workers.split(",")):
        rounds = []
        for _ in range(a.rounds):
            tv = torchvision_rate(a.root, w, a.batch_size, a.batches, a.warmup)
            py = python_rate(a.root, w, a.batch_size, a.batches, a.warmup)
            run = run_rate(a.feedscope, a.root, w, a.batch_size, a.batches, a.warmup)
            rounds.append({"torchvision": tv, "python": py, "run": run})
        vs_tv = statistics.median(r["python"] / r["torchvision"] for r in rounds)
        vs_run = statistics.median(r["python"] / r["run"] for r in rounds)
        each = ", ".join(f"{r['python'] / r['torchvision']:.2f}x/{r['python'] / r['run']:.2f}"
                         for r in rounds)
        print(f"{w:>7} {vs_tv:>18.2f}x {vs_run:>11.2f}   [{each}]", flush=True)
        rows.append({"workers": w, "python_vs_torchvision": vs_tv, "python_vs_run": vs_run,
                     "rounds": rounds})
        if a.json:  # after every row: a run stopped at a deadline keeps what it measured
            with open(a.json, "w") as f:
                json.dump({"batch_size": a.batch_size, "batches": a.batches, "rows": rows}, f,
                          indent=1)
    print(f"load average at end: {load_average():.2f}")


if __name__ == "__main__":
    main()
