#include "sampler/detail/nvml_devices.h"

#include <cctype>
#include <utility>

#include "sampler/pci_bus_id.h"

namespace feedscope::detail {

namespace {

struct NvmlGpu {
  struct Instance {
    nvmlDevice handle = nullptr;
    std::string uuid;
  };
  nvmlDevice handle = nullptr;
  std::string bus_id;  // empty where NVML did not say
  std::string uuid;    // likewise
  bool mig = false;    // in MIG mode now
  std::vector<Instance> instances;  // its MIG instances NVML gives a handle for
};

std::string uuid_of(const NvmlApi& api, nvmlDevice device) {
  char text[kNvmlUuidBytes] = {};
  if (api.uuid == nullptr || api.uuid(device, text, sizeof text) != 0) return "";
  text[sizeof text - 1] = '\0';
  return text;
}

std::string bus_id_of(const NvmlApi& api, nvmlDevice device) {
  NvmlPciInfo pci{};
  if (api.pci_info == nullptr || api.pci_info(device, &pci) != 0) return "";
  pci.busId[sizeof(pci.busId) - 1] = '\0';
  return pci.busId;
}

// The handles of a GPU's MIG instances, where it is in MIG mode; an empty slot is NOT_FOUND.
void find_instances(const NvmlApi& api, NvmlGpu& gpu) {
  unsigned int current = 0, pending = 0;
  if (api.mig_mode == nullptr || api.mig_mode(gpu.handle, &current, &pending) != 0 ||
      current != kNvmlMigEnabled)
    return;
  gpu.mig = true;
  unsigned int slots = 0;
  if (api.max_mig_devices == nullptr || api.mig_handle_by_index == nullptr ||
      api.max_mig_devices(gpu.handle, &slots) != 0)
    return;
  for (unsigned int i = 0; i < slots; ++i) {
    nvmlDevice instance = nullptr;
    if (api.mig_handle_by_index(gpu.handle, i, &instance) != 0) continue;
    gpu.instances.push_back({instance, uuid_of(api, instance)});
  }
}

std::vector<NvmlGpu> list_gpus(const NvmlApi& api, unsigned int count) {
  std::vector<NvmlGpu> out;
  for (unsigned int i = 0; i < count; ++i) {
    NvmlGpu gpu;
    if (api.handle_by_index(i, &gpu.handle) != 0) continue;
    gpu.bus_id = bus_id_of(api, gpu.handle);
    gpu.uuid = uuid_of(api, gpu.handle);
    find_instances(api, gpu);
    out.push_back(std::move(gpu));
  }
  return out;
}

// A UUID as CUDA and NVML can compare it: lower case, without NVML's "GPU-" or "MIG-".
std::string uuid_key(std::string_view uuid) {
  std::string out(uuid);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (out.starts_with("gpu-") || out.starts_with("mig-")) out.erase(0, 4);
  return out;
}

bool same_uuid(const std::string& a, const std::string& b) {
  return !a.empty() && !b.empty() && uuid_key(a) == uuid_key(b);
}

// The GPU `cuda` runs on: by its UUID, else by its PCI bus id (which a MIG instance shares with its
// GPU); null where neither matches.
const NvmlGpu* gpu_of(const std::vector<NvmlGpu>& gpus, const CudaDeviceName& cuda) {
  for (const NvmlGpu& gpu : gpus)
    if (same_uuid(gpu.uuid, cuda.uuid)) return &gpu;
  const std::optional<PciAddress> address = parse_pci_bus_id(cuda.pci_bus_id);
  if (!address) return nullptr;
  for (const NvmlGpu& gpu : gpus)
    if (parse_pci_bus_id(gpu.bus_id) == address) return &gpu;
  return nullptr;
}

std::string why_withheld(const NvmlApi& api, const NvmlGpu& gpu, const CudaDeviceName& cuda,
                         int index) {
  std::string out = "cuda:" + std::to_string(index) + " is a MIG instance (its GPU, PCI " +
                    (gpu.bus_id.empty() ? std::string("?") : gpu.bus_id) + ", is in MIG mode)";
  if (api.mig_handle_by_index == nullptr || api.max_mig_devices == nullptr)
    out += " and this NVML has no nvmlDeviceGetMigDeviceHandleByIndex";
  else
    out += " and none of the " + std::to_string(gpu.instances.size()) +
           " MIG instance handle(s) NVML gives has its UUID (" +
           (cuda.uuid.empty() ? std::string("CUDA gave none") : cuda.uuid) + ")";
  return out + ": the whole GPU's figures are not the instance's, so none is read";
}

// CUDA device `index` on `gpu`, no MIG instance of which has its UUID: the whole GPU, or nothing
// read where the GPU is in MIG mode (CUDA then runs on an instance of it, never on all of it).
NvmlTarget target_on(const NvmlApi& api, const NvmlGpu& gpu, const CudaDeviceName& cuda,
                     int index) {
  NvmlTarget t;
  t.index = index;
  t.handle = gpu.handle;
  if (gpu.mig) t.withheld = why_withheld(api, gpu, cuda, index);
  return t;
}

// A MIG instance's UUID is its own, apart from its GPU's.
std::optional<NvmlTarget> instance_anywhere(const std::vector<NvmlGpu>& gpus,
                                            const CudaDeviceName& cuda, int index) {
  for (const NvmlGpu& gpu : gpus)
    for (const NvmlGpu::Instance& instance : gpu.instances)
      if (same_uuid(instance.uuid, cuda.uuid))
        return NvmlTarget{instance.handle, index, instance.uuid, ""};
  return std::nullopt;
}

std::string unmatched_reason(const std::vector<NvmlGpu>& gpus,
                             const std::vector<CudaDeviceName>& cuda) {
  std::string nvml, ours;
  for (const NvmlGpu& gpu : gpus)
    nvml += (nvml.empty() ? "" : ", ") + (gpu.bus_id.empty() ? std::string("?") : gpu.bus_id);
  for (const CudaDeviceName& c : cuda)
    ours += (ours.empty() ? "" : ", ") + (c.pci_bus_id.empty() ? std::string("?") : c.pci_bus_id);
  return "none of the " + std::to_string(gpus.size()) + " GPU(s) NVML sees (PCI " +
         (nvml.empty() ? std::string("none") : nvml) + ") is a CUDA device of this process (PCI " +
         (ours.empty() ? std::string("none") : ours) + ")";
}

}  // namespace

NvmlTargets open_nvml_targets(const NvmlApi& api,
                              const std::optional<std::vector<CudaDeviceName>>& cuda) {
  NvmlTargets out;
  unsigned int count = 0;
  if (api.device_count(&count) != 0 || count == 0) {
    out.reason = "NVML sees no GPU";
    return out;
  }
  const std::vector<NvmlGpu> gpus = list_gpus(api, count);
  if (!cuda) {
    for (std::size_t i = 0; i < gpus.size(); ++i)
      out.targets.push_back({gpus[i].handle, static_cast<int>(i), "", ""});
  } else {
    for (std::size_t i = 0; i < cuda->size(); ++i) {
      const CudaDeviceName& c = (*cuda)[i];
      const int index = static_cast<int>(i);
      if (std::optional<NvmlTarget> instance = instance_anywhere(gpus, c, index)) {
        out.targets.push_back(std::move(*instance));
      } else if (const NvmlGpu* gpu = gpu_of(gpus, c)) {
        out.targets.push_back(target_on(api, *gpu, c, index));
      }
    }
    if (out.targets.empty() && !gpus.empty()) out.reason = unmatched_reason(gpus, *cuda);
  }
  if (out.targets.empty() && out.reason.empty())
    out.reason = "NVML gives no handle to any of its GPUs";
  return out;
}

}  // namespace feedscope::detail
