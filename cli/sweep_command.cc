#include "cli/sweep_command.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "cli/interrupt.h"
#include "cli/run.h"
#include "cli/sweep.h"
#include "exporters/html_report.h"
#include "exporters/json_report.h"
#include "loader/synthetic_dataset.h"
#include "loader/batch_loader.h"
#include "pinned_memory/pinned_pool.h"

namespace feedscope {

namespace {

std::string duration_text(double seconds) {
  const int s = static_cast<int>(std::lround(seconds));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, s / 60 % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  else if (seconds < 9.95) std::snprintf(buf, sizeof buf, "%.1fs", seconds);  // a short run's tenths count
  else std::snprintf(buf, sizeof buf, "%ds", s);
  return buf;
}

// The slab the BatchLoader's pool holds for one batch of the dataset's samples.
std::function<std::uint64_t(std::int64_t)> slab_bytes_for(const RunConfig& base) {
  const std::size_t sample = open_dataset(base)->spec().bytes();
  return [sample](std::int64_t batch) -> std::uint64_t {
    return PinnedPool::rounded_slab_bytes(slab_bytes(sample, static_cast<int>(batch)));
  };
}

// A heatmap panel's heading: its prefetch and pin_memory, those of them the sweep names.
std::string panel_title(const KnobList& knobs, std::int64_t prefetch, bool pin) {
  std::string out;
  if (has_knob(knobs, "prefetch")) out = "prefetch " + std::to_string(prefetch);
  if (has_knob(knobs, "pin_memory"))
    out += (out.empty() ? "" : ", ") + std::string("pin_memory ") + (pin ? "on" : "off");
  return out;
}

// A row's or column's label: "2 workers", "batch 64"; "the program's own" for a knob it keeps.
std::string axis_label(const KnobList& knobs, const std::string& knob, std::int64_t value) {
  const bool workers = knob == "num_workers";
  if (!has_knob(knobs, knob)) return workers ? "its own workers" : "its own batch";
  if (workers) return std::to_string(value) + (value == 1 ? " worker" : " workers");
  return "batch " + std::to_string(value);
}

// Each point runs in its own report directory, quietly, without the endpoint (one port cannot
// serve runs that come and go): feedscope's own run, or the user's program under watch.
PointRunner point_runner(const RunConfig& base, const ProgramPoints& program) {
  if (!program.command.empty()) return program_point_runner(base, program);
  return [base](const RunConfig& config) {
    RunConfig c = config;
    std::string dir = knobs_label(config);
    std::replace(dir.begin(), dir.end(), ' ', '_');
    c.report_dir = (std::filesystem::path(base.report_dir) / "points" / dir).string();
    c.metrics_addr.clear();
    c.json = false;
    std::ostringstream quiet;
    return run_profiled(c, quiet);
  };
}

// The heatmaps' axes: the workers (rows) and batch sizes (columns) swept, a panel per prefetch
// and pin_memory, and the best median, the colour scale's top.
struct HeatmapAxes {
  std::set<std::int64_t> workers, batches;
  std::set<std::pair<std::int64_t, bool>> panels;
  double best = 0;
};

HeatmapAxes heatmap_axes(const std::vector<SweepPoint>& points) {
  HeatmapAxes axes;
  for (const SweepPoint& p : points) {
    axes.workers.insert(p.num_workers);
    axes.batches.insert(p.batch_size);
    axes.panels.insert({p.prefetch, p.pin_memory});
    axes.best = std::max(axes.best, p.median_samples_per_s);
  }
  return axes;
}

// A heatmap's cell and the margins for the axis labels, in pixels.
constexpr int kCellW = 150, kCellH = 54, kLeft = 110, kTop = 40;

void write_heading(std::ostream& html, const SweepResult& result) {
  html << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>feedscope sweep</title>\n"
       << "<style>body{font:14px sans-serif;margin:24px;color:#222}h1{font-size:20px}"
       << "table{border-collapse:collapse}td,th{padding:3px 8px;border-bottom:1px solid #ddd;"
       << "text-align:right}th{background:#f4f4f4}.best{font-weight:bold}</style></head><body>\n"
       << "<h1>feedscope sweep</h1>\n<p>" << result.points.size() << " of " << result.planned
       << " points" << (result.interrupted.empty() ? "" : " (interrupted by " + result.interrupted + ")")
       << ", " << duration_text(result.wall_s) << ". Cells: median " << result.unit
       << " over the repeats, darker is faster; the bottleneck the diagnosis named at that point.</p>\n";
}

void write_best(std::ostream& html, const SweepResult& result) {
  if (result.best < 0) return;
  const SweepPoint& b = result.points[static_cast<std::size_t>(result.best)];
  html << "<p class=\"best\">Best: " << html_escape(b.label(result.knobs)) << ", "
       << static_cast<long long>(std::lround(b.median_samples_per_s)) << " " << result.unit << ".";
  if (result.economical >= 0 && result.economical != result.best) {
    const SweepPoint& e = result.points[static_cast<std::size_t>(result.economical)];
    html << " Within 5 % with less: " << html_escape(e.label(result.knobs)) << ", "
         << static_cast<long long>(std::lround(e.median_samples_per_s)) << " " << result.unit << ".";
  }
  html << "</p>\n";
}

// The cell at (x, y) of `point`, or of a point not run (nullptr): white to deep blue by its
// share of the best median.
void write_cell(std::ostream& html, const SweepPoint* point, bool is_best, double best, int x, int y) {
  if (point == nullptr) {
    html << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << kCellW - 2 << "\" height=\""
         << kCellH - 2 << "\" fill=\"#eee\"/><text x=\"" << x + kCellW / 2 << "\" y=\""
         << y + kCellH / 2 + 4 << "\" text-anchor=\"middle\" fill=\"#999\">not run</text>\n";
    return;
  }
  const double t = best > 0 ? point->median_samples_per_s / best : 0;
  // White to deep blue; text turns white where the cell is dark.
  const int r = static_cast<int>(std::lround(255 - t * (255 - 33)));
  const int g = static_cast<int>(std::lround(255 - t * (255 - 102)));
  const int bl = static_cast<int>(std::lround(255 - t * (255 - 172)));
  const char* ink = t > 0.55 ? "#fff" : "#222";
  html << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << kCellW - 2
       << "\" height=\"" << kCellH - 2 << "\" fill=\"rgb(" << r << "," << g << "," << bl
       << ")\"" << (is_best ? " stroke=\"#e6550d\" stroke-width=\"3\"" : "") << "/>\n"
       << "<text x=\"" << x + kCellW / 2 << "\" y=\"" << y + 22
       << "\" text-anchor=\"middle\" font-weight=\"bold\" fill=\"" << ink << "\">"
       << static_cast<long long>(std::lround(point->median_samples_per_s)) << "/s</text>\n"
       << "<text x=\"" << x + kCellW / 2 << "\" y=\"" << y + 40
       << "\" text-anchor=\"middle\" fill=\"" << ink << "\">"
       << html_escape(point->bottleneck) << "</text>\n";
}

// One heatmap, workers by batch size, at one prefetch and pin_memory.
void write_panel(std::ostream& html, const SweepResult& result, const HeatmapAxes& axes,
                 std::int64_t prefetch, bool pin) {
  const int w = kLeft + kCellW * static_cast<int>(axes.batches.size()) + 10;
  const int h = kTop + kCellH * static_cast<int>(axes.workers.size()) + 10;
  if (const std::string panel = panel_title(result.knobs, prefetch, pin); !panel.empty())
    html << "<h2 style=\"font-size:16px\">" << panel << "</h2>\n";
  html << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w
       << "\" height=\"" << h << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  int col = 0;
  for (const std::int64_t bs : axes.batches)
    html << "<text x=\"" << kLeft + col++ * kCellW + kCellW / 2 << "\" y=\"" << kTop - 10
         << "\" text-anchor=\"middle\">" << axis_label(result.knobs, "batch_size", bs) << "</text>\n";
  int row = 0;
  for (const std::int64_t nw : axes.workers) {
    html << "<text x=\"" << kLeft - 8 << "\" y=\"" << kTop + row * kCellH + kCellH / 2 + 4
         << "\" text-anchor=\"end\">" << axis_label(result.knobs, "num_workers", nw) << "</text>\n";
    col = 0;
    for (const std::int64_t bs : axes.batches) {
      const auto it = std::find_if(result.points.begin(), result.points.end(), [&](const SweepPoint& p) {
        return p.num_workers == nw && p.batch_size == bs && p.prefetch == prefetch && p.pin_memory == pin;
      });
      const bool found = it != result.points.end();
      write_cell(html, found ? &*it : nullptr, found && (it - result.points.begin()) == result.best,
                 axes.best, kLeft + col * kCellW, kTop + row * kCellH);
      ++col;
    }
    ++row;
  }
  html << "</svg>\n";
}

// Every point's row: its knobs, median, repeats, data stall, bottleneck and host memory.
void write_point_table(std::ostream& html, const SweepResult& result) {
  html << "<h2 style=\"font-size:16px\">Every point</h2>\n<table><tr>";
  for (const std::string& knob : result.knobs) html << "<th>" << knob << "</th>";
  html << "<th>" << result.unit << "</th><th>repeats</th><th>data stall</th><th>bottleneck</th>"
       << (result.host_bytes_known ? "<th>host MiB</th>" : "") << "</tr>\n";
  for (std::size_t i = 0; i < result.points.size(); ++i) {
    const SweepPoint& p = result.points[i];
    char stall[32] = "not measured", mib[32];
    if (p.data_stall_ratio) std::snprintf(stall, sizeof stall, "%.1f %%", 100 * *p.data_stall_ratio);
    std::snprintf(mib, sizeof mib, "%.1f", static_cast<double>(p.host_bytes) / (1 << 20));
    html << "<tr" << (static_cast<int>(i) == result.best ? " class=\"best\"" : "") << ">";
    for (const std::string& knob : result.knobs)
      html << "<td>" << knobs_label(p.knobs(), {knob}).substr(knob.size() + 1) << "</td>";
    html << "<td>" << static_cast<long long>(std::lround(p.median_samples_per_s)) << "</td><td>"
         << p.samples_per_s.size() << "</td><td>" << stall << "</td><td>"
         << html_escape(p.bottleneck) << "</td>"
         << (result.host_bytes_known ? "<td>" + std::string(mib) + "</td>" : "") << "</tr>\n";
  }
  html << "</table>\n";
}

}  // namespace

std::string sweep_report_html(const SweepResult& result) {
  const HeatmapAxes axes = heatmap_axes(result.points);
  std::ostringstream html;
  write_heading(html, result);
  write_best(html, result);
  for (const auto& [prefetch, pin] : axes.panels) write_panel(html, result, axes, prefetch, pin);
  write_point_table(html, result);
  html << "</body></html>\n";
  return html.str();
}

namespace {

// What a point runs, for the progress lines: the dataset, or the user's command.
std::string subject(const RunConfig& base, const ProgramPoints& program) {
  if (program.command.empty()) return base.dataset;
  return "`" + command_line(program.command) + "`";
}

// A program's slabs are its own: feedscope knows no memory per point then.
std::function<std::uint64_t(std::int64_t)> slab_bytes_of(const RunConfig& base,
                                                         const ProgramPoints& program) {
  if (!program.command.empty()) return nullptr;
  return slab_bytes_for(base);
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// The program with the knobs of `program` filled in: the sweep's knobs, and feedscope's own for a
// run of its own.
ProgramPoints with_knobs(ProgramPoints program, KnobList knobs) {
  if (program.command.empty()) {  // the loader's four, and its thread count where varied
    const bool threads = has_knob(knobs, "cpu_threads");
    knobs = all_knobs();
    if (threads) knobs.emplace_back("cpu_threads");
  }
  program.knobs = std::move(knobs);
  return program;
}

void warn_missing_placeholders(const ProgramPoints& program, const SweepGrid& grid) {
  if (program.command.empty()) return;
  for (const std::string& knob : knobs_missing_from(program.command, grid))
    std::fprintf(stderr,
                 "feedscope sweep: the command has no {%s}: the program sees the value only in "
                 "its environment, as FEEDSCOPE_%s\n",
                 knob.c_str(), upper(knob).c_str());
}

// What one run is expected to take before any has run: --duration bounds it.
std::optional<double> run_time_bound(const RunConfig& base) {
  if (base.duration > 0) return base.duration;
  return std::nullopt;
}

void print_progress(const SweepProgress& p, const KnobList& knobs, const std::string& unit, bool tty) {
  const std::string eta = p.runs_done > 0 ? "ETA " + duration_text(p.eta_s) : "ETA --";
  if (tty) {
    constexpr int kWidth = 24;
    const int filled = p.runs_total == 0 ? 0 : static_cast<int>(kWidth * p.runs_done / p.runs_total);
    std::fprintf(stderr, "\r\033[K[%s%s] %zu/%zu %s  %s", std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), p.runs_done,
                 p.runs_total, eta.c_str(), p.running.c_str());
    if (p.finished != nullptr)
      std::fprintf(stderr, "\r\033[K  %s: %.1f %s (%s)\n", p.finished->label(knobs).c_str(),
                   p.finished->median_samples_per_s, unit.c_str(), p.finished->bottleneck.c_str());
  } else if (p.finished != nullptr) {
    std::fprintf(stderr, "sweep: %zu/%zu runs, %s: %s: %.1f %s (%s)\n", p.runs_done, p.runs_total,
                 eta.c_str(), p.finished->label(knobs).c_str(), p.finished->median_samples_per_s,
                 unit.c_str(), p.finished->bottleneck.c_str());
  }
  std::fflush(stderr);
}

void write_sweep_files(const std::filesystem::path& dir, const SweepResult& result, const RunConfig& base) {
  write_file_atomically((dir / "sweep.csv").string(), sweep_csv(result));
  write_file_atomically((dir / "sweep.json").string(), sweep_json(result, base));
  write_file_atomically((dir / "report.html").string(), sweep_report_html(result));
}

// The best point, the economical one, and how to use it: a config snippet for feedscope's own
// runs, the command with its values for a program.
void print_sweep_result(const SweepResult& result, const ProgramPoints& program) {
  const SweepPoint& best = result.points[static_cast<std::size_t>(result.best)];
  std::cout << "\nbest: " << best.label(result.knobs) << ": " << std::lround(best.median_samples_per_s)
            << " " << result.unit << " (" << best.bottleneck << ")\n";
  const SweepPoint& economical = result.points[static_cast<std::size_t>(result.economical)];
  if (result.economical != result.best)
    std::cout << "within 5 % with fewer workers or less memory: " << economical.label(result.knobs)
              << ": " << std::lround(economical.median_samples_per_s) << " " << result.unit << "\n";
  const char* which = result.economical != result.best ? "economical" : "best";
  if (program.command.empty())
    std::cout << "\nfor your config (the " << which << " point):\n" << yaml_snippet(economical, result.knobs);
  else
    std::cout << "\nthe command at the " << which << " point:\n  "
              << command_line(substitute_knobs(program.command, economical.knobs())) << "\n";
}

}  // namespace

std::string expected_time(std::size_t points, int repeats, double agree_within, double run_s,
                          const std::string& basis) {
  const std::size_t most = points * static_cast<std::size_t>(repeats);
  const std::size_t least = agree_within > 0 ? points * static_cast<std::size_t>(std::min(repeats, 2)) : most;
  char buf[400];
  std::snprintf(buf, sizeof buf, "expected %s at most: %zu points x %d repeats x %s a run (%s)",
                duration_text(static_cast<double>(most) * run_s).c_str(), points, repeats,
                duration_text(run_s).c_str(), basis.c_str());
  std::string out = buf;
  if (least < most) {
    std::snprintf(buf, sizeof buf, "; %s where each point's first 2 repeats agree within %.0f %%",
                  duration_text(static_cast<double>(least) * run_s).c_str(), 100 * agree_within);
    out += buf;
  }
  return out;
}

int sweep_command(const RunConfig& base, const std::map<std::string, std::string>& grid_lists,
                  int repeats, const ProgramPoints& given) {
  validate_config(base);
  const SweepGrid grid = parse_grid(grid_lists);
  const ProgramPoints program = with_knobs(given, sweep_knobs(given.command, grid));
  warn_missing_placeholders(program, grid);
  const PointRunner runner = point_runner(base, program);
  const std::filesystem::path dir(base.report_dir);
  std::filesystem::create_directories(dir);
  const bool tty = ::isatty(STDERR_FILENO) != 0;

  SweepOptions options;
  options.repeats = repeats;
  options.knobs = program.knobs;
  options.by_iterations = !program.command.empty() && counts_iterations(program);
  options.command = program.command;
  options.slab_bytes = slab_bytes_of(base, program);
  options.stop_requested = [] { return interrupt_signal() != 0; };
  SweepResult partial = sweep_result_for(options);  // the points so far, written after each one
  partial.planned = grid_points(base, grid).size();
  options.on_progress = [&](const SweepProgress& p) {
    if (p.runs_done == 1 && p.finished == nullptr && !p.running.empty() && static_cast<std::size_t>(repeats) * partial.planned > 1)
      std::fprintf(stderr, "%sfeedscope sweep: %s\n", tty ? "\r\033[K" : "",
                   expected_time(partial.planned, repeats, options.agree_within, p.elapsed_s,
                                 "the first run's time").c_str());
    if (p.finished != nullptr) {
      partial.points.push_back(*p.finished);
      partial.wall_s = p.elapsed_s;
      choose_best(partial);
      write_sweep_files(dir, partial, base);
    }
    print_progress(p, partial.knobs, partial.unit, tty);
  };
  std::fprintf(stderr, "feedscope sweep: %zu points x up to %d repeats of %s, reports in %s\n",
               partial.planned, repeats, subject(base, program).c_str(), base.report_dir.c_str());
  if (const auto bound = run_time_bound(base))
    std::fprintf(stderr, "feedscope sweep: %s\n",
                 expected_time(partial.planned, repeats, options.agree_within, *bound,
                               program.command.empty() ? "from --duration, plus each run's start-up"
                                                       : "from --duration, which stops a run")
                     .c_str());
  else if (static_cast<std::size_t>(repeats) * partial.planned > 1)
    std::fprintf(stderr, "feedscope sweep: the expected time follows the first run\n");

  const SweepResult result = run_sweep(base, grid, options, runner);
  if (tty) std::fprintf(stderr, "\r\033[K");
  write_sweep_files(dir, result, base);

  std::cout << "\n" << sweep_table(result);
  if (!result.interrupted.empty())
    std::cout << "\nfeedscope: sweep interrupted by " << result.interrupted << " after "
              << result.points.size() << " of " << result.planned << " points; they are kept.\n";
  if (result.best >= 0) print_sweep_result(result, program);
  else if (!result.points.empty())
    std::cout << "\nno point measured a rate (each failed or counted nothing, see the table): "
                 "nothing to choose\n";
  std::cout << "\nsweep: " << (dir / "sweep.csv").string() << ", " << (dir / "sweep.json").string()
            << ", " << (dir / "report.html").string() << "\n";
  if (result.interrupted.empty() && !result.points.empty() && result.best < 0) return 1;
  return interrupted_exit_code(result.interrupted);
}

namespace {

// "up to 8 workers, prefetch up to 8, pin_memory, batch size up to 256": what tune may move.
std::string tune_bounds(const TuneOptions& o) {
  std::string out;
  const auto add = [&out](const std::string& text) { out += (out.empty() ? "" : ", ") + text; };
  if (has_knob(o.knobs, "num_workers")) add("up to " + std::to_string(o.max_workers) + " workers");
  if (has_knob(o.knobs, "prefetch")) add("prefetch up to " + std::to_string(o.max_prefetch));
  if (has_knob(o.knobs, "pin_memory")) add("pin_memory on or off");
  if (has_knob(o.knobs, "batch_size"))
    add(o.max_batch_size > 0 ? "batch size up to " + std::to_string(o.max_batch_size) : "batch size fixed");
  if (o.ram_budget_bytes > 0 && o.slab_bytes) add(std::to_string(o.ram_budget_bytes >> 20) + " MiB of slabs");
  return out.empty() ? "no knob to move" : out;
}

void print_move(const TuneMove& m, const std::string& unit) {
  if (m.knob == "start") {
    std::fprintf(stderr, "tune: [%d] start at %s: %.1f %s (%s)\n", m.run, m.to.c_str(),
                 m.samples_per_s, unit.c_str(), m.bottleneck.c_str());
  } else {
    char predicted[48] = "";
    if (m.predicted_speedup > 0)
      std::snprintf(predicted, sizeof predicted, ", predicted %.2fx", m.predicted_speedup);
    std::fprintf(stderr, "tune: [%d] %s %s -> %s (%s%s): %.1f %s, %+.1f %%: %s\n", m.run,
                 m.knob.c_str(), m.from.c_str(), m.to.c_str(), m.reason.c_str(), predicted,
                 m.samples_per_s, unit.c_str(), 100 * m.gain, m.kept ? "kept" : "reverted");
  }
  std::fflush(stderr);
}

}  // namespace

int tune_command(const RunConfig& base, TuneOptions options, const ProgramPoints& given) {
  validate_config(base);
  const ProgramPoints program = with_knobs(given, tune_knobs(given.command));
  if (!program.command.empty() && knobs_received(program.command).empty())
    std::fprintf(stderr, "feedscope tune: the command has no {num_workers}, {batch_size}, {prefetch} "
                         "or {pin_memory}: the program sees the values only in its environment "
                         "(FEEDSCOPE_NUM_WORKERS, ...)\n");
  const PointRunner runner = point_runner(base, program);
  const std::filesystem::path dir(base.report_dir);
  std::filesystem::create_directories(dir);
  options.knobs = program.knobs;
  options.by_iterations = !program.command.empty() && counts_iterations(program);
  const std::string unit = options.by_iterations ? "it/s" : "samples/s";
  options.slab_bytes = slab_bytes_of(base, program);
  options.stop_requested = [] { return interrupt_signal() != 0; };
  options.on_move = [&unit](const TuneMove& m) { print_move(m, unit); };
  std::fprintf(stderr, "feedscope tune on %s: %s, budget %.0f s\n", subject(base, program).c_str(),
               tune_bounds(options).c_str(), options.time_budget_s);
  const TuneResult result = run_tune(base, options, runner);
  write_file_atomically((dir / "tune.json").string(), tune_json(result));
  std::cout << "\ntune: " << result.stop_reason << " after " << result.runs << " runs in "
            << duration_text(result.wall_s) << "\n";
  if (result.runs > 0 && result.best_samples_per_s > 0) {
    std::cout << "best: " << knobs_label(result.best, result.knobs) << ": "
              << std::lround(result.best_samples_per_s) << " " << result.unit << " measured ("
              << result.best_bottleneck << ")\n";
    if (program.command.empty()) {
      SweepPoint p;
      p.num_workers = result.best.num_workers;
      p.batch_size = result.best.batch_size;
      p.prefetch = result.best.prefetch;
      p.pin_memory = result.best.pin_memory;
      std::cout << "\nfor your config:\n" << yaml_snippet(p, result.knobs);
    } else {
      std::cout << "\nthe command at that point:\n  "
                << command_line(substitute_knobs(program.command, result.best)) << "\n";
    }
  }
  std::cout << "\ntune: " << (dir / "tune.json").string() << "\n";
  if (result.interrupted.empty() && result.runs > 0 && result.best_samples_per_s <= 0) return 1;
  return interrupted_exit_code(result.interrupted);
}

}  // namespace feedscope
