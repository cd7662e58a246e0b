// The NVML source over a fake NVML (sampler/detail/nvml_api.h's table) with fabricated readings.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "sampler/detail/nvml_api.h"
#include "sampler/gpu_source.h"

namespace feedscope {
namespace {

using detail::nvmlDevice;
using detail::nvmlReturn;
using namespace std::chrono_literals;

// Bounds every wait of these tests, so that a broken source fails them instead of hanging them.
constexpr auto kBound = 20s;

// One fake machine. NVML GPU i reports utilization 10 + i %, (i + 1) GiB used, PCIe TX
// (i + 1) x 1000 KB/s and RX (i + 1) x 2000 KB/s; its PCIe calls wait while the gate is closed.
struct FakeNvml {
  std::vector<std::string> bus_ids;  // NVML's order; "" : nvmlDeviceGetPciInfo_v3 fails
  nvmlReturn init_status = 0;
  int inits = 0, shutdowns = 0;

  std::mutex mutex;
  std::condition_variable cv;
  bool gate_open = true;
  int pcie_started = 0, pcie_finished = 0;
  std::thread::id pcie_thread;

  // What nvmlDeviceGetProcessUtilization keeps; it returns those newer than the caller's timestamp.
  std::vector<detail::NvmlProcessUtilization> sm_samples;

