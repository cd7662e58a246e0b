// The lines below are the programs' own, as their source at the pinned commit prints them:
// pytorch/examples 76f01205d6fa998227c337ba5dafe052b3b17d55 (mnist/main.py:47,
// mnist_hogwild/train.py:35, super_resolution/main.py:66, fast_neural_style/neural_style/
// neural_style.py:102, dcgan/main.py:267, distributed/minGPT-ddp/mingpt/trainer.py:121,
// distributed/rpc/parameter_server/rpc_parameter_server.py:181, mnist_forward_forward/main.py:85),
// keras-team/keras 01fb027aec9110e2af280ef89259e65e56cf330a (Keras 2.2, keras/utils/generic_utils.py
// Progbar) and 015af23047f9933534b7e0e3281a945ecc6e25a4 (Keras 3, keras/src/utils/progbar.py).
#include "cli/progress_counters.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <regex>

namespace feedscope {
namespace {

std::int64_t at(double s) { return static_cast<std::int64_t>(s * 1e9); }

// Feeds each line as the scanner would: a counter where a format reads one, else the fallback.
void feed(ProgressCounters& c, std::string_view line, double t) {
  if (const auto m = match_counters(line)) c.add(*m, at(t));
  else c.other(line, at(t));
}

TEST(ProgressCountersTest, MnistSamplesCounterOverItsLinesArrivalLeavingOutTheTestBetweenEpochs) {
  ProgressCounters c;
  // print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(epoch, batch_idx * len(data), ...))
  feed(c, "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.299824", 0.0);
  feed(c, "Train Epoch: 1 [640/60000 (1%)]\tLoss: 1.737213", 0.5);
  feed(c, "Train Epoch: 1 [1280/60000 (2%)]\tLoss: 0.839367", 1.0);
  feed(c, "Test set: Average loss: 0.0473, Accuracy: 9842/10000 (98%)", 3.0);  // 2 s of testing
  feed(c, "Train Epoch: 2 [0/60000 (0%)]\tLoss: 0.060371", 4.0);
  feed(c, "Train Epoch: 2 [640/60000 (1%)]\tLoss: 0.041276", 4.5);
  const auto r = c.counter_rate();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->unit, CounterUnit::samples);
  EXPECT_EQ(r->lines, 5u);
  EXPECT_EQ(r->step, 640);
  EXPECT_NEAR(r->timed_s, 1.5, 1e-9) << "the gaps between epochs are not training";
  EXPECT_NEAR(r->per_s, 1280.0, 1e-9);
  EXPECT_NE(r->format.find("[N/TOTAL (P%)]"), std::string::npos) << r->format;
}

TEST(ProgressCountersTest, HogwildProcessesCountedApartAndAddedUp) {
  ProgressCounters c;
  // print('{}\tTrain Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(pid, epoch, ...)), two processes
  for (int i = 0; i < 21; ++i) {
    feed(c, "812\tTrain Epoch: 1 [" + std::to_string(640 * i) + "/60000 (" + std::to_string(i) + "%)]\tLoss: 1.0", i * 1.0);
    feed(c, "813\tTrain Epoch: 1 [" + std::to_string(640 * i) + "/60000 (" + std::to_string(i) + "%)]\tLoss: 1.0", i * 1.0 + 0.5);
  }
  const auto r = c.counter_rate();
  ASSERT_TRUE(r);
  // Each process 640 samples/s; together 2 x 12800 samples over the 20.5 s either of them ran.
  EXPECT_NEAR(r->per_s, 2 * 12800 / 20.5, 1e-6);
}

TEST(ProgressCountersTest, SuperResolutionCountsBatchesInParentheses) {
  ProgressCounters c;
  // print("===> Epoch[{}]({}/{}): Loss: {:.4f}".format(epoch, iteration, len(training_data_loader), ...))
  for (int i = 1; i <= 13; ++i)
    feed(c, "===> Epoch[1](" + std::to_string(i) + "/13): Loss: 0.0421", 0.25 * i);
  feed(c, "===> Epoch 1 Complete: Avg. Loss: 0.0512", 3.4);
  feed(c, "===> Avg. PSNR: 11.2817 dB", 5.0);
  for (int i = 1; i <= 3; ++i)
    feed(c, "===> Epoch[2](" + std::to_string(i) + "/13): Loss: 0.0311", 6.0 + 0.25 * i);
  const auto r = c.counter_rate();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->unit, CounterUnit::batches);
  EXPECT_EQ(r->step, 1) << "a line every batch";
  EXPECT_NEAR(r->per_s, 4.0, 1e-9);
}

