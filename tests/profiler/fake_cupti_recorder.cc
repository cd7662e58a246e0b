// A stand-in for libcupti that records: it keeps the buffer callbacks it is given and, on each
// flush, hands them one buffer with a kernel, a pinned-to-device copy and a runtime API record
// (once per process), plus a device record after cuptiActivityEnableAndDump(DEVICE). Built for
// feedscope_inject_test.cc, named libcupti.so.13 so the injection library takes it for the
// process's CUPTI. Its records are timed as CUPTI times them: by a timestamp callback registered
// before the first cuptiActivityEnable, else by CLOCK_REALTIME, which cuptiGetTimestamp reads.
// The environment plays the program around it, "1" to switch a case on:
//   FAKE_CUPTI_DELIVER=0          it never calls back, as when another client has registered its
//                                 own callbacks
//   FAKE_CUPTI_LOG=FILE           appends one line per call, for tests of their order
//   FAKE_CUPTI_CLOCK_STEP         CLOCK_REALTIME steps an hour ahead after cuptiGetTimestamp
//   FAKE_CUPTI_NO_TIMESTAMP_CALLBACK  cuptiActivityRegisterTimestampCallback fails
//   FAKE_CUPTI_BAD_TIMESTAMPS     the first buffer adds a kernel timed 0/0, a copy starting at 0
//                                 and a runtime call ending before it started
//   FAKE_CUPTI_INCOMPLETE         an incomplete record comes before every device record, so the
//                                 walk stops there (CUPTI_ERROR_INVALID_KIND)
//   FAKE_CUPTI_HOLD               a default flush hands nothing over, as CUPTI holds back buffers
//                                 with an incomplete record; a forced one hands everything
//   FAKE_CUPTI_HOLD_LATER         after the first buffer, each flush finds a kernel launched since,
//                                 in a buffer a default flush holds back; a forced flush hands
//                                 every such kernel over
//   FAKE_CUPTI_LONG_KERNEL_MS=N   the first buffer opens with a kernel that runs N ms from the
//                                 first flush, and stays the buffer in use (the probes' records
//                                 join it): until the kernel ends a default flush holds it back, a
//                                 forced one hands it over with that record incomplete (the walk
//                                 stops there, losing the rest); once it has ended, it comes whole
//   FAKE_CUPTI_SUBSCRIBED         another client (torch.profiler) holds the one subscription
//   FAKE_CUPTI_KINETO_AT_FLUSH=N  at the Nth flush torch.profiler starts: it subscribes and
//                                 registers its own callbacks, which get every buffer from then on
//   FAKE_CUPTI_FOREIGN_BUFFER     torch.profiler registered its callbacks first and had a buffer
//                                 out: the first flush completes that buffer to the new callbacks
//   FAKE_CUPTI_KERNELS=N          the first flush also delivers N kernels of a launch-bound step,
//                                 with a torch kernel's long name, in as many buffers as they take
//   FAKE_CUPTI_COMPILED           the first buffer adds what torch.compile makes: a Triton kernel
//                                 launched by the driver's cuLaunchKernel and a CUDA graph's kernel
//                                 replayed by cuGraphLaunch (graph id 3), both as DRIVER records
//   FAKE_CUPTI_NO_PER_API         cuptiActivityEnableRuntimeApi and cuptiActivityEnableDriverApi
//                                 refuse (CUPTI_ERROR_NOT_SUPPORTED)
// Its callback names are a few of CUPTI 13's own, cudaGetDevice among them; the per-call enables
// and cuptiActivityEnableAllSyncRecords are logged with their arguments.
#include <cupti.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace {

CUpti_BuffersCallbackRequestFunc requested = nullptr;
CUpti_BuffersCallbackCompleteFunc completed = nullptr;
CUpti_TimestampCallbackFunc timestamp = nullptr;
bool enabled_once = false;
bool timed_by_callback = false;  // a timestamp callback was there at the first enable
bool clock_stepped = false;
bool delivered_once = false;
bool device_pending = false;
bool subscribed = false;
bool kineto_took_over = false;
int flushes = 0;
long long held_kernels = 0;  // FAKE_CUPTI_HOLD_LATER's kernels not handed over yet
// Records sit in the buffer at this stride; cuptiActivityGetNextRecord walks it.
constexpr std::size_t kStride = (sizeof(CUpti_ActivityKernel10) + 7) / 8 * 8 + 512;
alignas(8) std::uint8_t kineto_buffer[4 * kStride];  // torch.profiler's, not feedscope's to free

