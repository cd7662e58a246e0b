#pragma once
// Which NVML device is which CUDA device. CUDA numbers the devices a process sees in its own
// order (CUDA_DEVICE_ORDER=FASTEST_FIRST by default, filtered and reordered by
// CUDA_VISIBLE_DEVICES); NVML numbers every GPU of the machine in PCI order. The PCI bus id is
// the one name both give the same GPU, each in its own spelling: CUDA "0000:3B:00.0" (4-digit
// domain), NVML "00000000:3B:00.0" (8-digit domain). Pure functions, so tests need no GPU.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace feedscope {

struct PciAddress {
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
  unsigned function = 0;
  bool operator==(const PciAddress&) const = default;
};

// "domain:bus:device.function" in hexadecimal, any case, any number of domain digits up to 8;
// nullopt for anything else (an empty id, a field out of PCI's range, trailing text).
std::optional<PciAddress> parse_pci_bus_id(std::string_view id);

// For each NVML device (its bus id, in NVML's order), the CUDA index of the same GPU in
// `cuda_bus_ids` (CUDA's order), or -1 when the process's CUDA does not see it or either id does
// not parse.
std::vector<int> cuda_index_of_nvml_devices(const std::vector<std::string>& nvml_bus_ids,
                                            const std::vector<std::string>& cuda_bus_ids);

}  // namespace feedscope
