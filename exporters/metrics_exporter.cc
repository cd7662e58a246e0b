#include "exporters/metrics_exporter.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <prometheus/check_names.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "exporters/detail/http_server.h"
#include "profiler/bottleneck_names.h"
#include "profiler/process_tree.h"

namespace feedscope {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;

// Labels this file puts on series itself; a constant label of the same name would make
// prometheus-cpp throw on Family::Add, i.e. on an update.
constexpr std::array<std::string_view, 12> kVariableLabelNames = {
    "stage", "queue", "memory", "scope",      "core",    "thread",
    "device", "gpu",  "bottleneck", "version", "torch", "cuda"};

// 1-2-5 per decade, 10 µs .. 10 s: a span of a cached read and a cold multi-second step both
// land in a bucket that tells them apart. Literals, so the `le` labels print short.
const Histogram::BucketBoundaries kStageBuckets = {
    1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2,
    2e-2, 5e-2, 0.1,  0.2,  0.5,  1.0,  2.0,  5.0,  10.0};

struct ParsedAddress {
  std::string host;  // without brackets
  bool ipv6 = false;
  int port = 0;
};

[[noreturn]] void throw_malformed(const std::string& value, std::string_view why) {
  throw MetricsError("metrics_addr: malformed address \"" + value + "\": " + std::string(why) +
                     "; expected HOST:PORT or [IPv6]:PORT with a port 0..65535, e.g. "
                     "127.0.0.1:9464");
}

bool is_hostname(std::string_view host) {
  for (const char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-';
    if (!ok) return false;
  }
  return !host.empty() && host.front() != '-' && host.front() != '.';
}

// Strict, so that a typo is an error naming the value rather than a bind to something unintended.
ParsedAddress parse_address(const std::string& value) {
  ParsedAddress parsed;
  std::string_view port_text;
  if (!value.empty() && value.front() == '[') {
    const auto close = value.find(']');
    if (close == std::string::npos) throw_malformed(value, "no closing ']'");
    parsed.host = value.substr(1, close - 1);
    parsed.ipv6 = true;
    in6_addr ignored{};
    if (::inet_pton(AF_INET6, parsed.host.c_str(), &ignored) != 1)
      throw_malformed(value, "\"" + parsed.host + "\" is not an IPv6 address");
    if (close + 1 >= value.size() || value[close + 1] != ':') throw_malformed(value, "no :PORT");
    port_text = std::string_view(value).substr(close + 2);
  } else {
    const auto colon = value.find(':');
    if (colon == std::string::npos) throw_malformed(value, "no :PORT");
    if (value.find(':', colon + 1) != std::string::npos)
      throw_malformed(value, "more than one ':' (write an IPv6 address in brackets)");
    parsed.host = value.substr(0, colon);
    if (parsed.host.empty()) throw_malformed(value, "no host");
    if (!is_hostname(parsed.host))
      throw_malformed(value, "\"" + parsed.host + "\" is neither an IPv4 address nor a host name");
    port_text = std::string_view(value).substr(colon + 1);
  }
  if (port_text.empty() || port_text.size() > 5) throw_malformed(value, "bad port");
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), parsed.port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || parsed.port < 0 ||
      parsed.port > 65535)
    throw_malformed(value, "bad port \"" + std::string(port_text) + "\"");
  return parsed;
}

std::string format_address(const ParsedAddress& address, int port) {
  const std::string host = address.ipv6 ? "[" + address.host + "]" : address.host;
  return host + ":" + std::to_string(port);
}

// The constant labels with a value, each a valid Prometheus label name that is none of the
// labels feedscope puts on its series itself.
Labels checked_const_labels(const std::map<std::string, std::string>& labels) {
  Labels out;
  for (const auto& [name, value] : labels) {
    if (value.empty()) continue;
    if (!prometheus::CheckLabelName(name))
      throw MetricsError("metrics: constant label \"" + name +
                         "\" is not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, no "
                         "leading __)");
    for (const auto reserved : kVariableLabelNames)
      if (name == reserved || name == "le")
        throw MetricsError("metrics: constant label \"" + name +
                           "\" clashes with a label feedscope sets itself");
    out.emplace(name, value);
  }
  return out;
}

