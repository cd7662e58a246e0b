"""Plain PyTorch programs, the classic cases of a GPU that waits on its host, for `feedscope watch`
to diagnose on a GPU machine (scripts/device_check.sh):

    feedscope watch -- python3 bench/gpu_programs.py mlp          # 3-100-3 MLP, batch 100
    feedscope watch -- python3 bench/gpu_programs.py matmul-item  # 1000x1000 matmul + .item()
    feedscope watch -- python3 bench/gpu_programs.py matmul-end   # the same, one .item() at the end
    feedscope watch -- python3 bench/gpu_programs.py loader       # feedscope.DataLoader(device="cuda")
    feedscope watch -- torchrun --nproc_per_node 2 bench/gpu_programs.py ddp --slow-rank 1

loader: a small CNN fed by feedscope.DataLoader(device="cuda") (PYTHONPATH=build/python): a
Session in the program, whose batches and the CUDA trace make the GPU's work per batch. ddp: two
ranks of a DistributedDataParallel job on the one GPU (NCCL, else gloo: it says which), the rank
--slow-rank doing four times the others' matmuls a step, so that the others wait for it in the
all-reduce.

mlp: a tiny model trained at batch 100, the loss read with .item() every step, as tutorials do:
every step is a handful of microsecond kernels and a host sync. matmul-item: a matmul loop with
an .item() in every iteration; matmul-end: the same loop summing on the GPU and reading the total
once, at the end (the change the sync advice names). Each prints "throughput: N samples/s"
(iterations for matmul). The device check runs each for thousands of steps: seconds of steady
state after CUDA's start-up.
"""

import argparse
import time

import torch
from torch import nn


def mlp(device, steps):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 100), nn.ReLU(), nn.Linear(100, 3)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(100, 3, device=device)
    y = torch.randint(0, 3, (100,), device=device)
    start = time.monotonic()
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        last = loss.item()
    print(f"loss {last:.4f}")
    print(f"throughput: {steps * 100 / (time.monotonic() - start):.1f} samples/s")


def matmul_item(device, steps):
    a = torch.randn(1000, 1000, device=device)
    start = time.monotonic()
    total = 0.0
    for _ in range(steps):
        total += (a @ a).sum().item()
    print(f"sum {total:.1f}")
    print(f"throughput: {steps / (time.monotonic() - start):.1f} samples/s")


def matmul_end(device, steps):
    a = torch.randn(1000, 1000, device=device)
    start = time.monotonic()
    total = torch.zeros((), device=device)
    for _ in range(steps):
        total += (a @ a).sum()
    print(f"sum {total.item():.1f}")
    print(f"throughput: {steps / (time.monotonic() - start):.1f} samples/s")


def loader(device, steps):
    import feedscope
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(32, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = feedscope.DataLoader("synthetic:3x64x64", batch_size=64, num_workers=2,
                                   device=str(device), synthetic_samples=64 * 200, classes=10)
    start, done = time.monotonic(), 0
    while done < steps:
        for images, labels in batches:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images.float()), labels).backward()
            optimizer.step()
            done += 1
            if done == steps:
                break
    if device.type == "cuda":
        torch.cuda.synchronize()
    print(f"throughput: {done * 64 / (time.monotonic() - start):.1f} samples/s")


def ddp(device, steps, slow_rank):
    import os
    import torch.distributed as dist
    rank = int(os.environ["RANK"])
    backend = "nccl"
    try:
        dist.init_process_group(backend)
    except Exception as e:  # two ranks on one GPU: NCCL may refuse
        print(f"rank {rank}: nccl refused ({e}); gloo")
        backend = "gloo"
        dist.init_process_group(backend)
    print(f"rank {rank}: backend {backend}")
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Linear(2048, 2048).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 2048, device=device)
    start = time.monotonic()
    for _ in range(steps):
        h = x
        for _ in range(4 if rank == slow_rank else 1):
            h = model(h)
        optimizer.zero_grad()
        h.square().mean().backward()
        optimizer.step()
        last = h.sum().item()
    print(f"rank {rank}: sum {last:.3f}")
    print(f"throughput: {steps * 256 / (time.monotonic() - start):.1f} samples/s")
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("program", choices=["mlp", "matmul-item", "matmul-end", "loader", "ddp"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--slow-rank", type=int, default=1, help="ddp: the rank that computes four times as much")
    args = p.parse_args()
    if args.program == "ddp":
        ddp(torch.device(args.device), args.steps, args.slow_rank)
        return
    programs = {"mlp": mlp, "matmul-item": matmul_item, "matmul-end": matmul_end, "loader": loader}
    programs[args.program](torch.device(args.device), args.steps)


if __name__ == "__main__":
    main()
