#pragma once
// The Prometheus endpoint: DESIGN.md's metrics in prometheus-cpp's registry, served over HTTP by
// exporters/detail/http_server.h (why not prometheus-cpp's Exposer: see there), kept current
// while a run goes on. prometheus-cpp stays out of this header.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exporters/watch_channel.h"
#include "profiler/process_tree.h"
#include <stdexcept>
#include <string_view>

#include "loader/stage.h"
#include "sampler/utilization_sample.h"

namespace feedscope {

class MetricsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thread-safe: every update may come from any thread (the collector, the sampler, the training
// loop). Updates never throw; construction throws MetricsError. The per-batch updates take no
// lock of their own (observe_stage takes prometheus-cpp's per-histogram mutex);
// update_utilization and set_bottleneck, called at the sampling and diagnosis rate, serialize on
// one mutex each. A scrape serializes the registry only if an update came since the last
// serialization, else it serves the same text: a scrape always sees every update made before it.
// Destruction stops the HTTP server at once.
class MetricsExporter {
 public:
  struct Options {
    // HOST:PORT or [IPv6]:PORT (HOST an IPv4 address or a host name). Loopback unless the user
    // names another address; port 0 picks a free port.
    std::string address = "127.0.0.1:9464";
    // Constant labels on every series, e.g. {"rank","0"},{"host","node1"}. Empty values are left out.
    std::map<std::string, std::string> const_labels;
    std::string version, torch_version, cuda_version;  // feedscope_build_info labels
  };

  // Binds and starts serving /metrics. Throws MetricsError naming the address when it is
  // malformed or cannot be bound (e.g. the port is in use), or naming a constant label that is not
  // a valid label name or clashes with a label the exporter sets (stage, gpu, …).
  explicit MetricsExporter(Options options);
  ~MetricsExporter();
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  // "127.0.0.1:9464": the bound address, with the real port when 0 was asked for.
  std::string address() const;

  void add_batch(std::int64_t samples);                      // batches_total, samples_total
  void observe_stage(Stage stage, double seconds);           // stage_seconds, stage_busy_seconds_total
  void set_data_stall_ratio(double ratio);
  void set_queue_batches(std::string_view queue, double batches);  // queue="ready"|"in_flight"
  void add_h2d_bytes(bool pinned, double bytes);             // memory="pinned"|"pageable"
  void update_utilization(const UtilizationSample& sample);  // cpu, memory, disk, pressure, gpu
  void set_bottleneck(std::string_view bottleneck);          // one series at 1, the others 0
  // `feedscope watch` of a torch.distributed job: feedscope_rank_* series labelled by rank.
  void update_ranks(const std::vector<RankReading>& ranks);
  // Each rank's Session's latest window of spans: feedscope_rank_data_stall_ratio and
  // feedscope_rank_steps_per_second by rank (a window without a rank is left out).
  void update_rank_windows(const std::vector<LiveWindow>& windows);
  // The loader's worker count and prefetch depth: feedscope_loader_workers and
  // feedscope_loader_prefetch, present from the first call (a run sets them at its start and at
  // every move of num_workers=auto).
  void set_loader_setting(int num_workers, int prefetch);

  // The exposition text of feedscope's metrics, exactly what a scrape of /metrics returns.
  std::string scrape_text() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The endpoint's options for a process of `env` at `address`: `host` (the machine's name where
// empty) and `rank` (where given) as constant labels, and the build's versions for
// feedscope_build_info. `run`, `watch` and a Session all start theirs from it.
MetricsExporter::Options metrics_options(const Environment& env, std::string address,
                                         const std::string& host, std::optional<int> rank);

}  // namespace feedscope
