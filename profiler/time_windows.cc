#include "profiler/time_windows.h"

#include <iterator>

namespace feedscope {

namespace {

bool by_begin(const TimeWindow& a, const TimeWindow& b) { return a.begin_ns < b.begin_ns; }

}  // namespace

std::vector<TimeWindow> merged_windows(std::vector<TimeWindow> windows, bool keep_touching) {
  std::sort(windows.begin(), windows.end(), by_begin);
  std::vector<TimeWindow> out;
  for (const TimeWindow& w : windows) {
    if (w.end_ns <= w.begin_ns) continue;
    if (!out.empty() &&
        (keep_touching ? w.begin_ns < out.back().end_ns : w.begin_ns <= out.back().end_ns)) {
      out.back().end_ns = std::max(out.back().end_ns, w.end_ns);
    } else {
      out.push_back(w);
    }
  }
  return out;
}

std::vector<TimeWindow> subtract_windows(const std::vector<TimeWindow>& from,
                                         const std::vector<TimeWindow>& cut) {
  std::vector<TimeWindow> out;
  std::size_t c = 0;
  for (TimeWindow w : from) {
    while (c < cut.size() && cut[c].end_ns <= w.begin_ns) ++c;
    for (std::size_t i = c; i < cut.size() && cut[i].begin_ns < w.end_ns; ++i) {
      if (cut[i].begin_ns > w.begin_ns) out.push_back({w.begin_ns, cut[i].begin_ns});
      w.begin_ns = std::max(w.begin_ns, cut[i].end_ns);
    }
    if (w.end_ns > w.begin_ns) out.push_back(w);
  }
  return out;
}

std::vector<TimeWindow> intersect_windows(const std::vector<TimeWindow>& spans,
                                          const std::vector<TimeWindow>& windows) {
  std::vector<TimeWindow> out;
  for (const TimeWindow& s : spans)
    for_each_piece(windows, s, [&](const TimeWindow& piece) {
      if (piece.end_ns > piece.begin_ns) out.push_back(piece);
    });
  std::sort(out.begin(), out.end(), by_begin);
  return out;
}

std::int64_t windows_ns(const std::vector<TimeWindow>& windows) {
  std::int64_t ns = 0;
  for (const TimeWindow& w : windows) ns += w.end_ns - w.begin_ns;
  return ns;
}

std::int64_t union_ns(std::vector<TimeWindow> windows) {
  return windows_ns(merged_windows(std::move(windows)));
}

bool windows_cover(const std::vector<TimeWindow>& windows, std::int64_t t) {
  auto it = std::upper_bound(windows.begin(), windows.end(), t,
                             [](std::int64_t v, const TimeWindow& w) { return v < w.begin_ns; });
  return it != windows.begin() && t < std::prev(it)->end_ns;
}

std::int64_t covered_ns(const std::vector<TimeWindow>& merged, const std::vector<TimeWindow>& windows) {
  std::int64_t ns = 0;
  for (const TimeWindow& w : windows)
    for_each_piece(merged, w, [&](const TimeWindow& p) { ns += p.end_ns - p.begin_ns; });
  return ns;
}

}  // namespace feedscope
