#include <feedscope/session.h>

#include <unistd.h>

#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "exporters/console_report.h"
#include "exporters/metrics_exporter.h"
#include "exporters/rank_address.h"
#include "exporters/report_assembly.h"
#include "exporters/session_access.h"
#include "exporters/watch_channel.h"
#include "pinned_memory/device_drain.h"
#include "pinned_memory/device_probe.h"
#include "profiler/cupti_activity_source.h"
#include "profiler/diagnosis.h"
#include "profiler/span_digest.h"
#include "profiler/trace_sampling.h"

namespace feedscope {

namespace {

std::string this_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// Why CUPTI will not be tried, or empty when it may be.
std::string gpu_trace_precondition(bool wanted) {
  if (!wanted) return "not requested (trace_gpu off)";
  // CUPTI takes one client per process: under watch, its injection library has it.
  if (watch_channel_dir()) return "traced by feedscope watch (its report has the GPU trace)";
  const DeviceProbe cuda = probe_cuda();
  if (!cuda.built_with_cuda) return "built without CUDA";
  if (!cuda.available()) return "no CUDA device: " + cuda.unavailable_reason;
  return "";
}

// The loader's settings a session may be given, at construction or later.
void check_loader_settings(std::int64_t batch_size, int num_workers,
                           std::optional<int> prefetch_factor) {
  if (num_workers < 0)
    throw std::invalid_argument("num_workers: must be >= 0, got " + std::to_string(num_workers));
  if (batch_size < 0)
    throw std::invalid_argument("batch_size: must be >= 0, got " + std::to_string(batch_size));
  if (prefetch_factor && *prefetch_factor < 1)
    throw std::invalid_argument("prefetch_factor: must be >= 1, got " +
                                std::to_string(*prefetch_factor));
}

// A setting the loader did not say is null in report.json: not known, which false or 0 would hide.
template <typename T>
ConfigValue known(const std::optional<T>& value) {
  if (!value) return nullptr;
  if constexpr (std::is_same_v<T, bool>) return *value;
  else return static_cast<std::int64_t>(*value);
}

}  // namespace

struct Session::Impl final : LoopListener {
  explicit Impl(Options o) : options(std::move(o)) {}

  void batch_done(std::int64_t samples) noexcept override {
    if (metrics) metrics->add_batch(samples);
  }
  void loop_started(std::int64_t begin_ns) noexcept override {
    try {
      digest->set_origin(begin_ns);
    } catch (...) {  // a lock that fails: statistics, never the user's loop
    }
  }
  void advanced(std::int64_t now) noexcept override { digest->advance(now); }
  void window_opened(std::int64_t begin_ns) noexcept override {
    try {
      digest->open_window(begin_ns);
    } catch (...) {
    }
    try {
      usage_begin = take_usage_snapshot(fs, now_ns());
    } catch (...) {  // CPU ratios are then over the whole run; the loop goes on
    }
  }

  DiagnosisSetup current_setup() const {
    const std::lock_guard lock(setup_mutex);
    return live_setup;
  }

  // The constructor's steps past the options and the environment, in its order.
  void start_gpu_trace();
  void start_loop(LoopProfiler::Clock clock);
  void start_collector(LoopProfiler::Clock clock);
  const Report& finish();

