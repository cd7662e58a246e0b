#include <dlfcn.h>

#include <algorithm>
#include <condition_variable>
#include <initializer_list>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "sampler/detail/nvml_api.h"
#include "sampler/detail/nvml_devices.h"
#include "sampler/gpu_source.h"

namespace feedscope {

namespace detail {

namespace {

const char* nvml_status_name(nvmlReturn status) {
  static constexpr const char* kNames[] = {
      "SUCCESS", "UNINITIALIZED", "INVALID_ARGUMENT", "NOT_SUPPORTED", "NO_PERMISSION",
      "ALREADY_INITIALIZED", "NOT_FOUND", "INSUFFICIENT_SIZE", "INSUFFICIENT_POWER",
      "DRIVER_NOT_LOADED", "TIMEOUT", "IRQ_ISSUE", "LIBRARY_NOT_FOUND", "FUNCTION_NOT_FOUND",
      "CORRUPTED_INFOROM", "GPU_IS_LOST", "RESET_REQUIRED", "OPERATING_SYSTEM",
      "LIB_RM_VERSION_MISMATCH", "IN_USE", "MEMORY", "NO_DATA", "VGPU_ECC_NOT_SUPPORTED",
      "INSUFFICIENT_RESOURCES", "FREQ_NOT_SUPPORTED", "ARGUMENT_VERSION_MISMATCH", "DEPRECATED",
      "NOT_READY", "GPU_NOT_FOUND", "INVALID_STATE"};
  if (status >= 0 && status < static_cast<int>(std::size(kNames))) return kNames[status];
  return status == 999 ? "UNKNOWN" : nullptr;
}

// "nvmlDeviceGetUtilizationRates: status 3 (NOT_SUPPORTED)"
std::string nvml_error(const char* call, nvmlReturn status) {
  const char* name = nvml_status_name(status);
  return std::string(call) + ": status " + std::to_string(status) +
         (name ? std::string(" (") + name + ")" : std::string());
}

template <typename Fn>
bool bind(void* lib, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  return fn != nullptr;
}

// read() and unavailable_reason() are for one thread (the sampling thread). The PCIe readings
// come from a thread of the source's own, because nvmlDeviceGetPcieThroughput waits out a ~20 ms
// window per call (two per GPU), which would make a 10 Hz sampler's readings late and uneven;
// NVML is thread-safe. The destructor stops and joins that thread before NVML shuts down.
class NvmlSource final : public GpuSource {
 public:
  NvmlSource(NvmlLibrary nvml, const std::optional<std::vector<CudaDeviceName>>& cuda,
             std::chrono::milliseconds pcie_period)
      : nvml_(std::move(nvml)), pcie_period_(pcie_period) {
    const NvmlApi& api = nvml_.api;
    if (!nvml_.reason.empty()) {
      reason_ = nvml_.reason;
      return;
    }
    if (const nvmlReturn status = api.init(); status != 0) {
      reason_ = "nvmlInit_v2 failed with status " + std::to_string(status);
      return;
    }
    initialized_ = true;
    NvmlTargets opened = open_nvml_targets(api, cuda);
    devices_ = std::move(opened.targets);
    reason_ = std::move(opened.reason);
    pcie_.assign(devices_.size(), {});
    if (api.pcie_throughput && !devices_.empty())
      pcie_thread_ = std::jthread([this](std::stop_token stop) { refresh_pcie(stop); });
  }

  ~NvmlSource() override {
    pcie_thread_.request_stop();
    if (pcie_thread_.joinable()) pcie_thread_.join();
    if (initialized_) nvml_.api.shutdown();
  }

  std::vector<GpuSample> read() override {
    std::vector<GpuSample> out;
    for (std::size_t i = 0; i < devices_.size(); ++i) out.push_back(read_target(i));
    return out;
  }

  std::string unavailable_reason() const override { return devices_.empty() ? reason_ : ""; }

