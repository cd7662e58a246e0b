#include "loader/tfrecord_dataset.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "loader/batch_loader.h"
#include "loader/detail/tf_example.h"
#include "loader/image_folder_dataset.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using Bytes = std::vector<std::uint8_t>;

Bytes text_bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(TfRecordTest, FramingMatchesTensorFlows) {
  // Computed by a bitwise CRC32C in Python (crc32c(b"123456789") = 0xe3069283) and TensorFlow's
  // mask: independent of this library's CRC32C.
  EXPECT_EQ(detail::tfrecord_masked_crc("123456789", 9), 0xc78ab0e5u);
  EXPECT_EQ(detail::tfrecord_frame({}),
            (Bytes{0, 0, 0, 0, 0, 0, 0, 0, 0x29, 0x03, 0x98, 0x07, 0xd8, 0xea, 0x82, 0xa2}));
}

TEST(TfRecordTest, ParsesAnExampleThatProtobufSerialized) {
  // tf.train.Example serialized by Python's protobuf (3.21, the Debian package) from example.proto's
  // descriptor: image/height, image/class/label 417, image/class/text, image/encoded and a float
  // list, as an ImageNet record carries them, map entries in protobuf's order.
  const Bytes example = {
      0x0a, 0xa2, 0x01, 0x0a, 0x1b, 0x0a, 0x11, 0x69, 0x6d, 0x61, 0x67, 0x65, 0x2f, 0x63, 0x6c, 0x61, 0x73, 0x73,
      0x2f, 0x6c, 0x61, 0x62, 0x65, 0x6c, 0x12, 0x06, 0x1a, 0x04, 0x0a, 0x02, 0xa1, 0x03, 0x0a, 0x1f, 0x0a, 0x10,
      0x69, 0x6d, 0x61, 0x67, 0x65, 0x2f, 0x63, 0x6c, 0x61, 0x73, 0x73, 0x2f, 0x74, 0x65, 0x78, 0x74, 0x12, 0x0b,
      0x0a, 0x09, 0x0a, 0x07, 0x62, 0x61, 0x6c, 0x6c, 0x6f, 0x6f, 0x6e, 0x0a, 0x22, 0x0a, 0x0d, 0x69, 0x6d, 0x61,
      0x67, 0x65, 0x2f, 0x65, 0x6e, 0x63, 0x6f, 0x64, 0x65, 0x64, 0x12, 0x11, 0x0a, 0x0f, 0x0a, 0x0d, 0xff, 0xd8,
      0x4a, 0x50, 0x45, 0x47, 0x42, 0x59, 0x54, 0x45, 0x53, 0xff, 0xd9, 0x0a, 0x16, 0x0a, 0x0c, 0x69, 0x6d, 0x61,
      0x67, 0x65, 0x2f, 0x68, 0x65, 0x69, 0x67, 0x68, 0x74, 0x12, 0x06, 0x1a, 0x04, 0x0a, 0x02, 0xf7, 0x02, 0x0a,
      0x26, 0x0a, 0x16, 0x69, 0x6d, 0x61, 0x67, 0x65, 0x2f, 0x6f, 0x62, 0x6a, 0x65, 0x63, 0x74, 0x2f, 0x62, 0x62,
      0x6f, 0x78, 0x2f, 0x78, 0x6d, 0x69, 0x6e, 0x12, 0x0c, 0x12, 0x0a, 0x0a, 0x08, 0x00, 0x00, 0x80, 0x3e, 0x00,
      0x00, 0x00, 0x3f};
  const detail::ExampleImage parsed = detail::parse_example(example, kTfImageKey, kTfLabelKey);
  EXPECT_EQ(std::string(parsed.image.begin(), parsed.image.end()), "\xff\xd8JPEGBYTES\xff\xd9");
  EXPECT_EQ(parsed.label, 417);
  // The label as image/height: any int64 feature can be asked for.
  EXPECT_EQ(detail::parse_example(example, kTfImageKey, "image/height").label, 375);
}