TEST(ProgressCountersTest, FastNeuralStyleCountsSamplesAndItsTimestampIsNoCounter) {
  ProgressCounters c(4);
  // mesg = "{}\tEpoch {}:\t[{}/{}]\tcontent: {:.6f}\tstyle: {:.6f}\ttotal: {:.6f}".format(time.ctime(),
  // e + 1, count, len(train_dataset), ...) every --log-interval batches of --batch-size 4
  feed(c, "Mon Nov 27 10:00:01 2026\tEpoch 1:\t[40/5000]\tcontent: 1.234567\tstyle: 9.876543\ttotal: 11.111110", 10.0);
  feed(c, "Mon Nov 27 10:00:21 2026\tEpoch 1:\t[80/5000]\tcontent: 1.134567\tstyle: 8.876543\ttotal: 10.011110", 30.0);
  feed(c, "Mon Nov 27 10:00:41 2026\tEpoch 1:\t[120/5000]\tcontent: 1.034567\tstyle: 7.876543\ttotal: 8.911110", 50.0);
  const auto r = c.counter_rate();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->unit, CounterUnit::samples);
  EXPECT_EQ(r->step, 40) << "10 batches of 4 a line";
  EXPECT_NEAR(r->per_s, 2.0, 1e-9);
  EXPECT_NE(r->format.find("fast_neural_style"), std::string::npos) << r->format;
}

TEST(ProgressCountersTest, DcganTheCounterThatGrowsIsTheBatchNotTheEpoch) {
  ProgressCounters c(64);
  // print('[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f' % (epoch, niter, i, ...))
  double t = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int i = 0; i < 10; ++i, t += 0.5)
      feed(c, "[" + std::to_string(epoch) + "/25][" + std::to_string(i) +
                  "/10] Loss_D: 1.2345 Loss_G: 2.3456 D(x): 0.5000 D(G(z)): 0.4000 / 0.3000", t);
    t += 30;  // saving images and a checkpoint between epochs
  }
  const auto r = c.counter_rate();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->unit, CounterUnit::batches);
  EXPECT_NEAR(r->per_s, 2.0, 1e-9) << "the epoch counter's move across the 30 s is no batch";
  EXPECT_NEAR(r->timed_s, 9.0, 1e-9);
}

TEST(ProgressCountersTest, KerasTwoBarInAPipeCountsSamplesWhereTheBatchDividesItsSteps) {
  // Keras 2.2's fit counts samples; its Progbar writes '\n' then '%5d/%d [' ... '] - ETA: ...'
  ProgressCounters samples(32), unsized;
  for (int i = 1; i <= 10; ++i) {
    char line[120];
    std::snprintf(line, sizeof line, "%5d/60000 [..............................] - ETA: 3:07 - loss: 2.2996 - acc: 0.1250",
                  i * 96);
    feed(samples, line, 0.1 * i);
    feed(unsized, line, 0.1 * i);
  }
  ASSERT_TRUE(samples.counter_rate());
  EXPECT_EQ(samples.counter_rate()->unit, CounterUnit::samples);
  EXPECT_NEAR(samples.counter_rate()->per_s, 960.0, 1e-6);
  EXPECT_NE(samples.counter_rate()->unit_basis.find("multiple of the batch size 32"), std::string::npos);
  EXPECT_EQ(unsized.counter_rate()->unit, CounterUnit::batches) << "TF 2 and Keras 3 count steps";
}

TEST(ProgressCountersTest, KerasThreeBarIsReadBeforeItsMillisecondsPerStep) {
  // Keras 3 colours its bar into a pipe too; OutputScanner takes the colours out first.
  const auto m = match_counters("  32/1875 \xE2\x94\x81\xE2\x94\x81\xE2\x94\x81 3s 2ms/step - accuracy: 0.8125 - loss: 0.6230");
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->before_figures);
  EXPECT_EQ(m->counters.at(0).done, 32);
  EXPECT_EQ(m->counters.at(0).total, 1875);
}

