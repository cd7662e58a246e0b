#include "cli/run.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <ostream>
#include <thread>

#include "cli/trainer.h"
#include "exporters/json_report.h"
#include "exporters/metrics_exporter.h"
#include "exporters/timeseries_csv.h"
#include "loader/batch_loader.h"
#include "loader/image_folder_dataset.h"
#include "loader/synthetic_dataset.h"
#include "pinned_memory/device_probe.h"
#include "profiler/diagnosis.h"
#include "profiler/stage_stats.h"
#include "sampler/cpu_usage.h"
#include "sampler/proc_fs.h"
#include "sampler/utilization_sampler.h"

namespace feedscope {

namespace {

// Drains the span rings on its own thread so they never fill, however long the run, and streams
// the fresh spans to the metrics endpoint when there is one.
class SpanCollector {
 public:
  SpanCollector(SpanRegistry& registry, MetricsExporter* metrics, std::int64_t begin_ns)
      : registry_(registry), metrics_(metrics), begin_ns_(begin_ns),
        thread_([this](std::stop_token stop) { loop(stop); }) {}
  ~SpanCollector() {
    thread_.request_stop();
    thread_.join();
    drain();
  }

 private:
  void drain() {
    fresh_.clear();
    registry_.collect(metrics_ ? &fresh_ : nullptr);
    if (!metrics_) return;
    for (const Span& span : fresh_) {
      const double seconds = static_cast<double>(span.end_ns - span.begin_ns) / 1e9;
      metrics_->observe_stage(span.stage, seconds);
      if (span.stage == Stage::wait) wait_s_ += seconds;
    }
    const double elapsed = static_cast<double>(now_ns() - begin_ns_) / 1e9;
    if (elapsed > 0) metrics_->set_data_stall_ratio(std::min(1.0, wait_s_ / elapsed));
  }
  void loop(std::stop_token stop) {
    std::mutex m;
    std::condition_variable_any cv;
    std::unique_lock lock(m);
    while (!stop.stop_requested()) {
      cv.wait_for(lock, stop, std::chrono::milliseconds(100), [] { return false; });
      drain();
    }
  }
  SpanRegistry& registry_;
  MetricsExporter* metrics_;
  std::int64_t begin_ns_;
  std::vector<Span> fresh_;
  double wait_s_ = 0;
  std::jthread thread_;
};

std::unique_ptr<MetricsExporter> start_metrics(const RunConfig& config, const Environment& env,
                                               std::ostream& log) {
  if (config.metrics_addr.empty()) return nullptr;
  MetricsExporter::Options o;
  o.address = config.metrics_addr;
  std::int64_t rank = config.rank;
  if (rank < 0) {
    if (const char* env_rank = std::getenv("RANK")) rank = std::atoll(env_rank);
  }
  if (rank >= 0) o.const_labels["rank"] = std::to_string(rank);
  o.const_labels["host"] = config.host.empty() ? env.hostname : config.host;
  o.version = env.feedscope_version;
  o.torch_version = env.torch_version;
  o.cuda_version = env.cuda_version;
  auto metrics = std::make_unique<MetricsExporter>(o);
  log << "feedscope: Prometheus metrics on http://" << metrics->address() << "/metrics" << std::endl;
  return metrics;
}

void fill_utilization(const UtilizationSummary& summary, Utilization& u) {
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
  u.gpu_util_ratio = mean("gpu0_util_ratio");
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

}  // namespace

std::shared_ptr<const Dataset> open_dataset(const RunConfig& config) {
  const std::string& spec = config.dataset;
  const std::size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  if (kind == "synthetic") {
    SyntheticDataset::Options o;
    o.shape = parse_shape(spec.substr(colon + 1));
    o.count = static_cast<std::size_t>(config.synthetic_samples);
    o.classes = config.classes;
    o.seed = static_cast<std::uint64_t>(config.seed);
    return std::make_shared<SyntheticDataset>(o);
  }
  if (kind == "images") {
    ImageFolderDataset::Options o;
    o.root = spec.substr(colon + 1);
    o.train = config.image_pipeline != "eval";
    o.size = static_cast<int>(config.image_size);
    o.seed = static_cast<std::uint64_t>(config.seed);
    return std::make_shared<ImageFolderDataset>(o);
  }
  throw DatasetError("dataset: '" + spec + "': the " + kind +
                     " reader is not in this build yet; allowed now: images:DIR | synthetic:SHAPE");
}

Environment gather_environment(const std::string& device) {
  const ProcFs fs;
  Environment env;
  env.cpus = online_cpus(fs);
  if (const auto meminfo = fs.read("/proc/meminfo"))
    if (const auto mem = parse_meminfo(*meminfo)) env.memory_total_bytes = mem->total_bytes;
  env.device = device;
  env.torch_version = torch_version();
  const DeviceProbe cuda = probe_cuda();
  env.cuda_version = cuda.built_with_cuda ? cuda_version_string(cuda.runtime_version) : "none";
  env.feedscope_version = FEEDSCOPE_VERSION;
  env.hostname = hostname();
  return env;
}

Report run_profiled(const RunConfig& config, std::ostream& log) {
  validate_config(config);
  std::shared_ptr<const Dataset> dataset = open_dataset(config);

  std::unique_ptr<Trainer> trainer;
  if (!config.loader_only) {
    TrainerOptions t;
    t.model = config.model;
    t.hidden = config.hidden;
    t.layers = config.layers;
    t.classes = dataset->num_classes();
    t.lr = config.lr;
    t.device = config.device;
    t.seed = static_cast<std::uint64_t>(config.seed);
    t.sample = dataset->spec();
    trainer = make_trainer(t);
  }
  const bool on_gpu = trainer && trainer->on_gpu();
  const std::string device = trainer ? trainer->device() : "none (loader only)";

  LoaderOptions lo;
  lo.num_workers = static_cast<int>(config.num_workers);
  lo.batch_size = static_cast<int>(config.batch_size);
  lo.prefetch = static_cast<int>(config.prefetch);
  lo.pin_memory = config.pin_memory && on_gpu;  // pinning only helps a device copy
  lo.drop_last = config.drop_last;
  std::shared_ptr<const IndexSampler> order;
  if (config.shuffle)
    order = std::make_shared<RandomSampler>(dataset->size(), static_cast<std::uint64_t>(config.seed));
  else
    order = std::make_shared<SequentialSampler>(dataset->size());

  SpanRegistry spans;
  BatchLoader loader(dataset, order, lo, &spans);
  if (loader.batches_per_epoch() == 0)
    throw ConfigError("batch_size", "batch_size: " + std::to_string(config.batch_size) +
                                        " with drop_last leaves no batch in an epoch of " +
                                        std::to_string(dataset->size()) + " samples");

  log << "feedscope: " << (trainer ? trainer->describe() : std::string("loader only")) << " on "
      << dataset->name() << " (" << dataset->size() << " samples), " << config.num_workers
      << " worker(s), batch " << config.batch_size << ", prefetch " << config.prefetch << ", "
      << (config.duration > 0 ? std::to_string(static_cast<long long>(config.duration)) + " s"
                              : std::to_string(config.steps) + " steps")
      << " after " << config.warmup << " warm-up, device " << device << std::endl;

  std::error_code ec;
  std::filesystem::create_directories(config.report_dir, ec);
  if (ec)
    throw std::runtime_error("cannot create report directory '" + config.report_dir +
                             "': " + ec.message());
  const std::filesystem::path report_dir(config.report_dir);

  const ProcFs fs;
  const int cpus = online_cpus(fs);
  Report report;
  const std::int64_t run_begin = now_ns();
  report.environment = gather_environment(device);
  const std::unique_ptr<MetricsExporter> metrics = start_metrics(config, report.environment, log);
  std::unique_ptr<TimeseriesCsv> csv;
  std::unique_ptr<UtilizationSampler> sampler;
  if (config.sample_hz > 0) {
    csv = std::make_unique<TimeseriesCsv>((report_dir / "timeseries.csv").string(), run_begin);
    UtilizationSampler::Options so;
    so.hz = config.sample_hz;
    so.gpu = make_nvml_source();
    so.thread_names = [&spans] {
      std::map<int, std::string> names;
      for (const LaneInfo& lane : spans.lanes()) names[lane.tid] = lane.name;
      return names;
    };
    const PinnedPool& pool = loader.pool();
    so.pinned_bytes = [&pool] { return pool.pinned() ? std::uint64_t{pool.total_bytes()} : 0; };
    so.on_sample = [&csv, &metrics](const UtilizationSample& sample) {
      csv->write(sample);
      if (metrics) metrics->update_utilization(sample);
    };
    sampler = std::make_unique<UtilizationSampler>(std::move(so));
    sampler->start();
  }
  std::int64_t measure_begin = now_ns();
  UsageSnapshot usage_begin = take_usage_snapshot(fs, measure_begin);
  std::int64_t step = 0, measured_steps = 0, measured_samples = 0;
  std::uint64_t epoch = 0;
  std::int64_t end = 0;
  {
    SpanCollector collector(spans, metrics.get(), run_begin);
    const std::int64_t duration_ns = static_cast<std::int64_t>(config.duration * 1e9);
    std::int64_t wait_begin = now_ns();  // an epoch change counts as waiting
    for (;;) {
      std::optional<Batch> batch = loader.next();
      if (!batch) {
        loader.begin_epoch(++epoch);
        continue;
      }
      const std::int64_t step_begin = now_ns();
      if (metrics) {
        metrics->set_queue_batches("ready", loader.batches_ready());
        metrics->set_queue_batches("in_flight", loader.batches_in_flight());
      }
      spans.record(LaneRole::training, Stage::wait, batch->index, wait_begin, step_begin);
      if (trainer) {
        const double loss = trainer->step(*batch);
        if (!report.training.first_loss) report.training.first_loss = loss;
        report.training.last_loss = loss;
      }
      const std::int64_t size = batch->size;
      const std::int64_t index = batch->index;
      batch.reset();  // the slab goes back to the pool before the next wait
      const std::int64_t step_end = now_ns();
      wait_begin = step_end;
      if (trainer) spans.record(LaneRole::training, Stage::step, index, step_begin, step_end);
      ++step;
      if (metrics) metrics->add_batch(size);
      if (step <= config.warmup) {
        if (step == config.warmup) {
          measure_begin = step_end;
          usage_begin = take_usage_snapshot(fs, measure_begin);
        }
        continue;
      }
      ++measured_steps;
      measured_samples += size;
      const bool done = duration_ns > 0 ? step_end - measure_begin >= duration_ns
                                        : measured_steps >= config.steps;
      if (done) {
        end = step_end;
        break;
      }
    }
  }
  if (sampler) {
    sampler->stop();
    fill_utilization(sampler->summary(), report.utilization);
  } else {
    report.utilization.unavailable["sampler"] = "sampling off (sample_hz 0)";
  }
  const UsageSnapshot usage_end = take_usage_snapshot(fs, end);
  const UsageRatios usage = usage_between(usage_begin, usage_end, cpus);
  const double wall_s = static_cast<double>(end - measure_begin) / 1e9;

  report.config = config_entries(config);
  report.throughput.steps = measured_steps;
  report.throughput.samples = measured_samples;
  report.throughput.wall_s = wall_s;
  report.throughput.samples_per_s = static_cast<double>(measured_samples) / wall_s;
  report.throughput.batches_per_s = static_cast<double>(measured_steps) / wall_s;
  report.stages = compute_stage_stats(spans.spans(), measure_begin, end);
  report.utilization.cpu_process_ratio = usage.process;
  report.utilization.cpu_system_ratio = usage.system;
  if (const auto status = fs.read("/proc/self/status"))
    if (const auto mem = parse_process_status(*status))
      report.utilization.rss_bytes_peak = mem->rss_peak_bytes;
  report.training.model = trainer ? trainer->describe() : "none (loader only)";
  report.training.parameters = trainer ? trainer->parameters() : 0;
  report.spans_dropped = spans.dropped();

  DiagnosisInput in;
  in.stages = report.stages;
  in.wall_s = wall_s;
  in.batches = measured_steps;
  in.batch_size = config.batch_size;
  in.samples_per_s = report.throughput.samples_per_s;
  in.num_workers = static_cast<int>(config.num_workers);
  in.cpus = cpus;
  in.on_gpu = on_gpu;
  in.loader_only = config.loader_only;
  in.utilization = report.utilization;
  report.diagnosis = diagnose(in);
  if (metrics) metrics->set_bottleneck(report.diagnosis.bottleneck);

  write_file_atomically((report_dir / "report.json").string(), report_to_json(report));
  return report;
}

}  // namespace feedscope
