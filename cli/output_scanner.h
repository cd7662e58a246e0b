#pragma once
// What a watched program's own output says about its speed. `--throughput-pattern` picks one
// figure per line, in the unit `--throughput-unit` names (or the pattern's own text implies):
// samples/s, iterations (batches) per second, or seconds per iteration, which the batch size
// turns into samples/s where one is known. ImageNet-style progress lines (pytorch/examples'
// `Time  0.547 ( 0.561)  Data  0.301 ( 0.320)`, timm's `Time: 0.547s, ... Data: 0.301 (0.320)`)
// also give the share of each batch's time spent waiting for data. tqdm redraws its bar with
// carriage returns: a `\r` ends a line as a `\n` does.
#include <cstdint>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/evidence.h"

namespace feedscope {

enum class ThroughputUnit {
  samples_per_s,
  iterations_per_s,
  seconds_per_iteration,
  // it/s or s/it, whichever follows the number on each line: tqdm prints s/it below 1 it/s.
  per_line,
};

// "samples/s", "it/s" (also "batches/s") or "s/it"; a ConfigError naming the value otherwise.
ThroughputUnit parse_throughput_unit(const std::string& text);
// The unit a pattern names in its own text: `it/s` and `s/it` both: per_line; `s/it`, or `Time`
// (a per-batch time): seconds_per_iteration; `it/s`: iterations_per_s; otherwise samples/s.
ThroughputUnit infer_throughput_unit(const std::string& pattern);
const char* to_string(ThroughputUnit unit);
// Throws ConfigError (key throughput_pattern) unless `pattern` is a regular expression with a group.
void check_throughput_pattern(const std::string& pattern);

struct PrintedThroughput {
  std::size_t lines = 0;  // lines the pattern matched with a number
  std::optional<double> iterations_per_s;  // null: samples/s figures without a batch size
  std::optional<double> samples_per_s;     // null: it/s or s/it figures without a batch size
  std::string basis;                       // which lines, in what unit, scaled by what
};

// A rank torch.distributed's launcher (torchrun) reported failed, from its closing table
// ("rank : 1 (local_rank: 1)" then "exitcode : 1 (pid: 812)").
struct LauncherFailure {
  int rank = 0;
  std::optional<int> local_rank;
  int exitcode = 0;  // negative: killed by that signal
  int pid = 0;
  bool root_cause = false;  // listed under torchrun's "Root Cause (first observed failure)"
};

// Whether `command` starts a torch.distributed launcher (torchrun, python -m torch.distributed.run
// or .launch, deepspeed, accelerate launch): its output then is read for its failure table.
bool starts_distributed_launcher(const std::vector<std::string>& command);

// Reads the lines of one program. Thread-safe: its stdout and stderr pumps call text() at once.
class OutputScanner {
 public:
  // `pattern` empty: no throughput, only the Time/Data lines and the first line's time.
  // `batch_size` 0: not known, so it/s and s/it stay iterations.
  OutputScanner(const std::string& pattern, ThroughputUnit unit, std::int64_t batch_size);

  // What the program printed, one line or more, at `now_ns`.
  void text(std::string_view text, std::int64_t now_ns);

  // Rates (samples/s, it/s, and tqdm's per-line it/s or s/it): the last match, a program's own
  // running figure. Seconds per iteration: the mean of the matches after the first (each is one
  // batch's time, and the first batch's includes the loader's start-up); with one match, that one.
  PrintedThroughput throughput() const;
  // sum(Data) / sum(Time) over the lines after the first (the first alone where there is one).
  PrintedDataWait data_wait() const;
  // When the first non-blank line arrived; null before any.
  std::optional<std::int64_t> first_line_ns() const;
  // The ranks torchrun's failure table named, in its order.
  std::vector<LauncherFailure> launcher_failures() const;

 private:
  void line(std::string_view text, std::int64_t now_ns);
  std::optional<double> figure_in(std::string_view line) const;  // in it/s for per_line
  std::optional<double> iterations_from(double value, std::string_view after) const;

  const std::string pattern_;
  const std::optional<std::regex> re_;
  const ThroughputUnit unit_;
  const std::int64_t batch_size_;

  // Below state is shared between the output pumps' threads.
  mutable std::mutex mutex_;
  std::optional<std::int64_t> first_line_ns_;
  std::size_t matches_ = 0;
  double last_ = 0;              // the last match, in unit_ (per_line: converted to it/s)
  double first_ = 0;             // the first match (seconds_per_iteration)
  double sum_after_first_ = 0;   // of the matches after the first (seconds_per_iteration)
  PrintedDataWait wait_;
  std::vector<LauncherFailure> failures_;
  bool in_root_cause_ = false;
  double first_time_s_ = 0, first_data_s_ = 0;
};

}  // namespace feedscope
