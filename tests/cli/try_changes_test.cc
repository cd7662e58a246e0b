#include "cli/try_changes.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli/python_hook.h"
#include "tests/support/temp_dir.h"

#include "cli/watch.h"

namespace feedscope {
namespace {

constexpr std::string_view kWorkers[] = {"-j", "--workers"};

TEST(TryChangesTest, AFlagsValueIsReplacedInEitherSpellingAndNothingAfterTheSeparator) {
  std::string label;
  const auto spaced = with_flag_value({"python", "main.py", "-j", "4", "/data"}, kWorkers, 2, &label);
  ASSERT_TRUE(spaced);
  EXPECT_EQ(*spaced, (std::vector<std::string>{"python", "main.py", "-j", "2", "/data"}));
  EXPECT_EQ(label, "-j 2");
  const auto joined = with_flag_value({"python", "t.py", "--workers=4"}, kWorkers, 6, &label);
  ASSERT_TRUE(joined);
  EXPECT_EQ(joined->back(), "--workers=6");
  EXPECT_EQ(label, "--workers=6");
  EXPECT_FALSE(with_flag_value({"torchrun", "--", "t.py", "-j", "4"}, kWorkers, 2, nullptr))
      << "after -- the words are another program's";
  EXPECT_FALSE(with_flag_value({"python", "t.py", "--jobs", "4"}, kWorkers, 2, nullptr));
}

Report watched(const std::string& bottleneck, double other_threads, int workers) {
  Report r;
  r.diagnosis.bottleneck = bottleneck;
  ProgramSummary p;
  p.command = {"python", "train.py", "--workers", "1", "-b", "64"};
  p.tree.other_threads_cores = other_threads;
  p.tree.workers = workers;
  r.program = p;
  return r;
}

std::vector<std::string> labels(const std::vector<ChangeCandidate>& cs) {
  std::vector<std::string> out;
  for (const ChangeCandidate& c : cs) out.push_back(c.label);
  return out;
}

TEST(TryChangesTest, TheCandidatesFollowTheDiagnosisAndWhatTheCommandLineCarries) {
  ::unsetenv("OMP_NUM_THREADS");  // feedscope's own environment is the program's otherwise
  // The step on one thread beside idle cores: every core for torch's pool.
  Report r = watched("cpu_compute", 0.05, 1);
  std::vector<ChangeCandidate> cs = change_candidates(r.program->command, {}, r, 4);
  EXPECT_EQ(labels(cs), std::vector<std::string>{"OMP_NUM_THREADS=4"});
  EXPECT_EQ(cs[0].env.at("MKL_NUM_THREADS"), "4");
  EXPECT_EQ(cs[0].command, r.program->command) << "the command itself is unchanged";
  EXPECT_TRUE(change_candidates(r.program->command, {{"OMP_NUM_THREADS", "4"}}, r, 4).empty())
      << "already so";

  // Input-bound with compute threads beside the workers: one thread, and the advised workers.
  r = watched("cpu_preprocess", 0.9, 1);
  Recommendation more;
  more.setting = "num_workers=3";
  r.diagnosis.recommendations.push_back(more);
  cs = change_candidates(r.program->command, {}, r, 4);
  EXPECT_EQ(labels(cs), (std::vector<std::string>{"OMP_NUM_THREADS=1", "--workers 3"}));
  EXPECT_EQ(cs[1].command[3], "3");

  // Input-bound with no count advised: one more worker; a batch size only where advised.
  r = watched("cpu_preprocess", 0.05, 1);
  Recommendation batch;
  batch.setting = "batch_size=128";
  r.diagnosis.recommendations.push_back(batch);
  cs = change_candidates(r.program->command, {}, r, 1);
  EXPECT_EQ(labels(cs), (std::vector<std::string>{"--workers 2", "-b 128"}));
  EXPECT_EQ(cs[1].batch_size, 128);

  EXPECT_EQ(cs[0].setting, "num_workers=2");
  EXPECT_EQ(cs[1].setting, "batch_size=128");

  // A guess in the advice names a worker count: that count is tried (a program loading in its
  // training thread, with `--workers 0` on its command line).
  r = watched("cpu_compute", 0.9, 0);
  r.program->command = {"python", "train.py", "--workers", "0"};
  Recommendation guess;
  guess.changes = {"num_workers=2", "threads=2"};
  r.diagnosis.recommendations = {guess};
  cs = change_candidates(r.program->command, {}, r, 2);
  EXPECT_EQ(labels(cs), std::vector<std::string>{"--workers 2"});
  EXPECT_EQ(cs[0].why, "the advice's guess to try, with no prediction");

  // On a GPU, or with no flag on the command line, nothing feedscope can change from outside.
  r = watched("launch_overhead", 0.05, 1);
  EXPECT_TRUE(change_candidates(r.program->command, {}, r, 4).empty());
  r = watched("cpu_preprocess", 0.05, 0);
  EXPECT_TRUE(change_candidates({"python", "train.py"}, {}, r, 1).empty());
}

// A CPU-bound program on one thread beside an idle core, its rate read, that ran `wall_s`.
Report one_thread_program(double wall_s, double samples_per_s) {
  Report r = watched("cpu_compute", 0.02, 1);
  r.program->wall_s = wall_s;
  r.throughput.samples_per_s = samples_per_s;
  r.environment.cpus = 2;
  Recommendation guess;
  guess.action = "Try giving torch's intra-op pool the idle cores, and measure it.";
  guess.basis = "no prediction: not seen from outside";
  guess.changes = {"threads=2"};
  Recommendation cheaper;
  cheaper.action = "Make the step cheaper.";
  r.diagnosis.recommendations = {guess, cheaper};
  return r;
}

TEST(TryChangesTest, AGuessLeftOffersTheExactTryCommandWhereTheProgramRanTwoTrialsLong) {
  ::unsetenv("OMP_NUM_THREADS");
  WatchOptions o;
  o.command = one_thread_program(0, 0).program->command;
  Report r = one_thread_program(95, 120);
  offer_tries(o, r);
  const std::string& action = r.diagnosis.recommendations[0].action;
  EXPECT_NE(action.find("Measure it: feedscope watch --try=auto -- python train.py --workers 1 -b 64 "
                        "(4 runs of 20 s, about 92 s beside the program's 95 s)."),
            std::string::npos)
      << action;
  EXPECT_EQ(r.diagnosis.recommendations[1].action, "Make the step cheaper.") << "no change a trial makes";

  Report short_run = one_thread_program(30, 120);
  offer_tries(o, short_run);
  EXPECT_EQ(short_run.diagnosis.recommendations[0].action.find("Measure it"), std::string::npos);
  EXPECT_NE(short_run.program->notes.back().find("ran 30 s, under two 20-s trials"), std::string::npos);

  Report no_rate = one_thread_program(95, 0);
  offer_tries(o, no_rate);
  EXPECT_EQ(no_rate.diagnosis.recommendations[0].basis.rfind("not measured: the program's rate could not be read", 0), 0u)
      << no_rate.diagnosis.recommendations[0].basis;

  WatchOptions tried = o;
  tried.try_changes = true;
  Report with_try = one_thread_program(95, 120);
  offer_tries(tried, with_try);
  EXPECT_EQ(with_try.diagnosis.recommendations[0].action.find("Measure it"), std::string::npos) << "--try ran";
}

// Workers started again every epoch: persistent_workers=True, set from outside by a sitecustomize
// on the program's PYTHONPATH, the command line having no flag for it.
TEST(TryChangesTest, PersistentWorkersAreTriedThroughAPythonHookWhereAdvised) {
  Report r = watched("cpu_preprocess", 0.05, 4);
  r.program->command = {"python", "train.py"};
  Recommendation persist;
  persist.setting = "persistent_workers=True";
  r.diagnosis.recommendations.push_back(persist);
  const std::vector<ChangeCandidate> cs = change_candidates(r.program->command, {}, r, 1);
  ASSERT_EQ(labels(cs), (std::vector<std::string>{"persistent_workers=True"}));
  EXPECT_EQ(cs[0].command, r.program->command);
  EXPECT_NE(cs[0].why.find("no flag for it"), std::string::npos) << cs[0].why;
  EXPECT_NE(cs[0].python_hook.find("persistent_workers"), std::string::npos);
}

// The hook in a real interpreter: a DataLoader with workers becomes persistent, one without
// workers or one that says persistent_workers=False stays as it was, and the sitecustomize it
// shadows still runs.
TEST(TryChangesTest, ThePersistentWorkersHookSetsItOnlyWhereTheLoaderHasWorkers) {
  const char* python = "/usr/bin/python3";
  const testing::TempDir tmp;
  const std::filesystem::path shadowed = tmp.path() / "theirs";
  std::filesystem::create_directories(shadowed);
  std::ofstream(shadowed / "sitecustomize.py") << "import os\nos.environ['THEIRS_RAN'] = '1'\n";
  const std::string path =
      install_python_hook(tmp.path() / "hook", persistent_workers_sitecustomize(), shadowed.string());
  EXPECT_EQ(path, (tmp.path() / "hook").string() + ":" + shadowed.string());
  std::ofstream(tmp.path() / "program.py")
      << "import os\n"
         "try:\n"
         "    import torch.utils.data as d\n"
         "except ImportError:\n"
         "    print('no torch')\n"
         "    raise SystemExit(0)\n"
         "ds = list(range(8))\n"
         "print(d.DataLoader(ds, num_workers=2).persistent_workers, d.DataLoader(ds).persistent_workers,\n"
         "      d.DataLoader(ds, batch_size=2, num_workers=2, persistent_workers=False).persistent_workers,\n"
         "      os.environ.get('THEIRS_RAN'))\n";
  FILE* out = ::popen(("PYTHONPATH=" + path + " " + python + " " + (tmp.path() / "program.py").string()).c_str(), "r");
  ASSERT_NE(out, nullptr);
  char line[256] = {};
  const bool read = std::fgets(line, sizeof line, out) != nullptr;
  EXPECT_EQ(::pclose(out), 0);
  ASSERT_TRUE(read);
  if (std::string(line) == "no torch\n") GTEST_SKIP() << python << " has no torch";
  EXPECT_EQ(std::string(line), "True False False 1\n");
}

}  // namespace
}  // namespace feedscope
