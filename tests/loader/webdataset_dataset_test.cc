#include "loader/webdataset_dataset.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "loader/batch_loader.h"
#include "loader/image_dataset_maker.h"
#include "loader/jpeg_encoder.h"
#include "loader/tar_archive.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr int kW = 40, kH = 30, kSide = 16;

std::vector<std::uint8_t> jpeg(std::uint64_t index) {
  return encode_jpeg(synthetic_photo(kW, kH, 0, 1, 0, index), kW, kH);
}

std::vector<std::uint8_t> text(const std::string& t) { return {t.begin(), t.end()}; }

// shards x per samples "%03d.jpg" + ".cls" (label = global index % 3) in dir/s-K.tar.
void write_shards(const fs::path& dir, int shards, int per) {
  for (int s = 0; s < shards; ++s) {
    TarWriter tar((dir / ("s-" + std::to_string(s) + ".tar")).string());
    for (int i = 0; i < per; ++i) {
      const int n = s * per + i;
      char key[16];
      std::snprintf(key, sizeof key, "%03d", n);
      tar.add(std::string(key) + ".jpg", jpeg(static_cast<std::uint64_t>(n)));
      tar.add(std::string(key) + ".cls", text(std::to_string(n % 3)));
    }
    tar.finish();
  }
}

WebDataset::Options options(const fs::path& pattern, bool train = false) {
  WebDataset::Options o;
  o.pattern = pattern.string();
  o.image.train = train;
  o.image.size = kSide;
  o.classes = 3;
  return o;
}

struct Sample {
  std::vector<float> pixels;
  std::int64_t label;
};

std::vector<Sample> load_epoch(BatchLoader& loader) {
  std::vector<Sample> out;
  const std::size_t n = loader.dataset().spec().bytes() / sizeof(float);
  while (std::optional<Batch> b = loader.next()) {
    const auto* p = reinterpret_cast<const float*>(b->data);
    for (std::int64_t i = 0; i < b->size; ++i) out.push_back({{p + i * n, p + (i + 1) * n}, b->labels[i]});
  }
  return out;
}

TEST(WebDatasetTest, KeysAreThePathUpToTheFileNamesFirstDot) {
  std::string key, ext;
  ASSERT_TRUE(webdataset_key("a.b/c/0001.seg.PNG", key, ext));
  EXPECT_EQ(key, "a.b/c/0001");
  EXPECT_EQ(ext, "seg.PNG");
  EXPECT_FALSE(webdataset_key("dir/README", key, ext));
  EXPECT_FALSE(webdataset_key("dir/.hidden.jpg", key, ext));
}

