#include "loader/dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <numeric>
#include <stdexcept>
#include <system_error>

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

void drop_cached_pages(int fd, const std::string& path) {
  const auto fail = [&](const char* call, int err) {
    return std::runtime_error(path + ": " + call + " failed: " + std::generic_category().message(err));
  };
  // EINVAL/EROFS: a file system without fsync (nothing of it can be dirty to flush).
  if (::fdatasync(fd) != 0 && errno != EINVAL && errno != EROFS) throw fail("fdatasync", errno);
  if (const int err = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); err != 0)
    throw fail("posix_fadvise(DONTNEED)", err);
}

void write_all(int fd, const void* data, std::size_t bytes, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(path + ": write failed: " + std::generic_category().message(errno));
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

std::uint64_t drop_cached_files(const std::vector<std::string>& paths) {
  std::uint64_t bytes = 0;
  for (const std::string& file : paths) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0) bytes += static_cast<std::uint64_t>(st.st_size);
    try {
      drop_cached_pages(fd, file);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }
  return bytes;
}

}  // namespace feedscope
