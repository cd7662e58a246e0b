#include "profiler/rank_digest.h"

#include <algorithm>

#include "profiler/detail/format.h"
#include "profiler/diagnosis.h"
#include "sampler/statistics.h"

namespace feedscope {

using detail::fmt;

namespace {

constexpr const char* kNcclSource =
    "CUDA trace: its NCCL kernels' share of its span of GPU work (the wait for the other ranks and "
    "the transfer together)";
constexpr const char* kNcclAloneSource =
    "CUDA trace: the share of its span of GPU work in which its NCCL kernels ran alone, no kernel or "
    "copy of its own beside them (the wait for the other ranks, with the transfer)";

bool from_nccl(const RankSummary& r) {
  return r.collective_wait_source == kNcclSource || r.collective_wait_source == kNcclAloneSource;
}

const StageStats* stage(const std::vector<StageStats>& stages, std::string_view name) {
  for (const StageStats& s : stages)
    if (s.name == name) return &s;
  return nullptr;
}

// What the rank's Session measured: its rate, its step and the pace of its batches.
void take_spans(const DiagnosisInput& in, RankSummary& r) {
  if (in.batches <= 0 || in.wall_s <= 0) return;
  r.samples_per_s = in.samples_per_s;
  r.period_ms = 1000 * in.wall_s / static_cast<double>(in.batches);
  if (const StageStats* step = stage(in.stages, "step"); step && step->count > 0) r.step_ms = step->mean_ms;
}

RankSummary summarize_rank(const RankObservation& o, const WatchDiagnosisInput& common) {
  const ProcessTreeSummary& t = o.view;
  RankSummary r;
  r.pid = t.trainer_pid;
  r.host = o.host;
  r.rank = t.trainer_rank;
  for (const WatchedProcess& p : t.processes) {
    if (p.pid != t.trainer_pid) continue;
    r.local_rank = p.local_rank;
    r.node_rank = p.node_rank;
    r.rank_source = p.rank_source;
    r.main_thread_busy = p.main_thread_busy;
    r.cpu_cores = p.cpu_cores_mean;
    r.first_seen_s = p.first_seen_s;
    r.last_seen_s = p.last_seen_s;
  }
  r.num_workers = t.workers;
  r.timeline_bucket_s = t.timeline_bucket_s;
  r.timeline_workers_cores = t.timeline_workers_cores;
  r.timeline_main_thread_busy = t.timeline_main_busy;
  r.timeline_data_stall = t.timeline_data_stall;
  if (t.workers > 0) {
    r.worker_busy = t.worker_busy;
    r.worker_run_wait = t.worker_run_wait;
  }
  if (o.gpu) {
    r.gpu_busy = o.gpu->busy_ratio;
    r.device = "cuda:" + std::to_string(o.gpu->device);
    // NCCL's kernels run while a rank waits in the collective (and while it moves the data); DDP's
    // overlap the backward pass, so where its trace says, only the time they ran alone.
    const bool alone = o.gpu->trace && o.gpu->trace->collective_s > 0;
    r.collective_wait_ratio = alone ? o.gpu->trace->collective_alone_share : o.gpu->collective_ratio;
    r.collective_wait_source = alone ? kNcclAloneSource : kNcclSource;
  }
  if (o.spans) {
    take_spans(*o.spans, r);
    if (r.device.empty() && o.spans->on_gpu) r.device = "cuda";
  }
  if (r.device.empty()) r.device = t.on_gpu ? "cuda" : "cpu";

  const Diagnosis d = diagnose_rank(o, common);
  r.bottleneck = d.bottleneck;
  r.verdict = d.verdict;
  if (!d.data_stall_source.empty()) r.data_stall_ratio = d.data_stall_ratio;
  if (!d.recommendations.empty()) r.advice = d.recommendations.front();
  return r;
}

// The median of `values` without the one at `skip`.
double median_without(const std::vector<double>& values, std::size_t skip) {
  std::vector<double> rest;
  for (std::size_t i = 0; i < values.size(); ++i)
    if (i != skip) rest.push_back(values[i]);
  std::sort(rest.begin(), rest.end());
  return percentile(rest, 0.5);
}

std::size_t argmax(const std::vector<double>& values) {
  return static_cast<std::size_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

// The rank whose data stall stands apart from the others' (at least kStallEverywhere and
// kStallApart above their median), where one does: the straggler of a window, or of the run.
std::optional<std::size_t> stall_apart(const std::vector<double>& stalls) {
  const std::size_t m = argmax(stalls);
  if (stalls[m] < kStallEverywhere || stalls[m] - median_without(stalls, m) < kStallApart)
    return std::nullopt;
  return m;
}

// Each rank's data stall over the run, where every rank's Session measured it (job_rules' `spans`).
std::vector<double> stalls_of(const std::vector<RankSummary>& ranks) {
  std::vector<double> stalls;
  for (const RankSummary& r : ranks) stalls.push_back(*r.data_stall_ratio);
  return stalls;
}

// "rank 1 waits", "rank 0, rank 2 wait": the ranks but `skip`, with the verb agreeing.
std::string others_named(const std::vector<RankSummary>& ranks, std::size_t skip) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (i != skip) names.push_back(rank_name(ranks[i]));
  if (names.size() == 1) return names.front() + " waits";
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out + " wait";
}

// The others' wait in collectives: least and most, as "35 %" or "31-38 %".
std::string others_wait(const std::vector<RankSummary>& ranks, std::size_t skip, double& least) {
  double lo = 1, hi = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i == skip || !ranks[i].collective_wait_ratio) continue;
    lo = std::min(lo, *ranks[i].collective_wait_ratio);
    hi = std::max(hi, *ranks[i].collective_wait_ratio);
  }
  least = hi >= lo ? lo : 0;
  if (hi < lo) return "";
  return hi - lo < 0.01 ? fmt("%.0f %%", 100 * lo) : fmt("%.0f-%.0f %%", 100 * lo, 100 * hi);
}

