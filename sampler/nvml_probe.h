#pragma once
#include <string>

namespace feedscope {

// Whether NVML can be loaded at run time (dlopen of libnvidia-ml.so.1), and why not.
struct NvmlProbe {
  bool available = false;
  std::string detail;  // the GPUs NVML sees when available, the reason otherwise
};
NvmlProbe probe_nvml();

}  // namespace feedscope
