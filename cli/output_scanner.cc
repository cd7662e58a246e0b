#include "cli/output_scanner.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cli/config.h"

namespace feedscope {

namespace {

// The current values of an ImageNet-style line: `Time` then, later on the line, `Data`.
const std::regex& time_data_line() {
  static const std::regex re(R"(\bTime:?\s+([0-9]*\.?[0-9]+)[^\r\n]*?\bData:?\s+([0-9]*\.?[0-9]+))");
  return re;
}

std::optional<double> number(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v >= 0)) return std::nullopt;  // a group that is no figure
  return v;
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

std::string fixed(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

// Each line's current values (the first number after each word).
std::optional<std::pair<double, double>> time_and_data_in(std::string_view text) {
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(text.begin(), text.end(), m, time_data_line())) return std::nullopt;
  const auto t = number(m[1].str()), d = number(m[2].str());
  if (!t || !d) return std::nullopt;
  return std::pair(*t, *d);
}

}  // namespace

ThroughputUnit parse_throughput_unit(const std::string& text) {
  if (text == "samples/s") return ThroughputUnit::samples_per_s;
  if (text == "it/s" || text == "batches/s") return ThroughputUnit::iterations_per_s;
  if (text == "s/it") return ThroughputUnit::seconds_per_iteration;
  throw ConfigError("throughput_unit", "--throughput-unit: '" + text +
                                           "' is not a unit; allowed: samples/s, it/s (or "
                                           "batches/s), s/it (seconds per batch)");
}

ThroughputUnit infer_throughput_unit(const std::string& pattern) {
  const bool rate = pattern.find("it/s") != std::string::npos;
  const bool time = pattern.find("s/it") != std::string::npos;
  if (rate && time) return ThroughputUnit::per_line;
  if (time || pattern.find("Time") != std::string::npos) return ThroughputUnit::seconds_per_iteration;
  if (rate) return ThroughputUnit::iterations_per_s;
  return ThroughputUnit::samples_per_s;
}

const char* to_string(ThroughputUnit unit) {
  switch (unit) {
    case ThroughputUnit::samples_per_s: return "samples/s";
    case ThroughputUnit::iterations_per_s: return "it/s";
    case ThroughputUnit::seconds_per_iteration: return "s/it";
    case ThroughputUnit::per_line: return "it/s or s/it, as each line says";
  }
  return "?";
}

void check_throughput_pattern(const std::string& pattern) {
  try {
    const std::regex re(pattern);
    if (re.mark_count() < 1)
      throw ConfigError("throughput_pattern",
                        "--throughput-pattern '" + pattern +
                            "': needs one group around the figure, as '([0-9.]+) samples/s' or "
                            "'([0-9.]+)it/s'");
  } catch (const std::regex_error& e) {
    throw ConfigError("throughput_pattern",
                      "--throughput-pattern '" + pattern + "': not a regular expression: " + e.what());
  }
}

OutputScanner::OutputScanner(const std::string& pattern, ThroughputUnit unit, std::int64_t batch_size)
    : pattern_(pattern),
      re_(pattern.empty() ? std::nullopt : std::optional<std::regex>(std::regex(pattern))),
      unit_(unit),
      batch_size_(batch_size) {}

void OutputScanner::text(std::string_view text, std::int64_t now_ns) {
  while (!text.empty()) {
    const std::size_t end = text.find_first_of("\r\n");
    line(text.substr(0, end), now_ns);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}

// tqdm's figure is followed by its unit: `12.34it/s` or `1.23s/it`.
std::optional<double> OutputScanner::iterations_from(double value, std::string_view after) const {
  if (unit_ != ThroughputUnit::per_line) return value;
  after.remove_prefix(std::min(after.find_first_not_of(' '), after.size()));
  if (after.starts_with("it/s")) return value;
  if (after.starts_with("s/it") && value > 0) return 1 / value;
  return std::nullopt;
}

std::optional<double> OutputScanner::figure_in(std::string_view text) const {
  if (!re_) return std::nullopt;
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(text.begin(), text.end(), m, *re_)) return std::nullopt;
  const auto v = number(m[1].str());
  if (!v) return std::nullopt;
  return iterations_from(*v, text.substr(static_cast<std::size_t>(m[1].second - text.begin())));
}

bool starts_distributed_launcher(const std::vector<std::string>& command) {
  for (const std::string& word : command) {
    const std::string name = word.substr(word.rfind('/') + 1);
    if (name == "torchrun" || name == "deepspeed" || name == "accelerate" ||
        word == "torch.distributed.run" || word == "torch.distributed.launch")
      return true;
  }
  return false;
}