// For a reading that did not come (an NVML call that failed): no series rather than a 0, and not
// the last value it had either.
void remove_series(Family<Gauge>& family, const Labels& labels) {
  if (family.Has(labels)) family.Remove(&family.Add(labels));
}

double clamp_ratio(double value) {  // NaN passes through: a broken reading stays visible
  return value < 0 ? 0 : value > 1 ? 1 : value;
}

}  // namespace

struct MetricsExporter::Impl {
  // Registry before server: the server stops serving before the registry goes.
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<detail::HttpServer> server;
  std::string address;
  Labels const_labels;

  // Series of the per-batch calls, all made at construction: an update is an index and an
  // atomic, with prometheus-cpp's own histogram mutex as the only lock.
  Counter* batches = nullptr;
  Counter* samples = nullptr;
  std::array<Histogram*, kStageCount> stage_seconds{};
  std::array<Counter*, kStageCount> stage_busy{};
  Gauge* data_stall = nullptr;
  Family<Gauge>* queue_family = nullptr;
  Gauge* queue_ready = nullptr;
  Gauge* queue_in_flight = nullptr;
  std::array<Counter*, 2> h2d{};  // [pageable, pinned]
  Gauge* pinned_bytes = nullptr;
  Family<Gauge>* loader_workers = nullptr;   // series added by the first set_loader_setting
  Family<Gauge>* loader_prefetch = nullptr;
  std::mutex loader_mutex;
  Gauge* workers = nullptr;
  Gauge* prefetch = nullptr;

  // Families whose series appear when a sample first names their device, GPU or thread.
  Family<Gauge>* cpu = nullptr;
  Family<Gauge>* thread_cpu = nullptr;
  Family<Gauge>* memory_rss = nullptr;
  Family<Gauge>* memory_available = nullptr;
  Family<Gauge>* memory_private = nullptr;
  Family<Gauge>* memory_shared = nullptr;
  Family<Counter>* disk_read = nullptr;
  Family<Gauge>* disk_busy = nullptr;
  Family<Gauge>* io_pressure = nullptr;
  Family<Gauge>* gpu_util = nullptr;
  Family<Gauge>* gpu_busy = nullptr;
  Family<Gauge>* gpu_memory_used = nullptr;
  Family<Gauge>* rank_cpu = nullptr;
  Family<Gauge>* rank_main = nullptr;
  Family<Gauge>* rank_workers = nullptr;
  Family<Gauge>* rank_workers_cpu = nullptr;
  Family<Gauge>* rank_stall = nullptr;
  Family<Gauge>* rank_gpu_sm = nullptr;
  Family<Gauge>* rank_gpu_memory = nullptr;
  Family<Gauge>* rank_steps = nullptr;

  // Below state is shared between the threads that call update_utilization / set_bottleneck.
  // Both run at the sampling or diagnosis rate, not per batch, so one mutex each is cheap.
  std::mutex utilization_mutex;
  std::unordered_map<std::string, std::uint64_t> disk_last_read_bytes;
  std::unordered_map<std::string, Gauge*> thread_series;
  std::set<int> ranks_served;  // the ranks update_ranks serves series of

  std::mutex bottleneck_mutex;
  std::array<Gauge*, kBottleneckNames.size()> bottleneck{};

  // Below state is shared with the updating threads: every update bumps the generation after its
  // change, so a scrape that finds the generation of its cached text unchanged may serve that text
  // and still see every update made before it. 200 scrapers at once then cost about one
  // serialization per change (a few hundred a second while training), not one per scrape.
  std::atomic<std::uint64_t> generation{1};
  void changed() noexcept { generation.fetch_add(1, std::memory_order_release); }

  // The server thread's own: handlers run one request at a time.
  std::uint64_t exposition_generation = 0;
  std::string exposition;
  const std::string& current_exposition() {
    const std::uint64_t now = generation.load(std::memory_order_acquire);
    if (now != exposition_generation) {
      exposition_generation = now;  // read before serializing: a change during it is seen next time
      exposition = prometheus::TextSerializer().Serialize(registry->Collect());
    }
    return exposition;
  }