  // MIG: the GPUs in MIG mode, by NVML index, and how many instances each holds (of 7 slots).
  std::map<unsigned, unsigned> mig_instances;
};
FakeNvml* fake = nullptr;

nvmlDevice handle_of(unsigned i) { return reinterpret_cast<nvmlDevice>(std::uintptr_t{i} + 1); }
unsigned index_of(nvmlDevice d) {
  return static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(d) - 1);
}
// MIG instance j of GPU i: a handle of its own, far from the GPUs'.
constexpr std::uintptr_t kMigHandles = 1000;
nvmlDevice mig_handle_of(unsigned gpu, unsigned j) {
  return reinterpret_cast<nvmlDevice>(kMigHandles + 10 * std::uintptr_t{gpu} + j);
}
bool is_mig(nvmlDevice d) { return reinterpret_cast<std::uintptr_t>(d) >= kMigHandles; }
unsigned mig_slot_of(nvmlDevice d) {
  return static_cast<unsigned>((reinterpret_cast<std::uintptr_t>(d) - kMigHandles) % 10);
}
// NVML's UUIDs: "GPU-0000000i-..." for GPU i, "MIG-00000i0j-..." for its instance j.
std::string gpu_uuid(unsigned i) {
  return "GPU-0000000" + std::to_string(i) + "-aaaa-bbbb-cccc-dddddddddddd";
}
std::string mig_uuid(unsigned gpu, unsigned j) {
  return "MIG-00000" + std::to_string(gpu) + "0" + std::to_string(j) +
         "-aaaa-bbbb-cccc-dddddddddddd";
}

nvmlReturn fake_init() { return ++fake->inits, fake->init_status; }
nvmlReturn fake_shutdown() { return ++fake->shutdowns, 0; }
nvmlReturn fake_count(unsigned* n) { return *n = static_cast<unsigned>(fake->bus_ids.size()), 0; }
nvmlReturn fake_handle(unsigned i, nvmlDevice* d) { return *d = handle_of(i), 0; }
nvmlReturn fake_util(nvmlDevice d, detail::NvmlUtilization* u) {
  if (is_mig(d)) return 3;  // NVML_ERROR_NOT_SUPPORTED: no utilization per MIG instance
  *u = {10 + index_of(d), 50};
  return 0;
}
// A MIG instance j: 10 GiB, (j + 1) x 256 MiB used.
nvmlReturn fake_memory(nvmlDevice d, detail::NvmlMemory* m) {
  m->total = is_mig(d) ? 10ull << 30 : 80ull << 30;
  m->used = is_mig(d) ? (mig_slot_of(d) + 1ull) << 28 : (index_of(d) + 1ull) << 30;
  m->free = m->total - m->used;
  return 0;
}
nvmlReturn fake_pci(nvmlDevice d, detail::NvmlPciInfo* p) {
  const std::string& id = fake->bus_ids.at(index_of(d));
  if (id.empty()) return 999;  // NVML_ERROR_UNKNOWN
  std::strncpy(p->busId, id.c_str(), sizeof(p->busId) - 1);
  return 0;
}
nvmlReturn fake_pcie(nvmlDevice d, int counter, unsigned* kb_per_s) {
  std::unique_lock lock(fake->mutex);
  ++fake->pcie_started;
  fake->pcie_thread = std::this_thread::get_id();
  fake->cv.notify_all();
  const bool opened = fake->cv.wait_for(lock, kBound, [] { return fake->gate_open; });
  ++fake->pcie_finished;
  fake->cv.notify_all();
  if (!opened) return 10;  // NVML_ERROR_TIMEOUT
  *kb_per_s = (index_of(d) + 1) * (counter == detail::kNvmlPcieTxBytes ? 1000 : 2000);
  return 0;
}

// Two processes on every GPU: 20 of them (more than a first call's buffer holds) on GPU 1; one on
// a MIG instance.
nvmlReturn fake_processes(nvmlDevice d, unsigned* count, detail::NvmlProcessInfo* infos) {
  const unsigned n = is_mig(d) ? 1 : index_of(d) == 1 ? 20 : 2;
  if (*count < n) {
    *count = n;
    return detail::kNvmlErrorInsufficientSize;
  }
  for (unsigned i = 0; i < n; ++i)
    infos[i] = {1000 + i, i == 1 ? ~0ULL : (i + 1ULL) << 20, 0, 0};
  *count = n;
  return 0;
}
// Samples of process 1000 at 30 % and 50 % SM after timestamp 0, none after 200.
nvmlReturn fake_process_util(nvmlDevice, detail::NvmlProcessUtilization* util, unsigned* count,
                             unsigned long long since) {
  const unsigned n = since < 200 ? 2 : 0;
  if (util == nullptr || *count < n) {
    *count = n;
    return n == 0 ? 6 : detail::kNvmlErrorInsufficientSize;  // 6: NVML_ERROR_NOT_FOUND
  }
  util[0] = {1000, 100, 30, 0, 0, 0};
  util[1] = {1000, 200, 50, 0, 0, 0};
  *count = n;
  return 0;
}

nvmlReturn fake_mig_mode(nvmlDevice d, unsigned* current, unsigned* pending) {
  if (is_mig(d)) return 3;
  *current = *pending = fake->mig_instances.contains(index_of(d)) ? detail::kNvmlMigEnabled : 0;
  return 0;
}
nvmlReturn fake_max_mig(nvmlDevice, unsigned* count) { return *count = 7, 0; }
nvmlReturn fake_mig_handle(nvmlDevice d, unsigned j, nvmlDevice* mig) {
  const auto it = fake->mig_instances.find(index_of(d));
  if (it == fake->mig_instances.end()) return 3;
  if (j >= it->second) return 6;  // NVML_ERROR_NOT_FOUND: an empty slot
  *mig = mig_handle_of(index_of(d), j);
  return 0;
}
nvmlReturn fake_uuid(nvmlDevice d, char* text, unsigned size) {
  const std::uintptr_t raw = reinterpret_cast<std::uintptr_t>(d);
  const std::string uuid = is_mig(d) ? mig_uuid(static_cast<unsigned>((raw - kMigHandles) / 10),
                                                mig_slot_of(d))
                                     : gpu_uuid(index_of(d));
  if (uuid.size() >= size) return detail::kNvmlErrorInsufficientSize;
  std::strcpy(text, uuid.c_str());
  return 0;
}
// Per-process SM use is not measured on a MIG instance.
nvmlReturn fake_process_util_not_on_mig(nvmlDevice d, detail::NvmlProcessUtilization* util,
                                        unsigned* count, unsigned long long since) {
  if (is_mig(d)) return 3;
  return fake_process_util(d, util, count, since);
}

// A MIG instance or a vGPU: NVML_ERROR_NOT_SUPPORTED for every device-wide reading.
constexpr nvmlReturn kNotSupported = 3;
nvmlReturn unsupported_util(nvmlDevice, detail::NvmlUtilization*) { return kNotSupported; }
nvmlReturn unsupported_memory(nvmlDevice, detail::NvmlMemory*) { return kNotSupported; }
nvmlReturn unsupported_clock(nvmlDevice, int, unsigned*) { return kNotSupported; }
nvmlReturn unsupported_power(nvmlDevice, unsigned*) { return kNotSupported; }
nvmlReturn unsupported_pcie(nvmlDevice, int, unsigned*) { return kNotSupported; }

// FakeNvml::sm_samples newer than `since`, on every GPU.
nvmlReturn fake_sm_samples(nvmlDevice, detail::NvmlProcessUtilization* util, unsigned* count,
                           unsigned long long since) {
  std::vector<detail::NvmlProcessUtilization> newer;
  for (const detail::NvmlProcessUtilization& u : fake->sm_samples)
    if (u.time_stamp > since) newer.push_back(u);
  if (newer.empty()) return 6;  // NVML_ERROR_NOT_FOUND
  if (util == nullptr || *count < newer.size()) {
    *count = static_cast<unsigned>(newer.size());
    return detail::kNvmlErrorInsufficientSize;
  }
  std::copy(newer.begin(), newer.end(), util);
  *count = static_cast<unsigned>(newer.size());
  return 0;
}

class NvmlSourceTest : public ::testing::Test {
 protected:
  NvmlSourceTest() { fake = &nvml; }
  ~NvmlSourceTest() override { fake = nullptr; }

