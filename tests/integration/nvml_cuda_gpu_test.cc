// NVML's readings named by the CUDA index the process sees, on a real GPU: the real
// cudaDeviceGetPCIBusId against the real nvmlDeviceGetPciInfo_v3 (their spellings differ).
#include <gtest/gtest.h>

#include "pinned_memory/device_probe.h"
#include "sampler/gpu_source.h"

namespace feedscope {
namespace {

TEST(NvmlCudaGpuTest, EveryCudaDeviceIsReadUnderItsCudaIndex) {
  const DeviceProbe cuda = probe_cuda();
  if (!cuda.available()) GTEST_SKIP() << "no CUDA device: " << cuda.unavailable_reason;
  std::vector<CudaDeviceName> names(cuda.devices.back().index + 1);
  for (const CudaDevice& d : cuda.devices) names[d.index] = {d.pci_bus_id, d.uuid};
  const auto nvml = make_nvml_source(names);
  ASSERT_EQ(nvml->unavailable_reason(), "") << "NVML must come with the driver CUDA runs on";
  const std::vector<GpuSample> got = nvml->read();
  ASSERT_EQ(got.size(), cuda.devices.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const CudaDevice& d = cuda.devices[i];
    EXPECT_EQ(got[i].index, d.index);
    // The same GPU (or MIG instance, read through its own handle) seen both ways: NVML's total
    // memory and CUDA's agree within what the driver keeps back for itself.
    ASSERT_TRUE(got[i].memory_total_bytes) << "cuda:" << d.index << " (" << d.pci_bus_id << ")";
    const double cuda_bytes = static_cast<double>(d.memory_bytes);
    EXPECT_NEAR(static_cast<double>(*got[i].memory_total_bytes), cuda_bytes, 0.1 * cuda_bytes)
        << "cuda:" << d.index << " (" << d.pci_bus_id << ")";
  }
}

}  // namespace
}  // namespace feedscope
