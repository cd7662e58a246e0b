#include "cli/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace feedscope {
namespace {

// The message must name the key and the value, and say what is allowed.
void expect_config_error(const std::function<void()>& fn, const std::string& key,
                         const std::vector<std::string>& fragments) {
  try {
    fn();
    FAIL() << "expected ConfigError for " << key;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), key);
    for (const auto& f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos)
          << "'" << f << "' missing from: " << e.what();
  }
}

TEST(ConfigTest, DefaultsAreValid) {
  RunConfig c;
  EXPECT_NO_THROW(validate_config(c));
  EXPECT_EQ(c.num_workers, 2);
}

TEST(ConfigTest, YamlSetsTypedValues) {
  RunConfig c;
  apply_yaml(c,
             "num_workers: 4\nbatch_size: 128\npin_memory: off\nlr: 0.1\n"
             "dataset: synthetic:784\ndevice: cuda:1\nloader_only: true\n",
             "run.yaml");
  EXPECT_EQ(c.num_workers, 4);
  EXPECT_EQ(c.batch_size, 128);
  EXPECT_FALSE(c.pin_memory);
  EXPECT_DOUBLE_EQ(c.lr, 0.1);
  EXPECT_EQ(c.dataset, "synthetic:784");
  EXPECT_EQ(c.device, "cuda:1");
  EXPECT_TRUE(c.loader_only);
}

TEST(ConfigTest, UnknownKeyIsNamedWithASuggestion) {
  RunConfig c;
  expect_config_error([&] { apply_yaml(c, "num_worker: 4\n", "run.yaml"); }, "num_worker",
                      {"unknown key 'num_worker'", "run.yaml:1", "did you mean 'num_workers'",
                       "allowed keys:"});
}

TEST(ConfigTest, NegativeWorkersIsOutOfRange) {
  RunConfig c;
  expect_config_error([&] { set_config_value(c, "num_workers", "-1", "--num-workers"); },
                      "num_workers", {"'-1'", "--num-workers", "out of range", "allowed: 0"});
}

TEST(ConfigTest, ZeroBatchSizeIsOutOfRange) {
  RunConfig c;
  expect_config_error([&] { apply_yaml(c, "batch_size: 0\n", "run.yaml"); }, "batch_size",
                      {"'0'", "run.yaml:1", "out of range", "allowed: 1 to"});
}

TEST(ConfigTest, WrongTypesAreNamed) {
  RunConfig c;
  expect_config_error([&] { set_config_value(c, "batch_size", "sixty", "x.yaml"); }, "batch_size",
                      {"'sixty'", "not an integer"});
  expect_config_error([&] { set_config_value(c, "lr", "fast", "x.yaml"); }, "lr",
                      {"'fast'", "not a number"});
  expect_config_error([&] { set_config_value(c, "pin_memory", "maybe", "x.yaml"); }, "pin_memory",
                      {"'maybe'", "on | off"});
  expect_config_error([&] { set_config_value(c, "num_workers", "2.5", "x.yaml"); }, "num_workers",
                      {"not an integer"});
}

TEST(ConfigTest, UnknownDeviceIsNamedWithTheChoices) {
  RunConfig c;
  expect_config_error([&] { set_config_value(c, "device", "tpu", "--device"); }, "device",
                      {"'tpu'", "auto | cpu | cuda | cuda:N"});
  expect_config_error([&] { set_config_value(c, "device", "cuda:-1", "--device"); }, "device", {});
  EXPECT_NO_THROW(set_config_value(c, "device", "cuda:3", "--device"));
}

TEST(ConfigTest, DatasetSpecIsChecked) {
  RunConfig c;
  expect_config_error([&] { set_config_value(c, "dataset", "imagenet", "x"); }, "dataset",
                      {"KIND:VALUE", "synthetic:SHAPE"});
  expect_config_error([&] { set_config_value(c, "dataset", "lmdb:/x", "x"); }, "dataset",
                      {"unknown kind 'lmdb'", "webdataset:PATTERN"});
  expect_config_error([&] { set_config_value(c, "dataset", "synthetic:3xbad", "x"); }, "dataset",
                      {"bad shape"});
  EXPECT_NO_THROW(set_config_value(c, "dataset", "images:/data/train", "x"));
  EXPECT_NO_THROW(set_config_value(c, "dataset", "webdataset:/data/train-{000000..000146}.tar", "x"));
  EXPECT_NO_THROW(set_config_value(c, "dataset", "tfrecord:/data/train-{00000..01023}-of-01024", "x"));
  expect_config_error([&] { set_config_value(c, "label_key", ".cls", "x"); }, "label_key", {"'.cls'", "cls"});
}

