#pragma once
// `feedscope make-dataset KIND ...`: writes a dataset for the loader to read. Each kind is a
// subcommand of make-dataset, registered beside the others in make_dataset.cc.
#include <iosfwd>
#include <memory>

namespace CLI {
class App;
}

namespace feedscope {

// Not thread-safe. Construct before parsing the command line (it registers its subcommands on
// `app`), call run() after when chosen().
class MakeDatasetCommand {
 public:
  explicit MakeDatasetCommand(CLI::App& app);
  ~MakeDatasetCommand();
  MakeDatasetCommand(const MakeDatasetCommand&) = delete;
  MakeDatasetCommand& operator=(const MakeDatasetCommand&) = delete;

  bool chosen() const;
  // Checks what run() would parse first (--size), writing nothing; throws ConfigError.
  void check() const;
  // Writes the chosen kind's dataset and prints a summary. Throws ConfigError naming the option
  // for bad values (exit code 2) and std::runtime_error for I/O failures.
  void run(std::ostream& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace feedscope
