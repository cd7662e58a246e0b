#include "cli/output_scanner.h"

#include <algorithm>
#include <cstdlib>

#include "cli/config.h"
#include "profiler/detail/format.h"

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

using detail::fmt;

// Each line's current values (the first number after each word).
std::optional<std::pair<double, double>> time_and_data_in(std::string_view text) {
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(text.begin(), text.end(), m, time_data_line())) return std::nullopt;
  const auto t = number(m[1].str()), d = number(m[2].str());
  if (!t || !d) return std::nullopt;
  return std::pair(*t, *d);
}

// What a known format's figure is, and whether it is a running figure (tqdm's smoothed rate,
// whose last value stands for the run) or one interval's (averaged over the lines).
enum class Figure { samples_per_s, tokens_per_s, iterations_per_s, seconds_per_iteration };

struct Format {
  KnownFormat known;
  Figure figure;
  bool running;
};

#define FS_NUM "([0-9]*\\.?[0-9]+)"
// torchvision's MetricLogger line: `Epoch: [0]  [  20/1251]  eta: 0:10:37  ...`; group 1 the batch.
#define FS_METRIC_LOGGER "\\[\\s*([0-9]+)/[0-9]+\\]\\s+eta:\\s+\\S.*"
#define FS_TQDM "\\[[0-9:]+(?:<[0-9:?]+)?,\\s+" FS_NUM "([kMG]?)"
#define FS_TQDM_UNIT(u) "(?:" u "/s|s/" u ")(?=[,\\]])"

enum FormatIndex : std::size_t {
  kMetricLoggerTime, kMetricLoggerImg, kTimmRate, kImageNetTime, kNanoGpt, kWordLanguageModel,
  kTqdmIterations, kTqdmSamples, kTqdmTokens, kSamplesRate, kTokensRate, kSecondsPerBatch,
  kBatchesRate, kFormatCount
};

const std::vector<Format>& formats() {
  static const std::vector<Format> list = {
      // A MetricLogger line's `time:` is the whole iteration, its wait for data included; torchvision's
      // reference trainer times its `img/s:` from after the batch arrived (batch / step time), so
      // an input-bound loop's img/s is the step's speed, not the loop's. The line's `time:` comes
      // first; `img/s:` is read only from a line without it.
      {{"torchvision MetricLogger `time: S  data: S` (20-batch means)",
        FS_METRIC_LOGGER "\\btime:\\s+" FS_NUM "(?:\\s*\\([^)]*\\))?\\s+data:\\s+" FS_NUM "(?:\\s|\\(|$)"},
       Figure::seconds_per_iteration, false},
      {{"torchvision MetricLogger `img/s: N`", FS_METRIC_LOGGER "\\bimg/s:\\s+" FS_NUM "(?:\\s|$)"},
       Figure::samples_per_s, false},
      {{"timm `Time: Ss,  N/s`", "\\bTime:\\s*[0-9.]+s,\\s+" FS_NUM "/s(?:\\s|$)"}, Figure::samples_per_s, false},
      {{"ImageNet `Time S (S)  Data S (S)`",
        "\\bTime:?\\s+" FS_NUM "[^\\r\\n]*?\\bData:?\\s+([0-9]*\\.?[0-9]+)"},
       Figure::seconds_per_iteration, false},
      {{"nanoGPT `iter N: loss L, time Xms`", "^iter\\s+([0-9]+):\\s+loss\\s+\\S+,\\s+time\\s+" FS_NUM "ms\\b"},
       Figure::seconds_per_iteration, false},
      {{"word_language_model `| epoch E | B/N batches | ... | ms/batch X |`",
        "\\|\\s*epoch\\s+[0-9]+\\s*\\|\\s*[0-9]+/\\s*[0-9]+\\s+batches\\s*\\|.*\\|\\s*ms/batch\\s+" FS_NUM "\\s*\\|"},
       Figure::seconds_per_iteration, false},
      {{"tqdm `[elapsed<left, Nit/s]` (or `Ss/it`)", FS_TQDM FS_TQDM_UNIT("(it)")}, Figure::iterations_per_s, true},
      {{"tqdm `[elapsed<left, Nimg/s]` (img, images, samples)", FS_TQDM FS_TQDM_UNIT("(img|images|samples)")},
       Figure::samples_per_s, true},
      {{"tqdm `[elapsed<left, Ntokens/s]`", FS_TQDM FS_TQDM_UNIT("(tokens|tok)")}, Figure::tokens_per_s, true},
      {{"`N samples/s` (img/s, images/s; /sec)",
        "(?:^|[\\s:=,(])" FS_NUM " ?(?:samples|img|images)/s(?:ec)?(?![/:\\w])"},
       Figure::samples_per_s, false},
      {{"`N tokens/s` (/sec)", "(?:^|[\\s:=,(])" FS_NUM " ?tokens/s(?:ec)?(?![/:\\w])"}, Figure::tokens_per_s, false},
      // Not `it/s` or `s/it` outside tqdm's brackets: in prose they are too often something else.
      {{"`N s/batch` (ms/batch; /iter, /step)",
        "(?:^|[\\s:=,(|])" FS_NUM " ?(m?s)/(?:batch|iter|step)(?![/\\w])"},
       Figure::seconds_per_iteration, false},
      {{"`N batches/s` (steps/s; /sec)",
        "(?:^|[\\s:=,(|])" FS_NUM " ?(?:batch(?:es)?|steps?)/s(?:ec)?(?![/:\\w])"},
       Figure::iterations_per_s, false},
  };
  return list;
}

