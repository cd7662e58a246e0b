#pragma once
// The python3 the torchvision parity tests compare against.
#include <cstdlib>
#include <string>

namespace feedscope::testing {

// $FEEDSCOPE_PYTHON where set (a GPU machine's python3 with its own torch), else Debian's.
inline std::string reference_python() {
  const char* chosen = std::getenv("FEEDSCOPE_PYTHON");
  return chosen && *chosen ? chosen : "/usr/bin/python3";
}

}  // namespace feedscope::testing
