#include "cli/run.h"

#include "profiler/slow_samples.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <ostream>
#include <string_view>
#include <thread>

#include "cli/dataset_setup.h"
#include "cli/autotune_follower.h"
#include "cli/interrupt.h"
#include "cli/trainer.h"
#include "cli/trials.h"
#include "exporters/chrome_trace.h"
#include "exporters/html_report.h"
#include "exporters/json_report.h"
#include "exporters/metrics_exporter.h"
#include "exporters/recording.h"
#include "exporters/report_assembly.h"
#include "exporters/timeseries_csv.h"
#include "loader/batch_loader.h"
#include "profiler/trace_sampling.h"
#include "loader/device_feeder.h"
#include "profiler/slow_samples.h"
#include "loader/image_folder_dataset.h"
#include "pinned_memory/device_probe.h"
#include "profiler/cupti_activity_source.h"
#include "profiler/diagnosis.h"
#include "profiler/gpu_trace.h"
#include "profiler/span_digest.h"
#include "profiler/stage_stats.h"
#include "sampler/cpu_usage.h"
#include "sampler/proc_fs.h"
#include "sampler/utilization_sampler.h"

namespace feedscope {

namespace {

std::unique_ptr<MetricsExporter> start_metrics(const RunConfig& config, const Environment& env,
                                               std::ostream& log) {
  if (config.metrics_addr.empty()) return nullptr;
  const Placement placement = resolve_placement(config);
  auto metrics = std::make_unique<MetricsExporter>(
      metrics_options(env, config.metrics_addr, config.host,
                      placement.labelled ? std::optional<int>(placement.rank) : std::nullopt));
  log << "feedscope: Prometheus metrics on http://" << metrics->address() << "/metrics" << std::endl;
  return metrics;
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// "2 worker(s), prefetch 2", or for num_workers=auto where it starts and how far it may go.
std::string loader_setting_text(const RunConfig& config, const BatchLoader& loader) {
  const LoaderSetting now = loader.setting();
  if (!loader.autotuned())
    return std::to_string(now.num_workers) + " worker(s), prefetch " + std::to_string(now.prefetch);
  const LoaderSetting most = loader.capacity().most;
  const auto knob = [](bool tuned, int start, int top) {
    return tuned ? "auto (" + std::to_string(start) + ", up to " + std::to_string(top) + ")"
                 : std::to_string(start);
  };
  return "workers " + knob(config.num_workers == kAutoValue && most.num_workers > now.num_workers,
                           now.num_workers, most.num_workers) +
         ", prefetch " + knob(config.prefetch == kAutoValue, now.prefetch, most.prefetch);
}

}  // namespace

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

namespace {

// The run's diagnosis; where it advises a change `trials` can try (a run with a model, not
// interrupted), the change tried for a moment and the diagnosis made again on what it measured.
// Returns what the final diagnosis read.
DiagnosisInput diagnose_with_trials(Report& report, const DiagnosisSetup& setup,
                                    const std::optional<TrialSetup>& trials, std::ostream& log) {
  DiagnosisInput in = diagnosis_input(report, setup);
  report.diagnosis = diagnose(in);
  if (!trials) return in;
  if ((report.trials = run_trials(report.diagnosis, in, *trials, log))) {
    in.trials = report.trials;
    report.diagnosis = diagnose(in);
  }
  return in;
}

TrainerOptions trainer_options(const RunConfig& config, const DataSource& dataset, int cpus) {
  TrainerOptions t;
  t.model = config.model;
  t.hidden = config.hidden;
  t.layers = config.layers;
  t.classes = dataset.num_classes();
  t.lr = config.lr;
  t.device = config.device;
  t.seed = static_cast<std::uint64_t>(config.seed);
  t.sample = dataset.spec();
  // A CPU step gets the cores the workers leave (it waits while they load at 0 workers),
  // unless --cpu-threads says otherwise. Under num_workers=auto the follower below keeps it so.
  const int workers = config.num_workers == kAutoValue ? 1 : static_cast<int>(config.num_workers);
  t.cpu_threads = config.cpu_threads > 0 ? static_cast<int>(config.cpu_threads)
                                         : std::max(1, cpus - workers);
  return t;
}

// --- GPU activity trace: CUPTI records the step's kernels, copies and syncs ----------------------
struct GpuTrace {
  std::unique_ptr<GpuActivitySource> source;
  std::string unavailable;
};

GpuTrace open_gpu_trace(const Trainer* trainer, const RunConfig& config) {
  GpuTrace gpu;
  if (!trainer) {
    gpu.unavailable = "loader only: no training step";
  } else if (!trainer->on_gpu()) {
    const DeviceProbe cuda = probe_cuda();
    if (!cuda.built_with_cuda)
      gpu.unavailable = "built without CUDA";
    else if (!cuda.available())
      gpu.unavailable = "no CUDA device: " + cuda.unavailable_reason;
    else
      gpu.unavailable = "the step runs on the CPU";
  } else if (const char* off = std::getenv("FEEDSCOPE_GPU_TRACE");
             off != nullptr && std::string_view(off) == "0") {
    // The loop as it runs untraced: what tracing costs it, and the baseline of a prediction
    // made against the untraced GPU (the device check's).
    gpu.unavailable = "off (FEEDSCOPE_GPU_TRACE=0)";
  } else {
    std::string why;  // validate_config has read both keys
    gpu.source = make_cupti_source(
        parse_trace_sampling(config.gpu_trace, config.gpu_trace_lead, why).value_or(TraceSampling{}));
  }
  return gpu;
}

// CUPTI's start-up stays out of the measured window: the trace starts before it opens.
void start_gpu_trace(GpuTrace& gpu) {
  if (gpu.source && !gpu.source->start()) {
    gpu.unavailable = gpu.source->unavailable_reason();
    gpu.source.reset();
  }
}
// --- end GPU activity trace ---------------------------------------------------------------------

LoaderOptions run_loader_options(const RunConfig& config, bool on_gpu) {
  LoaderOptions lo = loader_options(config);
  lo.pin_memory = config.pin_memory && on_gpu;  // pinning only helps a device copy
  // No code of the user's runs between a run's epochs, so the workers may go straight on into
  // the next one: 4 % more samples/s at 2 workers on a 16-batch epoch (bench/compare.sh's folder).
  lo.prefetch_next_epoch = true;
  return lo;
}

std::unique_ptr<BatchLoader> start_loader(const RunConfig& config,
                                          const std::shared_ptr<const DataSource>& dataset,
                                          const LoaderOptions& lo, SpanRegistry& spans) {
  // Before the loader exists: its constructor starts loading the first epoch.
  if (config.cold_cache) dataset->evict_page_cache();
  return make_batch_loader(config, dataset, lo, &spans);
}

// On a GPU every batch goes through the copy stream; the engine's buffers are the slab's size.
std::unique_ptr<CopyEngine> start_copy_engine(const Trainer* trainer, const BatchLoader& loader) {
  if (!trainer || !trainer->on_gpu()) return nullptr;
  CopyEngine::Options eo;
  eo.device = trainer->cuda_index();  // the step's device: its stream reads the buffers
  eo.buffer_bytes = loader.pool().slab_bytes();
  return std::make_unique<CopyEngine>(eo);
}

// The loader and what takes its batches to the step's device, in the order they start (and
// stop in reverse).
struct Pipeline {
  Pipeline(const RunConfig& config, const std::shared_ptr<const DataSource>& dataset,
           const Trainer* trainer)
      : options(run_loader_options(config, trainer && trainer->on_gpu())),
        loader(start_loader(config, dataset, options, spans)),
        engine(start_copy_engine(trainer, *loader)),
        feeder(*loader, engine.get(), &spans) {}
  LoaderOptions options;
  SpanRegistry spans;
  std::unique_ptr<BatchLoader> loader;
  std::unique_ptr<CopyEngine> engine;
  DeviceFeeder feeder;
};

void check_first_epoch(const RunConfig& config, const Placement& placement,
                       const BatchLoader& loader) {
  if (std::string why = loader.empty_epoch_reason(); !why.empty()) {
    if (placement.world_size > 1)
      why = "rank " + std::to_string(placement.rank) + " of " +
            std::to_string(placement.world_size) + ": " + why;
    throw ConfigError(config.drop_last ? "batch_size" : "dataset", why);
  }
}

void log_run_start(std::ostream& log, const RunConfig& config, const Placement& placement,
                   const DataSource& dataset, const Trainer* trainer, const BatchLoader& loader,
                   const std::string& device) {
  const auto* sharded = dynamic_cast<const ShardedDataset*>(&dataset);
  const auto* indexed = dynamic_cast<const Dataset*>(&dataset);
  log << "feedscope: " << (trainer ? trainer->describe() : std::string("loader only")) << " on "
      << dataset.name() << " ("
      << (sharded ? std::to_string(sharded->shard_count()) + " shards" : std::to_string(indexed->size()) + " samples")
      << "), " << loader_setting_text(config, loader) << ", batch " << config.batch_size << ", "
      << (config.duration > 0 ? std::to_string(static_cast<long long>(config.duration)) + " s"
                              : std::to_string(config.steps) + " steps")
      << " after " << config.warmup << " warm-up, device " << device;
  if (placement.world_size > 1 && !sharded)
    log << ", rank " << placement.rank << " of " << placement.world_size << " ("
        << loader.batches_per_epoch() << " batches per epoch)";
  else if (placement.world_size > 1)
    log << ", rank " << placement.rank << " of " << placement.world_size;
  log << std::endl;
  if (const auto* images = dynamic_cast<const ImageFolderDataset*>(&dataset); images && !images->loops().empty())
    log << "feedscope: " << images->loops().size() << " symlink loop(s) in " << dataset.name()
        << " not entered (torchvision's os.walk would go round until the path is too long), the first "
        << images->loops().front() << std::endl;
}

std::filesystem::path make_report_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw std::runtime_error("cannot create report directory '" + dir + "': " + ec.message());
  return std::filesystem::path(dir);
}

// What the run keeps of its spans: bounded however long it runs.
SpanDigest::Options digest_options(const RunConfig& config, bool keep_steps) {
  SpanDigest::Options o;
  o.trace_max_spans = static_cast<std::size_t>(config.trace_max_spans);
  o.keep_steps = keep_steps;
  return o;
}

// The bottleneck of the last window, for the endpoint's feedscope_bottleneck_info while the
// run goes on; the report's diagnosis is made over the whole measured run at the end.
SpanCollector::WindowFn live_diagnosis(MetricsExporter* metrics, const AutotuneFollower& autotune,
                                       DiagnosisSetup setup,
                                       const UtilizationSampler* sampler) {
  if (!metrics) return {};
  return [&metrics = *metrics, &autotune, setup, sampler](const std::vector<StageStats>& stages,
                                                          std::int64_t begin,
                                                          std::int64_t end) mutable {
    setup.num_workers = autotune.workers();  // a tuned loader's count moves while it runs
    diagnose_live_window(metrics, setup, sampler, stages, begin, end);
  };
}

// What the loop drives; owned by run_profiled.
struct RunParts {
  const RunConfig& config;
  std::ostream& log;
  const ProcFs& fs;
  const DataSource& dataset;
  Trainer* trainer;
  Pipeline& pipeline;
  MetricsExporter* metrics;
  AutotuneFollower& autotune;
  SpanDigest& digest;
  Report& report;
  std::int64_t run_begin;
};

// The step loop: batches from the feeder into the step until the steps or the duration asked
// for are done, a signal interrupts it or bad data stops it; it keeps what the report needs.
class StepLoop {
 public:
  StepLoop(const RunParts& run, std::int64_t measure_begin)
      : run_(run), measure_begin_(measure_begin) {
    if (run_.config.warmup == 0) run_.digest.open_window(measure_begin_);
    usage_begin_ = take_usage_snapshot(run_.fs, measure_begin_);
  }
  void run(SpanCollector::WindowFn live);

