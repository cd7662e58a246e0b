#pragma once
// The ranks of a torch.distributed job side by side (issue #26). Each rank gets its own diagnosis,
// as if it ran alone, from its view of the process tree (ProcessTreeDigest::rank_views), its
// Session's spans where it had one, and its CUDA work where it traced; then the ranks are judged
// together. In a synchronous job (DDP's all-reduce, FSDP's all-gather) every rank runs at the
// slowest one's pace: the straggler is the rank that does not wait for the others, and what the
// others lose is their time waiting in the collective for it.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/watched_gpu.h"
#include "profiler/report.h"
#include "profiler/watch_diagnosis.h"

namespace feedscope {

// A rank's stall this far above the other ranks' median makes it the straggler; the same gap in
// worker or main-thread busy share where no spans measured stalls.
inline constexpr double kStallApart = 0.10;
inline constexpr double kBusyApart = 0.20;
// Every rank waiting for data at least this much: loading is too slow everywhere.
inline constexpr double kStallEverywhere = 0.10;
// A straggler that moves: at least kMovingMoments windows (and kMovingShare of those where every
// rank's stall is known) in which one rank stood kStallApart above the others, a second rank the
// one in kMovingShare of them, and no rank in kMovingMostOneRank of them whose stall over the
// whole run also stands apart (that is a straggler).
inline constexpr std::size_t kMovingMoments = 4;
inline constexpr double kMovingShare = 0.2;
inline constexpr double kMovingMostOneRank = 0.6;
// A rank last seen this long before the job's last rank left the job early.
inline constexpr double kLeftEarlyS = 1.0;

struct RankObservation {
  ProcessTreeSummary view;
  std::optional<DiagnosisInput> spans;  // the rank's Session's, where it had one
  std::optional<ProcessGpu> gpu;        // its CUDA work, where it traced some
  std::string host;
};

// The rank's own diagnosis, as if it ran alone: `common`'s tree, spans, process CPU and GPU
// trace replaced by the rank's (the job's merged trace is not one rank's).
Diagnosis diagnose_rank(const RankObservation& rank, const WatchDiagnosisInput& common);

// One summary per rank, in rank order (pid order for ranks without RANK). `common` is the
// machine's side of the diagnosis (cpus, utilization, torch, how the job ended); its tree, spans
// and GPU trace are replaced by each rank's.
std::vector<RankSummary> summarize_ranks(const std::vector<RankObservation>& ranks,
                                         const WatchDiagnosisInput& common);

// How the ranks relate: "one_rank", "keep_pace", "straggler" (one rank holds the others back),
// "moving_straggler" (window by window of the ranks' data stall over time, one rank holds the
// others back, but not the same one: loading too slow everywhere, at times), "all_input_bound"
// (every rank waits for its data alike over the run).
struct JobVerdict {
  std::string pattern;
  std::string rule;  // the job rule that judged (job_rules())
  std::optional<Straggler> straggler;
  std::string verdict;                 // a sentence, empty for one rank
  std::vector<std::string> evidence;
  std::optional<Recommendation> recommendation;
};

// The job's rules, in the order they are asked: the first that judges the ranks decides
// (docs/diagnosis.md's job table; a test holds the two to each other). A rule reads the ranks'
// summaries: their stalls where every rank's Session measured them, else their loaders and main
// threads as seen from outside.
struct JobRule {
  enum class Needs { any, spans, no_spans };
  std::string_view name;
  Needs needs;
  std::optional<JobVerdict> (*judge)(std::vector<RankSummary>& ranks);
};
const std::vector<JobRule>& job_rules();
const char* to_string(JobRule::Needs needs);

// Fills each rank's collective_wait_ratio and names the straggler, from the summaries alone, so
// that `feedscope merge` judges a job of several machines the same way one machine's watch does.
JobVerdict judge_ranks(std::vector<RankSummary>& ranks);

// "rank 3", or "pid 812" for a rank without RANK.
std::string rank_name(const RankSummary& r);
std::string rank_name(const Straggler& s);

}  // namespace feedscope
