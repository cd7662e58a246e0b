#include "exporters/report_assembly.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "exporters/chrome_trace.h"
#include "exporters/html_report.h"
#include "exporters/json_report.h"
#include "pinned_memory/device_probe.h"
#include "profiler/gpu_trace.h"
#include "profiler/loop_profiler.h"
#include "profiler/stage_stats.h"

namespace feedscope {

SpanCollector::SpanCollector(SpanRegistry& registry, SpanDigest& digest, MetricsExporter* metrics,
                             std::int64_t begin_ns, WindowFn on_window, std::int64_t window_ns,
                             LoopProfiler* loop, Clock clock)
    : registry_(registry), digest_(digest), metrics_(metrics), begin_ns_(begin_ns),
      on_window_(std::move(on_window)), window_ns_(window_ns), window_begin_ns_(begin_ns),
      loop_(loop), clock_(clock), thread_([this](std::stop_token stop) { this->run(stop); }) {}

SpanCollector::~SpanCollector() {
  thread_.request_stop();
  thread_.join();
  drain();
}

void SpanCollector::drain() {
  if (loop_) loop_->collect();
  fresh_.clear();
  registry_.drain(fresh_);
  digest_.add(fresh_);
  if (on_window_) {
    // Spans drained late from an earlier window are left out, as that window's statistics were.
    for (const Span& span : fresh_)
      if (span.begin_ns >= window_begin_ns_) window_.add(by_stage(span));
  }
  if (!metrics_) return;
  for (const Span& span : fresh_) {
    const double seconds = static_cast<double>(span.end_ns - span.begin_ns) / 1e9;
    metrics_->observe_stage(span.stage, seconds);
    if (span.stage == Stage::wait) wait_s_ += seconds;
  }
  const double elapsed = static_cast<double>(clock_() - begin_ns_) / 1e9;
  if (elapsed > 0) metrics_->set_data_stall_ratio(std::min(1.0, wait_s_ / elapsed));
}

void SpanCollector::run(std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  while (!stop.stop_requested()) {
    cv.wait_for(lock, stop, std::chrono::milliseconds(100), [] { return false; });
    drain();
    const std::int64_t now = clock_();
    if (on_window_ && now - window_begin_ns_ >= window_ns_) {
      try {
        const double wall_s = static_cast<double>(std::max<std::int64_t>(now - window_begin_ns_, 1)) / 1e9;
        on_window_(window_.stats(fixed_stage_names(), wall_s), window_begin_ns_, now);
      } catch (...) {  // a failed live estimate must not end the run; the final report decides
      }
      window_.clear();
      window_begin_ns_ = now;
    }
  }
}

void DiagnosisSetup::fill(DiagnosisInput& in) const {
  in.batch_size = batch_size;
  in.num_workers = num_workers;
  in.cpus = cpus;
  in.on_gpu = on_gpu;
  in.loader_only = loader_only;
  in.pin_memory = pin_memory;
}

void diagnose_live_window(MetricsExporter& metrics, const DiagnosisSetup& setup,
                          const UtilizationSampler* sampler, const std::vector<StageStats>& stages,
                          std::int64_t begin_ns, std::int64_t end_ns) {
  DiagnosisInput in;
  in.stages = stages;
  const StageStats* wait = find_stage(in.stages, Stage::wait);
  in.wall_s = static_cast<double>(end_ns - begin_ns) / 1e9;
  in.batches = wait ? wait->count : 0;
  if (in.batches == 0) return;
  setup.fill(in);
  in.samples_per_s = static_cast<double>(in.batches * setup.batch_size) / in.wall_s;
  if (sampler) fill_utilization(sampler->summary(), in.utilization, setup.gpu);
  metrics.set_bottleneck(diagnose(in).bottleneck);
}

Sampling start_sampling(SamplingOptions options, const std::filesystem::path& report_dir,
                        std::int64_t run_begin_ns,
                        SpanRegistry& spans, MetricsExporter* metrics,
                        std::function<std::uint64_t()> pinned_bytes) {
  Sampling out;
  if (options.hz <= 0) return out;
  out.csv = std::make_unique<TimeseriesCsv>((report_dir / "timeseries.csv").string(), run_begin_ns,
                                            static_cast<std::uint64_t>(options.csv_max_mib) << 20);
  UtilizationSampler::Options so;
  so.hz = options.hz;
  so.pid = options.pid;
  so.wait_probe_hz = options.wait_probe_hz;
  so.wait_probe_later_hz = options.wait_probe_later_hz;
  so.memory_cpu_share = options.memory_cpu_share;
  so.memory_share_processes = options.memory_share_processes;
  // NVML numbers GPUs its own way; named by CUDA's index, series gpuN is the run's cuda:N.
  std::optional<std::vector<CudaDeviceName>> cuda_names;
  if (const DeviceProbe cuda = probe_cuda(); cuda.available()) {
    cuda_names.emplace(cuda.devices.back().index + 1);  // by CUDA index; "": no id
    for (const CudaDevice& d : cuda.devices) (*cuda_names)[d.index] = {d.pci_bus_id, d.uuid};
  }
  so.gpu = make_nvml_source(std::move(cuda_names));
  so.thread_names = [&spans] {
    std::map<int, std::string> names;
    for (const LaneInfo& lane : spans.lanes())
      if (lane.tid != 0) names[lane.tid] = lane.name;  // 0: a stream's lane, no thread
    return names;
  };
  so.pinned_bytes = std::move(pinned_bytes);
  so.retarget = std::move(options.retarget);
  so.on_sample = [csv = out.csv.get(), metrics,
                  also = std::move(options.on_sample)](const UtilizationSample& sample) {
    csv->write(sample);
    if (metrics) metrics->update_utilization(sample);
    if (also) also(sample);
  };
  out.sampler = std::make_unique<UtilizationSampler>(std::move(so));
  out.sampler->start();
  return out;
}

void fill_utilization(const UtilizationSummary& summary, Utilization& u, int gpu) {
  u.samples = summary.samples;
  for (const auto& [name, st] : summary.series) u.series[name] = SeriesStats{st.mean, st.p95, st.max};
  u.threads = summary.thread_busy_mean;
  u.unavailable = summary.unavailable;
  const auto mean = [&](const std::string& key) -> std::optional<double> {
    const auto it = summary.series.find(key);
    return it == summary.series.end() ? std::nullopt : std::optional<double>(it->second.mean);
  };
  u.disk_read_bytes_per_s = mean("disk_read_bytes_per_s");
  u.io_pressure_ratio = mean("io_pressure_ratio");
  u.gpu_util_ratio = mean("gpu" + std::to_string(gpu) + "_util_ratio");
}

void stop_tracers(const std::function<void()>& drain_device, GpuActivitySource* gpu,
                  UtilizationSampler* sampler, Report& report, int gpu_index) {
  if (drain_device) drain_device();
  if (gpu) gpu->stop();
  if (sampler) {
    sampler->stop();
    fill_utilization(sampler->summary(), report.utilization, gpu_index);
  } else {
    report.utilization.unavailable["sampler"] = "sampling off (sample_hz 0)";
  }
}

void fill_measurements(Report& report, SpanDigest& digest, const MeasuredWindow& window,
                       std::int64_t trace_origin_ns, const UsageRatios& usage, const ProcFs& fs) {
  const double wall_s = static_cast<double>(window.end_ns - window.begin_ns) / 1e9;
  Throughput& t = report.throughput;
  t.steps = window.steps;
  t.samples = window.samples;
  t.wall_s = wall_s;
  t.samples_per_s = static_cast<double>(window.samples) / wall_s;
  t.batches_per_s = static_cast<double>(window.steps) / wall_s;
  report.stages = digest.stage_stats(window.begin_ns, window.end_ns);
  report.trace = digest.trace_summary(trace_origin_ns);
  report.utilization.cpu_process_ratio = usage.process;
  report.utilization.cpu_child_processes_cores = usage.descendants_cores;
  report.utilization.storage_read_bytes_per_s = usage.storage_read_bytes_per_s;
  report.utilization.cpu_system_ratio = usage.system;
  if (const auto status = fs.read("/proc/self/status"))
    if (const auto mem = parse_process_status(*status))
      report.utilization.rss_bytes_peak = mem->rss_peak_bytes;
}

GpuActivity finish_gpu_trace(Report& report, GpuActivitySource* gpu,
                             const std::string& unavailable_reason, const SpanDigest::Steps& steps,
                             const MeasuredWindow& window) {
  if (!gpu) {
    report.gpu_trace_unavailable = unavailable_reason;
    return {};
  }
  GpuActivity activity = gpu->collect();
  report.gpu_trace = summarize_measured_steps(activity, steps.windows, steps.complete_until_ns,
                                              window.begin_ns);
  return activity;
}

DiagnosisInput diagnosis_input(const Report& report, const DiagnosisSetup& setup) {
  DiagnosisInput in;
  setup.fill(in);
  in.stages = report.stages;
  in.wall_s = report.throughput.wall_s;
  in.batches = report.throughput.steps;
  in.samples_per_s = report.throughput.samples_per_s;
  in.utilization = report.utilization;
  in.gpu_trace = report.gpu_trace;
  in.model_parameters = report.training.parameters;
  if (report.h2d_submit) in.h2d_submit_s = report.h2d_submit->busy_s;
  in.trials = report.trials;
  in.autotune = report.autotune;
  in.samples = report.samples;
  return in;
}

void write_report_files(const std::filesystem::path& report_dir, const Report& report,
                        const UtilizationSampler* sampler, std::span<const Span> trace_spans,
                        const std::vector<LaneInfo>& lanes, const GpuActivity* gpu,
                        std::int64_t run_begin_ns) {
  write_file_atomically((report_dir / "report.json").string(), report_to_json(report));
  write_file_atomically(
      (report_dir / "report.html").string(),
      report_to_html(report, sampler ? sampler->recent() : std::vector<UtilizationSample>{},
                     run_begin_ns));
  // Spans only when there was no GPU trace.
  write_chrome_trace_file((report_dir / "trace.json").string(), trace_spans, lanes, gpu, run_begin_ns);
}

}  // namespace feedscope
