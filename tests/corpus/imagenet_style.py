"""A training script of the shape of pytorch/examples' imagenet/main.py, written here: an
ImageFolder (or --dummy data) through a torchvision model, `-j` workers, `-b` batch, and its
`Epoch: [e][i/n]  Time ... Data ...` lines. feedscope's corpus (tests/corpus/cases.json) watches it
unchanged; nothing in it knows feedscope."""

import argparse
import time

import torch
import torch.nn as nn
import torchvision.datasets as datasets
import torchvision.models as models
import torchvision.transforms as transforms

parser = argparse.ArgumentParser(description="ImageNet-style training (CPU)")
parser.add_argument("data", nargs="?", default="", help="path to dataset (ImageFolder)")
parser.add_argument("-a", "--arch", default="mobilenet_v3_small",
                    choices=sorted(n for n in models.__dict__ if n.islower() and not n.startswith("_")
                                   and callable(models.__dict__[n])))
parser.add_argument("-j", "--workers", default=4, type=int, help="data loading workers")
parser.add_argument("-b", "--batch-size", default=16, type=int)
parser.add_argument("--steps", default=60, type=int, help="batches to train (an epoch is cut)")
parser.add_argument("--image-size", default=64, type=int)
parser.add_argument("--lr", default=0.01, type=float)
parser.add_argument("-p", "--print-freq", default=1, type=int)
parser.add_argument("--threads", default=0, type=int, help="torch.set_num_threads (0: torch's)")
parser.add_argument("--pin-memory", action="store_true")
parser.add_argument("--dummy", action="store_true", help="use fake data to benchmark")


class AverageMeter:
    def __init__(self, name, fmt=":f"):
        self.name, self.fmt = name, fmt
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        return ("{name} {val" + self.fmt + "} ({avg" + self.fmt + "})").format(**self.__dict__)


def main():
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    model = models.__dict__[args.arch](num_classes=10)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9)
    if args.dummy:
        dataset = datasets.FakeData(args.steps * args.batch_size, (3, args.image_size, args.image_size),
                                    10, transforms.ToTensor())
    else:
        normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
        dataset = datasets.ImageFolder(args.data, transforms.Compose([
            transforms.RandomResizedCrop(args.image_size), transforms.RandomHorizontalFlip(),
            transforms.ToTensor(), normalize]))
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.workers, pin_memory=args.pin_memory,
                                         drop_last=True)
    batch_time, data_time, losses = AverageMeter("Time", ":6.3f"), AverageMeter("Data", ":6.3f"), \
        AverageMeter("Loss", ":.4e")
    model.train()
    step = 0
    epoch = 0
    end = time.time()
    while step < args.steps:
        for i, (images, target) in enumerate(loader):
            data_time.update(time.time() - end)
            loss = criterion(model(images), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.update(loss.item(), images.size(0))
            batch_time.update(time.time() - end)
            end = time.time()
            if i % args.print_freq == 0:
                print(f"Epoch: [{epoch}][{i:>3}/{len(loader)}]\t{batch_time}\t{data_time}\t{losses}",
                      flush=True)
            step += 1
            if step >= args.steps:
                break
        epoch += 1


if __name__ == "__main__":
    main()
