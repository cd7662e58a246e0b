"""A training program of the shapes behind DataLoader's "memory leak" reports, for `feedscope watch`
(tests/python/test_watch_memory.py, docs/diagnosis.md#memory):

  --data strings   a Dataset over a list of millions of Python strings, read by forked workers:
                   each read writes a string's reference count, so the workers copy the
                   parent's pages one by one (copy-on-access, pytorch/pytorch#13246, #20433)
  --data numpy     the same strings in one numpy array: the workers read it without writing it
  --leak           no workers; the loop appends each step's loss tensor (its graph with it) to a list
  --data folder --root DIR
                   torchvision's ImageFolder over DIR: its `samples`, a list of (path, class)
                   tuples, one per file, is what forked workers copy as they index it
  --data folder --root DIR --loader feedscope
                   the same files through feedscope.DataLoader("images:DIR"): worker threads over
                   one process, the listing held in C++, nothing to copy

Each batch is paced (--pace-s), so the rates do not depend on how loaded the machine is. With
--self-report FILE it reads its own processes' /proc/PID/smaps_rollup while it runs and writes
them there, for the test to hold feedscope's figures to."""

import argparse
import json
import os
import threading
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


def rollup(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Private_Clean", "Private_Dirty", "Shared_Clean", "Shared_Dirty"):
                    fields[key] = int(rest.split()[0]) * 1024
    except OSError:
        return None
    if len(fields) < 4:
        return None
    return {"private": fields["Private_Clean"] + fields["Private_Dirty"],
            "shared": fields["Shared_Clean"] + fields["Shared_Dirty"]}


def children():
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                out += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return out


class SelfReport:
    """This process's and its children's smaps_rollup, four times a second, by pid."""

    def __init__(self, path):
        self.path, self.readings, self.stop = path, {}, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.t0 = time.monotonic()

    def run(self):
        while not self.stop.is_set():
            t = time.monotonic() - self.t0
            for pid in [os.getpid()] + children():
                r = rollup(pid)
                if r:
                    self.readings.setdefault(str(pid), []).append([t, r["private"], r["shared"]])
            self.stop.wait(0.25)

    def __enter__(self):
        if self.path:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.path:
            self.stop.set()
            self.thread.join()
            with open(self.path, "w") as f:
                json.dump({"trainer": os.getpid(), "processes": self.readings}, f)


class Batches(Dataset):
    """Index j is the j-th batch of `batch` consecutive items; reading one touches each item."""

    def __init__(self, items, batch, pace_s):
        self.items, self.batch, self.pace_s = items, batch, pace_s

    def __len__(self):
        return len(self.items) // self.batch

    def __getitem__(self, j):
        chunk = self.items[j * self.batch:(j + 1) * self.batch]
        n = sum(len(s) for s in chunk)  # a list's items: each one's reference count written
        time.sleep(self.pace_s)
        return torch.tensor(n)


def strings(n):
    return [f"sample-{i:09d}-" + "x" * 20 for i in range(n)]


def folder_epochs(a):
    """Each epoch's image count, reading --root as a training program would: shuffled batches of
    --image-size crops from --workers workers, --pace-s a batch."""
    if a.loader == "feedscope":
        import feedscope
        loader = feedscope.DataLoader(f"images:{a.root}", batch_size=a.batch, num_workers=a.workers,
                                      pipeline="eval", image_size=a.image_size, shuffle=True)
    else:
        import torchvision
        from torchvision import transforms
        data = torchvision.datasets.ImageFolder(a.root, transforms.Compose([
            transforms.Resize(a.image_size), transforms.CenterCrop(a.image_size), transforms.ToTensor()]))
        loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=a.workers)
    for _ in range(a.epochs):
        total = 0
        for images, _labels in loader:
            total += images.shape[0]
            time.sleep(a.pace_s)
        yield total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", choices=["strings", "numpy", "folder"], default="strings")
    ap.add_argument("--root", default="", help="--data folder: an ImageFolder layout (class/file)")
    ap.add_argument("--loader", choices=["torch", "feedscope"], default="torch")
    ap.add_argument("--image-size", type=int, default=16)
    ap.add_argument("--items", type=int, default=3_000_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--pace-s", type=float, default=0.04)
    ap.add_argument("--leak", action="store_true")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--self-report", default="")
    a = ap.parse_args()
    torch.set_num_threads(1)
    with SelfReport(a.self_report):
        if a.leak:
            model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1))
            losses = []
            for step in range(a.steps):
                loss = model(torch.randn(64, 256)).pow(2).mean()
                loss.backward()
                losses.append(loss)  # the bug: loss.item() keeps a float, this keeps the graph
                time.sleep(a.pace_s / 2)
            print(f"steps: {a.steps}, mean loss {sum(l.item() for l in losses) / len(losses):.3f}")
            return
        if a.data == "folder":
            for epoch, total in enumerate(folder_epochs(a)):
                print(f"epoch {epoch}: {total} images")
            return
        items = strings(a.items)
        if a.data == "numpy":
            items = np.array(items, dtype=f"S{len(items[0])}")
        loader = DataLoader(Batches(items, a.batch, a.pace_s), batch_size=None, num_workers=a.workers)
        for epoch in range(a.epochs):
            total = sum(int(b) for b in loader)
            print(f"epoch {epoch}: {total} characters")


if __name__ == "__main__":
    main()
