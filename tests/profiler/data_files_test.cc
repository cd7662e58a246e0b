#include "profiler/data_files.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
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

// A short run's reads can all fall between two readings: the data its command line names is the
// fallback, a folder of classes (`--data DIR`), of shards (`--shards=DIR`), or a shard itself.
TEST(DataFilesSeenTest, TheCommandLinesDataWhereNoFileWasSeenOpen) {
  const fs::path root = fs::temp_directory_path() / ("feedscope_data_args_" + std::to_string(::getpid()));
  fs::remove_all(root);
  for (const char* f : {"train/cat/1.jpg", "train/cat/2.jpg", "train/cat/3.jpg", "train/dog/4.png",
                        "shards/a-000.tar", "shards/a-001.tar", "notes/readme.txt"}) {
    fs::create_directories((root / f).parent_path());
    std::ofstream(root / f) << "x";
  }
  DataFilesSeen images;
  images.look_at_arguments({"/usr/bin/python3", "train.py", "--data", (root / "train").string(),
                            "--lr=0.1", (root / "notes").string(), "no/such/dir"});
  EXPECT_EQ(images.dataset(), "images:" + (root / "train").string());
  EXPECT_EQ(images.files().size(), 3u) << "two of each class";
  EXPECT_TRUE(images.from_arguments());
  DataFilesSeen shards;
  shards.look_at_arguments({"train.py", "--shards=" + (root / "shards").string()});
  EXPECT_EQ(shards.dataset(), "webdataset:" + (root / "shards").string());
  DataFilesSeen one;
  one.look_at_arguments({(root / "shards" / "a-000.tar").string()});
  EXPECT_EQ(one.files().size(), 1u);
  DataFilesSeen none;
  none.look_at_arguments({"train.py", "--epochs", "3", (root / "notes").string()});
  EXPECT_EQ(none.dataset(), std::nullopt);
  EXPECT_FALSE(none.from_arguments());
  FakeProc proc;
  proc.open(10, {"/data/train/cat/1.JPG"});
  DataFilesSeen open(proc.proc());
  open.look(10);
  EXPECT_FALSE(open.from_arguments()) << "seen open";
  fs::remove_all(root);
}

}  // namespace
}  // namespace feedscope