  template <typename T>
  Family<T>& family(prometheus::detail::Builder<T> builder, const std::string& name,
                    const std::string& help) {
    return builder.Name(name).Help(help).Labels(const_labels).Register(*registry);
  }

  void update_utilization(const UtilizationSample& sample);
  // feedscope_memory_{private,shared}_bytes by role, on the readings that read smaps_rollup: the
  // sampled process is the trainer, its descendants classified as `watch` does.
  void update_memory_by_role(const UtilizationSample& sample);
  // Serves /metrics, and a page that links it, at `parsed` (`address_given`, as the user wrote it).
  void serve(const ParsedAddress& parsed, const std::string& address_given);
};

void MetricsExporter::Impl::serve(const ParsedAddress& parsed, const std::string& address_given) {
  std::vector<detail::HttpServer::Route> routes;
  routes.push_back({"/metrics", [this] {
                      return detail::HttpResponse{
                          200, "text/plain; version=0.0.4; charset=utf-8", current_exposition()};
                    }});
  routes.push_back({"/", [] {  // as node_exporter: a person who opens the address finds the link
                      return detail::HttpResponse{
                          200, "text/html; charset=utf-8",
                          "<html><head><title>feedscope</title></head><body><h1>feedscope</h1>"
                          "<p><a href=\"/metrics\">Metrics</a></p></body></html>\n"};
                    }});
  try {
    server = std::make_unique<detail::HttpServer>(parsed.host, parsed.port, std::move(routes));
  } catch (const detail::HttpServerError& e) {
    throw MetricsError("metrics_addr: cannot listen on " + address_given + ": " + e.what());
  }
  address = format_address(parsed, server->port());
}

MetricsExporter::Options metrics_options(const Environment& env, std::string address,
                                         const std::string& host, std::optional<int> rank) {
  MetricsExporter::Options o;
  o.address = std::move(address);
  if (rank) o.const_labels["rank"] = std::to_string(*rank);
  o.const_labels["host"] = host.empty() ? env.hostname : host;
  o.version = env.feedscope_version;
  o.torch_version = env.torch_version;
  o.cuda_version = env.cuda_version;
  return o;
}

