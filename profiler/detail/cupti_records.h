#pragma once
// CUPTI's Activity API turned into GpuActivity: the buffer callbacks, the clock offset, the
// conversion of CUPTI's records and the memory cap, as libkineto's CuptiActivityApi does them.
// Shared by the in-process source (cupti_activity_source.cc) and the injection library
// (inject/feedscope_inject.cc). For the .cc files of a CUDA build only: it includes <cupti.h>.
#include <cupti.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/detail/cupti_api.h"
#include "profiler/gpu_activity.h"

namespace feedscope::detail {

// CUPTI delivers records to one process-wide pair of callbacks, so the records they gather are
// process-wide too; one owner at a time starts and stops them (the caller sees to that). Every
// function is thread-safe: CUPTI's buffer thread, a FlushAll caller and the owner may run at once.

// CUPTI's name for `result`, with what it means for tracing where that needs saying.
std::string cupti_result_text(CUptiResult result);

// The callback ids of `domain` (CUPTI_CB_DOMAIN_RUNTIME_API or _DRIVER_API) whose CUPTI names
// (cuptiGetCallbackName: "cudaLaunchKernel_ptsz_v7000") `wanted` accepts: every id below `size`,
// the header's count, and past it while the library names them (a newer CUPTI's new calls).
std::vector<std::uint32_t> callback_ids(const CuptiApi& api, CUpti_CallbackDomain domain,
                                        std::uint32_t size, bool (*wanted)(std::string_view));

// What enable_tracing enabled, so that disable_tracing undoes exactly that.
struct CuptiEnabled {
  std::vector<CUpti_ActivityKind> kinds;
  std::vector<std::uint32_t> runtime_callbacks;  // cuptiActivityEnableRuntimeApi(cbid, 1)
  std::vector<std::uint32_t> driver_callbacks;   // cuptiActivityEnableDriverApi(cbid, 1)
  bool all_sync_records_off = false;             // cuptiActivityEnableAllSyncRecords(0)
  TracingMode mode;                              // the same, in the report's words
};

// Enables through `api` what the summary reads: kernels, memcpy, memset and synchronization
// records; of the runtime API only the calls cuda_api_names.h's is_traced_runtime_callback names
// (cuptiActivityEnableRuntimeApi per callback id; where the library lacks it or refuses, the whole
// RUNTIME kind, said in mode.note); the driver's launches (cuptiActivityEnableDriverApi; where
// that is missing, none: their kernels still count as launches); and no synchronization record for
// a query that found the work unfinished (cuptiActivityEnableAllSyncRecords(0)). Empty on success;
// otherwise "CUPTI: <call>: <result>", with nothing left enabled.
// What to trace beyond the device's own records. The injection library (watch) selects the runtime
// calls one by one; in a process whose CUDA runtime is already running (`run`, a wrapped loop),
// CUPTI 13 took the per-call switch and recorded none of them (seen on an H200, 2026-11-27), so
// there the whole RUNTIME kind is traced, and the driver's launches are not (their kernels still
// count as launches). Neither enables the SYNCHRONIZATION kind unless no runtime call is traced:
// the runtime's blocking sync calls carry the host's waits, and that kind alone cost a launch-bound
// loop 14 points of its speed under watch (0.75x against 0.89x, H200).
struct TracingRequest {
  TracingMode::Calls runtime = TracingMode::Calls::selected;  // selected, all or none
  bool driver_launches = true;
  bool syncs = true;  // the SYNCHRONIZATION kind
  std::string why;    // why not the default plan, for the tracing mode's note
  // Whole, or the device's kinds only in windows (follow_trace_sampling switches them).
  TraceSampling sampling;
  std::string sampling_why;  // a sampling asked for and not taken, for the note
};
// The request for a source (`in_process`: the CUPTI activity source; else the injection),
// overridden by FEEDSCOPE_CUPTI_RUNTIME (selected, all, none), FEEDSCOPE_CUPTI_DRIVER (0, 1) and
// FEEDSCOPE_CUPTI_SYNC (0, 1): what the device check uses to split tracing's cost by part. The
// injection samples as FEEDSCOPE_GPU_TRACE_SAMPLE ("whole", "1/10") and FEEDSCOPE_GPU_TRACE_LEAD
// (seconds) say, which `watch` sets; whole where they are absent. An in-process source samples as
// its options say (cupti_activity_source.h), not as the environment does.
TracingRequest tracing_request(bool in_process);

std::string enable_tracing(const CuptiApi& api, CuptiEnabled& out,
                           const TracingRequest& request = {});
// Disables what enable_tracing enabled and restores CUPTI's default of a record for every query.
// Empty, or the first call that failed.
std::string disable_tracing(const CuptiApi& api, const CuptiEnabled& enabled);

// Under sampled tracing, turns the kinds enable_tracing enabled (`enabled.kinds`: the device's,
// and the RUNTIME kind where it is traced whole) on or off. Per-call selections stay armed: a
// CUPTI 13 recorded none of a selection armed while CUDA ran (H200, 2026-11-27), whereas kinds are
// what torch.profiler's schedule turns on and off in a running program; so a sampled request
// traces the runtime as its whole kind (tracing_request), unless an override selects. Empty,
// or the first call that failed (the kinds are then left as they were asked to be, where they
// could).
std::string switch_sampled_kinds(const CuptiApi& api, const CuptiEnabled& enabled, bool on);

// The recorder's timer under sampled tracing: opens or closes the window that the schedule
// (traced_at) says for `now`, and logs it for take_cupti_records. Nothing under whole tracing or
// before a start. Call it a few times a second. Empty, or why a switch failed.
std::string follow_trace_sampling(std::int64_t now);
// Whether a sampled window is open now (under whole tracing: whether recording runs at all).
bool trace_window_open();
// When follow_trace_sampling next has something to do after `now`: the largest time under whole
// tracing or before a start.
std::int64_t next_trace_sampling_change(std::int64_t now);

// Checks that no other CUPTI client is subscribed (torch.profiler, Nsight: their records are
// theirs), registers the buffer callbacks, has CUPTI take its times from now_ns() (or else samples
// the offset between the clocks) and enables what enable_tracing enables. Empty on success;
// otherwise "CUPTI: <call>: <result>", with what it enabled disabled again.
std::string start_cupti_recording(const TracingRequest& request);

// How the records since the last start were traced; none before a start.
std::optional<TracingMode> cupti_tracing();

// How the records' times reach now_ns() since the last start: "CLOCK_MONOTONIC
// (cuptiActivityRegisterTimestampCallback)", or the offset and why. Empty before a start.
std::string cupti_clock();

// Disables what the start enabled and force-flushes, so take_cupti_records() then sees every record.
// Empty, or the first call that failed, as start's.
std::string stop_cupti_recording();

// cuptiActivityFlushAll: default (complete buffers only) or forced (every buffer). Empty, or why.
std::string flush_cupti_records(bool forced);

// Moves out every record delivered since the last take, with the dropped and not-kept counts;
// under sampled tracing with the windows' time since the last take (the open one up to now), and
// without the host calls and sync records that started between windows (counted).
GpuActivity take_cupti_records();

// How often CUPTI handed our callbacks a buffer, and how many device records (the answer to
// probe_cupti_callbacks) came in them: a client that registers its own callbacks later stops both.
// A buffer that ended at an incomplete record may have held a device record behind it. A foreign
// buffer is another client's that CUPTI completed to our callbacks, left alone: that client
// registered its callbacks before ours and misses those records.
struct CuptiCallbackCounts {
  std::uint64_t buffers_completed = 0;
  std::uint64_t device_records = 0;
  std::uint64_t incomplete_buffers = 0;
  std::uint64_t foreign_buffers = 0;
};
CuptiCallbackCounts cupti_callback_counts();

// Asks CUPTI to emit one device record per GPU now (cuptiActivityEnableAndDump of the DEVICE kind),
// delivered with the next flush to whichever client holds the callbacks. Empty, or why not.
std::string probe_cupti_callbacks();

}  // namespace feedscope::detail