// With spans on every rank: a rank's own compute is the quickest rank's step (the straggler
// reaches the all-reduce last and does not wait in it); the rest of its step is waiting there.
bool collective_wait_from_spans(std::vector<RankSummary>& ranks) {
  double quickest = -1;
  for (const RankSummary& r : ranks) {
    if (!r.step_ms || !r.period_ms || !r.data_stall_ratio) return false;
    quickest = quickest < 0 ? *r.step_ms : std::min(quickest, *r.step_ms);
  }
  for (RankSummary& r : ranks) {
    if (from_nccl(r)) continue;
    r.collective_wait_ratio = std::clamp((*r.step_ms - quickest) / *r.period_ms, 0.0, 1.0);
    r.collective_wait_source = fmt("spans: its step beyond the quickest rank's (%.1f ms, its own "
                                   "compute), per batch", quickest);
  }
  return true;
}

// Without spans: a rank whose main thread sleeps while the straggler works sleeps in the
// collective. An upper bound: the sleep holds any other wait of its main thread too.
void collective_wait_from_sleep(std::vector<RankSummary>& ranks, std::size_t straggler) {
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    RankSummary& r = ranks[i];
    if (i == straggler || !r.main_thread_busy || from_nccl(r)) continue;
    r.collective_wait_ratio = 1 - *r.main_thread_busy;
    r.collective_wait_source = "no spans: the share of time its main thread slept while " +
                               rank_name(ranks[straggler]) + " set the pace (at most this much)";
  }
}

Straggler straggler_of(const RankSummary& r, std::vector<std::string> evidence) {
  Straggler s;
  s.rank = r.rank;
  s.host = r.host;
  s.pid = r.pid;
  s.bottleneck = r.bottleneck;
  s.evidence = std::move(evidence);
  return s;
}

