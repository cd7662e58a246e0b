// The program never hands a string to a shell: dataset paths, config values and addresses come
// from users, so no code path may reach system(), popen() or exec*(). The one exception is the
// program the user asks `feedscope watch|sweep|tune -- COMMAND` to run: cli/child_process.cc
// execs exactly that argv with execvpe, never through a shell. This reads every source file of
// the modules and the CLI and fails naming any other call it finds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace feedscope {
namespace {

TEST(NoShellTest, NoModuleOrCliSourceRunsAShellOrAProgramButTheUsersCommand) {
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
        const bool the_users_command = entry.path() == root / "cli" / "child_process.cc" &&
                                       code.find("::execvpe(argv[0], argv.data(), envp.data())") !=
                                           std::string::npos;
        EXPECT_FALSE(std::regex_search(code, call) && !the_users_command)
            << entry.path().string() << ":" << number << ": " << line;
        EXPECT_EQ(code.find("/bin/sh"), std::string::npos)
            << entry.path().string() << ":" << number << ": " << line;
      }
      ++files;
    }
  }
  EXPECT_GT(files, 50) << "found too few sources under " << root << " to trust this check";
}

}  // namespace
}  // namespace feedscope
