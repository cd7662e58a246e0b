#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>

#include "loader/record_dataset.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(RecordWriterTest, SplitsShardsAtTheByteBudgetAndRefusesAnExistingDataset) {
  TempDir dir;
  RecordWriterOptions o;
  o.spec = SampleSpec{{100}, DType::uint8};
  o.shard_bytes = 88 + 3 * 124;  // header + 3 records of 24 + 100 bytes
  {
    RecordWriter writer(dir.path(), o);
    for (int i = 0; i < 10; ++i) writer.append(i % 2, std::vector<std::byte>(100));
    writer.finish();
    EXPECT_EQ(writer.shards(), 4u);
  }
  EXPECT_EQ(fs::file_size(dir / "shard-00000.rec"), 88u + 3 * 124);
  EXPECT_EQ(fs::file_size(dir / "shard-00003.rec"), 88u + 124);
  EXPECT_EQ(RecordDataset(dir.path()).num_classes(), 2) << "1 + the largest label";
  try {
    RecordWriter again(dir.path(), o);
    FAIL() << "overwrote a dataset";
  } catch (const DatasetError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path().string()), std::string::npos) << e.what();
  }
}

TEST(RecordWriterTest, RejectsRecordsThatDoNotFitTheSpec) {
  TempDir dir;
  RecordWriterOptions o;
  o.spec = SampleSpec{{16}, DType::uint8};
  RecordWriter fixed(dir / "fixed", o);
  EXPECT_THROW(fixed.append(0, std::vector<std::byte>(15)), std::invalid_argument);
  EXPECT_THROW(fixed.append(-1, std::vector<std::byte>(16)), std::invalid_argument);
  o.variable = true;
  RecordWriter variable(dir / "variable", o);
  EXPECT_NO_THROW(variable.append(0, std::vector<std::byte>(3)));
  EXPECT_THROW(variable.append(0, std::vector<std::byte>(17)), std::invalid_argument);
  o.spec = SampleSpec{{2, 8}, DType::uint8};
  EXPECT_THROW(RecordWriter(dir / "bad", o), DatasetError) << "variable records are 1-D uint8";
}

TEST(RecordWriterTest, RejectsALabelOutsideItsClasses) {
  TempDir dir;
  RecordWriterOptions o;
  o.spec = SampleSpec{{4}, DType::uint8};
  o.num_classes = 3;
  RecordWriter writer(dir / "three", o);
  EXPECT_NO_THROW(writer.append(2, std::vector<std::byte>(4)));
  try {
    writer.append(3, std::vector<std::byte>(4));
    FAIL() << "wrote label 3 with 3 classes";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "records writer: label 3 is outside 0..2 (num_classes 3)");
  }
  o.num_classes = -1;
  EXPECT_THROW(RecordWriter(dir / "negative", o), DatasetError);
}

TEST(RecordWriterTest, UnfinishedWriteLeavesNoIndex) {
  TempDir dir;
  {
    RecordWriterOptions o;
    o.spec = SampleSpec{{8}, DType::uint8};
    RecordWriter writer(dir.path(), o);
    writer.append(0, std::vector<std::byte>(8));
  }
  EXPECT_TRUE(fs::exists(dir / "shard-00000.rec"));
  EXPECT_THROW(RecordDataset{dir.path()}, DatasetError);
}

TEST(MakeRecordsDatasetTest, DeterministicFromTheSeedAndReadableBack) {
  TempDir dir;
  MakeRecordsOptions o;
  o.count = 300;
  o.sample_bytes = 200;
  o.shard_bytes = 8192;
  o.classes = 4;
  o.seed = 11;
  for (bool variable : {false, true}) {
    o.variable = variable;
    o.out = dir / (variable ? "v1" : "f1");
    const MakeRecordsResult made = make_records_dataset(o);
    EXPECT_EQ(made.records, 300u);
    EXPECT_GT(made.shards, 5u);
    MakeRecordsOptions same = o;
    same.out = dir / (variable ? "v2" : "f2");
    make_records_dataset(same);
    MakeRecordsOptions other = o;
    other.out = dir / (variable ? "v3" : "f3");
    other.seed = 12;
    make_records_dataset(other);
    EXPECT_EQ(file_text(o.out / "shard-00002.rec"), file_text(same.out / "shard-00002.rec"));
    EXPECT_EQ(file_text(o.out / "records.index"), file_text(same.out / "records.index"));
    EXPECT_NE(file_text(o.out / "shard-00000.rec"), file_text(other.out / "shard-00000.rec"));

    RecordDataset dataset(o.out);
    EXPECT_EQ(dataset.variable(), variable);
    EXPECT_EQ(dataset.num_classes(), 4);
    std::vector<std::byte> out(200);
    LoadContext ctx;
    std::set<std::int64_t> labels;
    std::set<std::size_t> lengths;
    for (std::size_t i = 0; i < dataset.size(); ++i) {
      const std::int64_t label = dataset.load(i, out, ctx);
      EXPECT_EQ(label, made_record_label(o, i));
      labels.insert(label);
      const std::vector<std::byte> payload = made_record_payload(o, i);
      lengths.insert(payload.size());
      ASSERT_TRUE(std::equal(payload.begin(), payload.end(), out.begin())) << i;
      EXPECT_GE(payload.size(), variable ? 100u : 200u);
      EXPECT_LE(payload.size(), 200u);
    }
    EXPECT_EQ(labels.size(), 4u);
    EXPECT_GT(lengths.size(), variable ? 50u : 0u);
  }
}

TEST(MakeRecordsDatasetTest, BadValuesNameTheOption) {
  TempDir dir;
  const auto message = [&](auto change) {
    MakeRecordsOptions o;
    o.out = dir / "x";
    o.count = 10;
    o.sample_bytes = 10;
    change(o);
    try {
      make_records_dataset(o);
    } catch (const DatasetError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message([](MakeRecordsOptions& o) { o.count = 0; }).find("--count: 0"), std::string::npos);
  EXPECT_NE(message([](MakeRecordsOptions& o) { o.sample_bytes = 0; }).find("--sample-bytes: 0"),
            std::string::npos);
  EXPECT_NE(message([](MakeRecordsOptions& o) { o.shard_bytes = 0; }).find("--shard-bytes: 0"),
            std::string::npos);
  EXPECT_NE(message([](MakeRecordsOptions& o) { o.classes = 0; }).find("--classes: 0"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "x" / "records.index"));
}

}  // namespace
}  // namespace feedscope
