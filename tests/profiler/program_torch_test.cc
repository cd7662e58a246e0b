// The torch a watched program runs, from its memory map: a Python program's torch/version.py, a
// libtorch distribution's build-version, a distribution's versioned soname.
#include "profiler/program_torch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

using testing::TempDir;

void write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string mapping(const std::string& path) {
  return "7fb5e4000000-7fb5e480a000 r--p 00000000 fe:00 14885720                   " + path + "\n";
}

TEST(ProgramTorchTest, APythonProgramsTorchIsItsVersionPy) {
  TempDir root;
  write(root / "venv/lib/python3.11/site-packages/torch/version.py",
        "__version__ = '2.11.0+cu130'\ndebug = False\n");
  const std::string maps =
      mapping("/usr/lib/x86_64-linux-gnu/libc.so.6") +
      mapping("/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so") +
      mapping("/venv/lib/python3.11/site-packages/torch/_C.cpython-311-x86_64-linux-gnu.so");
  const auto t = torch_of_maps(maps, ProcFs(root.path().string()));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->version, "2.11.0+cu130");
  EXPECT_EQ(t->source, "/venv/lib/python3.11/site-packages/torch/version.py");
  EXPECT_EQ(torch_major(t->version), 2);
}

TEST(ProgramTorchTest, DebiansTorchIsItsVersionPyBeforeItsSoname) {
  TempDir root;
  write(root / "usr/lib/python3/dist-packages/torch/version.py", "__version__ = '1.13.0a0'\n");
  const std::string maps = mapping("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0") +
                           mapping("/usr/lib/python3/dist-packages/torch/_C.cpython-311-x86_64-linux-gnu.so");
  const auto t = torch_of_maps(maps, ProcFs(root.path().string()));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->version, "1.13.0a0");
  EXPECT_EQ(torch_major(t->version), 1);
  // A libtorch C++ program on Debian: only the soname says.
  const auto cpp = torch_of_maps(mapping("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0"),
                                 ProcFs(root.path().string()));
  ASSERT_TRUE(cpp);
  EXPECT_EQ(cpp->version, "1.13.0");
}

TEST(ProgramTorchTest, ALibtorchDistributionIsItsBuildVersion) {
  TempDir root;
  write(root / "opt/libtorch/build-version", "2.11.0+cu130\n");
  const auto t = torch_of_maps(mapping("/opt/libtorch/lib/libtorch_cpu.so"), ProcFs(root.path().string()));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->version, "2.11.0+cu130");
  EXPECT_EQ(t->source, "/opt/libtorch/build-version");
}

TEST(ProgramTorchTest, NoTorchMappedOrNoVersionFileIsNotKnown) {
  TempDir root;
  EXPECT_FALSE(torch_of_maps(mapping("/usr/lib/x86_64-linux-gnu/libc.so.6"), ProcFs(root.path().string())));
  EXPECT_FALSE(torch_of_maps(mapping("/somewhere/torch/_C.cpython-311-x86_64-linux-gnu.so"),
                             ProcFs(root.path().string())));
  EXPECT_EQ(torch_major("unknown"), 0);
}

TEST(ProgramTorchTest, TheProbeFindsThisProcesssTorchOrNothingWithoutOne) {
  // This test binary links no Python torch; whatever it finds must name a real file.
  ProgramTorchProbe probe;
  probe.look(static_cast<int>(::getpid()), 1);
  if (probe.found()) {
    EXPECT_FALSE(probe.found()->version.empty());
    EXPECT_TRUE(std::filesystem::exists(probe.found()->source)) << probe.found()->source;
  }
}

}  // namespace
}  // namespace feedscope
