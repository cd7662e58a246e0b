#include "cli/try_changes.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <sstream>

#include "cli/child_process.h"
#include "cli/output_scanner.h"
#include "cli/python_hook.h"
#include "cli/try_verdicts.h"
#include "cli/watch.h"
#include "profiler/detail/format.h"
#include "profiler/watch_diagnosis.h"

namespace feedscope {

namespace {

using detail::fmt;

constexpr std::string_view kWorkerFlags[] = {"-j", "--workers", "--num-workers", "--num_workers"};
constexpr std::string_view kBatchFlags[] = {"-b", "--batch-size", "--batch_size"};

// The value a recommendation's setting gives `key` ("num_workers=3" -> 3); none where none does.
std::optional<std::int64_t> advised(const Report& r, const std::string& key) {
  for (const Recommendation& rec : r.diagnosis.recommendations)
    if (rec.setting.starts_with(key + "="))
      if (const long long v = std::atoll(rec.setting.c_str() + key.size() + 1); v > 0) return v;
  return std::nullopt;
}

// Where the first of `flags` is on the command line (nothing after `--`): cli/output_scanner.h.
std::optional<FlagAt> first_flag(const std::vector<std::string>& command,
                                 std::span<const std::string_view> flags) {
  for (std::size_t i = 0; i < command.size() && command[i] != "--"; ++i)
    if (const auto at = flag_at(command, i, flags)) return at;
  return std::nullopt;
}

// The value the first of `flags` has on the command line (`-j 2`, `--workers=2`).
std::optional<std::int64_t> flag_now(const std::vector<std::string>& command,
                                     std::span<const std::string_view> flags) {
  const std::optional<FlagAt> at = first_flag(command, flags);
  if (!at) return std::nullopt;
  return std::atoll(command[at->word].c_str() + at->value_at);
}

std::optional<ChangeCandidate> thread_candidate(const std::map<std::string, std::string>& env,
                                                const Report& watched, int cpus) {
  const ProgramSummary& p = *watched.program;
  const ProcessTreeSummary& t = p.tree;
  const std::string& b = watched.diagnosis.bottleneck;
  if (b != "cpu_compute" && b != "cpu_preprocess") return std::nullopt;
  const double computing = t.working_other_threads_cores();
  int threads = 0;
  std::string why;
  if (computing < kOneThreadOthers && cpus > 1) {
    threads = cpus;
    why = fmt("the step runs on one thread (its compute threads %.2f cores) on a machine of %d "
              "cores: torch's intra-op pool given every core",
              computing, cpus);
  } else if (t.workers > 0 && computing >= kOneThreadOthers) {
    threads = 1;
    why = fmt("its compute threads (%.2f cores) share the cores with %d loader workers: one thread "
              "for the step leaves the workers the rest",
              computing, t.workers);
  } else {
    return std::nullopt;
  }
  const std::string value = std::to_string(threads);
  const char* source = std::getenv("OMP_NUM_THREADS");
  const auto set = env.find("OMP_NUM_THREADS");
  const std::string now = set != env.end() ? set->second : source ? source : "";
  if (now == value) return std::nullopt;
  ChangeCandidate c;
  c.label = "OMP_NUM_THREADS=" + value;
  c.setting = "threads=" + value;
  c.why = why;
  c.command = p.command;
  c.env = {{"OMP_NUM_THREADS", value}, {"MKL_NUM_THREADS", value}};
  return c;
}

std::optional<ChangeCandidate> worker_candidate(const std::vector<std::string>& command,
                                                const Report& watched) {
  const std::optional<std::int64_t> now = flag_now(command, kWorkerFlags);
  if (!now) return std::nullopt;
  std::optional<std::int64_t> workers = advised(watched, "num_workers");
  std::string why = "the diagnosis advises it";
  if (!workers) {
    if ((workers = guessed_value(watched.diagnosis, "num_workers"))) {
      why = "the advice's guess to try, with no prediction";
    } else if (watched.diagnosis.bottleneck == "cpu_preprocess") {
      workers = *now + 1;
      why = "input-bound (cpu_preprocess) with no worker count advised: one more worker";
    }
  }
  if (!workers || *workers == *now) return std::nullopt;
  ChangeCandidate c;
  c.why = why;
  c.setting = "num_workers=" + std::to_string(*workers);
  c.command = *with_flag_value(command, kWorkerFlags, *workers, &c.label);
  return c;
}

std::optional<ChangeCandidate> batch_candidate(const std::vector<std::string>& command,
                                               const Report& watched) {
  const std::optional<std::int64_t> batch = advised(watched, "batch_size");
  if (!batch || flag_now(command, kBatchFlags) == batch) return std::nullopt;
  ChangeCandidate c;
  const auto changed = with_flag_value(command, kBatchFlags, *batch, &c.label);
  if (!changed) return std::nullopt;
  c.why = "the diagnosis advises it";
  c.setting = "batch_size=" + std::to_string(*batch);
  c.command = *changed;
  c.batch_size = *batch;
  return c;
}

// Workers started again every epoch: made persistent from outside, the program's command line
// having no flag for it.
std::optional<ChangeCandidate> persistent_workers_candidate(const Report& watched) {
  const std::vector<Recommendation>& recs = watched.diagnosis.recommendations;
  if (std::none_of(recs.begin(), recs.end(),
                   [](const Recommendation& r) { return r.setting == "persistent_workers=True"; }))
    return std::nullopt;
  ChangeCandidate c;
  c.label = "persistent_workers=True";
  c.setting = "persistent_workers=1";  // the knob settle_tried_changes() matches the advice by
  c.why = "the diagnosis advises it; set from outside, as the command line has no flag for it: a "
          "sitecustomize first on the program's PYTHONPATH makes every DataLoader with workers "
          "persistent";
  c.command = watched.program->command;
  c.python_hook = persistent_workers_sitecustomize();
  return c;
}

// One run of a change (or of the unchanged command): what watch measured of it, in the watched
// run's unit, or how it failed.
struct TrialRun {
  std::optional<double> rate;
  std::string failed;
  bool interrupted = false;  // Ctrl-C (or SIGTERM) reached feedscope, which passed it on
};

// The watched run's own measure, in which each trial is read: samples/s where it was measured,
// else it/s, tokens/s, or a repeating line's lines/s.
struct Measure {
  const char* unit;
  double Throughput::*rate;
};

std::optional<Measure> measure_of(const Throughput& t) {
  for (const Measure m : {Measure{"samples/s", &Throughput::samples_per_s},
                          Measure{"it/s", &Throughput::batches_per_s},
                          Measure{"tokens/s", &Throughput::tokens_per_s},
                          Measure{"lines/s", &Throughput::lines_per_s}})
    if (t.*m.rate > 0) return m;
  return std::nullopt;
}

TrialRun run_trial(const WatchOptions& base, const ChangeCandidate& change, const std::string& dir,
                   const Measure& measure) {
  WatchOptions o;
  o.command = change.command;
  o.env = base.env;
  for (const auto& [k, v] : change.env) o.env[k] = v;
  if (!change.python_hook.empty()) {
    const auto set = o.env.find("PYTHONPATH");
    const char* inherited = std::getenv("PYTHONPATH");
    const std::string now = set != o.env.end() ? set->second : inherited ? inherited : "";
    try {
      o.env["PYTHONPATH"] = install_python_hook(std::filesystem::path(dir + "-hook"), change.python_hook, now);
    } catch (const std::exception& e) {
      TrialRun out;
      out.failed = std::string("did not run: ") + e.what();
      return out;
    }
  }
  o.report_dir = dir;
  o.sample_hz = base.sample_hz;
  o.duration_s = base.try_seconds;
  o.grace_s = 5;
  o.throughput_pattern = base.throughput_pattern;
  o.throughput_unit = base.throughput_unit;
  o.batch_size = change.batch_size > 0 ? change.batch_size : base.batch_size;
  o.print = false;
  o.keep_output = true;
  TrialRun out;
  if (forwarded_signal() != 0) {  // Ctrl-C between two runs: this one does not start
    out.interrupted = true;
    out.failed = "not run: interrupted";
    return out;
  }
  try {
    std::ostringstream quiet;
    const WatchOutcome w = watch_program(o, quiet);
    const ProgramSummary& p = *w.report.program;
    out.interrupted = p.ended == "interrupted";
    if (p.ended == "failed" || p.ended == "crashed" || out.interrupted) {
      out.failed = p.ended + " (" + p.exit + ")";
      return out;
    }
    const double rate = w.report.throughput.*measure.rate;
    if (rate > 0) out.rate = rate;
    else out.failed = "no rate measured (" + (w.report.throughput.source.empty() ? std::string("no progress line read")
                                                                               : w.report.throughput.source) + ")";
  } catch (const std::exception& e) {
    out.failed = std::string("did not run: ") + e.what();
  }
  return out;
}

// Its rates over the unchanged runs' of the rounds where both measured.
std::optional<double> speedup_of(const std::vector<std::optional<double>>& rates,
                                 const std::vector<std::optional<double>>& unchanged) {
  double changed_sum = 0, unchanged_sum = 0;
  for (std::size_t i = 0; i < rates.size() && i < unchanged.size(); ++i)
    if (rates[i] && unchanged[i]) {
      changed_sum += *rates[i];
      unchanged_sum += *unchanged[i];
    }
  if (!(unchanged_sum > 0)) return std::nullopt;
  return changed_sum / unchanged_sum;
}

// Why nothing is tried, or empty: the program's rate unmeasured, its run interrupted, or no change
// it can be given from outside.
std::string nothing_to_try(const Report& report, bool measured, bool no_candidates, bool auto_only) {
  if (!measured)
    return "its throughput was not measured (no progress line in a known format or counter, no "
           "--throughput-pattern match, no Session spans): a change's effect could not be "
           "measured, so nothing was run";
  if (report.program->ended == "interrupted")
    return "the watched run was interrupted: nothing more is run";
  if (no_candidates && auto_only)
    return "--try=auto: no guess is left in the advice that a change from outside can settle "
           "(each recommendation has a prediction, or names no thread count, worker or batch flag)";
  if (no_candidates)
    return "no change feedscope can make from outside fits this diagnosis (" +
           report.diagnosis.bottleneck + "): the thread count where the step is on one thread or "
           "shares the cores with workers, and a worker or batch flag on the command line";
  return "";
}

// What a run of the tries costs: rounds x (changes + the unchanged command) runs, each its window
// and about 3 s to start and stop.
double tries_cost_s(std::size_t changes, int rounds, double seconds) {
  return static_cast<double>((changes + 1) * static_cast<std::size_t>(rounds)) * (seconds + 3);
}

// What it will run, and for how long, before it starts.
void say_plan(const std::vector<ChangeCandidate>& candidates, const ChangeTries& tries,
              std::ostream& log) {
  const std::size_t runs = (candidates.size() + 1) * static_cast<std::size_t>(tries.rounds);
  log << "feedscope watch --try" << (tries.auto_only ? "=auto" : "") << ": " << candidates.size()
      << " change(s), each run " << tries.rounds << " time(s) for " << tries.seconds
      << " s beside the unchanged command: " << runs << " runs, about "
      << static_cast<int>(tries_cost_s(candidates.size(), tries.rounds, tries.seconds)) << " s:\n";
  for (const ChangeCandidate& c : candidates) log << "  " << c.label << ": " << c.why << "\n";
  log << std::flush;
}

// Each round: the unchanged command, then each change, into tries.unchanged_rates and each
// change's rates and failures. True where Ctrl-C (or SIGTERM) ended them early.
bool run_rounds(const WatchOptions& options, const std::vector<ChangeCandidate>& candidates,
                const Measure& measure, ChangeTries& tries, std::ostream& log) {
  ChangeCandidate unchanged;
  unchanged.command = options.command;
  const std::filesystem::path dir = std::filesystem::path(options.report_dir) / "tries";
  const auto rate_text = [&](const TrialRun& run) {
    return run.rate ? fmt("%.4g", *run.rate) + " " + tries.unit : run.failed;
  };
  bool interrupted = false;
  for (int round = 1; round <= tries.rounds && !interrupted; ++round) {
    const std::string suffix = "-" + std::to_string(round);
    const TrialRun base = run_trial(options, unchanged, (dir / ("unchanged" + suffix)).string(), measure);
    interrupted = base.interrupted || forwarded_signal() != 0;
    tries.unchanged_rates.push_back(base.rate);
    log << "  round " << round << ": unchanged " << rate_text(base);
    for (std::size_t i = 0; i < candidates.size() && !interrupted; ++i) {
      const std::string name = "change" + std::to_string(i + 1) + suffix;
      const TrialRun run = run_trial(options, candidates[i], (dir / name).string(), measure);
      interrupted = run.interrupted || forwarded_signal() != 0;
      tries.changes[i].rates.push_back(run.rate);
      if (!run.failed.empty()) tries.changes[i].failed.push_back(run.failed);
      log << ", " << candidates[i].label << " " << rate_text(run);
    }
    log << std::endl;
  }
  return interrupted;
}

}  // namespace

std::optional<std::vector<std::string>> with_flag_value(const std::vector<std::string>& command,
                                                        std::span<const std::string_view> flags,
                                                        std::int64_t value, std::string* label) {
  const std::optional<FlagAt> at = first_flag(command, flags);
  if (!at) return std::nullopt;
  std::vector<std::string> out = command;
  std::string& word = out[at->word];
  word = word.substr(0, at->value_at) + std::to_string(value);
  if (label) *label = at->value_at > 0 ? word : out[at->word - 1] + " " + word;
  return out;
}

std::vector<ChangeCandidate> change_candidates(const std::vector<std::string>& command,
                                               const std::map<std::string, std::string>& env,
                                               const Report& watched, int cpus) {
  std::vector<ChangeCandidate> out;
  if (!watched.program) return out;
  for (auto c : {thread_candidate(env, watched, cpus), worker_candidate(command, watched),
                 batch_candidate(command, watched), persistent_workers_candidate(watched)})
    if (c) out.push_back(std::move(*c));
  return out;
}

namespace {

// What a candidate changes: "threads", "num_workers", "batch_size".
std::string knob(const ChangeCandidate& c) { return c.setting.substr(0, c.setting.find('=')); }

// The candidates `--try=auto` runs: those that settle a guess left in the advice.
std::vector<ChangeCandidate> guesses_only(std::vector<ChangeCandidate> candidates, const Diagnosis& d) {
  std::erase_if(candidates, [&](const ChangeCandidate& c) { return !only_guessed(d, knob(c)); });
  return candidates;
}

// Iterations of another batch size are not the same work: a batch change needs samples/s.
void drop_batch_changes(std::vector<ChangeCandidate>& candidates, const Measure& measure, ProgramSummary& p) {
  if (std::string(measure.unit) == "samples/s") return;
  std::erase_if(candidates, [&](const ChangeCandidate& c) {
    if (c.batch_size > 0)
      p.notes.push_back("watch --try: " + c.label + " not tried: its throughput is in " + measure.unit +
                        " (no batch size known), which a batch change does not keep comparable");
    return c.batch_size > 0;
  });
}

}  // namespace

void try_changes(const WatchOptions& options, Report& report, std::ostream& log) {
  ProgramSummary& p = *report.program;
  ChangeTries& tries = p.tries.emplace();
  tries.seconds = options.try_seconds;
  tries.rounds = options.try_rounds;
  tries.auto_only = options.try_auto;
  const std::optional<Measure> measure = measure_of(report.throughput);
  std::vector<ChangeCandidate> candidates;
  if (measure && p.ended != "interrupted") {
    tries.unit = measure->unit;
    candidates = change_candidates(options.command, options.env, report, report.environment.cpus);
    if (options.try_auto) candidates = guesses_only(std::move(candidates), report.diagnosis);
    drop_batch_changes(candidates, *measure, p);
  }
  tries.skipped = nothing_to_try(report, measure.has_value(), candidates.empty(), options.try_auto);
  if (!tries.skipped.empty()) {
    if (!measure) mark_guesses_unmeasured(report.diagnosis);
    log << "feedscope watch --try: " << tries.skipped << std::endl;
    return;
  }
  say_plan(candidates, tries, log);
  for (const ChangeCandidate& c : candidates) {
    TriedChange& t = tries.changes.emplace_back();
    t.change = c.label;
    t.why = c.why;
    t.setting = c.setting;
    t.command = c.command;
    t.env = c.env;
  }
  // Ctrl-C ends the tries: what the rounds so far measured stands.
  if (run_rounds(options, candidates, *measure, tries, log)) {
    p.notes.push_back("watch --try: interrupted; the changes are judged on the runs completed before");
    log << "feedscope watch --try: interrupted; no further runs" << std::endl;
  }
  for (TriedChange& c : tries.changes) {
    c.speedup = speedup_of(c.rates, tries.unchanged_rates);
    judge_tried_change(c, tries.unchanged_rates);
  }
  settle_tried_changes(tries, report.diagnosis);
}

namespace {

// `feedscope watch --try=auto [its pattern, unit, batch size] -- COMMAND`, as a shell runs it.
std::string try_auto_command(const WatchOptions& options) {
  std::vector<std::string> command = {"feedscope", "watch", "--try=auto"};
  if (!options.throughput_pattern.empty()) {
    command.insert(command.end(), {"--throughput-pattern", options.throughput_pattern});
    if (!options.throughput_unit.empty())
      command.insert(command.end(), {"--throughput-unit", options.throughput_unit});
  }
  if (options.batch_size > 0)
    command.insert(command.end(), {"--batch-size", std::to_string(options.batch_size)});
  command.push_back("--");
  command.insert(command.end(), options.command.begin(), options.command.end());
  return shell_command(command);
}

}  // namespace

void offer_tries(const WatchOptions& options, Report& report) {
  if (options.try_changes || options.attach_pid != 0 || !report.program) return;
  Diagnosis& d = report.diagnosis;
  const std::vector<ChangeCandidate> guesses =
      guesses_only(change_candidates(options.command, options.env, report, report.environment.cpus), d);
  if (guesses.empty()) return;
  if (!measure_of(report.throughput)) {
    mark_guesses_unmeasured(d);
    return;
  }
  const double wall_s = report.program->wall_s;
  if (wall_s < 2 * options.try_seconds) {
    report.program->notes.push_back(
        fmt("watch --try=auto not offered: the program ran %.0f s, under two %.0f-s trials", wall_s,
            options.try_seconds));
    return;
  }
  const std::size_t runs = (guesses.size() + 1) * static_cast<std::size_t>(options.try_rounds);
  const std::string offer = fmt(" Measure it: %s (%zu runs of %.0f s, about %.0f s beside the program's %.0f s).",
                                try_auto_command(options).c_str(), runs, options.try_seconds,
                                tries_cost_s(guesses.size(), options.try_rounds, options.try_seconds), wall_s);
  for (Recommendation& r : d.recommendations) {
    const bool settles = std::any_of(guesses.begin(), guesses.end(), [&](const ChangeCandidate& c) {
      return advises(r, knob(c));
    });
    if (!r.changes.empty() && settles) r.action += offer;
  }
}

}  // namespace feedscope
