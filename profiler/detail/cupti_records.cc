#include "profiler/detail/cupti_records.h"

#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "loader/span_recorder.h"
#include "profiler/cuda_api_names.h"
#include "profiler/detail/cupti_api.h"
#include "profiler/trace_sampling.h"

namespace feedscope::detail {

namespace {

// CUPTI suggests buffers of 1-10 MB. The cap bounds what a stalled consumer can pin down: past
// it CUPTI gets no buffer, drops records and counts them.
constexpr std::size_t kBufferBytes = 8u << 20;
constexpr std::size_t kBufferAlign = 8;
constexpr int kMaxBuffers = 32;
// What the parsed records may take until taken: a training loop launches thousands of kernels
// a second for days. Past it, records are counted and dropped, so the summary covers the run up to
// the first one left out. Names are stored once per process (InternedName), so every record has a
// small fixed size and the cap counts records: 64 MiB of them at the largest record's size, about
// 1.4 million (some 10 s of a launch-bound run at 50,000 kernels a second, with their launches).
constexpr std::size_t kMaxRecordBytes = 48;
static_assert(sizeof(KernelRecord) <= kMaxRecordBytes && sizeof(MemcpyRecord) <= kMaxRecordBytes &&
              sizeof(MemsetRecord) <= kMaxRecordBytes && sizeof(SyncRecord) <= kMaxRecordBytes &&
              sizeof(RuntimeApiRecord) <= kMaxRecordBytes);
constexpr std::size_t kMaxStoreRecords = (std::size_t{64} << 20) / kMaxRecordBytes;

// The device's kinds, enabled whole. Host calls are enabled one callback id at a time
// (enable_tracing), the RUNTIME kind whole only where CUPTI cannot select.
constexpr std::array<CUpti_ActivityKind, 4> kDeviceKinds = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};
// Past the header's count of callback ids, how far callback_ids looks for a newer CUPTI's.
constexpr std::uint32_t kCallbackIdsPastHeader = 512;

const char* kind_name(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "MEMSET";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return "SYNCHRONIZATION";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_DRIVER: return "DRIVER";
    default: return "?";
  }
}

struct TextHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// CUPTI's callbacks carry no user pointer, so what they reach is process-wide. Leaked on purpose:
// CUPTI may deliver a last buffer while static destructors run.
struct Shared {
  // Below state is shared with CUPTI's buffer thread (and with a thread inside FlushAll).
  std::mutex mutex;
  GpuActivity store;                                          // guarded by mutex
  std::size_t store_records = 0;                              // guarded by mutex
  // By (domain << 32 | callback id); guarded by mutex.
  std::unordered_map<std::uint64_t, InternedName> api_names;
  // CUPTI's mangled kernel name to the demangled one, looked up without a copy per record;
  // guarded by mutex.
  std::unordered_map<std::string, InternedName, TextHash, std::equal_to<>> demangled;
  std::atomic<int> buffers_out{0};
  // The buffers we handed CUPTI, the only ones to parse and free: a client that registered its
  // callbacks before ours (torch.profiler's kineto) may have buffers in flight, which CUPTI then
  // completes to us. A slot is free (null) for every buffer not out.
  std::array<std::atomic<std::uint8_t*>, kMaxBuffers> ours{};
  // now_ns() - cuptiGetTimestamp(); 0 where CUPTI takes its times from now_ns() itself.
  std::atomic<std::int64_t> offset_ns{0};
  std::string clock;  // guarded by mutex; how the records' times reach now_ns()
  // What the last start enabled; guarded by mutex.
  std::optional<CuptiEnabled> enabled;
  // Sampled tracing: when the lead began (the first kernel's start; none yet: the largest time),
  // and the windows since the start; guarded by mutex.
  std::int64_t lead_from_ns = std::numeric_limits<std::int64_t>::max();
  TracedWindowLog windows;
  std::atomic<std::uint64_t> buffers_completed{0};
  std::atomic<std::uint64_t> device_records{0};
  std::atomic<std::uint64_t> incomplete_buffers{0};
  std::atomic<std::uint64_t> foreign_buffers{0};
};

