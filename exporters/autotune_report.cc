#include "exporters/autotune_report.h"

#include <utility>

#include "profiler/detail/format.h"

namespace feedscope {

namespace {

using detail::fmt;

std::string change_text(const TunerMove& m) {
  std::string out;
  if (m.from.num_workers != m.to.num_workers)
    out = fmt("num_workers %d -> %d", m.from.num_workers, m.to.num_workers);
  if (m.from.prefetch != m.to.prefetch)
    out += (out.empty() ? "" : ", ") + fmt("prefetch %d -> %d", m.from.prefetch, m.to.prefetch);
  return out;
}

std::string rates_text(const TunerMove& m) {
  return fmt("%.1f -> %.1f batches/s, stall %.1f%% -> %.1f%%", m.before.batches_per_s,
             m.after->batches_per_s, 100 * m.before.stall, 100 * m.after->stall);
}

}  // namespace

bool autotune_move_judged(const TunerMove& move) {
  return move.after.has_value() || move.why.rfind("back:", 0) == 0;
}

std::optional<AutotuneSummary> autotune_summary(const BatchLoader& loader, double shift_s) {
  if (!loader.autotuned()) return std::nullopt;
  const LoaderCapacity& c = loader.capacity();
  AutotuneSummary s;
  for (TunerMove m : loader.autotune_moves()) {
    m.t_s += shift_s;
    s.moves.push_back(std::move(m));
  }
  s.final = loader.setting();
  if (!s.moves.empty() && !autotune_move_judged(s.moves.back())) s.final = s.moves.back().from;
  s.most = c.most;
  s.ram_budget_bytes = c.ram_budget_bytes;
  s.tunes_workers = c.tuner.max_workers > c.tuner.min_workers;
  s.tunes_prefetch = c.tuner.max_prefetch > c.tuner.min_prefetch;
  return s;
}

std::string describe_autotune_move(const TunerMove& m) {
  const std::string head = fmt("autotune %.1f s: ", m.t_s) + change_text(m) + ": ";
  if (m.why.rfind("back:", 0) == 0) return head + m.why;
  if (!m.after) return head + "not measured (the run ended first); " + m.why;
  return head + (m.kept ? "kept, " : "no gain, ") + rates_text(m) + " (" + m.why + ")";
}

std::string autotune_yaml(LoaderSetting s) {
  return fmt("num_workers: %d\nprefetch: %d\n", s.num_workers, s.prefetch);
}

std::string describe_autotune(const AutotuneSummary& a) {
  std::string out = fmt("\n  autotune: %zu move(s), ended at num_workers=%d prefetch=%d (bounds: %d "
                        "worker(s), prefetch %d, slabs within %.0f MiB)\n",
                        a.moves.size(), a.final.num_workers, a.final.prefetch, a.most.num_workers,
                        a.most.prefetch, static_cast<double>(a.ram_budget_bytes) / (1 << 20));
  for (const TunerMove& m : a.moves) out += "    " + describe_autotune_move(m) + "\n";
  out += "  to run at this setting without tuning, put in the config:\n";
  const std::string yaml = autotune_yaml(a.final);
  for (std::size_t at = 0; at < yaml.size();) {
    const std::size_t end = yaml.find('\n', at);
    out += "    " + yaml.substr(at, end - at) + "\n";
    at = end + 1;
  }
  return out;
}

}  // namespace feedscope
