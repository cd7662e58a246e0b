// A stand-in for libcupti that records: it keeps the buffer callbacks it is given and, on each
// flush, hands them one buffer with a kernel, a pinned-to-device copy and a runtime API record
// (once per process), plus a device record after cuptiActivityEnableAndDump(DEVICE). With
// FAKE_CUPTI_DELIVER=0 in the environment it never calls back, as when another client has
// registered its own callbacks. Built for feedscope_inject_test.cc, named libcupti.so.13 so the
// injection library takes it for the process's CUPTI.
#include <cupti.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

CUpti_BuffersCallbackRequestFunc requested = nullptr;
CUpti_BuffersCallbackCompleteFunc completed = nullptr;
bool delivered_once = false;
bool device_pending = false;
// Records sit in the buffer at this stride; cuptiActivityGetNextRecord walks it.
constexpr std::size_t kStride = (sizeof(CUpti_ActivityKernel10) + 7) / 8 * 8 + 512;

template <typename Record>
Record* slot(std::uint8_t* buffer, std::size_t i) {
  auto* r = reinterpret_cast<Record*>(buffer + i * kStride);
  std::memset(static_cast<void*>(r), 0, kStride);
  return r;
}

}  // namespace

extern "C" {

CUptiResult cuptiGetVersion(uint32_t* version) {
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetResultString(CUptiResult, const char** text) {
  *text = "CUPTI_ERROR_FAKE";
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain, uint32_t, const char** name) {
  *name = "cudaLaunchKernel_v7000";
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetTimestamp(uint64_t* ns) {
  *ns = 1'000'000;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                           CUpti_BuffersCallbackCompleteFunc complete) {
  requested = request;
  completed = complete;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind kind) {
  if (kind == CUPTI_ACTIVITY_KIND_DEVICE) device_pending = true;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityDisable(CUpti_ActivityKind) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  std::uint8_t* next = *record == nullptr ? buffer : reinterpret_cast<std::uint8_t*>(*record) + kStride;
  if (next + kStride > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityFlushAll(uint32_t) {
  const char* deliver = std::getenv("FAKE_CUPTI_DELIVER");
  if (deliver != nullptr && std::strcmp(deliver, "0") == 0) return CUPTI_SUCCESS;
  if (requested == nullptr || (delivered_once && !device_pending)) return CUPTI_SUCCESS;
  std::uint8_t* buffer = nullptr;
  std::size_t size = 0, max_records = 0;
  requested(&buffer, &size, &max_records);
  if (buffer == nullptr || size < 4 * kStride) return CUPTI_SUCCESS;
  std::size_t n = 0;
  if (!delivered_once) {
    delivered_once = true;
    auto* k = slot<CUpti_ActivityKernel10>(buffer, n++);
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->name = "_Z3fooi";
    k->start = 2'000'000;
    k->end = 2'500'000;
    k->deviceId = 0;
    k->streamId = 7;
    k->correlationId = 41;
    auto* m = slot<CUpti_ActivityMemcpy6>(buffer, n++);
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    m->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m->bytes = 4096;
    m->start = 1'500'000;
    m->end = 1'600'000;
    m->correlationId = 40;
    auto* a = slot<CUpti_ActivityAPI>(buffer, n++);
    a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a->cbid = 211;
    a->start = 1'900'000;
    a->end = 1'950'000;
    a->correlationId = 41;
  }
  if (device_pending) {
    device_pending = false;
    slot<CUpti_ActivityDevice5>(buffer, n++)->kind = CUPTI_ACTIVITY_KIND_DEVICE;
  }
  completed(nullptr, 0, buffer, size, n * kStride);
  return CUPTI_SUCCESS;
}

}  // extern "C"
