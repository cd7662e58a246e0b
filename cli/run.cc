#include "cli/run.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <ostream>
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
#include "exporters/report_assembly.h"
#include "exporters/timeseries_csv.h"
#include "loader/batch_loader.h"
#include "loader/device_feeder.h"
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
  MetricsExporter::Options o;
  o.address = config.metrics_addr;
  const Placement placement = resolve_placement(config);
  if (placement.labelled) o.const_labels["rank"] = std::to_string(placement.rank);
  o.const_labels["host"] = config.host.empty() ? env.hostname : config.host;
  o.version = env.feedscope_version;
  o.torch_version = env.torch_version;
  o.cuda_version = env.cuda_version;
  auto metrics = std::make_unique<MetricsExporter>(o);
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
void diagnose_with_trials(Report& report, const DiagnosisSetup& setup,
                          const std::optional<TrialSetup>& trials, std::ostream& log) {
  DiagnosisInput in = diagnosis_input(report, setup);
  report.diagnosis = diagnose(in);
  if (!trials) return;
  if ((report.trials = run_trials(report.diagnosis, in, *trials, log))) {
    in.trials = report.trials;
    report.diagnosis = diagnose(in);
  }
}

}  // namespace

Report run_profiled(const RunConfig& config, std::ostream& log) {
  validate_config(config);
  // The endpoint binds first: a port in use stops the run before any loading or training starts.
  Environment environment = gather_environment("");
  const std::unique_ptr<MetricsExporter> metrics = start_metrics(config, environment, log);
  std::shared_ptr<const DataSource> dataset = open_dataset(config);

  std::unique_ptr<Trainer> trainer;
  TrainerOptions t;
  if (!config.loader_only) {
    t.model = config.model;
    t.hidden = config.hidden;
    t.layers = config.layers;
    t.classes = dataset->num_classes();
    t.lr = config.lr;
    t.device = config.device;
    t.seed = static_cast<std::uint64_t>(config.seed);
    t.sample = dataset->spec();
    // A CPU step gets the cores the workers leave (it waits while they load at 0 workers),
    // unless --cpu-threads says otherwise. Under num_workers=auto the follower below keeps it so.
    const int workers = config.num_workers == kAutoValue ? 1 : static_cast<int>(config.num_workers);
    t.cpu_threads = config.cpu_threads > 0 ? static_cast<int>(config.cpu_threads)
                                           : std::max(1, environment.cpus - workers);
    trainer = make_trainer(t);
  }
  const bool on_gpu = trainer && trainer->on_gpu();
  const std::string device = trainer ? trainer->device() : "none (loader only)";

  // --- GPU activity trace: CUPTI records the step's kernels, copies and syncs ----------------------
  std::unique_ptr<GpuActivitySource> gpu_source;
  std::string gpu_unavailable;
  if (!trainer) {
    gpu_unavailable = "loader only: no training step";
  } else if (!on_gpu) {
    const DeviceProbe cuda = probe_cuda();
    if (!cuda.built_with_cuda)
      gpu_unavailable = "built without CUDA";
    else if (!cuda.available())
      gpu_unavailable = "no CUDA device: " + cuda.unavailable_reason;
    else
      gpu_unavailable = "the step runs on the CPU";
  } else {
    gpu_source = make_cupti_source();
  }
  // --- end GPU activity trace ---------------------------------------------------------------------

  LoaderOptions lo = loader_options(config);
  lo.pin_memory = config.pin_memory && on_gpu;  // pinning only helps a device copy
  // No code of the user's runs between a run's epochs, so the workers may go straight on into
  // the next one: 4 % more samples/s at 2 workers on a 16-batch epoch (bench/compare.sh's folder).
  lo.prefetch_next_epoch = true;
  const Placement placement = resolve_placement(config);
  SpanRegistry spans;
  // Before the loader exists: its constructor starts loading the first epoch.
  if (config.cold_cache) dataset->evict_page_cache();
  const auto sharded = std::dynamic_pointer_cast<const ShardedDataset>(dataset);
  const auto indexed = std::dynamic_pointer_cast<const Dataset>(dataset);
  const std::unique_ptr<BatchLoader> loader_holder = make_batch_loader(config, dataset, lo, &spans);
  BatchLoader& loader = *loader_holder;
  // On a GPU every batch goes through the copy stream; the engine's buffers are the slab's size.
  std::unique_ptr<CopyEngine> engine;
  if (on_gpu) {
    CopyEngine::Options eo;
    eo.device = trainer->cuda_index();  // the step's device: its stream reads the buffers
    eo.buffer_bytes = loader.pool().slab_bytes();
    engine = std::make_unique<CopyEngine>(eo);
  }
  DeviceFeeder feeder(loader, engine.get(), &spans);
  if (std::string why = loader.empty_epoch_reason(); !why.empty()) {
    if (placement.world_size > 1)
      why = "rank " + std::to_string(placement.rank) + " of " +
            std::to_string(placement.world_size) + ": " + why;
    throw ConfigError(config.drop_last ? "batch_size" : "dataset", why);
  }

  log << "feedscope: " << (trainer ? trainer->describe() : std::string("loader only")) << " on "
      << dataset->name() << " ("
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
  if (const auto* images = dynamic_cast<const ImageFolderDataset*>(dataset.get()); images && !images->loops().empty())
    log << "feedscope: " << images->loops().size() << " symlink loop(s) in " << dataset->name()
        << " not entered (torchvision's os.walk would go round until the path is too long), the first "
        << images->loops().front() << std::endl;

  std::error_code ec;
  std::filesystem::create_directories(config.report_dir, ec);
  if (ec)
    throw std::runtime_error("cannot create report directory '" + config.report_dir +
                             "': " + ec.message());
  const std::filesystem::path report_dir(config.report_dir);

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
                     report_dir, run_begin, spans, metrics.get(),
                     [&pool] { return pool.pinned() ? std::uint64_t{pool.total_bytes()} : 0; });
  UtilizationSampler* const sampler = sampling.sampler.get();
  // GPU trace: CUPTI's start-up stays out of the measured window.
  if (gpu_source && !gpu_source->start()) {
    gpu_unavailable = gpu_source->unavailable_reason();
    gpu_source.reset();
  }
  std::int64_t measure_begin = now_ns();
  // What the run keeps of its spans: bounded however long it runs.
  SpanDigest::Options digest_options;
  digest_options.trace_max_spans = static_cast<std::size_t>(config.trace_max_spans);
  digest_options.keep_steps = gpu_source != nullptr;
  SpanDigest digest(run_begin, digest_options);
  if (config.warmup == 0) digest.open_window(measure_begin);
  UsageSnapshot usage_begin = take_usage_snapshot(fs, measure_begin);
  std::int64_t step = 0, measured_steps = 0, measured_samples = 0, all_samples = 0;
  CopySubmission submitted;  // in the measured window
  std::uint64_t h2d_reported[2] = {0, 0};  // by pinned: bytes already added to the metrics
  std::uint64_t epoch = 0;
  std::int64_t end = 0;
  UsageSnapshot usage_end;  // taken where the window closes, before any shutdown work
  const auto close_window = [&](std::int64_t at) {
    end = at;
    usage_end = take_usage_snapshot(fs, at);
  };
  std::exception_ptr bad_data;  // rethrown once the partial report is written
  // Ends the run before what was asked for: a stop in warm-up reports what ran rather than an
  // empty window.
  const auto stop_early = [&](const std::string& reason, const std::string& message) {
    report.stopped_early = {reason, message};
    close_window(now_ns());
    if (step <= config.warmup) {
      measure_begin = run_begin;
      measured_steps = step;
      measured_samples = all_samples;
    }
    log << "feedscope: " << (reason == "bad_data" ? "bad data" : message) << ": stopping after "
        << step << " steps; writing the partial report to " << config.report_dir << std::endl;
  };
  {
    // The bottleneck of the last window, for the endpoint's feedscope_bottleneck_info while the
    // run goes on; the report's diagnosis is made over the whole measured run at the end.
    SpanCollector::WindowFn live_diagnosis;
    if (metrics)
      live_diagnosis = [&metrics = *metrics, &autotune, setup = diagnosis_setup, sampler](
                           const std::vector<StageStats>& stages, std::int64_t begin,
                           std::int64_t end) mutable {
        setup.num_workers = autotune.workers();  // a tuned loader's count moves while it runs
        diagnose_live_window(metrics, setup, sampler, stages, begin, end);
      };
    SpanCollector collector(spans, digest, metrics.get(), run_begin, live_diagnosis);
    const std::int64_t duration_ns = static_cast<std::int64_t>(config.duration * 1e9);
    std::int64_t wait_begin = now_ns();  // an epoch change counts as waiting
    std::int64_t epoch_batches = 0;
    for (;;) {
      // Whatever ends the warm-up or the run happens from here on: the digest may place every
      // span that began before.
      digest.advance(wait_begin);
      if (const int signal = interrupt_signal(); signal != 0) {
        report.interrupted = interrupt_signal_name(signal);
        stop_early("interrupted", report.interrupted);
        break;
      }
      std::optional<DeviceBatch> batch;
      try {
        batch = feeder.next();
      } catch (const SampleError& e) {  // --bad-sample fail
        bad_data = std::current_exception();
        stop_early("bad_data", e.what());
        break;
      } catch (const BadDataError& e) {  // --bad-sample skip, over --max-bad-ratio
        bad_data = std::current_exception();
        stop_early("bad_data", e.what());
        break;
      }
      if (!batch) {
        // Under skip with max_bad_ratio 1 an epoch of only bad samples would otherwise spin.
        if (epoch_batches == 0) {
          DataErrors errors = loader.data_errors();
          std::string what = "bad data: epoch " + std::to_string(epoch) +
                             " delivered no sample; " + std::to_string(errors.bad) + " of " +
                             std::to_string(errors.attempted) + " samples failed to load";
          if (!errors.examples.empty()) what += "; first: " + errors.examples.front().message;
          bad_data = std::make_exception_ptr(BadDataError(what, std::move(errors)));
          stop_early("bad_data", what);
          break;
        }
        epoch_batches = 0;
        if (config.cold_cache) dataset->evict_page_cache();  // the epoch's loads are all done
        feeder.begin_epoch(++epoch);
        continue;
      }
      ++epoch_batches;
      autotune.poll();
      const std::int64_t step_begin = now_ns();
      // The copy submission inside next() is the thread's work, not waiting: it stays out of the
      // wait span (placed last, where its larger part, the next batch's copy, happens).
      const std::int64_t submit_ns = feeder.last_submit_ns();
      if (metrics) {
        metrics->set_queue_batches("ready", loader.batches_ready());
        metrics->set_queue_batches("in_flight", loader.batches_in_flight());
      }
      spans.record(LaneRole::training, Stage::wait, batch->index, wait_begin,
                   std::max(wait_begin, step_begin - submit_ns));
      if (trainer) trainer->step(*batch);
      const std::int64_t size = batch->size;
      const std::int64_t index = batch->index;
      // The memory goes back before the next wait: the slab to the pool, the device buffer to
      // the engine once the step's queued work is done.
      batch->release_after(nullptr);
      batch.reset();
      const std::int64_t step_end = now_ns();
      wait_begin = step_end;
      if (trainer) spans.record(LaneRole::training, Stage::step, index, step_begin, step_end);
      // Reading the loss waits for the device: once at the start, once at the end, outside any
      // step's window, so the GPU trace never counts it as a sync of the step's.
      if (trainer && !report.training.first_loss) {
        report.training.first_loss = trainer->last_loss();
        wait_begin = now_ns();
      }
      ++step;
      all_samples += size;
      if (metrics) {
        metrics->add_batch(size);
        for (const bool pinned : {false, true}) {
          const std::uint64_t total = feeder.h2d_bytes(pinned);
          metrics->add_h2d_bytes(pinned, static_cast<double>(total - h2d_reported[pinned]));
          h2d_reported[pinned] = total;
        }
      }
      if (step <= config.warmup) {
        if (step == config.warmup) {
          measure_begin = step_end;
          digest.open_window(measure_begin);
          usage_begin = take_usage_snapshot(fs, measure_begin);
        }
        continue;
      }
      ++measured_steps;
      measured_samples += size;
      if (engine) {
        ++submitted.count;
        submitted.busy_s += static_cast<double>(submit_ns) / 1e9;
      }
      const bool done = duration_ns > 0 ? step_end - measure_begin >= duration_ns
                                        : measured_steps >= config.steps;
      if (done) {
        close_window(step_end);
        break;
      }
    }
  }
  // The device finishes the steps still queued (up to two) before the trace stops: their kernels
  // ran for measured steps. feedscope's own polling waits, after the window closed.
  const auto drain = [&] {
    if (trainer) trainer->drain();
    if (engine) engine->wait_idle();
  };
  stop_tracers(drain, gpu_source.get(), sampler, report, diagnosis_setup.gpu);
  const MeasuredWindow window{measure_begin, end, measured_steps, measured_samples};
  report.config = config_entries(config);
  fill_measurements(report, digest, window, run_begin, usage_between(usage_begin, usage_end, cpus),
                    fs);
  if (trainer) report.training.last_loss = trainer->last_loss();
  if (engine) report.h2d_submit = submitted;
  report.training.model = trainer ? trainer->describe() : "none (loader only)";
  report.training.parameters = trainer ? trainer->parameters() : 0;
  report.spans_dropped = spans.dropped();
  const DataErrors errors = loader.data_errors();
  report.data_errors.policy = config.bad_sample;
  report.data_errors.max_bad_ratio = config.max_bad_ratio;
  report.data_errors.ratio_floor = lo.bad_ratio_floor;
  report.data_errors.count = errors.bad;
  report.data_errors.attempted = errors.attempted;
  report.data_errors.ratio = errors.ratio();
  for (const BadSample& b : errors.examples)
    report.data_errors.examples.push_back({b.index, b.source, b.message});

  // --- GPU activity trace: summary over the measured `step` spans, and trace.json ---------------
  const GpuActivity gpu_activity = finish_gpu_trace(report, gpu_source.get(), gpu_unavailable,
                                                    digest.steps(window.begin_ns, window.end_ns),
                                                    window);
  // --- end GPU activity trace ---------------------------------------------------------------------

  std::optional<TrialSetup> trial_setup;
  if (trainer && report.interrupted.empty())
    trial_setup = TrialSetup{t, trainer->cuda_index(),
                             loader.labels_offset() +
                                 sizeof(std::int64_t) * static_cast<std::size_t>(config.batch_size)};
  report.autotune = autotune.summary();
  // A tuned loader's diagnosis starts from where the tuner ended.
  DiagnosisSetup final_setup = diagnosis_setup;
  if (report.autotune) final_setup.num_workers = report.autotune->final.num_workers;
  diagnose_with_trials(report, final_setup, trial_setup, log);
  if (metrics) metrics->set_bottleneck(report.diagnosis.bottleneck);

  write_report_files(report_dir, report, sampler, digest.trace_spans(), spans.lanes(),
                     gpu_source ? &gpu_activity : nullptr, run_begin);
  if (bad_data) std::rethrow_exception(bad_data);
  return report;
}

}  // namespace feedscope
