#include "cli/sweep_command.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
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

}  // namespace

std::string sweep_report_html(const SweepResult& result) {
  std::set<std::int64_t> workers, batches;
  std::set<std::pair<std::int64_t, bool>> panels;
  double best = 0;
  for (const SweepPoint& p : result.points) {
    workers.insert(p.num_workers);
    batches.insert(p.batch_size);
    panels.insert({p.prefetch, p.pin_memory});
    best = std::max(best, p.median_samples_per_s);
  }
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>feedscope sweep</title>\n"
       << "<style>body{font:14px sans-serif;margin:24px;color:#222}h1{font-size:20px}"
       << "table{border-collapse:collapse}td,th{padding:3px 8px;border-bottom:1px solid #ddd;"
       << "text-align:right}th{background:#f4f4f4}.best{font-weight:bold}</style></head><body>\n"
       << "<h1>feedscope sweep</h1>\n<p>" << result.points.size() << " of " << result.planned
       << " points" << (result.interrupted.empty() ? "" : " (interrupted by " + result.interrupted + ")")
       << ", " << duration_text(result.wall_s) << ". Cells: median samples/s over the repeats, "
       << "darker is faster; the bottleneck the diagnosis named at that point.</p>\n";
  if (result.best >= 0) {
    const SweepPoint& b = result.points[static_cast<std::size_t>(result.best)];
    html << "<p class=\"best\">Best: " << html_escape(b.label()) << ", "
         << static_cast<long long>(std::lround(b.median_samples_per_s)) << " samples/s.";
    if (result.economical >= 0 && result.economical != result.best) {
      const SweepPoint& e = result.points[static_cast<std::size_t>(result.economical)];
      html << " Within 5 % with less: " << html_escape(e.label()) << ", "
           << static_cast<long long>(std::lround(e.median_samples_per_s)) << " samples/s.";
    }
    html << "</p>\n";
  }
  const int cell_w = 150, cell_h = 54, left = 110, top = 40;
  for (const auto& [prefetch, pin] : panels) {
    const int w = left + cell_w * static_cast<int>(batches.size()) + 10;
    const int h = top + cell_h * static_cast<int>(workers.size()) + 10;
    html << "<h2 style=\"font-size:16px\">prefetch " << prefetch << ", pin_memory "
         << (pin ? "on" : "off") << "</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w
         << "\" height=\"" << h << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    int col = 0;
    for (const std::int64_t bs : batches)
      html << "<text x=\"" << left + col++ * cell_w + cell_w / 2 << "\" y=\"" << top - 10
           << "\" text-anchor=\"middle\">batch " << bs << "</text>\n";
    int row = 0;
    for (const std::int64_t nw : workers) {
      html << "<text x=\"" << left - 8 << "\" y=\"" << top + row * cell_h + cell_h / 2 + 4
           << "\" text-anchor=\"end\">" << nw << (nw == 1 ? " worker" : " workers") << "</text>\n";
      col = 0;
      for (const std::int64_t bs : batches) {
        const auto it = std::find_if(result.points.begin(), result.points.end(), [&](const SweepPoint& p) {
          return p.num_workers == nw && p.batch_size == bs && p.prefetch == prefetch && p.pin_memory == pin;
        });
        const int x = left + col * cell_w, y = top + row * cell_h;
        if (it == result.points.end()) {
          html << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << cell_w - 2 << "\" height=\""
               << cell_h - 2 << "\" fill=\"#eee\"/><text x=\"" << x + cell_w / 2 << "\" y=\""
               << y + cell_h / 2 + 4 << "\" text-anchor=\"middle\" fill=\"#999\">not run</text>\n";
        } else {
          const double t = best > 0 ? it->median_samples_per_s / best : 0;
          // White to deep blue; text turns white where the cell is dark.
          const int r = static_cast<int>(std::lround(255 - t * (255 - 33)));
          const int g = static_cast<int>(std::lround(255 - t * (255 - 102)));
          const int bl = static_cast<int>(std::lround(255 - t * (255 - 172)));
          const char* ink = t > 0.55 ? "#fff" : "#222";
          const bool is_best = (it - result.points.begin()) == result.best;
          html << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << cell_w - 2
               << "\" height=\"" << cell_h - 2 << "\" fill=\"rgb(" << r << "," << g << "," << bl
               << ")\"" << (is_best ? " stroke=\"#e6550d\" stroke-width=\"3\"" : "") << "/>\n"
               << "<text x=\"" << x + cell_w / 2 << "\" y=\"" << y + 22
               << "\" text-anchor=\"middle\" font-weight=\"bold\" fill=\"" << ink << "\">"
               << static_cast<long long>(std::lround(it->median_samples_per_s)) << "/s</text>\n"
               << "<text x=\"" << x + cell_w / 2 << "\" y=\"" << y + 40
               << "\" text-anchor=\"middle\" fill=\"" << ink << "\">"
               << html_escape(it->bottleneck) << "</text>\n";
        }
        ++col;
      }
      ++row;
    }
    html << "</svg>\n";
  }
  html << "<h2 style=\"font-size:16px\">Every point</h2>\n<table><tr><th>workers</th><th>batch</th>"
       << "<th>prefetch</th><th>pin</th><th>samples/s</th><th>repeats</th><th>data stall</th>"
       << "<th>bottleneck</th><th>host MiB</th></tr>\n";
  for (std::size_t i = 0; i < result.points.size(); ++i) {
    const SweepPoint& p = result.points[i];
    char stall[32], mib[32];
    std::snprintf(stall, sizeof stall, "%.1f %%", 100 * p.data_stall_ratio);
    std::snprintf(mib, sizeof mib, "%.1f", static_cast<double>(p.host_bytes) / (1 << 20));
    html << "<tr" << (static_cast<int>(i) == result.best ? " class=\"best\"" : "") << "><td>"
         << p.num_workers << "</td><td>" << p.batch_size << "</td><td>" << p.prefetch << "</td><td>"
         << (p.pin_memory ? "on" : "off") << "</td><td>"
         << static_cast<long long>(std::lround(p.median_samples_per_s)) << "</td><td>"
         << p.samples_per_s.size() << "</td><td>" << stall << "</td><td>"
         << html_escape(p.bottleneck) << "</td><td>" << mib << "</td></tr>\n";
  }
  html << "</table>\n</body></html>\n";
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
  if (!program.command.empty()) return [](std::int64_t) -> std::uint64_t { return 0; };
  return slab_bytes_for(base);
}

}  // namespace