MetricsExporter::MetricsExporter(Options options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  const ParsedAddress parsed = parse_address(options.address);

  m.const_labels = checked_const_labels(options.const_labels);

  try {
    m.family(prometheus::BuildGauge(), "feedscope_build_info",
             "feedscope build: its version and the torch and CUDA versions it runs with; always 1.")
        .Add({{"version", options.version},
              {"torch", options.torch_version},
              {"cuda", options.cuda_version}})
        .Set(1);

    m.batches = &m.family(prometheus::BuildCounter(), "feedscope_batches_total",
                          "Batches delivered to the training loop.")
                     .Add({});
    m.samples = &m.family(prometheus::BuildCounter(), "feedscope_samples_total",
                          "Samples delivered to the training loop.")
                     .Add({});

    auto& stage_seconds =
        m.family(prometheus::BuildHistogram(), "feedscope_stage_seconds",
                 "Duration of one span of a pipeline stage (read, decode, transform, collate, h2d, "
                 "wait, step) in seconds.");
    auto& stage_busy = m.family(prometheus::BuildCounter(), "feedscope_stage_busy_seconds_total",
                                "Summed span time of a pipeline stage over all its threads, in "
                                "seconds; its rate is the busy threads of the stage.");
    for (std::size_t i = 0; i < kStageNames.size(); ++i) {
      const Labels labels{{"stage", std::string(kStageNames[i])}};
      m.stage_seconds[i] = &stage_seconds.Add(labels, kStageBuckets);
      m.stage_busy[i] = &stage_busy.Add(labels);
    }

    m.data_stall = &m.family(prometheus::BuildGauge(), "feedscope_data_stall_ratio",
                             "Share of wall time the training loop waited for its next batch "
                             "(wait / wall), 0..1.")
                        .Add({});
    m.queue_family = &m.family(prometheus::BuildGauge(), "feedscope_queue_batches",
                               "Batches in a loader queue: ready (collated, waiting for the "
                               "training loop) or in_flight (being loaded by the workers).");
    m.queue_ready = &m.queue_family->Add({{"queue", "ready"}});
    m.queue_in_flight = &m.queue_family->Add({{"queue", "in_flight"}});
    m.pinned_bytes = &m.family(prometheus::BuildGauge(), "feedscope_pinned_bytes",
                               "Bytes of page-locked host memory held by the batch slab pool.")
                          .Add({});
    m.loader_workers = &m.family(prometheus::BuildGauge(), "feedscope_loader_workers",
                                 "Worker threads the loader runs now (num_workers=auto moves it).");
    m.loader_prefetch = &m.family(prometheus::BuildGauge(), "feedscope_loader_prefetch",
                                  "Batches in flight per loader worker now (prefetch=auto moves "
                                  "it).");
    auto& h2d = m.family(prometheus::BuildCounter(), "feedscope_h2d_bytes_total",
                         "Bytes copied from host to device, by the kind of host memory they came "
                         "from (pinned or pageable).");
    m.h2d[0] = &h2d.Add({{"memory", "pageable"}});
    m.h2d[1] = &h2d.Add({{"memory", "pinned"}});

    m.cpu = &m.family(prometheus::BuildGauge(), "feedscope_cpu_utilization_ratio",
                      "CPU busy share, 0..1. scope=system: all cores; scope=process: this process "
                      "over all cores; scope=core: the core named by the core label.");
    m.thread_cpu = &m.family(prometheus::BuildGauge(), "feedscope_thread_cpu_utilization_ratio",
                             "Busy share of one core of a thread of this process (loader worker, "
                             "training thread), 0..1; the mean where several threads share a "
                             "name.");
    m.memory_rss = &m.family(prometheus::BuildGauge(), "feedscope_memory_rss_bytes",
                             "Resident set size of this process in bytes.");
    m.memory_available = &m.family(prometheus::BuildGauge(), "feedscope_memory_available_bytes",
                                   "Memory available for new allocations without swapping "
                                   "(MemAvailable), in bytes.");
    m.memory_private = &m.family(prometheus::BuildGauge(), "feedscope_memory_private_bytes",
                                 "Private memory (smaps_rollup Private_Clean + Private_Dirty) of "
                                 "the processes of a role together, in bytes; read at most twice a "
                                 "second.");
    m.memory_shared = &m.family(prometheus::BuildGauge(), "feedscope_memory_shared_bytes",
                                "Shared memory (smaps_rollup Shared_Clean + Shared_Dirty) of the "
                                "processes of a role together, in bytes: a forked loader worker's "
                                "falls as it copies its parent's pages.");
    m.disk_read = &m.family(prometheus::BuildCounter(), "feedscope_disk_read_bytes_total",
                            "Bytes read from a block device since boot, as the kernel counts "
                            "them (all processes).");
    m.disk_busy = &m.family(prometheus::BuildGauge(), "feedscope_disk_busy_ratio",
                            "Share of the last sampling period a block device had I/O in "
                            "progress, 0..1.");
    m.io_pressure = &m.family(prometheus::BuildGauge(), "feedscope_io_pressure_ratio",
                              "I/O pressure: share of time some task stalled on I/O, 10 s "
                              "average (PSI io some avg10), 0..1.");
    m.gpu_util = &m.family(prometheus::BuildGauge(), "feedscope_gpu_utilization_ratio",
                           "Share of the sampling period in which a kernel ran on the GPU "
                           "(NVML utilization.gpu), 0..1.");
    m.rank_cpu = &m.family(prometheus::BuildGauge(), "feedscope_rank_cpu_cores",
                           "A torch.distributed rank's process, all its threads, in cores (watch).");
    m.rank_main = &m.family(prometheus::BuildGauge(), "feedscope_rank_main_thread_busy_ratio",
                            "A rank's main thread (its training loop), busy share of one core, 0..1 (watch).");
    m.rank_workers = &m.family(prometheus::BuildGauge(), "feedscope_rank_loader_workers",
                               "A rank's DataLoader worker processes alive (watch).");
    m.rank_workers_cpu = &m.family(prometheus::BuildGauge(), "feedscope_rank_loader_workers_cpu_cores",
                                   "A rank's DataLoader workers together, in cores (watch).");
    m.rank_gpu_sm = &m.family(prometheus::BuildGauge(), "feedscope_rank_gpu_sm_util_ratio",
                              "A rank's share of its GPU's SM time, NVML's per-process sample, 0..1 (watch).");
    m.rank_gpu_memory = &m.family(prometheus::BuildGauge(), "feedscope_rank_gpu_memory_bytes",
                                  "A rank's GPU memory, its own CUDA context, in bytes (watch).");
    m.rank_stall = &m.family(prometheus::BuildGauge(), "feedscope_rank_data_stall_ratio",
                             "A rank's data stall (wait / wall) over its Session's last second (watch).");
    m.rank_steps = &m.family(prometheus::BuildGauge(), "feedscope_rank_steps_per_second",
                             "A rank's training steps per second over its Session's last second (watch).");
    m.gpu_busy = &m.family(prometheus::BuildGauge(), "feedscope_gpu_busy_ratio",
                           "GPU busy share, 0..1; from NVML utilization.gpu, the busiest "
                           "reading the sampler has.");
    m.gpu_memory_used = &m.family(prometheus::BuildGauge(), "feedscope_gpu_memory_used_bytes",
                                  "GPU memory in use (all processes), in bytes.");

    auto& bottleneck = m.family(prometheus::BuildGauge(), "feedscope_bottleneck_info",
                                "The bottleneck the diagnosis names now: 1 on its series, 0 on "
                                "the others (all 0 before the first diagnosis).");
    for (std::size_t i = 0; i < kBottleneckNames.size(); ++i)
      m.bottleneck[i] = &bottleneck.Add({{"bottleneck", std::string(kBottleneckNames[i])}});
  } catch (const std::invalid_argument& e) {
    throw MetricsError(std::string("metrics: cannot create the metric families: ") + e.what());
  }

  m.serve(parsed, options.address);
}

