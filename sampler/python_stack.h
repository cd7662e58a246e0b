#pragma once
// Where a running CPython program's main thread is, read from outside as py-spy does: the Python
// frames of its main thread, read from its memory while it runs, with no change to the program
// and no pause of it. At num_workers=0 a training thread loads data and steps in turn; a frame
// under torch/utils/data says which of the two a sample caught.
//
// CPython 3.11, 3.12 and 3.13 (default builds, 64-bit Linux). The interpreter is the python3.X
// executable or the libpython3.X.so the process maps; _PyRuntime is found from its ELF symbols.
// Every read checks what it decodes (a code object's type is PyCode_Type, a name's PyUnicode_Type)
// and gives nothing, with the reason, rather than a stack that did not check out: the program runs
// on while it is read, so an unlucky read of a stack that is changing fails now and then.
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace feedscope {

struct PythonFrame {
  std::string filename;  // co_filename: "/usr/lib/python3/dist-packages/torch/utils/data/…py"
  std::string name;      // co_name: "__getitem__"
  std::string qualname;  // co_qualname: "Dataset.__getitem__"
  int line = 0;          // the line it runs; 0 where the code's line table has none for it
};

struct PythonStack {
  std::vector<PythonFrame> frames;  // innermost first; C entry frames are not listed
  bool truncated = false;           // deeper than PythonStackReader::kMaxFrames: outermost cut
};

// The innermost frame (where the thread is now), or nullptr for an empty stack.
const PythonFrame* innermost_frame(const PythonStack& stack);

// Whether the stack is inside torch's DataLoader: any frame under /torch/utils/data/. A Dataset's
// own __getitem__ is called from torch/utils/data/_utils/fetch.py, so that frame is below it.
bool is_loading_frame(const PythonStack& stack);

// Whether the stack is in torch's own waits: the backward pass (torch/autograd/, Tensor.backward),
// torch.distributed's collectives, DistributedDataParallel, a CUDA synchronize. A lock the thread
// sleeps on there is torch's (an all-reduce's, the autograd engine's), not a loader's.
bool is_torch_wait_frame(const PythonStack& stack);

// Not thread-safe: one thread reads (it keeps a cache of the code objects it has decoded).
// Readers of different processes, or several of one, may be used from different threads.
class PythonStackReader {
 public:
  static constexpr int kMaxFrames = 128;

  // The reader of process `pid`, or nullopt with why: no such process, not a Python program, a
  // CPython version not supported, no ptrace access (naming the right that is missing), ...
  static std::optional<PythonStackReader> open(int pid, std::string* why_not);
  ~PythonStackReader();
  PythonStackReader(PythonStackReader&&) noexcept;
  PythonStackReader& operator=(PythonStackReader&&) noexcept;

  // The main thread's Python stack now, or nullopt with why ("CPython 3.12: frame 3's code object
  // is not a code object"). An empty stack is a thread running no Python code (not started yet,
  // or exiting). Costs a few reads of the process's memory (microseconds); it may be called again
  // after it failed.
  std::optional<PythonStack> read_main_thread(std::string* why_not);
  // The same into `into`, reusing its storage: no allocation per read once it has held a stack as
  // deep, with names as long. On failure `into` is empty.
  bool read_main_thread(PythonStack& into, std::string* why_not);

  int pid() const;
  std::string version() const;                  // "3.11"
  const std::string& interpreter_path() const;  // the file that holds _PyRuntime, as mapped

 private:
  struct Impl;
  explicit PythonStackReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace feedscope
