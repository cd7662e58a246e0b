#include "profiler/autotune_diagnosis.h"

#include <algorithm>

#include "profiler/detail/format.h"

namespace feedscope {

using detail::fmt;

namespace {

// The refused trial that moved to `workers` from where the tuner ended, if any.
const TunerMove* refused_at(const AutotuneSummary& a, int workers) {
  for (const TunerMove& m : a.moves)
    if (!m.kept && m.after && m.to.num_workers == workers &&
        m.from.num_workers == a.final.num_workers)
      return &m;
  return nullptr;
}

}  // namespace

void advise_from_autotune(const AutotuneSummary& a, Diagnosis& d) {
  const auto kept = std::count_if(a.moves.begin(), a.moves.end(), [](const TunerMove& m) {
    return m.kept && m.why.rfind("back:", 0) != 0;
  });
  d.evidence.push_back(fmt("the loader tuned itself (num_workers=auto): %zu move(s), %lld kept, "
                           "ended at num_workers=%d prefetch=%d; the figures above are over the "
                           "whole run, and the advice starts from where the tuner ended",
                           a.moves.size(), static_cast<long long>(kept), a.final.num_workers,
                           a.final.prefetch));
  std::erase_if(d.recommendations, [&](const Recommendation& r) {
    int workers = -1;
    if (std::sscanf(r.setting.c_str(), "num_workers=%d", &workers) != 1) return false;
    const TunerMove* m = refused_at(a, workers);
    if (!m) return false;
    d.evidence.push_back(fmt("considered num_workers=%d: the tuner tried it at %.1f s and measured "
                             "%.1f -> %.1f batches/s, stall %.1f%% -> %.1f%%: not advised",
                             workers, m->t_s, m->before.batches_per_s, m->after->batches_per_s,
                             100 * m->before.stall, 100 * m->after->stall));
    return true;
  });
}

}  // namespace feedscope