// What the straggler's own diagnosis advises, for the job, with what the others would gain: at
// most their wait in the collective, the pace then set by the next slowest rank.
Recommendation job_advice(const RankSummary& s, double others_least_wait) {
  Recommendation rec;
  const std::string who = rank_name(s);
  rec.action = who + (s.host.empty() ? "" : " on " + s.host) + ": " +
               (s.advice ? s.advice->action : "find what slows it (its bottleneck: " + s.bottleneck + ")");
  if (s.advice) rec.setting = s.advice->setting;
  rec.basis = others_least_wait > 0.01
                  ? fmt("no prediction, a bound: the other ranks wait for %s at least %.0f %% of "
                        "the time, so the job gains up to %.2fx if it kept their pace (the next "
                        "slowest rank then sets it)",
                        who.c_str(), 100 * others_least_wait, 1 / (1 - std::min(others_least_wait, 0.95)))
                  : "no prediction: the other ranks' wait in collectives was not measured";
  return rec;
}

std::string loader_of(const RankSummary& r) {
  if (r.num_workers == 0) return "its main thread loads (no workers)";
  std::string out = fmt("%d worker%s at %.0f %% busy", r.num_workers, r.num_workers == 1 ? "" : "s",
                        100 * r.worker_busy.value_or(0));
  if (r.worker_run_wait && *r.worker_run_wait >= 0.05)
    out += fmt(" and %.0f %% waiting for a core", 100 * *r.worker_run_wait);
  return out;
}

// Rank `m` holds the job back, as `own` (its evidence line) says and `why` (the verdict's clause)
// names; the others' wait in collectives is added where it was measured.
JobVerdict straggler_verdict(const std::vector<RankSummary>& ranks, std::size_t m, std::string own,
                             const std::string& why) {
  JobVerdict v;
  v.pattern = "straggler";
  const RankSummary& s = ranks[m];
  double least = 0;
  const std::string wait = others_wait(ranks, m, least);
  std::vector<std::string> evidence = {std::move(own)};
  if (!wait.empty())
    evidence.push_back(others_named(ranks, m) + " " + wait + " of the time in collectives (" +
                       ranks[m == 0 ? 1 : 0].collective_wait_source + ")");
  v.verdict = rank_name(s) + " holds the job back: " + why;
  v.evidence = evidence;
  v.straggler = straggler_of(s, std::move(evidence));
  v.recommendation = job_advice(s, least);
  return v;
}

// `others_stall`: the other ranks' median data stall, where spans measured it.
JobVerdict input_straggler(std::vector<RankSummary>& ranks, std::size_t m, std::optional<double> others_stall) {
  const RankSummary& s = ranks[m];
  if (!others_stall) collective_wait_from_sleep(ranks, m);
  const std::string own =
      others_stall ? fmt("%s waits for its data %.0f %% of the time against a median %.0f %% of the "
                         "others; %s",
                         rank_name(s).c_str(), 100 * *s.data_stall_ratio, 100 * *others_stall,
                         loader_of(s).c_str())
                   : fmt("%s's loader is saturated: %s, the others' workers are less busy",
                         rank_name(s).c_str(), loader_of(s).c_str());
  return straggler_verdict(ranks, m, own,
                           "it loads slower than the others (its bottleneck: " + s.bottleneck +
                               "), and the others wait for it in the all-reduce");
}

JobVerdict compute_straggler(std::vector<RankSummary>& ranks, std::size_t m, double others_median) {
  const RankSummary& s = ranks[m];
  collective_wait_from_sleep(ranks, m);
  return straggler_verdict(
      ranks, m,
      fmt("%s's main thread is busy %.0f %% of the time, the others' median %.0f %%",
          rank_name(s).c_str(), 100 * *s.main_thread_busy, 100 * others_median),
      "its step takes longer than the others' (its bottleneck: " + s.bottleneck +
          "), and the others wait for it in the all-reduce");
}

JobVerdict with_pattern(const char* pattern) {
  JobVerdict v;
  v.pattern = pattern;
  return v;
}

}  // namespace

