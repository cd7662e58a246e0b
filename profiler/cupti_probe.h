#pragma once
#include <string>

namespace feedscope {

// CUPTI's API version when built in, or why it is not ("built without CUDA").
struct CuptiProbe {
  bool available = false;
  std::string detail;
};
CuptiProbe probe_cupti();

}  // namespace feedscope
