#!/usr/bin/python3
"""Tar shards the way a PyTorch user reads them without extra packages, against feedscope's
webdataset:PATTERN, side by side.

PyTorch: an IterableDataset over the standard library's tarfile (members grouped into samples by
webdataset's key rule), PIL's decode and torchvision's RandomResizedCrop(224) +
RandomHorizontalFlip + ToTensor + Normalize, shards shuffled per epoch and split over
DataLoader workers with torch.utils.data.get_worker_info(), the same shuffle buffer of encoded
samples, batch 64. feedscope: `feedscope run --loader-only --dataset webdataset:DIR` with the same
transforms and shuffle buffer. Each side counts samples per second over the same batches after a
warm-up; the pairs alternate, and the ratio reported is the median of the pairs' ratios. Run with
Debian's /usr/bin/python3 (torch 1.13, torchvision 0.14):

  feedscope make-dataset webdataset --out /tmp/shards --count 1024 --shard-samples 128
  /usr/bin/python3 bench/tarshards_vs_feedscope.py /tmp/shards --feedscope build/cli/feedscope

On a shared or busy machine, compare the ratios, not the absolute rates.
"""
import argparse
import io
import os
import random
import statistics
import tarfile

import torch
from PIL import Image

# Run as a script from bench/: its sibling holds the transform and the timing both benches share.
from torchvision_vs_feedscope import feedscope_rate, loader_rate, train_transform

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")


def tar_samples(paths):
    """(image bytes, label) per sample: consecutive members sharing webdataset's key."""
    for path in paths:
        with tarfile.open(path, "r:*") as tar:
            key, sample = None, {}
            for member in tar:
                if not member.isfile():
                    continue
                base = os.path.basename(member.name)
                dot = base.find(".")
                if dot <= 0:
                    continue
                k = member.name[: len(member.name) - len(base) + dot]
                if k != key and sample:
                    yield sample
                    sample = {}
                key = k
                sample[base[dot + 1:].lower()] = tar.extractfile(member).read()
            if sample:
                yield sample


class TarShards(torch.utils.data.IterableDataset):
    def __init__(self, shards, transform, buffer, seed):
        self.shards, self.transform, self.buffer, self.seed = shards, transform, buffer, seed
        self.epoch = 0

    def __iter__(self):
        self.epoch += 1  # each worker keeps its own copy; every copy counts the same epochs
        shards = list(self.shards)
        random.Random(self.seed * 1000 + self.epoch).shuffle(shards)
        info = torch.utils.data.get_worker_info()
        if info is not None:
            shards = shards[info.id::info.num_workers]
        rng = random.Random(self.seed * 7919 + self.epoch * 31 + (info.id if info else 0))
        held = []
        for sample in tar_samples(shards):
            held.append(sample)
            if len(held) >= self.buffer:
                yield self.decode(held.pop(rng.randrange(len(held))))
        while held:
            yield self.decode(held.pop(rng.randrange(len(held))))

    def decode(self, sample):
        image = next(sample[e] for e in IMAGE_EXTENSIONS if e in sample)
        img = Image.open(io.BytesIO(image)).convert("RGB")
        return self.transform(img), int(sample["cls"])


def torch_rate(shards, workers, batch, batches, warmup, buffer):
    loader = torch.utils.data.DataLoader(TarShards(shards, train_transform(), buffer, 0),
                                         batch_size=batch, num_workers=workers,
                                         persistent_workers=workers > 0)
    return loader_rate(loader, batches, warmup)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", help="a directory of webdataset .tar shards (make-dataset webdataset)")
    p.add_argument("--feedscope", default="build/cli/feedscope", help="the feedscope binary")
    p.add_argument("--workers", default="0,2")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--shuffle-buffer", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3, help="alternating pairs per worker count")
    a = p.parse_args()
    torch.set_num_threads(1)
    shards = sorted(os.path.join(a.root, f) for f in os.listdir(a.root) if f.endswith((".tar", ".tar.gz", ".tgz")))
    print(f"{len(shards)} shards; {a.repeats} alternating pairs per worker count, medians")
    print(f"{'workers':>7} {'tarfile+PIL/s':>14} {'feedscope/s':>12} {'ratio':>7}  (each pair's ratio)")
    for w in (int(x) for x in a.workers.split(",")):
        pairs = []
        for _ in range(a.repeats):
            tv = torch_rate(shards, w, a.batch_size, a.batches, a.warmup, a.shuffle_buffer)
            fs = feedscope_rate(a.feedscope, "webdataset:" + a.root, w, a.batch_size, a.batches,
                                a.warmup, ["--shuffle-buffer", str(a.shuffle_buffer)])
            pairs.append((tv, fs))
        tv = statistics.median(p[0] for p in pairs)
        fs = statistics.median(p[1] for p in pairs)
        ratio = statistics.median(p[1] / p[0] for p in pairs)
        each = " ".join(f"{p[1] / p[0]:.2f}" for p in pairs)
        print(f"{w:>7} {tv:>14.1f} {fs:>12.1f} {ratio:>6.2f}x  ({each})", flush=True)


if __name__ == "__main__":
    main()