TEST(WebDatasetTest, SamplesEqualImagesDirsForTheSameFiles) {
  TempDir dir;
  fs::create_directories(dir / "shards");
  write_shards(dir / "shards", 2, 4);
  fs::create_directories(dir / "folder" / "c");
  for (int n = 0; n < 8; ++n) {
    char name[16];
    std::snprintf(name, sizeof name, "%03d.jpg", n);
    const auto bytes = jpeg(static_cast<std::uint64_t>(n));
    std::ofstream(dir / "folder" / "c" / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  auto shards = std::make_shared<WebDataset>(options(dir / "shards"));
  ImageFolderDataset::Options fo = options(dir.path()).image;
  fo.root = (dir / "folder").string();
  const ImageFolderDataset folder(fo);
  ShardPlan plan;
  plan.shuffle = false;
  LoaderOptions lo;
  lo.num_workers = 1;
  lo.batch_size = 3;
  BatchLoader loader(shards, plan, lo);
  const std::vector<Sample> got = load_epoch(loader);
  ASSERT_EQ(got.size(), 8u);
  std::vector<float> expected(folder.spec().bytes() / sizeof(float));
  for (std::size_t n = 0; n < 8; ++n) {
    LoadContext ctx;
    folder.load(n, std::as_writable_bytes(std::span(expected)), ctx);
    EXPECT_EQ(got[n].pixels, expected) << "sample " << n;
    EXPECT_EQ(got[n].label, static_cast<std::int64_t>(n % 3));
  }
}

TEST(WebDatasetTest, TheShuffleBufferReordersSamplesSeededByEpoch) {
  TempDir dir;
  write_shards(dir.path(), 3, 6);
  auto data = std::make_shared<WebDataset>(options(dir.path()));
  const auto order = [&](bool shuffle, std::size_t buffer, std::uint64_t seed, std::uint64_t epoch) {
    ShardPlan plan;
    plan.shuffle = shuffle;
    plan.shuffle_buffer = buffer;
    plan.seed = seed;
    LoaderOptions lo;
    lo.num_workers = 0;
    lo.batch_size = 4;
    BatchLoader loader(data, plan, lo);
    loader.begin_epoch(epoch);
    std::vector<float> firsts;  // one pixel per sample tells the samples apart
    for (const Sample& s : load_epoch(loader)) firsts.push_back(s.pixels[0] + s.pixels[100] * 7);
    return firsts;
  };
  const auto plain = order(false, 0, 0, 0);
  ASSERT_EQ(plain.size(), 18u);
  const auto a = order(true, 8, 1, 0);
  EXPECT_EQ(a, order(true, 8, 1, 0));
  EXPECT_NE(a, plain);
  EXPECT_NE(a, order(true, 8, 1, 1));
  auto sorted = [](std::vector<float> v) { std::sort(v.begin(), v.end()); return v; };
  EXPECT_EQ(sorted(a), sorted(plain));  // every sample once
}

TEST(WebDatasetTest, OtherMembersUpperCaseExtensionsAndALabelKey) {
  TempDir dir;
  {
    TarWriter tar((dir / "x.tar").string());
    tar.add("README", text("not a sample"));
    tar.add("p/a.json", text("{}"));
    tar.add("p/a.JPEG", jpeg(0));
    tar.add("p/a.label.txt", text(" 2\n"));
    tar.add("p/b.JPG", jpeg(1));
    tar.add("p/b.label.txt", text("1"));
    tar.finish();
  }
  WebDataset::Options o = options(dir / "x.tar");
  o.label_key = "label.txt";
  auto data = std::make_shared<WebDataset>(o);
  ShardPlan plan;
  plan.shuffle = false;
  BatchLoader loader(data, plan, LoaderOptions{});
  const std::vector<Sample> got = load_epoch(loader);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].label, 2);
  EXPECT_EQ(got[1].label, 1);
}

// Shard s-0 with a bad sample planted by `plant` among good ones, then a good shard s-1.
std::shared_ptr<WebDataset> with_bad(const TempDir& dir, const std::function<void(TarWriter&)>& plant) {
  {
    TarWriter tar((dir / "s-0.tar").string());
    tar.add("000.jpg", jpeg(0));
    tar.add("000.cls", text("0"));
    plant(tar);
    tar.add("002.jpg", jpeg(2));
    tar.add("002.cls", text("2"));
    tar.finish();
    TarWriter good((dir / "s-1.tar").string());
    good.add("003.jpg", jpeg(3));
    good.add("003.cls", text("0"));
    good.finish();
  }
  return std::make_shared<WebDataset>(options(dir.path()));
}

std::string first_error(const std::shared_ptr<WebDataset>& data) {
  ShardPlan plan;
  plan.shuffle = false;
  BatchLoader loader(data, plan, LoaderOptions{});
  try {
    load_epoch(loader);
  } catch (const SampleError& e) {
    return e.what();
  }
  return "";
}

TEST(WebDatasetTest, BadSamplesNameTheShardAndTheMember) {
  const std::map<std::string, std::function<void(TarWriter&)>> cases = {
      {"member '001.jpg'", [](TarWriter& t) { t.add("001.jpg", text("not a jpeg")), t.add("001.cls", text("1")); }},
      {"has no .cls member", [](TarWriter& t) { t.add("001.jpg", jpeg(1)); }},
      {"has no image member", [](TarWriter& t) { t.add("001.cls", text("1")); }},
      {"holds 'one', not an integer label", [](TarWriter& t) { t.add("001.jpg", jpeg(1)), t.add("001.cls", text("one")); }},
      {"label 7 is outside 0..2", [](TarWriter& t) { t.add("001.jpg", jpeg(1)), t.add("001.cls", text("7")); }},
  };
  for (const auto& [expected, plant] : cases) {
    TempDir dir;
    const std::string what = first_error(with_bad(dir, plant));
    EXPECT_NE(what.find((dir / "s-0.tar").string()), std::string::npos) << what;
    EXPECT_NE(what.find(expected), std::string::npos) << what;
  }
}

