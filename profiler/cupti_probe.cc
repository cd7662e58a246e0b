#include "profiler/cupti_probe.h"

#if FEEDSCOPE_WITH_CUDA
#include <cupti.h>
#endif

namespace feedscope {

CuptiProbe probe_cupti() {
  CuptiProbe probe;
#if FEEDSCOPE_WITH_CUDA
  uint32_t version = 0;
  if (cuptiGetVersion(&version) == CUPTI_SUCCESS) {
    probe.available = true;
    probe.detail = "API version " + std::to_string(version);
  } else {
    probe.detail = "cuptiGetVersion failed";
  }
#else
  probe.detail = "feedscope was built without CUDA (FEEDSCOPE_WITH_CUDA=OFF)";
#endif
  return probe;
}

}  // namespace feedscope
