#!/usr/bin/python3
"""torchvision's ImageNet training input pipeline against feedscope's images:DIR, side by side.

torchvision: ImageFolder + RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize
through torch.utils.data.DataLoader (batch 64); feedscope: `feedscope run --loader-only` on the
same folder with the same transforms. Both count samples per second over the same number of
batches after a warm-up, at each worker count. Run with Debian's /usr/bin/python3 (torch 1.13,
torchvision 0.14):

  feedscope make-dataset images --out /tmp/imgs --count 1024
  /usr/bin/python3 bench/torchvision_vs_feedscope.py /tmp/imgs --feedscope build/cli/feedscope

On a shared or busy machine, compare the ratios, not the absolute rates.
"""
import argparse
import json
import subprocess
import time

import torch
from torchvision import datasets, transforms


def train_transform():
    """torchvision's ImageNet training transform, the pipeline feedscope's images:DIR runs."""
    return transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])


def torchvision_rate(root, workers, batch, batches, warmup):
    data = datasets.ImageFolder(root, train_transform())
    loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True, num_workers=workers,
                                         persistent_workers=workers > 0, drop_last=True)
    return loader_rate(loader, batches, warmup)


def loader_rate(loader, batches, warmup):
    """Samples per second of a DataLoader over `batches` batches after `warmup` more."""
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


def feedscope_rate(binary, dataset, workers, batch, batches, warmup, extra=()):
    """Samples per second of `feedscope run --loader-only` on `dataset` ("images:DIR", ...)."""
    out = subprocess.run([binary, "run", "--dataset", dataset, "--loader-only", *extra,
                          "--num-workers", str(workers), "--batch-size", str(batch),
                          "--steps", str(batches), "--warmup", str(warmup), "--sample-hz", "0",
                          "--report-dir", "/tmp/feedscope-vs-torchvision", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["throughput"]["samples_per_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", help="a make-dataset images folder (ImageFolder layout)")
    p.add_argument("--feedscope", default="build/cli/feedscope", help="the feedscope binary")
    p.add_argument("--workers", default="0,1,2")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--feedscope-args", default="", help="more options for feedscope run, e.g. '--reduced-decode off'")
    p.add_argument("--json", help="also write the rows to this file")
    a = p.parse_args()
    torch.set_num_threads(1)
    print(f"{'workers':>7} {'torchvision/s':>14} {'feedscope/s':>12} {'ratio':>7}")
    rows = []
    for w in (int(x) for x in a.workers.split(",")):
        tv = torchvision_rate(a.root, w, a.batch_size, a.batches, a.warmup)
        fs = feedscope_rate(a.feedscope, "images:" + a.root, w, a.batch_size, a.batches, a.warmup, a.feedscope_args.split())
        print(f"{w:>7} {tv:>14.1f} {fs:>12.1f} {fs / tv:>6.2f}x", flush=True)
        rows.append({"workers": w, "torchvision_samples_per_s": tv, "feedscope_samples_per_s": fs})
        if a.json:  # after every row: a run stopped at a deadline keeps what it measured
            with open(a.json, "w") as f:
                json.dump({"batch_size": a.batch_size, "batches": a.batches, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