  static detail::NvmlLibrary library() {
    detail::NvmlLibrary lib;
    lib.api = {fake_init, fake_shutdown, fake_count, fake_handle, fake_util, fake_memory,
               fake_pcie, nullptr, nullptr, fake_pci};
    return lib;
  }
  // Reads until every GPU shows its fabricated PCIe rates, within kBound.
  static std::vector<GpuSample> read_until_pcie(GpuSource& source) {
    const auto end = std::chrono::steady_clock::now() + kBound;
    std::vector<GpuSample> got;
    do {
      got = source.read();
      const bool all = std::all_of(got.begin(), got.end(), [](const GpuSample& g) {
        return g.pcie_rx_bytes_per_s.has_value();
      });
      if (!got.empty() && all) return got;
      std::this_thread::sleep_for(1ms);  // waiting for an event, not measuring time
    } while (std::chrono::steady_clock::now() < end);
    ADD_FAILURE() << "the PCIe readings never arrived";
    return got;
  }

  // A source over processes 1000 and 1001 on one GPU, their SM use from FakeNvml::sm_samples.
  std::unique_ptr<GpuSource> sm_source() {
    nvml.bus_ids = {"00000000:18:00.0"};
    detail::NvmlLibrary lib = library();
    lib.api.running_processes = fake_processes;
    lib.api.process_utilization = fake_sm_samples;
    return detail::make_nvml_source(std::move(lib), std::nullopt, 1ms);
  }
  void add_sm_sample(unsigned pid, unsigned long long time_us, unsigned sm_percent) {
    nvml.sm_samples.push_back({pid, time_us, sm_percent, 0, 0, 0});
  }

