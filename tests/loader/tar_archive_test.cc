#include "loader/tar_archive.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/process.h"
#include "tests/support/reference_python.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::vector<std::uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

std::vector<std::pair<std::string, std::string>> read_all(const std::string& path) {
  TarReader tar(path);
  std::vector<std::pair<std::string, std::string>> out;
  TarMember m;
  std::vector<std::uint8_t> data;
  while (tar.next(m)) {
    tar.read(data);
    out.emplace_back(m.name, std::string(data.begin(), data.end()));
  }
  return out;
}

// Python's tarfile writing `format` (USTAR, GNU, PAX), gzip-compressed when `mode` is "w:gz".
void python_tar(const std::string& path, const std::string& format, const std::string& mode,
                const std::string& long_name) {
  const std::string script =
      "import io, sys, tarfile\n"
      "t = tarfile.open(sys.argv[1], sys.argv[3], format=getattr(tarfile, sys.argv[2] + '_FORMAT'))\n"
      "for name, data in [('d/000.jpg', b'jpeg0'), ('d/000.cls', b'7'), (sys.argv[4], b'long' * 100)]:\n"
      "    info = tarfile.TarInfo(name); info.size = len(data); t.addfile(info, io.BytesIO(data))\n"
      "info = tarfile.TarInfo('d/dir'); info.type = tarfile.DIRTYPE; t.addfile(info)\n"
      "t.close()\n";
  const auto r = testing::run_process({testing::reference_python(), "-c", script, path, format, mode, long_name});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(TarArchiveTest, ReadsWhatItWrites) {
  TempDir dir;
  const std::string path = (dir / "a.tar").string();
  TarWriter w(path);
  w.add("k/0001.jpg", bytes_of(std::string(700, 'x')));
  w.add("k/0001.cls", bytes_of("3\n"));
  w.add("empty.txt", {});
  w.finish();
  EXPECT_EQ(w.bytes(), fs::file_size(path));
  const auto members = read_all(path);
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0], (std::pair<std::string, std::string>{"k/0001.jpg", std::string(700, 'x')}));
  EXPECT_EQ(members[1].second, "3\n");
  EXPECT_EQ(members[2].second, "");
  EXPECT_THROW(TarWriter(path).add(std::string(101, 'n'), {}), std::invalid_argument);
}

TEST(TarArchiveTest, ReadsPythonsUstarGnuAndPaxFormatsPlainAndGzipped) {
  if (!fs::exists(testing::reference_python())) GTEST_SKIP() << "no " << testing::reference_python();
  TempDir dir;
  // Past ustar's 100-byte name (and 155-byte prefix): GNU writes an 'L' entry, PAX a 'path' record.
  const std::string long_name = "deep/" + std::string(120, 'p') + "/" + std::string(130, 'q') + ".long.txt";
  for (const std::string format : {"USTAR", "GNU", "PAX"}) {
    for (const std::string mode : {"w", "w:gz"}) {
      if (format == "USTAR" && mode == "w:gz") continue;
      const std::string path = (dir / (format + (mode == "w" ? ".tar" : ".tar.gz"))).string();
      const std::string name = format == "USTAR" ? "d/short.long.txt" : long_name;
      python_tar(path, format, mode, name);
      const auto members = read_all(path);
      ASSERT_EQ(members.size(), 3u) << path;
      EXPECT_EQ(members[0].first, "d/000.jpg");
      EXPECT_EQ(members[0].second, "jpeg0");
      EXPECT_EQ(members[1].second, "7");
      EXPECT_EQ(members[2].first, name) << path;
      EXPECT_EQ(members[2].second.size(), 400u);
    }
  }
}

TEST(TarArchiveTest, TruncationNamesTheMemberAndLosesTheFraming) {
  TempDir dir;
  const std::string path = (dir / "t.tar").string();
  TarWriter w(path);
  w.add("a.jpg", bytes_of(std::string(3000, 'a')));
  w.add("b.jpg", bytes_of(std::string(3000, 'b')));
  w.finish();
  fs::resize_file(path, 512 + 3072 + 512 + 1000);  // inside b.jpg's data
  TarReader tar(path);
  TarMember m;
  std::vector<std::uint8_t> data;
  ASSERT_TRUE(tar.next(m));
  tar.read(data);
  ASSERT_TRUE(tar.next(m));
  EXPECT_EQ(m.name, "b.jpg");
  try {
    tar.read(data);
    FAIL();
  } catch (const TarError& e) {
    EXPECT_TRUE(e.framing_lost());
    EXPECT_EQ(e.member(), "b.jpg");
    EXPECT_NE(std::string(e.what()).find(path + " member 'b.jpg': truncated"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(tar.next(m));
}

TEST(TarArchiveTest, ACorruptHeaderIsReportedAndTheNextMemberFound) {
  TempDir dir;
  const std::string path = (dir / "c.tar").string();
  TarWriter w(path);
  w.add("a.jpg", bytes_of(std::string(100, 'a')));
  w.add("b.jpg", bytes_of(std::string(100, 'b')));
  w.add("c.jpg", bytes_of(std::string(100, 'c')));
  w.finish();
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1024 + 10);  // b.jpg's header, inside its name
    f.put('#');
  }
  TarReader tar(path);
  TarMember m;
  ASSERT_TRUE(tar.next(m));
  EXPECT_EQ(m.name, "a.jpg");
  try {
    tar.next(m);
    FAIL();
  } catch (const TarError& e) {
    EXPECT_FALSE(e.framing_lost());
    EXPECT_NE(std::string(e.what()).find("header checksum mismatch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at byte 1024"), std::string::npos) << e.what();
  }
  ASSERT_TRUE(tar.next(m));
  EXPECT_EQ(m.name, "c.jpg");
  std::vector<std::uint8_t> data;
  tar.read(data);
  EXPECT_EQ(std::string(data.begin(), data.end()), std::string(100, 'c'));
  EXPECT_FALSE(tar.next(m));
}

TEST(TarArchiveTest, ACorruptGzipStreamIsAnError) {
  if (!fs::exists(testing::reference_python())) GTEST_SKIP() << "no " << testing::reference_python();
  TempDir dir;
  const std::string path = (dir / "z.tar.gz").string();
  python_tar(path, "GNU", "w:gz", "x.txt");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(30);
    for (int i = 0; i < 40; ++i) f.put(static_cast<char>(0xA5));
  }
  TarReader tar(path);
  TarMember m;
  std::vector<std::uint8_t> data;
  EXPECT_THROW(
      {
        while (tar.next(m)) tar.read(data);
      },
      TarError);
}

}  // namespace
}  // namespace feedscope
