#include "loader/detail/shard_pattern.h"

#include <gtest/gtest.h>

#include <fstream>

#include "loader/dataset.h"
#include "tests/support/temp_dir.h"

namespace feedscope::detail {
namespace {

using Names = std::vector<std::string>;

TEST(ShardPatternTest, BraceRangesKeepTheFirstBoundsWidth) {
  EXPECT_EQ(expand_braces("train-{000008..000011}.tar"),
            (Names{"train-000008.tar", "train-000009.tar", "train-000010.tar", "train-000011.tar"}));
  EXPECT_EQ(expand_braces("s{8..10}"), (Names{"s8", "s9", "s10"}));
  EXPECT_EQ(expand_braces("s{3..1}"), (Names{"s3", "s2", "s1"}));
}

TEST(ShardPatternTest, BraceListsAndSeveralBraces) {
  EXPECT_EQ(expand_braces("{train,val}-{0..1}.tar"),
            (Names{"train-0.tar", "train-1.tar", "val-0.tar", "val-1.tar"}));
  EXPECT_EQ(expand_braces("plain.tar"), (Names{"plain.tar"}));
}

TEST(ShardPatternTest, UnbalancedBracesAndHugeRangesNameThePattern) {
  for (const std::string bad : {"a{0..3.tar", "a}0..3{.tar", "a{0..99999999}"}) {
    try {
      expand_braces(bad);
      FAIL() << bad;
    } catch (const DatasetError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(ShardPatternTest, CommaListsDirectoriesAndMissingShards) {
  testing::TempDir dir;
  for (const std::string name : {"b.tar", "a.tar", "c.tar.gz", "notes.txt"}) std::ofstream(dir / name) << "x";
  std::filesystem::create_directory(dir / "sub.tar");  // a directory named like a shard is not one
  const std::string d = dir.path().string();
  EXPECT_EQ(list_shards("webdataset", d, {".tar", ".tar.gz"}), (Names{d + "/a.tar", d + "/b.tar", d + "/c.tar.gz"}));
  EXPECT_EQ(list_shards("webdataset", d + "/{b,a}.tar," + d + "/c.tar.gz", {".tar"}),
            (Names{d + "/b.tar", d + "/a.tar", d + "/c.tar.gz"}));
  try {
    list_shards("webdataset", d + "/{a..b}x.tar", {".tar"});
    FAIL();
  } catch (const DatasetError& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  std::filesystem::create_directory(dir / "empty");
  try {
    list_shards("tfrecord", d + "/empty", {".tfrecord"});
    FAIL();
  } catch (const DatasetError& e) {
    EXPECT_NE(std::string(e.what()).find("pattern '" + d + "/empty' matches no shard"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace feedscope::detail