Shared& shared() {
  static Shared* s = new Shared;
  return *s;
}

std::int64_t to_now_ns(std::uint64_t cupti_ns, std::int64_t offset) {
  return static_cast<std::int64_t>(cupti_ns) + offset;
}

// Caller holds shared().mutex. `domain`: CUPTI_CB_DOMAIN_RUNTIME_API or _DRIVER_API.
InternedName api_name(Shared& s, CUpti_CallbackDomain domain, std::uint32_t cbid) {
  const std::uint64_t key = static_cast<std::uint64_t>(domain) << 32 | cbid;
  auto it = s.api_names.find(key);
  if (it != s.api_names.end()) return it->second;
  const char* raw = nullptr;
  std::string name;
  if (cupti().api.cuptiGetCallbackName(domain, cbid, &raw) == CUPTI_SUCCESS && raw) {
    // "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": the version is not part of the API's name.
    name = strip_cupti_version(raw);
  } else {
    name = (domain == CUPTI_CB_DOMAIN_DRIVER_API ? "driver api " : "runtime api ") +
           std::to_string(cbid);
  }
  return s.api_names.emplace(key, std::move(name)).first->second;
}

// Caller holds shared().mutex. Kernel names come mangled; the trace is read by people.
InternedName kernel_name(Shared& s, const char* raw) {
  const char* mangled = raw ? raw : "unknown kernel";
  auto it = s.demangled.find(std::string_view(mangled));
  if (it != s.demangled.end()) return it->second;
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  const InternedName name = status == 0 && d ? InternedName(d) : InternedName(mangled);
  std::free(d);
  return s.demangled.emplace(mangled, name).first->second;
}

MemcpyKind memcpy_kind(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return MemcpyKind::h2d;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return MemcpyKind::d2h;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return MemcpyKind::d2d;
    default: return MemcpyKind::other;
  }
}

MemoryKind memory_kind(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return MemoryKind::pageable;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return MemoryKind::pinned;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return MemoryKind::device;
    default: return MemoryKind::other;
  }
}

SyncType sync_type(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return SyncType::event;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return SyncType::stream_wait_event;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return SyncType::stream;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return SyncType::context;
    default: return SyncType::other;
  }
}

// False, and counted, for times that mean nothing: CUPTI writes 0 for a time it could not collect
// (a kernel's when device memory runs short; an API call's, a copy's or a sync's in some cases),
// and a 0 converted to now_ns() lands some 1.7e18 ns before the run.
bool timed(std::uint64_t start, std::uint64_t end, GpuActivity& out) {
  if (start != 0 && end != 0 && end >= start) return true;
  ++out.bad_timestamps;
  return false;
}

