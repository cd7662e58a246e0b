// The run-time CUPTI loader; built in CUDA builds only (tests/CMakeLists.txt).
#include "profiler/detail/cupti_api.h"

#include <gtest/gtest.h>

#include <algorithm>
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
  EXPECT_NE(std::find(names.begin(), names.end(), lib.name), names.end()) << lib.name;
  std::uint32_t version = 0;
  ASSERT_EQ(lib.api.cuptiGetVersion(&version), CUPTI_SUCCESS);
  EXPECT_EQ(version / 10000, CUPTI_API_VERSION / 10000);
  EXPECT_NE(lib.api.cuptiActivityGetNumDroppedRecords, nullptr);
}

}  // namespace
}  // namespace feedscope::detail
