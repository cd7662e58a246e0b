"""A training loop over a PyTorch DataLoader with short epochs, for `feedscope watch`'s worker churn
(docs/diagnosis.md, tree_worker_churn): 4 workers, each taking 1.5 s to start (its worker_init_fn
stands for a worker's imports and its dataset's files), about 1 s of steps an epoch, and loading
that keeps up with the step once the workers run. Without --persistent the DataLoader starts its
workers again every epoch, and the loop waits for each new set's first batch."""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __len__(self):
        return 800

    def __getitem__(self, i):
        time.sleep(0.002)  # 2 ms an item: 4 ms a batch of 8 over 4 workers, under the 10 ms step
        return torch.full((16,), float(i))


def start_up(_worker):
    time.sleep(1.5)


def step(batch):
    end = time.perf_counter() + 0.010
    while time.perf_counter() < end:
        batch.sum()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--persistent", action="store_true")
    args = p.parse_args()
    loader = DataLoader(Items(), batch_size=8, num_workers=4, worker_init_fn=start_up,
                        persistent_workers=args.persistent)
    start, batches = time.monotonic(), 0
    for _ in range(args.epochs):
        for batch in loader:
            step(batch)
            batches += 1
    print(f"throughput: {batches * 8 / (time.monotonic() - start):.1f} samples/s")


if __name__ == "__main__":
    main()