TEST(ConfigTest, NonScalarValuesAndBadYamlAreErrors) {
  RunConfig c;
  expect_config_error([&] { apply_yaml(c, "num_workers: [1, 2]\n", "run.yaml"); }, "num_workers",
                      {"single value", "a list"});
  expect_config_error([&] { apply_yaml(c, "num_workers: 2\n  bad: [\n", "bad.yaml"); }, "",
                      {"bad.yaml:", "not valid YAML"});
  expect_config_error([&] { apply_yaml(c, "- 1\n- 2\n", "list.yaml"); }, "", {"top level"});
  // Found by fuzz/config_fuzz.cc: a complex key escaped as YAML::TypedBadConversion, so the CLI
  // exited 4 (runtime failure) instead of 2 (bad config).
  expect_config_error([&] { apply_yaml(c, "? :\n", "key.yaml"); }, "",
                      {"key.yaml:1", "a key must be a name", "not a map"});
  expect_config_error([&] { apply_yaml(c, ": 3\n", "key.yaml"); }, "", {"not null"});
  expect_config_error([&] { apply_yaml(c, "? [steps, warmup]\n: 3\n", "key.yaml"); }, "",
                      {"key.yaml:1", "not a list", "allowed keys"});
  expect_config_error([&] { apply_yaml(c, "{seed: 1}: 3\n", "key.yaml"); }, "", {"not a map"});
  EXPECT_NO_THROW(apply_yaml(c, "", "empty.yaml"));
}

TEST(ConfigTest, StepsAndDurationLaterSourceWinsButNotBothInOneFile) {
  RunConfig c;
  expect_config_error([&] { apply_yaml(c, "steps: 10\nduration: 5\n", "run.yaml"); }, "duration",
                      {"both steps and duration"});
  RunConfig d;
  apply_yaml(d, "duration: 5\n", "run.yaml");
  set_config_value(d, "steps", "50", "--steps");
  EXPECT_EQ(d.duration, 0);
  EXPECT_EQ(d.steps, 50);
}

TEST(ConfigTest, HyphenatedKeysAreAccepted) {
  RunConfig c;
  set_config_value(c, "num-workers", "3", "--num-workers");
  EXPECT_EQ(c.num_workers, 3);
}

TEST(ConfigTest, CnnNeedsImageShapedSamples) {
  RunConfig c;
  c.model = "cnn";
  c.dataset = "synthetic:784";
  expect_config_error([&] { validate_config(c); }, "model", {"cnn", "CxHxW"});
  c.dataset = "synthetic:3x16x16";
  EXPECT_NO_THROW(validate_config(c));
}

TEST(ConfigTest, MissingFileIsNamed) {
  RunConfig c;
  expect_config_error([&] { apply_yaml_file(c, "/no/such/run.yaml"); }, "config",
                      {"/no/such/run.yaml"});
}

TEST(ConfigTest, EntriesCoverEveryKeyWithItsType) {
  const auto entries = config_entries(RunConfig{});
  EXPECT_EQ(entries.size(), config_keys().size());
  for (const auto& [key, value] : entries) {
    if (key == "num_workers") {
      EXPECT_TRUE(std::holds_alternative<std::int64_t>(value));
    } else if (key == "pin_memory") {
      EXPECT_TRUE(std::holds_alternative<bool>(value));
    } else if (key == "lr") {
      EXPECT_TRUE(std::holds_alternative<double>(value));
    }
  }
}

