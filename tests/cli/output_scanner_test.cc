#include "cli/output_scanner.h"

#include <gtest/gtest.h>

#include "cli/config.h"

#include <cstdio>

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
  const PrintedThroughput t = s.throughput();
  ASSERT_TRUE(t.samples_per_s) << "no pattern: timm's own rate, a known format";
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 640.0);
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

// The progress lines read without a flag.
OutputScanner known(std::int64_t batch_size = 0) { return OutputScanner("", ThroughputUnit::samples_per_s, batch_size); }

// torchvision's reference trainer times `img/s:` from after the batch arrived: an input-bound
// loop's img/s is its step's speed. The loop's is `time:`, the whole iteration.
TEST(KnownFormatsTest, TorchvisionMetricLoggerGivesItsTimeNotItsImgPerSecondAndTheDataColumn) {
  OutputScanner s = known(128);
  // Its 20-batch means: the lines before the 20th batch of an epoch hold its first.
  s.text("Epoch: [0]  [   0/1251]  eta: 2:10:37  lr: 0.1  img/s: 12.0  loss: 6.9 (6.9)  acc1: 0.0 (0.0)  "
         "time: 6.2500  data: 6.0000  max mem: 1234", 1);
  s.text("Epoch: [0]  [  10/1251]  eta: 0:12:37  lr: 0.1  img/s: 200.0  loss: 6.9 (6.9)  acc1: 0.0 (0.0)  "
         "time: 1.5000  data: 1.2000  max mem: 1234", 2);
  s.text("Epoch: [0]  [  20/1251]  eta: 0:10:37  lr: 0.1  img/s: 241.0  loss: 6.9 (6.9)  acc1: 0.0 (0.0)  "
         "time: 1.0000  data: 0.5000  max mem: 1234", 3);
  s.text("Epoch: [0]  [  30/1251]  eta: 0:10:30  lr: 0.1  img/s: 259.0  loss: 6.8 (6.9)  acc1: 0.0 (0.0)  "
         "time: 1.0000  data: 0.4000  max mem: 1234", 4);
  const PrintedThroughput t = s.throughput();
  EXPECT_EQ(t.lines, 4u);
  ASSERT_TRUE(t.samples_per_s);
  ASSERT_TRUE(t.iterations_per_s);
  EXPECT_DOUBLE_EQ(*t.iterations_per_s, 1.0) << "the mean of the lines past the start-up";
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 128.0) << "x the command line's batch size, not img/s's 250";
  EXPECT_NE(t.source.find("torchvision MetricLogger `time: S  data: S` (20-batch means), 4 lines"),
            std::string::npos) << t.source;
  EXPECT_NE(t.source.find("2 lines past the start-up"), std::string::npos) << t.source;
  const PrintedDataWait w = s.data_wait();
  EXPECT_EQ(w.lines, 4u);
  EXPECT_EQ(w.counted, 2u);
  ASSERT_TRUE(w.share);
  EXPECT_NEAR(*w.share, 0.45, 1e-12);
  EXPECT_NE(w.columns.find("MetricLogger"), std::string::npos);
}

TEST(KnownFormatsTest, MetricLoggerWithoutImgPerSecondGivesItsTimeAndTabsAsDelimiters) {
  OutputScanner s = known(32);
  s.text("Epoch: [0]\t[ 0/50]\teta: 0:01:40\tlr: 0.02\tloss: 2.1 (2.1)\ttime: 2.0000\tdata: 1.9000", 1);
  s.text("Epoch: [0]\t[10/50]\teta: 0:00:20\tlr: 0.02\tloss: 2.0 (2.1)\ttime: 0.5000\tdata: 0.1000", 2);
  const PrintedThroughput t = s.throughput();
  ASSERT_TRUE(t.iterations_per_s);
  EXPECT_DOUBLE_EQ(*t.iterations_per_s, 2.0) << "no line past the 20th batch: the lines after the first";
  ASSERT_TRUE(t.samples_per_s);
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 64.0);
  EXPECT_NE(t.source.find("batch size 32 from --batch-size"), std::string::npos) << t.source;
  EXPECT_NEAR(*s.data_wait().share, 0.2, 1e-12);
}

