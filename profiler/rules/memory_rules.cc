// The memory rules: what the processes' private and shared memory (smaps_rollup) did over the run,
// beside whichever bottleneck was named. A DataLoader's forked workers share their parent's pages
// until one is written, and reading a Python object writes its reference count: a Dataset of
// millions of Python objects is copied into every worker, page by page, as the workers read it
// (pytorch/pytorch#13246). docs/diagnosis.md#memory.
#include <algorithm>
#include <cmath>
#include <string>

#include "profiler/detail/format.h"
#include "profiler/diagnosis.h"
#include "profiler/rules/rules.h"

namespace feedscope::rules {

using detail::fmt;

namespace {

double mib(double bytes) { return bytes / (1 << 20); }
double gib(double bytes) { return bytes / (1 << 30); }

std::string duration_text(double s) {
  if (s < 120) return fmt("%.0f s", s);
  if (s < 2 * 3600) return fmt("%.0f min", s / 60);
  return fmt("%.1f h", s / 3600);
}

// "; at this rate the 12.3 GiB the machine has available run out in 25 min", where it grows.
std::string exhaustion_text(const MemoryFinding& m) {
  if (!m.exhausted_in_s || !m.headroom_bytes) return "";
  return fmt("; at this rate the %.1f GiB the machine has available (MemAvailable) run out in %s",
             gib(*m.headroom_bytes), duration_text(*m.exhausted_in_s).c_str());
}

void set_headroom(const MemoryFacts& m, double rate, MemoryFinding& finding) {
  finding.headroom_bytes = m.headroom_bytes;
  if (m.headroom_bytes && rate > 0) finding.exhausted_in_s = *m.headroom_bytes / rate;
}

// Fewer workers copy less; what that costs in speed, from the workers' own busy time.
std::string fewer_workers_text(const ProcessTreeSummary& t) {
  const double demand = worker_demand(t);
  const int carry = std::max(1, static_cast<int>(std::ceil(t.workers * demand / 0.9)));
  if (carry < t.workers)
    return fmt("or num_workers=%d: the %d workers were busy %.0f%% of a core each, so %d carry "
               "their work, and %d copies are made instead of %d",
               carry, t.workers, 100 * demand, carry, carry, t.workers);
  const int half = std::max(1, t.workers / 2);
  return fmt("or fewer workers, at a cost: the %d workers were busy %.0f%% of a core each, so "
             "num_workers=%d loads at about %d/%d of today's rate",
             t.workers, 100 * demand, half, half, t.workers);
}

}  // namespace

bool memory_copy_on_access(const Facts& f, Diagnosis& d) {
  const MemoryFacts& m = *f.memory;
  const ProcessTreeSummary& t = *f.e.tree;
  if (m.copying.empty()) return false;
  // Across the workers alike: the one there is, or two or more and at least half of them.
  const std::size_t measured = m.workers.size();
  if (measured >= 2 && (m.copying.size() < 2 || 2 * m.copying.size() < measured)) return false;
  MemoryFinding finding;
  finding.kind = "memory_copy_on_access";
  finding.role = to_string(ProcessRole::loader_worker);
  for (const WatchedProcess* p : m.copying) finding.pids.push_back(p->pid);
  finding.private_bytes_per_s = m.copy_private_bytes_per_s;
  finding.shared_bytes_per_s = m.copy_shared_bytes_per_s;
  set_headroom(m, m.copy_private_bytes_per_s, finding);
  const int workers = std::max(t.workers, 1);
  finding.summary = fmt(
      "copy-on-access: the %d loader workers each copy their parent's memory as they read it "
      "(private memory rising as shared falls), %.1f MiB/s together%s%s",
      workers, mib(m.copy_private_bytes_per_s),
      m.trainer ? fmt("; the parent holds %.0f MiB of its own, a full copy per worker %.1f GiB",
                      mib(static_cast<double>(m.trainer->memory->private_peak_bytes)),
                      gib(static_cast<double>(workers * m.trainer->memory->private_peak_bytes)))
                      .c_str()
                : "",
      exhaustion_text(finding).c_str());
  finding.fix = "keep the dataset's objects in numpy arrays, Arrow or a memory-mapped file instead "
                "of Python lists, dicts and strings (reading a Python object writes its reference "
                "count, which copies its page into the worker); or, for data in files, "
                "feedscope.DataLoader, whose workers are threads of one process; " +
                fewer_workers_text(t);
  d.evidence.push_back("memory: " + finding.summary);
  for (std::size_t i = 0; i < m.copying.size() && i < 4; ++i) {
    const WatchedProcess& p = *m.copying[i];
    d.evidence.push_back(fmt("memory: loader worker %d's private memory grew %.1f MiB/s over %.0f s "
                             "while its shared memory fell %.1f MiB/s (last %.0f MiB private, "
                             "%.0f MiB shared)",
                             p.pid, mib(*p.memory->private_bytes_per_s), p.memory->window_s,
                             mib(-p.memory->shared_bytes_per_s.value_or(0)),
                             mib(static_cast<double>(p.memory->private_bytes)),
                             mib(static_cast<double>(p.memory->shared_bytes))));
  }
  d.recommendations.push_back(
      {"Keep the dataset in numpy arrays, Arrow or a memory-mapped file, not Python objects: the "
       "workers stop copying it",
       "dataset in arrays", std::nullopt, std::nullopt,
       "memory, not speed: " + fmt("%.1f MiB/s copied into the workers", mib(m.copy_private_bytes_per_s))});
  d.memory.push_back(std::move(finding));
  return true;
}

namespace {

// Whether `p`'s workers are copying its pages (MemoryFacts::copying) while its own shared memory
// falls at kMemoryCopiedShare of its private growth or more.
bool parent_of_copying_workers(const MemoryFacts& m, const WatchedProcess& p) {
  const bool copied_from = std::any_of(m.copying.begin(), m.copying.end(),
                                       [&](const WatchedProcess* w) { return w->ppid == p.pid; });
  const double shared = p.memory->shared_bytes_per_s.value_or(0);
  return copied_from && -shared >= kMemoryCopiedShare * *p.memory->private_bytes_per_s;
}

}  // namespace

namespace {

std::string who_grows(const WatchedProcess& p, bool worker) {
  return worker ? fmt("loader worker %d", p.pid)
                : fmt("the %s process %d (%s)", to_string(p.role), p.pid, p.name.c_str());
}

// A rise that flattened inside the window: warm-up, not a leak.
std::string levels_off_text(const WatchedProcess& p) {
  const MemoryTrend& t = *p.memory;
  return fmt("memory: the %s process %d's private memory grew %.0f MiB in the first %.0f s of its "
             "%.0f-s trend and then levelled off (a rise that flattens fits its readings better "
             "than a steady trend, and it grew at under a third of that rate since): warm-up, the "
             "allocator's or the framework's, not a leak; watched %.0f s",
             to_string(p.role), p.pid, mib(t.rise_bytes), t.rise_s, t.window_s, t.watched_s);
}

// One process whose private memory grows on: a leak where it was watched kMemoryLeakJudgedSeconds
// or more, else growing and not yet judged (no time to exhaustion).
MemoryFinding growth_finding(const MemoryFacts& m, const WatchedProcess& p, bool worker) {
  const double rate = *p.memory->private_bytes_per_s;
  MemoryFinding finding;
  finding.kind = "memory_leak_one_process";
  finding.role = to_string(p.role);
  finding.pids = {p.pid};
  finding.private_bytes_per_s = rate;
  finding.shared_bytes_per_s = p.memory->shared_bytes_per_s;
  finding.watched_s = p.memory->watched_s;
  const std::string who = who_grows(p, worker);
  const std::string others = worker ? "the other workers' does not" : "its workers' does not grow like it";
  const std::string fix =
      worker ? "something that worker alone keeps grows with what it reads (a cache in the Dataset "
               "filled per index, a list kept across calls): bound it, or keep it in the parent "
               "before the workers start"
             : "keep a step's figures as numbers (loss.item()), not tensors: a tensor kept from a "
               "step keeps its graph and buffers alive; look for a list or dict that grows each "
               "step (a history, a cache)";
  if (p.memory->watched_s < kMemoryLeakJudgedSeconds) {
    finding.headroom_bytes = m.headroom_bytes;
    finding.summary = fmt("growing, not yet judged: %s's private memory grows steadily, %.1f MiB/s "
                          "over %.0f s (%.0f MiB now), while %s; watched %.0f s, under the %.0f s "
                          "a leak is judged over (warm-up can grow this long before it stops)",
                          who.c_str(), mib(rate), p.memory->window_s,
                          mib(static_cast<double>(p.memory->private_bytes)), others.c_str(),
                          p.memory->watched_s, kMemoryLeakJudgedSeconds);
    finding.fix = fmt("watch it %.0f s or more (--duration) to tell a leak from warm-up; if it "
                      "keeps growing: ", kMemoryLeakJudgedSeconds) + fix;
    return finding;
  }
  set_headroom(m, rate, finding);
  finding.summary = fmt("a leak in one process: %s's private memory grows steadily, %.1f MiB/s over "
                        "%.0f s with no bend (%.0f MiB now), while %s; watched %.0f s%s",
                        who.c_str(), mib(rate), p.memory->window_s,
                        mib(static_cast<double>(p.memory->private_bytes)), others.c_str(),
                        p.memory->watched_s, exhaustion_text(finding).c_str());
  finding.fix = fix;
  return finding;
}

}  // namespace

bool memory_leak_one_process(const Facts& f, Diagnosis& d) {
  const MemoryFacts& m = *f.memory;
  std::size_t growing_workers = 0;
  for (const WatchedProcess* p : m.growing) growing_workers += p->role == ProcessRole::loader_worker;
  bool fired = false;
  for (const WatchedProcess* p : m.growing) {
    const bool worker = p->role == ProcessRole::loader_worker;
    // A worker alone: the others measured and flat (workers growing alike are the copy above).
    if (worker && (growing_workers != 1 || m.workers.size() < 2)) continue;
    // The parent of workers that copy its pages: a page the last of them copied away is its alone
    // now, and counts as its private memory while its shared falls as fast. That is the copy's
    // mirror, not a leak (the #20433 repro's trainer: +21.9 MiB/s private, -11.9 shared).
    if (!worker && parent_of_copying_workers(m, *p)) {
      d.evidence.push_back(fmt("memory: the %s process %d's private memory grew %.1f MiB/s while "
                               "its shared fell %.1f MiB/s as its loader workers copied its pages: "
                               "a page every worker copied away is its alone now, and counts as "
                               "its private; not called a leak while its workers copy it",
                               to_string(p->role), p->pid, mib(*p->memory->private_bytes_per_s),
                               mib(-p->memory->shared_bytes_per_s.value_or(0))));
      continue;
    }
    const double rate = *p->memory->private_bytes_per_s;
    if (p->memory->window_s < kMemoryLeakSeconds) {
      d.evidence.push_back(fmt("memory: the %s process %d's private memory grew %.1f MiB/s over "
                               "%.1f s: too short a stretch to tell a leak from its start-up (a "
                               "leak is called over %.0f s or more)",
                               to_string(p->role), p->pid, mib(rate), p->memory->window_s,
                               kMemoryLeakSeconds));
      continue;
    }
    if (p->memory->levels_off) {
      d.evidence.push_back(levels_off_text(*p));
      continue;
    }
    d.memory.push_back(growth_finding(m, *p, worker));
    d.evidence.push_back("memory: " + d.memory.back().summary);
    fired = true;
  }
  return fired;
}

bool memory_workers_exceed_headroom(const Facts& f, Diagnosis& d) {
  const MemoryFacts& m = *f.memory;
  const ProcessTreeSummary& t = *f.e.tree;
  const TreeMemory& tm = *t.memory;
  if (t.workers == 0 || tm.workers_private_bytes.empty() || !m.headroom_bytes) return false;
  const double held_peak = static_cast<double>(tm.workers_private_peak_bytes);
  double held_now = 0;  // the latest bucket with a reading
  for (auto it = tm.workers_private_bytes.rbegin(); it != tm.workers_private_bytes.rend(); ++it)
    if (std::isfinite(*it)) {
      held_now = *it;
      break;
    }
  const double lowest = static_cast<double>(tm.available_min_bytes);
  // The workers hold as much private memory as the machine has left, or their copies of the
  // parent, once whole, need more than it has.
  const bool over_now = lowest > 0 && held_peak >= lowest;
  const double parent =
      m.trainer ? static_cast<double>(m.trainer->memory->private_peak_bytes) : 0.0;
  const double full_copy = t.workers * parent;
  const bool copy_over = !m.copying.empty() && parent > 0 && full_copy > held_now + *m.headroom_bytes;
  if (!over_now && !copy_over) return false;
  MemoryFinding finding;
  finding.kind = "memory_workers_exceed_headroom";
  finding.role = to_string(ProcessRole::loader_worker);
  for (const WatchedProcess& p : t.processes)
    if (p.role == ProcessRole::loader_worker && p.memory) finding.pids.push_back(p.pid);
  finding.headroom_bytes = m.headroom_bytes;
  if (!m.copying.empty()) {
    finding.private_bytes_per_s = m.copy_private_bytes_per_s;
    set_headroom(m, m.copy_private_bytes_per_s, finding);
  }
  const int fit = parent > 0 ? static_cast<int>((held_now + *m.headroom_bytes) / parent) : 0;
  finding.summary =
      copy_over
          ? fmt("too many workers for the memory: a copy of the parent's %.2f GiB per worker needs "
                "%.1f GiB for %d workers; they hold %.2f GiB and %.2f GiB is available: %d fit",
                gib(parent), gib(full_copy), t.workers, gib(held_now), gib(*m.headroom_bytes), fit)
          : fmt("too many workers for the memory: the %d workers' private memory, %.2f GiB together "
                "at most, is as much as the machine had left (%.2f GiB available at the lowest)",
                t.workers, gib(held_peak), gib(lowest));
  finding.fix = copy_over && fit >= 1
                    ? fmt("num_workers=%d or fewer, or the dataset in numpy arrays or Arrow so "
                          "that the workers share it",
                          std::max(1, fit - 1))
                    : "fewer workers, or less held in each (the dataset in numpy arrays or Arrow, "
                      "shared with the workers instead of copied)";
  d.evidence.push_back("memory: " + finding.summary);
  d.memory.push_back(std::move(finding));
  return true;
}

}  // namespace feedscope::rules
