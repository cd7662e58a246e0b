"""Hogwild training, as pytorch/examples' mnist_hogwild does it: one model in shared memory,
--processes training processes (torch.multiprocessing, fork) that each run the step on it with a
DataLoader of their own (--workers each), and the script that started them waiting in join(). No
MASTER_ADDR, no ranks: several training processes that are not loader workers.

    python3 hogwild_train.py --processes 2 --steps 300
"""

import argparse
import time

import torch
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train(rank, model, args):
    torch.manual_seed(rank)
    data = TensorDataset(torch.randn(2048, 256), torch.randint(0, 10, (2048,)))
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps, start = 0, time.time()
    while steps < args.steps:
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            steps += 1
            if steps == args.steps:
                break
    print(f"process {rank}: {steps * args.batch_size / (time.time() - start):.1f} samples/s", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args()
    torch.set_num_threads(1)  # as mnist_hogwild: each process one thread
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    model.share_memory()
    processes = [mp.Process(target=train, args=(rank, model, args)) for rank in range(args.processes)]
    for proc in processes:
        proc.start()
    for proc in processes:
        proc.join()


if __name__ == "__main__":
    main()