int sweep_command(const RunConfig& base, const std::map<std::string, std::string>& grid_lists,
                  int repeats, const ProgramPoints& program) {
  validate_config(base);
  const SweepGrid grid = parse_grid(grid_lists);
  if (!program.command.empty())
    for (const std::string& knob : knobs_missing_from(program.command, grid))
      std::fprintf(stderr,
                   "feedscope sweep: the command has no {%s}: the program sees the value only in "
                   "its environment, as FEEDSCOPE_%s\n",
                   knob.c_str(), [&] {
                     std::string up = knob;
                     for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
                     return up;
                   }().c_str());
  const PointRunner runner = point_runner(base, program);
  const std::filesystem::path dir(base.report_dir);
  std::filesystem::create_directories(dir);
  const bool tty = ::isatty(STDERR_FILENO) != 0;

  SweepOptions options;
  options.repeats = repeats;
  options.slab_bytes = slab_bytes_of(base, program);
  options.stop_requested = [] { return interrupt_signal() != 0; };
  SweepResult partial;  // the points so far, written after each one
  partial.planned = grid_points(base, grid).size();
  options.on_progress = [&](const SweepProgress& p) {
    if (p.finished != nullptr) {
      partial.points.push_back(*p.finished);
      partial.wall_s = p.elapsed_s;
      choose_best(partial);
      write_file_atomically((dir / "sweep.csv").string(), sweep_csv(partial));
      write_file_atomically((dir / "sweep.json").string(), sweep_json(partial, base));
      write_file_atomically((dir / "report.html").string(), sweep_report_html(partial));
    }
    const std::string eta = p.runs_done > 0 ? "ETA " + duration_text(p.eta_s) : "ETA --";
    if (tty) {
      constexpr int kWidth = 24;
      const int filled = p.runs_total == 0 ? 0 : static_cast<int>(kWidth * p.runs_done / p.runs_total);
      std::fprintf(stderr, "\r\033[K[%s%s] %zu/%zu %s  %s", std::string(static_cast<std::size_t>(filled), '#').c_str(),
                   std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), p.runs_done,
                   p.runs_total, eta.c_str(), p.running.c_str());
      if (p.finished != nullptr)
        std::fprintf(stderr, "\r\033[K  %s: %.1f samples/s (%s)\n", p.finished->label().c_str(),
                     p.finished->median_samples_per_s, p.finished->bottleneck.c_str());
    } else if (p.finished != nullptr) {
      std::fprintf(stderr, "sweep: %zu/%zu runs, %s: %s: %.1f samples/s (%s)\n", p.runs_done,
                   p.runs_total, eta.c_str(), p.finished->label().c_str(),
                   p.finished->median_samples_per_s, p.finished->bottleneck.c_str());
    }
    std::fflush(stderr);
  };
  std::fprintf(stderr, "feedscope sweep: %zu points x %d repeats of %s, reports in %s\n",
               partial.planned, repeats, subject(base, program).c_str(), base.report_dir.c_str());

  const SweepResult result = run_sweep(base, grid, options, runner);
  if (tty) std::fprintf(stderr, "\r\033[K");
  write_file_atomically((dir / "sweep.csv").string(), sweep_csv(result));
  write_file_atomically((dir / "sweep.json").string(), sweep_json(result, base));
  write_file_atomically((dir / "report.html").string(), sweep_report_html(result));

  std::cout << "\n" << sweep_table(result);
  if (!result.interrupted.empty())
    std::cout << "\nfeedscope: sweep interrupted by " << result.interrupted << " after "
              << result.points.size() << " of " << result.planned << " points; they are kept.\n";
  if (result.best >= 0) {
    const SweepPoint& best = result.points[static_cast<std::size_t>(result.best)];
    std::cout << "\nbest: " << best.label() << ": " << std::lround(best.median_samples_per_s)
              << " samples/s (" << best.bottleneck << ")\n";
    const SweepPoint& economical = result.points[static_cast<std::size_t>(result.economical)];
    if (result.economical != result.best)
      std::cout << "within 5 % with fewer workers or less memory: " << economical.label() << ": "
                << std::lround(economical.median_samples_per_s) << " samples/s\n";
    std::cout << "\nfor your config (the " << (result.economical != result.best ? "economical" : "best")
              << " point):\n" << yaml_snippet(economical);
  }
  std::cout << "\nsweep: " << (dir / "sweep.csv").string() << ", " << (dir / "sweep.json").string()
            << ", " << (dir / "report.html").string() << "\n";
  return interrupted_exit_code(result.interrupted);
}

