#pragma once
#include <string>

namespace feedscope {

// What `feedscope probe` prints: CPUs, memory, block devices, CUDA, CUPTI, NVML, torch.
std::string probe_text();
std::string probe_json();

}  // namespace feedscope