TEST(KnownFormatsTest, TheCropSizeIsReadFromTheCommandLineInEitherSpelling) {
  const auto crop = image_size_in_command(
      {"torchrun", "train.py", "--train-crop-size", "128", "-b", "32", "--", "--image-size", "7"});
  ASSERT_TRUE(crop);
  EXPECT_EQ(crop->value, 128);
  EXPECT_EQ(crop->flag, "--train-crop-size 128") << "nothing after -- is the script's";
  EXPECT_EQ(image_size_in_command({"python", "t.py", "--img_size=160"})->value, 160);
  EXPECT_FALSE(image_size_in_command({"python", "t.py", "--image-size", "big"}));
  EXPECT_FALSE(image_size_in_command({"python", "t.py", "--size", "64"})) << "not a known name";
}

TEST(KnownFormatsTest, ImageNetTimeGivesSamplesPerSecondOnlyWithABatchSize) {
  const std::vector<std::string> command = {"python3", "main.py", "-a", "resnet18", "-b", "64", "/data"};
  const std::optional<CommandBatchSize> batch = batch_size_in_command(command);
  ASSERT_TRUE(batch);
  OutputScanner s("", ThroughputUnit::samples_per_s, *batch);
  s.text("Epoch: [0][  0/100]\tTime  5.000 ( 5.000)\tData  4.800 ( 4.800)\tLoss 6.9e+00 (6.9e+00)", 1);
  s.text("Epoch: [0][ 10/100]\tTime  0.500 ( 0.950)\tData  0.300 ( 0.700)\tLoss 6.8e+00 (6.9e+00)", 2);
  s.text("Epoch: [0][ 20/100]\tTime  0.300 ( 0.700)\tData  0.100 ( 0.500)\tLoss 6.7e+00 (6.8e+00)", 3);
  const PrintedThroughput t = s.throughput();
  ASSERT_TRUE(t.samples_per_s);
  EXPECT_NEAR(*t.samples_per_s, 64 / 0.4, 1e-9);
  EXPECT_NE(t.source.find("ImageNet"), std::string::npos) << t.source;
  EXPECT_NE(t.source.find("batch size 64 from -b 64"), std::string::npos) << t.source;
  EXPECT_NEAR(*s.data_wait().share, 0.5, 1e-12);

  OutputScanner unsized = known();
  unsized.text("Epoch: [0][ 10/100]\tTime  0.500 ( 0.950)\tData  0.300 ( 0.700)", 1);
  EXPECT_FALSE(unsized.throughput().samples_per_s) << "256 is main.py's default, never assumed";
  EXPECT_DOUBLE_EQ(*unsized.throughput().iterations_per_s, 2.0);
  EXPECT_NE(unsized.throughput().source.find("samples/s not measured"), std::string::npos);
}

TEST(KnownFormatsTest, NanoGptMillisecondsPerIterationTimesItsBatchAndAccumulation) {
  const std::vector<std::string> command = {"python", "train.py", "config/train_shakespeare_char.py",
                                            "--batch_size=12", "--compile=False"};
  OutputScanner s("", ThroughputUnit::samples_per_s, *batch_size_in_command(command));
  s.text("iter 0: loss 4.2874, time 14011.43ms, mfu -100.00%", 1);  // compiling
  s.text("iter 10: loss 3.2417, time 10.00ms, mfu 12.30%", 2);
  s.text("iter 20: loss 2.7913, time 30.00ms, mfu 12.41%", 3);
  s.text("step 250: train loss 1.9670, val loss 2.0656", 4);
  const PrintedThroughput t = s.throughput();
  EXPECT_EQ(t.lines, 3u);
  ASSERT_TRUE(t.iterations_per_s);
  EXPECT_DOUBLE_EQ(*t.iterations_per_s, 50.0);
  ASSERT_TRUE(t.samples_per_s);
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 600.0);
  EXPECT_NE(t.source.find("nanoGPT `iter N: loss L, time Xms`, 3 lines"), std::string::npos) << t.source;
  EXPECT_NE(t.source.find("batch size 12 from --batch_size=12"), std::string::npos) << t.source;
  EXPECT_NE(t.source.find("gradient_accumulation_steps is not on the command line"), std::string::npos);

  OutputScanner accumulated("", ThroughputUnit::samples_per_s,
                            *batch_size_in_command({"python", "train.py", "--batch_size=12",
                                                    "--gradient_accumulation_steps=40"}));
  accumulated.text("iter 10: loss 3.2417, time 100.00ms, mfu 12.30%", 1);
  EXPECT_DOUBLE_EQ(*accumulated.throughput().samples_per_s, 10 * 12 * 40.0);
}

