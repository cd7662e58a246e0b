#include "cli/output_scanner.h"

#include <gtest/gtest.h>

#include "cli/config.h"

namespace feedscope {
namespace {

TEST(ThroughputUnitTest, ParsesTheThreeUnitsAndNamesABadOne) {
  EXPECT_EQ(parse_throughput_unit("samples/s"), ThroughputUnit::samples_per_s);
  EXPECT_EQ(parse_throughput_unit("it/s"), ThroughputUnit::iterations_per_s);
  EXPECT_EQ(parse_throughput_unit("batches/s"), ThroughputUnit::iterations_per_s);
  EXPECT_EQ(parse_throughput_unit("s/it"), ThroughputUnit::seconds_per_iteration);
  try {
    parse_throughput_unit("img/sec");
    ADD_FAILURE() << "img/sec was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "throughput_unit");
    const std::string what = e.what();
    EXPECT_NE(what.find("--throughput-unit: 'img/sec'"), std::string::npos) << what;
    EXPECT_NE(what.find("allowed: samples/s, it/s"), std::string::npos) << what;
  }
}

TEST(ThroughputUnitTest, IsInferredFromWhatThePatternSays) {
  EXPECT_EQ(infer_throughput_unit(R"(([0-9.]+) samples/s)"), ThroughputUnit::samples_per_s);
  EXPECT_EQ(infer_throughput_unit(R"(([0-9.]+)it/s)"), ThroughputUnit::iterations_per_s);
  EXPECT_EQ(infer_throughput_unit(R"(([0-9.]+)s/it)"), ThroughputUnit::seconds_per_iteration);
  EXPECT_EQ(infer_throughput_unit(R"(([0-9.]+)(?:it/s|s/it))"), ThroughputUnit::per_line);
  EXPECT_EQ(infer_throughput_unit(R"(Time\s+([0-9.]+))"), ThroughputUnit::seconds_per_iteration);
}

TEST(ThroughputPatternTest, NeedsARegexWithAGroup) {
  EXPECT_NO_THROW(check_throughput_pattern(R"(([0-9.]+)it/s)"));
  EXPECT_THROW(check_throughput_pattern("no group"), ConfigError);
  EXPECT_THROW(check_throughput_pattern("(unclosed"), ConfigError);
}

TEST(OutputScannerTest, SamplesPerSecondIsTheLastMatch) {
  OutputScanner s(R"(throughput: ([0-9.]+) samples/s)", ThroughputUnit::samples_per_s, 0);
  s.text("throughput: 100 samples/s", 1);
  s.text("throughput: 120.5 samples/s", 2);
  const PrintedThroughput t = s.throughput();
  EXPECT_EQ(t.lines, 2u);
  ASSERT_TRUE(t.samples_per_s);
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 120.5);
  EXPECT_FALSE(t.iterations_per_s) << "no batch size: iterations not known";
}

// tqdm draws its bar on one line, each redraw after a carriage return, and a newline at the end.
TEST(OutputScannerTest, TqdmItersPerSecondAcrossCarriageReturnsTimesTheBatch) {
  OutputScanner s(R"(([0-9.]+)it/s)", ThroughputUnit::iterations_per_s, 32);
  s.text("  0%|          | 0/100 [00:00<?, ?it/s]\r 10%|#         | 10/100 [00:01<00:09, 9.87it/s]"
         "\r 20%|##        | 20/100 [00:02<00:08, 12.34it/s]",
         5);
  const PrintedThroughput t = s.throughput();
  EXPECT_EQ(t.lines, 2u) << "the `?it/s` of the first draw is no figure";
  ASSERT_TRUE(t.iterations_per_s);
  EXPECT_DOUBLE_EQ(*t.iterations_per_s, 12.34);
  ASSERT_TRUE(t.samples_per_s);
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 12.34 * 32);
  EXPECT_NE(t.basis.find("batch size 32"), std::string::npos) << t.basis;
  EXPECT_EQ(s.first_line_ns(), 5);
}

TEST(OutputScannerTest, ItersPerSecondWithoutABatchSizeLeavesSamplesUnmeasured) {
  OutputScanner s(R"(([0-9.]+)it/s)", ThroughputUnit::iterations_per_s, 0);
  s.text("100%|##########| 100/100 [00:08<00:00, 12.34it/s]", 1);
  const PrintedThroughput t = s.throughput();
  ASSERT_TRUE(t.iterations_per_s);
  EXPECT_DOUBLE_EQ(*t.iterations_per_s, 12.34);
  EXPECT_FALSE(t.samples_per_s) << "null, never 0";
  EXPECT_NE(t.basis.find("samples/s not measured"), std::string::npos) << t.basis;
}