int tune_command(const RunConfig& base, TuneOptions options, const ProgramPoints& program) {
  validate_config(base);
  const PointRunner runner = point_runner(base, program);
  const std::filesystem::path dir(base.report_dir);
  std::filesystem::create_directories(dir);
  options.slab_bytes = slab_bytes_of(base, program);
  options.stop_requested = [] { return interrupt_signal() != 0; };
  options.on_move = [](const TuneMove& m) {
    if (m.knob == "start") {
      std::fprintf(stderr, "tune: [%d] start at %s: %.1f samples/s (%s)\n", m.run, m.to.c_str(),
                   m.samples_per_s, m.bottleneck.c_str());
    } else {
      char predicted[48] = "";
      if (m.predicted_speedup > 0)
        std::snprintf(predicted, sizeof predicted, ", predicted %.2fx", m.predicted_speedup);
      std::fprintf(stderr, "tune: [%d] %s %s -> %s (%s%s): %.1f samples/s, %+.1f %%: %s\n", m.run,
                   m.knob.c_str(), m.from.c_str(), m.to.c_str(), m.reason.c_str(), predicted,
                   m.samples_per_s, 100 * m.gain, m.kept ? "kept" : "reverted");
    }
    std::fflush(stderr);
  };
  std::fprintf(stderr,
               "feedscope tune on %s: up to %d workers, %s, batch size %s, budget %.0f s\n",
               subject(base, program).c_str(), options.max_workers,
               options.ram_budget_bytes > 0
                   ? (std::to_string(options.ram_budget_bytes >> 20) + " MiB of slabs").c_str()
                   : "no RAM bound",
               options.max_batch_size > 0 ? ("up to " + std::to_string(options.max_batch_size)).c_str()
                                          : "fixed",
               options.time_budget_s);
  const TuneResult result = run_tune(base, options, runner);
  write_file_atomically((dir / "tune.json").string(), tune_json(result));
  std::cout << "\ntune: " << result.stop_reason << " after " << result.runs << " runs in "
            << duration_text(result.wall_s) << "\n";
  if (result.runs > 0) {
    std::cout << "best: " << knobs_label(result.best) << ": "
              << std::lround(result.best_samples_per_s) << " samples/s measured ("
              << result.best_bottleneck << ")\n\nfor your config:\n";
    SweepPoint p;
    p.num_workers = result.best.num_workers;
    p.batch_size = result.best.batch_size;
    p.prefetch = result.best.prefetch;
    p.pin_memory = result.best.pin_memory;
    std::cout << yaml_snippet(p);
  }
  std::cout << "\ntune: " << (dir / "tune.json").string() << "\n";
  return interrupted_exit_code(result.interrupted);
}

}  // namespace feedscope
