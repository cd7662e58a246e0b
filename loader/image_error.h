#pragma once
// The error every image decoder throws for bytes it cannot turn into pixels. Light on purpose:
// the public decoder headers include it, and no codec's header.
#include <stdexcept>

namespace feedscope {

// A file no decoder accepts: corrupt, truncated, too large, or in a format or variant feedscope
// does not read. what() says why, in the codec's own words where it has them; the caller adds
// the file's path.
class ImageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace feedscope
