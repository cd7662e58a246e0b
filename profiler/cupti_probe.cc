#include "profiler/cupti_probe.h"

#if FEEDSCOPE_WITH_CUDA
#include "pinned_memory/device_probe.h"
#include "profiler/cupti_activity_source.h"
#include "profiler/detail/cupti_api.h"
#endif

namespace feedscope {

CuptiProbe probe_cupti() {
  CuptiProbe probe;
#if FEEDSCOPE_WITH_CUDA
  const detail::CuptiLibrary& cupti = detail::cupti();
  if (!cupti.loaded) {
    probe.detail = cupti.reason;
    return probe;
  }
  uint32_t version = 0;
  if (cupti.api.cuptiGetVersion(&version) != CUPTI_SUCCESS) {
    probe.detail = "cuptiGetVersion failed";
    return probe;
  }
  const std::string api = "API version " + std::to_string(version);
  // cuptiGetVersion answers from the library alone, driver or not: it proves nothing about
  // tracing. Without a device there is nothing to trace; with one, a source must really start.
  const DeviceProbe cuda = probe_cuda();
  if (!cuda.available()) {
    probe.detail = "CUPTI " + api + " (" + cupti.name +
                   ") is installed, but there is no CUDA device to trace: " +
                   cuda.unavailable_reason;
    return probe;
  }
  const auto source = make_cupti_source();
  if (!source->start()) {
    probe.detail = source->unavailable_reason();
    return probe;
  }
  source->stop();
  probe.available = true;
  probe.detail = api;
#else
  probe.detail = "feedscope was built without CUDA (FEEDSCOPE_WITH_CUDA=OFF)";
#endif
  return probe;
}

}  // namespace feedscope
