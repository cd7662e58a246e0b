#include "cli/probe.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/trainer.h"
#include "pinned_memory/device_probe.h"
#include "profiler/cupti_probe.h"
#include "sampler/nvml_probe.h"
#include "sampler/proc_fs.h"

namespace feedscope {

namespace {

struct Facts {
  int cpus = 0;
  std::optional<MemInfo> memory;
  std::vector<std::string> disks;
  DeviceProbe cuda;
  CuptiProbe cupti;
  NvmlProbe nvml;
  std::string torch;
  bool torch_cuda = false;
};

Facts gather() {
  const ProcFs fs;
  Facts f;
  f.cpus = online_cpus(fs);
  if (const auto meminfo = fs.read("/proc/meminfo")) f.memory = parse_meminfo(*meminfo);
  f.disks = block_devices(fs);
  f.cuda = probe_cuda();
  f.cupti = probe_cupti();
  f.nvml = probe_nvml();
  f.torch = torch_version();
  f.torch_cuda = torch_cuda_available();
  return f;
}

std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1u << 30));
  return buf;
}

}  // namespace

std::string probe_text() {
  const Facts f = gather();
  std::string out = "feedscope " FEEDSCOPE_VERSION "\n";
  out += "cpus:          " + std::to_string(f.cpus) + "\n";
  out += "memory:        " +
         (f.memory ? gib(f.memory->total_bytes) + " total, " + gib(f.memory->available_bytes) +
                         " available"
                   : std::string("unavailable (/proc/meminfo unreadable)")) + "\n";
  std::string disks;
  for (const auto& d : f.disks) disks += (disks.empty() ? "" : ", ") + d;
  out += "block devices: " + (disks.empty() ? std::string("none found in /sys/block") : disks) + "\n";
  out += "torch:         " + f.torch + (f.torch_cuda ? " (CUDA available)" : " (no CUDA)") + "\n";
  if (!f.cuda.built_with_cuda) {
    out += "cuda:          unavailable: " + f.cuda.unavailable_reason + "\n";
  } else {
    out += "cuda:          runtime " + cuda_version_string(f.cuda.runtime_version) + ", driver " +
           cuda_version_string(f.cuda.driver_version) + ", " +
           std::to_string(f.cuda.devices.size()) + " device(s)" +
           (f.cuda.available() ? "" : ": unavailable: " + f.cuda.unavailable_reason) + "\n";
    for (const CudaDevice& d : f.cuda.devices) {
      out += "  cuda:" + std::to_string(d.index) + "       " + d.name + ", compute " +
             std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor) + ", " +
             gib(d.memory_bytes) + ", " + std::to_string(d.multiprocessors) + " SMs\n";
    }
  }
  out += "cupti:         " + std::string(f.cupti.available ? "" : "unavailable: ") + f.cupti.detail + "\n";
  out += "nvml:          " + std::string(f.nvml.available ? "available, " : "unavailable: ") +
         f.nvml.detail + "\n";
  return out;
}

std::string probe_json() {
  const Facts f = gather();
  nlohmann::ordered_json j;
  j["feedscope_version"] = FEEDSCOPE_VERSION;
  j["cpus"] = f.cpus;
  if (f.memory) {
    j["memory"] = {{"total_bytes", f.memory->total_bytes},
                   {"available_bytes", f.memory->available_bytes}};
  } else {
    j["memory"] = {{"unavailable", "/proc/meminfo unreadable"}};
  }
  j["block_devices"] = f.disks;
  j["torch"] = {{"version", f.torch}, {"cuda_available", f.torch_cuda}};
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const CudaDevice& d : f.cuda.devices) {
    devices.push_back({{"index", d.index}, {"name", d.name},
                       {"compute_capability", std::to_string(d.compute_major) + "." +
                                                  std::to_string(d.compute_minor)},
                       {"memory_bytes", d.memory_bytes}, {"multiprocessors", d.multiprocessors}});
  }
  j["cuda"] = {{"built_with_cuda", f.cuda.built_with_cuda},
               {"runtime", cuda_version_string(f.cuda.runtime_version)},
               {"driver", cuda_version_string(f.cuda.driver_version)},
               {"devices", devices}};
  if (!f.cuda.available()) j["cuda"]["unavailable"] = f.cuda.unavailable_reason;
  j["cupti"] = f.cupti.available ? nlohmann::ordered_json{{"version", f.cupti.detail}}
                                 : nlohmann::ordered_json{{"unavailable", f.cupti.detail}};
  j["nvml"] = f.nvml.available ? nlohmann::ordered_json{{"detail", f.nvml.detail}}
                               : nlohmann::ordered_json{{"unavailable", f.nvml.detail}};
  return j.dump(2) + "\n";
}

}  // namespace feedscope
