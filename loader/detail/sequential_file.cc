#include "loader/detail/sequential_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace feedscope::detail {

namespace {
constexpr unsigned kBuffer = 1u << 20;
gzFile gz(void* file) { return static_cast<gzFile>(file); }
}  // namespace

SequentialFile::SequentialFile(const std::string& path) : file_(gzopen(path.c_str(), "rb")) {
  if (!file_) throw std::runtime_error(path + ": cannot open: " + (errno ? std::strerror(errno) : "out of memory"));
  gzbuffer(gz(file_), kBuffer);
}

SequentialFile::~SequentialFile() { gzclose(gz(file_)); }

std::size_t SequentialFile::read(void* data, std::size_t bytes) {
  std::size_t got = 0;
  auto* p = static_cast<unsigned char*>(data);
  while (got < bytes) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(bytes - got, 1u << 30));
    const int n = gzread(gz(file_), p + got, chunk);
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(gz(file_), &code);
      position_ += got;
      throw std::runtime_error(std::string("cannot read the gzip stream (") + (message ? message : "zlib error") + ")");
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  position_ += got;
  return got;
}

}  // namespace feedscope::detail