TEST(ConfigTest, ExampleConfigsInTheRepositoryLoad) {
  for (const auto& entry : std::filesystem::directory_iterator(FEEDSCOPE_SOURCE_DIR "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    RunConfig c;
    EXPECT_NO_THROW(apply_yaml_file(c, entry.path().string())) << entry.path();
    EXPECT_NO_THROW(validate_config(c)) << entry.path();
  }
}

TEST(ConfigTest, BadSamplePolicyAndRatioAreChecked) {
  RunConfig c;
  set_config_value(c, "bad-sample", "skip", "--bad-sample");
  set_config_value(c, "max_bad_ratio", "0.25", "--max-bad-ratio");
  EXPECT_EQ(c.bad_sample, "skip");
  EXPECT_DOUBLE_EQ(c.max_bad_ratio, 0.25);
  try {
    set_config_value(c, "bad_sample", "ignore", "run.yaml:3");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "bad_sample");
    EXPECT_NE(std::string(e.what()).find("fail | skip"), std::string::npos) << e.what();
  }
  EXPECT_THROW(set_config_value(c, "max_bad_ratio", "1.5", "x"), ConfigError);
  EXPECT_THROW(set_config_value(c, "max_bad_ratio", "-0.1", "x"), ConfigError);
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ConfigTest, PlacementComesFromKeysElseTorchrunVariables) {
  ScopedEnv rank("RANK", nullptr), world("WORLD_SIZE", nullptr);
  RunConfig c;
  Placement p = resolve_placement(c);
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.world_size, 1);
  EXPECT_FALSE(p.labelled);
  {
    ScopedEnv r("RANK", "3"), w("WORLD_SIZE", "8");
    p = resolve_placement(c);
    EXPECT_EQ(p.rank, 3);
    EXPECT_EQ(p.world_size, 8);
    EXPECT_TRUE(p.labelled);
    set_config_value(c, "world_size", "2", "--world-size");
    try {
      resolve_placement(c);
      FAIL() << "rank 3 of 2 accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "rank");
      EXPECT_NE(std::string(e.what()).find("rank: 3 is not below world_size 2"), std::string::npos);
    }
    set_config_value(c, "rank", "1", "--rank");
    EXPECT_EQ(resolve_placement(c).rank, 1);
  }
  {
    ScopedEnv w("WORLD_SIZE", "zero");
    try {
      resolve_placement(RunConfig{});
      FAIL();
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("$WORLD_SIZE: 'zero'"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(set_config_value(c, "world_size", "-1", "x"), ConfigError);
}

}  // namespace
}  // namespace feedscope

namespace feedscope {
namespace autotune_config_test {

TEST(ConfigAuto, NumWorkersAndPrefetchTakeAutoAndTheReportSaysAuto) {
  RunConfig c;
  set_config_value(c, "num-workers", "auto", "--num-workers");
  apply_yaml(c, "prefetch: auto\nmax_workers: 3\nram_budget_mib: 256\n", "auto.yaml");
  EXPECT_EQ(c.num_workers, kAutoValue);
  EXPECT_EQ(c.prefetch, kAutoValue);
  EXPECT_EQ(c.max_workers, 3);
  EXPECT_EQ(c.ram_budget_mib, 256);
  std::map<std::string, ConfigValue> entries;
  for (auto& [key, value] : config_entries(c)) entries[key] = value;
  EXPECT_EQ(std::get<std::string>(entries.at("num_workers")), "auto");
  EXPECT_EQ(std::get<std::string>(entries.at("prefetch")), "auto");
  EXPECT_EQ(std::get<std::int64_t>(entries.at("max_workers")), 3);
  set_config_value(c, "num_workers", "4", "--num-workers");
  EXPECT_EQ(c.num_workers, 4);
}

TEST(ConfigAuto, OnlyTheTunedKnobsTakeAutoAndNegativesStayOut) {
  RunConfig c;
  EXPECT_THROW(set_config_value(c, "batch_size", "auto", "--batch-size"), ConfigError);
  EXPECT_THROW(set_config_value(c, "num_workers", "-1", "--num-workers"), ConfigError);
  EXPECT_THROW(set_config_value(c, "max_workers", "auto", "--max-workers"), ConfigError);
  try {
    set_config_value(c, "num_workers", "many", "--num-workers");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("or auto"), std::string::npos) << e.what();
  }
}

}  // namespace autotune_config_test
}  // namespace feedscope