TEST(KnownFormatsTest, WordLanguageModelMillisecondsPerBatch) {
  OutputScanner s("", ThroughputUnit::samples_per_s, *batch_size_in_command({"python", "main.py", "--batch_size", "20"}));
  s.text("| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 30.00 | loss  7.01 | ppl  1103.31", 1);
  s.text("| epoch   1 |   400/ 2983 batches | lr 20.00 | ms/batch 20.00 | loss  6.27 | ppl   528.25", 2);
  s.text("| end of epoch   1 | time: 72.33s | valid loss  5.64 | valid ppl   281.62", 3);
  const PrintedThroughput t = s.throughput();
  EXPECT_EQ(t.lines, 2u);
  EXPECT_DOUBLE_EQ(*t.iterations_per_s, 50.0);
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 1000.0);
  EXPECT_NE(t.source.find("batch size 20 from --batch_size 20"), std::string::npos) << t.source;
}

TEST(KnownFormatsTest, TqdmRatesInTheirUnitsAndTheLastIsTheRunningFigure) {
  OutputScanner s = known();
  s.text("  0%|          | 0/100 [00:00<?, ?it/s]\r 10%|#         | 10/100 [00:01<00:09, 9.87it/s]"
         "\r 20%|##        | 20/100 [00:02<00:08, 12.34it/s, loss=0.5]", 1);
  EXPECT_DOUBLE_EQ(*s.throughput().iterations_per_s, 12.34);
  EXPECT_FALSE(s.throughput().samples_per_s);
  s.text(" 21/100 [00:09<09:00, 1.25s/it]", 2);
  EXPECT_DOUBLE_EQ(*s.throughput().iterations_per_s, 0.8) << "tqdm's s/it below 1 it/s";

  OutputScanner images = known();
  images.text("train: 100%|##########| 50/50 [00:10<00:00, 1.23kimg/s]", 1);
  EXPECT_DOUBLE_EQ(*images.throughput().samples_per_s, 1230.0);
  OutputScanner tokens = known();
  tokens.text(" 5/10 [00:05<00:05, 812.50tokens/s]", 1);
  EXPECT_DOUBLE_EQ(*tokens.throughput().tokens_per_s, 812.5);
  EXPECT_FALSE(tokens.throughput().samples_per_s) << "a token is no sample";
}

TEST(KnownFormatsTest, ExplicitSamplesPerSecondAndTheMostPrintedFormatWins) {
  OutputScanner s = known();
  s.text("epoch 0 step 10: 100.0 samples/s", 1);
  s.text("epoch 0 step 20: throughput=300.0 img/s", 2);
  s.text("epoch 0 step 30: 500.0 images/sec", 3);
  s.text(" 9/100 [00:04<00:30, 3.00it/s]", 4);
  const PrintedThroughput t = s.throughput();
  EXPECT_EQ(t.lines, 3u);
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 400.0) << "the mean after the first";
  EXPECT_NE(t.source.find("`N samples/s`"), std::string::npos) << t.source;
  OutputScanner tok = known();
  tok.text("step 5 | 51234 tokens/s", 1);
  EXPECT_DOUBLE_EQ(*tok.throughput().tokens_per_s, 51234.0);
}

TEST(KnownFormatsTest, SecondsPerBatchAndBatchesPerSecondOfHandWrittenLoops) {
  OutputScanner s("", ThroughputUnit::samples_per_s, *batch_size_in_command({"python", "t.py", "--batch-size", "32"}));
  s.text("step 1/120 | 0.900 s/batch | loss 2.3025", 1);  // the first: start-up, left out
  s.text("step 2/120 | 0.100 s/batch | loss 2.3011", 2);
  s.text("step 3/120 | 0.300 s/batch | loss 2.2990", 3);
  PrintedThroughput t = s.throughput();
  EXPECT_EQ(t.lines, 3u);
  EXPECT_DOUBLE_EQ(*t.iterations_per_s, 5.0) << "0.2 s/batch, the mean after the first";
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 160.0);
  EXPECT_NE(t.source.find("`N s/batch`"), std::string::npos) << t.source;

  OutputScanner ms = known();
  ms.text("epoch 0 | 40.0 ms/step", 1);
  ms.text("epoch 0 | 50.0 ms/step", 2);
  EXPECT_DOUBLE_EQ(*ms.throughput().iterations_per_s, 20.0);
  OutputScanner rate = known();
  rate.text("train: 12.5 batches/s", 1);
  rate.text("train: 12.5 batches/sec", 2);
  EXPECT_DOUBLE_EQ(*rate.throughput().iterations_per_s, 12.5);
  EXPECT_FALSE(rate.throughput().samples_per_s) << "no batch size";
}

