#pragma once
// What a watched program's own output says about its speed. `--throughput-pattern` picks one
// figure per line, in the unit `--throughput-unit` names (or the pattern's own text implies):
// samples/s, iterations (batches) per second, or seconds per iteration, which the batch size
// turns into samples/s where one is known. ImageNet-style progress lines (pytorch/examples'
// `Time  0.547 ( 0.561)  Data  0.301 ( 0.320)`, timm's `Time: 0.547s, ... Data: 0.301 (0.320)`)
// also give the share of each batch's time spent waiting for data. tqdm redraws its bar with
// carriage returns: a `\r` ends a line as a `\n` does.
// Without a pattern the common progress lines are read as they are printed (known_formats()):
// torchvision's MetricLogger (`img/s:`, `time: ... data:`), timm, pytorch/examples' ImageNet,
// nanoGPT, word_language_model, tqdm's rate (HF Trainer's with its `{'loss': ...}` logs), and an
// explicit `N samples/s`; a line none of them reads may count its progress (`[640/60000 (1%)]`,
// `(5/13)`, a Keras bar: cli/progress_counters.h), timed on arrival; failing all, a line that
// repeats steadily with a growing number gives lines/s. Terminal colours and backspaces are
// taken out of a line before it is read.
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <regex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/progress_counters.h"
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
  std::size_t lines = 0;  // lines the pattern (or the known format read) matched with a number
  std::optional<double> iterations_per_s;  // null: samples/s figures without a batch size
  std::optional<double> samples_per_s;     // null: it/s or s/it figures without a batch size
  std::optional<double> tokens_per_s;      // a program that counts tokens (`N tokens/s`)
  // Where only a line that repeats steadily was read: its rate, in lines (no samples, no batches).
  std::optional<double> lines_per_s;
  // Which lines, in what unit, scaled by what: report.json's throughput.source.
  std::string source;
  std::string basis;  // the same, as program.notes says it
};

// A progress line format read without a flag: its name in the report and what it gives.
struct KnownFormat {
  std::string_view name;     // "nanoGPT `iter N: ... time Xms`"
  std::string_view pattern;  // the regular expression, for the docs and the tests
};
// In the order they are tried on each line; the first that matches gives the line's figure.
const std::vector<KnownFormat>& known_formats();

// The batch size a command line gives: `-b N`, `--batch-size N`, `--batch_size=N` (nanoGPT),
// `--batch-size=N`, `--batch_size N`, `--batchSize N` (dcgan, super_resolution),
// `--per_device_train_batch_size N` (HF Trainer's scripts); and `--gradient_accumulation_steps=N`
// (nanoGPT, HF), the micro-batches of one of its iterations. None where no word gives a positive
// number.
struct CommandBatchSize {
  std::int64_t batch_size = 0;
  std::string flag;  // the words that gave it: "--batch_size=12"
  std::int64_t accumulation = 0;  // 0: not on the command line
  std::string accumulation_flag;
};
std::optional<CommandBatchSize> batch_size_in_command(const std::vector<std::string>& command);

// Where one of `names` stands at word `i` of a command line with its value: the word that holds the
// value, and where the value starts in it (`-j 2`: the next word, 0; `--workers=2`: word i, past
// the `=`). None where word i is none of them.
struct FlagAt {
  std::size_t word = 0;
  std::size_t value_at = 0;
};
std::optional<FlagAt> flag_at(const std::vector<std::string>& command, std::size_t i,
                              std::span<const std::string_view> names);

// A positive integer a command line gives under one of `names` (`--name N` or `--name=N`; the last
// one wins; nothing after `--`), with the words that gave it.
struct CommandFlag {
  std::int64_t value = 0;
  std::string flag;  // "--train-crop-size 128"
};
std::optional<CommandFlag> int_flag_in_command(const std::vector<std::string>& command,
                                               std::initializer_list<std::string_view> names);
