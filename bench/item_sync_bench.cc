// The classic per-iteration sync, reproduced and diagnosed: a loop of 1000x1000 matrix products
// that reads a value back with .item() in every iteration, against the same loop reading it once
// at the end. The loop is profiled through feedscope::Session (the wrap API): CUPTI counts the
// host syncs inside the steps, the diagnosis names them, and report.json is written to
// --report-dir. scripts/device_check.sh runs both modes on the GPU machine. Exits 77 when the
// device asked for is not there.
//
// usage: item_sync_bench --sync step|end [--iterations N (2000)] [--size N (1000)]
//                        [--device cuda|cpu] [--report-dir DIR]
#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <ranges>
#include <string>

#include <feedscope/session.h>

#include "exporters/session_access.h"

int main(int argc, char** argv) {
  std::string sync, device = "cuda", report_dir = "item-sync-report";
  int iterations = 2000;
  std::int64_t size = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--sync") sync = argv[i + 1];
    else if (a == "--iterations") iterations = std::atoi(argv[i + 1]);
    else if (a == "--size") size = std::atoll(argv[i + 1]);
    else if (a == "--device") device = argv[i + 1];
    else if (a == "--report-dir") report_dir = argv[i + 1];
    else sync = "?";
  }
  if ((sync != "step" && sync != "end") || iterations < 30 || size < 1 ||
      (device != "cuda" && device != "cpu") || argc % 2 == 0) {
    std::fprintf(stderr, "usage: item_sync_bench --sync step|end [--iterations N (30 or more)] "
                         "[--size N] [--device cuda|cpu] [--report-dir DIR]\n");
    return 2;
  }
  if (device == "cuda" && !torch::cuda::is_available()) {
    std::fprintf(stderr, "item_sync_bench: no CUDA device for this libtorch %s (use --device cpu "
                         "for a dry run)\n", TORCH_VERSION);
    return 77;
  }
  try {
    const torch::Device where = device == "cuda" ? torch::Device(torch::kCUDA, 0) : torch::kCPU;
    torch::manual_seed(0);
    const torch::Tensor a = torch::randn({size, size}, where);
    const torch::Tensor b = torch::randn({size, size}, where) / std::sqrt(static_cast<double>(size));
    // cuBLAS's handle and the first kernels' loading stay out of the session.
    for (int i = 0; i < 5; ++i) (void)a.mm(b).sum().item<double>();

    feedscope::Session fs({.report_dir = report_dir,
                           .warmup = 20,
                           .batch_size = size,
                           .device = device == "cuda" ? "cuda:0" : "cpu"});
    double checksum = 0;
    for (const int i : fs.wrap(std::views::iota(0, iterations))) {
      auto step = fs.step(size);  // the product's rows count as the step's samples
      // The same kernels either way, as a loop's loss is computed whether or not it is read:
      // `step` reads the sum back every iteration, as a loop that logs its loss each step does;
      // `end` once, in the last iteration, so both runs hold the same steps. (Until 2026-11-28
      // `end` left the sum out too, and its 2.01x on an H200 counted a kernel fewer a step.)
      const torch::Tensor sum = a.mm(b).sum();
      if (sync == "step" || i == iterations - 1) checksum += sum.item<double>();
    }
    const feedscope::Report& report = feedscope::SessionAccess::finish(fs);
    std::printf("item_sync_bench: --sync %s, %d iterations of a %lldx%lld product on %s: %.1f "
                "steps/s, bottleneck %s (checksum %.3f)\n",
                sync.c_str(), iterations, static_cast<long long>(size),
                static_cast<long long>(size), device.c_str(), report.throughput.batches_per_s,
                report.diagnosis.bottleneck.c_str(), checksum);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "item_sync_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
