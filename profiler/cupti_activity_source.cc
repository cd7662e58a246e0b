#include "profiler/cupti_activity_source.h"

#include <string>

#if FEEDSCOPE_WITH_CUDA
#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "loader/span_recorder.h"
#include "pinned_memory/device_probe.h"
#include "profiler/detail/cupti_api.h"
#endif

namespace feedscope {

#if FEEDSCOPE_WITH_CUDA

namespace {

using detail::cupti;

// CUPTI suggests buffers of 1-10 MB. The cap bounds what a stalled consumer can pin down: past
// it CUPTI gets no buffer, drops records and counts them.
constexpr std::size_t kBufferBytes = 8u << 20;
constexpr std::size_t kBufferAlign = 8;
constexpr int kMaxBuffers = 32;
// What the parsed records may take until collected: a training loop launches thousands of kernels
// a second for days. Past it, records are counted and dropped, so the summary covers the run up to
// the first one left out. About 250,000 kernel records with their names.
constexpr std::size_t kMaxStoreBytes = std::size_t{64} << 20;

constexpr std::array<CUpti_ActivityKind, 5> kKinds = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_RUNTIME};

const char* kind_name(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "MEMSET";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return "SYNCHRONIZATION";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "RUNTIME";
    default: return "?";
  }
}

std::string result_text(CUptiResult result) {
  const char* text = nullptr;
  if (cupti().api.cuptiGetResultString(result, &text) == CUPTI_SUCCESS && text != nullptr)
    return text;
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

// CUPTI's callbacks carry no user pointer, so what they reach is process-wide. Leaked on purpose:
// CUPTI may deliver a last buffer while static destructors run.
struct Shared {
  // Below state is shared with CUPTI's buffer thread (and with a thread inside FlushAll).
  std::mutex mutex;
  GpuActivity store;                                         // guarded by mutex
  std::size_t store_bytes = 0;                               // guarded by mutex
  std::unordered_map<std::uint32_t, std::string> api_names;  // guarded by mutex
  std::unordered_map<std::string, std::string> demangled;    // guarded by mutex
  std::atomic<int> buffers_out{0};
  std::atomic<std::int64_t> offset_ns{0};  // now_ns() - cuptiGetTimestamp()
  std::atomic<bool> claimed{false};        // a source owns the callbacks
};

Shared& shared() {
  static Shared* s = new Shared;
  return *s;
}

std::int64_t to_now_ns(std::uint64_t cupti_ns, std::int64_t offset) {
  return static_cast<std::int64_t>(cupti_ns) + offset;
}

// Caller holds shared().mutex.
const std::string& api_name(Shared& s, std::uint32_t cbid) {
  auto it = s.api_names.find(cbid);
  if (it != s.api_names.end()) return it->second;
  const char* raw = nullptr;
  std::string name;
  if (cupti().api.cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &raw) == CUPTI_SUCCESS &&
      raw) {
    name = raw;
    // "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": the version is not part of the API's name.
    const std::size_t v = name.rfind("_v");
    if (v != std::string::npos && v + 2 < name.size() &&
        name.find_first_not_of("0123456789", v + 2) == std::string::npos)
      name.resize(v);
  } else {
    name = "runtime api " + std::to_string(cbid);
  }
  return s.api_names.emplace(cbid, std::move(name)).first->second;
}