  Options options;
  RankIdentity identity;  // what the launcher's variables say of this process
  RankAddress metrics_at;  // where the endpoint listens: the address, for a rank moved by its local rank
  const ProcFs fs;
  std::filesystem::path report_dir;
  std::int64_t run_begin_ns = 0;
  int cpus = 1;
  UsageSnapshot usage_begin;
  Environment env;
  // Shared with the collector thread (the live diagnosis), which reads it once per window: the
  // loader's settings may change after the loop started.
  mutable std::mutex setup_mutex;
  DiagnosisSetup live_setup;
  std::optional<AutotuneSummary> autotune;  // a loader that tunes itself: set_autotune()
  std::optional<SampleCosts> samples;         // feedscope's loader: set_sample_costs()
  // Declared in dependency order: each member may use those above it, and they stop in reverse.
  SpanRegistry spans;
  std::unique_ptr<MetricsExporter> metrics;
  Sampling sampling;
  std::unique_ptr<GpuActivitySource> gpu;
  std::string gpu_unavailable;
  std::unique_ptr<SpanDigest> digest;
  std::unique_ptr<LoopProfiler> loop;
  std::unique_ptr<SpanCollector> collector;
  std::optional<Report> report;
  std::optional<Summary> summary;  // finish()'s, for the public API
};

Session::Session() : Session(Options{}) {}

namespace {

// A window of spans to the watcher. Never throws: a full disk must not stop training.
void hand_live_window_quietly(const std::filesystem::path& dir, const std::vector<StageStats>& stages,
                              std::int64_t begin_ns, std::int64_t end_ns, int rank) noexcept {
  try {
    LiveWindow w;
    if (rank >= 0) w.rank = rank;
    w.wall_s = static_cast<double>(end_ns - begin_ns) / 1e9;
    w.end_ns = end_ns;
    for (const StageStats& st : stages) {
      if (st.name == "wait") w.wait_s = st.busy_s;
      if (st.name == "step") w.steps = st.count;
    }
    hand_live_window(dir, w);
  } catch (const std::exception&) {
  }
}

// A rank of a job of 2 ranks or more (its launcher's variables in the environment: torchrun's,
// srun's, mpirun's, sampler/rank_identity.h) labels its series and its report with its rank and
// writes into REPORT_DIR/rank-N, so that the job's ranks do not overwrite one another's reports.
Session::Options with_rank_from(const RankIdentity& id, Session::Options o) {
  if (o.rank >= 0 || !id.rank || id.world_size.value_or(0) < 2) return o;
  o.rank = *id.rank;
  o.report_dir = (std::filesystem::path(o.report_dir) / ("rank-" + std::to_string(*id.rank))).string();
  return o;
}

// The GPU trace's sampling the options ask for; std::invalid_argument naming the option otherwise.
TraceSampling gpu_trace_sampling(const Session::Options& o) {
  if (!(o.gpu_trace_lead >= 0 && o.gpu_trace_lead <= 3600))
    throw std::invalid_argument("gpu_trace_lead: must be 0 to 3600 seconds, got " +
                                std::to_string(o.gpu_trace_lead));
  std::string why;
  const std::optional<TraceSampling> sampling = parse_trace_sampling(o.gpu_trace, o.gpu_trace_lead, why);
  if (!sampling) throw std::invalid_argument("gpu_trace: " + why);
  return *sampling;
}

void check_options(const Session::Options& o) {
  if (o.warmup < 0) throw std::invalid_argument("warmup: must be >= 0, got " + std::to_string(o.warmup));
  if (o.sample_hz < 0)
    throw std::invalid_argument("sample_hz: must be >= 0, got " + std::to_string(o.sample_hz));
  check_loader_settings(o.batch_size, o.num_workers, o.prefetch_factor);
  if (o.report_dir.empty()) throw std::invalid_argument("report_dir: must not be empty");
  if (o.timeseries_max_mib < 0)
    throw std::invalid_argument("timeseries_max_mib: must be >= 0, got " +
                                std::to_string(o.timeseries_max_mib));
  if (o.trace_max_spans < 0)
    throw std::invalid_argument("trace_max_spans: must be >= 0, got " +
                                std::to_string(o.trace_max_spans));
  gpu_trace_sampling(o);
}

std::filesystem::path created_report_dir(const std::string& report_dir) {
  std::error_code ec;
  std::filesystem::create_directories(report_dir, ec);
  if (ec)
    throw std::runtime_error("cannot create report directory '" + report_dir + "': " + ec.message());
  return report_dir;
}

Environment environment_of(const ProcFs& fs, int cpus) {
  Environment env;
  env.cpus = cpus;
  if (const auto meminfo = fs.read("/proc/meminfo"))
    if (const auto mem = parse_meminfo(*meminfo)) env.memory_total_bytes = mem->total_bytes;
  env.torch_version = FEEDSCOPE_TORCH_VERSION;
  const DeviceProbe cuda = probe_cuda();
  env.cuda_version = cuda.built_with_cuda ? cuda_version_string(cuda.runtime_version) : "none";
  env.feedscope_version = FEEDSCOPE_VERSION;
  env.hostname = this_hostname();
  return env;
}

}  // namespace

void Session::Impl::start_gpu_trace() {
  gpu_unavailable = gpu_trace_precondition(options.trace_gpu);
  if (!gpu_unavailable.empty()) return;
  // CUPTI's start-up stays out of the loop: it runs here, before the first fetch.
  gpu = make_cupti_source(gpu_trace_sampling(options));
  if (!gpu->start()) {
    gpu_unavailable = gpu->unavailable_reason();
    gpu.reset();
  }
}

void Session::Impl::start_loop(LoopProfiler::Clock clock) {
  SpanDigest::Options digest_options;
  digest_options.trace_max_spans = static_cast<std::size_t>(options.trace_max_spans);
  digest_options.keep_steps = gpu != nullptr;
  digest = std::make_unique<SpanDigest>(run_begin_ns, digest_options);
  LoopProfiler::Options lo;
  lo.warmup = options.warmup;
  lo.clock = clock;
  loop = std::make_unique<LoopProfiler>(spans, lo, this);
}

void Session::Impl::start_collector(LoopProfiler::Clock clock) {
  const Options& o = options;
  // The bottleneck of the last window for feedscope_bottleneck_info, as `feedscope run` does;
  // without a device option, a running GPU trace stands for a step on the GPU. The setup is read
  // anew for each window: set_loader_settings() may change it.
  SpanCollector::WindowFn live_diagnosis;
  const std::optional<std::filesystem::path> watcher = watch_channel_dir();
  if (metrics || watcher) {
    live_setup = {o.batch_size,
                  o.num_workers,
                  cpus,
                  o.device.empty() ? gpu != nullptr : o.device.rfind("cuda", 0) == 0,
                  false,
                  cuda_device_index(o.device).value_or(0),
                  o.pin_memory};
    // Under watch, each second's spans go to the watcher too, while the program runs.
    live_diagnosis = [&s = *this, watcher, rank = o.rank](const std::vector<StageStats>& stages,
                                                          std::int64_t begin, std::int64_t end) {
      if (s.metrics)
        diagnose_live_window(*s.metrics, s.current_setup(), s.sampling.sampler.get(), stages, begin, end);
      if (watcher) hand_live_window_quietly(*watcher, stages, begin, end, rank);
    };
  }
  collector = std::make_unique<SpanCollector>(spans, *digest, metrics.get(), run_begin_ns,
                                              std::move(live_diagnosis),
                                              watcher ? 1'000'000'000 : 5'000'000'000,
                                              loop.get(), clock);
}

Session::Session(Options options) {
  const RankIdentity identity = rank_identity_of_this_process();
  impl_ = std::make_unique<Impl>(with_rank_from(identity, std::move(options)));
  Impl& s = *impl_;
  s.identity = identity;
  const Options& o = s.options;
  check_options(o);
  if (!o.metrics_addr.empty()) s.metrics_at = metrics_address_of_rank(o.metrics_addr, identity);
  if (o.print)  // the launchers whose variables disagree: which was believed, and why
    for (const std::string& note : identity.notes) std::cerr << "feedscope: " << note << std::endl;
  s.report_dir = created_report_dir(o.report_dir);
  const LoopProfiler::Clock clock = o.clock ? o.clock : &now_ns;
  s.run_begin_ns = clock();
  s.cpus = online_cpus(s.fs);
  s.env = environment_of(s.fs, s.cpus);
  if (!o.metrics_addr.empty())
    s.metrics = std::make_unique<MetricsExporter>(metrics_options(
        s.env, s.metrics_at.address, o.host, o.rank >= 0 ? std::optional<int>(o.rank) : std::nullopt));
  s.sampling = start_sampling({o.sample_hz, o.timeseries_max_mib},
                              s.report_dir, s.run_begin_ns, s.spans, s.metrics.get());
  s.start_gpu_trace();
  s.usage_begin = take_usage_snapshot(s.fs, now_ns());
  s.start_loop(clock);
  events_ = s.loop.get();
  s.start_collector(clock);
}

Session::~Session() {
  try {
    finish();
  } catch (const std::exception& e) {
    std::cerr << "feedscope: could not write the report: " << e.what() << std::endl;
  }
}

bool Session::finished() const noexcept { return impl_->report.has_value(); }

void Session::set_loader_settings(const LoaderSettings& settings) {
  Impl& s = *impl_;
  if (s.report)
    throw std::logic_error("loader settings after finish(): the report is written already");
  Options& o = s.options;
  check_loader_settings(settings.batch_size.value_or(o.batch_size),
                        settings.num_workers.value_or(o.num_workers),
                        settings.prefetch_factor ? settings.prefetch_factor : o.prefetch_factor);
  if (settings.batch_size) o.batch_size = *settings.batch_size;
  if (settings.num_workers) o.num_workers = *settings.num_workers;
  if (settings.pin_memory) o.pin_memory = settings.pin_memory;
  if (settings.prefetch_factor) o.prefetch_factor = settings.prefetch_factor;
  if (settings.persistent_workers) o.persistent_workers = settings.persistent_workers;
  const std::lock_guard lock(s.setup_mutex);
  s.live_setup.batch_size = o.batch_size;
  s.live_setup.num_workers = o.num_workers;
  s.live_setup.pin_memory = o.pin_memory;
}

Session::StageScope Session::scope(std::string_view name) {
  return impl_->loop->scope(name);
}

void SessionAccess::set_autotune(Session& session, AutotuneSummary autotune, std::int64_t start_ns) {
  Session::Impl& s = *session.impl_;
  if (s.report) return;
  const double shift_s = static_cast<double>(start_ns - s.run_begin_ns) / 1e9;
  for (TunerMove& m : autotune.moves) m.t_s += shift_s;
  s.autotune = std::move(autotune);
  const AutotuneSummary& a = *s.autotune;
  if (s.metrics) s.metrics->set_loader_setting(a.final.num_workers, a.final.prefetch);
  const std::lock_guard lock(s.setup_mutex);
  s.live_setup.num_workers = a.final.num_workers;
}

void SessionAccess::set_sample_costs(Session& session, SampleCosts samples) {
  Session::Impl& s = *session.impl_;
  if (s.report) return;
  s.samples = std::move(samples);
}

SpanRegistry& SessionAccess::spans(Session& session) noexcept { return session.impl_->spans; }

LoopProfiler& SessionAccess::profiler(Session& session) noexcept { return *session.impl_->loop; }

const Report& SessionAccess::finish(Session& session) {
  session.finish();
  return *session.impl_->report;
}

std::string Session::report_dir() const { return impl_->report_dir.string(); }

std::string Session::metrics_address() const {
  return impl_->metrics ? impl_->metrics->address() : std::string();
}

const Session::Summary& Session::finish() {
  Impl& s = *impl_;
  if (!s.summary) {
    const Report& report = s.finish();
    Summary summary;
    const Diagnosis& d = report.diagnosis;
    summary.bottleneck = d.bottleneck;
    summary.verdict = d.verdict;
    // Null where not measured, as report.json has them.
    if (!d.data_stall_source.empty()) summary.data_stall_ratio = d.data_stall_ratio;
    if (report.throughput.steps > 0) summary.samples_per_s = report.throughput.samples_per_s;
    summary.report_dir = s.report_dir.string();
    s.summary = std::move(summary);
  }
  return *s.summary;
}

const Report& Session::Impl::finish() {
  Impl& s = *this;
  if (s.report) return *s.report;
  const Options& o = s.options;
  const LoopWindow w = s.loop->window();
  s.collector.reset();  // joins, then drains the last spans of every ring
  Report report;
  report.environment = s.env;
  // The loop's last steps may still be queued on the device: their kernels belong to the trace.
  const auto drain = [] { drain_used_devices(); };
  // The GPU of "cuda:N"; "cuda" is the current device, 0 unless the loop changed it.
  const int gpu = cuda_device_index(o.device).value_or(0);
  stop_tracers(s.gpu ? drain : std::function<void()>{}, s.gpu.get(), s.sampling.sampler.get(),
               report, gpu);
  const UsageSnapshot usage_end = take_usage_snapshot(s.fs, now_ns());

  MeasuredWindow window;
  window.begin_ns = w.begin_ns;
  window.end_ns = w.end_ns;
  // A loop without step scopes still has batches; one without either measured nothing.
  window.steps = w.steps > 0 ? w.steps : w.batches;
  window.samples = w.samples > 0 ? w.samples : window.steps * o.batch_size;
  report.config = {{"mode", std::string("wrap")},
                   {"report_dir", o.report_dir},
                   {"warmup", o.warmup},
                   {"metrics_addr", o.metrics_addr},
                   {"sample_hz", o.sample_hz},
                   {"timeseries_max_mib", o.timeseries_max_mib},
                   {"batch_size", o.batch_size},
                   {"num_workers", std::int64_t{o.num_workers}},
                   {"pin_memory", known(o.pin_memory)},
                   {"prefetch_factor", known(o.prefetch_factor)},
                   {"persistent_workers", known(o.persistent_workers)},
                   {"device", o.device},
                   {"trace_gpu", o.trace_gpu},
                   {"gpu_trace", o.gpu_trace},
                   {"gpu_trace_lead", o.gpu_trace_lead},
                   {"trace_max_spans", o.trace_max_spans}};
  if (s.metrics) {
    report.config.emplace_back("metrics_address", s.metrics->address());
    report.config.emplace_back("metrics_port_offset", std::int64_t{s.metrics_at.port_offset});
  }
  if (o.rank >= 0) report.config.emplace_back("rank", std::int64_t{o.rank});
  if (o.rank >= 0 && s.identity.rank == o.rank) report.config.emplace_back("rank_source", s.identity.source);
  fill_measurements(report, *s.digest, window, s.run_begin_ns,
                    usage_between(s.usage_begin, usage_end, s.cpus), s.fs);
  report.custom_stages = s.loop->custom_stage_stats(window.begin_ns, window.end_ns);
  report.autotune = s.autotune;
  report.samples = s.samples;
  report.training.model = "user loop (feedscope::Session)";
  report.spans_dropped = s.spans.dropped();
  const GpuActivity activity =
      finish_gpu_trace(report, s.gpu.get(), s.gpu_unavailable,
                       s.digest->steps(window.begin_ns, window.end_ns), window);

  const bool traced_kernels = report.gpu_trace && report.gpu_trace->kernels > 0;
  const bool on_gpu = o.device.empty() ? traced_kernels : o.device.rfind("cuda", 0) == 0;
  report.environment.device = o.device.empty() ? (on_gpu ? "cuda" : "cpu") : o.device;
  // Known only now: the batch size from the steps' samples, and whether kernels ran.
  const DiagnosisSetup setup{o.batch_size > 0         ? o.batch_size
                             : window.steps > 0       ? window.samples / window.steps
                                                      : 0,
                             s.autotune ? s.autotune->final.num_workers : o.num_workers,
                             s.cpus, on_gpu, false, gpu, o.pin_memory};
  report.diagnosis = diagnose(diagnosis_input(report, setup));
  if (s.metrics) s.metrics->set_bottleneck(report.diagnosis.bottleneck);

  s.report = std::move(report);
  write_report_files(s.report_dir, *s.report, s.sampling.sampler.get(), s.digest->trace_spans(),
                     s.spans.lanes(), s.gpu ? &activity : nullptr, s.run_begin_ns);
  if (const auto watcher = watch_channel_dir()) {
    try {
      hand_report_to_watcher(*watcher, *s.report);
    } catch (const std::exception& e) {  // the program's own report is written; go on
      std::cerr << "feedscope: could not hand the report to feedscope watch: " << e.what() << std::endl;
    }
  }
  if (o.print) {
    std::cerr << format_console_report(*s.report, ::isatty(STDERR_FILENO) != 0)
              << "feedscope: report in " << s.report_dir.string() << std::endl;
  }
  return *s.report;
}

}  // namespace feedscope
