// The run-time CUPTI loader; built in CUDA builds only (tests/CMakeLists.txt).
#include "profiler/detail/cupti_api.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace feedscope::detail {
namespace {

TEST(CuptiApiTest, AMissingLibrarySaysWhichNameAndDlerror) {
  const std::string name = "libfeedscope-no-such-cupti.so.13";
  const CuptiLibrary lib = load_cupti({name});
  EXPECT_FALSE(lib.loaded);
  EXPECT_EQ(lib.api.cuptiGetVersion, nullptr);
  EXPECT_EQ(lib.reason.rfind(name + " not found: ", 0), 0u) << lib.reason;
  // dlerror's own text follows, and names the file too.
  EXPECT_NE(lib.reason.find(name, name.size()), std::string::npos) << lib.reason;
}

TEST(CuptiApiTest, AFileThatIsNoLibrarySaysItCannotBeLoaded) {
  feedscope::testing::TempDir dir;
  const std::string path = (dir / "libcupti.so.13").string();
  std::ofstream(path) << "not a shared object";
  const CuptiLibrary lib = load_cupti({path});
  EXPECT_FALSE(lib.loaded);
  EXPECT_EQ(lib.reason.rfind(path + " cannot be loaded: ", 0), 0u) << lib.reason;
}

TEST(CuptiApiTest, ALibraryWithoutCuptisEntryPointsIsRefused) {
  const CuptiLibrary lib = load_cupti({"libm.so.6"});
  EXPECT_FALSE(lib.loaded);
  EXPECT_EQ(lib.reason, "libm.so.6 lacks cuptiGetVersion: not CUPTI");
}

// CUPTI's records change layout between CUDA majors: another major's library is refused, not read.
TEST(CuptiApiTest, AnotherCudaMajorsCuptiIsRefusedNamingBothVersions) {
  const CuptiLibrary lib = load_cupti({FAKE_CUPTI_CUDA12});
  EXPECT_FALSE(lib.loaded);
  EXPECT_EQ(lib.api.cuptiGetVersion, nullptr) << "nothing of a refused library is kept";
  const std::string expected = std::string(FAKE_CUPTI_CUDA12) + " is CUPTI API version 120000; " +
                               "feedscope reads the records of CUDA " +
                               std::to_string(CUPTI_API_VERSION / 10000) + "'s CUPTI";
  EXPECT_EQ(lib.reason.rfind(expected, 0), 0u) << lib.reason;
}

TEST(CuptiApiTest, ACuptiWhoseVersionCallFailsIsRefused) {
  const CuptiLibrary lib = load_cupti({FAKE_CUPTI_BROKEN, FAKE_CUPTI_CUDA12});
  EXPECT_FALSE(lib.loaded);
  EXPECT_EQ(lib.reason.rfind(std::string(FAKE_CUPTI_BROKEN) + ": cuptiGetVersion failed", 0), 0u)
      << lib.reason;
  EXPECT_NE(lib.reason.find("; " + std::string(FAKE_CUPTI_CUDA12) + " is CUPTI API version"),
            std::string::npos)
      << "the next name is tried: " << lib.reason;
}

TEST(CuptiApiTest, EveryNameTriedIsInTheReasonInOrder) {
  const CuptiLibrary lib = load_cupti({"libfeedscope-no-such-cupti.so", "libm.so.6"});
  EXPECT_FALSE(lib.loaded);
  const std::size_t first = lib.reason.find("libfeedscope-no-such-cupti.so not found: ");
  const std::size_t second = lib.reason.find("; libm.so.6 lacks cuptiGetVersion");
  EXPECT_EQ(first, 0u) << lib.reason;
  EXPECT_NE(second, std::string::npos) << lib.reason;
}

TEST(CuptiApiTest, TriesTheSonameOfItsHeadersFirst) {
  const std::vector<std::string> names = cupti_library_names();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0], "libcupti.so." + std::to_string(CUPTI_API_VERSION / 10000));
  EXPECT_EQ(names[1], "libcupti.so");
  for (std::size_t i = 2; i < names.size(); ++i)
    EXPECT_EQ(names[i].front(), '/') << "a configured path is absolute: " << names[i];
}