// Caller holds shared().mutex. Kernel names come mangled; the trace is read by people.
const std::string& kernel_name(Shared& s, const char* raw) {
  const std::string key = raw ? raw : "unknown kernel";
  auto it = s.demangled.find(key);
  if (it != s.demangled.end()) return it->second;
  int status = 0;
  char* d = abi::__cxa_demangle(key.c_str(), nullptr, nullptr, &status);
  std::string name = status == 0 && d ? std::string(d) : key;
  std::free(d);
  return s.demangled.emplace(key, std::move(name)).first->second;
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

// Record layouts are those the CUDA 13 headers name for each enabled kind.
void parse(Shared& s, std::uint8_t* buffer, std::size_t valid, GpuActivity& out) {
  const std::int64_t off = s.offset_ns.load(std::memory_order_relaxed);
  const auto next_record = cupti().api.cuptiActivityGetNextRecord;
  CUpti_Activity* record = nullptr;
  while (next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        out.kernels.push_back({kernel_name(s, k->name), to_now_ns(k->start, off),
                               to_now_ns(k->end, off), k->deviceId, k->streamId,
                               k->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        out.memcpys.push_back({memcpy_kind(m->copyKind), memory_kind(m->srcKind), m->bytes,
                               to_now_ns(m->start, off), to_now_ns(m->end, off), m->deviceId,
                               m->streamId, m->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        out.memsets.push_back({m->bytes, to_now_ns(m->start, off), to_now_ns(m->end, off),
                               m->deviceId, m->streamId, m->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const auto* y = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
        out.syncs.push_back({sync_type(y->type), to_now_ns(y->start, off),
                             to_now_ns(y->end, off), y->streamId, y->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        out.runtime.push_back({api_name(s, a->cbid), to_now_ns(a->start, off),
                               to_now_ns(a->end, off), a->threadId, a->correlationId});
        break;
      }
      default:
        break;
    }
  }
}

std::size_t record_bytes(const KernelRecord& r) { return sizeof r + r.name.capacity(); }
std::size_t record_bytes(const RuntimeApiRecord& r) { return sizeof r + r.name.capacity(); }
template <typename Record>
std::size_t record_bytes(const Record& r) {
  return sizeof r;
}

// Caller holds shared().mutex. Moves `from` into `to` while the store stays under its cap.
template <typename Record>
void keep_under_cap(Shared& s, std::vector<Record>& from, std::vector<Record>& to) {
  for (Record& r : from) {
    const std::size_t bytes = record_bytes(r);
    if (s.store_bytes + bytes > kMaxStoreBytes) {
      ++s.store.not_kept;
      s.store.kept_until_ns = std::min(s.store.kept_until_ns, r.start_ns);
      continue;
    }
    s.store_bytes += bytes;
    to.push_back(std::move(r));
  }
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
  void* p = std::aligned_alloc(kBufferAlign, kBufferBytes);
  if (p == nullptr) {
    s.buffers_out.fetch_sub(1);
    return;
  }
  *buffer = static_cast<std::uint8_t*>(p);
  *size = kBufferBytes;
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                               std::size_t /*size*/, std::size_t valid) {
  if (buffer == nullptr) return;
  Shared& s = shared();
  // An exception must not unwind into CUPTI's C frames; losing a buffer beats losing the run.
  try {
    std::lock_guard lock(s.mutex);
    GpuActivity parsed;
    parse(s, buffer, valid, parsed);
    std::size_t dropped = 0;
    if (cupti().api.cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS)
      s.store.dropped += dropped;
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

// Owner thread only (start/stop/collect); CUPTI's buffer thread fills the shared store.
class CuptiActivitySource final : public GpuActivitySource {
 public:
  ~CuptiActivitySource() override {
    stop();
    if (owner_) {
      Shared& s = shared();
      {
        std::lock_guard lock(s.mutex);
        s.store = GpuActivity{};
        s.store_bytes = 0;
      }
      s.claimed.store(false);
    }
  }

  bool start() override {
    if (running_) return true;
    if (!reason_.empty()) return false;
    if (!cupti().loaded) {
      reason_ = "CUPTI: " + cupti().reason;
      log_once(reason_);
      return false;
    }
    // Without a driver CUPTI's activity calls fail with CUPTI_ERROR_UNKNOWN at best; ask the
    // runtime first, which says why, and leave CUPTI alone where there is nothing to trace.
    if (const DeviceProbe probe = probe_cuda(); !probe.available()) {
      reason_ = "CUPTI: no CUDA device to trace: " + probe.unavailable_reason;
      log_once(reason_);
      return false;
    }
    Shared& s = shared();
    if (!owner_) {
      bool expected = false;
      if (!s.claimed.compare_exchange_strong(expected, true)) {
        reason_ = "CUPTI: another activity source is recording in this process";
        return false;
      }
      owner_ = true;
    }
    if (!enable(s)) {
      // Let a later source try; this one keeps its reason.
      owner_ = false;
      s.claimed.store(false);
      return false;
    }
    running_ = true;
    return true;
  }

  void stop() override {
    if (!running_) return;
    running_ = false;
    const detail::CuptiApi& api = cupti().api;
    for (CUpti_ActivityKind kind : kKinds) {
      const CUptiResult r = api.cuptiActivityDisable(kind);
      if (r != CUPTI_SUCCESS) log_once(std::string("cuptiActivityDisable: ") + result_text(r));
    }
    // Forced: hand over the partly filled buffers too, so collect() sees the last records.
    const CUptiResult r = api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS) log_once(std::string("cuptiActivityFlushAll: ") + result_text(r));
  }

  GpuActivity collect() override {
    if (!owner_) return {};
    if (running_) {
      const CUptiResult r = cupti().api.cuptiActivityFlushAll(0);
      if (r != CUPTI_SUCCESS) log_once(std::string("cuptiActivityFlushAll: ") + result_text(r));
    }
    Shared& s = shared();
    std::lock_guard lock(s.mutex);
    GpuActivity out = std::move(s.store);
    s.store = GpuActivity{};
    s.store_bytes = 0;
    return out;
  }

  std::string unavailable_reason() const override { return reason_; }

 private:
  bool enable(Shared& s) {
    const detail::CuptiApi& api = cupti().api;
    if (!check(api.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
               "cuptiActivityRegisterCallbacks"))
      return false;
    // Sample both clocks back to back and take the midpoint of now_ns() around the CUPTI read.
    std::uint64_t cupti_ns = 0;
    const std::int64_t before = now_ns();
    if (!check(api.cuptiGetTimestamp(&cupti_ns), "cuptiGetTimestamp")) return false;
    const std::int64_t after = now_ns();
    s.offset_ns.store(before + (after - before) / 2 - static_cast<std::int64_t>(cupti_ns));
    for (std::size_t i = 0; i < kKinds.size(); ++i) {
      const std::string what = std::string("cuptiActivityEnable(") + kind_name(kKinds[i]) + ")";
      if (!check(api.cuptiActivityEnable(kKinds[i]), what.c_str())) {
        for (std::size_t j = 0; j < i; ++j) api.cuptiActivityDisable(kKinds[j]);
        return false;
      }
    }
    return true;
  }

  // Turns a failed setup call into the reason the source is unavailable.
  bool check(CUptiResult result, const char* what) {
    if (result == CUPTI_SUCCESS) return true;
    reason_ = std::string("CUPTI: ") + what + ": " + result_text(result);
    log_once(reason_);
    return false;
  }

  // Tracing degrades quietly after the first word: a failing call may repeat every collect().
  void log_once(const std::string& text) {
    if (logged_) return;
    logged_ = true;
    std::fprintf(stderr, "feedscope: GPU activity trace: %s\n", text.c_str());
  }

  bool owner_ = false;    // holds shared().claimed
  bool running_ = false;
  bool logged_ = false;
  std::string reason_;
};

}  // namespace

std::unique_ptr<GpuActivitySource> make_cupti_source() {
  return std::make_unique<CuptiActivitySource>();
}

#else  // !FEEDSCOPE_WITH_CUDA

namespace {

// Stateless; any thread.
class NoCuptiSource final : public GpuActivitySource {
 public:
  bool start() override { return false; }
  void stop() override {}
  GpuActivity collect() override { return {}; }
  std::string unavailable_reason() const override {
    return "built without CUDA (FEEDSCOPE_WITH_CUDA=OFF)";
  }
};

}  // namespace

std::unique_ptr<GpuActivitySource> make_cupti_source() { return std::make_unique<NoCuptiSource>(); }

#endif

}  // namespace feedscope
