#include "profiler/cuda_api_names.h"

#include <algorithm>
#include <array>

namespace feedscope {

namespace {

constexpr std::array<std::string_view, 5> kRuntimeLaunches = {
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cudaGraphLaunch",
    "cudaLaunch"};
// CUDA 13's nvcc compiles `<<<>>>` to __cudaLaunchKernel (CUPTI cbids 505 and 506).
constexpr std::string_view kCompiledLaunch = "__cudaLaunchKernel";
constexpr std::array<std::string_view, 4> kDriverLaunches = {
    "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cuGraphLaunch"};

template <std::size_t N>
bool one_of(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

std::string_view base_name(std::string_view name) {
  for (std::string_view suffix : {"_ptds", "_ptsz"})
    if (name.size() > suffix.size() && name.ends_with(suffix))
      return name.substr(0, name.size() - suffix.size());
  return name;
}

std::string_view strip_cupti_version(std::string_view name) {
  const std::size_t v = name.rfind("_v");
  if (v != std::string_view::npos && v + 2 < name.size() &&
      name.find_first_not_of("0123456789", v + 2) == std::string_view::npos)
    return name.substr(0, v);
  return name;
}

bool is_synchronous_runtime_call(std::string_view name) {
  static constexpr std::array<std::string_view, 14> kSync = {
      "cudaDeviceSynchronize", "cudaThreadSynchronize", "cudaStreamSynchronize",
      "cudaEventSynchronize",  "cudaMemcpy",            "cudaMemcpy2D",
      "cudaMemcpy3D",          "cudaMemcpyToSymbol",    "cudaMemcpyFromSymbol",
      "cudaMemcpyPeer",        "cudaMemcpy3DPeer",      "cudaMemcpyToArray",
      "cudaMemcpyFromArray",   "cudaMemcpy2DToArray"};
  return one_of(kSync, base_name(name));
}

bool is_query_runtime_call(std::string_view name) {
  const std::string_view base = base_name(name);
  return base == "cudaEventQuery" || base == "cudaStreamQuery";
}

bool is_launch_runtime_call(std::string_view name) {
  const std::string_view base = base_name(name);
  return one_of(kRuntimeLaunches, base) || base == kCompiledLaunch ||
         one_of(kDriverLaunches, base);
}

bool is_traced_runtime_callback(std::string_view cupti_name) {
  const std::string_view name = strip_cupti_version(cupti_name);
  const std::string_view base = base_name(name);
  return one_of(kRuntimeLaunches, base) || base == kCompiledLaunch ||
         is_synchronous_runtime_call(name) || is_query_runtime_call(name) ||
         base.starts_with("cudaMemcpy");
}

bool is_traced_driver_callback(std::string_view cupti_name) {
  return one_of(kDriverLaunches, base_name(strip_cupti_version(cupti_name)));
}

}  // namespace feedscope
