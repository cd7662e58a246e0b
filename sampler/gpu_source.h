#pragma once
// Where GPU readings come from. Behind an interface so tests feed fabricated readings; the real
// one loads NVML at run time (dlopen), so feedscope has no build dependency on the driver.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sampler/utilization_sample.h"

namespace feedscope {

// Called from the sampling thread only.
class GpuSource {
 public:
  virtual ~GpuSource() = default;
  // One reading per GPU; empty when unavailable.
  virtual std::vector<GpuSample> read() = 0;
  // Empty when available, otherwise why not ("libnvidia-ml.so.1: cannot open ...").
  virtual std::string unavailable_reason() const = 0;
};

// How NVML finds a CUDA device of this process. Either may be empty where CUDA did not say.
struct CudaDeviceName {
  std::string pci_bus_id;  // cudaDeviceGetPCIBusId: "0000:3B:00.0" (a MIG instance: its GPU's)
  // cudaDeviceProp::uuid, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": a MIG instance's own, which
  // NVML gives its MIG handle ("MIG-" and the same digits), a whole GPU's ("GPU-...").
  std::string uuid;
};

// NVML through dlopen("libnvidia-ml.so.1"). Never throws: without a driver it reports why.
// `cuda`: the CUDA devices this process sees, in CUDA's order (cuda:0, cuda:1, ...). Given, each
// reading's GpuSample::index is the CUDA index of its GPU or MIG instance (read through its own
// NVML handle), and GPUs the process's CUDA does not see are left out; nullopt (no CUDA in the
// process), every GPU NVML sees, by NVML's index.
std::unique_ptr<GpuSource> make_nvml_source(
    std::optional<std::vector<CudaDeviceName>> cuda = std::nullopt);

}  // namespace feedscope
