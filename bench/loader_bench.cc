// Loader throughput against a plain memcpy of the same bytes, side by side in one run. Both report
// bytes/s; compare the ratio, never a bare time (this machine is noisy).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "loader/batch_loader.h"
#include "loader/sample_costs.h"
#include "loader/synthetic_dataset.h"

namespace {

using namespace feedscope;

constexpr std::int64_t kBatch = 64;
const std::vector<std::int64_t> kShape = {3, 64, 64};

std::shared_ptr<SyntheticDataset> dataset() {
  static auto d = [] {
    SyntheticDataset::Options o;
    o.shape = kShape;
    o.count = 4096;
    o.max_stored_bytes = std::size_t{64} << 20;
    return std::make_shared<SyntheticDataset>(o);
  }();
  return d;
}

void BM_Memcpy(benchmark::State& state) {
  const std::size_t bytes = dataset()->spec().bytes() * kBatch;
  std::vector<std::byte> src(bytes * 8), dst(bytes);
  std::size_t offset = 0;
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data() + offset, bytes);
    benchmark::DoNotOptimize(dst.data());
    offset = (offset + bytes) % src.size();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_Memcpy)->UseRealTime();

// Arg 1 (1 by default): each sample's load time recorded (LoaderOptions::record_sample_costs); the
// pairs with it 0 and 1 side by side are what the recording costs on the cheapest samples there are
// (a 48 KiB copy each).
void BM_LoaderSynthetic(benchmark::State& state) {
  LoaderOptions o;
  o.num_workers = static_cast<int>(state.range(0));
  o.record_sample_costs = state.range(1) != 0;
  o.batch_size = kBatch;
  BatchLoader loader(dataset(), std::make_shared<SequentialSampler>(dataset()->size()), o);
  std::uint64_t epoch = 0;
  std::int64_t bytes = 0;
  for (auto _ : state) {
    auto batch = loader.next();
    if (!batch) {
      loader.begin_epoch(++epoch);
      batch = loader.next();
    }
    benchmark::DoNotOptimize(batch->data);
    bytes += batch->size * static_cast<std::int64_t>(dataset()->spec().bytes());
  }
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_LoaderSynthetic)
    ->Args({0, 0})->Args({0, 1})->Args({1, 0})->Args({1, 1})->Args({2, 0})->Args({2, 1})
    ->UseRealTime();

// What recording costs one sample: the two clock reads around its load and the recorder's update
// (a bucket's count and sum; the slowest list only for a sample slower than its 20th).
void BM_SampleCostRecord(benchmark::State& state) {
  SampleCostRecorder recorder(1);
  std::size_t index = 0;
  for (auto _ : state) {
    const std::int64_t begin = now_ns();
    recorder.record(0, index++ % 4096, now_ns() - begin + 1'000'000);
  }
}
BENCHMARK(BM_SampleCostRecord);

}  // namespace

BENCHMARK_MAIN();
