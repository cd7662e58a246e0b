"""A plain PyTorch training loop (torchvision ImageFolder, DataLoader), profiled by feedscope.

The lines marked `# feedscope` are all it takes; delete them and the loop runs as before. The
model and the data are plain_python_loop.py's (beside this file), the program `feedscope watch`
profiles without a change.

    PYTHONPATH=build/python python3 examples/wrap_python_loop.py --data DIR [--workers 1]
    PYTHONPATH=build/python python3 examples/wrap_python_loop.py --in-memory --model heavy

--data DIR: an ImageFolder tree (`feedscope make-dataset images --out DIR --count 256` makes
one); each image is decoded and cropped by torchvision in the DataLoader's workers.
--in-memory: random 3x32x32 tensors already in memory, so only the step costs anything.
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader

import feedscope  # feedscope
from plain_python_loop import make_dataset, make_model


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", help="an ImageFolder directory")
    p.add_argument("--in-memory", action="store_true", help="random tensors instead of images")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--model", choices=["tiny", "heavy"], default="tiny")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--report-dir", default="feedscope-report")
    args = p.parse_args()
    if bool(args.data) == args.in_memory:
        p.error("give one of --data DIR or --in-memory")

    torch.manual_seed(0)
    dataset, features, classes = make_dataset(args)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, drop_last=True)
    model = make_model(args.model, features, classes)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    fs = feedscope.Session(args.report_dir, warmup=args.warmup, device="cpu")  # feedscope
    steps, total = 0, args.warmup + args.steps
    while steps < total:
        for x, y in fs.wrap(loader):  # feedscope: was `for x, y in loader:`
            with fs.step(len(x)):  # feedscope
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
            steps += 1
            if steps == total:
                break
    report = fs.finish()  # feedscope
    print(f"loss {loss.item():.4f}; bottleneck {report['diagnosis']['bottleneck']}")


if __name__ == "__main__":
    main()
