#pragma once
#include <string>

namespace feedscope {

// Whether CUPTI can trace this process's GPU work: available only where an activity source
// actually starts (a CUDA device and a driver CUPTI works with), with its API version; otherwise
// why not ("built without CUDA", "libcupti.so.13 not found: ...", "no CUDA device to trace: ...",
// the CUPTI call that failed).
struct CuptiProbe {
  bool available = false;
  std::string detail;
};
CuptiProbe probe_cupti();

}  // namespace feedscope