// Record layouts are those the CUDA 13 headers name for each enabled kind.
void parse(Shared& s, std::uint8_t* buffer, std::size_t valid, GpuActivity& out) {
  const std::int64_t off = s.offset_ns.load(std::memory_order_relaxed);
  const auto next_record = cupti().api.cuptiActivityGetNextRecord;
  CUpti_Activity* record = nullptr;
  CUptiResult status = CUPTI_SUCCESS;
  while ((status = next_record(buffer, valid, &record)) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        if (!timed(k->start, k->end, out)) break;
        out.kernels.push_back({kernel_name(s, k->name), to_now_ns(k->start, off),
                               to_now_ns(k->end, off), k->deviceId, k->streamId,
                               k->correlationId, k->graphId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        if (!timed(m->start, m->end, out)) break;
        out.memcpys.push_back({memcpy_kind(m->copyKind), memory_kind(m->srcKind), m->bytes,
                               to_now_ns(m->start, off), to_now_ns(m->end, off), m->deviceId,
                               m->streamId, m->correlationId, memory_kind(m->dstKind)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        if (!timed(m->start, m->end, out)) break;
        out.memsets.push_back({m->bytes, to_now_ns(m->start, off), to_now_ns(m->end, off),
                               m->deviceId, m->streamId, m->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const auto* y = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
        if (!timed(y->start, y->end, out)) break;
        out.syncs.push_back({sync_type(y->type), to_now_ns(y->start, off),
                             to_now_ns(y->end, off), y->streamId, y->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        if (!timed(a->start, a->end, out)) break;
        const bool driver = record->kind == CUPTI_ACTIVITY_KIND_DRIVER;
        out.runtime.push_back(
            {api_name(s, driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid),
             to_now_ns(a->start, off), to_now_ns(a->end, off), a->threadId, a->correlationId,
             driver ? ApiDomain::driver : ApiDomain::runtime});
        break;
      }
      case CUPTI_ACTIVITY_KIND_DEVICE:
        s.device_records.fetch_add(1);
        break;
      default:
        break;
    }
  }
  // MAX_LIMIT_REACHED is the buffer's end. Anything else (INVALID_KIND: an incomplete record, which
  // a forced flush hands over) ends the walk with the rest of the buffer unread.
  if (status != CUPTI_ERROR_MAX_LIMIT_REACHED) {
    ++out.incomplete_buffers;
    s.incomplete_buffers.fetch_add(1);
  }
}

// Caller holds shared().mutex. Moves `from` into `to` while the store stays under its cap.
template <typename Record>
void keep_under_cap(Shared& s, std::vector<Record>& from, std::vector<Record>& to) {
  for (Record& r : from) {
    if (s.store_records >= kMaxStoreRecords) {
      ++s.store.not_kept;
      s.store.kept_until_ns = std::min(s.store.kept_until_ns, r.start_ns);
      continue;
    }
    ++s.store_records;
    to.push_back(std::move(r));
  }
}

// Caller holds shared().mutex. Host records that started between two windows: a window's
// launches and syncs are kept whole, the rest would fill the store at the launch rate.
template <typename Record>
void drop_outside_windows(Shared& s, std::vector<Record>& records) {
  const auto outside = [&s](const Record& r) { return !s.windows.covers(r.start_ns); };
  const auto from = std::remove_if(records.begin(), records.end(), outside);
  s.store.outside_windows += static_cast<std::uint64_t>(records.end() - from);
  records.erase(from, records.end());
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size,
                               std::size_t* max_records) {
  Shared& s = shared();
  *max_records = 0;  // as many as fit
  *buffer = nullptr;
  *size = 0;
  if (s.buffers_out.fetch_add(1) >= kMaxBuffers) {
    s.buffers_out.fetch_sub(1);
    return;
  }
  auto* p = static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  if (p == nullptr) {
    s.buffers_out.fetch_sub(1);
    return;
  }
  // A slot is free: at most kMaxBuffers are out, and a completed one leaves its slot first.
  for (std::atomic<std::uint8_t*>& slot : s.ours) {
    std::uint8_t* none = nullptr;
    if (slot.compare_exchange_strong(none, p)) break;
  }
  *buffer = p;
  *size = kBufferBytes;
}

// True, and its slot freed, when `buffer` is one buffer_requested handed out.
bool release_ours(Shared& s, std::uint8_t* buffer) {
  for (std::atomic<std::uint8_t*>& slot : s.ours) {
    std::uint8_t* expected = buffer;
    if (slot.compare_exchange_strong(expected, nullptr)) return true;
  }
  return false;
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                               std::size_t /*size*/, std::size_t valid) {
  if (buffer == nullptr) return;
  Shared& s = shared();
  if (!release_ours(s, buffer)) {
    // Its owner's: freeing it would corrupt that client's heap, parsing it would race its
    // teardown. It stays allocated, as kineto leaves a buffer it does not know.
    s.foreign_buffers.fetch_add(1);
    return;
  }
  s.buffers_completed.fetch_add(1);
  // An exception must not unwind into CUPTI's C frames; losing a buffer beats losing the run.
  try {
    std::lock_guard lock(s.mutex);
    GpuActivity parsed;
    parse(s, buffer, valid, parsed);
    std::size_t dropped = 0;
    if (cupti().api.cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS)
      s.store.dropped += dropped;
    s.store.bad_timestamps += parsed.bad_timestamps;
    s.store.incomplete_buffers += parsed.incomplete_buffers;
    if (s.enabled && s.enabled->mode.sampling.sampled()) {
      drop_outside_windows(s, parsed.syncs);
      drop_outside_windows(s, parsed.runtime);
      // The lead counts from the first kernel: a program that initializes CUDA early (torch's
      // is_available()) and indexes its data for a minute still has its first steps traced whole.
      for (const KernelRecord& k : parsed.kernels) s.lead_from_ns = std::min(s.lead_from_ns, k.start_ns);
    }
    keep_under_cap(s, parsed.kernels, s.store.kernels);
    keep_under_cap(s, parsed.memcpys, s.store.memcpys);
    keep_under_cap(s, parsed.memsets, s.store.memsets);
    keep_under_cap(s, parsed.syncs, s.store.syncs);
    keep_under_cap(s, parsed.runtime, s.store.runtime);
  } catch (...) {
  }
  std::free(buffer);
  s.buffers_out.fetch_sub(1);
}

// "CUPTI: <what>: <result>" for a failed call, empty for success.
std::string failure(CUptiResult result, const std::string& what) {
  if (result == CUPTI_SUCCESS) return "";
  return "CUPTI: " + what + ": " + cupti_result_text(result);
}

// CUPTI calls it for every time it records once registered, on its own threads for device records
// and inside the program's CUDA calls for API records: it costs what now_ns() costs.
std::uint64_t CUPTIAPI monotonic_timestamp() { return static_cast<std::uint64_t>(now_ns()); }

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// Why not to start where another CUPTI client is subscribed (one subscriber per process): our
// callbacks registered after its own would take its buffers, and its records with them. Where no
// one is, the subscription is given back at once, so a client that comes later (torch.profiler
// started mid-run) still gets it. Empty to go on, also where CUPTI lacks cuptiSubscribe or it fails
// otherwise: the activity calls then say what is wrong.
std::string other_subscriber(const CuptiApi& api) {
  if (api.cuptiSubscribe == nullptr || api.cuptiUnsubscribe == nullptr) return "";
  CUpti_SubscriberHandle handle = nullptr;
  const CUptiResult r = api.cuptiSubscribe(&handle, ignore_callback, nullptr);
  if (r == CUPTI_SUCCESS) api.cuptiUnsubscribe(handle);
  if (r != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) return "";
  return failure(r, "cuptiSubscribe") + ": feedscope leaves CUPTI to it and traces nothing";
}

// Sets the clock the records are converted from; empty, or the failed call.
std::string set_up_clock(const CuptiApi& api, Shared& s) {
  // now_ns() itself in every record where CUPTI takes a timestamp callback: an offset taken once
  // would shift every later record against the host's spans after a step of CUPTI's own clock
  // (CLOCK_REALTIME). CUPTI reads the callback only for kinds enabled after it is registered.
  const CUptiResult r = api.cuptiActivityRegisterTimestampCallback
                            ? api.cuptiActivityRegisterTimestampCallback(monotonic_timestamp)
                            : CUPTI_ERROR_NOT_SUPPORTED;
  if (r == CUPTI_SUCCESS) {
    s.offset_ns.store(0);
    std::lock_guard lock(s.mutex);
    s.clock = "CLOCK_MONOTONIC (cuptiActivityRegisterTimestampCallback)";
    return "";
  }
  const std::string why = api.cuptiActivityRegisterTimestampCallback
                              ? cupti_result_text(r)
                              : std::string("not in this CUPTI");
  // Sample both clocks back to back and take the midpoint of now_ns() around the CUPTI read.
  std::uint64_t cupti_ns = 0;
  const std::int64_t before = now_ns();
  if (std::string failed = failure(api.cuptiGetTimestamp(&cupti_ns), "cuptiGetTimestamp");
      !failed.empty())
    return failed;
  const std::int64_t after = now_ns();
  s.offset_ns.store(before + (after - before) / 2 - static_cast<std::int64_t>(cupti_ns));
  std::lock_guard lock(s.mutex);
  s.clock = "CLOCK_REALTIME moved to CLOCK_MONOTONIC by one offset taken at the start, so a step "
            "of the system clock shifts later GPU records "
            "(cuptiActivityRegisterTimestampCallback: " + why + ")";
  return "";
}

}  // namespace

std::string cupti_result_text(CUptiResult result) {
  const char* raw = nullptr;
  const auto get_text = cupti().api.cuptiGetResultString;  // null where no CUPTI loaded (tests)
  std::string text = get_text && get_text(result, &raw) == CUPTI_SUCCESS && raw
                         ? raw
                         : "CUPTI error " + std::to_string(static_cast<int>(result));
  switch (result) {
    case CUPTI_ERROR_NOT_INITIALIZED:
      return text + " (CUPTI could not attach to the CUDA driver: no driver, or a CUPTI newer "
                    "than the driver)";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return text + " (another CUPTI client holds CUPTI: torch.profiler (kineto), Nsight "
                    "Systems, Nsight Compute, cuda-gdb, or another profiler inside the program)";
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return text + " (GPU tracing is not permitted for this user or VM)";
    default:
      return text;
  }
}

std::vector<std::uint32_t> callback_ids(const CuptiApi& api, CUpti_CallbackDomain domain,
                                        std::uint32_t size, bool (*wanted)(std::string_view)) {
  std::vector<std::uint32_t> ids;
  for (std::uint32_t cbid = 1; cbid < size + kCallbackIdsPastHeader; ++cbid) {
    const char* name = nullptr;
    const bool named = api.cuptiGetCallbackName(domain, cbid, &name) == CUPTI_SUCCESS && name;
    if (!named && cbid >= size) break;
    if (named && wanted(name)) ids.push_back(cbid);
  }
  return ids;
}

namespace {

using EnableApi = CUptiResult(CUPTIAPI*)(CUpti_CallbackId, std::uint8_t);

// Enables each of `ids` through `enable`; on a refusal disables those it enabled and says why.
std::string enable_each(EnableApi enable, const char* call, const std::vector<std::uint32_t>& ids,
                        std::vector<std::uint32_t>& enabled) {
  for (std::uint32_t cbid : ids) {
    if (const CUptiResult r = enable(cbid, 1); r != CUPTI_SUCCESS) {
      for (std::uint32_t done : enabled) enable(done, 0);
      enabled.clear();
      return std::string(call) + "(" + std::to_string(cbid) + "): " + cupti_result_text(r);
    }
    enabled.push_back(cbid);
  }
  return "";
}

void add_note(TracingMode& mode, const std::string& note) {
  mode.note += (mode.note.empty() ? "" : "; ") + note;
}

std::string enable_all_runtime_calls(const CuptiApi& api, CuptiEnabled& out, const std::string& why) {
  if (const CUptiResult r = api.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME); r != CUPTI_SUCCESS)
    return failure(r, "cuptiActivityEnable(RUNTIME)");
  out.kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
  out.mode.runtime_calls = TracingMode::Calls::all;
  if (!why.empty()) add_note(out.mode, "every runtime call traced: " + why);
  return "";
}

// The runtime calls the summary reads, one by one; else the whole kind, and why in the note.
std::string enable_runtime_calls(const CuptiApi& api, CuptiEnabled& out,
                                 const TracingRequest& request) {
  if (request.runtime == TracingMode::Calls::none) {
    out.mode.runtime_calls = TracingMode::Calls::none;
    add_note(out.mode, "no runtime call traced (FEEDSCOPE_CUPTI_RUNTIME=none)");
    return "";
  }
  if (request.runtime == TracingMode::Calls::all)
    return enable_all_runtime_calls(api, out, request.why);
  std::string why;
  if (api.cuptiActivityEnableRuntimeApi == nullptr) {
    why = "cuptiActivityEnableRuntimeApi is not in this CUPTI";
  } else {
    const std::vector<std::uint32_t> ids =
        callback_ids(api, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE,
                     is_traced_runtime_callback);
    if (ids.empty())
      why = "cuptiGetCallbackName named none of the runtime calls the summary reads";
    else
      why = enable_each(api.cuptiActivityEnableRuntimeApi, "cuptiActivityEnableRuntimeApi", ids,
                        out.runtime_callbacks);
  }
  if (why.empty()) {
    out.mode.runtime_calls = TracingMode::Calls::selected;
    out.mode.runtime_callbacks = static_cast<std::uint32_t>(out.runtime_callbacks.size());
    return "";
  }
  return enable_all_runtime_calls(api, out, why);
}

// The driver's launches (Triton's under torch.compile); else none, and why in the note.
void enable_driver_launches(const CuptiApi& api, CuptiEnabled& out) {
  std::string why;
  if (api.cuptiActivityEnableDriverApi == nullptr) {
    why = "cuptiActivityEnableDriverApi is not in this CUPTI";
  } else {
    const std::vector<std::uint32_t> ids =
        callback_ids(api, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE,
                     is_traced_driver_callback);
    if (ids.empty())
      why = "cuptiGetCallbackName named none of the driver's launch calls";
    else
      why = enable_each(api.cuptiActivityEnableDriverApi, "cuptiActivityEnableDriverApi", ids,
                        out.driver_callbacks);
  }
  if (why.empty()) {
    out.mode.driver_calls = TracingMode::Calls::selected;
    out.mode.driver_callbacks = static_cast<std::uint32_t>(out.driver_callbacks.size());
    return;
  }
  out.mode.driver_calls = TracingMode::Calls::none;
  add_note(out.mode, "the driver's launch calls not traced (their kernels count as launches): " +
                         why);
}

// FEEDSCOPE_GPU_TRACE_SAMPLE and FEEDSCOPE_GPU_TRACE_LEAD, as `watch` sets them.
void request_sampling(TracingRequest& request) {
  const char* spec = std::getenv("FEEDSCOPE_GPU_TRACE_SAMPLE");
  if (spec == nullptr || *spec == '\0') return;
  const char* lead_text = std::getenv("FEEDSCOPE_GPU_TRACE_LEAD");
  char* end = nullptr;
  const double lead = lead_text ? std::strtod(lead_text, &end) : 0;
  std::string why;
  if (lead_text != nullptr && (end == lead_text || *end != '\0')) {
    why = std::string("\"") + lead_text + "\" is not a number of seconds";
  } else if (const std::optional<TraceSampling> s = parse_trace_sampling(spec, lead, why)) {
    request.sampling = *s;
    return;
  }
  request.sampling_why = std::string("traced whole: FEEDSCOPE_GPU_TRACE_SAMPLE=") + spec +
                         ", FEEDSCOPE_GPU_TRACE_LEAD=" + (lead_text ? lead_text : "") + ": " + why;
}

}  // namespace

TracingRequest tracing_request(bool in_process) {
  TracingRequest request;
  if (!in_process) request_sampling(request);
  // The runtime as its whole kind and no driver call, where a per-call selection cannot serve: in
  // a process whose CUDA runs already, CUPTI 13 records none of one; sampled, one stays armed
  // between the windows, the kinds alone being switched, and costs what tracing whole does (the
  // launch-bound MLP under watch at 0.79x bare sampled so, 0.85x traced whole: H200, 2026-11-28).
  // The driver's launches' kernels then count as launches. The overrides below still stand.
  if (in_process || request.sampling.sampled()) {
    request.runtime = TracingMode::Calls::all;
    request.driver_launches = false;
    request.why = in_process ? "in a process whose CUDA runs already, CUPTI records none of a "
                               "per-call selection"
                             : "sampled: a per-call selection cannot be switched off between the "
                               "windows";
  }
  // The runtime's blocking sync calls carry the host's waits; the SYNCHRONIZATION kind costs more
  // than every traced call together (14 points of a launch-bound loop's speed, H200).
  request.syncs = false;
  if (const char* v = std::getenv("FEEDSCOPE_CUPTI_RUNTIME"); v != nullptr) {
    const std::string_view text(v);
    if (text == "selected") request.runtime = TracingMode::Calls::selected;
    else if (text == "all") request.runtime = TracingMode::Calls::all;
    else if (text == "none") request.runtime = TracingMode::Calls::none;
    request.why = std::string("FEEDSCOPE_CUPTI_RUNTIME=") + v;
  }
  if (const char* v = std::getenv("FEEDSCOPE_CUPTI_DRIVER"); v != nullptr)
    request.driver_launches = std::string_view(v) != "0";
  if (request.runtime == TracingMode::Calls::none) request.syncs = true;  // the syncs' only record
  if (const char* v = std::getenv("FEEDSCOPE_CUPTI_SYNC"); v != nullptr)
    request.syncs = std::string_view(v) != "0";
  return request;
}

std::string enable_tracing(const CuptiApi& api, CuptiEnabled& out, const TracingRequest& request) {
  out = CuptiEnabled{};
  // Before the SYNCHRONIZATION kind, so that no query of unfinished work is ever recorded.
  if (api.cuptiActivityEnableAllSyncRecords == nullptr) {
    add_note(out.mode, "a synchronization record for every event and stream query: "
                       "cuptiActivityEnableAllSyncRecords is not in this CUPTI");
  } else if (const CUptiResult r = api.cuptiActivityEnableAllSyncRecords(0); r != CUPTI_SUCCESS) {
    add_note(out.mode, "a synchronization record for every event and stream query: "
                       "cuptiActivityEnableAllSyncRecords(0): " + cupti_result_text(r));
  } else {
    out.all_sync_records_off = true;
    out.mode.completed_syncs_only = true;
  }
  std::string why;
  for (CUpti_ActivityKind kind : kDeviceKinds) {
    if (kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION && !request.syncs) {
      out.mode.sync_records = false;
      continue;
    }
    if (const CUptiResult r = api.cuptiActivityEnable(kind); r != CUPTI_SUCCESS) {
      why = failure(r, std::string("cuptiActivityEnable(") + kind_name(kind) + ")");
      break;
    }
    out.kinds.push_back(kind);
  }
  if (why.empty()) why = enable_runtime_calls(api, out, request);
  if (!why.empty()) {
    disable_tracing(api, out);
    out = CuptiEnabled{};
    return why;
  }
  if (request.driver_launches) {
    enable_driver_launches(api, out);
  } else {
    out.mode.driver_calls = TracingMode::Calls::none;
    add_note(out.mode, "the driver's launch calls not traced (their kernels count as launches)" +
                           (request.why.empty() ? std::string() : ": " + request.why));
  }
  out.mode.sampling = request.sampling;
  if (!request.sampling_why.empty()) add_note(out.mode, request.sampling_why);
  return "";
}

std::string switch_sampled_kinds(const CuptiApi& api, const CuptiEnabled& enabled, bool on) {
  std::string first;
  for (CUpti_ActivityKind kind : enabled.kinds) {
    const CUptiResult r = on ? api.cuptiActivityEnable(kind) : api.cuptiActivityDisable(kind);
    if (std::string why = failure(r, std::string(on ? "cuptiActivityEnable(" : "cuptiActivityDisable(") +
                                         kind_name(kind) + ")");
        first.empty())
      first = std::move(why);
  }
  return first;
}

bool trace_window_open() {
  Shared& s = shared();
  std::lock_guard lock(s.mutex);
  return s.windows.is_open();
}

std::int64_t next_trace_sampling_change(std::int64_t now) {
  Shared& s = shared();
  std::lock_guard lock(s.mutex);
  if (!s.enabled) return std::numeric_limits<std::int64_t>::max();
  return next_sampling_change(s.enabled->mode.sampling, s.lead_from_ns, now);
}

std::string follow_trace_sampling(std::int64_t now) {
  Shared& s = shared();
  std::optional<CuptiEnabled> enabled;
  bool open = false;
  {
    std::lock_guard lock(s.mutex);
    if (!s.enabled || !s.enabled->mode.sampling.sampled()) return "";
    open = s.windows.is_open();
    if (traced_at(s.enabled->mode.sampling, s.lead_from_ns, now) == open) return "";
    enabled = s.enabled;
  }
  // Outside the lock: CUPTI may hand a buffer to buffer_completed, which takes it, meanwhile.
  std::string why = switch_sampled_kinds(cupti().api, *enabled, !open);
  std::lock_guard lock(s.mutex);
  if (open) s.windows.close(now);
  else s.windows.open(now);
  return why;
}

std::string disable_tracing(const CuptiApi& api, const CuptiEnabled& enabled) {
  std::string first;
  const auto note = [&first](std::string why) {
    if (first.empty()) first = std::move(why);
  };
  for (CUpti_ActivityKind kind : enabled.kinds)
    note(failure(api.cuptiActivityDisable(kind), "cuptiActivityDisable"));
  for (std::uint32_t cbid : enabled.runtime_callbacks)
    note(failure(api.cuptiActivityEnableRuntimeApi(cbid, 0), "cuptiActivityEnableRuntimeApi"));
  for (std::uint32_t cbid : enabled.driver_callbacks)
    note(failure(api.cuptiActivityEnableDriverApi(cbid, 0), "cuptiActivityEnableDriverApi"));
  if (enabled.all_sync_records_off)
    note(failure(api.cuptiActivityEnableAllSyncRecords(1), "cuptiActivityEnableAllSyncRecords"));
  return first;
}

std::string start_cupti_recording(const TracingRequest& request) {
  const CuptiApi& api = cupti().api;
  if (std::string why = other_subscriber(api); !why.empty()) return why;
  if (std::string why = failure(api.cuptiActivityRegisterCallbacks(buffer_requested,
                                                                    buffer_completed),
                                "cuptiActivityRegisterCallbacks");
      !why.empty())
    return why;
  Shared& s = shared();
  if (std::string why = set_up_clock(api, s); !why.empty()) return why;
  CuptiEnabled enabled;
  if (std::string why = enable_tracing(api, enabled, request); !why.empty()) return why;
  std::lock_guard lock(s.mutex);
  s.enabled = std::move(enabled);
  s.lead_from_ns = std::numeric_limits<std::int64_t>::max();
  s.windows = TracedWindowLog{};
  s.windows.open(now_ns());
  return "";
}

std::optional<TracingMode> cupti_tracing() {
  Shared& s = shared();
  std::lock_guard lock(s.mutex);
  if (!s.enabled) return std::nullopt;
  return s.enabled->mode;
}

std::string stop_cupti_recording() {
  Shared& s = shared();
  std::optional<CuptiEnabled> enabled;
  {
    std::lock_guard lock(s.mutex);
    enabled = s.enabled;
    s.windows.close(now_ns());
  }
  std::string first = enabled ? disable_tracing(cupti().api, *enabled) : "";
  // Forced: hand over the partly filled buffers too, so a take sees the last records.
  std::string why = flush_cupti_records(true);
  return first.empty() ? why : first;
}

std::string flush_cupti_records(bool forced) {
  return failure(cupti().api.cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0),
                 "cuptiActivityFlushAll");
}

GpuActivity take_cupti_records() {
  Shared& s = shared();
  std::lock_guard lock(s.mutex);
  GpuActivity out = std::move(s.store);
  s.store = GpuActivity{};
  s.store_records = 0;
  if (s.enabled && s.enabled->mode.sampling.sampled()) out.traced_windows = s.windows.take(now_ns());
  return out;
}

CuptiCallbackCounts cupti_callback_counts() {
  const Shared& s = shared();
  return {s.buffers_completed.load(), s.device_records.load(), s.incomplete_buffers.load(),
          s.foreign_buffers.load()};
}

std::string cupti_clock() {
  Shared& s = shared();
  std::lock_guard lock(s.mutex);
  return s.clock;
}

std::string probe_cupti_callbacks() {
  const CuptiApi& api = cupti().api;
  std::string why = failure(api.cuptiActivityEnableAndDump(CUPTI_ACTIVITY_KIND_DEVICE),
                            "cuptiActivityEnableAndDump(DEVICE)");
  if (why.empty()) api.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DEVICE);
  return why;
}

}  // namespace feedscope::detail