  FakeNvml nvml;
};

TEST_F(NvmlSourceTest, ProcessesOnEachGpuWithTheirMemoryAndRecentSmShare) {
  nvml.bus_ids = {"00000000:18:00.0", "00000000:3B:00.0"};
  detail::NvmlLibrary lib = library();
  lib.api.running_processes = fake_processes;
  lib.api.process_utilization = fake_process_util;
  const auto source = detail::make_nvml_source(std::move(lib), std::nullopt, 1ms);
  std::vector<GpuSample> got = source->read();
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(got[0].processes.size(), 2u);
  ASSERT_EQ(got[1].processes.size(), 20u) << "a second call with a buffer large enough";
  const GpuProcessSample& first = got[0].processes[0];
  EXPECT_EQ(first.pid, 1000);
  EXPECT_EQ(first.memory_used_bytes, 1u << 20);
  ASSERT_TRUE(first.sm_util_ratio);
  EXPECT_DOUBLE_EQ(*first.sm_util_ratio, 0.4) << "in the 2 periods from 0 to 200 us";
  EXPECT_FALSE(got[0].processes[1].memory_used_bytes) << "NVML_VALUE_NOT_AVAILABLE";
  ASSERT_TRUE(got[0].processes[1].sm_util_ratio) << "no samples of that process: idle";
  EXPECT_EQ(*got[0].processes[1].sm_util_ratio, 0);
  got = source->read();
  EXPECT_FALSE(got[0].processes[0].sm_util_ratio) << "only samples newer than the last read";
}

// What an H100 with driver 580 does: one sample per process per read, stamped at NVML's latest
// tick, its smUtil the average since the caller's timestamp; a process that did not use the SMs
// has none. Here process 1000 runs 25 % of every second, and reads come 1 s, then 2 s apart.
TEST_F(NvmlSourceTest, OneSamplePerProcessIsItsAverageSinceThePreviousRead) {
  add_sm_sample(1001, 1'000'000, 1);
  add_sm_sample(1000, 2'800'000, 7);
  const auto source = sm_source();
  std::vector<GpuSample> got = source->read();
  EXPECT_FALSE(got[0].processes[0].sm_util_ratio) << "averaged over what came before: unknown";
  EXPECT_FALSE(got[0].processes[1].sm_util_ratio);
  EXPECT_EQ(got[0].unavailable.at("process_sm_util_ratio"),
            "nvmlDeviceGetProcessUtilization: a first read's averages cover a stretch NVML does "
            "not say");
  add_sm_sample(1000, 3'800'000, 26);
  got = source->read();
  ASSERT_TRUE(got[0].processes[0].sm_util_ratio);
  EXPECT_NEAR(*got[0].processes[0].sm_util_ratio, 0.26, 1e-9);
  ASSERT_TRUE(got[0].processes[1].sm_util_ratio) << "no sample: it did not use the SMs";
  EXPECT_EQ(*got[0].processes[1].sm_util_ratio, 0);
  EXPECT_EQ(got[0].sm_window_begin_us, 2'800'000u);
  EXPECT_EQ(got[0].sm_window_end_us, 3'800'000u);
  add_sm_sample(1000, 5'800'000, 26);
  got = source->read();
  ASSERT_TRUE(got[0].processes[0].sm_util_ratio);
  EXPECT_NEAR(*got[0].processes[0].sm_util_ratio, 0.26, 1e-9) << "2 s at 26 %, not 2 periods";
}

// A driver that gives a process one sample per period it used the SMs in, and none for the others.
TEST_F(NvmlSourceTest, SamplesPerPeriodCountThePeriodsWithoutASampleAsIdle) {
  for (unsigned long long t = 100'000; t <= 1'000'000; t += 100'000) {  // a 100 ms period
    add_sm_sample(1001, t, 10);
    if (t == 300'000 || t == 700'000) add_sm_sample(1000, t, 100);
  }
  const auto source = sm_source();
  const std::vector<GpuSample> got = source->read();
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].processes.size(), 2u);
  ASSERT_TRUE(got[0].processes[0].sm_util_ratio);
  EXPECT_NEAR(*got[0].processes[0].sm_util_ratio, 0.2, 1e-9)
      << "busy in 2 of the 10 periods from 0 to 1 s, not busy";
  ASSERT_TRUE(got[0].processes[1].sm_util_ratio);
  EXPECT_NEAR(*got[0].processes[1].sm_util_ratio, 0.1, 1e-9);
}

TEST_F(NvmlSourceTest, SamplesPerPeriodOverTheTimeSinceThePreviousReadsNewestSample) {
  for (unsigned long long t = 100'000; t <= 1'000'000; t += 100'000) add_sm_sample(1000, t, 50);
  const auto source = sm_source();
  source->read();
  add_sm_sample(1000, 1'200'000, 100);
  add_sm_sample(1000, 1'300'000, 100);
  std::vector<GpuSample> got = source->read();
  ASSERT_TRUE(got[0].processes[0].sm_util_ratio);
  EXPECT_NEAR(*got[0].processes[0].sm_util_ratio, 2 / 3.0, 1e-9)
      << "2 busy periods of the 3 from 1.0 to 1.3 s";
  ASSERT_TRUE(got[0].processes[1].sm_util_ratio) << "a window with no sample of it: idle";
  EXPECT_EQ(*got[0].processes[1].sm_util_ratio, 0);
  EXPECT_EQ(got[0].sm_window_begin_us, 1'000'000u);
  EXPECT_EQ(got[0].sm_window_end_us, 1'300'000u);

  add_sm_sample(1000, 1'500'000, 100);
  got = source->read();
  ASSERT_TRUE(got[0].processes[0].sm_util_ratio) << "one sample: the period NVML samples at";
  EXPECT_NEAR(*got[0].processes[0].sm_util_ratio, 0.5, 1e-9) << "1 busy period of 2";

  got = source->read();
  EXPECT_FALSE(got[0].processes[0].sm_util_ratio) << "no sample since: no window has ended";
  EXPECT_EQ(got[0].sm_window_end_us, 0u);
}

