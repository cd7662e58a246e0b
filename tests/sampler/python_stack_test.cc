#include "sampler/python_stack.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include "sampler/detail/cpython_layout.h"
#include "sampler/detail/remote_memory.h"
#include "tests/support/background_process.h"
#include "tests/support/process.h"
#include "tests/support/reference_python.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace python_stack_test {

using namespace std::chrono_literals;
using testing::BackgroundProcess;
using testing::TempDir;

// inner() spins at line 3 or 4, called from outer() at line 6, called from the module at line 7.
constexpr const char* kNest = R"(import sys
def inner():
    while True:
        pass
def outer():
    inner()
outer()
)";

// Names of the frames, innermost first.
std::vector<std::string> names_of(const PythonStack& stack) {
  std::vector<std::string> names;
  for (const PythonFrame& f : stack.frames) names.push_back(f.name);
  return names;
}

std::string describe(const PythonStack& stack) {
  std::string text;
  for (const PythonFrame& f : stack.frames)
    text += "  " + f.qualname + " (" + f.filename + ":" + std::to_string(f.line) + ")\n";
  return text;
}

bool begins_with(const PythonStack& stack, const std::vector<std::string>& names) {
  const auto got = names_of(stack);
  return got.size() >= names.size() && std::equal(names.begin(), names.end(), got.begin());
}

// A Python program left running, and a reader of it once it is up.
class PythonChild {
 public:
  PythonChild(const std::string& python, const std::vector<std::string>& args)
      : process_(with_python(python, args), (dir_ / "log.txt").string()) {}

  // The first stack that `wanted` accepts, read again (and the reader opened again, while the
  // interpreter starts) until `timeout`; nullopt with the last reason after it.
  std::optional<PythonStack> wait_for(const std::function<bool(const PythonStack&)>& wanted,
                                      std::chrono::seconds timeout = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline && process_.running()) {
      if (!reader_) reader_ = PythonStackReader::open(process_.pid(), &why_);
      if (reader_) {
        auto stack = reader_->read_main_thread(&why_);
        if (stack && wanted(*stack)) return stack;
        if (stack) why_ = "the stack so far:\n" + describe(*stack);
      }
      std::this_thread::sleep_for(20ms);
    }
    why_ += "\nprogram output: " + process_.log();
    return std::nullopt;
  }
  PythonStackReader& reader() { return *reader_; }
  void stop() { process_.stop(); }
  const std::string& why() const { return why_; }
  const std::filesystem::path& dir() const { return dir_.path(); }

 private:
  static std::vector<std::string> with_python(const std::string& python,
                                              std::vector<std::string> args) {
    args.insert(args.begin(), python);
    return args;
  }
  TempDir dir_;
  BackgroundProcess process_;
  std::optional<PythonStackReader> reader_;
  std::string why_;
};

void expect_nest(const PythonStack& stack, const std::string& filename) {
  ASSERT_EQ(stack.frames.size(), 3u) << describe(stack);
  EXPECT_EQ(names_of(stack), (std::vector<std::string>{"inner", "outer", "<module>"}));
  for (const PythonFrame& f : stack.frames) EXPECT_EQ(f.filename, filename);
  EXPECT_TRUE(stack.frames[0].line == 3 || stack.frames[0].line == 4) << stack.frames[0].line;
  EXPECT_EQ(stack.frames[1].line, 6);
  EXPECT_EQ(stack.frames[2].line, 7);
  EXPECT_FALSE(stack.truncated);
  EXPECT_EQ(innermost_frame(stack), &stack.frames[0]);
  EXPECT_FALSE(is_loading_frame(stack));
}

TEST(PythonStackReaderTest, ReadsTheNestOfASpinningFunction) {
  PythonChild child(testing::reference_python(), {"-c", kNest});
  const auto stack = child.wait_for([](const PythonStack& s) { return begins_with(s, {"inner"}); });
  ASSERT_TRUE(stack) << child.why();
  expect_nest(*stack, "<string>");
  std::cout << "[          ] CPython " << child.reader().version() << " at "
            << child.reader().interpreter_path() << ":\n"
            << describe(*stack);
}