bool on(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

void note(const char* what, long long value = -1) {
  const char* path = std::getenv("FAKE_CUPTI_LOG");
  if (path == nullptr) return;
  if (FILE* f = std::fopen(path, "a")) {
    if (value >= 0)
      std::fprintf(f, "%s %lld\n", what, value);
    else
      std::fprintf(f, "%s\n", what);
    std::fclose(f);
  }
}

std::uint64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  const std::uint64_t ns = static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
                           static_cast<std::uint64_t>(ts.tv_nsec);
  return clock_stepped ? ns + 3'600'000'000'000u : ns;
}

std::uint64_t record_clock() { return timed_by_callback ? timestamp() : realtime_ns(); }

template <typename Record>
Record* slot(std::uint8_t* buffer, std::size_t i) {
  auto* r = reinterpret_cast<Record*>(buffer + i * kStride);
  std::memset(static_cast<void*>(r), 0, kStride);
  return r;
}

void CUPTIAPI kineto_buffer_requested(std::uint8_t** buffer, std::size_t* size,
                                      std::size_t* max_records) {
  *buffer = kineto_buffer;
  *size = sizeof kineto_buffer;
  *max_records = 0;
}

// kineto's bufferCompleted: a buffer it did not allocate is logged and left alone.
void CUPTIAPI kineto_buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                                      std::size_t) {
  if (buffer != kineto_buffer) note("kineto: unknown buffer");
}

std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// FAKE_CUPTI_LONG_KERNEL_MS's buffer in use, and when its first kernel ends.
std::uint8_t* held = nullptr;
std::size_t held_size = 0, held_records = 0;
std::int64_t long_kernel_ends_ms = 0;
std::uint64_t long_kernel_start = 0;

void fill_kernel(CUpti_ActivityKernel10* k, const char* name, std::uint64_t start,
                 std::uint64_t end, std::uint32_t correlation) {
  k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k->name = name;
  k->start = start;
  k->end = end;
  k->streamId = 7;
  k->correlationId = correlation;
}

// FAKE_CUPTI_LONG_KERNEL_MS: one flush.
CUptiResult flush_beside_a_long_kernel(std::uint32_t flag, long long ms) {
  if (!delivered_once) {
    delivered_once = true;
    std::size_t max_records = 0;
    requested(&held, &held_size, &max_records);
    if (held == nullptr || held_size < 8 * kStride) return CUPTI_SUCCESS;
    long_kernel_ends_ms = steady_ms() + ms;
    long_kernel_start = record_clock();
    slot<CUpti_Activity>(held, held_records++);  // the long kernel's: incomplete, kind INVALID
    fill_kernel(slot<CUpti_ActivityKernel10>(held, held_records++), "_Z3fooi",
                long_kernel_start + 1'000, long_kernel_start + 2'000, 41);
  }
  if (device_pending && held != nullptr && held_records < held_size / kStride) {
    device_pending = false;
    slot<CUpti_ActivityDevice5>(held, held_records++)->kind = CUPTI_ACTIVITY_KIND_DEVICE;
  }
  const bool ended = steady_ms() >= long_kernel_ends_ms;
  if (held != nullptr && (ended || (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0)) {
    if (ended)
      fill_kernel(reinterpret_cast<CUpti_ActivityKernel10*>(held), "_Z10longKernelv",
                  long_kernel_start, record_clock(), 40);
    completed(nullptr, 0, std::exchange(held, nullptr), held_size, held_records * kStride);
    return CUPTI_SUCCESS;
  }
  if (held == nullptr && device_pending) {  // the kernel over: each probe's record comes at once
    device_pending = false;
    std::uint8_t* buffer = nullptr;
    std::size_t size = 0, max_records = 0;
    requested(&buffer, &size, &max_records);
    if (buffer == nullptr || size < kStride) return CUPTI_SUCCESS;
    slot<CUpti_ActivityDevice5>(buffer, 0)->kind = CUPTI_ACTIVITY_KIND_DEVICE;
    completed(nullptr, 0, buffer, size, kStride);
  }
  return CUPTI_SUCCESS;
}

// `count` kernels, each buffer filled before it is completed, as CUPTI does under load.
void deliver_kernels(long long count) {
  const std::uint64_t base = record_clock() - 1'000'000'000;
  for (long long done = 0; done < count;) {
    std::uint8_t* buffer = nullptr;
    std::size_t size = 0, max_records = 0;
    requested(&buffer, &size, &max_records);
    if (buffer == nullptr) return;
    std::size_t n = 0;
    for (; n < size / kStride && done < count; ++n, ++done) {
      auto* k = slot<CUpti_ActivityKernel10>(buffer, n);
      k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      // 163 characters demangled, as torch's elementwise kernels are.
      k->name = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5"
                "ArrayIPcLi1EEEEEviT0_T1_";
      k->start = base + static_cast<std::uint64_t>(done) * 1'000;
      k->end = k->start + 500;
      k->streamId = 7;
      k->correlationId = static_cast<std::uint32_t>(1000 + done);
    }
    completed(nullptr, 0, buffer, size, n * kStride);
  }
}

}  // namespace

