#include "exporters/html_report.h"
#include "exporters/autotune_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <type_traits>
#include <variant>

#include "exporters/console_report.h"
#include "profiler/detail/format.h"
#include "profiler/gpu_trace.h"

namespace feedscope {

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

const auto esc = html_escape;


using detail::fmt;

// Colours that stay apart for the colour-blind (Okabe-Ito).
constexpr const char* kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                    "#CC79A7", "#56B4E9", "#F0E442", "#000000"};

struct Line {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (seconds, value)
};

// A moment on the timeline: a dashed vertical line, its label above, its text on hover.
struct Mark {
  double t = 0;  // seconds
  std::string label;
  std::string text;
};

// A line chart with a time axis. `max_y` 0 scales to the data; `percent` labels 0..1 as %.
std::string line_chart(const std::string& title, const std::vector<Line>& lines, double max_y,
                       bool percent, const std::string& unit, const std::vector<Mark>& marks = {}) {
  const int w = 720, h = 220, left = 56, right = 150, top = 28, bottom = 30;
  const int pw = w - left - right, ph = h - top - bottom;
  double max_t = 0, data_max = 0;
  for (const Line& l : lines)
    for (const auto& [t, v] : l.points) {
      max_t = std::max(max_t, t);
      if (std::isfinite(v)) data_max = std::max(data_max, v);
    }
  if (max_y <= 0) max_y = data_max > 0 ? data_max * 1.1 : 1;
  if (max_t <= 0) max_t = 1;
  std::ostringstream s;
  s << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\""
    << h << "\" role=\"img\" aria-label=\"" << esc(title) << "\">\n<text x=\"" << left
    << "\" y=\"16\" font-weight=\"bold\">" << esc(title) << "</text>\n";
  for (int i = 0; i <= 4; ++i) {
    const double v = max_y * i / 4;
    const int y = top + ph - ph * i / 4;
    s << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << y << "\" y2=\"" << y
      << "\" stroke=\"#e5e5e5\"/><text x=\"" << left - 6 << "\" y=\"" << y + 4
      << "\" text-anchor=\"end\" class=\"axis\">"
      << (percent ? fmt("%.0f%%", 100 * v) : fmt(max_y >= 100 ? "%.0f" : max_y >= 10 ? "%.1f" : "%.2f", v))
      << "</text>\n";
  }
  for (int i = 0; i <= 5; ++i) {
    const double t = max_t * i / 5;
    s << "<text x=\"" << left + pw * i / 5 << "\" y=\"" << h - 10
      << "\" text-anchor=\"middle\" class=\"axis\">" << fmt(max_t >= 10 ? "%.0f s" : "%.1f s", t)
      << "</text>\n";
  }
  if (!unit.empty())
    s << "<text x=\"" << left << "\" y=\"" << top - 2 << "\" class=\"axis\" dx=\"4\">" << esc(unit)
      << "</text>\n";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const char* colour = kPalette[i % std::size(kPalette)];
    std::string path;
    for (const auto& [t, v] : lines[i].points) {
      if (!std::isfinite(v)) continue;
      const double x = left + pw * t / max_t;
      const double y = top + ph - ph * std::clamp(v / max_y, 0.0, 1.0);
      path += (path.empty() ? "M" : " L") + fmt("%.1f", x) + "," + fmt("%.1f", y);
    }
    if (!path.empty())
      s << "<path d=\"" << path << "\" fill=\"none\" stroke=\"" << colour
        << "\" stroke-width=\"1.6\"/>\n";
    const int ly = top + 6 + static_cast<int>(i) * 16;
    s << "<rect x=\"" << left + pw + 12 << "\" y=\"" << ly - 8 << "\" width=\"10\" height=\"10\" fill=\""
      << colour << "\"/><text x=\"" << left + pw + 26 << "\" y=\"" << ly + 1 << "\">"
      << esc(lines[i].name) << "</text>\n";
  }
  for (const Mark& m : marks) {
    if (m.t < 0 || m.t > max_t) continue;
    const std::string x = fmt("%.1f", left + pw * m.t / max_t);
    s << "<g class=\"mark\"><title>" << esc(m.text) << "</title><line x1=\"" << x << "\" x2=\"" << x
      << "\" y1=\"" << top << "\" y2=\"" << top + ph
      << "\" stroke=\"#555\" stroke-dasharray=\"3,3\"/><text x=\"" << x << "\" y=\"" << top - 2
      << "\" text-anchor=\"middle\" class=\"axis\">" << esc(m.label) << "</text></g>\n";
  }
  s << "</svg>\n";
  return s.str();
}