Diagnosis diagnose_rank(const RankObservation& o, const WatchDiagnosisInput& common) {
  WatchDiagnosisInput in = common;
  in.tree = o.view;
  in.spans = o.spans;
  // Its own process and its own workers, not the job's descendants together.
  in.utilization.cpu_process_ratio = o.view.trainer_cores / std::max(common.cpus, 1);
  in.utilization.cpu_child_processes_cores = o.view.workers_cores;
  // Its own CUDA trace, not the job's: the ranks' records together are no one rank's step.
  in.gpu_trace.reset();
  if (o.gpu && o.gpu->trace) in.gpu_trace = o.gpu->trace;
  return diagnose_watched(in);
}

namespace {

std::string rank_or_pid(std::optional<int> rank, int pid) {
  return rank ? "rank " + std::to_string(*rank) : "pid " + std::to_string(pid);
}

}  // namespace

std::string rank_name(const RankSummary& r) { return rank_or_pid(r.rank, r.pid); }

std::string rank_name(const Straggler& s) { return rank_or_pid(s.rank, s.pid); }

std::vector<RankSummary> summarize_ranks(const std::vector<RankObservation>& ranks,
                                         const WatchDiagnosisInput& common) {
  std::vector<RankSummary> out;
  // The launcher interleaves every rank's printed lines: they are the job's, not one rank's.
  WatchDiagnosisInput each = common;
  each.printed.reset();
  for (const RankObservation& o : ranks) out.push_back(summarize_rank(o, each));
  // A rank last seen well before the others left the job early (the launcher's teardown after
  // the last rank ends is not the ranks').
  double last = 0;
  for (const RankSummary& r : out) last = std::max(last, r.last_seen_s);
  for (RankSummary& r : out)
    if (last - r.last_seen_s >= kLeftEarlyS)
      r.ended = fmt("left %.1f s before the last rank (%.1f s into the watch)", last - r.last_seen_s,
                    r.last_seen_s);
  std::stable_sort(out.begin(), out.end(), [](const RankSummary& a, const RankSummary& b) {
    return a.rank.value_or(1 << 30) < b.rank.value_or(1 << 30);
  });
  return out;
}

namespace {

// The ranks' data stalls in bucket b, where every rank's is known.
std::optional<std::vector<double>> stalls_at(const std::vector<RankSummary>& ranks, std::size_t b) {
  std::vector<double> stalls;
  for (const RankSummary& r : ranks) {
    if (b >= r.timeline_data_stall.size() || !r.timeline_data_stall[b]) return std::nullopt;
    stalls.push_back(*r.timeline_data_stall[b]);
  }
  return stalls;
}

// Bucket by bucket of the ranks' common timeline, the rank that holds the others back then (its
// stall as far above theirs as a whole-run straggler's): a job whose straggler changes from
// moment to moment has none over the whole run, yet loses as much. nullopt where the ranks share
// no timeline (several machines, no Sessions, buckets of other lengths) or it does not move.
std::optional<JobVerdict> moving_straggler(std::vector<RankSummary>& ranks) {
  const RankSummary& first = ranks.front();
  std::size_t buckets = 0;
  for (const RankSummary& r : ranks) {
    if (r.host != first.host || r.timeline_bucket_s != first.timeline_bucket_s ||
        r.timeline_data_stall.empty())
      return std::nullopt;
    buckets = std::max(buckets, r.timeline_data_stall.size());
  }
  std::vector<std::size_t> led(ranks.size(), 0);
  std::size_t known = 0, moments = 0;
  for (std::size_t b = 0; b < buckets; ++b) {
    const auto stalls = stalls_at(ranks, b);
    if (!stalls) continue;
    ++known;
    if (const std::optional<std::size_t> m = stall_apart(*stalls)) {
      ++led[*m];
      ++moments;
    }
  }
  if (moments < kMovingMoments || static_cast<double>(moments) < kMovingShare * static_cast<double>(known))
    return std::nullopt;
  std::vector<std::size_t> order(ranks.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return led[a] > led[b]; });
  const auto share = [&](std::size_t i) { return static_cast<double>(led[i]) / static_cast<double>(moments); };
  // One rank most of the time, whom the whole run's figures also name, is a straggler (the next
  // rule's). Most of the time alone is not enough: two ranks taking turns split the windows
  // 7:4 as often as not, as turns and windows fall, while neither waits more over the run.
  if (share(order[1]) < kMovingShare ||
      (share(order[0]) >= kMovingMostOneRank && stall_apart(stalls_of(ranks)) == order[0]))
    return std::nullopt;
  std::string who;
  for (const std::size_t i : order) {
    if (led[i] == 0) break;
    who += (who.empty() ? "" : ", ") + rank_name(ranks[i]) + fmt(" in %.0f %%", 100 * share(i));
  }
  JobVerdict v = with_pattern("moving_straggler");
  v.verdict = "the straggler moves from rank to rank: loading is too slow on every rank at times, "
              "not on one; each rank's advice holds for all";
  v.evidence.push_back(fmt("in %zu of %zu windows of %.0f s one rank's data stall stood %.0f points "
                           "above the others' (the straggler of that moment): ",
                           moments, known, first.timeline_bucket_s, 100 * kStallApart) +
                       who + " of them");
  return v;
}

}  // namespace

