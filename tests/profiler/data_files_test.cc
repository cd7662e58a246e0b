#include "profiler/data_files.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace feedscope {
namespace {

namespace fs = std::filesystem;

// A /proc with one process whose descriptors point where the test says (targets need not exist).
class FakeProc {
 public:
  FakeProc() : root_(fs::temp_directory_path() / ("feedscope_data_files_" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
  }
  ~FakeProc() { fs::remove_all(root_); }
  void open(int pid, const std::vector<std::string>& targets) {
    const fs::path fd = root_ / "proc" / std::to_string(pid) / "fd";
    fs::create_directories(fd);
    int n = 3;
    for (const std::string& t : targets) fs::create_symlink(t, fd / std::to_string(n++));
  }
  ProcFs proc() const { return ProcFs(root_.string()); }

 private:
  fs::path root_;
};

TEST(DataFilesSeenTest, ImageFilesNameTheirImageFolderRoot) {
  FakeProc proc;
  proc.open(10, {"/data/train/cat/1.JPG", "/data/train/dog/2.jpeg", "pipe:[123]", "socket:[9]",
                 "/usr/lib/libtorch.so", "/data/train/dog/3.png"});
  proc.open(11, {"/elsewhere/logo.png"});
  DataFilesSeen seen(proc.proc());
  seen.look(10);
  seen.look(11);
  seen.look(12);  // gone: passed over
  EXPECT_EQ(seen.dataset(), "images:/data/train");
  EXPECT_EQ(seen.files().size(), 4u);
}

TEST(DataFilesSeenTest, ShardsWinAndNothingSeenIsNothing) {
  FakeProc proc;
  proc.open(10, {"/data/shards/shard-000001.tar", "/data/shards/shard-000002.tar", "/x/a/b.jpg"});
  proc.open(11, {"/records/train-00001.tfrecord"});
  DataFilesSeen shards(proc.proc());
  shards.look(10);
  EXPECT_EQ(shards.dataset(), "webdataset:/data/shards");
  DataFilesSeen tfrecord(proc.proc());
  tfrecord.look(11);
  EXPECT_EQ(tfrecord.dataset(), "tfrecord:/records");
  DataFilesSeen none(proc.proc());
  EXPECT_EQ(none.dataset(), std::nullopt);
}

TEST(DataFilesSeenTest, KeepsAtMostItsBound) {
  FakeProc proc;
  std::vector<std::string> many;
  for (int i = 0; i < 20; ++i) many.push_back("/d/c/" + std::to_string(i) + ".jpg");
  proc.open(10, many);
  DataFilesSeen seen(proc.proc(), 8);
  seen.look(10);
  EXPECT_TRUE(seen.full());
  EXPECT_EQ(seen.files().size(), 8u);
}

}  // namespace
}  // namespace feedscope