TEST_F(NvmlSourceTest, AReadingWhoseCallFailsIsEmptyWithTheCallAndItsStatusNotZero) {
  nvml.bus_ids = {"00000000:18:00.0"};
  detail::NvmlLibrary lib = library();
  lib.api.utilization = unsupported_util;
  lib.api.memory = unsupported_memory;
  lib.api.clock_info = unsupported_clock;
  lib.api.power_usage = unsupported_power;
  lib.api.pcie_throughput = unsupported_pcie;
  const auto source = detail::make_nvml_source(lib, std::nullopt, 1ms);
  ASSERT_EQ(source->unavailable_reason(), "") << "the GPU is there; some readings are not";
  const auto end = std::chrono::steady_clock::now() + kBound;
  std::vector<GpuSample> got;
  do {  // the PCIe readings come from the source's own thread
    got = source->read();
    ASSERT_EQ(got.size(), 1u);
    if (got[0].unavailable.contains("pcie_rx_bytes_per_s")) break;
    std::this_thread::sleep_for(1ms);  // waiting for an event, not measuring time
  } while (std::chrono::steady_clock::now() < end);
  const GpuSample& g = got[0];
  for (const auto& reading : {g.util_ratio, g.memory_util_ratio, g.pcie_tx_bytes_per_s,
                              g.pcie_rx_bytes_per_s, g.sm_clock_mhz, g.power_watts})
    EXPECT_FALSE(reading) << "not measured, not 0";
  EXPECT_FALSE(g.memory_used_bytes);
  EXPECT_FALSE(g.memory_total_bytes);
  const std::map<std::string, std::string> want = {
      {"util_ratio", "nvmlDeviceGetUtilizationRates: status 3 (NOT_SUPPORTED)"},
      {"memory_util_ratio", "nvmlDeviceGetUtilizationRates: status 3 (NOT_SUPPORTED)"},
      {"memory_used_bytes", "nvmlDeviceGetMemoryInfo: status 3 (NOT_SUPPORTED)"},
      {"memory_total_bytes", "nvmlDeviceGetMemoryInfo: status 3 (NOT_SUPPORTED)"},
      {"sm_clock_mhz", "nvmlDeviceGetClockInfo: status 3 (NOT_SUPPORTED)"},
      {"power_watts", "nvmlDeviceGetPowerUsage: status 3 (NOT_SUPPORTED)"},
      {"pcie_tx_bytes_per_s", "nvmlDeviceGetPcieThroughput: status 3 (NOT_SUPPORTED)"},
      {"pcie_rx_bytes_per_s", "nvmlDeviceGetPcieThroughput: status 3 (NOT_SUPPORTED)"}};
  EXPECT_EQ(g.unavailable, want);
}

TEST_F(NvmlSourceTest, WithoutCudaEveryGpuByNvmlsIndex) {
  nvml.bus_ids = {"00000000:18:00.0", "00000000:3B:00.0"};
  const auto source = detail::make_nvml_source(library(), std::nullopt, 1ms);
  ASSERT_EQ(source->unavailable_reason(), "");
  const std::vector<GpuSample> got = read_until_pcie(*source);
  ASSERT_EQ(got.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i].index, i);
    EXPECT_DOUBLE_EQ(got[i].util_ratio.value_or(-1), (10 + i) / 100.0);
    EXPECT_DOUBLE_EQ(got[i].memory_util_ratio.value_or(-1), 0.5);
    EXPECT_EQ(got[i].memory_used_bytes, (i + 1ull) << 30);
    EXPECT_EQ(got[i].memory_total_bytes, 80ull << 30);
    EXPECT_DOUBLE_EQ(got[i].pcie_tx_bytes_per_s.value_or(-1), (i + 1) * 1000 * 1024.0);
    EXPECT_DOUBLE_EQ(got[i].pcie_rx_bytes_per_s.value_or(-1), (i + 1) * 2000 * 1024.0);
  }
}

