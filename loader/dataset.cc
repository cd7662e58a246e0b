#include "loader/dataset.h"

#include <numeric>

namespace feedscope {

std::size_t dtype_size(DType dtype) noexcept { return dtype == DType::uint8 ? 1 : 4; }
const char* dtype_name(DType dtype) noexcept { return dtype == DType::uint8 ? "uint8" : "float32"; }

std::int64_t SampleSpec::elements() const noexcept {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

std::string SampleSpec::to_string() const {
  std::string out;
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? "x" : "") + std::to_string(shape[i]);
  return out + " " + dtype_name(dtype);
}

}  // namespace feedscope