TEST(WebDatasetTest, SkipListsTheBadSampleAndReadsTheRest) {
  TempDir dir;
  auto data = with_bad(dir, [](TarWriter& t) { t.add("001.jpg", text("not a jpeg")), t.add("001.cls", text("1")); });
  ShardPlan plan;
  plan.shuffle = false;
  LoaderOptions lo;
  lo.bad_sample = BadSamplePolicy::skip;
  lo.max_bad_ratio = 0.5;
  BatchLoader loader(data, plan, lo);
  const std::vector<Sample> got = load_epoch(loader);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].label, 2);  // 002, after the bad 001 in the same shard
  const DataErrors errors = loader.data_errors();
  EXPECT_EQ(errors.bad, 1u);
  ASSERT_EQ(errors.examples.size(), 1u);
  EXPECT_EQ(errors.examples[0].source, (dir / "s-0.tar").string() + " member '001.jpg'");
}

TEST(WebDatasetTest, ATruncatedShardStopsNamingItsMemberOrIsSkippedToTheNextShard) {
  TempDir dir;
  auto data = with_bad(dir, [](TarWriter& t) { t.add("001.jpg", jpeg(1)), t.add("001.cls", text("1")); });
  const std::string shard = (dir / "s-0.tar").string();
  {
    // Cut inside 002.jpg: 000.jpg, 000.cls, 001.jpg, 001.cls come first.
    TarReader tar(shard);
    TarMember m;
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(tar.next(m));
    ASSERT_EQ(m.name, "002.jpg");
    fs::resize_file(shard, m.offset + 512 + m.size / 2);
  }
  const std::string what = first_error(data);
  EXPECT_NE(what.find(shard + " member '002.jpg'"), std::string::npos) << what;
  EXPECT_NE(what.find("truncated"), std::string::npos) << what;

  ShardPlan plan;
  plan.shuffle = false;
  LoaderOptions lo;
  lo.bad_sample = BadSamplePolicy::skip;
  lo.max_bad_ratio = 0.5;
  BatchLoader loader(data, plan, lo);
  const std::vector<Sample> got = load_epoch(loader);
  ASSERT_EQ(got.size(), 3u);  // 000, 001, then s-1's 003
  EXPECT_EQ(loader.data_errors().bad, 1u);
}

TEST(WebDatasetTest, APatternMatchingNothingNamesIt) {
  TempDir dir;
  try {
    WebDataset d(options(dir.path()));
    FAIL();
  } catch (const DatasetError& e) {
    EXPECT_NE(std::string(e.what()).find("pattern '" + dir.path().string() + "' matches no shard"), std::string::npos)
        << e.what();
  }
}

TEST(WebDatasetTest, MakeWebDatasetWritesTheImagesJpegsInShards) {
  TempDir dir;
  ShardDatasetOptions o;
  o.images.out = (dir / "w").string();
  o.images.count = 7;
  o.images.width = kW;
  o.images.height = kH;
  o.images.classes = 3;
  o.shard_samples = 3;
  const ShardDatasetSummary s = make_webdataset(o);
  EXPECT_EQ(s.shards, 3);
  EXPECT_EQ(s.samples, 7);
  TarReader tar((dir / "w" / "shard-000002.tar").string());
  TarMember m;
  std::vector<std::uint8_t> data;
  ASSERT_TRUE(tar.next(m));
  EXPECT_EQ(m.name, "00000006.jpg");
  tar.read(data);
  JpegEncodeOptions q;
  q.quality = o.images.quality;
  EXPECT_EQ(data, encode_jpeg(synthetic_photo(kW, kH, 0, 3, 0, 6), kW, kH, q));
  ASSERT_TRUE(tar.next(m));
  tar.read(data);
  EXPECT_EQ(std::string(data.begin(), data.end()), "0");
  EXPECT_FALSE(tar.next(m));
  o.shard_samples = 0;
  o.images.out = (dir / "v").string();
  EXPECT_THROW(make_webdataset(o), DatasetError);
}

}  // namespace
}  // namespace feedscope