namespace {

// "  rank      : 1 (local_rank: 1)" -> (1, 1); "  exitcode  : -9 (pid: 812)" -> (-9, 812).
std::optional<std::pair<int, std::optional<int>>> launcher_field(std::string_view text, std::string_view key,
                                                                 std::string_view inner) {
  const std::size_t k = text.find_first_not_of(" \t");
  if (k == std::string_view::npos || text.substr(k, key.size()) != key) return std::nullopt;
  const std::size_t colon = text.find(':', k + key.size());
  if (colon == std::string_view::npos || text.find_first_not_of(" \t", k + key.size()) != colon)
    return std::nullopt;
  const std::string rest(text.substr(colon + 1));
  int value = 0, second = 0;
  const std::string format = " %d (" + std::string(inner) + ": %d)";
  const int n = std::sscanf(rest.c_str(), format.c_str(), &value, &second);
  if (n < 1) return std::nullopt;
  return std::make_pair(value, n == 2 ? std::optional<int>(second) : std::nullopt);
}

}  // namespace

void OutputScanner::line(std::string_view text, std::int64_t now_ns) {
  if (blank(text)) return;
  if (text.find("Root Cause") != std::string_view::npos) {
    std::lock_guard lock(mutex_);
    in_root_cause_ = true;
  }
  if (const auto rank = launcher_field(text, "rank", "local_rank")) {
    std::lock_guard lock(mutex_);
    LauncherFailure f;
    f.rank = rank->first;
    f.local_rank = rank->second;
    f.root_cause = in_root_cause_;
    failures_.push_back(f);
  } else if (const auto exit = launcher_field(text, "exitcode", "pid")) {
    std::lock_guard lock(mutex_);
    if (!failures_.empty()) {
      failures_.back().exitcode = exit->first;
      failures_.back().pid = exit->second.value_or(0);
    }
  }
  const std::optional<double> figure = figure_in(text);
  const std::optional<std::pair<double, double>> time_data = time_and_data_in(text);
  std::lock_guard lock(mutex_);
  if (!first_line_ns_) first_line_ns_ = now_ns;
  if (figure) {
    if (matches_ == 0) first_ = *figure;
    else sum_after_first_ += *figure;
    last_ = *figure;
    ++matches_;
  }
  if (time_data) {
    if (wait_.lines == 0) {
      first_time_s_ = time_data->first;
      first_data_s_ = time_data->second;
    } else {
      wait_.time_s += time_data->first;
      wait_.data_s += time_data->second;
      ++wait_.counted;
    }
    ++wait_.lines;
  }
}

std::vector<LauncherFailure> OutputScanner::launcher_failures() const {
  std::lock_guard lock(mutex_);
  return failures_;
}

PrintedThroughput OutputScanner::throughput() const {
  std::lock_guard lock(mutex_);
  PrintedThroughput t;
  t.lines = matches_;
  if (matches_ == 0) return t;
  std::optional<double> samples, iterations;
  std::string how;
  switch (unit_) {
    case ThroughputUnit::samples_per_s:
      samples = last_;
      how = "the last of " + std::to_string(matches_) + " lines, in samples/s";
      break;
    case ThroughputUnit::iterations_per_s:
    case ThroughputUnit::per_line:
      iterations = last_;
      how = "the last of " + std::to_string(matches_) + " lines, in " + to_string(unit_);
      break;
    case ThroughputUnit::seconds_per_iteration: {
      const double mean_s = matches_ > 1 ? sum_after_first_ / static_cast<double>(matches_ - 1) : first_;
      if (mean_s > 0) iterations = 1 / mean_s;
      how = matches_ > 1 ? "the mean of " + std::to_string(matches_ - 1) + " lines after the first, " +
                               fixed("%.4g", mean_s) + " s/it"
                         : "its one line, " + fixed("%.4g", mean_s) + " s/it";
      break;
    }
  }
  if (batch_size_ > 0) {
    if (samples) iterations = *samples / static_cast<double>(batch_size_);
    else if (iterations) samples = *iterations * static_cast<double>(batch_size_);
    if (unit_ != ThroughputUnit::samples_per_s)
      how += ", x batch size " + std::to_string(batch_size_) + " for samples/s";
  } else if (unit_ != ThroughputUnit::samples_per_s) {
    how += "; samples/s not measured: no batch size ({batch_size} in the command, or --batch-size)";
  }
  t.samples_per_s = samples;
  t.iterations_per_s = iterations;
  t.basis = "throughput from the program's own lines matching --throughput-pattern '" + pattern_ +
            "': " + how;
  return t;
}

PrintedDataWait OutputScanner::data_wait() const {
  std::lock_guard lock(mutex_);
  PrintedDataWait w = wait_;
  if (w.lines == 1) {  // one line: it is all there is
    w.time_s = first_time_s_;
    w.data_s = first_data_s_;
    w.counted = 1;
  }
  if (w.lines > 0 && w.time_s > 0) w.share = std::min(1.0, w.data_s / w.time_s);
  return w;
}

std::optional<std::int64_t> OutputScanner::first_line_ns() const {
  std::lock_guard lock(mutex_);
  return first_line_ns_;
}

}  // namespace feedscope