TEST(TfRecordTest, EncodeRoundTripsAnUnpackedLabelAndNamedErrors) {
  const Bytes image = text_bytes("pixels");
  const Bytes example = detail::encode_example(kTfImageKey, image, kTfLabelKey, 123456789012, {{"image/format", "JPEG"}});
  const detail::ExampleImage parsed = detail::parse_example(example, kTfImageKey, kTfLabelKey);
  EXPECT_EQ(Bytes(parsed.image.begin(), parsed.image.end()), image);
  EXPECT_EQ(parsed.label, 123456789012);
  // Int64List { value: 5 } unpacked (wire type 0), which parsers must accept too.
  const std::string key = kTfLabelKey;
  Bytes entry = {0x0a, static_cast<std::uint8_t>(key.size())};
  entry.insert(entry.end(), key.begin(), key.end());
  for (std::uint8_t b : {0x12, 0x04, 0x1a, 0x02, 0x08, 0x05}) entry.push_back(b);
  Bytes unpacked = detail::encode_example(kTfImageKey, image, "other", 0);
  unpacked[1] += static_cast<std::uint8_t>(entry.size() + 2);  // the Features length (one byte here)
  ASSERT_LT(unpacked[1], 0x80);
  unpacked.push_back(0x0a);
  unpacked.push_back(static_cast<std::uint8_t>(entry.size()));
  unpacked.insert(unpacked.end(), entry.begin(), entry.end());
  EXPECT_EQ(detail::parse_example(unpacked, kTfImageKey, kTfLabelKey).label, 5);

  const auto error = [](const Bytes& e, const char* image_key, const char* label_key) {
    try {
      detail::parse_example(e, image_key, label_key);
    } catch (const std::runtime_error& x) {
      return std::string(x.what());
    }
    return std::string();
  };
  EXPECT_NE(error(example, "image/missing", kTfLabelKey).find("no bytes feature 'image/missing'"), std::string::npos);
  EXPECT_NE(error(example, kTfImageKey, "image/format").find("'image/format' is a bytes_list, not the int64_list"),
            std::string::npos);
  const Bytes cut(example.begin(), example.end() - 3);
  EXPECT_NE(error(cut, kTfImageKey, kTfLabelKey).find("malformed tf.train.Example at byte"), std::string::npos);
}

struct Loaded {
  std::vector<float> pixels;
  std::int64_t label;
};

std::vector<Loaded> load_all(BatchLoader& loader) {
  std::vector<Loaded> out;
  const std::size_t n = loader.dataset().spec().bytes() / sizeof(float);
  while (std::optional<Batch> b = loader.next()) {
    const auto* p = reinterpret_cast<const float*>(b->data);
    for (std::int64_t i = 0; i < b->size; ++i) out.push_back({{p + i * n, p + (i + 1) * n}, b->labels[i]});
  }
  return out;
}

ImageDatasetOptions small(const fs::path& out, int count, int classes) {
  ImageDatasetOptions o;
  o.out = out.string();
  o.count = count;
  o.width = 40;
  o.height = 30;
  o.classes = classes;
  return o;
}

TfRecordDataset::Options options(const fs::path& pattern, int classes) {
  TfRecordDataset::Options o;
  o.pattern = pattern.string();
  o.image.train = false;
  o.image.size = 16;
  o.classes = classes;
  return o;
}

TEST(TfRecordTest, SamplesEqualImagesDirsForTheSameJpegs) {
  TempDir dir;
  make_tfrecord_dataset({small(dir / "tf", 7, 1), 3});
  make_image_dataset(small(dir / "img", 7, 1));
  EXPECT_TRUE(fs::exists(dir / "tf" / "train-00002-of-00003"));
  auto data = std::make_shared<TfRecordDataset>(options(dir / "tf", 1));
  ImageFolderDataset::Options fo = options(dir.path(), 1).image;
  fo.root = (dir / "img").string();
  const ImageFolderDataset folder(fo);
  ShardPlan plan;
  plan.shuffle = false;
  LoaderOptions lo;
  lo.num_workers = 1;
  lo.batch_size = 2;
  BatchLoader loader(data, plan, lo);
  const std::vector<Loaded> got = load_all(loader);
  ASSERT_EQ(got.size(), 7u);
  std::vector<float> expected(folder.spec().bytes() / sizeof(float));
  for (std::size_t n = 0; n < got.size(); ++n) {
    LoadContext ctx;
    folder.load(n, std::as_writable_bytes(std::span(expected)), ctx);
    EXPECT_EQ(got[n].pixels, expected) << "sample " << n;
  }
}