extern "C" {

CUptiResult cuptiGetVersion(uint32_t* version) {
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetResultString(CUptiResult result, const char** text) {
  *text = result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
              ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
              : "CUPTI_ERROR_FAKE";
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  struct Named {
    uint32_t cbid;
    const char* name;
  };
  static constexpr Named kRuntime[] = {
      {CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, "cudaGetDevice_v3020"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, "cudaStreamSynchronize_v3020"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020, "cudaEventQuery_v3020"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel_v7000"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, "cudaLaunchKernel_ptsz_v7000"},
      {CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, "__cudaLaunchKernel_v13000"},
  };
  static constexpr Named kDriver[] = {
      {CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent"},
      {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
      {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch"},
  };
  const auto find = [&](const auto& table) {
    for (const Named& n : table) {
      if (n.cbid != cbid) continue;
      *name = n.name;
      return CUPTI_SUCCESS;
    }
    return CUPTI_ERROR_INVALID_PARAMETER;
  };
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return find(kRuntime);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) return find(kDriver);
  return CUPTI_ERROR_INVALID_PARAMETER;
}
CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  note(enable ? "cuptiActivityEnableRuntimeApi on" : "cuptiActivityEnableRuntimeApi off", cbid);
  return on("FAKE_CUPTI_NO_PER_API") ? CUPTI_ERROR_NOT_SUPPORTED : CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  note(enable ? "cuptiActivityEnableDriverApi on" : "cuptiActivityEnableDriverApi off", cbid);
  return on("FAKE_CUPTI_NO_PER_API") ? CUPTI_ERROR_NOT_SUPPORTED : CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnableAllSyncRecords(uint8_t enable) {
  note("cuptiActivityEnableAllSyncRecords", enable);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetTimestamp(uint64_t* ns) {
  note("cuptiGetTimestamp");
  *ns = realtime_ns();
  if (on("FAKE_CUPTI_CLOCK_STEP")) clock_stepped = true;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc, void*) {
  if (subscribed || on("FAKE_CUPTI_SUBSCRIBED")) {
    note("cuptiSubscribe refused");
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  note("cuptiSubscribe");
  subscribed = true;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&subscribed);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  note("cuptiUnsubscribe");
  subscribed = false;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc callback) {
  note("cuptiActivityRegisterTimestampCallback");
  if (on("FAKE_CUPTI_NO_TIMESTAMP_CALLBACK")) return CUPTI_ERROR_NOT_SUPPORTED;
  if (callback == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  timestamp = callback;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                           CUpti_BuffersCallbackCompleteFunc complete) {
  note("cuptiActivityRegisterCallbacks");
  requested = request;
  completed = complete;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  note("cuptiActivityEnable", kind);
  if (!enabled_once) timed_by_callback = timestamp != nullptr;
  enabled_once = true;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind kind) {
  if (kind == CUPTI_ACTIVITY_KIND_DEVICE) device_pending = true;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  note("cuptiActivityDisable", kind);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  std::uint8_t* next = *record == nullptr ? buffer : reinterpret_cast<std::uint8_t*>(*record) + kStride;
  if (next + kStride > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  if (reinterpret_cast<CUpti_Activity*>(next)->kind == CUPTI_ACTIVITY_KIND_INVALID)
    return CUPTI_ERROR_INVALID_KIND;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  ++flushes;
  const char* deliver = std::getenv("FAKE_CUPTI_DELIVER");
  if (deliver != nullptr && std::strcmp(deliver, "0") == 0) return CUPTI_SUCCESS;
  if (const char* at = std::getenv("FAKE_CUPTI_KINETO_AT_FLUSH");
      at != nullptr && !kineto_took_over && flushes >= std::atoi(at)) {
    kineto_took_over = true;
    CUpti_SubscriberHandle handle = nullptr;
    note(cuptiSubscribe(&handle, nullptr, nullptr) == CUPTI_SUCCESS ? "kineto subscribed"
                                                                    : "kineto not subscribed");
    requested = kineto_buffer_requested;
    completed = kineto_buffer_completed;
  }
  if (requested == nullptr) return CUPTI_SUCCESS;
  if (on("FAKE_CUPTI_FOREIGN_BUFFER") && flushes == 1) completed(nullptr, 0, kineto_buffer, 0, 0);
  if (on("FAKE_CUPTI_HOLD") && (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == 0) return CUPTI_SUCCESS;
  if (const char* ms = std::getenv("FAKE_CUPTI_LONG_KERNEL_MS"))
    return flush_beside_a_long_kernel(flag, std::atoll(ms));
  if (delivered_once && on("FAKE_CUPTI_HOLD_LATER")) {
    ++held_kernels;
    if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0) deliver_kernels(std::exchange(held_kernels, 0));
  }
  if (delivered_once && !device_pending) return CUPTI_SUCCESS;
  if (const char* many = std::getenv("FAKE_CUPTI_KERNELS"); many != nullptr && !delivered_once)
    deliver_kernels(std::atoll(many));
  std::uint8_t* buffer = nullptr;
  std::size_t size = 0, max_records = 0;
  requested(&buffer, &size, &max_records);
  if (buffer == nullptr || size < 8 * kStride) return CUPTI_SUCCESS;
  std::size_t n = 0;
  const std::uint64_t base = record_clock() - 3'000'000;
  if (!delivered_once) {
    delivered_once = true;
    auto* k = slot<CUpti_ActivityKernel10>(buffer, n++);
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->name = "_Z3fooi";
    k->start = base + 2'000'000;
    k->end = base + 2'500'000;
    k->deviceId = 0;
    k->streamId = 7;
    k->correlationId = 41;
    auto* m = slot<CUpti_ActivityMemcpy6>(buffer, n++);
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    m->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m->bytes = 4096;
    m->start = base + 1'500'000;
    m->end = base + 1'600'000;
    m->correlationId = 40;
    auto* a = slot<CUpti_ActivityAPI>(buffer, n++);
    a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a->cbid = 211;
    a->start = base + 1'900'000;
    a->end = base + 1'950'000;
    a->correlationId = 41;
    if (on("FAKE_CUPTI_COMPILED")) {
      auto* launch = slot<CUpti_ActivityAPI>(buffer, n++);
      launch->kind = CUPTI_ACTIVITY_KIND_DRIVER;
      launch->cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
      launch->start = base + 2'600'000;
      launch->end = base + 2'610'000;
      launch->correlationId = 50;
      auto* triton = slot<CUpti_ActivityKernel10>(buffer, n++);
      triton->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      triton->name = "triton_poi_fused_add_0";
      triton->start = base + 2'620'000;
      triton->end = base + 2'630'000;
      triton->correlationId = 50;
      auto* replay = slot<CUpti_ActivityAPI>(buffer, n++);
      *replay = *launch;
      replay->cbid = CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch;
      replay->correlationId = 51;
      auto* in_graph = slot<CUpti_ActivityKernel10>(buffer, n++);
      *in_graph = *triton;
      in_graph->name = "_Z3fooi";
      in_graph->correlationId = 51;
      in_graph->graphId = 3;
    }
    if (on("FAKE_CUPTI_BAD_TIMESTAMPS")) {
      auto* k0 = slot<CUpti_ActivityKernel10>(buffer, n++);
      *k0 = *k;
      k0->start = k0->end = 0;
      auto* m0 = slot<CUpti_ActivityMemcpy6>(buffer, n++);
      *m0 = *m;
      m0->start = 0;
      auto* a0 = slot<CUpti_ActivityAPI>(buffer, n++);
      *a0 = *a;
      a0->end = a0->start - 1;
    }
  }
  if (device_pending) {
    device_pending = false;
    if (on("FAKE_CUPTI_INCOMPLETE")) slot<CUpti_Activity>(buffer, n++);  // kind INVALID
    slot<CUpti_ActivityDevice5>(buffer, n++)->kind = CUPTI_ACTIVITY_KIND_DEVICE;
  }
  completed(nullptr, 0, buffer, size, n * kStride);
  return CUPTI_SUCCESS;
}

}  // extern "C"