TEST(ProgressCountersTest, EpochCountsDatesAndRatiosAreNoCounters) {
  for (const char* line : {"Epoch 1/10", "epoch: [3/90]", "2026/11/27 10:00", "lr 0.1/2", "D(G(z)): 0.4000 / 0.3000"})
    EXPECT_FALSE(match_counters(line)) << line;
  // mnist's test line reads as one, but never pairs up: the loss before it differs each epoch.
  ProgressCounters c;
  feed(c, "Test set: Average loss: 0.0473, Accuracy: 9842/10000 (98%)", 1);
  feed(c, "Test set: Average loss: 0.0401, Accuracy: 9871/10000 (99%)", 2);
  feed(c, "Test set: Average loss: 0.0380, Accuracy: 9880/10000 (99%)", 3);
  EXPECT_FALSE(c.counter_rate());
}

TEST(ProgressCountersTest, ALineRepeatingSteadilyWithAGrowingNumberGivesLines) {
  ProgressCounters c;
  // print(f"Rank {rank} training batch {i} loss {loss.item()}") every 5 batches
  for (int i = 0; i < 8; ++i)
    feed(c, "Rank 1 training batch " + std::to_string(5 * i) + " loss 2.30" + std::to_string(9 - i), 2.0 + 0.5 * i);
  EXPECT_FALSE(c.counter_rate());
  const auto r = c.repeating_line();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->unit, CounterUnit::lines);
  EXPECT_EQ(r->format, "Rank # training batch # loss #");
  EXPECT_NEAR(r->per_s, 2.0, 1e-9);
  EXPECT_EQ(r->lines, 8u);
}

TEST(ProgressCountersTest, ACountThatStartsAgainEachEpochStillRepeats) {
  ProgressCounters c;
  // print(f"[GPU{self.global_rank}] Epoch {epoch} | Iter {iter} | {step_type} Loss {batch_loss:.5f}")
  double t = 0;
  for (int epoch = 0; epoch < 2; ++epoch)
    for (int iter = 0; iter < 1000; iter += 100, t += 1.0)
      feed(c, "[GPU0] Epoch " + std::to_string(epoch) + " | Iter " + std::to_string(iter) + " | Train Loss 2.10000", t);
  ASSERT_TRUE(c.repeating_line());
  EXPECT_NEAR(c.repeating_line()->per_s, 1.0, 1e-9);
}

TEST(ProgressCountersTest, NoRateFromLossLinesBurstsOrTooFewLines) {
  ProgressCounters losses;
  // forward-forward: print("Loss: ", loss.item()) every --log-interval epochs: nothing grows
  for (int i = 0; i < 10; ++i) feed(losses, "Loss:  0.69" + std::to_string(9 - i), i * 0.5);
  EXPECT_FALSE(losses.repeating_line());
  ProgressCounters bursts;  // a line now and then: not steady
  for (double t : {0.0, 0.1, 0.2, 5.0, 5.1, 5.2, 20.0}) feed(bursts, "saved step " + std::to_string(static_cast<int>(t * 10)), t);
  EXPECT_FALSE(bursts.repeating_line());
  ProgressCounters few;
  feed(few, "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.3", 0);
  feed(few, "Train Epoch: 1 [640/60000 (1%)]\tLoss: 2.1", 1);
  EXPECT_FALSE(few.counter_rate()) << "one pair of lines: too few";
}

TEST(ProgressCountersTest, ASamplesCounterStepThatIsNoMultipleOfTheBatchCountsBatches) {
  ProgressCounters c(64);
  for (int i = 0; i < 5; ++i)
    feed(c, "Train Epoch: 1 [" + std::to_string(10 * i) + "/938 (" + std::to_string(i) + "%)]\tLoss: 1.0", i * 1.0);
  ASSERT_TRUE(c.counter_rate());
  EXPECT_EQ(c.counter_rate()->unit, CounterUnit::batches);
  EXPECT_NE(c.counter_rate()->unit_basis.find("no multiple of the batch size 64"), std::string::npos);
}

TEST(ProgressCountersTest, EachFormatIsListedWithItsPattern) {
  EXPECT_EQ(counter_formats().size(), 5u);
  for (const CounterFormat& f : counter_formats()) EXPECT_NO_THROW(std::regex(std::string(f.pattern))) << f.name;
}

}  // namespace
}  // namespace feedscope
