#pragma once
// GPU activity records as plain structs, so the trace analysis, the diagnosis and the exporters
// never see CUDA or CUPTI types and tests can fabricate records. Every timestamp is in the clock
// of loader/span_recorder.h's now_ns() (steady_clock nanoseconds): a source converts on its side.
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace feedscope {

// A kernel's or runtime call's name, stored once per process and shared by every record that
// carries it: a launch-bound run repeats a few hundred names, 150-300 bytes each demangled,
// millions of times, and a record then costs its fixed size alone. Making one from text looks the
// text up under a lock; copying one copies a pointer. The stored names are never freed (a process
// meets few distinct ones). Thread-safe.
class InternedName {
 public:
  InternedName();  // ""
  // Implicit, so that records are written with plain strings.
  InternedName(std::string_view name);
  InternedName(const char* name) : InternedName(std::string_view(name)) {}
  InternedName(const std::string& name) : InternedName(std::string_view(name)) {}

  const std::string& str() const { return *name_; }
  operator const std::string&() const { return *name_; }
  operator std::string_view() const { return *name_; }
  friend bool operator==(const InternedName& a, std::string_view b) { return *a.name_ == b; }

 private:
  const std::string* name_;  // into the process's name store, never null
};

std::ostream& operator<<(std::ostream& out, const InternedName& name);

enum class MemcpyKind : std::uint8_t { h2d, d2h, d2d, other };
enum class MemoryKind : std::uint8_t { pageable, pinned, device, other };
// stream_wait_event orders two streams on the device; the host does not block on it.
enum class SyncType : std::uint8_t { event, stream, context, stream_wait_event, other };
// Which CUDA API a host call belongs to: the runtime (cudaLaunchKernel) or the driver
// (cuLaunchKernel: Triton's launches under torch.compile, cuGraphLaunch).
enum class ApiDomain : std::uint8_t { runtime, driver };

struct KernelRecord {
  InternedName name;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::uint32_t correlation_id = 0;
  // The CUDA graph whose replay launched it (CUPTI's graphId); 0: launched on its own.
  std::uint32_t graph_id = 0;
};

struct MemcpyRecord {
  MemcpyKind kind = MemcpyKind::other;
  MemoryKind src = MemoryKind::other;
  std::uint64_t bytes = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::uint32_t correlation_id = 0;
  MemoryKind dst = MemoryKind::other;  // where the copy wrote (pinned for a D2H into a slab)
};

struct MemsetRecord {
  std::uint64_t bytes = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::uint32_t correlation_id = 0;
};

struct SyncRecord {
  SyncType type = SyncType::other;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t stream = 0;
  std::uint32_t correlation_id = 0;  // of the runtime call that waited, when there was one
};

struct RuntimeApiRecord {
  InternedName name;  // "cudaLaunchKernel", without CUPTI's "_v7000" version suffix
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t thread_id = 0;
  std::uint32_t correlation_id = 0;
  ApiDomain domain = ApiDomain::runtime;  // a driver call's name is the driver's: "cuLaunchKernel"
};

// [begin_ns, end_ns) of now_ns() time: a stretch in which a sampled trace took the device's records
// (GpuActivity::traced_windows), or a training step (gpu_trace.h's StepWindow).
struct TimeWindow {
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  friend bool operator==(const TimeWindow&, const TimeWindow&) = default;
};

// When the device's records are taken (profiler/trace_sampling.h). Whole (period 0): always. Else
// until the process's first kernel and lead_ns from it, then window_ns of every period_ns, the
// windows aligned to the clock (now_ns() % period_ns < window_ns), so that the processes of one
// program trace the same stretches: 1 s in every 10 after the first 5 s is watch's default.
struct TraceSampling {
  std::int64_t window_ns = 0;
  std::int64_t period_ns = 0;  // 0: whole
  std::int64_t lead_ns = 0;
  bool sampled() const { return period_ns > 0; }
  friend bool operator==(const TraceSampling&, const TraceSampling&) = default;
};

// How the source told CUPTI to trace, so a summary says what its counts can hold: a launch or sync
// made through a call that was not traced is absent from them.
struct TracingMode {
  enum class Calls : std::uint8_t {
    selected,  // only the calls the summary reads (cuda_api_names.h), enabled one by one
    all,       // every call of the API (a CUPTI without the per-call switch)
    none,      // none: the source could not select them
  };
  Calls runtime_calls = Calls::all;
  std::uint32_t runtime_callbacks = 0;  // CUPTI callback ids enabled, when selected
  Calls driver_calls = Calls::none;     // selected: the driver's launches (cuLaunchKernel, ...)
  std::uint32_t driver_callbacks = 0;
  // CUPTI writes no record for a cudaEventQuery or cudaStreamQuery that found the work unfinished
  // (cuptiActivityEnableAllSyncRecords(0)); false: a record for every query.
  bool completed_syncs_only = false;
  // False: no synchronization record at all. Where the runtime's calls are traced, their blocking
  // syncs (cudaStreamSynchronize, ...) carry the host's waits, and the SYNCHRONIZATION kind cost a
  // launch-bound loop 14 points of its speed under watch (H200, 2026-11-27): off by default there.
  bool sync_records = true;
  std::string note;  // why a part fell back from the plan; empty when none did
  // Whole, or the device's records only in windows (GpuActivity::traced_windows); the host calls
  // are traced throughout but kept only inside the windows.
  TraceSampling sampling;

  friend bool operator==(const TracingMode&, const TracingMode&) = default;
};

const char* to_string(TracingMode::Calls calls);

struct GpuActivity {
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> memcpys;
  std::vector<MemsetRecord> memsets;
  std::vector<SyncRecord> syncs;
  std::vector<RuntimeApiRecord> runtime;
  std::uint64_t dropped = 0;  // records the source lost (full buffers), never seen here
  // Records the source counted but did not keep, past its memory cap; every record that
  // started before kept_until_ns is kept.
  std::uint64_t not_kept = 0;
  std::int64_t kept_until_ns = std::numeric_limits<std::int64_t>::max();
  // Records the source left out because their times mean nothing: a start or end of 0 (CUPTI's
  // "could not be collected") or an end before the start.
  std::uint64_t bad_timestamps = 0;
  // Source buffers whose records ended early at an incomplete one (CUPTI_ERROR_INVALID_KIND after
  // a forced flush): that record and any behind it in the buffer are lost, so at least this many.
  std::uint64_t incomplete_buffers = 0;
  // How the records were traced; none where the source does not say (fabricated records).
  std::optional<TracingMode> tracing;
  // Under sampled tracing (tracing->sampling), the stretches that were traced, in time order;
  // records outside them are absent, not idle. Empty under whole tracing.
  std::vector<TimeWindow> traced_windows;
  // Host calls and sync records the source left out for starting between two windows.
  std::uint64_t outside_windows = 0;

  bool empty() const {
    return kernels.empty() && memcpys.empty() && memsets.empty() && syncs.empty() &&
           runtime.empty();
  }
  bool sampled() const { return tracing && tracing->sampling.sampled(); }
  std::size_t records() const {
    return kernels.size() + memcpys.size() + memsets.size() + syncs.size() + runtime.size();
  }
  // Moves every record of `more` to the end of this one; `tracing` stays this one's where set
  // (several processes of a watched program, all traced by the same library). The traced windows
  // are the same process's later ones: touching windows join. Several processes' windows are
  // combined by traced_by_every_process (profiler/trace_sampling.h), not by this.
  void append(GpuActivity&& more);
};

// A collective's kernel, by its name: NCCL's (ncclKernel_AllReduce_..., ncclDevKernel_...).
bool is_collective_kernel(std::string_view name);

const char* to_string(MemcpyKind kind);
const char* to_string(MemoryKind kind);
const char* to_string(SyncType type);

}  // namespace feedscope
