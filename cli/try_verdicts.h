#pragma once
// What `watch --try` measured, settled into the advice: a measured change replaces the guess or
// the prediction it tested. A change faster in every round, by more than the unchanged command's
// own runs differed (and by kTriedHelps at least), is a gain: it becomes a recommendation with its
// measured ratio, and the advice of the same change goes. A loss, or a ratio inside that noise,
// becomes evidence ("tried OMP_NUM_THREADS=2: 0.49x: not advised") and no advice of the change
// stays. Where nothing could be tried for want of the program's rate, each guess says so.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profiler/report.h"

namespace feedscope {

// A change measured this much faster, and outside the noise, is advised; below, it is reported only.
inline constexpr double kTriedHelps = 1.05;

// What `r` advises to change that a trial can test, as knob=value: "threads=2" (a
// torch.set_num_threads or OMP_NUM_THREADS setting, or a guess), "num_workers=2", "batch_size=128".
std::vector<std::string> changes_advised(const Recommendation& r);
// Whether `r` advises a change of `knob` ("threads", "num_workers", "batch_size").
bool advises(const Recommendation& r, const std::string& knob);
// The value a guess of `d` names for `knob` ("num_workers=2" -> 2); none where no guess does.
std::optional<std::int64_t> guessed_value(const Diagnosis& d, const std::string& knob);
// Whether the advice on `knob` is a guess alone: a recommendation names it without a number, and
// none gives it one.
bool only_guessed(const Diagnosis& d, const std::string& knob);

// Sets c's outcome ("gain", "loss", "within the noise", "not measured") and noise (the unchanged
// runs' spread: their largest over their smallest rate, less 1; none with one round).
void judge_tried_change(TriedChange& c, const std::vector<std::optional<double>>& unchanged);
// The judged changes' evidence, their recommendations, and the advice they settle.
void settle_tried_changes(const ChangeTries& tries, Diagnosis& d);
// Nothing was tried because the program's rate was not read: each guess says it was not
// measured, and what would let it be.
void mark_guesses_unmeasured(Diagnosis& d);
// Measured first (the largest gain first), then predicted, then the rest; stable within each.
void order_by_basis(std::vector<Recommendation>& recs);

// argv as a line a shell runs as it is (each word quoted where it needs to be).
std::string shell_command(const std::vector<std::string>& argv);

}  // namespace feedscope
