"""A plain PyTorch training program with no feedscope in it: what `feedscope watch` is for.

    feedscope watch -- python3 examples/plain_python_loop.py --data DIR --workers 1
    feedscope watch -- python3 examples/plain_python_loop.py --in-memory --model heavy
    feedscope sweep --num-workers 0,1,2 -- python3 examples/plain_python_loop.py --data DIR \
        --workers {num_workers}

--data DIR: an ImageFolder tree (`feedscope make-dataset images --out DIR --count 256` makes one),
decoded and cropped by torchvision in the DataLoader's workers. --in-memory: random tensors, so
only the step costs anything. --device cuda runs the step on the GPU. It prints one line
"throughput: N samples/s" at the end (for --throughput-pattern); --fail-at-step N raises an error
at step N, as a program with a bug does.
"""

import argparse
import time

import torch
import torchvision
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchvision import transforms


def make_model(kind, features, classes):
    if kind == "tiny":
        return nn.Sequential(nn.Flatten(), nn.Linear(features, classes))
    return nn.Sequential(nn.Flatten(), nn.Linear(features, 2048), nn.ReLU(),
                         nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, classes))


def make_dataset(args):
    """The dataset and its (features, classes): random tensors, or an ImageFolder through
    torchvision's RandomResizedCrop, flip and ToTensor in the DataLoader's workers."""
    if args.in_memory:
        dataset = TensorDataset(torch.randn(1024, 3, 32, 32), torch.randint(0, 10, (1024,)))
        return dataset, 3 * 32 * 32, 10
    tf = transforms.Compose([transforms.RandomResizedCrop(args.image_size),
                             transforms.RandomHorizontalFlip(), transforms.ToTensor()])
    dataset = torchvision.datasets.ImageFolder(args.data, transform=tf)
    return dataset, 3 * args.image_size * args.image_size, len(dataset.classes)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", help="an ImageFolder directory")
    p.add_argument("--in-memory", action="store_true", help="random tensors instead of images")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--model", choices=["tiny", "heavy"], default="tiny")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--device", default="cpu")
    p.add_argument("--fail-at-step", type=int, default=-1)
    args = p.parse_args()
    if bool(args.data) == args.in_memory:
        p.error("give one of --data DIR or --in-memory")

    torch.manual_seed(0)
    dataset, features, classes = make_dataset(args)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, drop_last=True)
    device = torch.device(args.device)
    model = make_model(args.model, features, classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    steps, samples, start = 0, 0, time.monotonic()
    while steps < args.steps:
        for x, y in loader:
            if steps == args.fail_at_step:
                raise RuntimeError(f"a bug at step {steps}")
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            steps += 1
            samples += len(x)
            if steps == args.steps:
                break
    print(f"loss {loss.item():.4f}")
    print(f"throughput: {samples / (time.monotonic() - start):.1f} samples/s")


if __name__ == "__main__":
    main()
