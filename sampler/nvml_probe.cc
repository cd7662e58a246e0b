#include "sampler/nvml_probe.h"

#include <dlfcn.h>

namespace feedscope {

NvmlProbe probe_nvml() {
  NvmlProbe probe;
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    probe.detail = why != nullptr ? why : "dlopen(libnvidia-ml.so.1) failed";
    return probe;
  }
  // Signatures from nvml.h; NVML_SUCCESS is 0.
  using InitFn = int (*)();
  using ShutdownFn = int (*)();
  using DriverFn = int (*)(char*, unsigned);
  auto init = reinterpret_cast<InitFn>(::dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<ShutdownFn>(::dlsym(lib, "nvmlShutdown"));
  auto driver = reinterpret_cast<DriverFn>(::dlsym(lib, "nvmlSystemGetDriverVersion"));
  if (init == nullptr || shutdown == nullptr) {
    probe.detail = "libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlShutdown";
  } else if (const int status = init(); status != 0) {
    probe.detail = "nvmlInit_v2 failed with status " + std::to_string(status);
  } else {
    char version[96] = {};
    if (driver != nullptr && driver(version, sizeof version) == 0) {
      probe.detail = std::string("driver ") + version;
    }
    probe.available = true;
    shutdown();
  }
  ::dlclose(lib);
  return probe;
}

}  // namespace feedscope