MetricsExporter::~MetricsExporter() = default;

std::string MetricsExporter::address() const { return impl_->address; }

void MetricsExporter::add_batch(std::int64_t samples) {
  impl_->batches->Increment();
  if (samples > 0) impl_->samples->Increment(static_cast<double>(samples));
  impl_->changed();
}

void MetricsExporter::observe_stage(Stage stage, double seconds) {
  const auto i = static_cast<std::size_t>(stage);
  if (i >= kStageNames.size() || !(seconds >= 0)) return;
  impl_->stage_seconds[i]->Observe(seconds);
  impl_->stage_busy[i]->Increment(seconds);
  impl_->changed();
}

void MetricsExporter::set_data_stall_ratio(double ratio) {
  impl_->data_stall->Set(clamp_ratio(ratio));
  impl_->changed();
}

void MetricsExporter::set_loader_setting(int num_workers, int prefetch) {
  Impl& m = *impl_;
  {
    const std::lock_guard lock(m.loader_mutex);
    if (!m.workers) {
      m.workers = &m.loader_workers->Add({});
      m.prefetch = &m.loader_prefetch->Add({});
    }
    m.workers->Set(num_workers);
    m.prefetch->Set(prefetch);
  }
  m.changed();
}

void MetricsExporter::set_queue_batches(std::string_view queue, double batches) {
  if (queue == "ready") {
    impl_->queue_ready->Set(batches);
  } else if (queue == "in_flight") {
    impl_->queue_in_flight->Set(batches);
  } else {
    try {  // a queue the loader does not have today: first sight adds its series
      impl_->queue_family->Add({{"queue", std::string(queue)}}).Set(batches);
    } catch (...) {
    }
  }
  impl_->changed();
}