TEST(PythonStackReaderTest, ReadsAFunctionAsleepInC) {
  PythonChild child(
      testing::reference_python(),
      {"-c", "import time\ndef nap():\n    time.sleep(600)\ndef outer():\n    nap()\nouter()\n"});
  const auto stack = child.wait_for([](const PythonStack& s) { return begins_with(s, {"nap"}); });
  ASSERT_TRUE(stack) << child.why();
  EXPECT_EQ(names_of(*stack), (std::vector<std::string>{"nap", "outer", "<module>"}));
  EXPECT_EQ(stack->frames[0].line, 3);
}

// Names of latin-1 (é, ç), UCS-2 (δ) and UCS-4 (U+20000) characters, in a file whose path is not
// ASCII either, and a method's qualified name.
TEST(PythonStackReaderTest, NamesBeyondAsciiReadAsUtf8) {
  TempDir dir;
  const auto script = dir.path() / "données" / "script.py";
  std::filesystem::create_directories(script.parent_path());
  std::ofstream(script) << "class Façade:\n    def mé(self):\n        δ()\ndef δ():\n    𠀀()\n"
                           "def 𠀀():\n    while True:\n        pass\nFaçade().mé()\n";
  PythonChild child(testing::reference_python(), {script.string()});
  const auto stack = child.wait_for([](const PythonStack& s) { return begins_with(s, {"𠀀"}); });
  ASSERT_TRUE(stack) << child.why();
  EXPECT_EQ(names_of(*stack), (std::vector<std::string>{"𠀀", "δ", "mé", "<module>"}));
  ASSERT_EQ(stack->frames.size(), 4u);
  EXPECT_EQ(stack->frames[2].qualname, "Façade.mé");
  EXPECT_EQ(stack->frames[0].filename, script.string());
  EXPECT_EQ(stack->frames[3].line, 9);
}

// A frame under a torch/utils/data directory is loading; the user's code it calls is inside it.
TEST(PythonStackReaderTest, AFrameUnderTorchUtilsDataIsLoading) {
  TempDir dir;
  const auto data = dir.path() / "site" / "torch" / "utils" / "data";
  std::filesystem::create_directories(data);
  std::ofstream(data / "fetch_like.py") << "def fetch(get):\n    return get()\n";
  const std::string program = "import sys\nsys.path.insert(0, '" + data.string() +
                              "')\n"
                              "import fetch_like\ndef getitem():\n    while True:\n        pass\n"
                              "def step():\n    fetch_like.fetch(getitem)\nstep()\n";
  PythonChild child(testing::reference_python(), {"-c", program});
  const auto stack =
      child.wait_for([](const PythonStack& s) { return begins_with(s, {"getitem"}); });
  ASSERT_TRUE(stack) << child.why();
  EXPECT_EQ(names_of(*stack), (std::vector<std::string>{"getitem", "fetch", "step", "<module>"}));
  EXPECT_EQ(stack->frames[1].filename, (data / "fetch_like.py").string());
  EXPECT_TRUE(is_loading_frame(*stack));
  EXPECT_EQ(innermost_frame(*stack)->filename, "<string>");
  EXPECT_EQ(innermost_frame(PythonStack{}), nullptr);
  EXPECT_FALSE(is_loading_frame(PythonStack{}));
}

// One read of a stable stack, the cost each sample pays: printed, not asserted.
// torch's own waits (the backward pass, a collective, DDP) are told from the rest by file.
TEST(PythonStackReaderTest, TorchsOwnWaitsAreToldByTheirFiles) {
  PythonStack ddp;
  ddp.frames = {{"/usr/lib/python3/dist-packages/torch/autograd/__init__.py", "backward", "backward", 197},
                {"/usr/lib/python3/dist-packages/torch/_tensor.py", "backward", "Tensor.backward", 487},
                {"/work/train.py", "main", "main", 80}};
  EXPECT_TRUE(is_torch_wait_frame(ddp));
  EXPECT_FALSE(is_loading_frame(ddp));
  PythonStack own;
  own.frames = {{"/usr/lib/python3.11/queue.py", "get", "Queue.get", 171}, {"/work/train.py", "main", "main", 12}};
  EXPECT_FALSE(is_torch_wait_frame(own)) << "a loader of its own: its queue may be a loader's";
  EXPECT_FALSE(is_torch_wait_frame(PythonStack{}));
}

