// ThreadWaitProbe on real processes: a Python parent blocked on a multiprocessing queue its child
// writes (a DataLoader's result queue), the same through a thread of its own (pin_memory's), and
// the waits that are no loader's.
#include "sampler/thread_wait.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "tests/support/background_process.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

using testing::BackgroundProcess;
using testing::TempDir;

TEST(BlockedCallTest, ParsesTheCallItsArgumentsAndTheOtherForms) {
  const auto poll = parse_blocked_call("7 0x7ffd1000 0x1 0x1388 0x0 0x0 0x0 0x7ffd0ff0 0x7f0012\n");
  ASSERT_TRUE(poll);
  EXPECT_EQ(poll->number, 7);
  EXPECT_EQ(poll->args[0], 0x7ffd1000u);
  EXPECT_EQ(poll->args[2], 5000u);
  const auto outside = parse_blocked_call("-1 0x7ffd0ff0 0x7f0012\n");
  ASSERT_TRUE(outside);
  EXPECT_EQ(outside->number, -1);
  EXPECT_FALSE(parse_blocked_call("running\n"));
  EXPECT_FALSE(parse_blocked_call("7 0x1 zz"));
}

TEST(BlockedCallTest, ChannelInodesOfPipesAndSocketsOnly) {
  EXPECT_EQ(channel_inode("pipe:[4242]"), 4242u);
  EXPECT_EQ(channel_inode("socket:[7]"), 7u);
  EXPECT_FALSE(channel_inode("/dev/null"));
  EXPECT_FALSE(channel_inode("anon_inode:[eventpoll]"));
  EXPECT_FALSE(channel_inode("pipe:[x]"));
}

// A Python program started for a test: it prints "ready" once in the state looked at.
class Program {
 public:
  explicit Program(const std::string& code) {
    {
      std::ofstream(dir_ / "program.py") << code;
    }
    process_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{"/usr/bin/python3", (dir_ / "program.py").string()},
        (dir_ / "log").string());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (process_->log().find("ready") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline && process_->running())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ready_ = process_->log().find("ready") != std::string::npos;
  }
  bool ready() const { return ready_; }
  int pid() const { return process_->pid(); }
  std::string log() const { return process_->log(); }
  // Its children, from /proc (the forked queue writer).
  std::vector<int> children() const {
    std::ifstream in("/proc/" + std::to_string(pid()) + "/task/" + std::to_string(pid()) + "/children");
    std::vector<int> out;
    for (int c; in >> c;) out.push_back(c);
    return out;
  }

 private:
  TempDir dir_;
  std::unique_ptr<BackgroundProcess> process_;
  bool ready_ = false;
};

// Looks 40 times, 5 ms apart, once the program has had a moment to block.
MainThreadWaits looks(const Program& p, const std::vector<int>& descendants, std::string* why) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ThreadWaitProbe probe(ProcFs{});
  MainThreadWaits w;
  for (int i = 0; i < 40; ++i) {
    add_look(w, probe.look(p.pid(), descendants));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  *why = probe.why_not();
  return w;
}

constexpr const char* kQueueWriter = R"(
import multiprocessing as mp, time
def worker(q):
    time.sleep(600)
if __name__ == "__main__":
    mp.set_start_method("fork")
    q = mp.Queue()
    p = mp.Process(target=worker, args=(q,), daemon=True)
    p.start()
)";

TEST(ThreadWaitProbeTest, ATrainingThreadBlockedOnItsWorkersQueueIsWaitingForData) {
  Program p(std::string(kQueueWriter) + R"(
    print("ready", flush=True)
    q.get()
)");
  ASSERT_TRUE(p.ready()) << p.log();
  const std::vector<int> workers = p.children();
  ASSERT_FALSE(workers.empty());
  std::string why;
  const MainThreadWaits w = looks(p, workers, &why);
  EXPECT_EQ(w.looks, 40u) << why;
  EXPECT_GE(w.loader_queue, 36u) << "running " << w.running << ", other " << w.other_wait;
  // The same pipe held by nobody the probe is told of is no loader's.
  ThreadWaitProbe probe(ProcFs{});
  EXPECT_EQ(probe.look(p.pid(), {}), MainThreadState::other_wait);
}

TEST(ThreadWaitProbeTest, AWaitThroughAThreadThatReadsTheQueueIsWaitingForData) {
  Program p(std::string(kQueueWriter) + R"(
    import queue, threading
    out = queue.Queue()
    def pin_loop():
        while True:
            try:
                out.put(q.get(timeout=5.0))
            except queue.Empty:
                pass
    threading.Thread(target=pin_loop, daemon=True).start()
    print("ready", flush=True)
    out.get()
)");
  ASSERT_TRUE(p.ready()) << p.log();
  std::string why;
  const MainThreadWaits w = looks(p, p.children(), &why);
  EXPECT_EQ(w.looks, 40u) << why;
  EXPECT_GE(w.loader_thread, 36u) << "queue " << w.loader_queue << ", other " << w.other_wait;
}

TEST(ThreadWaitProbeTest, AWaitForABusyThreadOrASleepIsNoLoaders) {
  Program busy_thread(std::string(kQueueWriter) + R"(
    import threading, time
    def spin():
        end = time.time() + 600
        while time.time() < end:
            pass
    t = threading.Thread(target=spin, daemon=True)
    t.start()
    print("ready", flush=True)
    t.join()
)");
  ASSERT_TRUE(busy_thread.ready()) << busy_thread.log();
  std::string why;
  MainThreadWaits w = looks(busy_thread, busy_thread.children(), &why);
  EXPECT_EQ(w.on_loader(), 0u) << why;

  Program sleeper(std::string(kQueueWriter) + R"(
    import time
    print("ready", flush=True)
    time.sleep(600)
)");
  ASSERT_TRUE(sleeper.ready()) << sleeper.log();
  w = looks(sleeper, sleeper.children(), &why);
  EXPECT_EQ(w.looks, 40u) << why;
  EXPECT_EQ(w.other_wait, 40u);
}

TEST(ThreadWaitProbeTest, ABusyMainThreadIsRunning) {
  Program p(R"(
import time
print("ready", flush=True)
end = time.time() + 600
while time.time() < end:
    pass
)");
  ASSERT_TRUE(p.ready()) << p.log();
  std::string why;
  const MainThreadWaits w = looks(p, {}, &why);
  EXPECT_EQ(w.looks, 40u) << why;
  // On a loaded machine it waits for a core at times: runnable, still counted as running.
  EXPECT_EQ(w.on_loader(), 0u);
  EXPECT_GE(w.running, 20u);
}

TEST(ThreadWaitProbeTest, AProcessThatIsGoneIsUnreadableWithTheReason) {
  ThreadWaitProbe probe(ProcFs{});
  EXPECT_EQ(probe.look(999999999, {}), MainThreadState::unreadable);
  EXPECT_NE(probe.why_not().find("is gone"), std::string::npos) << probe.why_not();
}

}  // namespace
}  // namespace feedscope