// CUDA_VISIBLE_DEVICES=2,0 on a four-GPU machine: gpu0 must be cuda:0, which is NVML's GPU 2.
TEST_F(NvmlSourceTest, NamesEachGpuByTheCudaIndexTheProcessSeesAndLeavesOutTheOthers) {
  nvml.bus_ids = {"00000000:18:00.0", "00000000:3B:00.0", "00000000:86:00.0", "00000000:AF:00.0"};
  const auto source = detail::make_nvml_source(
      library(), std::vector<CudaDeviceName>{{"0000:86:00.0", ""}, {"0000:18:00.0", ""}}, 1ms);
  ASSERT_EQ(source->unavailable_reason(), "");
  const std::vector<GpuSample> got = read_until_pcie(*source);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].index, 0);
  EXPECT_DOUBLE_EQ(got[0].util_ratio.value_or(-1), 0.12) << "cuda:0 is NVML's GPU 2";
  EXPECT_DOUBLE_EQ(got[0].pcie_tx_bytes_per_s.value_or(-1), 3 * 1000 * 1024.0)
      << "and so are its PCIe rates";
  EXPECT_EQ(got[1].index, 1);
  EXPECT_DOUBLE_EQ(got[1].util_ratio.value_or(-1), 0.10) << "cuda:1 is NVML's GPU 0";
  EXPECT_DOUBLE_EQ(got[1].pcie_tx_bytes_per_s.value_or(-1), 1 * 1000 * 1024.0);
}

TEST_F(NvmlSourceTest, NoGpuOfTheProcessAmongNvmlsSaysWhichIdsWereCompared) {
  nvml.bus_ids = {"00000000:18:00.0", ""};
  const auto source =
      detail::make_nvml_source(library(), std::vector<CudaDeviceName>{{"0000:86:00.0", ""}}, 1ms);
  EXPECT_TRUE(source->read().empty());
  EXPECT_EQ(source->unavailable_reason(),
            "none of the 2 GPU(s) NVML sees (PCI 00000000:18:00.0, ?) is a CUDA device of this "
            "process (PCI 0000:86:00.0)");
}

// The MIG calls, and two GPUs, GPU 1 in MIG mode with 2 instances.
class NvmlMigTest : public NvmlSourceTest {
 protected:
  NvmlMigTest() {
    nvml.bus_ids = {"00000000:18:00.0", "00000000:3B:00.0"};
    nvml.mig_instances[1] = 2;
  }
  static detail::NvmlLibrary mig_library() {
    detail::NvmlLibrary lib = library();
    lib.api.running_processes = fake_processes;
    lib.api.process_utilization = fake_process_util_not_on_mig;
    lib.api.mig_mode = fake_mig_mode;
    lib.api.max_mig_devices = fake_max_mig;
    lib.api.mig_handle_by_index = fake_mig_handle;
    lib.api.uuid = fake_uuid;
    return lib;
  }
  // What CUDA says of a device: the PCI bus id (its GPU's for a MIG instance) and the UUID digits.
  static CudaDeviceName cuda(const std::string& bus_id, const std::string& nvml_uuid) {
    return {bus_id, nvml_uuid.substr(4)};
  }
};

