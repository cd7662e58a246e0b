#pragma once
// What CUDA can do on this machine, asked once. Never throws: a missing driver or device is an
// answer ("unavailable: reason"), not an error.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace feedscope {

struct CudaDevice {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::uint64_t memory_bytes = 0;
  int multiprocessors = 0;
  // cudaDeviceGetPCIBusId's "0000:3B:00.0": how NVML's readings find this device (its index is
  // CUDA's, after CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER); empty when CUDA did not say.
  std::string pci_bus_id;
  // cudaDeviceProp::uuid as uuid_text() writes it: on a MIG instance the instance's own, the one
  // name NVML's MIG handle shares with it (its PCI bus id is its GPU's).
  std::string uuid;
};

// 16 bytes as "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", lower case: NVML's UUID without its "GPU-" or
// "MIG-"; empty for 16 zero bytes (CUDA did not say).
std::string uuid_text(const unsigned char (&bytes)[16]);

struct DeviceProbe {
  bool built_with_cuda = false;
  int runtime_version = 0;  // e.g. 13000 for 13.0; 0 when unknown
  int driver_version = 0;   // 0 when there is no driver
  std::vector<CudaDevice> devices;
  std::string unavailable_reason;  // empty when at least one device is usable

  bool available() const noexcept { return !devices.empty(); }
};

DeviceProbe probe_cuda();

// "13.0" from 13000; "none" for 0.
std::string cuda_version_string(int version);

// N of a device name "cuda:N" (N a non-negative decimal integer, nothing after it); nullopt for
// anything else, "cuda" and "cpu" included.
std::optional<int> cuda_device_index(std::string_view device);

}  // namespace feedscope