 private:
  GpuSample read_target(std::size_t i) {
    const NvmlApi& api = nvml_.api;
    const NvmlTarget& target = devices_[i];
    const nvmlDevice device = target.handle;
    GpuSample s;
    s.index = target.index;
    s.mig_instance = target.mig;
    if (!target.withheld.empty()) {
      for (const char* reading : kReadings) s.unavailable[reading] = target.withheld;
      return s;
    }
    NvmlUtilization u{};
    if (answered(s, {"util_ratio", "memory_util_ratio"}, "nvmlDeviceGetUtilizationRates",
                 api.utilization, device, &u)) {
      s.util_ratio = u.gpu / 100.0;
      s.memory_util_ratio = u.memory / 100.0;
    }
    NvmlMemory m{};
    if (answered(s, {"memory_used_bytes", "memory_total_bytes"}, "nvmlDeviceGetMemoryInfo",
                 api.memory, device, &m)) {
      s.memory_used_bytes = m.used;
      s.memory_total_bytes = m.total;
    }
    unsigned int value = 0;
    if (answered(s, {"sm_clock_mhz"}, "nvmlDeviceGetClockInfo", api.clock_info, device,
                 kNvmlClockSm, &value))
      s.sm_clock_mhz = value;
    if (!target.mig.empty()) {
      read_mig_instance(target, s);
      return s;
    }
    if (answered(s, {"power_watts"}, "nvmlDeviceGetPowerUsage", api.power_usage, device, &value))
      s.power_watts = value / 1000.0;
    if (api.pcie_throughput) {
      std::lock_guard lock(pcie_mutex_);
      s.pcie_tx_bytes_per_s = pcie_[i].tx.bytes_per_s;
      s.pcie_rx_bytes_per_s = pcie_[i].rx.bytes_per_s;
      if (!pcie_[i].tx.why.empty()) s.unavailable["pcie_tx_bytes_per_s"] = pcie_[i].tx.why;
      if (!pcie_[i].rx.why.empty()) s.unavailable["pcie_rx_bytes_per_s"] = pcie_[i].rx.why;
    } else {
      for (const char* reading : {"pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"})
        s.unavailable[reading] = not_in_library("nvmlDeviceGetPcieThroughput");
    }
    read_processes(target, s);
    return s;
  }

  static constexpr const char* kReadings[] = {
      "util_ratio",          "memory_util_ratio",   "memory_used_bytes",
      "memory_total_bytes",  "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s",
      "sm_clock_mhz",        "power_watts",         "process_sm_util_ratio"};

