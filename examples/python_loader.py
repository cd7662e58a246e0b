"""examples/plain_python_loop.py with one change: its DataLoader is feedscope.DataLoader.

    PYTHONPATH=build/python feedscope watch -- python3 examples/python_loader.py --data DIR --workers 1

Everything else is the plain program's, line for line (`diff examples/plain_python_loop.py
examples/python_loader.py` shows the import and the loader): the same model, step and printout.
--data DIR: the same ImageFolder tree, decoded, cropped (RandomResizedCrop + flip) and normalized by
feedscope's C++ workers instead of torchvision in Python processes; make_dataset() still lists it
with torchvision, for the features and classes the model is built with. --in-memory: feedscope's
synthetic:3x32x32, random tensors of the same shape. docs/python-loader.md has the watch output
of both programs.
"""

import argparse
import time

import torch
import torchvision
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torchvision import transforms

import feedscope


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
    loader = feedscope.DataLoader(f"images:{args.data}" if args.data else "synthetic:3x32x32",
                                  batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                                  drop_last=True, image_size=args.image_size, synthetic_samples=1024)
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
