"""A training script of the shape of pytorch/examples' imagenet/main.py, written here: an
ImageFolder (or --dummy data) through a torchvision model, `-j` workers, `-b` batch, and its
`Epoch: [e][i/n]  Time ... Data ...` lines (or torchvision's reference trainer's MetricLogger
lines, or a tqdm bar: --log). feedscope's corpus (tests/corpus/cases.json) watches it
unchanged; nothing in it knows feedscope."""

import argparse
import collections
import datetime
import statistics
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
parser.add_argument("--persistent-workers", default=0, type=int, choices=[0, 1],
                    help="DataLoader(persistent_workers=...): 1 keeps the workers across epochs")
parser.add_argument("--dummy", action="store_true", help="use fake data to benchmark")
parser.add_argument("--log", default="imagenet", choices=["imagenet", "metric-logger", "tqdm"],
                    help="progress lines as pytorch/examples' imagenet prints them (`Time ... Data ...`), "
                         "as torchvision's reference trainer does (MetricLogger: `img/s: N ... time: S  "
                         "data: S`, 20-batch means), or a tqdm bar")


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


class ImageNetLog:
    """pytorch/examples imagenet/main.py's ProgressMeter line: each value with its running mean."""

    def __init__(self, args):
        self.args = args
        self.batch_time, self.data_time = AverageMeter("Time", ":6.3f"), AverageMeter("Data", ":6.3f")
        self.losses = AverageMeter("Loss", ":.4e")

    def wrap(self, loader, epoch):
        return loader

    def end_epoch(self, epoch, n):
        pass

    def step(self, epoch, i, n, data_s, batch_s, step_s, loss, batch_size):
        self.data_time.update(data_s)
        self.batch_time.update(batch_s)
        self.losses.update(loss, batch_size)
        if i % self.args.print_freq == 0:
            print(f"Epoch: [{epoch}][{i:>3}/{n}]\t{self.batch_time}\t{self.data_time}\t{self.losses}", flush=True)


class MetricLog:
    """torchvision's references/classification MetricLogger.log_every, as its train.py uses it:
    `time:` and `data:` are means over the last 20 batches, `img/s:` the batch over the time from
    the batch's arrival to the step's end (the wait for data left out). An epoch ends with its
    `Total time: H:MM:SS (S s / it)` line."""

    def __init__(self, args):
        self.args = args

    def wrap(self, loader, epoch):
        self.times, self.datas, self.losses = collections.deque(maxlen=20), collections.deque(maxlen=20), []
        self.total_s = 0.0
        return loader

    def end_epoch(self, epoch, n):
        print(f"Epoch: [{epoch}] Total time: {datetime.timedelta(seconds=int(self.total_s))} "
              f"({self.total_s / n:.4f} s / it)", flush=True)

    def step(self, epoch, i, n, data_s, batch_s, step_s, loss, batch_size):
        self.times.append(batch_s)
        self.datas.append(data_s)
        self.losses.append(loss)
        self.total_s += batch_s
        if i % self.args.print_freq == 0 or i == n - 1:
            eta = datetime.timedelta(seconds=int(self.total_s / (i + 1) * (n - i)))
            width = len(str(n))
            print("  ".join([f"Epoch: [{epoch}]", f"[{i:>{width}}/{n}]", f"eta: {eta}", f"lr: {self.args.lr}",
                             f"img/s: {batch_size / step_s}",
                             f"loss: {statistics.median(self.losses[-20:]):.4f} ({statistics.mean(self.losses):.4f})",
                             f"time: {statistics.mean(self.times):.4f}", f"data: {statistics.mean(self.datas):.4f}"]),
                  flush=True)


class TqdmLog:
    """A tqdm bar over the loader, as many training scripts draw one: its rate is its only figure.
    smoothing=0 makes the rate the epoch's mean so far, so a bar's last line is the epoch's speed
    (what the corpus holds feedscope's advice to)."""

    def __init__(self, args):
        import tqdm  # Debian's python3-tqdm
        self.tqdm = tqdm.tqdm

    def wrap(self, loader, epoch):
        return self.tqdm(loader, desc=f"epoch {epoch}", smoothing=0)

    def end_epoch(self, epoch, n):
        pass

    def step(self, epoch, i, n, data_s, batch_s, step_s, loss, batch_size):
        pass


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
                                         persistent_workers=bool(args.persistent_workers and args.workers),
                                         drop_last=True)
    log = {"imagenet": ImageNetLog, "metric-logger": MetricLog, "tqdm": TqdmLog}[args.log](args)
    model.train()
    step = 0
    epoch = 0
    began = time.time()
    while step < args.steps:
        end = time.time()
        for i, (images, target) in enumerate(log.wrap(loader, epoch)):
            arrived = time.time()
            loss = criterion(model(images), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            done = time.time()
            log.step(epoch, i, len(loader), arrived - end, done - end, done - arrived, loss.item(), images.size(0))
            end = time.time()
            step += 1
            if step >= args.steps:
                break
        else:
            log.end_epoch(epoch, len(loader))
        epoch += 1
    # The loop's own rate, epoch boundaries included (what its per-batch lines leave out), for
    # bench/corpus.py's measure of a change; feedscope reads the lines above, never this one.
    del loader  # the last epoch's workers shut down inside the timed loop, as every other epoch's
    print(f"corpus truth: {step * args.batch_size} samples in {time.time() - began:.3f} s", flush=True)


if __name__ == "__main__":
    main()