// CUDA_VISIBLE_DEVICES=MIG-...: the process's cuda:0 is instance 1 of GPU 1, whose PCI bus id is
// the GPU's. Its readings are the instance's, through its own handle, never the whole GPU's.
TEST_F(NvmlMigTest, AMigInstanceIsReadThroughItsOwnHandleMatchedByItsUuid) {
  const auto source = detail::make_nvml_source(
      mig_library(), std::vector<CudaDeviceName>{cuda("0000:3B:00.0", mig_uuid(1, 1))}, 1ms);
  ASSERT_EQ(source->unavailable_reason(), "");
  const std::vector<GpuSample> got = source->read();
  ASSERT_EQ(got.size(), 1u);
  const GpuSample& g = got[0];
  EXPECT_EQ(g.index, 0);
  EXPECT_EQ(g.mig_instance, mig_uuid(1, 1));
  EXPECT_EQ(g.memory_total_bytes, 10ull << 30) << "the instance's memory, not the GPU's 80 GiB";
  EXPECT_EQ(g.memory_used_bytes, 2ull << 28);
  EXPECT_FALSE(g.util_ratio) << "not the whole GPU's 11 %";
  EXPECT_EQ(g.unavailable.at("util_ratio"),
            "nvmlDeviceGetUtilizationRates: status 3 (NOT_SUPPORTED) on MIG instance " +
                mig_uuid(1, 1) +
                ": NVML does not measure it per MIG instance, and the whole GPU's is not the "
                "instance's");
  ASSERT_EQ(g.processes.size(), 1u) << "the instance's processes";
  EXPECT_FALSE(g.processes[0].sm_util_ratio);
  EXPECT_NE(g.unavailable.at("process_sm_util_ratio")
                .find("nvmlDeviceGetProcessUtilization: status 3 (NOT_SUPPORTED) on MIG instance " +
                      mig_uuid(1, 1)),
            std::string::npos)
      << g.unavailable.at("process_sm_util_ratio");
  for (const char* shared : {"power_watts", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"}) {
    EXPECT_EQ(g.unavailable.at(shared),
              "the GPU's, shared by its MIG instances: not read for MIG instance " + mig_uuid(1, 1))
        << shared;
  }
  EXPECT_FALSE(g.power_watts);
  EXPECT_FALSE(g.pcie_tx_bytes_per_s);
}

// A CUDA that names a MIG instance NVML gives no handle for (its UUID not among them) on a GPU in
// MIG mode: nothing is read, rather than the whole GPU's figures under the instance's name.
TEST_F(NvmlMigTest, AMigInstanceWithoutItsHandleIsNotReadAsItsWholeGpu) {
  const auto source = detail::make_nvml_source(
      mig_library(), std::vector<CudaDeviceName>{cuda("0000:3B:00.0", mig_uuid(1, 5))}, 1ms);
  const std::vector<GpuSample> got = source->read();
  ASSERT_EQ(got.size(), 1u);
  const GpuSample& g = got[0];
  EXPECT_FALSE(g.util_ratio);
  EXPECT_FALSE(g.memory_total_bytes);
  EXPECT_TRUE(g.processes.empty());
  const std::string why =
      "cuda:0 is a MIG instance (its GPU, PCI 00000000:3B:00.0, is in MIG mode) and none of the 2 "
      "MIG instance handle(s) NVML gives has its UUID (" + mig_uuid(1, 5).substr(4) +
      "): the whole GPU's figures are not the instance's, so none is read";
  EXPECT_EQ(g.unavailable.at("util_ratio"), why);
  EXPECT_EQ(g.unavailable.at("memory_used_bytes"), why);
  EXPECT_EQ(g.unavailable.at("process_sm_util_ratio"), why);
}

// A GPU not in MIG mode is read whole, found by its UUID where NVML gives no PCI bus id.
TEST_F(NvmlMigTest, AWholeGpuIsFoundByItsUuidToo) {
  nvml.bus_ids[0] = "";
  const auto source = detail::make_nvml_source(
      mig_library(), std::vector<CudaDeviceName>{cuda("0000:18:00.0", gpu_uuid(0))}, 1ms);
  const std::vector<GpuSample> got = source->read();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].mig_instance, "");
  EXPECT_DOUBLE_EQ(got[0].util_ratio.value_or(-1), 0.10);
  EXPECT_EQ(got[0].memory_total_bytes, 80ull << 30);
}