// The image size a training script crops to: `--image-size`, `--img-size`, `--crop-size`,
// `--train-crop-size` (torchvision's references), `--input-size` (timm), in either spelling.
std::optional<CommandFlag> image_size_in_command(const std::vector<std::string>& command);

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
  // `pattern` empty: the known formats' throughput. `batch_size` 0: not known, so it/s and s/it
  // stay iterations; a CommandBatchSize names where it came from (else "--batch-size").
  OutputScanner(const std::string& pattern, ThroughputUnit unit, std::int64_t batch_size);
  OutputScanner(const std::string& pattern, ThroughputUnit unit, const CommandBatchSize& batch);

  // What the program printed, one line or more, at `now_ns`.
  void text(std::string_view text, std::int64_t now_ns);

  // Rates (samples/s, it/s, and tqdm's per-line it/s or s/it): the last match, a program's own
  // running figure. Seconds per iteration: the mean of the matches after the first (each is one
  // batch's time, and the first batch's includes the loader's start-up); with one match, that one.
  // Without a pattern: the known format that matched the most lines, its times (and its rates
  // that are one interval's, not running like tqdm's) the mean of its lines that carry no start-up.
  PrintedThroughput throughput() const;
  // sum(Data) / sum(Time) over the lines that carry no start-up: after the first, and for
  // MetricLogger's 20-batch means, from the 20th batch of an epoch on (else all after the first;
  // the first alone where there is one). ImageNet's `Time ... Data` or MetricLogger's
  // `time: ... data:`, whichever the program printed more of.
  PrintedDataWait data_wait() const;
  // When the first non-blank line arrived; null before any.
  std::optional<std::int64_t> first_line_ns() const;
  // The ranks torchrun's failure table named, in its order.
  std::vector<LauncherFailure> launcher_failures() const;

 private:
  // A series of one format's figures, where the first line(s) carry the start-up.
  struct Tally {
    std::size_t lines = 0;
    double first = 0, last = 0;
    double after_first = 0;  // summed over the lines after the first
    double clean = 0;        // summed over the lines that carry no start-up
    std::size_t clean_lines = 0;
    void add(double v, bool startup);
    std::size_t counted() const;  // the lines sum() adds
    // Over the clean lines, else over those after the first, else the first.
    double sum() const;
    double mean() const;
    std::string mean_basis() const;  // "the mean of 47 lines after the first"
  };
  struct DataTally {
    Tally time, data;
    std::string_view columns;  // "`Time ... Data ...`"
  };

  void line(std::string_view text, std::int64_t now_ns);
  void launcher_table_line(std::string_view text);
  std::optional<double> figure_in(std::string_view line) const;  // in it/s for per_line
  std::optional<double> iterations_from(double value, std::string_view after) const;
  PrintedThroughput pattern_throughput() const;
  PrintedThroughput known_throughput() const;
  PrintedThroughput figure_throughput(std::size_t format) const;  // a known format's figure
  PrintedThroughput counter_throughput(const CounterRate& counter) const;
  std::string batch_text() const;  // "batch size 12 from --batch_size=12"

  const std::string pattern_;
  const std::optional<std::regex> re_;
  const ThroughputUnit unit_;
  const CommandBatchSize batch_;

  // Below state is shared between the output pumps' threads.
  mutable std::mutex mutex_;
  std::optional<std::int64_t> first_line_ns_;
  std::size_t matches_ = 0;
  double last_ = 0;              // the last match, in unit_ (per_line: converted to it/s)
  double first_ = 0;             // the first match (seconds_per_iteration)
  double sum_after_first_ = 0;   // of the matches after the first (seconds_per_iteration)
  DataTally imagenet_wait_, metric_logger_wait_;
  std::vector<Tally> known_;  // one per known_formats() entry, in its figure's unit
  ProgressCounters counters_;
  std::size_t hf_trainer_logs_ = 0;  // HF Trainer's `{'loss': ..., 'epoch': E}` lines
  std::vector<LauncherFailure> failures_;
  bool in_root_cause_ = false;
};

}  // namespace feedscope
