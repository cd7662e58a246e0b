#include "cli/progress_counters.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>

namespace feedscope {

namespace {

#define FS_COUNT "([0-9]+)\\s*/\\s*([0-9]+)"

enum CounterIndex : std::size_t {
  kExamplesSamples, kEpochSamples, kParenthesized, kKerasBar, kBare, kCounterCount
};

// Each format's counters: the regex's groups 1 and 2 are done and total. kBare and kParenthesized
// read every counter on the line (dcgan's `[0/25][5/1583]`: the one that grows is the batch's).
const std::vector<CounterFormat>& counter_format_list() {
  static const std::vector<CounterFormat> list = {
      {"pytorch/examples `[N/TOTAL (P%)]` (mnist, siamese_network, mnist_hogwild, vae)",
       "\\[\\s*" FS_COUNT "\\s*\\(\\s*[0-9.]+\\s*%\\s*\\)\\s*\\]", CounterUnit::samples},
      {"fast_neural_style `Epoch E:  [N/TOTAL]`", "\\bEpoch\\s+[0-9]+:\\s*\\[\\s*" FS_COUNT "\\s*\\]",
       CounterUnit::samples},
      {"`(i/N)` (super_resolution's `Epoch[E](i/N)`)", "\\(\\s*" FS_COUNT "\\s*\\)", CounterUnit::batches},
      // Keras 2's `[====>.....]` and Keras 3's `━━━━` (U+2501) bar after `i/N` at the line's start.
      {"Keras `i/N [====>....] - ETA`", "^\\s*" FS_COUNT "\\s+(?:\\[[=>.]*\\]|(?:\xE2\x94\x81)+)",
       CounterUnit::batches},
      {"`i/N` (dcgan's `[E/EPOCHS][i/N]`, `step i/N`)", "(?:^|[\\s\\[:(|,])" FS_COUNT "(?=[\\]\\s,:)|]|$)",
       CounterUnit::batches},
  };
  return list;
}

#undef FS_COUNT

const std::vector<std::regex>& counter_regexes() {
  static const std::vector<std::regex> list = [] {
    std::vector<std::regex> out;
    for (const CounterFormat& f : counter_format_list()) out.emplace_back(std::string(f.pattern));
    return out;
  }();
  return list;
}

// `Epoch 1/10`, `epoch: [3/90]`: a count of epochs, which are no batches.
bool counts_epochs(std::string_view before) {
  while (!before.empty() && std::string_view(" \t[(:").find(before.back()) != std::string_view::npos)
    before.remove_suffix(1);
  std::string tail(before.substr(before.size() >= 6 ? before.size() - 6 : 0));
  std::transform(tail.begin(), tail.end(), tail.begin(), [](unsigned char c) { return std::tolower(c); });
  return tail.ends_with("epoch") || tail.ends_with("epochs");
}

std::optional<std::int64_t> count_of(const std::string& digits) {
  if (digits.empty() || digits.size() > 15) return std::nullopt;
  return std::strtoll(digits.c_str(), nullptr, 10);
}

std::int64_t median_of(std::vector<std::int64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// `Loss at step 120: 0.53` -> "Loss at step #: #" with {120, 0.53}.
std::string skeleton_of(std::string_view line, std::vector<double>& numbers) {
  std::string out;
  for (std::size_t i = 0; i < line.size();) {
    if (std::isdigit(static_cast<unsigned char>(line[i]))) {
      std::size_t end = i;
      const auto in_number = [&](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) || ch == '.'; };
      while (end < line.size() && in_number(line[end])) ++end;
      numbers.push_back(std::strtod(std::string(line.substr(i, end - i)).c_str(), nullptr));
      out += '#';
      i = end;
    } else {
      out += line[i++];
    }
  }
  return out;
}

}  // namespace

const char* to_string(CounterUnit unit) {
  switch (unit) {
    case CounterUnit::samples: return "samples";
    case CounterUnit::batches: return "batches";
    case CounterUnit::lines: return "lines";
  }
  return "?";
}

const std::vector<CounterFormat>& counter_formats() { return counter_format_list(); }

std::optional<CounterMatch> match_counters(std::string_view line) {
  using It = std::string_view::const_iterator;
  for (std::size_t f = 0; f < kCounterCount; ++f) {
    CounterMatch match;
    match.format = f;
    match.before_figures = f == kKerasBar;
    for (std::regex_iterator<It> it(line.begin(), line.end(), counter_regexes()[f]), end; it != end; ++it) {
      const auto done = count_of((*it)[1].str()), total = count_of((*it)[2].str());
      if (!done || !total || *done > *total || *total == 0) continue;
      const std::string_view before = line.substr(0, static_cast<std::size_t>((*it)[1].first - line.begin()));
      if ((f == kBare || f == kParenthesized) && counts_epochs(before)) continue;
      match.counters.push_back({std::string(before), *done, *total});
      if (f != kBare && f != kParenthesized) break;
    }
    if (!match.counters.empty()) return match;
  }
  return std::nullopt;
}

void ProgressCounters::Tally::span(std::int64_t begin_ns, std::int64_t end_ns) {
  // Most spans join the last one (a series printing on); an earlier one (another series, or a line
  // the other output pump timed a moment before) merges with the spans it overlaps.
  std::size_t i = spans.size();
  while (i > 0 && spans[i - 1].first > end_ns) --i;
  std::pair<std::int64_t, std::int64_t> merged{begin_ns, end_ns};
  std::size_t first = i;
  while (first > 0 && spans[first - 1].second >= begin_ns) {
    --first;
    merged.first = std::min(merged.first, spans[first].first);
    merged.second = std::max(merged.second, spans[first].second);
  }
  const auto at = [&](std::size_t k) { return spans.begin() + static_cast<std::ptrdiff_t>(k); };
  spans.erase(at(first), at(i));
  spans.insert(at(first), merged);
}

double ProgressCounters::Tally::seconds() const {
  std::int64_t ns = 0;
  for (const auto& [b, e] : spans) ns += e - b;
  return static_cast<double>(ns) / 1e9;
}

void ProgressCounters::Reading::add(std::size_t format, const std::string& key, std::int64_t done,
                                    std::int64_t total, std::int64_t now_ns) {
  if (series.size() >= kMaxSeries && !series.contains(key)) series.clear();  // keys that never repeat
  const auto [it, added] = series.try_emplace(key, Series{done, now_ns, false, false});
  Series& s = it->second;
  const bool begun = s.begun;
  s.begun = s.begun || 2 * done <= total;
  if (added) return;
  if (done > s.last_done && !s.stalled && begun) {
    Tally& t = tallies[format];
    t.increments += static_cast<double>(done - s.last_done);
    ++t.pairs;
    if (t.steps.size() < kMaxSteps) t.steps.push_back(done - s.last_done);
    t.span(std::min(s.last_ns, now_ns), now_ns);
  }
  s.stalled = done == s.last_done;
  s.last_done = done;  // lower: a new epoch, counted from here
  s.last_ns = now_ns;
}

void ProgressCounters::add(const CounterMatch& match, std::int64_t now_ns) {
  ++lines_.at(match.format);
  for (const CounterMatch::Counter& c : match.counters) {
    const std::string total = "/" + std::to_string(c.total);
    exact_.add(match.format, c.before + total, c.done, c.total, now_ns);
    std::vector<double> ignored;
    loose_.add(match.format, skeleton_of(c.before, ignored) + total, c.done, c.total, now_ns);
  }
}

void ProgressCounters::other(std::string_view line, std::int64_t now_ns) {
  if (line.size() > 300) return;
  std::vector<double> numbers;
  const std::string skeleton = skeleton_of(line, numbers);
  if (numbers.empty()) return;
  auto it = repeats_.find(skeleton);
  if (it == repeats_.end()) {
    if (repeats_.size() >= kMaxRepeats) return;
    Repeat r;
    r.lines = 1;
    r.first_ns = r.last_ns = now_ns;
    r.numbers = numbers;
    r.grew.assign(numbers.size(), 0);
    repeats_.emplace(skeleton, std::move(r));
    return;
  }
  Repeat& r = it->second;
  const double gap = static_cast<double>(now_ns - r.last_ns) / 1e9;
  r.gap_sum += gap;
  r.gap_squares += gap * gap;
  for (std::size_t i = 0; i < numbers.size() && i < r.numbers.size(); ++i)
    if (numbers[i] > r.numbers[i]) ++r.grew[i];
  r.numbers = std::move(numbers);
  r.last_ns = now_ns;
  ++r.lines;
}

std::optional<CounterRate> ProgressCounters::counter_rate() const {
  const auto tally = [this](std::size_t f) -> const Tally& {
    return loose_.tallies[f].pairs > exact_.tallies[f].pairs ? loose_.tallies[f] : exact_.tallies[f];
  };
  std::size_t best = kCounterCount;
  for (std::size_t f = 0; f < kCounterCount; ++f)
    if (tally(f).pairs >= 2 && tally(f).seconds() > 0 && (best == kCounterCount || lines_[f] > lines_[best]))
      best = f;
  if (best == kCounterCount) return std::nullopt;
  const Tally& t = tally(best);
  const CounterFormat& format = counter_format_list()[best];
  CounterRate r;
  r.format = std::string(format.name);
  r.unit = format.unit;
  r.lines = lines_[best];
  r.timed_s = t.seconds();
  r.per_s = t.increments / r.timed_s;
  r.step = median_of(t.steps);
  if (batch_size_ > 1 && r.unit == CounterUnit::samples && r.step % batch_size_ != 0) {
    r.unit = CounterUnit::batches;
    r.unit_basis = "its step, " + std::to_string(r.step) + ", is no multiple of the batch size " +
                   std::to_string(batch_size_) + ": it counts batches";
  } else if (batch_size_ > 1 && best == kKerasBar && r.step % batch_size_ == 0) {
    r.unit = CounterUnit::samples;
    r.unit_basis = "its step, " + std::to_string(r.step) + ", is a multiple of the batch size " +
                   std::to_string(batch_size_) + ": it counts samples (Keras 2.2's fit)";
  }
  return r;
}

std::optional<CounterRate> ProgressCounters::repeating_line() const {
  const std::pair<const std::string, Repeat>* best = nullptr;
  for (const auto& entry : repeats_) {
    const Repeat& r = entry.second;
    if (r.lines < kMinRepeats || r.last_ns <= r.first_ns) continue;
    const double gaps = static_cast<double>(r.lines - 1);
    const auto grows = [&](std::size_t grew) { return static_cast<double>(grew) >= 0.9 * gaps; };
    if (std::none_of(r.grew.begin(), r.grew.end(), grows)) continue;
    const double mean = r.gap_sum / gaps;
    const double spread = std::sqrt(std::max(0.0, r.gap_squares / gaps - mean * mean));
    if (spread > 0.5 * mean) continue;  // not steady: a burst, or a line printed now and then
    if (!best || r.lines > best->second.lines) best = &entry;
  }
  if (!best) return std::nullopt;
  const Repeat& r = best->second;
  CounterRate out;
  out.format = best->first;
  out.unit = CounterUnit::lines;
  out.lines = r.lines;
  out.timed_s = static_cast<double>(r.last_ns - r.first_ns) / 1e9;
  out.per_s = static_cast<double>(r.lines - 1) / out.timed_s;
  out.step = 1;
  return out;
}

}  // namespace feedscope
