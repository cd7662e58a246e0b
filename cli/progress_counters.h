#pragma once
// The speed of a program that counts its progress instead of timing it. pytorch/examples' mnist
// prints `Train Epoch: 1 [640/60000 (1%)]`, super_resolution `===> Epoch[1](5/13): Loss: ...`,
// fast_neural_style `<ctime>\tEpoch 1:\t[40/5000]\t...`, dcgan `[0/25][5/1583] Loss_D: ...`, Keras
// `32/1875 [=>....] - ETA: 3s`: a counter's rate is its increments over the time between the lines
// that carry them, each line timed when it arrived (watch sets PYTHONUNBUFFERED=1, so a line
// arrives when it is printed). A counter that goes back (a new epoch) starts a new series, so an
// epoch's validation is not counted as training time; lines with another text before the counter
// (another process's pid, another epoch) are other series, and where they run at once (Hogwild's
// processes) their increments add up over the time any of them ran.
// Where no counter is read, a line that repeats at a steady rate with a number that grows in it
// (`Rank 0 training batch 120 loss 0.53`) gives its rate in lines per second, named by the line.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace feedscope {

// What a counter counts: samples (pytorch/examples' `[N/TOTAL (P%)]`), batches, or, for the
// fallback, lines.
enum class CounterUnit { samples, batches, lines };
const char* to_string(CounterUnit unit);

struct CounterFormat {
  std::string_view name;     // "pytorch/examples `[N/TOTAL (P%)]` (samples)"
  std::string_view pattern;  // its regular expression, for the docs and the tests
  CounterUnit unit;          // what it counts by convention (CounterRate says where that changed)
};
// In the order they are tried on a line; the first that matches reads it.
const std::vector<CounterFormat>& counter_formats();

// One line's counters: the format that matched, and each counter in it with the text before it.
struct CounterMatch {
  std::size_t format = 0;
  struct Counter {
    std::string before;  // the line up to the counter: the series it belongs to
    std::int64_t done = 0, total = 0;
  };
  std::vector<Counter> counters;
  // A Keras bar: read as a counter even where the line also prints a figure (Keras's running
  // `2ms/step`, whole milliseconds since the epoch began, is coarser than its counter).
  bool before_figures = false;
};
// None where no format matches (or only counters past their total do).
std::optional<CounterMatch> match_counters(std::string_view line);

struct CounterRate {
  std::string format;  // the format's name, or the repeating line as it reads with its numbers as #
  CounterUnit unit = CounterUnit::lines;
  std::size_t lines = 0;      // lines that carried a counter (or the repeating line)
  double per_s = 0;           // in `unit`
  double timed_s = 0;         // the seconds between the lines that gave it
  std::int64_t step = 0;      // the counter's median increment from one line to the next (lines: 1)
  std::string unit_basis;     // why `unit`, where the batch size changed the format's own
};

// Not thread-safe: its OutputScanner calls it under its own mutex.
class ProgressCounters {
 public:
  // `batch_size` 0: not known. It only tells a samples counter from a batches one (below).
  explicit ProgressCounters(std::int64_t batch_size = 0) : batch_size_(batch_size) {}

  // A line with counters, at its arrival.
  void add(const CounterMatch& match, std::int64_t now_ns);
  // A line no format read, for the repeating-line fallback.
  void other(std::string_view line, std::int64_t now_ns);

  // The counter format with the most lines that grew at least twice; none where none did.
  // A samples format whose increments are not all multiples of a known batch size counts batches,
  // and a Keras bar whose increments all are counts samples (Keras 2.2's fit counted samples,
  // TF 2's and Keras 3's count steps).
  std::optional<CounterRate> counter_rate() const;
  // The line that repeated most at a steady rate (its intervals' spread under half their mean)
  // with a number that grew from line to line (9 times in 10 at least: a count that starts again
  // each epoch, as minGPT-ddp's `Iter N`, still counts), over kMinRepeats lines at least.
  std::optional<CounterRate> repeating_line() const;

  static constexpr std::size_t kMinRepeats = 5;

 private:
  struct Series {
    std::int64_t last_done = 0;
    std::int64_t last_ns = 0;
    // Its last line repeated the count: a counter that stays for many lines and then moves (dcgan's
    // epoch in `[0/25][5/1583]`) measures no batches, so the move after a stay is not counted.
    bool stalled = false;
    // It was in the first half of its total once: progress through an epoch, not a score that
    // hovers near its total (mnist's `Accuracy: 9842/10000`, better each epoch).
    bool begun = false;
  };
  struct Tally {
    std::size_t pairs = 0;
    double increments = 0;
    std::vector<std::int64_t> steps;  // the first kMaxSteps increments
    // The seconds the pairs span, merged where series overlap (kept as disjoint spans in time order).
    std::vector<std::pair<std::int64_t, std::int64_t>> spans;
    void span(std::int64_t begin_ns, std::int64_t end_ns);
    double seconds() const;
  };
  struct Repeat {
    std::size_t lines = 0;
    std::int64_t first_ns = 0, last_ns = 0;
    std::vector<double> numbers;     // the last line's
    std::vector<std::size_t> grew;   // each number's place: the lines where it was larger than before
    double gap_sum = 0, gap_squares = 0;
  };
  static constexpr std::size_t kMaxSteps = 256;
  static constexpr std::size_t kMaxRepeats = 256;

  // A format's series are told apart by the exact text before the counter (another process's pid,
  // another epoch) and, beside that, by that text with its numbers as # (for a line that prints a
  // loss before its counter); the reading with more pairs gives the format's rate.
  struct Reading {
    std::map<std::string, Series> series;  // by the text before + "/" + total
    std::vector<Tally> tallies = std::vector<Tally>(counter_formats().size());
    void add(std::size_t format, const std::string& key, std::int64_t done, std::int64_t total,
             std::int64_t now_ns);
  };
  static constexpr std::size_t kMaxSeries = 1024;

  std::int64_t batch_size_;
  Reading exact_, loose_;
  std::vector<std::size_t> lines_ = std::vector<std::size_t>(counter_formats().size());
  std::map<std::string, Repeat> repeats_;  // by the line with its numbers as #
};

}  // namespace feedscope