// One horizontal bar per stage: its share of its threads' time, with the mean span.
std::string stage_chart(const Report& r) {
  std::vector<const StageStats*> shown;
  for (const StageStats& st : r.stages)
    if (st.count > 0) shown.push_back(&st);
  const int w = 900, row = 26, left = 90, top = 30;
  const int h = top + row * static_cast<int>(shown.size()) + 10, pw = 420;
  std::ostringstream s;
  s << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\""
    << h << "\" role=\"img\" aria-label=\"stage breakdown\">\n<text x=\"" << left
    << "\" y=\"16\" font-weight=\"bold\">Share of each stage's threads' time</text>\n";
  for (std::size_t i = 0; i < shown.size(); ++i) {
    const StageStats& st = *shown[i];
    const int y = top + static_cast<int>(i) * row;
    const bool training = st.name == "wait" || st.name == "step";
    const double share = std::clamp(st.share, 0.0, 1.0);
    s << "<text x=\"" << left - 8 << "\" y=\"" << y + 15 << "\" text-anchor=\"end\">" << esc(st.name)
      << "</text>\n<rect x=\"" << left << "\" y=\"" << y + 3 << "\" width=\"" << pw
      << "\" height=\"16\" fill=\"#f0f0f0\"/>\n<rect x=\"" << left << "\" y=\"" << y + 3
      << "\" width=\"" << fmt("%.1f", pw * share) << "\" height=\"16\" fill=\""
      << (training ? (st.name == "wait" ? "#D55E00" : "#0072B2") : "#009E73") << "\"/>\n<text x=\""
      << left + pw + 8 << "\" y=\"" << y + 15 << "\">" << fmt("%.1f%%", 100 * share) << "  ·  "
      << fmt("%.3f ms mean", st.mean_ms) << "  ·  " << st.count << " spans"
      << (st.lanes > 1 ? "  ·  " + std::to_string(st.lanes) + " threads" : "") << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

double seconds(std::int64_t t_ns, std::int64_t begin_ns) {
  return static_cast<double>(t_ns - begin_ns) / 1e9;
}

// `feedscope watch`: the program, how it ended, and its processes by role.
std::string program_section(const ProgramSummary& p) {
  std::ostringstream h;
  h << "<h2>Program</h2>\n<p><code>" << esc(command_line(p.command)) << "</code>: " << esc(p.exit) << " after "
    << fmt("%.2f", p.wall_s) << " s (" << esc(p.ended) << "); watching took "
    << fmt("%.2f", p.watcher_cpu_s) << " CPU-s.";
  if (!p.spans.empty()) h << " Stage spans from its " << esc(p.spans) << ".";
  h << " Its torch: "
    << (p.torch ? esc(p.torch->version) + " (" + esc(p.torch->source) + ")" : std::string("not seen"))
    << ".";
  h << "</p>\n";
  for (const std::string& n : p.notes) h << "<p class=\"warn\">" << esc(n) << "</p>\n";
  h << "<table><tr><th>pid</th><th>role</th><th>name</th><th>mean cores</th><th>CPU s</th>"
       "<th>I/O wait</th><th>waiting for a core</th><th>peak RSS MiB</th><th>read MB</th><th>GPU MiB</th></tr>\n";
  for (const WatchedProcess& w : p.tree.processes)
    h << "<tr><td class=\"n\">" << w.pid << "</td><td>" << to_string(w.role) << "</td><td>"
      << esc(w.name) << "</td><td class=\"n\">" << fmt("%.2f", w.cpu_cores_mean)
      << "</td><td class=\"n\">" << fmt("%.1f", w.cpu_core_seconds) << "</td><td class=\"n\">"
      << fmt("%.0f%%", 100 * w.io_wait_share) << "</td><td class=\"n\">"
      << (w.run_wait_share ? fmt("%.0f%%", 100 * *w.run_wait_share) : std::string("not measured"))
      << "</td><td class=\"n\">"
      << fmt("%.0f", static_cast<double>(w.rss_peak_bytes) / (1 << 20)) << "</td><td class=\"n\">"
      << fmt("%.1f", static_cast<double>(w.read_bytes) / 1e6) << "</td><td class=\"n\">"
      << fmt("%.0f", static_cast<double>(w.gpu_memory_peak_bytes) / (1 << 20)) << "</td></tr>\n";
  h << "</table>\n";
  return h.str();
}

// `feedscope watch`: memory by role over time (smaps_rollup), the machine's MemAvailable, each
// process's private growth, and the memory findings.
std::string memory_section(const ProgramSummary& p, const Diagnosis& d) {
  if (!p.tree.memory) return "";
  const TreeMemory& m = *p.tree.memory;
  std::ostringstream h;
  h << "<h2>Memory</h2>\n";
  for (const MemoryFinding& f : d.memory)
    h << "<p class=\"warn\"><b>" << esc(f.kind) << "</b>: " << esc(f.summary) << ". Fix: " << esc(f.fix)
      << ".</p>\n";
  if (d.memory.empty()) h << "<p>No memory finding: no process's private memory grew steadily.</p>\n";
  const auto line = [&m](const char* name, const std::vector<double>& v) {
    Line l{name, {}};
    for (std::size_t i = 0; i < v.size(); ++i)
      l.points.emplace_back(m.bucket_s * (static_cast<double>(i) + 0.5), v[i] / (1 << 20));
    return l;
  };
  h << line_chart("memory by role (smaps_rollup every " + fmt("%.1f", m.rollup_period_s) + " s)",
                  {line("trainer private", m.trainer_private_bytes),
                   line("workers private", m.workers_private_bytes),
                   line("workers shared", m.workers_shared_bytes),
                   line("others private", m.other_private_bytes),
                   line("MemAvailable", m.available_bytes)},
                  0, false, "MiB");
  h << "<table><tr><th>pid</th><th>role</th><th>private MiB</th><th>shared MiB</th><th>PSS MiB</th>"
       "<th>private MiB/s</th><th>shared MiB/s</th><th>over s</th></tr>\n";
  const auto rate = [](const std::optional<double>& v) {
    return v ? fmt("%.2f", *v / (1 << 20)) : std::string("not measured");
  };
  for (const WatchedProcess& w : p.tree.processes) {
    if (!w.memory) continue;
    const MemoryTrend& t = *w.memory;
    h << "<tr><td class=\"n\">" << w.pid << "</td><td>" << to_string(w.role) << "</td><td class=\"n\">"
      << fmt("%.0f", static_cast<double>(t.private_bytes) / (1 << 20)) << "</td><td class=\"n\">"
      << fmt("%.0f", static_cast<double>(t.shared_bytes) / (1 << 20)) << "</td><td class=\"n\">"
      << fmt("%.0f", static_cast<double>(t.pss_bytes) / (1 << 20)) << "</td><td class=\"n\">"
      << rate(t.private_bytes_per_s) << "</td><td class=\"n\">" << rate(t.shared_bytes_per_s)
      << "</td><td class=\"n\">" << fmt("%.0f", t.window_s) << "</td></tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

std::string percent_or_not(const std::optional<double>& v) {
  return v ? fmt("%.0f%%", 100 * *v) : std::string("not measured");
}

// Rank x time: a row per rank, a cell per timeline bucket. Where the ranks' Sessions streamed
// their windows, the rank's data stall (dark: it waits for data, the rank that loads slower; no
// cell: no window); else its loader workers' cores over their count (dark: saturated). A straggler
// that moves from rank to rank shows as a dark cell that changes rows.
std::string rank_time_view(const std::vector<RankSummary>& ranks) {
  std::size_t buckets = 0;
  double bucket_s = 0;
  bool stall = false;
  for (const RankSummary& k : ranks) {
    buckets = std::max({buckets, k.timeline_workers_cores.size(), k.timeline_data_stall.size()});
    bucket_s = std::max(bucket_s, k.timeline_bucket_s);
    stall |= !k.timeline_data_stall.empty();
  }
  if (buckets == 0) return "";
  // A cell's darkness, nullopt for no cell.
  const auto shade = [stall](const RankSummary& k, std::size_t b) -> std::optional<double> {
    if (stall) return b < k.timeline_data_stall.size() ? k.timeline_data_stall[b] : std::nullopt;
    if (b >= k.timeline_workers_cores.size()) return std::nullopt;
    return k.num_workers > 0 ? std::clamp(k.timeline_workers_cores[b] / k.num_workers, 0.0, 1.0) : 0;
  };
  const double cell = std::max(2.0, 720.0 / static_cast<double>(buckets)), row = 16, left = 70;
  std::ostringstream s;
  s << (stall ? "<p>Data stall over time, a row per rank (the share of each cell the rank waited "
                "for its next batch; dark: waiting, the rank that holds the others back), "
              : "<p>Loader workers over time, a row per rank (their cores over their count; dark: "
                "saturated), ")
    << fmt("%.0f", bucket_s) << " s a cell:</p>\n<svg class=\"chart\" width=\""
    << fmt("%.0f", left + cell * static_cast<double>(buckets) + 10) << "\" height=\""
    << fmt("%.0f", row * static_cast<double>(ranks.size()) + 20) << "\">\n";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const RankSummary& k = ranks[i];
    const double y = row * static_cast<double>(i);
    s << "<text class=\"axis\" x=\"0\" y=\"" << fmt("%.0f", y + 12) << "\">"
      << (k.rank ? "rank " + std::to_string(*k.rank) : "pid " + std::to_string(k.pid)) << "</text>\n";
    for (std::size_t b = 0; b < buckets; ++b) {
      const std::optional<double> share = shade(k, b);
      if (!share) continue;
      s << "<rect x=\"" << fmt("%.1f", left + cell * static_cast<double>(b)) << "\" y=\"" << fmt("%.0f", y)
        << "\" width=\"" << fmt("%.1f", cell) << "\" height=\"" << fmt("%.0f", row - 2)
        << "\" fill=\"#D55E00\" fill-opacity=\"" << fmt("%.2f", 0.08 + 0.92 * std::clamp(*share, 0.0, 1.0)) << "\"/>\n";
    }
  }
  s << "<text class=\"axis\" x=\"" << left << "\" y=\"" << fmt("%.0f", row * static_cast<double>(ranks.size()) + 14)
    << "\">0 s</text><text class=\"axis\" x=\"" << fmt("%.0f", left + cell * static_cast<double>(buckets) - 40)
    << "\" y=\"" << fmt("%.0f", row * static_cast<double>(ranks.size()) + 14) << "\">"
    << fmt("%.0f", bucket_s * static_cast<double>(buckets)) << " s</text>\n</svg>\n";
  return s.str();
}

// A torch.distributed job: a row per rank, the straggler's marked, and each rank's share of its
// time waiting for data or for the other ranks drawn as a bar.
std::string ranks_section(const Report& r) {
  if (r.ranks.empty()) return "";
  std::ostringstream h;
  h << "<h2>Ranks</h2>\n";
  if (r.job) {
    h << "<p>Job <code>" << esc(r.job->id.empty() ? std::string("(no id)") : r.job->id) << "</code>"
      << (r.job->world_size ? ", WORLD_SIZE " + std::to_string(*r.job->world_size) : std::string())
      << ", on " << r.job->hosts.size() << " machine" << (r.job->hosts.size() == 1 ? "" : "s") << ".</p>\n";
    for (const std::string& n : r.job->notes) h << "<p class=\"warn\">" << esc(n) << "</p>\n";
  }
  const std::optional<Straggler>& s = r.diagnosis.straggler;
  h << "<table><tr><th>rank</th><th>host</th><th>pid</th><th>device</th><th>bottleneck</th>"
       "<th>samples/s</th><th>data stall</th><th>workers</th><th>worker busy</th><th>main thread</th>"
       "<th>GPU busy</th><th>waiting for the others</th><th>of its time: data | collectives</th>"
       "<th>ended</th></tr>\n";
  for (const RankSummary& k : r.ranks) {
    const bool slow = s && s->pid == k.pid && s->host == k.host;
    const double stall = k.data_stall_ratio.value_or(0), coll = k.collective_wait_ratio.value_or(0);
    h << "<tr" << (slow ? " style=\"background:#fdecea\"" : "") << "><td class=\"n\">"
      << (k.rank ? std::to_string(*k.rank) : std::string("?")) << (slow ? " (straggler)" : "")
      << "</td><td>" << esc(k.host) << "</td><td class=\"n\">" << k.pid << "</td><td>" << esc(k.device)
      << "</td><td>" << esc(k.bottleneck) << "</td><td class=\"n\">"
      << (k.samples_per_s ? fmt("%.1f", *k.samples_per_s) : std::string("not measured"))
      << "</td><td class=\"n\">" << percent_or_not(k.data_stall_ratio) << "</td><td class=\"n\">"
      << k.num_workers << "</td><td class=\"n\">" << percent_or_not(k.worker_busy)
      << "</td><td class=\"n\">" << percent_or_not(k.main_thread_busy) << "</td><td class=\"n\">"
      << percent_or_not(k.gpu_busy) << "</td><td class=\"n\" title=\"" << esc(k.collective_wait_source)
      << "\">" << percent_or_not(k.collective_wait_ratio) << "</td><td><svg width=\"160\" height=\"12\">"
      << "<rect width=\"160\" height=\"12\" fill=\"#eee\"/><rect width=\"" << fmt("%.1f", 160 * stall)
      << "\" height=\"12\" fill=\"#D55E00\"/><rect x=\"" << fmt("%.1f", 160 * stall) << "\" width=\""
      << fmt("%.1f", 160 * std::min(coll, 1 - stall)) << "\" height=\"12\" fill=\"#0072B2\"/></svg></td><td>"
      << esc(k.ended.empty() ? std::string("with the job") : k.ended) << "</td></tr>\n";
  }
  h << "</table>\n<p>Orange: waiting for its data (its spans); blue: waiting in collectives for the "
       "other ranks. Empty where not measured.</p>\n";
  h << rank_time_view(r.ranks);
  return h.str();
}

}  // namespace

// num_workers=auto's moves as timeline marks: "w2" where the workers became 2, "p4" for prefetch.
std::vector<Mark> autotune_marks(const Report& r) {
  std::vector<Mark> marks;
  if (!r.autotune) return marks;
  for (const TunerMove& m : r.autotune->moves) {
    std::string label;
    if (m.to.num_workers != m.from.num_workers) label = "w" + std::to_string(m.to.num_workers);
    if (m.to.prefetch != m.from.prefetch) label += (label.empty() ? "p" : " p") + std::to_string(m.to.prefetch);
    marks.push_back({m.t_s, label, describe_autotune_move(m)});
  }
  return marks;
}

std::string autotune_section(const AutotuneSummary& a) {
  std::ostringstream h;
  h << "<h2>Loader tuning (num_workers=auto)</h2>\n<p>" << a.moves.size()
    << " move(s) within " << a.most.num_workers << " worker(s), prefetch " << a.most.prefetch
    << " and slabs within " << fmt("%.0f MiB", static_cast<double>(a.ram_budget_bytes) / (1 << 20))
    << "; the timeline's dashed lines mark them. Ended at:</p>\n<pre>"
    << esc(autotune_yaml(a.final)) << "</pre>\n";
  if (a.moves.empty()) return h.str();
  h << "<table><tr><th>t</th><th>from</th><th>to</th><th>batches/s before → after</th>"
       "<th>stall before → after</th><th>kept</th><th>why</th></tr>\n";
  for (const TunerMove& m : a.moves) {
    const auto setting = [](LoaderSetting s) {
      return std::to_string(s.num_workers) + " w, prefetch " + std::to_string(s.prefetch);
    };
    h << "<tr><td class=\"n\">" << fmt("%.1f s", m.t_s) << "</td><td>" << setting(m.from)
      << "</td><td>" << setting(m.to) << "</td><td class=\"n\">" << fmt("%.1f", m.before.batches_per_s)
      << " → " << (m.after ? fmt("%.1f", m.after->batches_per_s) : std::string("—"))
      << "</td><td class=\"n\">" << fmt("%.1f%%", 100 * m.before.stall) << " → "
      << (m.after ? fmt("%.1f%%", 100 * m.after->stall) : std::string("—")) << "</td><td>"
      << (m.kept ? "yes" : "no") << "</td><td>" << esc(m.why) << "</td></tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

namespace {

void write_head(std::ostream& h, const Diagnosis& d) {
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    << "<title>feedscope: " << esc(d.bottleneck) << "</title>\n<style>\n"
    << "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:980px;color:#1d1d1d;"
       "padding:0 16px}\n"
    << "h1{font-size:21px;margin:0 0 6px}h2{font-size:16px;margin:26px 0 8px;border-bottom:1px "
       "solid #ddd;padding-bottom:4px}\n"
    << ".verdict{font-size:17px;background:#f3f7fb;border-left:4px solid #0072B2;padding:10px "
       "14px}\n.tag{display:inline-block;background:#0072B2;color:#fff;border-radius:3px;padding:1px "
       "7px;margin-right:6px}\n"
    << "table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #eee;"
       "text-align:left}th{background:#f6f6f6}td.n{text-align:right;font-variant-numeric:"
       "tabular-nums}\n"
    << "svg.chart{font:12px system-ui,sans-serif;display:block;margin:10px 0}.axis{fill:#666;"
       "font-size:11px}\n.warn{color:#a33}</style></head><body>\n";
}

// The verdict first, with whether the run was cut short, and the run's throughput.
void write_verdict(std::ostream& h, const Report& r) {
  const Diagnosis& d = r.diagnosis;
  h << "<h1>feedscope report</h1>\n";
  if (!r.interrupted.empty())
    h << "<p class=\"warn\">Interrupted by " << esc(r.interrupted) << ": a partial report of "
      << r.throughput.steps << " steps.</p>\n";
  else if (!r.stopped_early.reason.empty())
    h << "<p class=\"warn\">Stopped early (" << esc(r.stopped_early.reason) << ": "
      << esc(r.stopped_early.message) << "): a partial report of " << r.throughput.steps
      << " steps.</p>\n";
  h << "<p class=\"verdict\"><span class=\"tag\">" << esc(d.bottleneck) << "</span>"
    << esc(d.verdict) << "</p>\n";
  h << "<p>" << fmt("%.1f", r.throughput.samples_per_s) << " samples/s, "
    << fmt("%.2f", r.throughput.batches_per_s) << " batches/s over " << r.throughput.steps
    << " steps in " << fmt("%.2f", r.throughput.wall_s) << " s. Data stall "
    << (d.data_stall_source.empty() ? std::string("not measured") : fmt("%.1f%%", 100 * d.data_stall_ratio))
    << " (input-bound: " << esc(d.input_bound) << ").</p>\n";
}

void write_evidence(std::ostream& h, const Diagnosis& d) {
  h << "<h2>Evidence</h2>\n<ul>\n";
  for (const std::string& e : d.evidence) h << "<li>" << esc(e) << "</li>\n";
  h << "</ul>\n";
}

void write_recommendations(std::ostream& h, const Diagnosis& d) {
  if (d.recommendations.empty()) return;
  h << "<h2>Recommendations</h2>\n<table><tr><th>change</th><th>setting</th><th>predicted "
       "samples/s</th><th>speed-up</th><th>basis</th></tr>\n";
  for (const Recommendation& rec : d.recommendations)
    h << "<tr><td>" << esc(rec.action) << "</td><td><code>" << esc(rec.setting)
      << "</code></td><td class=\"n\">"
      << (rec.predicted_samples_per_s ? fmt("%.0f", *rec.predicted_samples_per_s) : std::string("—"))
      << "</td><td class=\"n\">"
      << (rec.predicted_speedup ? fmt("%.2fx", *rec.predicted_speedup) : std::string("not measured")) << "</td><td>"
      << esc(rec.basis) << "</td></tr>\n";
  h << "</table>\n";
}

void write_stage_row(std::ostream& h, const StageStats& st, const char* marker) {
  h << "<tr><td>" << esc(st.name) << marker << "</td><td class=\"n\">" << st.count
    << "</td><td class=\"n\">" << fmt("%.3f", st.mean_ms) << "</td><td class=\"n\">"
    << fmt("%.3f", st.p50_ms) << "</td><td class=\"n\">" << fmt("%.3f", st.p95_ms)
    << "</td><td class=\"n\">" << fmt("%.3f", st.busy_s) << "</td><td class=\"n\">"
    << fmt("%.1f%%", 100 * st.share) << "</td></tr>\n";
}

void write_stages(std::ostream& h, const Report& r) {
  const bool any_stage = std::any_of(r.stages.begin(), r.stages.end(),
                                     [](const StageStats& st) { return st.count > 0; });
  if (!any_stage && r.program) {
    // A watched program without a feedscope Session: no stage was timed; the process tree (its
    // CPU by role, below) is what was measured.
    h << "<h2>Stages</h2>\n<p>Not measured: the program sent no stage spans (wrap its loop with "
         "feedscope to time loading and the step apart). What was measured is its process tree, "
         "under Program, and its CPU over time below.</p>\n";
    return;
  }
  h << "<h2>Stages</h2>\n" << stage_chart(r);
  h << "<table><tr><th>stage</th><th>spans</th><th>mean ms</th><th>p50 ms</th><th>p95 ms</th>"
       "<th>busy s</th><th>share</th></tr>\n";
  for (const StageStats& st : r.stages)
    if (st.count > 0) write_stage_row(h, st, "");
  // A wrapped loop's own stages, marked so no one reads them as part of the pipeline model.
  for (const StageStats& st : r.custom_stages) write_stage_row(h, st, " <small>(custom)</small>");
  h << "</table>\n";
}

// Each sample's load time: its quantiles as bars on a log scale (the tail is what matters, and it
// is orders of magnitude past the median), then the slowest files with what they are.
void write_samples(std::ostream& h, const Report& r) {
  if (!r.samples || r.samples->count == 0) return;
  const SampleCosts& c = *r.samples;
  h << "<h2>Samples</h2>\n<p>" << c.count << " samples loaded (" << esc(c.measured_by)
    << "); the slowest 1 % took " << std::lround(100 * c.slowest_1pct_share)
    << " % of all load time, the slowest 5 % " << std::lround(100 * c.slowest_5pct_share) << " %.</p>\n";
  const std::pair<const char*, double> bars[] = {
      {"p50", c.p50_ms}, {"p90", c.p90_ms}, {"p99", c.p99_ms}, {"max", c.max_ms}};
  const double low = std::log10(std::max(1e-3, c.p50_ms / 10)), high = std::log10(std::max(c.max_ms, 1e-3)) + 0.1;
  h << "<svg width=\"640\" height=\"" << 24 * std::size(bars) + 8 << "\" role=\"img\">\n";
  double y = 4;
  for (const auto& [name, ms] : bars) {
    const double w = 480 * std::clamp((std::log10(std::max(ms, 1e-3)) - low) / (high - low), 0.0, 1.0);
    h << "<text x=\"0\" y=\"" << y + 14 << "\">" << name << "</text><rect x=\"40\" y=\"" << y
      << "\" width=\"" << w << "\" height=\"18\" fill=\"#0072B2\"/><text x=\"" << 46 + w << "\" y=\""
      << y + 14 << "\">" << fmt("%.2f", ms) << " ms</text>\n";
    y += 24;
  }
  h << "</svg>\n";
  if (c.slowest.empty()) return;
  h << "<table><tr><th>slowest files</th><th>ms</th><th>pixels</th><th>bytes</th><th>format</th></tr>\n";
  for (const SlowSample& s : c.slowest)
    h << "<tr><td>" << esc(s.file) << "</td><td>" << fmt("%.1f", s.ms) << "</td><td>"
      << (s.width && s.height ? std::to_string(*s.width) + "x" + std::to_string(*s.height) : std::string())
      << "</td><td>" << (s.bytes ? std::to_string(*s.bytes) : std::string()) << "</td><td>"
      << esc(s.format) << "</td></tr>\n";
  h << "</table>\n";
}

// The sampler's readings as chart lines, by what they measure.
struct UsageLines {
  Line system{"CPU, all cores", {}}, process{"CPU, this process", {}}, io{"I/O pressure", {}};
  // Its child processes (a DataLoader's workers) as a share of all cores, as the others.
  Line children{"CPU, its child processes (loader workers)", {}};
  std::map<int, Line> gpus;
  std::map<std::string, Line> threads;
  std::map<std::string, Line> disks;
};

UsageLines usage_lines(const std::vector<UtilizationSample>& series, std::int64_t run_begin_ns) {
  UsageLines lines;
  for (const UtilizationSample& u : series) {
    const double t = seconds(u.time_ns, run_begin_ns);
    if (u.cpu_system_ratio) lines.system.points.push_back({t, *u.cpu_system_ratio});
    if (u.cpu_process_ratio) lines.process.points.push_back({t, *u.cpu_process_ratio});
    if (u.io_pressure) lines.io.points.push_back({t, u.io_pressure->some_avg10});
    if (!u.children.empty() && !u.cpu_core_ratio.empty()) {
      double cores = 0;
      for (const ProcessCpu& c : u.children) cores += c.cores;
      lines.children.points.push_back({t, cores / static_cast<double>(u.cpu_core_ratio.size())});
    }
    for (const GpuSample& g : u.gpus) {
      Line& l = lines.gpus[g.index];
      l.name = "GPU " + std::to_string(g.index);
      if (g.util_ratio) l.points.push_back({t, *g.util_ratio});  // a failed read is no 0
    }
    for (const ThreadCpu& th : u.threads) {
      // Loader lanes and the training thread; other threads (the sampler, TBB's spares) are
      // noise here.
      if (th.name != "training" && th.name.rfind("worker ", 0) != 0) continue;
      Line& l = lines.threads[th.name];
      l.name = th.name;
      l.points.push_back({t, th.ratio});
    }
    for (const DiskSample& disk : u.disks) {
      Line& l = lines.disks[disk.device];
      l.name = disk.device;
      l.points.push_back({t, disk.read_bytes_per_s / 1e6});
    }
  }
  return lines;
}

void write_utilization(std::ostream& h, const Report& r,
                       const std::vector<UtilizationSample>& series, std::int64_t run_begin_ns) {
  h << "<h2>Utilization over time</h2>\n";
  if (series.empty()) {
    h << "<p>No utilization samples (sampling off, or the run was shorter than one period).</p>\n";
    return;
  }
  UsageLines lines = usage_lines(series, run_begin_ns);
  std::vector<Line> usage = {lines.system, lines.process};
  if (!lines.children.points.empty()) usage.push_back(lines.children);
  for (auto& [i, l] : lines.gpus) {
    if (l.points.empty()) l.name += " (not measured)";
    usage.push_back(l);
  }
  if (!lines.io.points.empty()) usage.push_back(lines.io);
  const std::vector<Mark> marks = autotune_marks(r);
  h << line_chart("CPU, GPU and I/O pressure", usage, 1.0, true, "", marks);
  std::vector<Line> thread_lines;
  for (auto& [name, l] : lines.threads) thread_lines.push_back(l);
  if (!thread_lines.empty())
    h << line_chart("Busy share of one core, per thread", thread_lines, 1.0, true, "", marks);
  std::vector<Line> disk_lines;
  for (auto& [name, l] : lines.disks) disk_lines.push_back(l);
  if (!disk_lines.empty()) h << line_chart("Disk reads", disk_lines, 0, false, "MB/s");
}

void write_gpu_trace(std::ostream& h, const Report& r) {
  h << "<h2>GPU trace</h2>\n";
  if (!r.gpu_trace) {
    h << "<p>Unavailable: " << esc(r.gpu_trace_unavailable.empty() ? "not traced" : r.gpu_trace_unavailable)
      << "</p>\n";
    return;
  }
  const GpuTraceSummary& g = *r.gpu_trace;
  h << "<table>\n<tr><td>GPU busy (kernels and copies) of step time</td><td class=\"n\">"
    << fmt("%.1f%%", 100 * g.gpu_busy_ratio) << "</td></tr>\n<tr><td>kernels per step</td><td "
    << "class=\"n\">" << fmt("%.1f", g.kernels_per_step) << "</td></tr>\n<tr><td>mean / p95 "
    << "kernel</td><td class=\"n\">" << fmt("%.1f", g.mean_kernel_us) << " / "
    << fmt("%.1f µs", g.p95_kernel_us) << "</td></tr>\n<tr><td>launch gaps, share of step"
    << "</td><td class=\"n\">" << fmt("%.1f%%", 100 * g.gap_share) << "</td></tr>\n<tr><td>"
    << "host syncs per step</td><td class=\"n\">" << fmt("%.2f", g.syncs_per_step)
    << "</td></tr>\n<tr><td>H2D pinned / pageable</td><td class=\"n\">"
    << fmt("%.1f", static_cast<double>(g.h2d_pinned_bytes) / 1e6) << " / "
    << fmt("%.1f MB", static_cast<double>(g.h2d_pageable_bytes) / 1e6) << "</td></tr>\n";
  if (g.tracing)
    h << "<tr><td>traced</td><td>" << esc(describe_tracing(*g.tracing)) << "</td></tr>\n";
  h << "</table>\n";
}

void write_environment(std::ostream& h, const Report& r) {
  const Environment& e = r.environment;
  h << "<h2>Environment</h2>\n<table>\n<tr><td>device</td><td>" << esc(e.device)
    << "</td></tr>\n<tr><td>CPUs</td><td>" << e.cpus << "</td></tr>\n<tr><td>memory</td><td>"
    << fmt("%.1f GiB", static_cast<double>(e.memory_total_bytes) / (1 << 30)) << "</td></tr>\n"
    << "<tr><td>feedscope built with torch / CUDA</td><td>" << esc(e.torch_version) << " / "
    << esc(e.cuda_version) << "</td></tr>\n";
  if (r.program)
    h << "<tr><td>the program's torch</td><td>"
      << (r.program->torch ? esc(r.program->torch->version) : std::string("not seen")) << "</td></tr>\n";
  h << "<tr><td>host</td><td>" << esc(e.hostname) << "</td></tr>\n<tr><td>model</td><td>"
    << esc(r.training.model) << "</td></tr>\n</table>\n";
}

std::string config_value_text(const ConfigValue& value) {
  std::string text;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) text = v ? "on" : "off";
        else if constexpr (std::is_same_v<T, std::string>) text = v;
        else if constexpr (std::is_same_v<T, double>) text = fmt("%g", v);
        else if constexpr (std::is_same_v<T, std::nullptr_t>) text = "not known";
        else text = std::to_string(v);
      },
      value);
  return text;
}

// The configuration, and the page's foot.
void write_configuration(std::ostream& h, const Report& r) {
  h << "<h2>Configuration</h2>\n<table>\n";
  for (const auto& [key, value] : r.config)
    h << "<tr><td>" << esc(key) << "</td><td>" << esc(config_value_text(value)) << "</td></tr>\n";
  h << "</table>\n<p class=\"axis\">feedscope " << esc(r.environment.feedscope_version)
    << " · report.json holds the same numbers; trace.json opens in Perfetto"
    << (r.trace.omitted_from_s ? "; it holds " + esc(describe_trace_cap(r.trace)) : "")
    << ".</p>\n</body></html>\n";
}

}  // namespace

std::string report_to_html(const Report& r, const std::vector<UtilizationSample>& series,
                           std::int64_t run_begin_ns) {
  std::ostringstream h;
  write_head(h, r.diagnosis);
  write_verdict(h, r);
  write_evidence(h, r.diagnosis);
  h << ranks_section(r);
  if (r.program) h << program_section(*r.program) << memory_section(*r.program, r.diagnosis);
  if (r.autotune) h << autotune_section(*r.autotune);
  write_recommendations(h, r.diagnosis);
  write_stages(h, r);
  write_samples(h, r);
  write_utilization(h, r, series, run_begin_ns);
  write_gpu_trace(h, r);
  write_environment(h, r);
  write_configuration(h, r);
  return h.str();
}

}  // namespace feedscope
