#pragma once
// Durations in the nanoseconds the profiler's clocks count, for tests that build timelines.
#include <cstdint>

namespace feedscope::testing {

inline constexpr std::int64_t kUs = 1'000;
inline constexpr std::int64_t kMs = 1'000'000;
inline constexpr std::int64_t kSecond = 1'000'000'000;

}  // namespace feedscope::testing