#undef FS_NUM
#undef FS_METRIC_LOGGER
#undef FS_TQDM
#undef FS_TQDM_UNIT

const std::vector<std::regex>& format_regexes() {
  static const std::vector<std::regex> list = [] {
    std::vector<std::regex> out;
    for (const Format& f : formats()) out.emplace_back(std::string(f.known.pattern));
    return out;
  }();
  return list;
}

using Match = std::match_results<std::string_view::const_iterator>;

bool search(std::string_view text, std::size_t format, Match& m) {
  return std::regex_search(text.begin(), text.end(), m, format_regexes()[format]);
}

// A MetricLogger line's figures are means over the epoch's last 20 batches: before its 20th,
// the mean holds the epoch's first batch, and with it the loader's start-up.
constexpr long kMetricLoggerWindow = 20;

bool metric_logger_startup(const Match& m) {
  return std::strtol(m[1].str().c_str(), nullptr, 10) < kMetricLoggerWindow;
}

// One line's figure from the first known format it matches, in the format's unit (tqdm's
// seconds per iteration turned into its rate), and whether it carries start-up.
struct LineFigure {
  std::size_t format;
  double value;
  bool startup;
};

double si_scale(const std::string& prefix) {
  return prefix == "k" ? 1e3 : prefix == "M" ? 1e6 : prefix == "G" ? 1e9 : 1;
}

std::optional<LineFigure> known_figure(std::string_view text) {
  Match m;
  for (std::size_t f = 0; f < kFormatCount; ++f) {
    if (!search(text, f, m)) continue;
    switch (f) {
      case kMetricLoggerImg:
      case kMetricLoggerTime:
        if (const auto v = number(m[2].str())) return LineFigure{f, *v, metric_logger_startup(m)};
        break;
      case kNanoGpt:
        if (const auto v = number(m[2].str())) return LineFigure{f, *v / 1000, m[1].str() == "0"};
        break;
      case kWordLanguageModel:
        if (const auto v = number(m[1].str())) return LineFigure{f, *v / 1000, false};
        break;
      case kSecondsPerBatch:
        if (const auto v = number(m[1].str())) return LineFigure{f, m[2].str() == "ms" ? *v / 1000 : *v, false};
        break;
      case kTqdmIterations:
      case kTqdmSamples:
      case kTqdmTokens: {
        const auto v = number(m[1].str());
        if (!v || !(*v > 0)) break;
        const double scaled = *v * si_scale(m[2].str());
        const bool inverse = !m[3].matched;  // `1.25s/it`: seconds per item
        return LineFigure{f, inverse ? 1 / scaled : scaled, false};
      }
      default:
        if (const auto v = number(m[1].str())) return LineFigure{f, *v, false};
        break;
    }
  }
  return std::nullopt;
}

