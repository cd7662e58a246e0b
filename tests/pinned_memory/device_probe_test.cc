#include "pinned_memory/device_probe.h"

#include <gtest/gtest.h>

namespace feedscope {
namespace {

TEST(DeviceProbeTest, EitherDevicesOrAReason) {
  const DeviceProbe probe = probe_cuda();
  if (probe.available()) {
    EXPECT_TRUE(probe.unavailable_reason.empty());
    for (const CudaDevice& d : probe.devices) {
      EXPECT_FALSE(d.name.empty());
      EXPECT_GT(d.memory_bytes, 0u);
    }
  } else {
    EXPECT_FALSE(probe.unavailable_reason.empty()) << "no device must come with a reason";
  }
}

TEST(DeviceProbeTest, VersionStrings) {
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12080), "12.8");
  EXPECT_EQ(cuda_version_string(0), "none");
}

TEST(DeviceProbeTest, CudaDeviceIndexOnlyFromCudaColonN) {
  EXPECT_EQ(cuda_device_index("cuda:0"), 0);
  EXPECT_EQ(cuda_device_index("cuda:3"), 3);
  for (const char* other : {"cuda", "cpu", "auto", "cuda:", "cuda:-1", "cuda:1x", "cuda: 1", "cuda:99999999999"})
    EXPECT_FALSE(cuda_device_index(other)) << other;
}

TEST(DeviceProbeTest, AUuidIsWrittenAsNvmlWritesItsDigits) {
  const unsigned char bytes[16] = {0xc6, 0xd4, 0xf1, 0xef, 0x42, 0xe4, 0x5d, 0xe3,
                                   0x91, 0xcf, 0x45, 0xd7, 0x1c, 0x87, 0xeb, 0x3f};
  EXPECT_EQ(uuid_text(bytes), "c6d4f1ef-42e4-5de3-91cf-45d71c87eb3f");
  const unsigned char none[16] = {};
  EXPECT_EQ(uuid_text(none), "") << "CUDA did not say: no name to match";
}

TEST(DeviceProbeGpuTest, DescribesEveryDevice) {
  const DeviceProbe probe = probe_cuda();
  if (!probe.available()) GTEST_SKIP() << "no CUDA device: " << probe.unavailable_reason;
  for (const CudaDevice& d : probe.devices) {
    EXPECT_GE(d.compute_major, 5);
    EXPECT_GT(d.multiprocessors, 0);
    // "0000:3B:00.0", the spelling sampler/pci_bus_id.h matches against NVML's.
    ASSERT_EQ(d.pci_bus_id.size(), 12u) << d.pci_bus_id;
    EXPECT_EQ(d.pci_bus_id[4], ':');
    EXPECT_EQ(d.pci_bus_id[7], ':');
    EXPECT_EQ(d.pci_bus_id[10], '.');
    EXPECT_EQ(d.uuid.size(), 36u) << "the name a MIG instance is matched by: " << d.uuid;
  }
}

}  // namespace
}  // namespace feedscope