// Flips one byte of `file` at `offset`.
void flip(const fs::path& file, std::uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  const char c = static_cast<char>(f.get());
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x40));
}

std::uint64_t record_bytes(const fs::path& file, int record) {
  std::ifstream in(file, std::ios::binary);
  std::uint64_t at = 0;
  for (int r = 0; r < record; ++r) {
    std::uint64_t length = 0;
    in.seekg(static_cast<std::streamoff>(at));
    in.read(reinterpret_cast<char*>(&length), 8);
    at += 16 + length;
  }
  return at;
}

struct Outcome {
  std::vector<Loaded> samples;
  DataErrors errors;
  std::string error;
};

Outcome run_epoch(const std::shared_ptr<TfRecordDataset>& data, BadSamplePolicy policy) {
  ShardPlan plan;
  plan.shuffle = false;
  LoaderOptions lo;
  lo.num_workers = 0;
  lo.batch_size = 4;
  lo.bad_sample = policy;
  lo.max_bad_ratio = 0.5;
  BatchLoader loader(data, plan, lo);
  Outcome r;
  try {
    r.samples = load_all(loader);
  } catch (const SampleError& e) {
    r.error = e.what();
  }
  r.errors = loader.data_errors();
  return r;
}

TEST(TfRecordTest, ACorruptRecordIsNamedAndSkippedWhereTheFramingHolds) {
  TempDir dir;
  make_tfrecord_dataset({small(dir / "tf", 8, 2), 4});
  const fs::path shard = dir / "tf" / "train-00000-of-00002";
  // Record 1's data: its checksum fails, the framing holds, records 2 and 3 are read.
  const std::uint64_t record1 = record_bytes(shard, 1);
  flip(shard, record1 + 12 + 40);
  auto data = std::make_shared<TfRecordDataset>(options(dir / "tf", 2));
  Outcome fail = run_epoch(data, BadSamplePolicy::fail);
  EXPECT_NE(fail.error.find(shard.string() + " record 1 at byte " + std::to_string(record1)), std::string::npos)
      << fail.error;
  EXPECT_NE(fail.error.find("data checksum mismatch"), std::string::npos) << fail.error;
  Outcome skip = run_epoch(data, BadSamplePolicy::skip);
  EXPECT_EQ(skip.samples.size(), 7u);
  EXPECT_EQ(skip.errors.bad, 1u);

  // Record 2's length: the rest of that shard cannot be framed; the next shard is read whole.
  flip(shard, record_bytes(shard, 2) + 1);
  skip = run_epoch(data, BadSamplePolicy::skip);
  EXPECT_EQ(skip.samples.size(), 5u);  // record 0, then the 4 of the other shard
  ASSERT_EQ(skip.errors.examples.size(), 2u);
  EXPECT_NE(skip.errors.examples[1].message.find("length checksum mismatch"), std::string::npos)
      << skip.errors.examples[1].message;
}

TEST(TfRecordTest, ATruncatedFileEndsItsShard) {
  TempDir dir;
  make_tfrecord_dataset({small(dir / "tf", 8, 2), 4});
  const fs::path shard = dir / "tf" / "train-00001-of-00002";
  fs::resize_file(shard, record_bytes(shard, 3) + 100);
  auto data = std::make_shared<TfRecordDataset>(options(dir / "tf", 2));
  const Outcome fail = run_epoch(data, BadSamplePolicy::fail);
  EXPECT_NE(fail.error.find(shard.string() + " record 3"), std::string::npos) << fail.error;
  EXPECT_NE(fail.error.find("truncated"), std::string::npos) << fail.error;
  EXPECT_EQ(run_epoch(data, BadSamplePolicy::skip).samples.size(), 7u);
}

}  // namespace
}  // namespace feedscope
