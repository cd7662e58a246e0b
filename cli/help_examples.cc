#include "cli/help_examples.h"

#include <sstream>

#include <CLI/CLI.hpp>

namespace feedscope {

const std::vector<std::pair<std::string, std::string>>& help_examples() {
  static const std::vector<std::pair<std::string, std::string>> examples = {
      {"",
       "# your training script, unchanged: why is the GPU (or the CPU) not busier?\n"
       "feedscope watch -- python3 train.py --epochs 1\n"
       "# a profiled run of feedscope's own loader on your images\n"
       "feedscope run --dataset images:/data/train --model cnn --num-workers 4\n"},
      {"demo",
       "# 512 JPEGs made once, a small CNN trained on them, the diagnosis\n"
       "feedscope demo\n"
       "# the same through one loader worker\n"
       "feedscope demo --num-workers 1 --steps 30\n"},
      {"run",
       "# train the built-in CNN on an ImageFolder tree through 4 workers\n"
       "feedscope run --dataset images:/data/train --model cnn --num-workers 4 --batch-size 64\n"
       "# the loader alone on webdataset shards, read cold, report on stdout\n"
       "feedscope run --dataset webdataset:/data/shards --loader-only --cold-cache --json\n"
       "# workers and prefetch tuned while training runs, each move shown\n"
       "feedscope run --dataset images:/data/train --model cnn --num-workers auto --prefetch auto\n"},
      {"sweep",
       "# every num_workers x batch_size point of feedscope's loader, 2 runs each at least\n"
       "feedscope sweep --dataset images:/data/train --num-workers 0,2,4 --batch-size 32,64\n"
       "# your own program: {num_workers} replaced at each point, the figure it prints compared\n"
       "feedscope sweep --num-workers 0,2,4 --throughput-pattern '([0-9.]+) samples/s' "
       "-- python3 train.py --workers {num_workers}\n"},
      {"tune",
       "# climb from no workers to the fastest setting, within 2 minutes\n"
       "feedscope tune --dataset images:/data/train --budget 120\n"
       "# your own program, the figure it prints as the throughput\n"
       "feedscope tune --throughput-pattern '([0-9.]+) samples/s' "
       "-- python3 train.py -j {num_workers}\n"},
      {"watch",
       "# profile a script as it is; the report goes to feedscope-watch/\n"
       "feedscope watch -- python3 train.py --lr 0.1\n"
       "# pytorch/examples' imagenet: its Time/Data lines give throughput and data-wait share\n"
       "feedscope watch --throughput-pattern 'Time\\s+([0-9.]+)' --batch-size 256 "
       "-- python3 main.py /data/imagenet\n"
       "# then run it again with each change feedscope can make (threads, -j, -b), 20 s a run,\n"
       "# and report what each measured\n"
       "feedscope watch --try -- python3 main.py -j 2 /data/imagenet\n"
       "# one watch per task of srun (or mpirun): R/rank-N each; then feedscope merge R\n"
       "srun -n 4 feedscope watch --report-dir R -- python3 train.py\n"},
      {"attach",
       "# a job that is already running (its PID: pgrep -f train.py): 30 s of it read, nothing\n"
       "# stopped or restarted\n"
       "feedscope attach 12345\n"
       "# a sidecar beside dcgm-exporter: series for Prometheus until the job ends\n"
       "feedscope attach --duration 0 --metrics-addr 0.0.0.0:9464 12345\n"
       "# a Kubernetes sidecar: the trainer found by its command line once it starts\n"
       "feedscope attach --name train.py --wait 600 --duration 0 --metrics-addr 0.0.0.0:9464\n"},
      {"merge",
       "# on each machine: feedscope watch --report-dir node0 -- torchrun --nnodes 2 --node_rank 0 ...\n"
       "# then, with the machines' report directories in one place, the job's report\n"
       "feedscope merge --report-dir job node0 node1\n"
       "# srun's or mpirun's tasks, each watched (srun feedscope watch --report-dir R -- ...):\n"
       "# R/rank-N each; the job's report beside them\n"
       "feedscope merge R\n"},
      {"replay",
       "# a run recorded (FEEDSCOPE_RECORD_DIR=rec/mlp or --record-dir rec/mlp), replayed anywhere\n"
       "feedscope replay rec/mlp\n"
       "feedscope replay tests/fixtures/gpu/fabricated-launch-bound --json\n"},
      {"probe",
       "# what this machine has: CPUs, memory, disks, CUDA devices, CUPTI, NVML\n"
       "feedscope probe\n"
       "feedscope probe --json\n"},
      {"make-dataset",
       "# 1024 ImageNet-like JPEGs (500x375) in 10 class folders\n"
       "feedscope make-dataset images --out /tmp/imgs --count 1024\n"
       "# the same JPEGs as webdataset tar shards of 128 samples\n"
       "feedscope make-dataset webdataset --out /tmp/shards --count 1024 --shard-samples 128\n"},
      {"make-dataset images",
       "feedscope make-dataset images --out /tmp/imgs --count 1024 --size 500x375 --classes 10\n"},
      {"make-dataset webdataset",
       "feedscope make-dataset webdataset --out /tmp/shards --count 1024 --shard-samples 128\n"},
      {"make-dataset tfrecord",
       "feedscope make-dataset tfrecord --out /tmp/tfrecord --count 1024 --shard-samples 128\n"},
      {"make-dataset records",
       "# 10000 records of a 3x224x224 uint8 image's size, in shards of 256 MiB\n"
       "feedscope make-dataset records --out /tmp/records --count 10000 --sample-bytes 150528\n"},
  };
  return examples;
}

namespace {

std::string footer_text(const std::string& examples) {
  std::ostringstream out;
  out << "Examples:\n";
  std::istringstream lines(examples);
  for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
  std::string text = out.str();
  text.pop_back();  // CLI11 ends the footer with its own newline
  return text;
}

CLI::App* find(CLI::App& app, const std::string& path) {
  CLI::App* at = &app;
  std::istringstream names(path);
  for (std::string name; names >> name;) {
    const auto found = at->get_subcommands([&](CLI::App* sub) { return sub->get_name() == name; });
    if (found.empty()) return nullptr;
    at = found.front();
  }
  return at;
}

}  // namespace

void add_help_examples(CLI::App& app) {
  for (const auto& [path, examples] : help_examples())
    if (CLI::App* sub = find(app, path)) sub->footer(footer_text(examples));
}

}  // namespace feedscope
