#pragma once
// What `feedscope run` and a wrapped user loop (include/feedscope/session.h) share: draining spans to the
// metrics endpoint while the loop runs, utilization sampling into timeseries.csv, and, at the
// end, spans + sampler + GPU trace -> Report -> diagnosis -> report.json, report.html and
// trace.json. One implementation, so the two kinds of run report the same numbers the same way.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "exporters/metrics_exporter.h"
#include "exporters/timeseries_csv.h"
#include "loader/span_recorder.h"
#include "profiler/diagnosis.h"
#include "profiler/gpu_activity.h"
#include "profiler/gpu_activity_source.h"
#include "profiler/report.h"
#include "profiler/span_digest.h"
#include "profiler/stage_accumulator.h"
#include "sampler/cpu_usage.h"
#include "sampler/proc_fs.h"
#include "sampler/utilization_sampler.h"

namespace feedscope {

class LoopProfiler;

// Drains the span rings on its own thread so they never fill, however long the run, into
// `digest` (statistics, trace, step windows: bounded memory), and streams the fresh spans to the
// metrics endpoint when there is one. With `on_window`, every `window_ns` it also hands over the
// stage statistics of the spans that began in the window just ended (the live diagnosis). With
// `loop`, it drains that profiler's custom-stage rings too. Windows and the live data-stall ratio
// are measured on `clock`, the spans' clock. Construct and destroy on one thread; the destructor
// joins and drains once more, so the digest is complete once it returns.
class SpanCollector {
 public:
  using WindowFn =
      std::function<void(const std::vector<StageStats>&, std::int64_t begin_ns, std::int64_t end_ns)>;
  using Clock = std::int64_t (*)() noexcept;
  SpanCollector(SpanRegistry& registry, SpanDigest& digest, MetricsExporter* metrics,
                std::int64_t begin_ns, WindowFn on_window = {},
                std::int64_t window_ns = 5'000'000'000, LoopProfiler* loop = nullptr,
                Clock clock = &now_ns);
  ~SpanCollector();
  SpanCollector(const SpanCollector&) = delete;
  SpanCollector& operator=(const SpanCollector&) = delete;

 private:
  void drain();
  void run(std::stop_token stop);

