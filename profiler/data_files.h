#pragma once
// The data a watched program reads, from the files its processes hold open (/proc/PID/fd): the
// image folder or the shards its loader workers open, for `feedscope watch` to measure feedscope's
// loader on the same files once the program has ended (cli/try_loader.h).
#include <cstddef>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sampler/proc_fs.h"

namespace feedscope {

// Thread-safe: the sampler's thread looks, the watcher reads after the program ended.
class DataFilesSeen {
 public:
  // `proc`: the /proc it reads (tests: a fixture root). Keeps at most `max_files` paths.
  explicit DataFilesSeen(ProcFs proc = ProcFs(), std::size_t max_files = 64);

  // Reads the open files of process `pid` and keeps those a loader reads: images (any extension
  // torchvision's ImageFolder takes), tar shards, TFRecord files. A process gone meanwhile is
  // passed over.
  void look(int pid);
  // Where no open file was seen (a short run, or readings that came late on a loaded machine):
  // the program's own arguments that name data, a file or a folder of them (`--data DIR`,
  // `--data=DIR`): up to a few of an image folder's files (ROOT/CLASS/FILE), its shards.
  void look_at_arguments(const std::vector<std::string>& arguments);
  // Whether what it holds came from the arguments rather than open files.
  bool from_arguments() const;
  bool full() const;

  std::vector<std::string> files() const;
  // What `feedscope run --dataset` would take for them: "images:ROOT" where image files lie in
  // ROOT/CLASS/FILE (ROOT the most frequent grandparent), "webdataset:DIR" for .tar shards,
  // "tfrecord:DIR" for TFRecord files; nullopt where none was seen. Shards win over images (a
  // shard's members are never open files).
  std::optional<std::string> dataset() const;

 private:
  ProcFs proc_;
  std::size_t max_files_;
  mutable std::mutex mutex_;
  std::set<std::string> images_;
  std::set<std::string> tars_;
  std::set<std::string> tfrecords_;
  bool from_arguments_ = false;
  // Keeps `path` where it is data a loader reads; false otherwise. With mutex_ held.
  bool keep(const std::string& path);
};

}  // namespace feedscope
