#include <dlfcn.h>

#include "sampler/gpu_source.h"

namespace feedscope {

namespace {

// The few NVML declarations we need, from nvml.h (stable ABI; NVML_SUCCESS is 0).
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr int kPcieTx = 0, kPcieRx = 1, kClockSm = 1;

class NvmlSource final : public GpuSource {
 public:
  NvmlSource() {
    lib_ = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) {
      const char* why = ::dlerror();
      reason_ = why ? why : "dlopen(libnvidia-ml.so.1) failed";
      return;
    }
    if (!bind(init_, "nvmlInit_v2") || !bind(shutdown_, "nvmlShutdown") ||
        !bind(count_, "nvmlDeviceGetCount_v2") || !bind(handle_, "nvmlDeviceGetHandleByIndex_v2") ||
        !bind(util_, "nvmlDeviceGetUtilizationRates") || !bind(memory_, "nvmlDeviceGetMemoryInfo")) {
      reason_ = "libnvidia-ml.so.1 lacks a required function";
      return;
    }
    bind(pcie_, "nvmlDeviceGetPcieThroughput");  // optional readings
    bind(clock_, "nvmlDeviceGetClockInfo");
    bind(power_, "nvmlDeviceGetPowerUsage");
    if (const int status = init_(); status != 0) {
      reason_ = "nvmlInit_v2 failed with status " + std::to_string(status);
      return;
    }
    initialized_ = true;
    unsigned int count = 0;
    if (count_(&count) != 0 || count == 0) {
      reason_ = "NVML sees no GPU";
      return;
    }
    for (unsigned int i = 0; i < count; ++i) {
      nvmlDevice_t device = nullptr;
      if (handle_(i, &device) == 0) devices_.push_back(device);
    }
  }
  ~NvmlSource() override {
    if (initialized_) shutdown_();
    if (lib_) ::dlclose(lib_);
  }

  std::vector<GpuSample> read() override {
    std::vector<GpuSample> out;
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      GpuSample s;
      s.index = static_cast<int>(i);
      nvmlUtilization_t u{};
      if (util_(devices_[i], &u) == 0) {
        s.util_ratio = u.gpu / 100.0;
        s.memory_util_ratio = u.memory / 100.0;
      }
      nvmlMemory_t m{};
      if (memory_(devices_[i], &m) == 0) {
        s.memory_used_bytes = m.used;
        s.memory_total_bytes = m.total;
      }
      unsigned int value = 0;
      if (pcie_ && pcie_(devices_[i], kPcieTx, &value) == 0) s.pcie_tx_bytes_per_s = value * 1024.0;
      if (pcie_ && pcie_(devices_[i], kPcieRx, &value) == 0) s.pcie_rx_bytes_per_s = value * 1024.0;
      if (clock_ && clock_(devices_[i], kClockSm, &value) == 0) s.sm_clock_mhz = value;
      if (power_ && power_(devices_[i], &value) == 0) s.power_watts = value / 1000.0;
      out.push_back(s);
    }
    return out;
  }

  std::string unavailable_reason() const override { return devices_.empty() ? reason_ : ""; }

 private:
  template <typename Fn>
  bool bind(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(::dlsym(lib_, name));
    return fn != nullptr;
  }
  void* lib_ = nullptr;
  bool initialized_ = false;
  std::string reason_;
  std::vector<nvmlDevice_t> devices_;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*count_)(unsigned int*) = nullptr;
  int (*handle_)(unsigned int, nvmlDevice_t*) = nullptr;
  int (*util_)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  int (*memory_)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  int (*pcie_)(nvmlDevice_t, int, unsigned int*) = nullptr;
  int (*clock_)(nvmlDevice_t, int, unsigned int*) = nullptr;
  int (*power_)(nvmlDevice_t, unsigned int*) = nullptr;
};

}  // namespace

std::unique_ptr<GpuSource> make_nvml_source() { return std::make_unique<NvmlSource>(); }

}  // namespace feedscope
