#include "profiler/cuda_api_names.h"

#include <gtest/gtest.h>

namespace feedscope {
namespace {

TEST(CudaApiNamesTest, CuptisVersionAndPerThreadSuffixesComeOff) {
  EXPECT_EQ(strip_cupti_version("cudaLaunchKernel_ptsz_v7000"), "cudaLaunchKernel_ptsz");
  EXPECT_EQ(strip_cupti_version("__cudaLaunchKernel_v13000"), "__cudaLaunchKernel");
  EXPECT_EQ(strip_cupti_version("cuLaunchKernel"), "cuLaunchKernel");
  EXPECT_EQ(strip_cupti_version("cudaFoo_v"), "cudaFoo_v");
  EXPECT_EQ(strip_cupti_version("cudaFoo_vx1"), "cudaFoo_vx1");
  EXPECT_EQ(base_name("cudaMemcpy_ptds"), "cudaMemcpy");
  EXPECT_EQ(base_name("_ptsz"), "_ptsz");
}

TEST(CudaApiNamesTest, LaunchesAreTheRuntimesCuda13sCompiledOneAndTheDrivers) {
  for (const char* name : {"cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC",
                           "cudaGraphLaunch_ptsz", "__cudaLaunchKernel", "__cudaLaunchKernel_ptsz",
                           "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx",
                           "cuLaunchCooperativeKernel", "cuGraphLaunch_ptsz"})
    EXPECT_TRUE(is_launch_runtime_call(name)) << name;
  for (const char* name : {"cudaGetDevice", "cudaMemcpyAsync", "cuLaunchHostFunc",
                           "cuLaunchCooperativeKernelMultiDevice", "cudaLaunchHostFunc"})
    EXPECT_FALSE(is_launch_runtime_call(name)) << name;
}

// What the tracer enables, by CUPTI's own callback names: every call the summary reads, and not
// torch's cudaGetDevice, 171 of a launch-bound step's 217 runtime calls.
TEST(CudaApiNamesTest, TheTracedRuntimeCallsAreThoseTheSummaryReads) {
  for (const char* name :
       {"cudaLaunchKernel_v7000", "cudaLaunchKernel_ptsz_v7000", "__cudaLaunchKernel_v13000",
        "__cudaLaunchKernel_ptsz_v13000", "cudaLaunchKernelExC_v11060", "cudaGraphLaunch_v10000",
        "cudaLaunchCooperativeKernel_ptsz_v9000", "cudaStreamSynchronize_v3020",
        "cudaStreamSynchronize_ptsz_v7000", "cudaDeviceSynchronize_v3020",
        "cudaEventSynchronize_v3020", "cudaMemcpy_v3020", "cudaMemcpy_ptds_v7000",
        "cudaMemcpyAsync_v3020", "cudaMemcpyAsync_ptsz_v7000", "cudaMemcpy2DAsync_v3020",
        "cudaEventQuery_v3020", "cudaStreamQuery_ptsz_v7000"})
    EXPECT_TRUE(is_traced_runtime_callback(name)) << name;
  for (const char* name : {"cudaGetDevice_v3020", "cudaSetDevice_v3020", "cudaMalloc_v3020",
                           "cudaEventRecord_v3020", "cudaStreamWaitEvent_v3020",
                           "cudaGetLastError_v3020", "cudaMemsetAsync_v3020",
                           "cudaPeekAtLastError_v3020", "cuLaunchKernel"})
    EXPECT_FALSE(is_traced_runtime_callback(name)) << name;
}

TEST(CudaApiNamesTest, TheTracedDriverCallsAreItsLaunches) {
  for (const char* name : {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx",
                           "cuLaunchKernelEx_ptsz", "cuLaunchCooperativeKernel",
                           "cuLaunchCooperativeKernel_ptsz", "cuGraphLaunch", "cuGraphLaunch_ptsz"})
    EXPECT_TRUE(is_traced_driver_callback(name)) << name;
  for (const char* name : {"cuCtxGetCurrent", "cuLaunchCooperativeKernelMultiDevice",
                           "cuMemcpyHtoD_v2", "cuStreamSynchronize", "cudaLaunchKernel_v7000"})
    EXPECT_FALSE(is_traced_driver_callback(name)) << name;
}

}  // namespace
}  // namespace feedscope
