#include "pinned_memory/device_drain.h"

#if FEEDSCOPE_WITH_CUDA
#include <cuda.h>  // the driver API's types only: the driver itself is found with dlsym
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "pinned_memory/detail/cuda_call.h"
#endif

namespace feedscope {

#if FEEDSCOPE_WITH_CUDA

int drain_used_devices() noexcept {
  // A process that never initialized CUDA has no driver loaded and nothing to drain; dlopen with
  // RTLD_NOLOAD only looks.
  void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (driver == nullptr) return 0;
  using GetDevice = CUresult (*)(CUdevice*, int);
  using ContextState = CUresult (*)(CUdevice, unsigned int*, int*);
  const auto get_device = reinterpret_cast<GetDevice>(::dlsym(driver, "cuDeviceGet"));
  const auto context_state =
      reinterpret_cast<ContextState>(::dlsym(driver, "cuDevicePrimaryCtxGetState"));
  int drained = 0;
  int count = 0;
  if (get_device != nullptr && context_state != nullptr &&
      cudaGetDeviceCount(&count) == cudaSuccess) {
    int previous = 0;
    const bool know_previous = cudaGetDevice(&previous) == cudaSuccess;
    for (int i = 0; i < count; ++i) {
      CUdevice device = 0;
      unsigned int flags = 0;
      int active = 0;
      if (get_device(&device, i) != CUDA_SUCCESS ||
          context_state(device, &flags, &active) != CUDA_SUCCESS || active == 0)
        continue;
      if (cudaSetDevice(i) != cudaSuccess) continue;
      FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaDeviceSynchronize());
      ++drained;
    }
    if (know_previous) FEEDSCOPE_CUDA_CALL_NOEXCEPT(cudaSetDevice(previous));
  }
  ::dlclose(driver);  // drops only the reference RTLD_NOLOAD took
  return drained;
}

#else

int drain_used_devices() noexcept { return 0; }

#endif

}  // namespace feedscope
