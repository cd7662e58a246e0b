#pragma once
// A fresh directory per test, removed afterwards.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace feedscope::testing {

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "." + info->name();
    for (char& c : name) c = (c == '/' ? '_' : c);
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("feedscope-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace feedscope::testing