// MetricLogger's `time: ... data:` means, with whether they carry start-up.
std::optional<std::pair<std::pair<double, double>, bool>> metric_logger_time_data(std::string_view text) {
  Match m;
  if (!search(text, kMetricLoggerTime, m)) return std::nullopt;
  const auto t = number(m[2].str()), d = number(m[3].str());
  if (!t || !d) return std::nullopt;
  return std::pair(std::pair(*t, *d), metric_logger_startup(m));
}

std::string count_of(std::size_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// The line without terminal colours (`\x1b[1m`: Keras 3 colours its bar into a pipe too) and the
// backspaces a bar redraws over itself with (Keras writes them before its `\r`).
std::string_view plain_text(std::string_view text, std::string& buffer) {
  if (text.find_first_of("\x1b\b") == std::string_view::npos) return text;
  buffer.clear();
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\b') continue;
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !(text[i] >= 0x40 && text[i] <= 0x7e)) ++i;  // to the final byte
      continue;
    }
    buffer += text[i];
  }
  return buffer;
}

// HF Trainer's logs, `{'loss': 2.3052, 'grad_norm': 1.8, 'learning_rate': 4.9e-05, 'epoch': 0.08}`:
// its tqdm bar's it/s are optimizer steps of per_device_train_batch_size x accumulation samples.
bool hf_trainer_log(std::string_view text) {
  static const std::regex re(R"(^\{'loss': [^}]*'epoch': [0-9.]+)");
  return std::regex_search(text.begin(), text.end(), re);
}

}  // namespace

const std::vector<KnownFormat>& known_formats() {
  static const std::vector<KnownFormat> list = [] {
    std::vector<KnownFormat> out;
    for (const Format& f : formats()) out.push_back(f.known);
    return out;
  }();
  return list;
}

namespace {

// `--batch-size=12` -> 12 with its flag; `-b 12` over two words.
std::optional<std::int64_t> positive(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 12)
    return std::nullopt;
  const std::int64_t v = std::stoll(text);
  return v > 0 ? std::optional(v) : std::nullopt;
}

std::optional<std::pair<std::int64_t, std::string>> flag_value(const std::vector<std::string>& command,
                                                               std::size_t i,
                                                               std::initializer_list<std::string_view> names) {
  const std::optional<FlagAt> at = flag_at(command, i, std::span(names.begin(), names.size()));
  if (!at) return std::nullopt;
  const auto v = positive(command[at->word].substr(at->value_at));
  if (!v) return std::nullopt;
  return std::pair(*v, at->value_at > 0 ? command[i] : command[i] + " " + command[at->word]);
}

}  // namespace

std::optional<FlagAt> flag_at(const std::vector<std::string>& command, std::size_t i,
                              std::span<const std::string_view> names) {
  const std::string& word = command[i];
  for (const std::string_view name : names) {
    if (word == name && i + 1 < command.size()) return FlagAt{i + 1, 0};
    if (word.size() > name.size() && word.starts_with(name) && word[name.size()] == '=')
      return FlagAt{i, name.size() + 1};
  }
  return std::nullopt;
}

std::optional<CommandBatchSize> batch_size_in_command(const std::vector<std::string>& command) {
  const std::optional<CommandFlag> batch =
      int_flag_in_command(command, {"-b", "--batch-size", "--batch_size", "--batchSize",
                                    "--per_device_train_batch_size", "--per-device-train-batch-size"});
  if (!batch) return std::nullopt;
  CommandBatchSize b;
  b.batch_size = batch->value;
  b.flag = batch->flag;
  if (const auto a = int_flag_in_command(command, {"--gradient_accumulation_steps"})) {
    b.accumulation = a->value;
    b.accumulation_flag = a->flag;
  }
  return b;
}