void MetricsExporter::add_h2d_bytes(bool pinned, double bytes) {
  if (bytes > 0) impl_->h2d[pinned ? 1 : 0]->Increment(bytes);
  impl_->changed();
}

void MetricsExporter::update_utilization(const UtilizationSample& sample) {
  try {
    impl_->update_utilization(sample);
  } catch (...) {  // only std::bad_alloc can get here; a lost sample must not stop training
  }
  impl_->changed();
}

void MetricsExporter::Impl::update_memory_by_role(const UtilizationSample& sample) {
  if (!sample.memory) return;  // not a reading of smaps_rollup
  const int trainer = sample.pid > 0 ? sample.pid : static_cast<int>(::getpid());
  std::string trainer_name;
  for (const ThreadCpu& t : sample.threads)
    if (t.tid == trainer) trainer_name = t.name;
  std::map<std::string, std::pair<double, double>> by_role = {
      {"trainer", {static_cast<double>(sample.memory->private_bytes()),
                   static_cast<double>(sample.memory->shared_bytes())}},
      {"loader_worker", {0, 0}}};
  for (const ProcessCpu& p : sample.children) {
    if (!p.memory) continue;
    auto& [private_bytes, shared_bytes] = by_role[to_string(classify_descendant(p, trainer, trainer_name))];
    private_bytes += static_cast<double>(p.memory->private_bytes());
    shared_bytes += static_cast<double>(p.memory->shared_bytes());
  }
  for (const auto& [role, bytes] : by_role) {
    memory_private->Add({{"role", role}}).Set(bytes.first);
    memory_shared->Add({{"role", role}}).Set(bytes.second);
  }
}