TEST(PythonStackReaderTest, AReadCostsMicroseconds) {
  PythonChild child(testing::reference_python(), {"-c", kNest});
  ASSERT_TRUE(child.wait_for([](const PythonStack& s) { return begins_with(s, {"inner"}); }))
      << child.why();
  constexpr int kReads = 2000;
  int read = 0;
  std::string why;
  PythonStack stack;  // reused, as a sampler would
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kReads; ++i) read += child.reader().read_main_thread(stack, &why) ? 1 : 0;
  const std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(read, kReads) << why;
  std::cout << "[          ] " << spent.count() / kReads << " us per read of a 3-frame stack ("
            << kReads << " reads, CPython " << child.reader().version() << ")\n";
}

TEST(PythonStackReaderTest, TheMainThreadIsReadNotAnotherThatRuns) {
  PythonChild child(testing::reference_python(), {"-c", R"(import threading, time
def worker():
    while True:
        pass
threading.Thread(target=worker, daemon=True).start()
def main_waits():
    time.sleep(600)
main_waits()
)"});
  const auto stack =
      child.wait_for([](const PythonStack& s) { return begins_with(s, {"main_waits"}); });
  ASSERT_TRUE(stack) << child.why();
  EXPECT_EQ(names_of(*stack), (std::vector<std::string>{"main_waits", "<module>"}));
}

// A generator's frame lives in the generator object, not the thread's data stack.
TEST(PythonStackReaderTest, AGeneratorsFrameIsInTheStack) {
  PythonChild child(testing::reference_python(),
                    {"-c",
                     "def spin():\n    while True:\n        pass\n    yield\ndef outer():\n"
                     "    next(spin())\nouter()\n"});
  const auto stack = child.wait_for([](const PythonStack& s) { return begins_with(s, {"spin"}); });
  ASSERT_TRUE(stack) << child.why();
  EXPECT_EQ(names_of(*stack), (std::vector<std::string>{"spin", "outer", "<module>"}));
}

// Recursion deeper than kMaxFrames: the innermost 128 frames, marked truncated. Prints the cost of
// a read of that many frames.
TEST(PythonStackReaderTest, ADeepStackIsCutAfterItsInnermostFrames) {
  PythonChild child(testing::reference_python(),
                    {"-c",
                     "def spin():\n    while True:\n        pass\ndef down(n):\n"
                     "    down(n - 1) if n else spin()\ndown(200)\n"});
  const auto stack = child.wait_for([](const PythonStack& s) { return begins_with(s, {"spin"}); });
  ASSERT_TRUE(stack) << child.why();
  ASSERT_EQ(stack->frames.size(), static_cast<std::size_t>(PythonStackReader::kMaxFrames));
  EXPECT_TRUE(stack->truncated);
  EXPECT_EQ(stack->frames.back().name, "down");
  constexpr int kReads = 500;
  int read = 0;
  std::string why;
  PythonStack again;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kReads; ++i) read += child.reader().read_main_thread(again, &why) ? 1 : 0;
  const std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(read, kReads) << why;
  EXPECT_EQ(again.frames.size(), stack->frames.size());
  std::cout << "[          ] " << spent.count() / kReads << " us per read of "
            << PythonStackReader::kMaxFrames << " frames\n";
}

TEST(PythonStackReaderTest, AProgramThatEndsIsToldSo) {
  PythonChild child(testing::reference_python(), {"-c", kNest});
  ASSERT_TRUE(child.wait_for([](const PythonStack& s) { return begins_with(s, {"inner"}); }))
      << child.why();
  child.stop();  // and reaped: its PID names no process now
  std::string why;
  EXPECT_FALSE(child.reader().read_main_thread(&why));
  EXPECT_NE(why.find("has exited"), std::string::npos) << why;
}

TEST(PythonStackReaderTest, AProgramThatIsNotPythonIsToldSo) {
  BackgroundProcess sleeper({"/bin/sleep", "600"}, "/dev/null");
  ASSERT_TRUE(sleeper.started());
  std::string why;
  EXPECT_FALSE(PythonStackReader::open(sleeper.pid(), &why));
  EXPECT_NE(why.find("is not a Python program"), std::string::npos) << why;
  EXPECT_NE(why.find("(sleep)"), std::string::npos) << why;
}

