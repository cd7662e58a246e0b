#pragma once
// feedscope::Session: profile a libtorch training loop you already have without replacing its
// loader. Torch-free: include it next to your own torch code; link feedscope::feedscope
// (find_package(feedscope), or pkg-config feedscope).
//
//   feedscope::Session fs({.report_dir = "my-report", .warmup = 5});
//   for (auto& batch : fs.wrap(*data_loader)) {       // `wait`: the loop blocked on its loader
//     auto step = fs.step(batch.data.size(0));        // `step`, and the samples it trained on
//     ... forward, backward, optimizer ...
//   }
//   // ~Session (or fs.finish()) writes report.json, report.html, trace.json, timeseries.csv
//
// Host-side `step` time is what the loop spent in the scope: on a GPU, with asynchronous kernel
// launches, it covers the device's work only where the loop synchronizes (reading the loss, a
// .item(), a full launch queue). The scope adds no device sync of its own; the CUPTI trace
// (trace_gpu) gives the GPU busy ratio either way.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <feedscope/loop.h>
#include <feedscope/version.h>

namespace feedscope {

// Threading contract: one training thread constructs the session and calls wrap/step/scope/
// finish; the span collector, the utilization sampler, the CUPTI buffers and the metrics
// endpoint run on threads of their own. Recording a span takes no lock and allocates nothing.
class Session {
 public:
  using Clock = std::int64_t (*)() noexcept;

  // Every member has an initializer, so designated initializers that name a few of them
  // compile cleanly under -Wextra (GCC's -Wmissing-field-initializers).
  struct Options {
    std::string report_dir = "feedscope-report";
    std::int64_t warmup = 0;    // loop iterations left out of the measured window
    // HOST:PORT of a Prometheus endpoint (port 0: any); empty: none. In a rank of a job the
    // port gains its local rank (LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK,
    // MPI_LOCALRANKID), or `{local_rank}` in the address is replaced by it (docs/distributed.md).
    std::string metrics_addr{};
    // `rank` label on every series when >= 0. Left at -1 in a rank of a job of 2 or more ranks (its
    // launcher's variables in the environment: torch.distributed's, Open MPI's, PMI's, Slurm's),
    // it is that rank, and report_dir gains /rank-N.
    int rank = -1;
    std::string host{};          // `host` label; empty: this machine's hostname
    double sample_hz = 10;      // utilization sampling (timeseries.csv); 0: off
    // timeseries.csv's size limit: past it the rows thin to every other one; 0: no limit.
    std::int64_t timeseries_max_mib = 64;
    // The user's loader, for the diagnosis and report.json's config (set_loader_settings() tells
    // them after construction). Unset optionals are written as null: not known.
    std::int64_t batch_size = 0;  // 0: from the step scopes' samples
    int num_workers = 0;          // 0: the loop loads in its own thread
    std::optional<bool> pin_memory{};       // known on: no advice to pin
    std::optional<int> prefetch_factor{};   // batches each worker loads ahead
    std::optional<bool> persistent_workers{};
    std::string device{};  // what the step runs on ("cpu", "cuda:0"); empty: a GPU trace with
                         // kernels means the GPU, otherwise the CPU
    bool print = true;      // the console report (verdict first) on stderr at finish()
    bool trace_gpu = true;  // CUPTI activity trace, where the build and the machine allow it
    // How the GPU is traced, as `feedscope watch --gpu-trace` and `--gpu-trace-lead` say:
    // "whole", or "W/P", the device's records W seconds of every P after the first
    // gpu_trace_lead seconds from the first kernel (they are most of what tracing costs a
    // launch-bound loop); the report scales the windows to the whole and says so.
    std::string gpu_trace = "1/10";
    double gpu_trace_lead = 5;
    // Stage spans trace.json keeps: the first half and the latest half; the rest are counted.
    std::int64_t trace_max_spans = 1'000'000;
    Clock clock = nullptr;  // the spans' clock; null: CLOCK_MONOTONIC (tests pass their own)
  };

  // The loader's settings as a wrapper reads them from the loader itself (the Python client's
  // wrap() from a torch DataLoader); each one set replaces the option of that name.
  struct LoaderSettings {
    std::optional<std::int64_t> batch_size{};
    std::optional<int> num_workers{};
    std::optional<bool> pin_memory{};
    std::optional<int> prefetch_factor{};
    std::optional<bool> persistent_workers{};
  };

  using StepScope = feedscope::StepScope;
  using StageScope = feedscope::StageScope;

  // What finish() found, in short; report.json (under report_dir) has it all.
  struct Summary {
    std::string bottleneck;  // storage_io, cpu_preprocess, host_to_device, gpu_compute, ...
    std::string verdict;     // the sentence a person reads first
    std::optional<double> data_stall_ratio{};  // wait / wall; null: not measured
    std::optional<double> samples_per_s{};     // null: not measured
    std::string report_dir;                    // where the reports were written
  };

  // Starts the endpoint, the sampler and the GPU trace; creates report_dir. Throws
  // std::invalid_argument for a bad option (a metrics port that the local rank takes past 65535
  // among them), std::runtime_error for an endpoint that cannot bind or a report directory that
  // cannot be created.
  Session();
  explicit Session(Options options);
  // finish(), if not done yet; an error writing the reports is logged to stderr, not thrown.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // `for (auto& batch : fs.wrap(loader))`: every fetch timed as `wait`. Any range whose
  // iterator is at least an input iterator: torch::data::DataLoader (dereference with `*`
  // when it is a unique_ptr), feedscope::Loader, a std::vector, a view.
  template <typename Range>
  WrappedRange<Range> wrap(Range&& range) {
    return WrappedRange<Range>(events_, std::forward<Range>(range));
  }
  // Times the scope as the loop's step, counting `samples`. Move-only; ends on destruction.
  StepScope step(std::int64_t samples = 0) noexcept { return StepScope(events_, samples); }
  // Times a user-named stage ("augment", "loss"): custom_stages in report.json. Throws
  // std::invalid_argument for an empty name or one of the 7 fixed stage names.
  StageScope scope(std::string_view name);

  // Tells the session its loader's settings after construction, for the diagnosis (live and final)
  // and report.json's config; those unset stay as they were. Throws std::invalid_argument naming a
  // bad value (a negative num_workers, a prefetch_factor under 1), std::logic_error once finished.
  // Called by the training thread, as wrap() is.
  void set_loader_settings(const LoaderSettings& settings);

  // Stops tracing, assembles the report and its diagnosis, writes the four files and prints the
  // verdict. Idempotent: later calls return the same summary. Throws std::runtime_error naming a
  // file that cannot be written. The metrics endpoint keeps serving until destruction.
  const Summary& finish();
  bool finished() const noexcept;

  // "127.0.0.1:9464", the bound address (the real port when 0 was asked for); empty without one.
  std::string metrics_address() const;
  // Where the reports go: report_dir, with /rank-N for a rank of a distributed job.
  std::string report_dir() const;

 private:
  friend struct SessionAccess;  // feedscope's own clients: the Python client, feedscope::Loader
  struct Impl;
  std::unique_ptr<Impl> impl_;
  LoopEvents* events_;  // the profiler, owned by impl_; here so wrap() needs no Impl
};

}  // namespace feedscope
