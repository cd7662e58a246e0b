// The program never hands a string to a shell or starts another program: dataset paths, config
// values and addresses come from users, so no code path may reach system(), popen() or exec*().
// This reads every source file of the modules and the CLI and fails naming any call it finds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace feedscope {
namespace {

TEST(NoShellTest, NoModuleOrCliSourceRunsAShellOrAProgram) {
  const std::regex call(
      R"(\b(system|popen|wordexp|execl|execlp|execle|execv|execvp|execvpe|fexecve|posix_spawnp?)\s*\()");
  const std::filesystem::path root = FEEDSCOPE_SOURCE_DIR;
  int files = 0;
  for (const char* module : {"cli", "exporters", "loader", "pinned_memory", "profiler", "sampler"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / module)) {
      const auto ext = entry.path().extension();
      if (ext != ".cc" && ext != ".h" && ext != ".cu") continue;
      std::ifstream in(entry.path());
      std::string line;
      for (int number = 1; std::getline(in, line); ++number) {
        const auto comment = line.find("//");
        const std::string code = line.substr(0, comment);
        EXPECT_FALSE(std::regex_search(code, call))
            << entry.path().string() << ":" << number << ": " << line;
      }
      ++files;
    }
  }
  EXPECT_GT(files, 50) << "found too few sources under " << root << " to trust this check";
}

}  // namespace
}  // namespace feedscope
