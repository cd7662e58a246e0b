#pragma once
// The feedscope command line as a function: cli/program.cc's main() calls it to run a command,
// and tests call it in check-only mode to hold the documented commands (README.md, docs/, the
// examples every --help ends with) to the parser the program uses.
#include <iosfwd>

namespace feedscope {

struct CommandLineMode {
  // Parse the command line and check every option and value as the command would before its
  // first run (the config keys, a sweep's grid, watch's pattern and unit, make-dataset's size),
  // then return 0 without running anything, reading a dataset or creating a file.
  bool check_only = false;
  // Help and usage errors go here; null: std::cout and std::cerr. A command that runs prints to
  // std::cout and std::cerr whatever these are.
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
};

// Returns DESIGN.md's exit code: 0 done, 2 bad usage or config, 3 bad data, 4 runtime failure,
// 128 + N for a run stopped by signal N. Not thread-safe (one command line at a time).
int feedscope_main(int argc, char** argv, const CommandLineMode& mode = {});

}  // namespace feedscope