std::optional<CommandFlag> int_flag_in_command(const std::vector<std::string>& command,
                                               std::initializer_list<std::string_view> names) {
  std::optional<CommandFlag> out;
  for (std::size_t i = 0; i < command.size() && command[i] != "--"; ++i)
    if (const auto v = flag_value(command, i, names)) out = CommandFlag{v->first, v->second};
  return out;
}

std::optional<CommandFlag> image_size_in_command(const std::vector<std::string>& command) {
  return int_flag_in_command(command, {"--image-size", "--image_size", "--img-size", "--img_size",
                                       "--crop-size", "--crop_size", "--train-crop-size",
                                       "--train_crop_size", "--input-size", "--input_size"});
}

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
    : OutputScanner(pattern, unit, CommandBatchSize{batch_size, "--batch-size", 0, ""}) {}

OutputScanner::OutputScanner(const std::string& pattern, ThroughputUnit unit, const CommandBatchSize& batch)
    : pattern_(pattern),
      re_(pattern.empty() ? std::nullopt : std::optional<std::regex>(std::regex(pattern))),
      unit_(unit),
      batch_(batch),
      known_(kFormatCount),
      counters_(batch.batch_size) {
  imagenet_wait_.columns = "`Time ... Data ...`";
  metric_logger_wait_.columns = "MetricLogger `time: ... data: ...`";
}

void OutputScanner::Tally::add(double v, bool startup) {
  if (lines == 0) first = v;
  else after_first += v;
  if (lines > 0 && !startup) {
    clean += v;
    ++clean_lines;
  }
  last = v;
  ++lines;
}

std::size_t OutputScanner::Tally::counted() const {
  return clean_lines > 0 ? clean_lines : lines > 1 ? lines - 1 : lines;
}

double OutputScanner::Tally::sum() const {
  return clean_lines > 0 ? clean : lines > 1 ? after_first : first;
}

double OutputScanner::Tally::mean() const {
  return lines > 0 ? sum() / static_cast<double>(counted()) : 0;
}

std::string OutputScanner::Tally::mean_basis() const {
  if (clean_lines > 0 && clean_lines + 1 < lines)
    return "the mean of " + count_of(clean_lines, "line") + " past the start-up";
  if (lines > 1) return "the mean of " + count_of(lines - 1, "line") + " after the first";
  return "its one line";
}

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

// torchrun's failure table: a rank's line, then its exit code's.
void OutputScanner::launcher_table_line(std::string_view text) {
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
}

void OutputScanner::line(std::string_view raw, std::int64_t now_ns) {
  std::string buffer;
  const std::string_view text = plain_text(raw, buffer);
  if (blank(text)) return;
  launcher_table_line(text);
  const std::optional<double> figure = figure_in(text);
  // A counter is read where no known format's figure is, but a Keras bar before its `Nms/step`.
  std::optional<CounterMatch> counter = re_ ? std::nullopt : match_counters(text);
  const std::optional<LineFigure> known =
      re_ || (counter && counter->before_figures) ? std::nullopt : known_figure(text);
  if (known) counter.reset();
  const bool hf_log = !re_ && !known && !counter && hf_trainer_log(text);
  const std::optional<std::pair<double, double>> time_data = time_and_data_in(text);
  const auto logger_time_data = time_data ? std::nullopt : metric_logger_time_data(text);
  std::lock_guard lock(mutex_);
  if (!first_line_ns_) first_line_ns_ = now_ns;
  if (figure) {
    if (matches_ == 0) first_ = *figure;
    else sum_after_first_ += *figure;
    last_ = *figure;
    ++matches_;
  }
  if (known) known_[known->format].add(known->value, known->startup);
  if (counter) counters_.add(*counter, now_ns);
  if (hf_log) ++hf_trainer_logs_;
  if (!re_ && !known && !counter && !hf_log) counters_.other(text, now_ns);
  if (time_data) {
    imagenet_wait_.time.add(time_data->first, false);
    imagenet_wait_.data.add(time_data->second, false);
  } else if (logger_time_data) {
    const auto [td, startup] = *logger_time_data;
    metric_logger_wait_.time.add(td.first, startup);
    metric_logger_wait_.data.add(td.second, startup);
  }
}

