#pragma once
// NVML as a table of function pointers, loaded at run time with dlopen("libnvidia-ml.so.1") (no
// build dependency on the driver), so that tests hand the NVML source a fake NVML with fabricated
// readings, as profiler/detail/cupti_api.h does for CUPTI. The declarations are nvml.h's (a
// stable C ABI; the driver ships no header on a machine without the GPU Deployment Kit).
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sampler/gpu_source.h"

namespace feedscope::detail {

using nvmlReturn = int;  // nvmlReturn_t; NVML_SUCCESS is 0
using nvmlDevice = struct nvmlDevice_st*;

struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlPciInfo {  // nvmlPciInfo_t, as nvmlDeviceGetPciInfo_v3 fills it
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // "00000000:3B:00.0"
};
static_assert(sizeof(NvmlPciInfo) == 68, "nvmlPciInfo_t's layout");

inline constexpr int kNvmlPcieTxBytes = 0;  // NVML_PCIE_UTIL_TX_BYTES
// nvmlProcessInfo_v2_t, as nvmlDeviceGetComputeRunningProcesses_v3 fills it (NVML API 12).
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;  // NVML_VALUE_NOT_AVAILABLE (~0) where it cannot tell
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
static_assert(sizeof(NvmlProcessInfo) == 24, "nvmlProcessInfo_v2_t's layout");
// nvmlProcessUtilizationSample_t.
struct NvmlProcessUtilization {
  unsigned int pid;
  unsigned long long time_stamp;  // microseconds
  unsigned int sm_util, mem_util, enc_util, dec_util;  // percent
};
static_assert(sizeof(NvmlProcessUtilization) == 32, "nvmlProcessUtilizationSample_t's layout");
inline constexpr int kNvmlErrorInsufficientSize = 7;  // NVML_ERROR_INSUFFICIENT_SIZE

inline constexpr int kNvmlPcieRxBytes = 1;  // NVML_PCIE_UTIL_RX_BYTES
inline constexpr int kNvmlClockSm = 1;      // NVML_CLOCK_SM

// Every NVML entry point feedscope calls. The first six are required; a null optional one
// leaves its readings empty, with the reason (pci_info: the device cannot be matched to a CUDA
// device).
struct NvmlApi {
  nvmlReturn (*init)() = nullptr;                                  // nvmlInit_v2
  nvmlReturn (*shutdown)() = nullptr;                              // nvmlShutdown
  nvmlReturn (*device_count)(unsigned int*) = nullptr;             // nvmlDeviceGetCount_v2
  nvmlReturn (*handle_by_index)(unsigned int, nvmlDevice*) = nullptr;  // ..GetHandleByIndex_v2
  nvmlReturn (*utilization)(nvmlDevice, NvmlUtilization*) = nullptr;  // ..GetUtilizationRates
  nvmlReturn (*memory)(nvmlDevice, NvmlMemory*) = nullptr;         // nvmlDeviceGetMemoryInfo
  // nvmlDeviceGetPcieThroughput: KB/s over a ~20 ms window it samples while the caller waits.
  nvmlReturn (*pcie_throughput)(nvmlDevice, int, unsigned int*) = nullptr;
  nvmlReturn (*clock_info)(nvmlDevice, int, unsigned int*) = nullptr;  // nvmlDeviceGetClockInfo
  nvmlReturn (*power_usage)(nvmlDevice, unsigned int*) = nullptr;  // nvmlDeviceGetPowerUsage, mW
  nvmlReturn (*pci_info)(nvmlDevice, NvmlPciInfo*) = nullptr;      // nvmlDeviceGetPciInfo_v3
  // nvmlDeviceGetComputeRunningProcesses_v3: the processes with a CUDA context on the device.
  nvmlReturn (*running_processes)(nvmlDevice, unsigned int*, NvmlProcessInfo*) = nullptr;
  // nvmlDeviceGetProcessUtilization: per-process SM use since a timestamp; a process that did not
  // use the SMs has no sample. An H100 on driver 580 gives one sample per process, its smUtil the
  // average since the timestamp; a driver may also give one per sample period (see read_processes).
  nvmlReturn (*process_utilization)(nvmlDevice, NvmlProcessUtilization*, unsigned int*,
                                    unsigned long long) = nullptr;
  // MIG (A100, H100 and later): a GPU's mode (current, pending), how many instances it can hold,
  // the handle of each (NOT_FOUND for an empty slot), and every device's UUID. A MIG handle reads
  // its instance's memory; utilization NVML does not measure per instance (NOT_SUPPORTED).
  nvmlReturn (*mig_mode)(nvmlDevice, unsigned int*, unsigned int*) = nullptr;  // ..GetMigMode
  nvmlReturn (*max_mig_devices)(nvmlDevice, unsigned int*) = nullptr;  // ..GetMaxMigDeviceCount
  // nvmlDeviceGetMigDeviceHandleByIndex
  nvmlReturn (*mig_handle_by_index)(nvmlDevice, unsigned int, nvmlDevice*) = nullptr;
  nvmlReturn (*uuid)(nvmlDevice, char*, unsigned int) = nullptr;  // nvmlDeviceGetUUID
};
inline constexpr unsigned int kNvmlMigEnabled = 1;  // NVML_DEVICE_MIG_ENABLE
inline constexpr unsigned int kNvmlUuidBytes = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

// A loaded NVML, or why there is none. `library` keeps the dlopen handle open while shared.
struct NvmlLibrary {
  NvmlApi api;
  std::shared_ptr<void> library;
  std::string reason;  // empty when every required entry point is in api
};
NvmlLibrary load_nvml(const char* name = "libnvidia-ml.so.1");

// The NVML source over `api` (initialized here, shut down when the source goes). `cuda` as
// make_nvml_source takes it; `pcie_period`: the pause between two rounds of PCIe readings.
std::unique_ptr<GpuSource> make_nvml_source(
    NvmlLibrary nvml, std::optional<std::vector<CudaDeviceName>> cuda,
    std::chrono::milliseconds pcie_period = std::chrono::milliseconds(100));

}  // namespace feedscope::detail