  MeasuredWindow window() const { return {measure_begin_, end_, measured_steps_, measured_samples_}; }
  UsageRatios usage(int cpus) const { return usage_between(usage_begin_, usage_end_, cpus); }
  const CopySubmission& submitted() const { return submitted_; }
  // Rethrown once the partial report is written.
  const std::exception_ptr& bad_data() const { return bad_data_; }

 private:
  bool interrupted();
  bool fetch(std::optional<DeviceBatch>& batch);
  bool next_epoch(std::int64_t& epoch_batches);
  struct Step {
    std::int64_t end_ns, submit_ns, size;
  };
  Step run_step(std::optional<DeviceBatch>& batch, std::int64_t& wait_begin);
  void count_step(std::int64_t size);
  void close_window(std::int64_t at);
  void stop_early(const std::string& reason, const std::string& message);

  RunParts run_;
  std::int64_t measure_begin_;
  UsageSnapshot usage_begin_;
  std::int64_t step_ = 0, measured_steps_ = 0, measured_samples_ = 0, all_samples_ = 0;
  CopySubmission submitted_;  // in the measured window
  std::uint64_t h2d_reported_[2] = {0, 0};  // by pinned: bytes already added to the metrics
  std::uint64_t epoch_ = 0;
  std::int64_t end_ = 0;
  UsageSnapshot usage_end_;  // taken where the window closes, before any shutdown work
  std::exception_ptr bad_data_;
};

void StepLoop::run(SpanCollector::WindowFn live) {
  SpanCollector collector(run_.pipeline.spans, run_.digest, run_.metrics, run_.run_begin,
                          std::move(live));
  const std::int64_t duration_ns = static_cast<std::int64_t>(run_.config.duration * 1e9);
  std::int64_t wait_begin = now_ns();  // an epoch change counts as waiting
  std::int64_t epoch_batches = 0;
  for (;;) {
    // Whatever ends the warm-up or the run happens from here on: the digest may place every
    // span that began before.
    run_.digest.advance(wait_begin);
    if (interrupted()) break;
    std::optional<DeviceBatch> batch;
    if (!fetch(batch)) break;
    if (!batch) {
      if (!next_epoch(epoch_batches)) break;
      continue;
    }
    ++epoch_batches;
    run_.autotune.poll();
    const Step s = run_step(batch, wait_begin);
    count_step(s.size);
    if (step_ <= run_.config.warmup) {
      if (step_ == run_.config.warmup) {
        measure_begin_ = s.end_ns;
        run_.digest.open_window(measure_begin_);
        usage_begin_ = take_usage_snapshot(run_.fs, measure_begin_);
      }
      continue;
    }
    ++measured_steps_;
    measured_samples_ += s.size;
    if (run_.pipeline.engine) {
      ++submitted_.count;
      submitted_.busy_s += static_cast<double>(s.submit_ns) / 1e9;
    }
    const bool done = duration_ns > 0 ? s.end_ns - measure_begin_ >= duration_ns
                                      : measured_steps_ >= run_.config.steps;
    if (done) {
      close_window(s.end_ns);
      break;
    }
  }
}

bool StepLoop::interrupted() {
  const int signal = interrupt_signal();
  if (signal == 0) return false;
  run_.report.interrupted = interrupt_signal_name(signal);
  stop_early("interrupted", run_.report.interrupted);
  return true;
}

// False where bad data stops the run; an empty `batch` ends the epoch.
bool StepLoop::fetch(std::optional<DeviceBatch>& batch) {
  try {
    batch = run_.pipeline.feeder.next();
  } catch (const SampleError& e) {  // --bad-sample fail
    bad_data_ = std::current_exception();
    stop_early("bad_data", e.what());
    return false;
  } catch (const BadDataError& e) {  // --bad-sample skip, over --max-bad-ratio
    bad_data_ = std::current_exception();
    stop_early("bad_data", e.what());
    return false;
  }
  return true;
}

// False where the epoch that ended delivered nothing: under skip with max_bad_ratio 1 an epoch
// of only bad samples would otherwise spin.
bool StepLoop::next_epoch(std::int64_t& epoch_batches) {
  if (epoch_batches == 0) {
    DataErrors errors = run_.pipeline.loader->data_errors();
    std::string what = "bad data: epoch " + std::to_string(epoch_) + " delivered no sample; " +
                       std::to_string(errors.bad) + " of " + std::to_string(errors.attempted) +
                       " samples failed to load";
    if (!errors.examples.empty()) what += "; first: " + errors.examples.front().message;
    bad_data_ = std::make_exception_ptr(BadDataError(what, std::move(errors)));
    stop_early("bad_data", what);
    return false;
  }
  epoch_batches = 0;
  if (run_.config.cold_cache) run_.dataset.evict_page_cache();  // the epoch's loads are all done
  run_.pipeline.feeder.begin_epoch(++epoch_);
  return true;
}

// The wait for `batch` and its step, recorded as spans; `batch` is released.
StepLoop::Step StepLoop::run_step(std::optional<DeviceBatch>& batch, std::int64_t& wait_begin) {
  const std::int64_t step_begin = now_ns();
  // The copy submission inside next() is the thread's work, not waiting: it stays out of the
  // wait span (placed last, where its larger part, the next batch's copy, happens). A pageable
  // copy's wait for its device buffer (the step two back still reading it) is the device behind
  // the host, as the step fence's wait is: the step's, not the data's.
  const std::int64_t submit_ns = run_.pipeline.feeder.last_submit_ns();
  const std::int64_t device_behind_ns = run_.pipeline.feeder.last_buffer_wait_ns();
  const BatchLoader& loader = *run_.pipeline.loader;
  if (run_.metrics) {
    run_.metrics->set_queue_batches("ready", loader.batches_ready());
    run_.metrics->set_queue_batches("in_flight", loader.batches_in_flight());
  }
  SpanRegistry& spans = run_.pipeline.spans;
  spans.record(LaneRole::training, Stage::wait, batch->index, wait_begin,
               std::max(wait_begin, step_begin - submit_ns - device_behind_ns));
  if (run_.trainer) run_.trainer->step(*batch);
  const std::int64_t size = batch->size;
  const std::int64_t index = batch->index;
  // The memory goes back before the next wait: the slab to the pool, the device buffer to
  // the engine once the step's queued work is done.
  batch->release_after(nullptr);
  batch.reset();
  const std::int64_t step_end = now_ns();
  wait_begin = step_end;
  if (run_.trainer)
    spans.record(LaneRole::training, Stage::step, index, step_begin - device_behind_ns, step_end);
  // Reading the loss waits for the device: once at the start, once at the end, outside any
  // step's window, so the GPU trace never counts it as a sync of the step's.
  if (run_.trainer && !run_.report.training.first_loss) {
    run_.report.training.first_loss = run_.trainer->last_loss();
    wait_begin = now_ns();
  }
  return {step_end, submit_ns, size};
}

void StepLoop::count_step(std::int64_t size) {
  ++step_;
  all_samples_ += size;
  if (!run_.metrics) return;
  run_.metrics->add_batch(size);
  for (const bool pinned : {false, true}) {
    const std::uint64_t total = run_.pipeline.feeder.h2d_bytes(pinned);
    run_.metrics->add_h2d_bytes(pinned, static_cast<double>(total - h2d_reported_[pinned]));
    h2d_reported_[pinned] = total;
  }
}

void StepLoop::close_window(std::int64_t at) {
  end_ = at;
  usage_end_ = take_usage_snapshot(run_.fs, at);
}

// Ends the run before what was asked for: a stop in warm-up reports what ran rather than an
// empty window.
void StepLoop::stop_early(const std::string& reason, const std::string& message) {
  run_.report.stopped_early = {reason, message};
  close_window(now_ns());
  if (step_ <= run_.config.warmup) {
    measure_begin_ = run_.run_begin;
    measured_steps_ = step_;
    measured_samples_ = all_samples_;
  }
  run_.log << "feedscope: " << (reason == "bad_data" ? "bad data" : message) << ": stopping after "
           << step_ << " steps; writing the partial report to " << run_.config.report_dir
           << std::endl;
}

void record_training(Report& report, Trainer* trainer, const CopyEngine* engine,
                     const CopySubmission& submitted) {
  if (trainer) report.training.last_loss = trainer->last_loss();
  if (engine) report.h2d_submit = submitted;
  report.training.model = trainer ? trainer->describe() : "none (loader only)";
  report.training.parameters = trainer ? trainer->parameters() : 0;
}

void record_data_errors(Report& report, const RunConfig& config, const Pipeline& pipeline) {
  const DataErrors errors = pipeline.loader->data_errors();
  report.data_errors.policy = config.bad_sample;
  report.data_errors.max_bad_ratio = config.max_bad_ratio;
  report.data_errors.ratio_floor = pipeline.options.bad_ratio_floor;
  report.data_errors.count = errors.bad;
  report.data_errors.attempted = errors.attempted;
  report.data_errors.ratio = errors.ratio();
  for (const BadSample& b : errors.examples)
    report.data_errors.examples.push_back({b.index, b.source, b.message});
}

// The trials need a model, and a run that was not interrupted.
std::optional<TrialSetup> trial_setup(const Report& report, const RunConfig& config,
                                      const TrainerOptions& t, const Trainer* trainer,
                                      const BatchLoader& loader) {
  if (!trainer || !report.interrupted.empty()) return std::nullopt;
  return TrialSetup{t, trainer->cuda_index(),
                    loader.labels_offset() +
                        sizeof(std::int64_t) * static_cast<std::size_t>(config.batch_size)};
}

// The autotune summary, then the diagnosis: a tuned loader's starts from where the tuner ended.
DiagnosisInput diagnose_run(Report& report, DiagnosisSetup setup,
                            const std::optional<TrialSetup>& trials,
                            const AutotuneFollower& autotune, std::ostream& log) {
  report.autotune = autotune.summary();
  if (report.autotune) setup.num_workers = report.autotune->final.num_workers;
  return diagnose_with_trials(report, setup, trials, log);
}

// With record_dir: what the diagnosis read and what it said, for `feedscope replay`. A recording
// that cannot be written is said and costs the run nothing: its report is written already.
void record_run(const RunConfig& config, const DiagnosisInput& in, const Report& report,
                const GpuActivity* activity, const SpanDigest::Steps& steps,
                const MeasuredWindow& window, const std::string& unavailable, std::ostream& log) {
  if (config.record_dir.empty()) return;
  Recording r;
  r.run = in;
  r.gpu_trace_unavailable = unavailable;
  if (activity) r.gpu = RecordedGpu{*activity, steps.windows, steps.complete_until_ns, window.begin_ns};
  try {
    log << describe_recording(config.record_dir,
                              write_recording(config.record_dir, r, {report.diagnosis, report.gpu_trace},
                                              recording_max_records()))
        << std::endl;
  } catch (const std::exception& e) {
    log << "feedscope: no recording: " << e.what() << std::endl;
  }
}

}  // namespace

Report run_profiled(const RunConfig& config, std::ostream& log) {
  validate_config(config);
  // The endpoint binds first: a port in use stops the run before any loading or training starts.
  Environment environment = gather_environment("");
  const std::unique_ptr<MetricsExporter> metrics = start_metrics(config, environment, log);
  std::shared_ptr<const DataSource> dataset = open_dataset(config);
  TrainerOptions t;
  std::unique_ptr<Trainer> trainer;
  if (!config.loader_only) {
    t = trainer_options(config, *dataset, environment.cpus);
    trainer = make_trainer(t);
  }
  const bool on_gpu = trainer && trainer->on_gpu();
  const std::string device = trainer ? trainer->device() : "none (loader only)";
  GpuTrace gpu = open_gpu_trace(trainer.get(), config);

  const Placement placement = resolve_placement(config);
  Pipeline pipeline(config, dataset, trainer.get());
  BatchLoader& loader = *pipeline.loader;
  check_first_epoch(config, placement, loader);
  log_run_start(log, config, placement, *dataset, trainer.get(), loader, device);
  const std::filesystem::path report_dir = make_report_dir(config.report_dir);

  const ProcFs fs;
  const int cpus = environment.cpus;
  // What the diagnosis knows of this run besides what it measures, live and at the end alike.
  const DiagnosisSetup diagnosis_setup{config.batch_size, loader.setting().num_workers,
                                       cpus, on_gpu, config.loader_only,
                                       on_gpu ? trainer->cuda_index() : 0};
  Report report;
  const std::int64_t run_begin = now_ns();
  AutotuneFollower autotune(loader, trainer.get(), metrics.get(),
                            config.cpu_threads > 0 ? 0 : cpus, run_begin, log);
  report.environment = std::move(environment);
  report.environment.device = device;
  const PinnedPool& pool = loader.pool();
  const Sampling sampling =
      start_sampling({config.sample_hz, config.timeseries_max_mib},
                     report_dir, run_begin, pipeline.spans, metrics.get(),
                     [&pool] { return pool.pinned() ? std::uint64_t{pool.total_bytes()} : 0; });
  UtilizationSampler* const sampler = sampling.sampler.get();
  start_gpu_trace(gpu);
  const std::int64_t measure_begin = now_ns();
  SpanDigest digest(run_begin, digest_options(config, gpu.source != nullptr));
  StepLoop loop({config, log, fs, *dataset, trainer.get(), pipeline, metrics.get(), autotune,
                 digest, report, run_begin},
                measure_begin);
  loop.run(live_diagnosis(metrics.get(), autotune, diagnosis_setup, sampler));

  // The device finishes the steps still queued (up to two) before the trace stops: their kernels
  // ran for measured steps. feedscope's own polling waits, after the window closed.
  const auto drain = [&] {
    if (trainer) trainer->drain();
    if (pipeline.engine) pipeline.engine->wait_idle();
  };
  stop_tracers(drain, gpu.source.get(), sampler, report, diagnosis_setup.gpu);
  const MeasuredWindow window = loop.window();
  report.config = config_entries(config);
  fill_measurements(report, digest, window, run_begin, loop.usage(cpus), fs);
  record_training(report, trainer.get(), pipeline.engine.get(), loop.submitted());
  report.spans_dropped = pipeline.spans.dropped();
  record_data_errors(report, config, pipeline);
  report.samples = sample_costs_of(loader.sample_costs(), "feedscope's loader",
                                   config.dataset.starts_with("images:") ? static_cast<int>(config.image_size) : 0);
  // --- GPU activity trace: summary over the measured `step` spans, and trace.json ---------------
  const SpanDigest::Steps steps = digest.steps(window.begin_ns, window.end_ns);
  const GpuActivity gpu_activity =
      finish_gpu_trace(report, gpu.source.get(), gpu.unavailable, steps, window);
  // --- end GPU activity trace ---------------------------------------------------------------------

  const DiagnosisInput diagnosed =
      diagnose_run(report, diagnosis_setup, trial_setup(report, config, t, trainer.get(), loader),
                   autotune, log);
  if (metrics) metrics->set_bottleneck(report.diagnosis.bottleneck);

  write_report_files(report_dir, report, sampler, digest.trace_spans(), pipeline.spans.lanes(),
                     gpu.source ? &gpu_activity : nullptr, run_begin);
  record_run(config, diagnosed, report, gpu.source ? &gpu_activity : nullptr, steps, window,
             gpu.unavailable, log);
  if (loop.bad_data()) std::rethrow_exception(loop.bad_data());
  return report;
}

}  // namespace feedscope
