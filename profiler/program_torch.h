#pragma once
// Which torch a watched program runs, read from the outside: the advice must fit it
// (torch.compile exists from 2.0 on; torch 1.13 has none). The program's memory map names the
// libraries it loaded: Python's torch/_C.*.so sits beside torch/version.py; a libtorch program's
// lib/libtorch_cpu.so sits under the distribution's build-version file; a distribution's soname
// carries the version (Debian's libtorch_cpu.so.1.13.0).
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "sampler/proc_fs.h"

namespace feedscope {

struct ProgramTorch {
  std::string version;  // "1.13.0a0", "2.11.0+cu130"
  std::string source;   // the file the version came from
};

// From the text of /proc/<pid>/maps; nullopt where no torch library is mapped or no version file
// or versioned soname says which.
std::optional<ProgramTorch> torch_of_maps(const std::string& maps, const ProcFs& fs);

// The version's major number, 0 where it does not start with one.
int torch_major(const std::string& version);

// Looks at the watched processes as they are read, until one shows its torch: a program imports
// torch a while after it starts, so a process is looked at again, at most once a second.
// Not thread-safe: the sampling thread calls look(), the caller reads found() after it stopped.
class ProgramTorchProbe {
 public:
  explicit ProgramTorchProbe(ProcFs fs = ProcFs()) : fs_(std::move(fs)) {}
  void look(int pid, std::int64_t now_ns);
  const std::optional<ProgramTorch>& found() const { return found_; }

 private:
  ProcFs fs_;
  std::map<int, std::int64_t> last_look_ns_;
  std::optional<ProgramTorch> found_;
};

}  // namespace feedscope