namespace {

// What a worker would take of a core to itself: on a full machine a saturated loader's worker
// waits for a core part of the time it would work.
std::vector<double> loader_demand(const std::vector<RankSummary>& ranks) {
  std::vector<double> busy;
  for (const RankSummary& r : ranks)
    busy.push_back(std::min(1.0, r.worker_busy.value_or(0) + r.worker_run_wait.value_or(0)));
  return busy;
}

std::optional<JobVerdict> one_rank(std::vector<RankSummary>& ranks) {
  if (ranks.size() >= 2) return std::nullopt;
  return with_pattern("one_rank");
}

std::optional<JobVerdict> stall_straggler(std::vector<RankSummary>& ranks) {
  const std::vector<double> stalls = stalls_of(ranks);
  const std::optional<std::size_t> m = stall_apart(stalls);
  if (!m) return std::nullopt;
  return input_straggler(ranks, *m, median_without(stalls, *m));
}

std::optional<JobVerdict> stall_everywhere(std::vector<RankSummary>& ranks) {
  const std::vector<double> stalls = stalls_of(ranks);
  const double least = *std::min_element(stalls.begin(), stalls.end());
  if (least < kStallEverywhere) return std::nullopt;
  JobVerdict v = with_pattern("all_input_bound");
  v.verdict = fmt("every rank waits for its data alike (%.0f-%.0f %% of the time): loading is "
                  "too slow on all of them, not on one; each rank's advice holds for all",
                  100 * least, 100 * stalls[argmax(stalls)]);
  v.evidence.push_back(v.verdict);
  return v;
}

std::optional<JobVerdict> loader_straggler(std::vector<RankSummary>& ranks) {
  const std::vector<double> busy = loader_demand(ranks);
  const std::size_t m = argmax(busy);
  if (busy[m] < kWorkersSaturated || busy[m] - median_without(busy, m) < kBusyApart)
    return std::nullopt;
  return input_straggler(ranks, m, std::nullopt);
}

std::optional<JobVerdict> loaders_saturated(std::vector<RankSummary>& ranks) {
  const std::vector<double> busy = loader_demand(ranks);
  const std::size_t m = argmax(busy);
  if (median_without(busy, m) < kWorkersSaturated) return std::nullopt;
  JobVerdict v = with_pattern("all_input_bound");
  v.verdict = fmt("every rank's loader is saturated alike (workers %.0f-%.0f %% busy): loading "
                  "is too slow on all of them, not on one; each rank's advice holds for all",
                  100 * *std::min_element(busy.begin(), busy.end()), 100 * busy[m]);
  v.evidence.push_back(v.verdict);
  return v;
}

// Every rank traced its CUDA work: the others wait in NCCL's collectives (kCollectiveWaitDominant
// or more of their time, kStallApart above it) for the one that waits least there. A GPU-bound
// rank spinning in .item() looks as busy from outside as the ranks that wait for it.
std::optional<JobVerdict> collective_straggler(std::vector<RankSummary>& ranks) {
  std::vector<double> waits;
  for (const RankSummary& r : ranks) {
    if (!from_nccl(r) || !r.collective_wait_ratio) return std::nullopt;
    waits.push_back(*r.collective_wait_ratio);
  }
  const std::size_t m = static_cast<std::size_t>(std::min_element(waits.begin(), waits.end()) - waits.begin());
  const double others = median_without(waits, m);
  if (others < kCollectiveWaitDominant || others - waits[m] < kStallApart) return std::nullopt;
  const RankSummary& s = ranks[m];
  return straggler_verdict(
      ranks, m,
      fmt("%s waits in NCCL's collectives %.0f %% of the time, the others' median %.0f %%; its GPU "
          "busy %.0f %%",
          rank_name(s).c_str(), 100 * waits[m], 100 * others, 100 * s.gpu_busy.value_or(0)),
      "the others wait for it in NCCL's collectives (its bottleneck: " + s.bottleneck + ")");
}

std::optional<JobVerdict> main_thread_straggler(std::vector<RankSummary>& ranks) {
  std::vector<double> main;
  for (const RankSummary& r : ranks) {
    if (!r.main_thread_busy) return std::nullopt;
    main.push_back(*r.main_thread_busy);
  }
  const std::size_t m = argmax(main);
  const double rest = median_without(main, m);
  if (main[m] < kThreadPinned || main[m] - rest < kBusyApart) return std::nullopt;
  return compute_straggler(ranks, m, rest);
}

std::optional<JobVerdict> keep_pace(std::vector<RankSummary>& ranks) {
  JobVerdict v = with_pattern("keep_pace");
  v.evidence.push_back(fmt("the %zu ranks keep pace: no rank's data stall, loader or main thread "
                           "stands apart from the others'",
                           ranks.size()));
  return v;
}

}  // namespace

