// The sampler's cost: CPU time of one sample() of the real /proc, and what that makes at the
// default 10 Hz as a share of one core (goal: under 0.5 %). A benchmark, not a timed test.
#include <benchmark/benchmark.h>

#include <time.h>

#include <chrono>
#include <thread>
#include <vector>

#include "sampler/utilization_sampler.h"

namespace {

using namespace feedscope;

void BM_UtilizationSample(benchmark::State& state) {
  // Threads like a real run's: a few loader workers and a training thread that stay alive.
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < static_cast<int>(state.range(0)); ++i)
    threads.emplace_back([&] {
      while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  UtilizationSampler::Options o;
  o.gpu = make_nvml_source();
  UtilizationSampler sampler(std::move(o));
  std::int64_t t = 1;
  timespec begin{}, end{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &begin);
  for (auto _ : state) {
    t += 100'000'000;  // 10 Hz spacing on the passed clock
    benchmark::DoNotOptimize(sampler.sample(t));
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
  stop = true;
  for (auto& th : threads) th.join();
  const double cpu_s = static_cast<double>(end.tv_sec - begin.tv_sec) +
                       static_cast<double>(end.tv_nsec - begin.tv_nsec) / 1e9;
  // CPU seconds per sample x 10 samples per second = share of one core; in percent.
  state.counters["pct_of_core_at_10hz"] = cpu_s / static_cast<double>(state.iterations()) * 10 * 100;
}
BENCHMARK(BM_UtilizationSample)->Arg(4)->Arg(16);

}  // namespace

BENCHMARK_MAIN();