void MetricsExporter::Impl::update_utilization(const UtilizationSample& sample) {
  std::lock_guard lock(utilization_mutex);
  pinned_bytes->Set(static_cast<double>(sample.pinned_bytes));
  if (sample.cpu_system_ratio)
    cpu->Add({{"scope", "system"}}).Set(clamp_ratio(*sample.cpu_system_ratio));
  if (sample.cpu_process_ratio)
    cpu->Add({{"scope", "process"}}).Set(clamp_ratio(*sample.cpu_process_ratio));
  for (std::size_t core = 0; core < sample.cpu_core_ratio.size(); ++core)
    cpu->Add({{"scope", "core"}, {"core", std::to_string(core)}})
        .Set(clamp_ratio(sample.cpu_core_ratio[core]));

  // Threads come and go (a loader is rebuilt with other num_workers): series of threads absent
  // from this sample are removed rather than left at their last value.
  std::unordered_map<std::string, std::pair<double, int>> by_name;  // sum, count
  for (const ThreadCpu& thread : sample.threads) {
    auto& [sum, count] =
        by_name[thread.name.empty() ? "tid " + std::to_string(thread.tid) : thread.name];
    sum += thread.ratio;
    ++count;
  }
  for (auto it = thread_series.begin(); it != thread_series.end();) {
    if (by_name.count(it->first) == 0) {
      thread_cpu->Remove(it->second);
      it = thread_series.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [name, sum_count] : by_name) {
    Gauge*& gauge = thread_series[name];
    if (gauge == nullptr) gauge = &thread_cpu->Add({{"thread", name}});
    gauge->Set(clamp_ratio(sum_count.first / sum_count.second));
  }

  if (sample.rss_bytes) memory_rss->Add({}).Set(static_cast<double>(*sample.rss_bytes));
  if (sample.memory_available_bytes)
    memory_available->Add({}).Set(static_cast<double>(*sample.memory_available_bytes));
  update_memory_by_role(sample);

  for (const DiskSample& disk : sample.disks) {
    // The kernel's counter is cumulative and prometheus-cpp's only increments: add the
    // difference to the last reading. A smaller reading means the device's counter restarted
    // (device re-added); counting from zero again is what rate() would make of it.
    const auto last = disk_last_read_bytes.try_emplace(disk.device, 0).first;
    const std::uint64_t previous = last->second;
    const std::uint64_t delta =
        disk.read_bytes_total >= previous ? disk.read_bytes_total - previous : disk.read_bytes_total;
    Counter& counter = disk_read->Add({{"device", disk.device}});
    if (delta > 0) counter.Increment(static_cast<double>(delta));
    last->second = disk.read_bytes_total;
    disk_busy->Add({{"device", disk.device}}).Set(clamp_ratio(disk.busy_ratio));
  }

  if (sample.io_pressure) io_pressure->Add({}).Set(clamp_ratio(sample.io_pressure->some_avg10));

  for (const GpuSample& gpu : sample.gpus) {
    const Labels labels{{"gpu", std::to_string(gpu.index)}};
    if (gpu.util_ratio) {
      gpu_util->Add(labels).Set(clamp_ratio(*gpu.util_ratio));
      gpu_busy->Add(labels).Set(clamp_ratio(*gpu.util_ratio));
    } else {
      remove_series(*gpu_util, labels);
      remove_series(*gpu_busy, labels);
    }
    if (gpu.memory_used_bytes)
      gpu_memory_used->Add(labels).Set(static_cast<double>(*gpu.memory_used_bytes));
    else
      remove_series(*gpu_memory_used, labels);
  }
}

void MetricsExporter::set_bottleneck(std::string_view bottleneck) {
  // One lock, so that two racing calls cannot leave two series at 1.
  std::lock_guard lock(impl_->bottleneck_mutex);
  for (std::size_t i = 0; i < kBottleneckNames.size(); ++i)
    impl_->bottleneck[i]->Set(kBottleneckNames[i] == bottleneck ? 1 : 0);
  impl_->changed();
}

void MetricsExporter::update_ranks(const std::vector<RankReading>& ranks) {
  Impl& m = *impl_;
  if (m.const_labels.contains("rank")) return;  // one rank's own endpoint: its rank is constant
  {
    std::lock_guard lock(m.utilization_mutex);
    // A rank no longer read (it ended, or it was a launcher's stand-in before the ranks started)
    // has no series: a gauge left at its last value would show a rank that is not there.
    std::set<int> now;
    for (const RankReading& r : ranks) now.insert(r.rank);
    for (const int gone : m.ranks_served) {
      if (now.contains(gone)) continue;
      const Labels labels = {{"rank", std::to_string(gone)}};
      for (Family<Gauge>* f : {m.rank_cpu, m.rank_main, m.rank_workers, m.rank_workers_cpu, m.rank_gpu_sm,
                               m.rank_gpu_memory})
        if (f->Has(labels)) f->Remove(&f->Add(labels));
    }
    m.ranks_served = std::move(now);
    for (const RankReading& r : ranks) {
      const Labels labels = {{"rank", std::to_string(r.rank)}};
      m.rank_cpu->Add(labels).Set(r.cpu_cores);
      if (r.main_thread_busy) m.rank_main->Add(labels).Set(*r.main_thread_busy);
      m.rank_workers->Add(labels).Set(r.workers);
      m.rank_workers_cpu->Add(labels).Set(r.workers_cores);
      if (r.gpu_sm_util) m.rank_gpu_sm->Add(labels).Set(*r.gpu_sm_util);
      if (r.gpu_memory_bytes) m.rank_gpu_memory->Add(labels).Set(static_cast<double>(*r.gpu_memory_bytes));
    }
  }
  m.changed();
}

void MetricsExporter::update_rank_windows(const std::vector<LiveWindow>& windows) {
  Impl& m = *impl_;
  if (m.const_labels.contains("rank")) return;
  {
    std::lock_guard lock(m.utilization_mutex);
    for (const LiveWindow& w : windows) {
      if (!w.rank || w.wall_s <= 0) continue;
      const Labels labels = {{"rank", std::to_string(*w.rank)}};
      m.rank_stall->Add(labels).Set(std::clamp(w.wait_s / w.wall_s, 0.0, 1.0));
      m.rank_steps->Add(labels).Set(static_cast<double>(w.steps) / w.wall_s);
    }
  }
  m.changed();
}

std::string MetricsExporter::scrape_text() const {
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

}  // namespace feedscope