  SpanRegistry& registry_;
  SpanDigest& digest_;
  MetricsExporter* metrics_;
  std::int64_t begin_ns_;
  WindowFn on_window_;
  std::int64_t window_ns_;
  std::int64_t window_begin_ns_;
  LoopProfiler* loop_;
  Clock clock_;
  std::vector<Span> fresh_;
  StageAccumulator window_;  // the live window's spans, digested
  double wait_s_ = 0;
  std::jthread thread_;  // last: starts once everything above is initialized
};

// What the diagnosis knows of a run besides what it measures: the part of DiagnosisInput that is
// the same for the live windows and the final report of one run.
struct DiagnosisSetup {
  std::int64_t batch_size = 0;  // 0: unknown (throughput then reads 0; the bottleneck stands)
  int num_workers = 0;
  int cpus = 1;
  bool on_gpu = false;
  bool loader_only = false;
  int gpu = 0;  // N of the step's cuda:N: whose utilization (series gpuN_*) the diagnosis reads
  std::optional<bool> pin_memory{};  // the loader's; unset: not known
  void fill(DiagnosisInput& in) const;
};
// feedscope_bottleneck_info while a run goes on, for `feedscope run` and a wrapped loop alike,
// called by the SpanCollector's window function: diagnoses one window's stages under `setup` (which
// may change while the run goes on: a tuned loader, settings told after the start) and sets the
// metric; a window without a batch leaves it as it was. `sampler` (its summary so far) may be null.
void diagnose_live_window(MetricsExporter& metrics, const DiagnosisSetup& setup,
                          const UtilizationSampler* sampler, const std::vector<StageStats>& stages,
                          std::int64_t begin_ns, std::int64_t end_ns);

// The utilization sampler of a run, writing <report_dir>/timeseries.csv and the endpoint's
// utilization series; both members null when sampling is off (hz <= 0). The csv outlives the
// sampler's thread, which writes to it.
struct Sampling {
  std::unique_ptr<TimeseriesCsv> csv;
  std::unique_ptr<UtilizationSampler> sampler;
};
struct SamplingOptions {
  double hz = 10;  // 0: off
  // timeseries.csv's size limit in MiB, as --timeseries-max-mib gives it; 0: no limit.
  std::int64_t csv_max_mib = static_cast<std::int64_t>(TimeseriesCsv::kDefaultMaxBytes >> 20);
  int pid = 0;  // the process sampled with its threads and descendants; 0: this one
  // Also called with every sample, on the sampling thread (feedscope watch's process tree).
  std::function<void(const UtilizationSample&)> on_sample{};
  // UtilizationSampler::Options::retarget: feedscope watch follows a launcher to its program.
  std::function<int(const UtilizationSample&)> retarget{};
  // UtilizationSampler::Options::wait_probe_hz: where the watched program's main thread waits.
  double wait_probe_hz = 0;
  double wait_probe_later_hz = 0;  // ...::wait_probe_later_hz: after the first 10 s
  double memory_cpu_share = 0.05;  // UtilizationSampler::Options::memory_cpu_share
  std::size_t memory_share_processes = 0;  // ...::memory_share_processes
};
// Starts sampling with NVML GPU readings and thread names from the span lanes. `spans` and
// `metrics` (may be null) must outlive the sampler; `pinned_bytes` may be empty.
Sampling start_sampling(SamplingOptions options, const std::filesystem::path& report_dir,
                        std::int64_t run_begin_ns,
                        SpanRegistry& spans, MetricsExporter* metrics,
                        std::function<std::uint64_t()> pinned_bytes = {});

// `gpu`: N of the run's cuda:N. The sampler names its GPU series by CUDA index, so the run's own
// GPU is series gpuN_*, not always gpu0_*.
void fill_utilization(const UtilizationSummary& summary, Utilization& u, int gpu = 0);

// Runs `drain_device` (when given) first: the device finishes the steps still queued (a GPU step
// loop runs up to two steps ahead), so the trace holds the kernels of every measured step, not
// only those done when the loop ended. Then stops the GPU tracer (before anything else runs on
// the device), then the sampler, and fills report.utilization from the sampler's summary, or
// says sampling was off. `gpu_index`: N of the run's cuda:N, as fill_utilization takes it.
void stop_tracers(const std::function<void()>& drain_device, GpuActivitySource* gpu,
                  UtilizationSampler* sampler, Report& report, int gpu_index = 0);

// The measured window [begin_ns, end_ns) of a run.
struct MeasuredWindow {
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t steps = 0;
  std::int64_t samples = 0;
};

// Throughput, stage statistics over the window, what trace.json holds (times after
// `trace_origin_ns`), process/system CPU ratios between the two snapshots and peak RSS. The
// digest must be complete: its collector destroyed.
void fill_measurements(Report& report, SpanDigest& digest, const MeasuredWindow& window,
                       std::int64_t trace_origin_ns, const UsageRatios& usage, const ProcFs& fs);

// The GPU trace summary over the measured `step` windows, or report.gpu_trace_unavailable =
// `unavailable_reason` when `gpu` is null. Returns the records for trace.json (empty without).
// Where a memory cap left records or steps out, only the steps before the cut are summarized.
GpuActivity finish_gpu_trace(Report& report, GpuActivitySource* gpu,
                             const std::string& unavailable_reason, const SpanDigest::Steps& steps,
                             const MeasuredWindow& window);

// The diagnosis input of the final report: what the report measured, and the run's setup.
DiagnosisInput diagnosis_input(const Report& report, const DiagnosisSetup& setup);

// report.json, report.html (with the sampler's readings, if any) and trace.json (with the GPU
// records when `gpu` is non-null) in `report_dir`, each through a temporary file and a rename.
// Throws std::runtime_error naming a file that cannot be written.
void write_report_files(const std::filesystem::path& report_dir, const Report& report,
                        const UtilizationSampler* sampler, std::span<const Span> trace_spans,
                        const std::vector<LaneInfo>& lanes, const GpuActivity* gpu,
                        std::int64_t run_begin_ns);

}  // namespace feedscope
