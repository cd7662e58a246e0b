"""A DistributedDataParallel job on the CPU (gloo) for `feedscope watch` on every rank: started by
`python -m torch.distributed.run` (it reads RANK, LOCAL_RANK, WORLD_SIZE) on one machine or
several, or by srun or mpirun (their own variables give the rank; MASTER_ADDR and MASTER_PORT,
which the caller exports, the rendezvous). Each rank loads from its own DataLoader with workers whose per-sample cost is burned CPU,
so one rank can be made to load slower than the others (--slow-rank), or each rank in turn for
--alternate-steps steps, waiting (a straggler that moves from rank to rank); a rank can raise mid-run
(--raise-rank); --feedscope puts the Python client's Session in every rank."""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--width", type=int, default=256)
parser.add_argument("--num-workers", type=int, default=1)
parser.add_argument("--load-ms", type=float, default=1.0, help="CPU burned per sample")
parser.add_argument("--slow-rank", type=int, default=-1)
parser.add_argument("--slow-load-ms", type=float, default=8.0)
parser.add_argument("--alternate-steps", type=int, default=0,
                    help="each rank in turn waits --slow-load-ms more per sample for this many steps")
parser.add_argument("--raise-rank", type=int, default=-1)
parser.add_argument("--raise-step", type=int, default=10)
parser.add_argument("--feedscope", action="store_true", help="a feedscope Session in every rank")


class Burned(Dataset):
    def __init__(self, n, width, ms, turn=None):
        self.n, self.width, self.ms, self.turn = n, width, ms, turn

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        ms = self.ms
        if self.turn:  # (rank, world, batch size, steps, slow ms): slow in this rank's turns
            rank, world, batch, steps, slow = self.turn
            # Unshuffled, the sampler gives rank r the indices r, r + world, ...: which step this
            # sample is in, so that turns are counted in steps and every rank has as many (turns
            # of wall-clock time would end the run part-way through one, one rank's turn more).
            if (i // world // batch // steps) % world == rank:
                # Waited, not burned: on a loaded machine a burned turn takes the cores the other
                # rank's loader needs, and both ranks stall alike, whose turn it is blurred.
                time.sleep(slow / 1000)
        end = time.perf_counter() + ms / 1000
        x = 0
        while time.perf_counter() < end:
            x += 1
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.width, generator=g), i % 10


# Each launcher's rank and size variables, in the order sampler/rank_identity.h believes them.
LAUNCHER_VARIABLES = (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                      ("PMI_RANK", "PMI_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"))


def launcher_rank():
    for rank, size in LAUNCHER_VARIABLES:
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    raise SystemExit("ddp_job.py: no launcher's rank variables (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, "
                     "SLURM_PROCID) in the environment")


def main():
    args = parser.parse_args()
    rank, world = launcher_rank()
    dist.init_process_group("gloo", rank=rank, world_size=world)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    ms = args.slow_load_ms if rank == args.slow_rank else args.load_ms
    turn = None
    if args.alternate_steps > 0:
        turn = (rank, world, args.batch_size, args.alternate_steps, args.slow_load_ms)
    data = Burned(args.steps * args.batch_size * world, args.width, ms, turn)
    sampler = DistributedSampler(data, shuffle=turn is None)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler,
                        num_workers=args.num_workers, persistent_workers=args.num_workers > 0)
    model = DDP(nn.Sequential(nn.Linear(args.width, args.width), nn.ReLU(), nn.Linear(args.width, 10)))
    opt = torch.optim.SGD(model.parameters(), 0.01)
    fs = None
    if args.feedscope:
        import feedscope
        fs = feedscope.Session(warmup=3)
        batches = fs.wrap(loader)
    else:
        batches = loader
    for step, (x, y) in enumerate(batches, 1):
        if rank == args.raise_rank and step == args.raise_step:
            raise RuntimeError(f"rank {rank} fails at step {step} (as asked)")
        with (fs.step(len(x)) if fs else _nothing()):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if step % 20 == 0:
            print(f"[{rank}] step {step} loss {loss.item():.3f}", flush=True)
    if fs:
        fs.finish()
    dist.destroy_process_group()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main()