std::vector<LauncherFailure> OutputScanner::launcher_failures() const {
  std::lock_guard lock(mutex_);
  return failures_;
}

PrintedThroughput OutputScanner::throughput() const {
  std::lock_guard lock(mutex_);
  return re_ ? pattern_throughput() : known_throughput();
}

std::string OutputScanner::batch_text() const {
  return "batch size " + std::to_string(batch_.batch_size) + " from " + batch_.flag;
}

PrintedThroughput OutputScanner::pattern_throughput() const {
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
                               fmt("%.4g", mean_s) + " s/it"
                         : "its one line, " + fmt("%.4g", mean_s) + " s/it";
      break;
    }
  }
  if (batch_.batch_size > 0) {
    const double batch = static_cast<double>(batch_.batch_size);
    if (samples) iterations = *samples / batch;
    else if (iterations) samples = *iterations * batch;
    if (unit_ != ThroughputUnit::samples_per_s) how += ", x batch size " + std::to_string(batch_.batch_size) + " for samples/s";
  } else if (unit_ != ThroughputUnit::samples_per_s) {
    how += "; samples/s not measured: no batch size ({batch_size} in the command, or --batch-size)";
  }
  t.samples_per_s = samples;
  t.iterations_per_s = iterations;
  t.source = "the program's own lines matching --throughput-pattern '" + pattern_ + "': " + how;
  t.basis = "throughput from " + t.source;
  return t;
}

namespace {

constexpr const char* kNoBatchSize =
    "samples/s not measured: no batch size on the command line (-b, --batch-size, --batch_size, "
    "--batchSize, --per_device_train_batch_size) or --batch-size";

}  // namespace

// The known format with the most lines (the earlier in the list on a tie) gives the figure, or a
// counter read on more lines; failing both, a line that repeats steadily.
PrintedThroughput OutputScanner::known_throughput() const {
  std::size_t best = kFormatCount;
  for (std::size_t f = 0; f < kFormatCount; ++f)
    if (known_[f].lines > 0 && (best == kFormatCount || known_[f].lines > known_[best].lines)) best = f;
  const std::optional<CounterRate> counter = counters_.counter_rate();
  if (counter && (best == kFormatCount || counter->lines > known_[best].lines))
    return counter_throughput(*counter);
  if (best != kFormatCount) return figure_throughput(best);
  if (const std::optional<CounterRate> repeating = counters_.repeating_line())
    return counter_throughput(*repeating);
  return {};
}

PrintedThroughput OutputScanner::figure_throughput(std::size_t best) const {
  PrintedThroughput t;
  const Format& format = formats()[best];
  const Tally& tally = known_[best];
  t.lines = tally.lines;
  const double value = format.running ? tally.last : tally.mean();
  std::string how = format.running ? "the last, its running figure" : tally.mean_basis();
  std::optional<double> samples, iterations;
  switch (format.figure) {
    case Figure::samples_per_s:
      samples = value;
      how += fmt(", %.4g samples/s", value);
      break;
    case Figure::tokens_per_s:
      t.tokens_per_s = value;
      how += fmt(", %.4g tokens/s; samples/s not measured (a token is no sample)", value);
      break;
    case Figure::iterations_per_s:
      iterations = value;
      how += fmt(", %.4g it/s", value);
      break;
    case Figure::seconds_per_iteration:
      if (value > 0) iterations = 1 / value;
      how += value < 0.1 ? fmt(", %.4g ms/it", value * 1000) : fmt(", %.4g s/it", value);
      break;
  }
  // A nanoGPT iteration is gradient_accumulation_steps micro-batches of --batch_size; an HF
  // Trainer's tqdm step is gradient_accumulation_steps batches of per_device_train_batch_size.
  const bool hf = best == kTqdmIterations && hf_trainer_logs_ > 0;
  const bool accumulates = best == kNanoGpt || hf;
  const std::int64_t per_iteration =
      batch_.batch_size * (accumulates && batch_.accumulation > 0 ? batch_.accumulation : 1);
  if (batch_.batch_size > 0 && format.figure != Figure::tokens_per_s) {
    if (samples) {
      iterations = *samples / static_cast<double>(per_iteration);
    } else if (iterations) {
      samples = *iterations * static_cast<double>(per_iteration);
      how += ", " + batch_text();
      if (accumulates)
        how += batch_.accumulation > 0
                   ? " x " + std::to_string(batch_.accumulation) + " micro-batches from " + batch_.accumulation_flag
                   : " (one micro-batch an iteration: gradient_accumulation_steps is not on the command line)";
    }
  } else if (iterations && !samples) {
    how += std::string("; ") + kNoBatchSize;
  }
  t.samples_per_s = samples;
  t.iterations_per_s = iterations;
  const std::string name = hf ? "HF Trainer (" + count_of(hf_trainer_logs_, "`{'loss': ..., 'epoch': E}` log") +
                                    ") with its " + std::string(format.known.name)
                              : std::string(format.known.name);
  t.source = "the program's own lines: " + name + ", " + count_of(tally.lines, "line") + " (" + how + ")";
  t.basis = "throughput from " + t.source;
  return t;
}