TEST(KnownFormatsTest, NearMissesAreNotRead) {
  OutputScanner s = known(16);
  for (const char* line : {
           "Epoch: [0]  [  20/1251]  eta: 0:10:37  time: n/a  data: 0.4921",   // time: but no number
           "Epoch: [0]  [  20/1251]  eta: 0:10:37  img/s: fast",                // img/s: but no number
           "loading data: /data/imagenet/train (1281167 images)",               // data: in prose
           "time: 12.5 data: 3.1",                                              // no MetricLogger head
           "Time to first batch 3.2 s; Data root /data",                       // prose with Time/Data
           "iteration 10: loss 2.3, time 10ms",                                 // not nanoGPT's `iter N:`
           "iter 10: loss 2.3, time 10s",                                       // seconds, not ms
           "| epoch   1 |   200/ 2983 batches | ms/batch ? |",                  // no number
           "lr 0.1  img/s: 241.3",                                              // img/s: without its head
           "the target is 100 samples/sec/gpu",                                 // samples/sec/gpu
           "  0%|          | 0/100 [00:00<?, ?it/s]",                          // tqdm's first draw
           "processed 10 it/s? not a bar",                                      // it/s outside tqdm's [..]
           "took 3 s/it on average",                                            // s/it outside tqdm's [..]
           "the budget is 2 s/batch/gpu",                                       // s/batch/gpu
           "12 batches/s/worker",                                               // batches/s/worker
       })
    s.text(line, 1);
  EXPECT_EQ(s.throughput().lines, 0u) << s.throughput().source;
  EXPECT_FALSE(s.throughput().samples_per_s);
  EXPECT_FALSE(s.throughput().iterations_per_s);
  EXPECT_FALSE(s.throughput().tokens_per_s);
  EXPECT_EQ(s.data_wait().lines, 0u);
  EXPECT_FALSE(s.data_wait().share);
}

TEST(KnownFormatsTest, APatternOverridesTheKnownFormats) {
  OutputScanner s(R"(speed ([0-9.]+))", ThroughputUnit::samples_per_s, 0);
  s.text("iter 10: loss 3.2417, time 10.00ms, mfu 12.30% speed 77", 1);
  s.text("Epoch: [0]  [  20/1251]  eta: 0:10:37  img/s: 241.0  time: 1.0000  data: 0.4000", 2);
  const PrintedThroughput t = s.throughput();
  EXPECT_EQ(t.lines, 1u);
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 77.0);
  EXPECT_NE(t.source.find("--throughput-pattern"), std::string::npos);
  EXPECT_NEAR(*s.data_wait().share, 0.4, 1e-12) << "its data: column is read all the same";
}

TEST(CommandBatchSizeTest, ReadsTheUsualFlagsAndNothingElse) {
  EXPECT_EQ(batch_size_in_command({"python", "main.py", "-b", "64"})->flag, "-b 64");
  EXPECT_EQ(batch_size_in_command({"python", "main.py", "--batch-size", "32"})->batch_size, 32);
  EXPECT_EQ(batch_size_in_command({"python", "main.py", "--batch-size=48"})->batch_size, 48);
  EXPECT_EQ(batch_size_in_command({"python", "train.py", "--batch_size=12"})->flag, "--batch_size=12");
  EXPECT_FALSE(batch_size_in_command({"python", "main.py", "-b", "auto"}));
  EXPECT_FALSE(batch_size_in_command({"python", "main.py", "-b", "0"}));
  EXPECT_FALSE(batch_size_in_command({"python", "main.py", "--batch-sizes=3"}));
  EXPECT_FALSE(batch_size_in_command({"python", "main.py", "-b"}));
  EXPECT_FALSE(batch_size_in_command({"python", "main.py", "--", "-b", "8"})) << "another program's";
  const auto nano = batch_size_in_command({"train.py", "--gradient_accumulation_steps=4", "--batch_size=8"});
  ASSERT_TRUE(nano);
  EXPECT_EQ(nano->accumulation, 4);
  EXPECT_EQ(nano->accumulation_flag, "--gradient_accumulation_steps=4");
}