TEST(PythonStackReaderTest, AProcessThatDoesNotExistIsToldSo) {
  int pid_max = 4194304;
  std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
  std::string why;
  EXPECT_FALSE(PythonStackReader::open(pid_max + 1, &why));
  EXPECT_EQ(why, "no process " + std::to_string(pid_max + 1));
}

// Without ptrace access (a child that gave up root), the reason names the right that is missing.
TEST(PythonStackReaderTest, WithoutPtraceAccessTheMissingRightIsNamed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run a reader as another user";
  PythonChild child(testing::reference_python(), {"-c", kNest});
  ASSERT_TRUE(child.wait_for([](const PythonStack& s) { return begins_with(s, {"inner"}); }))
      << child.why();
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t reader = ::fork();
  if (reader == 0) {
    std::string why;
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
      why = "setresuid failed";
    else if (PythonStackReader::open(child.reader().pid(), &why))
      why = "opened";
    (void)!::write(pipe_fds[1], why.data(), why.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  const std::string why = testing::read_all(pipe_fds[0]);
  ::waitpid(reader, nullptr, 0);
  EXPECT_NE(why.find("needs ptrace access"), std::string::npos) << why;
  EXPECT_NE(why.find("lacks CAP_SYS_PTRACE"), std::string::npos) << why;
  if (detail::yama_ptrace_scope()) {
    EXPECT_NE(why.find("ptrace_scope is"), std::string::npos) << why;
  }
}

// torch's own DataLoader at num_workers=0: a slow __getitem__, and a step that sleeps. Reads a
// few ms apart catch the thread in both.
TEST(PythonStackReaderTest, ATorchDataLoaderLoopIsSeenLoadingAndStepping) {
  const std::string python = testing::reference_python();
  if (testing::run_process({python, "-c", "import torch"}).exit_code != 0)
    GTEST_SKIP() << python << " cannot import torch";
  PythonChild child(python, {"-c", R"(import time, torch
from torch.utils.data import Dataset, DataLoader
class Slow(Dataset):
    def __len__(self):
        return 1000000
    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.zeros(4)
def train_step(batch):
    time.sleep(0.006)
while True:
    for batch in DataLoader(Slow(), batch_size=1, num_workers=0):
        train_step(batch)
)"});
  ASSERT_TRUE(
      child.wait_for([](const PythonStack& s) { return begins_with(s, {"train_step"}); }, 120s))
      << child.why();
  int loading = 0, stepping = 0, failed = 0;
  bool saw_getitem = false;
  std::string why;
  PythonStack stack;
  std::size_t deepest = 0;
  std::chrono::duration<double, std::micro> spent{0};
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(3ms);
    const auto start = std::chrono::steady_clock::now();
    const bool read = child.reader().read_main_thread(stack, &why);
    spent += std::chrono::steady_clock::now() - start;
    if (!read) {
      ++failed;
      continue;
    }
    deepest = std::max(deepest, stack.frames.size());
    if (is_loading_frame(stack))
      ++loading;
    else if (begins_with(stack, {"train_step"}))
      ++stepping;
    for (const PythonFrame& f : stack.frames) saw_getitem |= f.qualname == "Slow.__getitem__";
  }
  std::cout << "[          ] of 100 reads: " << loading << " loading, " << stepping << " stepping, "
            << failed << " failed" << (failed ? " (last: " + why + ")" : "") << "; "
            << spent.count() / 100 << " us per read, up to " << deepest << " frames\n";
  EXPECT_GT(loading, 0);
  EXPECT_GT(stepping, 0);
  EXPECT_TRUE(saw_getitem);
}

// Each CPython a machine has besides the reference one: pyenv's builds (libpython3.X.so), the
// system's python3.X. Skipped where the version is absent.
std::string find_python(const std::string& version) {
  std::vector<std::filesystem::path> roots;
  if (const char* root = std::getenv("PYENV_ROOT")) roots.emplace_back(root);
  if (const char* home = std::getenv("HOME"))
    roots.emplace_back(std::filesystem::path(home) / ".pyenv");
  for (const auto& root : roots) {
    std::error_code ec;
    std::vector<std::filesystem::path> builds;
    for (const auto& entry : std::filesystem::directory_iterator(root / "versions", ec))
      if (entry.path().filename().string().starts_with(version + "."))
        builds.push_back(entry.path());
    std::sort(builds.rbegin(), builds.rend());
    for (const auto& build : builds)
      if (::access((build / "bin" / ("python" + version)).c_str(), X_OK) == 0)
        return (build / "bin" / ("python" + version)).string();
  }
  for (const std::string dir : {"/usr/local/bin/", "/usr/bin/"})
    if (::access((dir + "python" + version).c_str(), X_OK) == 0) return dir + "python" + version;
  return "";
}

class PythonVersionTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PythonVersionTest, ReadsTheNest) {
  const std::string python = find_python(GetParam());
  if (python.empty()) GTEST_SKIP() << "no python" << GetParam() << " on this machine";
  PythonChild child(python, {"-c", kNest});
  const auto stack = child.wait_for([](const PythonStack& s) { return begins_with(s, {"inner"}); });
  ASSERT_TRUE(stack) << python << ": " << child.why();
  EXPECT_EQ(child.reader().version(), GetParam());
  expect_nest(*stack, "<string>");
  std::cout << "[          ] " << python << ": CPython " << child.reader().version()
            << ", _PyRuntime in " << child.reader().interpreter_path() << "\n";
}

// A stack that changes all the time, read as fast as it can be: each read is the stack it was at
// some moment, or nothing (with why), never names that were not there.
TEST_P(PythonVersionTest, AChangingStackReadsTrueOrNotAtAll) {
  const std::string python = find_python(GetParam());
  if (python.empty()) GTEST_SKIP() << "no python" << GetParam() << " on this machine";
  PythonChild child(python, {"-c", R"(def leaf():
    x = 0
    for i in range(50):
        x += i
    return x
def mid():
    return [leaf() for _ in range(3)]
def top():
    while True:
        mid()
top()
)"});
  ASSERT_TRUE(child.wait_for([](const PythonStack& s) { return begins_with(s, {"mid"}); }))
      << child.why();
  const std::set<std::string> known = {"leaf", "<listcomp>", "mid", "top", "<module>"};
  int read = 0, failed = 0;
  std::string why, last_failure;
  PythonStack stack;
  for (int i = 0; i < 2000; ++i) {
    if (!child.reader().read_main_thread(stack, &why)) {
      ++failed;
      last_failure = why;
      continue;
    }
    ++read;
    ASSERT_GE(stack.frames.size(), 2u) << describe(stack);
    EXPECT_EQ(stack.frames.back().name, "<module>") << describe(stack);
    EXPECT_EQ(stack.frames[stack.frames.size() - 2].name, "top") << describe(stack);
    for (const PythonFrame& f : stack.frames) {
      EXPECT_TRUE(known.contains(f.name)) << describe(stack);
      EXPECT_EQ(f.filename, "<string>");
      EXPECT_GT(f.line, 0) << describe(stack);
    }
  }
  EXPECT_GT(read, 0) << last_failure;
  std::cout << "[          ] CPython " << GetParam() << ": " << read << " reads, " << failed
            << " failed" << (failed ? " (last: " + last_failure + ")" : "") << "\n";
}

INSTANTIATE_TEST_SUITE_P(CPython, PythonVersionTest, ::testing::Values("3.11", "3.12", "3.13"),
                         [](const auto& info) {
                           return "v" + std::string(info.param).replace(1, 1, "_");
                         });

TEST(PythonStackReaderTest, AnOlderCPythonIsNotSupported) {
  for (const char* version : {"3.10", "3.9", "2.7"}) {
    const std::string python = find_python(version);
    if (python.empty()) continue;
    BackgroundProcess old({python, "-c", "while True: pass"}, "/dev/null");
    std::string why;
    for (int i = 0; i < 100 && !PythonStackReader::open(old.pid(), &why) &&
                    why.find("is not supported") == std::string::npos;
         ++i)
      std::this_thread::sleep_for(20ms);  // until the interpreter is mapped
    EXPECT_NE(why.find("CPython " + std::string(version) + " is not supported"), std::string::npos)
        << why;
    std::cout << "[          ] " << why << "\n";
    return;
  }
  GTEST_SKIP() << "no CPython older than 3.11 on this machine";
}

// The pure parts: the line table, the text of a str, 3.13's offsets, the permission advice.

TEST(PythonLayoutTest, LineTableEntriesOfEveryForm) {
  const std::vector<std::uint8_t> table = {
      0xE9, 0x02,                    // NO_COLUMNS, 2 units, line +1
      0xF8,                          // NONE, 1 unit
      0xDA, 0x05, 0x06,              // ONE_LINE1, 3 units, line +1, columns
      0xF0, 0x05, 0x00, 0x01, 0x02,  // LONG, 1 unit, line -2, end line, columns
      0x80, 0x03,                    // SHORT, 1 unit, same line
  };
  EXPECT_EQ(detail::line_of_instruction(table, 10, -2), 10);  // not started: the first line
  EXPECT_EQ(detail::line_of_instruction(table, 10, 0), 11);
  EXPECT_EQ(detail::line_of_instruction(table, 10, 2), 11);
  EXPECT_EQ(detail::line_of_instruction(table, 10, 4), 0);  // no line
  EXPECT_EQ(detail::line_of_instruction(table, 10, 6), 12);
  EXPECT_EQ(detail::line_of_instruction(table, 10, 11), 12);
  EXPECT_EQ(detail::line_of_instruction(table, 10, 12), 10);
  EXPECT_EQ(detail::line_of_instruction(table, 10, 14), 10);
  EXPECT_EQ(detail::line_of_instruction(table, 10, 16), 0);  // past the code
  EXPECT_EQ(detail::line_of_instruction({}, 10, 0), 0);
}

TEST(PythonLayoutTest, TextOfEachKindAsUtf8) {
  const auto bytes = [](std::initializer_list<unsigned> values) {
    std::vector<std::byte> out;
    for (const unsigned v : values) out.push_back(static_cast<std::byte>(v));
    return out;
  };
  EXPECT_EQ(detail::utf8_of(bytes({'m', 0xE9}), 1), "m\xC3\xA9");
  EXPECT_EQ(detail::utf8_of(bytes({0xB4, 0x03}), 2), "\xCE\xB4");
  EXPECT_EQ(detail::utf8_of(bytes({0x00, 0x00, 0x02, 0x00}), 4), "\xF0\xA0\x80\x80");
  EXPECT_EQ(detail::utf8_of(bytes({0x00, 0xD8}), 2), "\xEF\xBF\xBD");  // a lone surrogate
  EXPECT_FALSE(detail::utf8_of(bytes({0x00, 0x00, 0x11, 0x00}), 4));
  EXPECT_FALSE(detail::utf8_of(bytes({0x41}), 3));
}

TEST(PythonLayoutTest, DebugOffsetsThatDoNotCheckOutAreRefused) {
  std::vector<std::byte> bytes(detail::debug_offsets_bytes());
  std::string why;
  EXPECT_FALSE(detail::layout_from_debug_offsets(bytes, &why));
  EXPECT_NE(why.find("cookie"), std::string::npos) << why;
  std::memcpy(bytes.data(), "xdebugpy", 8);
  const std::uint64_t v314 = 0x030E00F0;
  std::memcpy(bytes.data() + 8, &v314, 8);
  EXPECT_FALSE(detail::layout_from_debug_offsets(bytes, &why));
  EXPECT_NE(why.find("not 3.13"), std::string::npos) << why;
  const std::uint64_t v313 = 0x030D00F0, free_threaded = 1;
  std::memcpy(bytes.data() + 8, &v313, 8);
  std::memcpy(bytes.data() + 16, &free_threaded, 8);
  EXPECT_FALSE(detail::layout_from_debug_offsets(bytes, &why));
  EXPECT_NE(why.find("free-threaded"), std::string::npos) << why;
  std::memset(bytes.data() + 16, 0, 8);
  EXPECT_FALSE(detail::layout_from_debug_offsets(bytes, &why));  // all sizes 0
  EXPECT_NE(why.find("outside its structure"), std::string::npos) << why;
  EXPECT_FALSE(detail::layout_from_debug_offsets({bytes.data(), 16}, &why));
}

TEST(PythonLayoutTest, PtraceAdviceNamesTheMissingRight) {
  const std::string lacking = detail::ptrace_denied_reason(42, 1, false);
  EXPECT_NE(lacking.find("process 42"), std::string::npos) << lacking;
  EXPECT_NE(lacking.find("lacks CAP_SYS_PTRACE"), std::string::npos) << lacking;
  EXPECT_NE(lacking.find("ptrace_scope is 1"), std::string::npos) << lacking;
  const std::string filtered = detail::ptrace_denied_reason(42, std::nullopt, true);
  EXPECT_NE(filtered.find("has CAP_SYS_PTRACE, so something else"), std::string::npos) << filtered;
  EXPECT_EQ(filtered.find("ptrace_scope"), std::string::npos) << filtered;
}

// This process's own memory, through both ways of reading another's.
TEST(PythonLayoutTest, RemoteMemoryReadsWholeOrNothing) {
  std::vector<char> local(3 * detail::BlockCache::kBlock);
  for (std::size_t i = 0; i < local.size(); ++i) local[i] = static_cast<char>(i * 7);
  const auto address = reinterpret_cast<std::uint64_t>(local.data());
  for (const bool mem_file : {false, true}) {
    detail::RemoteMemory memory(::getpid());
    if (mem_file) {
      ASSERT_TRUE(memory.use_mem_file()) << std::strerror(memory.error());
    }
    std::vector<char> copy(local.size());
    ASSERT_TRUE(memory.read(address, copy.data(), copy.size()));
    EXPECT_EQ(copy, local);
    char byte;
    EXPECT_FALSE(memory.read(8, &byte, 1));  // the first page is never mapped
    EXPECT_EQ(memory.error(), EFAULT);
    detail::BlockCache blocks(memory, 4);
    const std::uint64_t across = address + detail::BlockCache::kBlock - 3;  // spans two blocks
    blocks.prefetch(std::vector<std::uint64_t>{across, 8}, 6);
    char six[6];
    ASSERT_TRUE(blocks.read(across, six, sizeof six));
    EXPECT_TRUE(std::equal(six, six + 6, local.begin() + (across - address)));
    EXPECT_FALSE(blocks.read(8, &byte, 1));
  }
}

// A refresh reads the blocks a read used again, as the memory holds them now, and forgets the rest.
TEST(PythonLayoutTest, ABlockCacheRefreshReadsWhatTheMemoryHoldsNow) {
  std::vector<char> local(4 * detail::BlockCache::kBlock, 'a');
  const auto address = reinterpret_cast<std::uint64_t>(local.data());
  const std::uint64_t first = (address + detail::BlockCache::kBlock - 1) & ~std::uint64_t{detail::BlockCache::kBlock - 1};
  const std::uint64_t second = first + detail::BlockCache::kBlock;
  char* const at_first = local.data() + (first - address);
  char* const at_second = local.data() + (second - address);
  detail::RemoteMemory memory(::getpid());
  detail::BlockCache blocks(memory, 4);
  char byte = 0;
  ASSERT_TRUE(blocks.read(first, &byte, 1));
  ASSERT_TRUE(blocks.read(second, &byte, 1));
  *at_first = 'b';
  *at_second = 'b';
  ASSERT_TRUE(blocks.read(first, &byte, 1));
  EXPECT_EQ(byte, 'a') << "held since it was read";
  blocks.refresh();
  ASSERT_TRUE(blocks.read(first, &byte, 1));
  EXPECT_EQ(byte, 'b');
  ASSERT_TRUE(blocks.read(second, &byte, 1));
  EXPECT_EQ(byte, 'b');
  blocks.refresh();  // both read since the last: both read again
  *at_first = 'c';
  ASSERT_TRUE(blocks.read(first, &byte, 1));
  EXPECT_EQ(byte, 'b');
  blocks.refresh();  // only the first read since: the second forgotten, read anew when asked
  *at_second = 'c';
  ASSERT_TRUE(blocks.read(second, &byte, 1));
  EXPECT_EQ(byte, 'c');
  ASSERT_TRUE(blocks.read(first, &byte, 1));
  EXPECT_EQ(byte, 'c');
}

}  // namespace python_stack_test
}  // namespace feedscope
