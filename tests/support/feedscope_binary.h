#pragma once
// The feedscope program the integration tests run; its path comes from CMake (FEEDSCOPE_BINARY).
#include <string>

namespace feedscope::testing {

inline const std::string kBinary = FEEDSCOPE_BINARY;

}  // namespace feedscope::testing