// Programs that count their progress (cli/progress_counters.h), their own lines at the commits
// tests/cli/progress_counters_test.cc names; the scanner times them on arrival (ns below).
constexpr std::int64_t kSecond = 1'000'000'000;

TEST(CounterFormatsTest, MnistCountsSamplesWithoutABatchSizeAndSaysSo) {
  OutputScanner s = known();
  s.text("Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.299824", 0);
  s.text("Train Epoch: 1 [640/60000 (1%)]\tLoss: 1.737213", kSecond / 2);
  s.text("Train Epoch: 1 [1280/60000 (2%)]\tLoss: 0.839367", kSecond);
  const PrintedThroughput t = s.throughput();
  EXPECT_EQ(t.lines, 3u);
  ASSERT_TRUE(t.samples_per_s);
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 1280.0);
  EXPECT_FALSE(t.iterations_per_s) << "batches not known without a batch size";
  EXPECT_NE(t.source.find("pytorch/examples `[N/TOTAL (P%)]`"), std::string::npos) << t.source;
  EXPECT_NE(t.source.find("timed on arrival"), std::string::npos) << t.source;
  EXPECT_NE(t.source.find("a line every 640 samples"), std::string::npos) << t.source;
  // With mnist's --batch-size 64: batches too, and the counter's step is 10 of them.
  OutputScanner sized("", ThroughputUnit::samples_per_s, *batch_size_in_command({"python", "main.py", "--batch-size", "64"}));
  sized.text("Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.299824", 0);
  sized.text("Train Epoch: 1 [640/60000 (1%)]\tLoss: 1.737213", kSecond / 2);
  sized.text("Train Epoch: 1 [1280/60000 (2%)]\tLoss: 0.839367", kSecond);
  EXPECT_DOUBLE_EQ(*sized.throughput().iterations_per_s, 20.0);
  EXPECT_NE(sized.throughput().source.find("10 batches of 64"), std::string::npos) << sized.throughput().source;
}

TEST(CounterFormatsTest, SuperResolutionCountsBatchesTimesItsBatchSizeFlag) {
  const std::vector<std::string> command = {"python", "main.py", "--upscale_factor", "3", "--batchSize", "4"};
  OutputScanner s("", ThroughputUnit::samples_per_s, *batch_size_in_command(command));
  s.text("===> Loading datasets", 0);
  for (int i = 1; i <= 5; ++i) s.text("===> Epoch[1](" + std::to_string(i) + "/13): Loss: 0.0421", i * kSecond / 4);
  const PrintedThroughput t = s.throughput();
  EXPECT_DOUBLE_EQ(*t.iterations_per_s, 4.0);
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 16.0);
  EXPECT_NE(t.source.find("batch size 4 from --batchSize 4"), std::string::npos) << t.source;
  OutputScanner unsized = known();
  for (int i = 1; i <= 5; ++i) unsized.text("===> Epoch[1](" + std::to_string(i) + "/13): Loss: 0.0421", i * kSecond / 4);
  EXPECT_FALSE(unsized.throughput().samples_per_s);
  EXPECT_NE(unsized.throughput().source.find("samples/s not measured: no batch size"), std::string::npos);
}

TEST(CounterFormatsTest, KerasThreeColouredBarIsReadFromItsCounterNotItsWholeMilliseconds) {
  // keras/src/utils/progbar.py (015af23): `\x1b[1m{current}/{target}\x1b[0m ` then the bar in
  // colour, then the ETA and `Nms/step`, each redraw after backspaces and a carriage return.
  OutputScanner s = known(32);
  for (int i = 1; i <= 6; ++i) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "\b\b\b\r\x1b[1m%4d/1875\x1b[0m \x1b[32m\xE2\x94\x81\x1b[0m\x1b[37m\xE2\x94\x81\xE2\x94\x81\x1b[0m "
                  "\x1b[1m3s\x1b[0m 2ms/step - accuracy: 0.8125 - loss: 0.6230",
                  100 * i);
    s.text(line, i * kSecond / 4);
  }
  const PrintedThroughput t = s.throughput();
  EXPECT_DOUBLE_EQ(*t.iterations_per_s, 400.0) << t.source;
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 12800.0);
  EXPECT_NE(t.source.find("Keras"), std::string::npos) << t.source;
}

