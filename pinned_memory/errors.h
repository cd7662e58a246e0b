#pragma once
#include <stdexcept>
#include <string>

namespace feedscope {

// A device, driver or CUDA runtime failure at setup. The CLI maps it to exit code 4.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace feedscope
