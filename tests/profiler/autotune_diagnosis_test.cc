#include "profiler/autotune_diagnosis.h"

#include <gtest/gtest.h>

#include "profiler/diagnosis.h"

namespace feedscope {
namespace autotune_diagnosis_test {

// A tuner that went 1 -> 2 workers (kept), tried 3 and went back to 2.
AutotuneSummary tuned_to_two() {
  AutotuneSummary a;
  TunerMove up{1.5, {1, 2}, {2, 2}, "one worker more", {8, 0.4}, Measured{14, 0.02}, true};
  TunerMove trial{4.0, {2, 2}, {3, 2}, "one worker more", {14, 0.06}, Measured{14.1, 0.05}, false};
  TunerMove back{5.5, {3, 2}, {2, 2}, "back: no gain", {14.1, 0.05}, Measured{14, 0.06}, true};
  a.moves = {up, trial, back};
  a.final = {2, 2};
  a.most = {4, 8};
  return a;
}

bool has(const std::vector<std::string>& lines, const std::string& fragment) {
  for (const std::string& l : lines)
    if (l.find(fragment) != std::string::npos) return true;
  return false;
}

TEST(AutotuneDiagnosis, SaysTheRunWasTunedAndDropsAWorkerCountTheTunerRefused) {
  Diagnosis d;
  d.recommendations = {{"Raise num_workers from 2 to 3.", "num_workers=3", 1000, 1.4, "model"},
                       {"Pin memory.", "pin_memory=on", 900, 1.2, "model"}};
  advise_from_autotune(tuned_to_two(), d);
  ASSERT_EQ(d.recommendations.size(), 1u);
  EXPECT_EQ(d.recommendations[0].setting, "pin_memory=on");
  EXPECT_TRUE(has(d.evidence, "the loader tuned itself (num_workers=auto): 3 move(s), 1 kept, "
                              "ended at num_workers=2 prefetch=2"));
  EXPECT_TRUE(has(d.evidence, "considered num_workers=3: the tuner tried it at 4.0 s and measured "
                              "14.0 -> 14.1 batches/s"));
}

TEST(AutotuneDiagnosis, AWorkerCountNotTriedFromWhereItEndedIsStillAdvised) {
  Diagnosis d;
  d.recommendations = {{"Raise num_workers from 2 to 4.", "num_workers=4", 1000, 1.4, "model"}};
  advise_from_autotune(tuned_to_two(), d);
  EXPECT_EQ(d.recommendations.size(), 1u);
}

TEST(AutotuneDiagnosis, TheDiagnosisOfATunedRunCarriesIt) {
  DiagnosisInput in;
  in.wall_s = 10;
  in.batches = 100;
  in.batch_size = 32;
  in.samples_per_s = 320;
  in.num_workers = 2;  // where the tuner ended
  in.cpus = 2;
  for (int i = 0; i < kStageCount; ++i) {
    StageStats s;
    s.name = std::string(kStageNames[static_cast<std::size_t>(i)]);
    in.stages.push_back(s);
  }
  in.autotune = tuned_to_two();
  EXPECT_TRUE(has(diagnose(in).evidence, "the loader tuned itself"));
  in.autotune.reset();
  EXPECT_FALSE(has(diagnose(in).evidence, "the loader tuned itself"));
}

}  // namespace autotune_diagnosis_test
}  // namespace feedscope
