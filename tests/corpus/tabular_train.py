"""A training script that prints seconds per batch, written here in the shape of many on the web:
a Dataset whose __getitem__ does real CPU work (a spectrum of each raw signal), a small MLP, a
DataLoader with --num-workers, and a progress line `step 20/100 | 0.153 s/batch | loss 0.3210`.
feedscope's corpus (tests/corpus/cases.json) watches it unchanged."""

import argparse
import time

import numpy as np
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--num-workers", type=int, default=0)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--signal", type=int, default=16384, help="raw samples per example")
parser.add_argument("--threads", type=int, default=0)


class Signals(torch.utils.data.Dataset):
    def __init__(self, n, length):
        self.n, self.length = n, length

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        x = rng.standard_normal(self.length).astype(np.float32)
        spectrum = np.abs(np.fft.rfft(x * np.hanning(self.length)))[:256]
        for _ in range(3):  # a feature pipeline: smoothing passes
            spectrum = np.convolve(spectrum, np.ones(5) / 5, mode="same")
        return torch.from_numpy(np.log1p(spectrum).astype(np.float32)), int(i % 10)


def main():
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    data = Signals(args.steps * args.batch_size, args.signal)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.num_workers)
    model = nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    end = time.time()
    for step, (x, y) in enumerate(loader, 1):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        now = time.time()
        print(f"step {step}/{len(loader)} | {now - end:.3f} s/batch | loss {loss.item():.4f}", flush=True)
        end = now


if __name__ == "__main__":
    main()