TEST(OutputScannerTest, SecondsPerIterationIsTheMeanAfterTheFirst) {
  OutputScanner s(R"(([0-9.]+)s/it)", ThroughputUnit::seconds_per_iteration, 16);
  s.text("  1%|          | 1/100 [00:09<15:00, 9.00s/it]", 1);  // the loader's start-up
  s.text("  2%|          | 2/100 [00:10<14:00, 1.20s/it]", 2);
  s.text("  3%|          | 3/100 [00:11<13:00, 1.30s/it]", 3);
  const PrintedThroughput t = s.throughput();
  ASSERT_TRUE(t.iterations_per_s);
  EXPECT_NEAR(*t.iterations_per_s, 1 / 1.25, 1e-12);
  ASSERT_TRUE(t.samples_per_s);
  EXPECT_NEAR(*t.samples_per_s, 16 / 1.25, 1e-9);
}

TEST(OutputScannerTest, TqdmSwitchingBetweenItsUnitsIsReadLineByLine) {
  OutputScanner s(R"(([0-9.]+)(?:it/s|s/it))", ThroughputUnit::per_line, 0);
  s.text(" 1/100 [00:02<03:18, 2.00s/it]", 1);
  EXPECT_DOUBLE_EQ(*s.throughput().iterations_per_s, 0.5);
  s.text(" 9/100 [00:04<00:30, 3.00it/s]", 2);
  EXPECT_DOUBLE_EQ(*s.throughput().iterations_per_s, 3.0);
}

TEST(OutputScannerTest, ImageNetTimeAndDataLinesGiveTheDataWaitShare) {
  OutputScanner s(R"(Time\s+([0-9.]+))", ThroughputUnit::seconds_per_iteration, 256);
  s.text("Epoch: [0][  0/100]\tTime  5.000 ( 5.000)\tData  4.800 ( 4.800)\tLoss 6.9 (6.9)", 1);
  s.text("Epoch: [0][ 10/100]\tTime  0.500 ( 0.950)\tData  0.300 ( 0.700)\tLoss 6.8 (6.9)", 2);
  s.text("Epoch: [0][ 20/100]\tTime  0.300 ( 0.700)\tData  0.100 ( 0.500)\tLoss 6.7 (6.8)", 3);
  const PrintedDataWait w = s.data_wait();
  EXPECT_EQ(w.lines, 3u);
  EXPECT_EQ(w.counted, 2u) << "the first batch carries the start-up";
  EXPECT_NEAR(w.time_s, 0.8, 1e-12);
  EXPECT_NEAR(w.data_s, 0.4, 1e-12);
  ASSERT_TRUE(w.share);
  EXPECT_NEAR(*w.share, 0.5, 1e-12);
  const PrintedThroughput t = s.throughput();
  ASSERT_TRUE(t.samples_per_s);
  EXPECT_NEAR(*t.samples_per_s, 256 / 0.4, 1e-9) << "the current Time values after the first";
}

TEST(OutputScannerTest, TimmStyleTimeAndDataLinesToo) {
  OutputScanner s("", ThroughputUnit::samples_per_s, 0);
  s.text("Train: 0 [  50/1251 (  4%)]  Loss: 6.91 (6.93)  Time: 0.400s,  640.00/s  (0.450s,  568.89/s)  "
         "LR: 1.000e-05  Data: 0.100 (0.120)",
         1);
  const PrintedDataWait w = s.data_wait();
  ASSERT_TRUE(w.share) << "one line: that line";
  EXPECT_NEAR(*w.share, 0.25, 1e-12);
  EXPECT_EQ(s.throughput().lines, 0u) << "no pattern: no throughput";
}

TEST(OutputScannerTest, NoTimeDataLinesNoShareAndBlankLinesAreNotTheFirst) {
  OutputScanner s(R"(([0-9.]+) samples/s)", ThroughputUnit::samples_per_s, 0);
  s.text("\r\n   \n", 1);
  EXPECT_FALSE(s.first_line_ns());
  s.text("loading data\n", 7);
  EXPECT_EQ(s.first_line_ns(), 7);
  EXPECT_FALSE(s.data_wait().share);
  EXPECT_EQ(s.throughput().lines, 0u);
  EXPECT_FALSE(s.throughput().samples_per_s);
}

}  // namespace
}  // namespace feedscope