const std::vector<JobRule>& job_rules() {
  using N = JobRule::Needs;
  static const std::vector<JobRule> list = {
      {"one_rank", N::any, one_rank},
      {"moving_straggler", N::spans, moving_straggler},
      {"stall_straggler", N::spans, stall_straggler},
      {"stall_everywhere", N::spans, stall_everywhere},
      {"loader_straggler", N::no_spans, loader_straggler},
      {"loaders_saturated", N::no_spans, loaders_saturated},
      {"collective_straggler", N::any, collective_straggler},
      {"main_thread_straggler", N::any, main_thread_straggler},
      {"keep_pace", N::any, keep_pace},
  };
  return list;
}

const char* to_string(JobRule::Needs needs) {
  switch (needs) {
    case JobRule::Needs::any: return "any";
    case JobRule::Needs::spans: return "every rank's spans";
    case JobRule::Needs::no_spans: return "no spans";
  }
  return "?";
}

JobVerdict judge_ranks(std::vector<RankSummary>& ranks) {
  // Where every rank measured its stall, the collective wait comes from the spans, and the rules
  // that read stalls are asked instead of those that read the loaders from outside.
  const bool spans = ranks.size() >= 2 && collective_wait_from_spans(ranks);
  for (const JobRule& rule : job_rules()) {
    if ((rule.needs == JobRule::Needs::spans && !spans) ||
        (rule.needs == JobRule::Needs::no_spans && spans))
      continue;
    if (std::optional<JobVerdict> v = rule.judge(ranks)) {
      v->rule = rule.name;
      return *std::move(v);
    }
  }
  return with_pattern("keep_pace");  // keep_pace always judges; never reached
}

}  // namespace feedscope
