// What the wrap API costs a training loop: the same loop over a vector with a fixed CPU step,
// unwrapped and wrapped (wait + step spans, metrics off, sampling off). The `overhead` counter of
// the wrapped run is its CPU time per step over the unwrapped one's, minus 1; target < 1 %.
//   ninja -C build -j2 wrap_overhead_bench && build/bench/wrap_overhead_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <vector>

#include <feedscope/session.h>

namespace {

constexpr int kSteps = 2000;

// ~100 us of arithmetic the compiler cannot drop: a stand-in for a small CPU training step.
std::uint64_t busy_step(std::uint64_t seed) {
  std::uint64_t x = seed;
  for (int i = 0; i < 60'000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

std::atomic<double> g_plain_ns_per_step{0};

// The loop thread's CPU time: on cores shared with other work, wall time measures the
// neighbours; the wrap API's cost is CPU work on this thread (clock reads, ring pushes).
double thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

void BM_PlainLoop(benchmark::State& state) {
  const std::vector<std::uint64_t> batches(kSteps, 7);
  std::uint64_t sink = 0;
  std::int64_t steps = 0;
  const double t0 = thread_cpu_ns();
  for (auto _ : state) {
    for (const std::uint64_t& b : batches) sink += busy_step(b + sink);
    steps += kSteps;
  }
  const double ns = thread_cpu_ns() - t0;
  benchmark::DoNotOptimize(sink);
  g_plain_ns_per_step = ns / static_cast<double>(steps);
  state.counters["us_per_step"] = ns / static_cast<double>(steps) / 1e3;
}

void BM_WrappedLoop(benchmark::State& state) {
  const std::vector<std::uint64_t> batches(kSteps, 7);
  const auto dir = std::filesystem::temp_directory_path() / "feedscope-wrap-bench";
  std::uint64_t sink = 0;
  std::int64_t steps = 0;
  double ns = 0;
  for (auto _ : state) {
    state.PauseTiming();
    {
      feedscope::Session fs({.report_dir = dir.string(), .sample_hz = 0, .print = false,
                             .trace_gpu = false});
      state.ResumeTiming();
      const double t0 = thread_cpu_ns();
      for (const std::uint64_t& b : fs.wrap(batches)) {
        auto step = fs.step(1);
        sink += busy_step(b + sink);
      }
      ns += thread_cpu_ns() - t0;
      steps += kSteps;
      state.PauseTiming();  // writing the report is not the loop's cost
    }
    state.ResumeTiming();
  }
  benchmark::DoNotOptimize(sink);
  std::filesystem::remove_all(dir);
  const double per_step = ns / static_cast<double>(steps);
  state.counters["us_per_step"] = per_step / 1e3;
  if (g_plain_ns_per_step > 0) state.counters["overhead"] = per_step / g_plain_ns_per_step - 1;
}

// Plain first: the wrapped run's ratio is against it.
BENCHMARK(BM_PlainLoop)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_WrappedLoop)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