TEST(CounterFormatsTest, LightningsBarIsTqdms) {
  // Lightning's TQDMProgressBar (03f57f9): desc `Epoch N`, its metrics as tqdm's postfix.
  OutputScanner s = known(32);
  s.text("Epoch 0:  45%|\xE2\x96\x88\xE2\x96\x88\xE2\x96\x88\xE2\x96\x88\xE2\x96\x8C     | 9/20 [00:01<00:01,  7.52it/s, v_num=0, train_loss=0.500]", 1);
  EXPECT_DOUBLE_EQ(*s.throughput().iterations_per_s, 7.52);
  EXPECT_NE(s.throughput().source.find("tqdm"), std::string::npos);
}

TEST(CounterFormatsTest, HfTrainerStepsAreItsBatchTimesItsAccumulation) {
  // transformers' ProgressCallback (55093b7): tqdm(total=max_steps), and its logs written with it.
  const std::vector<std::string> command = {"python", "run_glue.py", "--per_device_train_batch_size", "16",
                                            "--gradient_accumulation_steps", "2"};
  OutputScanner s("", ThroughputUnit::samples_per_s, *batch_size_in_command(command));
  s.text("  8%|\xE2\x96\x8A         | 40/500 [00:10<01:55,  3.98it/s]", 1);
  s.text("{'loss': 2.3052, 'grad_norm': 1.8431, 'learning_rate': 4.9e-05, 'epoch': 0.08}", 2);
  s.text(" 10%|\xE2\x96\x88         | 50/500 [00:12<01:53,  4.00it/s]", 3);
  const PrintedThroughput t = s.throughput();
  EXPECT_DOUBLE_EQ(*t.iterations_per_s, 4.0);
  EXPECT_DOUBLE_EQ(*t.samples_per_s, 4.0 * 16 * 2);
  EXPECT_NE(t.source.find("HF Trainer (1 `{'loss': ..., 'epoch': E}` log) with its tqdm"), std::string::npos) << t.source;
  EXPECT_NE(t.source.find("x 2 micro-batches from --gradient_accumulation_steps 2"), std::string::npos) << t.source;
}

TEST(CounterFormatsTest, AKnownFigureOutranksACounterOnTheSameLine) {
  // pytorch/examples' ImageNet `[ 10/5005]` is a counter too; its Time column is the figure.
  OutputScanner s = known(64);
  s.text("Epoch: [0][ 10/5005]\tTime  0.500 ( 0.561)\tData  0.301 ( 0.320)\tLoss 6.9e+00 (6.9e+00)", 0);
  s.text("Epoch: [0][ 20/5005]\tTime  0.500 ( 0.561)\tData  0.301 ( 0.320)\tLoss 6.9e+00 (6.9e+00)", 5 * kSecond);
  s.text("Epoch: [0][ 30/5005]\tTime  0.500 ( 0.561)\tData  0.301 ( 0.320)\tLoss 6.9e+00 (6.9e+00)", 10 * kSecond);
  EXPECT_DOUBLE_EQ(*s.throughput().iterations_per_s, 2.0);
  EXPECT_NE(s.throughput().source.find("ImageNet"), std::string::npos);
}

TEST(CounterFormatsTest, ARepeatingLineGivesLinesPerSecondAndNamesTheLine) {
  OutputScanner s = known(64);
  for (int i = 0; i < 6; ++i)
    s.text("Rank 1 training batch " + std::to_string(5 * i) + " loss 2.30" + std::to_string(9 - i), 2 * kSecond + i * kSecond / 2);
  const PrintedThroughput t = s.throughput();
  ASSERT_TRUE(t.lines_per_s);
  EXPECT_DOUBLE_EQ(*t.lines_per_s, 2.0);
  EXPECT_FALSE(t.samples_per_s) << "a line is no sample";
  EXPECT_FALSE(t.iterations_per_s);
  EXPECT_NE(t.source.find("`Rank # training batch # loss #` repeats steadily"), std::string::npos) << t.source;
  EXPECT_NE(t.source.find("the unit is lines"), std::string::npos) << t.source;
}

TEST(KnownFormatsTest, EachIsListedWithItsPattern) {
  EXPECT_GE(known_formats().size(), 8u);
  for (const KnownFormat& f : known_formats()) {
    EXPECT_FALSE(f.name.empty());
    EXPECT_NO_THROW(std::regex(std::string(f.pattern))) << f.name;
  }
}

}  // namespace
}  // namespace feedscope