// A counter's rate in its unit: samples/s where it counts samples, batches/s times the batch size
// where it counts batches; lines/s from a repeating line.
PrintedThroughput OutputScanner::counter_throughput(const CounterRate& c) const {
  PrintedThroughput t;
  t.lines = c.lines;
  const double batch = static_cast<double>(batch_.batch_size);
  std::string how = fmt("its count's increments over the %.1f s between its lines", c.timed_s);
  switch (c.unit) {
    case CounterUnit::samples:
      t.samples_per_s = c.per_s;
      how += fmt(", %.4g samples/s (a line every %lld samples", c.per_s, static_cast<long long>(c.step));
      if (batch_.batch_size > 0 && c.step % batch_.batch_size == 0)
        how += fmt(": %lld batches of %lld", static_cast<long long>(c.step / batch_.batch_size),
                   static_cast<long long>(batch_.batch_size));
      how += ")";
      if (batch_.batch_size > 0) t.iterations_per_s = c.per_s / batch;
      break;
    case CounterUnit::batches:
      t.iterations_per_s = c.per_s;
      how += c.step == 1 ? fmt(", %.4g batches/s (a line every batch)", c.per_s)
                         : fmt(", %.4g batches/s (a line every %lld batches)", c.per_s,
                               static_cast<long long>(c.step));
      if (batch_.batch_size > 0) {
        t.samples_per_s = c.per_s * batch;
        how += ", " + batch_text();
      } else {
        how += std::string("; ") + kNoBatchSize;
      }
      break;
    case CounterUnit::lines:
      t.lines_per_s = c.per_s;
      t.source = fmt("the program's own lines: no known format or counter; the line `%s` repeats "
                     "steadily with a growing number, %zu lines at %.4g lines/s over %.1f s (the "
                     "unit is lines: samples/s and batches/s not measured)",
                     c.format.c_str(), c.lines, c.per_s, c.timed_s);
      t.basis = "throughput from " + t.source;
      return t;
  }
  if (!c.unit_basis.empty()) how += "; " + c.unit_basis;
  t.source = "the program's own lines: " + c.format + ", " + count_of(c.lines, "line") +
             " timed on arrival (" + how + ")";
  t.basis = "throughput from " + t.source;
  return t;
}

PrintedDataWait OutputScanner::data_wait() const {
  std::lock_guard lock(mutex_);
  const DataTally& d = metric_logger_wait_.time.lines > imagenet_wait_.time.lines ? metric_logger_wait_
                                                                                  : imagenet_wait_;
  PrintedDataWait w;
  w.lines = d.time.lines;
  if (w.lines == 0) return w;
  w.counted = d.time.counted();
  w.time_s = d.time.sum();
  w.data_s = d.data.sum();
  w.columns = std::string(d.columns);
  if (w.time_s > 0) w.share = std::min(1.0, w.data_s / w.time_s);
  return w;
}

std::optional<std::int64_t> OutputScanner::first_line_ns() const {
  std::lock_guard lock(mutex_);
  return first_line_ns_;
}

}  // namespace feedscope
