#pragma once
// Which NVML handle reads which CUDA device of this process. A whole GPU is found by its UUID or
// its PCI bus id; a MIG instance (CUDA_VISIBLE_DEVICES=MIG-...: CUDA shows the instance, whose PCI
// bus id is its GPU's) only by its UUID, among the MIG handles of its GPU
// (nvmlDeviceGetMigDeviceHandleByIndex). A CUDA device on a GPU in MIG mode that no MIG handle
// matches is not read at all: the GPU's figures are not the instance's.
#include <optional>
#include <string>
#include <vector>

#include "sampler/detail/nvml_api.h"
#include "sampler/gpu_source.h"

namespace feedscope::detail {

struct NvmlTarget {
  nvmlDevice handle = nullptr;  // the GPU's, or its MIG instance's
  int index = 0;  // the name its samples carry: the CUDA index (NVML's where no CUDA was given)
  std::string mig;  // the MIG instance's UUID as NVML gives it ("MIG-..."); empty: a whole GPU
  // Not empty: nothing is read, every reading says this (a MIG instance NVML gives no handle for).
  std::string withheld;
};

struct NvmlTargets {
  std::vector<NvmlTarget> targets;  // by index
  std::string reason;  // why there is none, where there is none
};

// Opens NVML's devices through `api` (initialized) and matches them to `cuda`, as
// make_nvml_source takes it.
NvmlTargets open_nvml_targets(const NvmlApi& api,
                              const std::optional<std::vector<CudaDeviceName>>& cuda);

}  // namespace feedscope::detail
