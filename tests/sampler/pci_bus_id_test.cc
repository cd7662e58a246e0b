#include "sampler/pci_bus_id.h"

#include <gtest/gtest.h>

namespace feedscope {
namespace {

TEST(PciBusIdTest, CudasAndNvmlsSpellingsOfOneGpuParseAlike) {
  const auto cuda = parse_pci_bus_id("0000:3B:00.0");      // cudaDeviceGetPCIBusId
  const auto nvml = parse_pci_bus_id("00000000:3b:00.0");  // nvmlPciInfo_t::busId
  ASSERT_TRUE(cuda);
  ASSERT_TRUE(nvml);
  EXPECT_EQ(*cuda, *nvml);
  EXPECT_EQ(cuda->bus, 0x3bu);
  EXPECT_EQ(*parse_pci_bus_id("0001:af:1f.7"), (PciAddress{1, 0xaf, 0x1f, 7}));
}

TEST(PciBusIdTest, AnythingElseIsNoAddress) {
  for (const char* bad : {"", "3B:00.0", "0000:3B:00", "0000:3B:00.0 ", "0000:3B:20.0",
                          "0000:3B:00.8", "0000:13B:00.0", "000000000:3B:00.0", "0000:-1:00.0",
                          "0000:3G:00.0", "0000::00.0", "0000:3B:00.0.0"})
    EXPECT_FALSE(parse_pci_bus_id(bad)) << "'" << bad << "'";
}

// NVML numbers the machine's four GPUs in PCI order; CUDA_VISIBLE_DEVICES=2,0 shows the process
// NVML's GPU 2 as cuda:0 and GPU 0 as cuda:1, and hides GPUs 1 and 3.
TEST(PciBusIdTest, AReorderedCudaVisibleDevicesMapsByBusIdAndHidesTheRest) {
  const std::vector<std::string> nvml = {"00000000:18:00.0", "00000000:3B:00.0",
                                         "00000000:86:00.0", "00000000:AF:00.0"};
  const std::vector<std::string> cuda = {"0000:86:00.0", "0000:18:00.0"};
  EXPECT_EQ(cuda_index_of_nvml_devices(nvml, cuda), (std::vector<int>{1, -1, 0, -1}));
}

TEST(PciBusIdTest, AnIdThatDoesNotParseMatchesNothing) {
  EXPECT_EQ(cuda_index_of_nvml_devices({"", "00000000:18:00.0"}, {"", "0000:18:00.0"}),
            (std::vector<int>{-1, 1}));
  EXPECT_EQ(cuda_index_of_nvml_devices({"00000000:18:00.0"}, {}), (std::vector<int>{-1}));
}

}  // namespace
}  // namespace feedscope
