#pragma once
// CUPTI's Activity API turned into GpuActivity: the buffer callbacks, the clock offset, the
// conversion of CUPTI's records and the memory cap, as libkineto's CuptiActivityApi does them.
// Shared by the in-process source (cupti_activity_source.cc) and the injection library
// (inject/feedscope_inject.cc). For the .cc files of a CUDA build only: it includes <cupti.h>.
#include <cupti.h>

#include <cstdint>
#include <string>

#include "profiler/gpu_activity.h"

namespace feedscope::detail {

// CUPTI delivers records to one process-wide pair of callbacks, so the records they gather are
// process-wide too; one owner at a time starts and stops them (the caller sees to that). Every
// function is thread-safe: CUPTI's buffer thread, a FlushAll caller and the owner may run at once.

// CUPTI's name for `result`, with what it means for tracing where that needs saying.
std::string cupti_result_text(CUptiResult result);

// Checks that no other CUPTI client is subscribed (torch.profiler, Nsight: their records are
// theirs), registers the buffer callbacks, has CUPTI take its times from now_ns() (or else samples
// the offset between the clocks) and enables the traced kinds (kernels, memcpy, memset,
// synchronization, runtime API). Empty on success; otherwise "CUPTI: <call>: <result>", with the
// kinds it enabled disabled again.
std::string start_cupti_recording();

// How the records' times reach now_ns() since the last start: "CLOCK_MONOTONIC
// (cuptiActivityRegisterTimestampCallback)", or the offset and why. Empty before a start.
std::string cupti_clock();

// Disables the traced kinds and force-flushes, so take_cupti_records() then sees every record.
// Empty, or the first call that failed, as start's.
std::string stop_cupti_recording();

// cuptiActivityFlushAll: default (complete buffers only) or forced (every buffer). Empty, or why.
std::string flush_cupti_records(bool forced);

// Moves out every record delivered since the last take, with the dropped and not-kept counts.
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
