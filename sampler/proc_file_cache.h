#pragma once
// /proc files kept open between samples and read again from their start (pread at offset 0; every
// seq_file of /proc allows it). A sampler reads some 50 files of a trainer and its workers ten times
// a second, for hours beside a job; opening one costs more than reading it (a path walk in /proc,
// the file and its seq_file buffer made and freed each time).
//
// A file or directory not read since the last sweep() is closed: those of a process or thread that
// left the tree (the sampler sweeps once a sample). One kept open on a process that ended answers
// ESRCH or ENOENT (never another process's data, though its PID may be reused by now): it is closed
// and its path opened again. A file that is not procfs's (a fixture under a test's root) is opened
// again where it was removed or replaced.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sampler/proc_fs.h"

namespace feedscope {

// Not thread-safe: one thread reads through it (the sampling thread that owns it).
class ProcFileCache {
 public:
  // The most descriptors kept open, and never more than a quarter of RLIMIT_NOFILE's soft limit
  // (the process's own files come first); past it a file is opened and closed at each read.
  static constexpr std::size_t kMaxOpen = 1024;

  explicit ProcFileCache(ProcFs fs = ProcFs(), std::size_t max_open = kMaxOpen);
  ~ProcFileCache();
  ProcFileCache(const ProcFileCache&) = delete;
  ProcFileCache& operator=(const ProcFileCache&) = delete;

  const ProcFs& fs() const noexcept { return fs_; }
  // As ProcFs::read and ProcFs::list_dir, through a descriptor kept open.
  std::optional<std::string> read(const std::string& path);
  std::vector<std::string> list_dir(const std::string& path);
  // Keeps `path` open through the next sweep without reading it (a file whose content is known
  // unchanged); false where it is not open.
  bool keep_open(const std::string& path);
  // Closes what was not read (or kept open) since the last sweep.
  void sweep();
  std::size_t open_count() const noexcept { return open_.size(); }
  std::size_t max_open() const noexcept { return max_open_; }

 private:
  struct Open {
    int fd = -1;
    bool proc = true;  // procfs's: a process that ended fails the read
    std::uint64_t swept = 0;  // the sweep it was last read before
  };
  // The path opened anew: its descriptor, or -1 (errno set).
  int open_path(const std::string& path, bool directory) const;
  // The kept descriptor of `path`, marked read in this sweep, or nullptr; one whose file was
  // removed is closed first.
  Open* kept(const std::string& path);
  // Keeps `fd` open as `path`'s, or closes it where max_open() are.
  void keep(const std::string& path, int fd);
  void drop(const std::string& path);
  // `procfs`: a short read or listing is the end (see kProcRecordRoom in the .cc); otherwise read
  // on until the file says so.
  bool read_all(int fd, std::string& out, bool procfs);
  bool list_all(int fd, std::vector<std::string>& names, bool procfs);

  ProcFs fs_;
  std::size_t max_open_;
  std::uint64_t sweeps_ = 0;
  std::unordered_map<std::string, Open> open_;
  std::vector<char> buffer_;  // each read's bytes, kept for its capacity
};

}  // namespace feedscope