// nvmlDeviceGetPcieThroughput waits out a ~20 ms window; the sampling thread must not.
TEST_F(NvmlSourceTest, ReadDoesNotWaitForAPcieReading) {
  nvml.bus_ids = {"00000000:18:00.0"};
  nvml.gate_open = false;
  const auto source = detail::make_nvml_source(library(), std::nullopt, 1ms);
  {
    std::unique_lock lock(nvml.mutex);
    ASSERT_TRUE(nvml.cv.wait_for(lock, kBound, [&] { return nvml.pcie_started > 0; }))
        << "the source's own thread reads PCIe";
    EXPECT_NE(nvml.pcie_thread, std::this_thread::get_id());
  }
  const std::vector<GpuSample> got = source->read();
  {
    std::lock_guard lock(nvml.mutex);
    EXPECT_EQ(nvml.pcie_finished, 0)
        << "read() waited for a PCIe call instead of returning while it was blocked";
    nvml.gate_open = true;
  }
  nvml.cv.notify_all();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_DOUBLE_EQ(got[0].util_ratio.value_or(-1), 0.10) << "the other readings are there";
  EXPECT_FALSE(got[0].pcie_tx_bytes_per_s) << "no PCIe window has ended yet: not measured";
  EXPECT_FALSE(got[0].unavailable.contains("pcie_tx_bytes_per_s")) << "nor failed";
  EXPECT_DOUBLE_EQ(read_until_pcie(*source)[0].pcie_rx_bytes_per_s.value_or(-1), 2000 * 1024.0);
}

// A stop request ends the PCIe thread's pause at once; NVML shuts down after the thread is gone.
TEST_F(NvmlSourceTest, DestructionStopsThePcieThreadThenShutsNvmlDown) {
  nvml.bus_ids = {"00000000:18:00.0"};
  auto source = detail::make_nvml_source(library(), std::nullopt, std::chrono::hours(1));
  read_until_pcie(*source);
  source.reset();
  std::lock_guard lock(nvml.mutex);
  EXPECT_EQ(nvml.pcie_started, 2) << "one round (TX, RX), then the hour's pause, cut short";
  EXPECT_EQ(nvml.pcie_finished, 2);
  EXPECT_EQ(nvml.inits, 1);
  EXPECT_EQ(nvml.shutdowns, 1);
}

TEST_F(NvmlSourceTest, AFailedInitSaysItsStatusAndIsNotShutDown) {
  nvml.bus_ids = {"00000000:18:00.0"};
  nvml.init_status = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  {
    const auto source = detail::make_nvml_source(library(), std::nullopt, 1ms);
    EXPECT_TRUE(source->read().empty());
    EXPECT_EQ(source->unavailable_reason(), "nvmlInit_v2 failed with status 9");
  }
  EXPECT_EQ(nvml.shutdowns, 0);
  EXPECT_EQ(nvml.pcie_started, 0);
}

TEST_F(NvmlSourceTest, WithoutThePcieCallTheOtherReadingsStillCome) {
  nvml.bus_ids = {"00000000:18:00.0"};
  detail::NvmlLibrary lib = library();
  lib.api.pcie_throughput = nullptr;
  const auto source = detail::make_nvml_source(lib, std::nullopt, 1ms);
  const std::vector<GpuSample> got = source->read();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_DOUBLE_EQ(got[0].util_ratio.value_or(-1), 0.10);
  EXPECT_FALSE(got[0].pcie_rx_bytes_per_s);
  EXPECT_EQ(got[0].unavailable.at("pcie_rx_bytes_per_s"),
            "nvmlDeviceGetPcieThroughput: not in this NVML library");
  EXPECT_EQ(got[0].unavailable.at("sm_clock_mhz"),
            "nvmlDeviceGetClockInfo: not in this NVML library");
  EXPECT_FALSE(got[0].unavailable.contains("util_ratio"));
}

TEST(NvmlLibraryTest, ALibraryWithoutNvmlsEntryPointsIsRefused) {
  const detail::NvmlLibrary lib = detail::load_nvml("libm.so.6");
  EXPECT_EQ(lib.reason, "libm.so.6 lacks a required function");
}

TEST(NvmlLibraryTest, WithoutADriverSaysWhy) {
  const auto nvml = make_nvml_source();
  if (nvml->unavailable_reason().empty()) GTEST_SKIP() << "NVML is present on this machine";
  EXPECT_TRUE(nvml->read().empty());
  EXPECT_NE(nvml->unavailable_reason().find("libnvidia-ml"), std::string::npos)
      << nvml->unavailable_reason();
}

}  // namespace
}  // namespace feedscope
