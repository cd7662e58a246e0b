"""A DistributedDataParallel script in the shape of the PyTorch DDP tutorial's multigpu.py, written
here for the CPU (gloo): torch.multiprocessing.spawn starts one process per rank (or torchrun
does, where it sets RANK), each trains the same model on its shard (DistributedSampler) and prints
`[rank] step i | x.xxx s/batch`. feedscope's corpus watches it unchanged. (Debian's torchrun 1.13
fails under Python 3.11 before it starts a rank: hence spawn.)"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--width", type=int, default=512)
parser.add_argument("--num-workers", type=int, default=0)
parser.add_argument("--nprocs", type=int, default=2, help="ranks to spawn (without torchrun)")


def train(local_rank, args):
    if "RANK" not in os.environ:
        os.environ.update(RANK=str(local_rank), WORLD_SIZE=str(args.nprocs), LOCAL_RANK=str(local_rank))
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    n = args.steps * args.batch_size * dist.get_world_size()
    data = TensorDataset(torch.randn(n, args.width), torch.randint(0, 10, (n,)))
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data),
                        num_workers=args.num_workers)
    model = DDP(nn.Sequential(nn.Linear(args.width, args.width), nn.ReLU(),
                              nn.Linear(args.width, args.width), nn.ReLU(), nn.Linear(args.width, 10)))
    opt = torch.optim.SGD(model.parameters(), 0.01)
    end = time.time()
    for step, (x, y) in enumerate(loader, 1):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        now = time.time()
        print(f"[{rank}] step {step} | {now - end:.3f} s/batch", flush=True)
        end = now
    dist.destroy_process_group()


def main():
    args = parser.parse_args()
    if "RANK" in os.environ:  # torchrun started this rank
        train(int(os.environ["LOCAL_RANK"]), args)
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    torch.multiprocessing.spawn(train, args=(args,), nprocs=args.nprocs)


if __name__ == "__main__":
    main()
