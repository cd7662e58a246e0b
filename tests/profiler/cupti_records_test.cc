// What the tracer asks CUPTI to record (detail/cupti_records.h's enable_tracing), through a
// CuptiApi whose entry points are this file's functions: they answer from a small callback-name
// table and write down every call, so the selection and each fallback run without CUPTI or a GPU.
#include "profiler/detail/cupti_records.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace feedscope::detail {
namespace {

// The stand-in's state; one test at a time.
struct Fake {
  std::map<std::uint32_t, std::string> runtime_names = {
      {CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, "cudaGetDevice_v3020"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, "cudaMalloc_v3020"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, "cudaStreamSynchronize_v3020"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020, "cudaEventQuery_v3020"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, "cudaMemcpyAsync_v3020"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel_v7000"},
      {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, "cudaLaunchKernel_ptsz_v7000"},
      {CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, "__cudaLaunchKernel_v13000"},
      {CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000, "__cudaLaunchKernel_ptsz_v13000"},
  };
  std::map<std::uint32_t, std::string> driver_names = {
      {CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent"},
      {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
      {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, "cuLaunchKernel_ptsz"},
      {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch"},
      {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx"},
  };
  std::set<CUpti_ActivityKind> kinds;       // enabled now
  std::set<std::uint32_t> runtime_enabled;  // by cuptiActivityEnableRuntimeApi, now
  std::set<std::uint32_t> driver_enabled;
  std::vector<int> all_sync_records;  // every cuptiActivityEnableAllSyncRecords argument
  std::uint32_t refuse_runtime_cbid = 0;  // cuptiActivityEnableRuntimeApi(this, 1) fails
  CUpti_ActivityKind refuse_kind = CUPTI_ACTIVITY_KIND_INVALID;
};
Fake fake;

CUptiResult CUPTIAPI get_name(CUpti_CallbackDomain domain, std::uint32_t cbid, const char** name) {
  const auto& names = domain == CUPTI_CB_DOMAIN_DRIVER_API ? fake.driver_names : fake.runtime_names;
  const auto it = names.find(cbid);
  if (it == names.end()) return CUPTI_ERROR_INVALID_PARAMETER;
  *name = it->second.c_str();
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI enable(CUpti_ActivityKind kind) {
  if (kind == fake.refuse_kind) return CUPTI_ERROR_NOT_SUPPORTED;
  fake.kinds.insert(kind);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI disable(CUpti_ActivityKind kind) {
  fake.kinds.erase(kind);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI enable_runtime(CUpti_CallbackId cbid, std::uint8_t on) {
  if (on && cbid == fake.refuse_runtime_cbid) return CUPTI_ERROR_NOT_SUPPORTED;
  if (on) fake.runtime_enabled.insert(cbid);
  else fake.runtime_enabled.erase(cbid);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI enable_driver(CUpti_CallbackId cbid, std::uint8_t on) {
  if (on) fake.driver_enabled.insert(cbid);
  else fake.driver_enabled.erase(cbid);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI all_sync_records(std::uint8_t on) {
  fake.all_sync_records.push_back(on);
  return CUPTI_SUCCESS;
}

// A CUPTI 13 with every entry point enable_tracing may call.
CuptiApi fake_api() {
  fake = Fake{};
  CuptiApi api;
  api.cuptiGetCallbackName = get_name;
  api.cuptiActivityEnable = enable;
  api.cuptiActivityDisable = disable;
  api.cuptiActivityEnableRuntimeApi = enable_runtime;
  api.cuptiActivityEnableDriverApi = enable_driver;
  api.cuptiActivityEnableAllSyncRecords = all_sync_records;
  return api;
}

const std::set<CUpti_ActivityKind> kDeviceKinds = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};

TEST(CuptiRecordsTest, OnlyTheCallsTheSummaryReadsAreEnabledAndUnfinishedQueriesLeaveNoRecord) {
  const CuptiApi api = fake_api();
  CuptiEnabled enabled;
  ASSERT_EQ(enable_tracing(api, enabled), "");
  // The RUNTIME kind would record every call, cudaGetDevice too, and override the selection.
  EXPECT_EQ(fake.kinds, kDeviceKinds);
  EXPECT_EQ(fake.runtime_enabled,
            (std::set<std::uint32_t>{CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
                                     CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
                                     CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                                     CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                                     CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
                                     CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
                                     CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000}));
  EXPECT_FALSE(fake.runtime_enabled.contains(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020));
  EXPECT_EQ(fake.driver_enabled,
            (std::set<std::uint32_t>{CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                                     CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                                     CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
                                     CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx}));
  EXPECT_EQ(fake.all_sync_records, std::vector<int>{0});
  const TracingMode& m = enabled.mode;
  EXPECT_EQ(m.runtime_calls, TracingMode::Calls::selected);
  EXPECT_EQ(m.runtime_callbacks, 7u);
  EXPECT_EQ(m.driver_calls, TracingMode::Calls::selected);
  EXPECT_EQ(m.driver_callbacks, 4u);
  EXPECT_TRUE(m.completed_syncs_only);
  EXPECT_EQ(m.note, "");

  // The stop undoes all of it, CUPTI's default of a record per query included.
  EXPECT_EQ(disable_tracing(api, enabled), "");
  EXPECT_TRUE(fake.kinds.empty());
  EXPECT_TRUE(fake.runtime_enabled.empty());
  EXPECT_TRUE(fake.driver_enabled.empty());
  EXPECT_EQ(fake.all_sync_records, (std::vector<int>{0, 1}));
}

// A CUPTI before the per-call switches: the whole RUNTIME kind, no driver launches, every query,
// and the mode says each.
TEST(CuptiRecordsTest, WithoutThePerCallSwitchesTheWholeRuntimeKindIsTracedAndSaid) {
  CuptiApi api = fake_api();
  api.cuptiActivityEnableRuntimeApi = nullptr;
  api.cuptiActivityEnableDriverApi = nullptr;
  api.cuptiActivityEnableAllSyncRecords = nullptr;
  CuptiEnabled enabled;
  ASSERT_EQ(enable_tracing(api, enabled), "");
  std::set<CUpti_ActivityKind> all = kDeviceKinds;
  all.insert(CUPTI_ACTIVITY_KIND_RUNTIME);
  EXPECT_EQ(fake.kinds, all);
  EXPECT_FALSE(fake.kinds.contains(CUPTI_ACTIVITY_KIND_DRIVER)) << "every driver call: too dear";
  const TracingMode& m = enabled.mode;
  EXPECT_EQ(m.runtime_calls, TracingMode::Calls::all);
  EXPECT_EQ(m.runtime_callbacks, 0u);
  EXPECT_EQ(m.driver_calls, TracingMode::Calls::none);
  EXPECT_FALSE(m.completed_syncs_only);
  EXPECT_NE(m.note.find("every runtime call traced: cuptiActivityEnableRuntimeApi is not in this "
                        "CUPTI"),
            std::string::npos)
      << m.note;
  EXPECT_NE(m.note.find("the driver's launch calls not traced (their kernels count as launches): "
                        "cuptiActivityEnableDriverApi is not in this CUPTI"),
            std::string::npos)
      << m.note;
  EXPECT_NE(m.note.find("cuptiActivityEnableAllSyncRecords is not in this CUPTI"),
            std::string::npos)
      << m.note;
  EXPECT_EQ(disable_tracing(api, enabled), "");
  EXPECT_TRUE(fake.kinds.empty());
}

// A refusal halfway through the selection leaves none of it behind: the whole kind instead.
TEST(CuptiRecordsTest, ARefusedCallbackUndoesTheSelectionAndFallsBackToTheWholeKind) {
  const CuptiApi api = fake_api();
  fake.refuse_runtime_cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000;
  CuptiEnabled enabled;
  ASSERT_EQ(enable_tracing(api, enabled), "");
  EXPECT_TRUE(fake.runtime_enabled.empty());
  EXPECT_TRUE(enabled.runtime_callbacks.empty());
  EXPECT_TRUE(fake.kinds.contains(CUPTI_ACTIVITY_KIND_RUNTIME));
  EXPECT_EQ(enabled.mode.runtime_calls, TracingMode::Calls::all);
  EXPECT_NE(enabled.mode.note.find("every runtime call traced: cuptiActivityEnableRuntimeApi(" +
                                   std::to_string(fake.refuse_runtime_cbid) + "): "),
            std::string::npos)
      << enabled.mode.note;
  EXPECT_EQ(enabled.mode.driver_calls, TracingMode::Calls::selected) << "the driver's still are";
}

// A kind CUPTI refuses fails the start as before, with nothing left enabled.
TEST(CuptiRecordsTest, ARefusedKindFailsTheStartAndLeavesNothingEnabled) {
  const CuptiApi api = fake_api();
  fake.refuse_kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  CuptiEnabled enabled;
  const std::string why = enable_tracing(api, enabled);
  EXPECT_TRUE(why.starts_with("CUPTI: cuptiActivityEnable(SYNCHRONIZATION): ")) << why;
  EXPECT_TRUE(fake.kinds.empty());
  EXPECT_TRUE(fake.runtime_enabled.empty());
  EXPECT_TRUE(fake.driver_enabled.empty());
  EXPECT_EQ(fake.all_sync_records, (std::vector<int>{0, 1}));
}

// The walk covers the header's ids and goes on while the library names more (a newer CUPTI's
// calls); it stops at the first unnamed id past the header's count.
TEST(CuptiRecordsTest, CallbackIdsGoPastTheHeadersCountWhileTheLibraryNamesThem) {
  const CuptiApi api = fake_api();
  constexpr std::uint32_t size = CUPTI_RUNTIME_TRACE_CBID_SIZE;
  fake.runtime_names[size] = "cudaSomethingNew_v13020";
  fake.runtime_names[size + 1] = "cudaLaunchKernelNewer_ptsz_v13020";
  fake.runtime_names[size + 2] = "cudaMemcpyNewer_v13020";
  fake.runtime_names[size + 4] = "cudaMemcpyUnreached_v13020";
  const auto any = [](std::string_view name) { return name.starts_with("cudaMemcpy"); };
  const std::vector<std::uint32_t> ids =
      callback_ids(api, CUPTI_CB_DOMAIN_RUNTIME_API, size, +any);
  EXPECT_EQ(ids, (std::vector<std::uint32_t>{CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                                             size + 2}));
}

// Unset while the test runs, so a FEEDSCOPE_CUPTI_* in the caller's environment changes nothing.
void clear_tracing_env() {
  for (const char* name :
       {"FEEDSCOPE_CUPTI_RUNTIME", "FEEDSCOPE_CUPTI_DRIVER", "FEEDSCOPE_CUPTI_SYNC",
        "FEEDSCOPE_GPU_TRACE_SAMPLE", "FEEDSCOPE_GPU_TRACE_LEAD"})
    ::unsetenv(name);
}

TEST(CuptiRecordsTest, TheRequestSelectsCallsInTheInjectionTakesThemAllInProcessAndNoSyncKind) {
  clear_tracing_env();
  const TracingRequest injection = tracing_request(false);
  EXPECT_EQ(injection.runtime, TracingMode::Calls::selected);
  EXPECT_TRUE(injection.driver_launches);
  EXPECT_FALSE(injection.syncs) << "the runtime's sync calls carry the waits";
  const TracingRequest in_process = tracing_request(true);
  EXPECT_EQ(in_process.runtime, TracingMode::Calls::all);
  EXPECT_FALSE(in_process.driver_launches);
  EXPECT_FALSE(in_process.syncs);
  EXPECT_NE(in_process.why.find("per-call selection"), std::string::npos) << in_process.why;
  // The device check's parts: no runtime call brings the sync records back, unless they are off.
  ::setenv("FEEDSCOPE_CUPTI_RUNTIME", "none", 1);
  EXPECT_TRUE(tracing_request(false).syncs);
  ::setenv("FEEDSCOPE_CUPTI_SYNC", "0", 1);
  EXPECT_FALSE(tracing_request(false).syncs);
  ::setenv("FEEDSCOPE_CUPTI_DRIVER", "0", 1);
  EXPECT_FALSE(tracing_request(false).driver_launches);
  clear_tracing_env();
}

TEST(CuptiRecordsTest, WithoutTheSyncKindTheModeSaysSoAndTheKindStaysOff) {
  const CuptiApi api = fake_api();
  CuptiEnabled enabled;
  TracingRequest request;
  request.syncs = false;
  ASSERT_EQ(enable_tracing(api, enabled, request), "");
  EXPECT_FALSE(enabled.mode.sync_records);
  EXPECT_FALSE(fake.kinds.contains(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  EXPECT_TRUE(fake.kinds.contains(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
}

// Sampled tracing switches the kinds and leaves the per-call selections armed: a CUPTI 13 records
// none of a selection armed again while CUDA runs.
TEST(CuptiRecordsTest, ASampledWindowSwitchesTheKindsAndLeavesTheSelectedCallsArmed) {
  const CuptiApi api = fake_api();
  CuptiEnabled enabled;
  TracingRequest request;
  request.syncs = false;
  request.sampling = TraceSampling{1'000'000'000, 10'000'000'000, 5'000'000'000};
  ASSERT_EQ(enable_tracing(api, enabled, request), "");
  EXPECT_EQ(enabled.mode.sampling, request.sampling);
  const std::set<std::uint32_t> runtime = fake.runtime_enabled;
  const std::set<std::uint32_t> driver = fake.driver_enabled;
  ASSERT_FALSE(runtime.empty());

  EXPECT_EQ(switch_sampled_kinds(api, enabled, false), "");
  EXPECT_TRUE(fake.kinds.empty());
  EXPECT_EQ(fake.runtime_enabled, runtime);
  EXPECT_EQ(fake.driver_enabled, driver);
  EXPECT_EQ(switch_sampled_kinds(api, enabled, true), "");
  EXPECT_EQ(fake.kinds, (std::set<CUpti_ActivityKind>{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                                      CUPTI_ACTIVITY_KIND_MEMCPY,
                                                      CUPTI_ACTIVITY_KIND_MEMSET}));
  EXPECT_EQ(fake.runtime_enabled, runtime);

  // Where the runtime is traced whole, its kind is switched with the device's.
  CuptiEnabled all;
  request.runtime = TracingMode::Calls::all;
  const CuptiApi again = fake_api();
  ASSERT_EQ(enable_tracing(again, all, request), "");
  EXPECT_EQ(switch_sampled_kinds(again, all, false), "");
  EXPECT_FALSE(fake.kinds.contains(CUPTI_ACTIVITY_KIND_RUNTIME));
  fake.refuse_kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  EXPECT_EQ(switch_sampled_kinds(again, all, true),
            "CUPTI: cuptiActivityEnable(MEMCPY): CUPTI_ERROR_NOT_SUPPORTED");
  EXPECT_TRUE(fake.kinds.contains(CUPTI_ACTIVITY_KIND_RUNTIME)) << "the others are switched still";
}

// watch sets the sampling for the injection; an in-process source has no timer and traces whole.
TEST(CuptiRecordsTest, TheInjectionSamplesAsTheEnvironmentSaysAndABadValueTracesWholeAndSaysWhy) {
  clear_tracing_env();
  EXPECT_FALSE(tracing_request(false).sampling.sampled());
  ::setenv("FEEDSCOPE_GPU_TRACE_SAMPLE", "1/10", 1);
  ::setenv("FEEDSCOPE_GPU_TRACE_LEAD", "5", 1);
  EXPECT_EQ(tracing_request(false).sampling,
            (TraceSampling{1'000'000'000, 10'000'000'000, 5'000'000'000}));
  EXPECT_FALSE(tracing_request(true).sampling.sampled());
  // Sampled, the runtime's calls are its whole kind, switched with the windows (a selection
  // would stay armed between them), and the driver's launches are left out; an override stands.
  const TracingRequest sampled = tracing_request(false);
  EXPECT_EQ(sampled.runtime, TracingMode::Calls::all);
  EXPECT_FALSE(sampled.driver_launches);
  EXPECT_NE(sampled.why.find("sampled"), std::string::npos) << sampled.why;
  {
    const CuptiApi api = fake_api();
    CuptiEnabled enabled;
    ASSERT_EQ(enable_tracing(api, enabled, sampled), "");
    EXPECT_TRUE(fake.runtime_enabled.empty());
    EXPECT_TRUE(fake.driver_enabled.empty());
    EXPECT_EQ(switch_sampled_kinds(api, enabled, false), "");
    EXPECT_TRUE(fake.kinds.empty()) << "nothing is recorded between the windows";
    EXPECT_EQ(switch_sampled_kinds(api, enabled, true), "");
    EXPECT_TRUE(fake.kinds.contains(CUPTI_ACTIVITY_KIND_RUNTIME));
  }
  ::setenv("FEEDSCOPE_CUPTI_RUNTIME", "selected", 1);
  ::setenv("FEEDSCOPE_CUPTI_DRIVER", "1", 1);
  EXPECT_EQ(tracing_request(false).runtime, TracingMode::Calls::selected);
  EXPECT_TRUE(tracing_request(false).driver_launches);
  ::unsetenv("FEEDSCOPE_CUPTI_RUNTIME");
  ::unsetenv("FEEDSCOPE_CUPTI_DRIVER");
  ::setenv("FEEDSCOPE_GPU_TRACE_SAMPLE", "10/1", 1);
  TracingRequest bad = tracing_request(false);
  EXPECT_FALSE(bad.sampling.sampled());
  EXPECT_NE(bad.sampling_why.find("traced whole: FEEDSCOPE_GPU_TRACE_SAMPLE=10/1"), std::string::npos)
      << bad.sampling_why;
  const CuptiApi api = fake_api();
  CuptiEnabled enabled;
  ASSERT_EQ(enable_tracing(api, enabled, bad), "");
  EXPECT_NE(enabled.mode.note.find("traced whole: FEEDSCOPE_GPU_TRACE_SAMPLE=10/1"), std::string::npos)
      << enabled.mode.note;
  ::setenv("FEEDSCOPE_GPU_TRACE_SAMPLE", "1/10", 1);
  ::setenv("FEEDSCOPE_GPU_TRACE_LEAD", "soon", 1);
  EXPECT_NE(tracing_request(false).sampling_why.find("\"soon\" is not a number of seconds"),
            std::string::npos);
  clear_tracing_env();
}

}  // namespace
}  // namespace feedscope::detail
