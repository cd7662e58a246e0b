"""A training script that counts its progress and prints no speed, written here in the shapes of
the tutorials people start from (pytorch/examples at 76f0120): a small CNN on MNIST-sized images
(mnist's shape) or a word-level LSTM (word_language_model's), its data in memory, and its progress
as one of those programs prints it (--log):

  examples      `Train Epoch: 1 [640/60000 (1%)]\tLoss: 0.3012` every --log-interval batches
                (mnist, siamese_network, mnist_hogwild, vae: samples done of the epoch)
  superres      `===> Epoch[1](5/13): Loss: 0.0421` every batch (super_resolution: batches)
  neural-style  `<ctime>\tEpoch 1:\t[40/5000]\tcontent: ...` every --log-interval batches
                (fast_neural_style: samples)
  keras         a Keras progress bar, `  32/938 [>.....] - ETA: 3s - loss: 0.3012`, redrawn after a
                carriage return (TF 2's Keras in a pipe: steps)
  rank-batch    `Rank 0 training batch 5 loss 0.3012` every batch (pytorch/examples'
                distributed/rpc/parameter_server: no counter, a growing number)

It sets no thread count: torch's own (OMP_NUM_THREADS) is what a change from outside moves. At the
end it prints `corpus truth: N samples in S s`, its own timing of the training loop, for
bench/corpus.py to measure a change by (feedscope reads no rate from it). Nothing in it knows
feedscope."""

import argparse
import time

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--workload", choices=["conv", "lstm"], default="conv")
parser.add_argument("--log", choices=["examples", "superres", "neural-style", "keras", "rank-batch"],
                    default="examples")
parser.add_argument("--batchSize", "--batch-size", dest="batch_size", type=int, default=64)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--batches", type=int, default=60, help="batches an epoch")
parser.add_argument("--log-interval", type=int, default=1)


class Net(nn.Module):  # mnist/main.py's
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.relu(self.fc1(torch.flatten(x, 1)))
        return torch.log_softmax(self.fc2(x), dim=1)


class Lstm(nn.Module):  # word_language_model's defaults: 200 wide, 2 layers, bptt 35
    def __init__(self, tokens=10000):
        super().__init__()
        self.embed = nn.Embedding(tokens, 200)
        self.rnn = nn.LSTM(200, 200, 2)
        self.out = nn.Linear(200, tokens)

    def forward(self, x):
        h, _ = self.rnn(self.embed(x))
        return torch.log_softmax(self.out(h), dim=-1).view(-1, self.out.out_features)


def batches(args):
    g = torch.Generator().manual_seed(0)
    if args.workload == "conv":
        x = torch.randn(args.batches * args.batch_size, 1, 28, 28, generator=g)
        y = torch.randint(0, 10, (args.batches * args.batch_size,), generator=g)
        return [(x[i:i + args.batch_size], y[i:i + args.batch_size])
                for i in range(0, len(x), args.batch_size)]
    tokens = torch.randint(0, 10000, (args.batches, 36, args.batch_size), generator=g)
    return [(t[:-1], t[1:].reshape(-1)) for t in tokens]


def progress(args, epoch, i, n, loss):
    """The line its --log names after batch i (from 1) of n, or None."""
    samples, total = i * args.batch_size, n * args.batch_size
    if args.log == "superres":
        return f"===> Epoch[{epoch}]({i}/{n}): Loss: {loss:.4f}"
    if args.log == "rank-batch":
        return f"Rank 0 training batch {i - 1} loss {loss}"
    if args.log == "keras":
        width = 30 * i // n
        bar = "=" * max(width - 1, 0) + (">" if i < n else "=") + "." * (30 - width)
        return f"\r{i:{len(str(n))}d}/{n} [{bar}] - ETA: {int((n - i) * 0.05)}s - loss: {loss:.4f}"
    if i % args.log_interval:
        return None
    if args.log == "neural-style":
        return (f"{time.ctime()}\tEpoch {epoch}:\t[{samples}/{total}]\tcontent: {loss:.6f}\t"
                f"style: {loss / 2:.6f}\ttotal: {1.5 * loss:.6f}")
    done = (i - 1) * args.batch_size  # mnist prints batch_idx * len(data), from batch 0
    return f"Train Epoch: {epoch} [{done}/{total} ({100. * (i - 1) / n:.0f}%)]\tLoss: {loss:.6f}"


def main():
    args = parser.parse_args()
    model = Net() if args.workload == "conv" else Lstm()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = batches(args)
    trained, seconds = 0, 0.0
    try:
        for epoch in range(1, args.epochs + 1):
            begin = time.monotonic()
            for i, (x, y) in enumerate(data, 1):
                loss = nn.functional.nll_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                trained += args.batch_size
                line = progress(args, epoch, i, len(data), loss.item())
                if line is not None:
                    print(line, end="" if args.log == "keras" else "\n", flush=True)
            seconds += time.monotonic() - begin
            if args.log == "keras":
                print(flush=True)
    except KeyboardInterrupt:  # feedscope watch --duration, or --try's window
        seconds += time.monotonic() - begin
    print(f"\ncorpus truth: {trained} samples in {seconds:.3f} s", flush=True)


if __name__ == "__main__":
    main()