  // The rest of a MIG instance's readings, once utilization, memory and the SM clock are read
  // through its handle: its processes; not the GPU's power or PCIe link, which its instances share.
  void read_mig_instance(const NvmlTarget& target, GpuSample& s) {
    for (const char* reading : {"power_watts", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"})
      s.unavailable[reading] = "the GPU's, shared by its MIG instances: not read for MIG instance " +
                               target.mig;
    read_processes(target, s);
    for (auto& [reading, why] : s.unavailable) {
      if (why.find(target.mig) != std::string::npos) continue;
      why += " on MIG instance " + target.mig;
      if (why.find("(NOT_SUPPORTED)") != std::string::npos)
        why += ": NVML does not measure it per MIG instance, and the whole GPU's is not the "
               "instance's";
    }
  }

  // The processes with a context on the device, their memory, and their SM share over the
  // samples NVML took since the previous read (the sampling thread's only).
  void read_processes(const NvmlTarget& d, GpuSample& s) {
    const NvmlApi& api = nvml_.api;
    if (!api.running_processes) return;
    std::vector<NvmlProcessInfo> infos(16);
    unsigned int count = static_cast<unsigned int>(infos.size());
    nvmlReturn r = api.running_processes(d.handle, &count, infos.data());
    if (r == kNvmlErrorInsufficientSize && count <= 4096) {
      infos.resize(count + 8);
      count = static_cast<unsigned int>(infos.size());
      r = api.running_processes(d.handle, &count, infos.data());
    }
    if (r != 0) return;
    for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
      GpuProcessSample p;
      p.pid = static_cast<int>(infos[i].pid);
      if (infos[i].used_gpu_memory != ~0ULL) p.memory_used_bytes = infos[i].used_gpu_memory;
      s.processes.push_back(p);
    }
    if (!api.process_utilization || s.processes.empty()) return;
    static constexpr const char* kCall = "nvmlDeviceGetProcessUtilization";
    SmWindow& w = sm_windows_[d.index];
    unsigned int samples = 0;
    r = api.process_utilization(d.handle, nullptr, &samples, w.seen_us);
    // NOT_FOUND: no new sample since `seen`; the window stays open for the next read.
    if (r != kNvmlErrorInsufficientSize || samples == 0) {
      if (r != 0) s.unavailable["process_sm_util_ratio"] = nvml_error(kCall, r);
      return;
    }
    std::vector<NvmlProcessUtilization> util(samples);
    r = api.process_utilization(d.handle, util.data(), &samples, w.seen_us);
    if (r != 0) {
      s.unavailable["process_sm_util_ratio"] = nvml_error(kCall, r);
      return;
    }
    util.resize(std::min<std::size_t>(samples, util.size()));
    if (util.empty()) return;
    std::sort(util.begin(), util.end(), [](const auto& a, const auto& b) {
      return a.time_stamp < b.time_stamp;
    });
    std::map<int, std::vector<const NvmlProcessUtilization*>> by_pid;  // each oldest first
    for (const NvmlProcessUtilization& u : util) by_pid[static_cast<int>(u.pid)].push_back(&u);
    // A driver may give a process one sample per period it used the SMs (NVML samples at a fixed
    // period): then the median spacing of a process's samples is that period. The one this was
    // seen on (an H100, driver 580) gives one sample per process per read, its smUtil the average
    // since `seen`; no period then, and the sample stands for the whole stretch back to `seen`.
    std::vector<unsigned long long> gaps;
    for (const auto& [pid, list] : by_pid)
      for (std::size_t i = 1; i < list.size(); ++i)
        if (list[i]->time_stamp > list[i - 1]->time_stamp)
          gaps.push_back(list[i]->time_stamp - list[i - 1]->time_stamp);
    if (!gaps.empty()) {
      std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
      w.period_us = gaps[gaps.size() / 2];
    }
    const unsigned long long end = util.back().time_stamp;
    const bool first = w.seen_us == 0;
    if (first && w.period_us == 0) {
      w.seen_us = end;
      s.unavailable["process_sm_util_ratio"] =
          std::string(kCall) + ": a first read's averages cover a stretch NVML does not say";
      return;
    }
    const unsigned long long begin =
        first ? util.front().time_stamp - std::min(util.front().time_stamp, w.period_us) : w.seen_us;
    if (end <= begin) return;
    w.seen_us = end;
    s.sm_window_begin_us = begin;
    s.sm_window_end_us = end;
    const double elapsed = static_cast<double>(end - begin);
    for (GpuProcessSample& p : s.processes) {
      double busy = 0;  // smUtil (%) x microseconds; a process without a sample was idle
      if (const auto it = by_pid.find(p.pid); it != by_pid.end()) {
        unsigned long long previous = begin;
        for (const NvmlProcessUtilization* u : it->second) {
          unsigned long long stretch = u->time_stamp - std::min(u->time_stamp, previous);
          if (w.period_us != 0) stretch = std::min(stretch, w.period_us);  // no sample: idle
          busy += u->sm_util * static_cast<double>(stretch);
          previous = u->time_stamp;
        }
      }
      p.sm_util_ratio = std::clamp(busy / elapsed / 100.0, 0.0, 1.0);
    }
  }
  // Whether NVML's `call` (`fn`, null where the library lacks it) answered; where it did not, each
  // of `readings` gets the reason.
  template <typename Fn, typename... Args>
  static bool answered(GpuSample& s, std::initializer_list<const char*> readings, const char* call,
                       Fn fn, Args... args) {
    std::string why;
    if (fn == nullptr) {
      why = not_in_library(call);
    } else if (const nvmlReturn status = fn(args...); status != 0) {
      why = nvml_error(call, status);
    } else {
      return true;
    }
    for (const char* reading : readings) s.unavailable[reading] = why;
    return false;
  }
  static std::string not_in_library(const char* call) {
    return std::string(call) + ": not in this NVML library";
  }

  struct PcieReading {  // of the latest window: bytes/s, or why there is none
    std::optional<double> bytes_per_s;
    std::string why;
  };
  struct Pcie {
    PcieReading tx, rx;
  };

  void refresh_pcie(std::stop_token stop) {
    std::mutex wait_mutex;
    std::condition_variable_any wait_cv;
    while (!stop.stop_requested()) {
      for (std::size_t i = 0; i < devices_.size() && !stop.stop_requested(); ++i) {
        if (!devices_[i].mig.empty() || !devices_[i].withheld.empty()) continue;  // the GPU's
        const nvmlDevice device = devices_[i].handle;
        unsigned int tx = 0, rx = 0;
        const nvmlReturn tx_status = nvml_.api.pcie_throughput(device, kNvmlPcieTxBytes, &tx);
        const nvmlReturn rx_status = nvml_.api.pcie_throughput(device, kNvmlPcieRxBytes, &rx);
        const auto reading = [](nvmlReturn status, unsigned int kb_per_s) {
          if (status != 0)
            return PcieReading{std::nullopt, nvml_error("nvmlDeviceGetPcieThroughput", status)};
          return PcieReading{kb_per_s * 1024.0, ""};  // NVML gives KB/s
        };
        PcieReading tx_reading = reading(tx_status, tx), rx_reading = reading(rx_status, rx);
        std::lock_guard lock(pcie_mutex_);
        pcie_[i].tx = std::move(tx_reading);
        pcie_[i].rx = std::move(rx_reading);
      }
      std::unique_lock lock(wait_mutex);
      wait_cv.wait_for(lock, stop, pcie_period_, [] { return false; });
    }
  }

  NvmlLibrary nvml_;
  std::chrono::milliseconds pcie_period_;
  bool initialized_ = false;
  std::string reason_;
  std::vector<NvmlTarget> devices_;  // set in the constructor, read-only after
  // NVML's per-process samples of a device so far, by device index (the sampling thread's).
  struct SmWindow {
    unsigned long long seen_us = 0;  // the newest sample read; 0: none yet
    // NVML's sample period, as last estimated; 0 while no process had two samples in one read.
    unsigned long long period_us = 0;
  };
  std::map<int, SmWindow> sm_windows_;

  // Below state is shared with the PCIe thread, guarded by pcie_mutex_.
  std::mutex pcie_mutex_;
  std::vector<Pcie> pcie_;  // by position in devices_

  std::jthread pcie_thread_;
};

}  // namespace

NvmlLibrary load_nvml(const char* name) {
  NvmlLibrary out;
  void* lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    out.reason = why ? why : std::string("dlopen(") + name + ") failed";
    return out;
  }
  out.library = std::shared_ptr<void>(lib, [](void* l) { ::dlclose(l); });
  NvmlApi& a = out.api;
  if (!bind(lib, a.init, "nvmlInit_v2") || !bind(lib, a.shutdown, "nvmlShutdown") ||
      !bind(lib, a.device_count, "nvmlDeviceGetCount_v2") ||
      !bind(lib, a.handle_by_index, "nvmlDeviceGetHandleByIndex_v2") ||
      !bind(lib, a.utilization, "nvmlDeviceGetUtilizationRates") ||
      !bind(lib, a.memory, "nvmlDeviceGetMemoryInfo")) {
    out.reason = std::string(name) + " lacks a required function";
    return out;
  }
  bind(lib, a.pcie_throughput, "nvmlDeviceGetPcieThroughput");  // optional readings
  bind(lib, a.clock_info, "nvmlDeviceGetClockInfo");
  bind(lib, a.power_usage, "nvmlDeviceGetPowerUsage");
  bind(lib, a.pci_info, "nvmlDeviceGetPciInfo_v3");
  bind(lib, a.running_processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  bind(lib, a.process_utilization, "nvmlDeviceGetProcessUtilization");
  bind(lib, a.mig_mode, "nvmlDeviceGetMigMode");
  bind(lib, a.max_mig_devices, "nvmlDeviceGetMaxMigDeviceCount");
  bind(lib, a.mig_handle_by_index, "nvmlDeviceGetMigDeviceHandleByIndex");
  bind(lib, a.uuid, "nvmlDeviceGetUUID");
  return out;
}

std::unique_ptr<GpuSource> make_nvml_source(NvmlLibrary nvml,
                                            std::optional<std::vector<CudaDeviceName>> cuda,
                                            std::chrono::milliseconds pcie_period) {
  return std::make_unique<NvmlSource>(std::move(nvml), cuda, pcie_period);
}

}  // namespace detail

std::unique_ptr<GpuSource> make_nvml_source(std::optional<std::vector<CudaDeviceName>> cuda) {
  return detail::make_nvml_source(detail::load_nvml(), std::move(cuda));
}

}  // namespace feedscope
