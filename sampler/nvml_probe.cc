#include "sampler/nvml_probe.h"

#include "sampler/gpu_source.h"

namespace feedscope {

NvmlProbe probe_nvml() {
  NvmlProbe probe;
  const auto source = make_nvml_source();
  probe.detail = source->unavailable_reason();
  if (probe.detail.empty()) {
    probe.available = true;
    probe.detail = std::to_string(source->read().size()) + " GPU(s) visible";
  }
  return probe;
}

}  // namespace feedscope
