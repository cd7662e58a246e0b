#pragma once
// DESIGN.md's bottleneck names: every diagnosis (run, a wrapped loop, watch) names one of them,
// or none (null) where a watched program failed before anything was measured. The metrics give
// each its feedscope_bottleneck_info series; tests hold the docs' names to this list.
#include <array>
#include <string_view>

namespace feedscope {

inline constexpr std::array<std::string_view, 6> kBottleneckNames = {
    "storage_io", "cpu_preprocess", "host_to_device", "gpu_compute", "launch_overhead",
    "cpu_compute"};

}  // namespace feedscope
