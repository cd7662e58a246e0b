"""Two plain PyTorch programs with nothing of feedscope in them, the classic cases of a GPU that
waits on its host, for `feedscope watch` to diagnose on a GPU machine (scripts/device_check.sh):

    feedscope watch -- python3 bench/gpu_programs.py mlp          # 3-100-3 MLP, batch 100
    feedscope watch -- python3 bench/gpu_programs.py matmul-item  # 1000x1000 matmul + .item()
    feedscope watch -- python3 bench/gpu_programs.py matmul-end   # the same, one .item() at the end

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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("program", choices=["mlp", "matmul-item", "matmul-end"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=3000)
    args = p.parse_args()
    programs = {"mlp": mlp, "matmul-item": matmul_item, "matmul-end": matmul_end}
    programs[args.program](torch.device(args.device), args.steps)


if __name__ == "__main__":
    main()
