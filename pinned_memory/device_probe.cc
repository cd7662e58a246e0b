#include "pinned_memory/device_probe.h"

#include <charconv>
#include <cstring>

#if FEEDSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace feedscope {

std::string cuda_version_string(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::optional<int> cuda_device_index(std::string_view device) {
  constexpr std::string_view prefix = "cuda:";
  if (!device.starts_with(prefix) || device.size() == prefix.size()) return std::nullopt;
  int index = -1;
  const char* end = device.data() + device.size();
  const auto [ptr, ec] = std::from_chars(device.data() + prefix.size(), end, index);
  if (ec != std::errc() || ptr != end || index < 0) return std::nullopt;
  return index;
}

std::string uuid_text(const unsigned char (&bytes)[16]) {
  bool any = false;
  for (const unsigned char b : bytes) any |= b != 0;
  if (!any) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 0xF];
  }
  return out;
}

DeviceProbe probe_cuda() {
  DeviceProbe probe;
#if FEEDSCOPE_WITH_CUDA
  probe.built_with_cuda = true;
  cudaRuntimeGetVersion(&probe.runtime_version);
  cudaDriverGetVersion(&probe.driver_version);
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    probe.unavailable_reason = std::string(cudaGetErrorName(status)) + ": " +
                               cudaGetErrorString(status);
    cudaGetLastError();  // clear it so later runtime calls start clean
    return probe;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    char bus_id[32] = {};  // the header asks for 13 characters at least
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, i) != cudaSuccess) {
      bus_id[0] = '\0';
      cudaGetLastError();
    }
    unsigned char uuid[16] = {};
    std::memcpy(uuid, prop.uuid.bytes, sizeof uuid);
    probe.devices.push_back(CudaDevice{i, prop.name, prop.major, prop.minor,
                                       static_cast<std::uint64_t>(prop.totalGlobalMem),
                                       prop.multiProcessorCount, bus_id, uuid_text(uuid)});
  }
  if (probe.devices.empty()) probe.unavailable_reason = "no CUDA device found";
#else
  probe.unavailable_reason = "feedscope was built without CUDA (FEEDSCOPE_WITH_CUDA=OFF)";
#endif
  return probe;
}

}  // namespace feedscope
