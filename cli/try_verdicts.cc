#include "cli/try_verdicts.h"

#include <algorithm>
#include <cstdlib>

#include "profiler/detail/format.h"

namespace feedscope {

namespace {

using detail::fmt;

// "num_workers=3" -> ("num_workers", 3); a setting of another shape gives no knob.
std::optional<std::pair<std::string, std::int64_t>> knob_of(const std::string& change) {
  const std::size_t eq = change.find('=');
  if (eq == std::string::npos) return std::nullopt;
  const long long v = std::atoll(change.c_str() + eq + 1);
  if (v <= 0) return std::nullopt;
  return std::pair(change.substr(0, eq), static_cast<std::int64_t>(v));
}

// A setting's change, as changes_advised names it.
std::optional<std::string> setting_change(const std::string& setting) {
  for (const auto& [prefix, knob] : {std::pair<std::string, std::string>{"num_workers=", "num_workers"},
                                     {"batch_size=", "batch_size"},
                                     {"OMP_NUM_THREADS=", "threads"},
                                     {"torch.set_num_threads(", "threads"}})
    if (setting.starts_with(prefix))
      if (const long long v = std::atoll(setting.c_str() + prefix.size()); v > 0)
        return knob + "=" + std::to_string(v);
  return std::nullopt;
}

bool has_number(const Recommendation& r) { return r.predicted_speedup || r.predicted_samples_per_s; }

std::string percent(double ratio) { return fmt("%.0f%%", 100 * ratio); }

// "over 2 trials of 20 s against the unchanged command"
std::string trials_text(const ChangeTries& tries, const TriedChange& c) {
  std::size_t measured = 0;
  for (const auto& r : c.rates) measured += r.has_value();
  return fmt("over %zu trial%s of %.0f s against the unchanged command", measured, measured == 1 ? "" : "s",
             tries.seconds);
}

// The recommendations that advise `knob` leave; returns the best prediction among them, if any.
std::optional<double> remove_advice_of(const std::string& knob, Diagnosis& d) {
  std::optional<double> predicted;
  std::erase_if(d.recommendations, [&](const Recommendation& r) {
    if (!advises(r, knob)) return false;
    if (r.predicted_speedup && basis_kind(r) == std::string("predicted"))
      predicted = std::max(predicted.value_or(0), *r.predicted_speedup);
    return true;
  });
  return predicted;
}

Recommendation measured_gain(const ChangeTries& tries, const TriedChange& c, std::optional<double> predicted) {
  Recommendation r;
  r.setting = c.change;
  r.action = fmt("Run with %s: %.2fx measured (watch --try, %s)%s.", c.change.c_str(), *c.speedup,
                 trials_text(tries, c).c_str(),
                 predicted ? fmt("; predicted %.2fx from outside", *predicted).c_str() : "");
  r.predicted_speedup = *c.speedup;
  r.basis = fmt("measured, not predicted: the program run with the change for %.0f s at a time, "
                "alternating with the unchanged command; faster in every round, beyond the %s the "
                "unchanged runs varied",
                tries.seconds, c.noise ? percent(*c.noise).c_str() : "(one round: not measured)");
  r.changes = {c.setting};
  return r;
}

}  // namespace

std::vector<std::string> changes_advised(const Recommendation& r) {
  std::vector<std::string> out = r.changes;
  if (const auto s = setting_change(r.setting)) out.push_back(*s);
  return out;
}

bool advises(const Recommendation& r, const std::string& knob) {
  for (const std::string& change : changes_advised(r))
    if (const auto k = knob_of(change); k && k->first == knob) return true;
  return false;
}

std::optional<std::int64_t> guessed_value(const Diagnosis& d, const std::string& knob) {
  for (const Recommendation& r : d.recommendations)
    if (!has_number(r))
      for (const std::string& change : r.changes)
        if (const auto k = knob_of(change); k && k->first == knob) return k->second;
  return std::nullopt;
}

bool only_guessed(const Diagnosis& d, const std::string& knob) {
  bool guessed = false;
  for (const Recommendation& r : d.recommendations) {
    if (!advises(r, knob)) continue;
    if (has_number(r)) return false;
    guessed = true;
  }
  return guessed;
}

void judge_tried_change(TriedChange& c, const std::vector<std::optional<double>>& unchanged) {
  std::vector<double> ratios, base;
  for (std::size_t i = 0; i < unchanged.size(); ++i) {
    if (unchanged[i]) base.push_back(*unchanged[i]);
    if (i < c.rates.size() && c.rates[i] && unchanged[i] && *unchanged[i] > 0)
      ratios.push_back(*c.rates[i] / *unchanged[i]);
  }
  if (!c.speedup || ratios.empty()) {
    c.outcome = "not measured";
    return;
  }
  if (base.size() >= 2) {
    const auto [slowest, fastest] = std::minmax_element(base.begin(), base.end());
    c.noise = *fastest / *slowest - 1;
  }
  const double margin = std::max(kTriedHelps - 1, c.noise.value_or(0));
  const auto [lowest, highest] = std::minmax_element(ratios.begin(), ratios.end());
  if (*c.speedup >= 1 + margin && *lowest > 1) c.outcome = "gain";
  else if (*c.speedup <= 1 / (1 + margin) && *highest < 1) c.outcome = "loss";
  else c.outcome = "within the noise";
}

void settle_tried_changes(const ChangeTries& tries, Diagnosis& d) {
  std::vector<Recommendation> gains;
  for (const TriedChange& c : tries.changes) {
    if (c.outcome == "not measured" || c.outcome.empty()) {
      d.evidence.push_back("tried " + c.change + ": not measured (" +
                           (c.failed.empty() ? std::string("no rate") : c.failed.front()) +
                           "); the unchanged run's result stands");
      continue;
    }
    const auto knob = knob_of(c.setting);
    const std::optional<double> predicted = knob ? remove_advice_of(knob->first, d) : std::nullopt;
    const std::string over = trials_text(tries, c);
    if (c.outcome == "gain") {
      d.evidence.push_back(fmt("tried %s: %.2fx measured %s (%s)", c.change.c_str(), *c.speedup, over.c_str(),
                               c.why.c_str()));
      gains.push_back(measured_gain(tries, c, predicted));
      continue;
    }
    const std::string how = c.outcome == "loss"
                                ? std::string("a loss")
                                : "within the noise: the unchanged runs varied " +
                                      (c.noise ? percent(*c.noise) : std::string("(one round: not measured)")) +
                                      fmt(", and a change is advised from %.2fx", kTriedHelps);
    d.evidence.push_back(fmt("tried %s: %.2fx: not advised (%s, measured %s; %s)", c.change.c_str(), *c.speedup,
                             how.c_str(), over.c_str(), c.why.c_str()));
    if (predicted)
      d.verdict += fmt(" watch --try measured %s at %.2fx (predicted %.2fx): not advised.", c.change.c_str(),
                       *c.speedup, *predicted);
  }
  d.recommendations.insert(d.recommendations.begin(), gains.begin(), gains.end());
  order_by_basis(d.recommendations);
}

void mark_guesses_unmeasured(Diagnosis& d) {
  for (Recommendation& r : d.recommendations)
    if (!r.changes.empty() && !has_number(r))
      r.basis = "not measured: the program's rate could not be read; give --throughput-pattern (" +
                r.basis + ")";
}

void order_by_basis(std::vector<Recommendation>& recs) {
  const auto rank = [](const Recommendation& r) {
    const std::string kind = basis_kind(r);
    return kind == "measured" ? 0 : kind == "predicted" ? 1 : 2;
  };
  std::stable_sort(recs.begin(), recs.end(), [&](const Recommendation& a, const Recommendation& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return rank(a) == 0 && a.predicted_speedup.value_or(0) > b.predicted_speedup.value_or(0);
  });
}

std::string shell_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& word : argv) {
    const bool plain = !word.empty() && word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                               "0123456789_./=:,+-@%") == std::string::npos;
    std::string quoted = "'";
    for (const char ch : word) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    out += (out.empty() ? "" : " ") + (plain ? word : quoted + "'");
  }
  return out;
}

}  // namespace feedscope
