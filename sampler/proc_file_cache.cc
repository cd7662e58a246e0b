#include "sampler/proc_file_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

namespace feedscope {

namespace {

constexpr std::size_t kFirstBuffer = 4096;
// A procfs file is a seq_file: one read fills a buffer of at least a page with whole records
// (a line of stat, a child's pid) until the next does not fit or there is none. A read that came
// back this much short of a page, with room for a record we read (none is near 1 KiB), was the
// end: reading on at its offset, to be told 0, would only cost another system call, which is as
// many as the reads themselves at 10 Hz.
constexpr std::size_t kProcRecordRoom = 1024;
constexpr std::size_t kPage = 4096;
// A directory entry of the longest name (dirent64: 19 bytes and the name's 256, aligned to 8):
// getdents64 fills the buffer but where one more does not fit, so a listing that left this much
// room was the whole directory.
constexpr std::size_t kLongestDirent = 280;

std::size_t open_bound(std::size_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return wanted;
  return std::min<std::size_t>(wanted, static_cast<std::size_t>(limit.rlim_cur / 4));
}

// A file pread refuses (not seekable: no file of /proc) read front to back, as ProcFs does.
bool read_stream(int fd, std::string& out) {
  out.clear();
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace

ProcFileCache::ProcFileCache(ProcFs fs, std::size_t max_open)
    : fs_(std::move(fs)), max_open_(open_bound(max_open)), buffer_(kFirstBuffer) {}

ProcFileCache::~ProcFileCache() {
  for (const auto& [path, o] : open_) ::close(o.fd);
}

int ProcFileCache::open_path(const std::string& path, bool directory) const {
  const std::string full = fs_.root() == "/" ? path : fs_.root() + path;
  return ::open(full.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
}

ProcFileCache::Open* ProcFileCache::kept(const std::string& path) {
  const auto it = open_.find(path);
  if (it == open_.end()) return nullptr;
  // A file removed (or replaced by a rename) keeps its old bytes for whoever holds it open; a
  // procfs file of a process that ended fails the read instead.
  struct stat st{};
  if (!it->second.proc && (::fstat(it->second.fd, &st) != 0 || st.st_nlink == 0)) {
    ::close(it->second.fd);
    open_.erase(it);
    return nullptr;
  }
  it->second.swept = sweeps_;
  return &it->second;
}

void ProcFileCache::keep(const std::string& path, int fd) {
  struct statfs where{};
  if (open_.size() >= max_open_ || ::fstatfs(fd, &where) != 0) {
    ::close(fd);
    return;
  }
  open_[path] = Open{fd, where.f_type == PROC_SUPER_MAGIC, sweeps_};
}

void ProcFileCache::drop(const std::string& path) {
  if (const auto it = open_.find(path); it != open_.end()) {
    ::close(it->second.fd);
    open_.erase(it);
  }
}

bool ProcFileCache::read_all(int fd, std::string& out, bool procfs) {
  std::size_t got = 0;
  for (;;) {
    if (got == buffer_.size()) buffer_.resize(buffer_.size() * 2);
    const ssize_t n = ::pread(fd, buffer_.data() + got, buffer_.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
    if (procfs && static_cast<std::size_t>(n) + kProcRecordRoom <= kPage && got < buffer_.size()) break;
  }
  out.assign(buffer_.data(), got);
  return true;
}

bool ProcFileCache::list_all(int fd, std::vector<std::string>& names, bool procfs) {
  names.clear();
  if (::lseek(fd, 0, SEEK_SET) != 0) return false;
  for (;;) {
    const ssize_t n = ::getdents64(fd, buffer_.data(), buffer_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    for (ssize_t at = 0; at < n;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buffer_.data() + at);
      const std::string_view name = entry->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
      at += entry->d_reclen;
    }
    if (procfs && static_cast<std::size_t>(n) + kLongestDirent <= buffer_.size()) break;
  }
  std::sort(names.begin(), names.end());
  return true;
}

std::optional<std::string> ProcFileCache::read(const std::string& path) {
  std::string text;
  if (const Open* o = kept(path)) {
    if (read_all(o->fd, text, o->proc)) return text;
    drop(path);  // the process ended: its PID, opened again, may be another's by now
  }
  const int fd = open_path(path, false);
  if (fd < 0) return std::nullopt;
  if (!read_all(fd, text, false)) {
    const bool stream = errno == ESPIPE && read_stream(fd, text);
    ::close(fd);
    if (stream) return text;
    return std::nullopt;
  }
  keep(path, fd);
  return text;
}

std::vector<std::string> ProcFileCache::list_dir(const std::string& path) {
  std::vector<std::string> names;
  if (const Open* o = kept(path)) {
    if (list_all(o->fd, names, o->proc)) return names;
    drop(path);
  }
  const int fd = open_path(path, true);
  if (fd < 0) return {};
  if (!list_all(fd, names, false)) {
    ::close(fd);
    return {};
  }
  keep(path, fd);
  return names;
}

bool ProcFileCache::keep_open(const std::string& path) {
  const auto it = open_.find(path);
  if (it == open_.end()) return false;
  it->second.swept = sweeps_;
  return true;
}

void ProcFileCache::sweep() {
  for (auto it = open_.begin(); it != open_.end();) {
    if (it->second.swept == sweeps_) {
      ++it;
      continue;
    }
    ::close(it->second.fd);
    it = open_.erase(it);
  }
  ++sweeps_;
}

}  // namespace feedscope
