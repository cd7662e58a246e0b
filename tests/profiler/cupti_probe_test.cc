#include "profiler/cupti_probe.h"

#include <gtest/gtest.h>

#include "pinned_memory/device_probe.h"
#if FEEDSCOPE_WITH_CUDA
#include "profiler/detail/cupti_api.h"
#endif

namespace feedscope {
namespace {

// cuptiGetVersion answers without a driver; the probe must not call that "available".
TEST(CuptiProbeTest, AvailableOnlyWhereACudaDeviceCanBeTracedOtherwiseSaysWhy) {
  const CuptiProbe cupti = probe_cupti();
  const DeviceProbe cuda = probe_cuda();
  if (!cuda.built_with_cuda) {
    EXPECT_FALSE(cupti.available);
    EXPECT_NE(cupti.detail.find("built without CUDA"), std::string::npos) << cupti.detail;
    return;
  }
#if FEEDSCOPE_WITH_CUDA
  // Loaded at run time: where the library is missing, that is the reason, device or not.
  if (const detail::CuptiLibrary& lib = detail::cupti(); !lib.loaded) {
    EXPECT_FALSE(cupti.available);
    EXPECT_EQ(cupti.detail, lib.reason);
    return;
  }
#endif
  if (!cuda.available()) {
    EXPECT_FALSE(cupti.available) << "no CUDA device, yet CUPTI is called available: " << cupti.detail;
    EXPECT_NE(cupti.detail.find("no CUDA device to trace: " + cuda.unavailable_reason),
              std::string::npos)
        << cupti.detail;
  } else {
    EXPECT_TRUE(cupti.available) << "a CUDA device is present, yet: " << cupti.detail;
    EXPECT_EQ(cupti.detail.rfind("API version ", 0), 0u) << cupti.detail;
  }
}

}  // namespace
}  // namespace feedscope
