#pragma once
// Checked CUDA runtime calls, as DALI's CUDA_CALL: setup calls throw DeviceError naming the call
// and the error; calls in destructors and noexcept paths only report, and stay quiet when the
// runtime is already unloading at process exit. Include only from .cc files built with CUDA.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "pinned_memory/errors.h"

namespace feedscope::detail {

inline void cuda_check(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw DeviceError(std::string(call) + " failed: " + cudaGetErrorName(status) + " (" +
                      cudaGetErrorString(status) + ")");
}

inline void cuda_check_noexcept(cudaError_t status, const char* call) noexcept {
  if (status == cudaSuccess || status == cudaErrorCudartUnloading) return;
  std::fprintf(stderr, "feedscope: %s failed: %s\n", call, cudaGetErrorName(status));
}

}  // namespace feedscope::detail

#define FEEDSCOPE_CUDA_CALL(call) ::feedscope::detail::cuda_check((call), #call)
#define FEEDSCOPE_CUDA_CALL_NOEXCEPT(call) ::feedscope::detail::cuda_check_noexcept((call), #call)