// A CUDA torch loads its own libcupti (from the pip package nvidia/cu13/lib, say); feedscope must
// use that one and load no second CUPTI, whatever the names it would otherwise try.
TEST(CuptiApiTest, ACuptiLoadedAlreadyIsTheOnlyCandidate) {
  const std::vector<std::string> names = {"libcupti.so.13", "libcupti.so"};
  const std::string torchs = "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13";
  const std::vector<std::string> loaded = {
      "/lib/x86_64-linux-gnu/libc.so.6", torchs,
      "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so", torchs};  // listed twice
  EXPECT_EQ(cupti_candidates(loaded, names), (std::vector<std::string>{torchs}));
  // Another CUDA's CUPTI loaded: still the only candidate, so load_cupti refuses it by version
  // instead of loading a second one beside it.
  EXPECT_EQ(cupti_candidates({"/opt/cuda-12/lib64/libcupti.so.2024.1.0"}, names),
            (std::vector<std::string>{"/opt/cuda-12/lib64/libcupti.so.2024.1.0"}));
}

TEST(CuptiApiTest, WithNoCuptiLoadedTheNamesAreTried) {
  const std::vector<std::string> names = {"libcupti.so.13", "libcupti.so",
                                          "/usr/local/cuda/lib/libcupti.so.13"};
  EXPECT_EQ(cupti_candidates({}, names), names);
  // Only the file name counts: a folder named libcupti.so.13 or a library merely holding the
  // word is no CUPTI.
  EXPECT_EQ(cupti_candidates({"/libcupti.so.13/libc.so.6", "/usr/lib/libnvcupti.so.1",
                              "/usr/lib/libcupti_extra.so", "libfoo.so"},
                             names),
            names);
}

// The same through the dynamic loader: a library the process loaded as libcupti.so.12 is found
// among the loaded objects and handed to load_cupti instead of the names; its version is refused.
// (Another test of this process may have loaded the real CUPTI: it is a candidate too.)
TEST(CuptiApiTest, AnAlreadyLoadedLibcuptiIsFoundAmongTheLoadedObjects) {
  feedscope::testing::TempDir dir;
  const std::string path = (dir / "libcupti.so.12").string();
  std::filesystem::copy_file(FAKE_CUPTI_CUDA12, path);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  const std::vector<std::string> candidates =
      cupti_candidates(loaded_object_paths(), cupti_library_names());
  std::string found;
  for (const std::string& c : candidates) {
    EXPECT_NE(c.find("/libcupti.so"), std::string::npos) << "only loaded CUPTIs, no name: " << c;
    if (std::filesystem::equivalent(c, path)) found = c;
  }
  const CuptiLibrary lib = found.empty() ? CuptiLibrary{} : load_cupti({found});
  ::dlclose(handle);
  ASSERT_FALSE(found.empty()) << "the loaded libcupti.so.12 is not among the candidates";
  EXPECT_FALSE(lib.loaded);
  EXPECT_EQ(lib.reason.rfind(found + " is CUPTI API version 120000", 0), 0u) << lib.reason;
}

// The process's CUPTI: loaded with every entry point, or a reason naming the first name tried.
TEST(CuptiApiTest, TheProcessesCuptiIsLoadedOrSaysWhy) {
  const CuptiLibrary& lib = cupti();
  EXPECT_EQ(&lib, &cupti()) << "loaded once";
  const std::vector<std::string> names = cupti_library_names();
  if (!lib.loaded) {
    EXPECT_EQ(lib.reason.rfind(names.front() + " ", 0), 0u) << lib.reason;
    GTEST_SKIP() << "CUPTI is not installed here: " << lib.reason;
  }
  EXPECT_TRUE(lib.reason.empty()) << lib.reason;
  const bool loaded_already = lib.name.find("/libcupti.so") != std::string::npos;
  EXPECT_TRUE(loaded_already || std::find(names.begin(), names.end(), lib.name) != names.end())
      << lib.name;
  std::uint32_t version = 0;
  ASSERT_EQ(lib.api.cuptiGetVersion(&version), CUPTI_SUCCESS);
  EXPECT_EQ(version / 10000, CUPTI_API_VERSION / 10000);
  EXPECT_NE(lib.api.cuptiActivityGetNumDroppedRecords, nullptr);
}

}  // namespace
}  // namespace feedscope::detail
