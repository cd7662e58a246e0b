#pragma once
// The run configuration: one table of keys drives the YAML loader, the command-line options, the
// validation messages and the report's "config" section, so the four never disagree.
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/report.h"

namespace feedscope {

// num_workers and prefetch given as "auto" (LoaderOptions' kAuto): tuned while training runs.
inline constexpr std::int64_t kAutoValue = -1;

struct RunConfig {
  std::string dataset = "synthetic:3x32x32";
  std::int64_t synthetic_samples = 8192;
  std::string image_pipeline = "train";  // images:DIR: train (random crop + flip) | eval
  std::int64_t image_size = 224;
  bool reduced_decode = true;  // images:DIR: decode large JPEGs at 1/2..1/8 scale where accuracy allows
  std::string model = "mlp";
  std::int64_t hidden = 512;
  std::int64_t layers = 2;
  std::int64_t classes = 10;       // synthetic; webdataset/tfrecord: labels lie in 0..classes-1
  std::int64_t shuffle_buffer = 1000;  // webdataset/tfrecord: samples each worker shuffles among
  std::string label_key = "cls";  // webdataset: the label member's extension
  double lr = 0.05;
  bool loader_only = false;
  std::int64_t num_workers = 2;  // kAutoValue: tuned while training runs
  std::int64_t batch_size = 64;
  std::int64_t prefetch = 2;     // kAutoValue: tuned while training runs
  std::int64_t max_workers = 0;     // auto and tune: the most workers; 0: the cores
  std::int64_t ram_budget_mib = 0;  // auto and tune: slab memory; 0: a quarter of what is available
  bool pin_memory = true;
  bool shuffle = true;
  bool drop_last = false;          // the loader's: drop an epoch's last partial batch (DataLoader's)
  bool sampler_drop_last = false;  // world_size > 1: DistributedSampler's drop_last (cut, not pad)
  bool cold_cache = false;  // evict the dataset's files from the page cache before every epoch
  std::string device = "auto";
  std::int64_t cpu_threads = 0;  // a CPU step's threads; 0: the cores the workers leave
  std::int64_t steps = 200;
  double duration = 0;  // seconds; > 0 runs for a time instead of a step count
  std::int64_t warmup = 10;
  std::int64_t seed = 0;
  std::string report_dir = "feedscope-report";
  // Where to record what the diagnosis read, for `feedscope replay` (exporters/recording.h); empty:
  // nowhere. The command line's `run` and `demo` fill it from $FEEDSCOPE_RECORD_DIR when unset.
  std::string record_dir;
  // Stage spans trace.json keeps (the first half and the latest half; the rest are counted):
  // 32 bytes each while the run lasts, about 100 in the file.
  std::int64_t trace_max_spans = 1'000'000;
  // The GPU trace: "whole", or "W/P", the device's records W seconds of every P after the first
  // gpu_trace_lead seconds from the first kernel (watch's --gpu-trace, --gpu-trace-lead).
  std::string gpu_trace = "1/10";
  double gpu_trace_lead = 5;
  double sample_hz = 10;  // utilization sampling; 0 turns the sampler off
  // timeseries.csv's size limit: past it the rows thin to every other one (0: no limit).
  std::int64_t timeseries_max_mib = 64;
  std::string metrics_addr;  // HOST:PORT of the Prometheus endpoint; empty: no endpoint
  std::int64_t rank = -1;    // -1: from $RANK (torchrun), else 0 and no rank label
  std::int64_t world_size = 0;  // 0: from $WORLD_SIZE (torchrun), else 1
  std::string bad_sample = "fail";  // fail | skip
  double max_bad_ratio = 0.01;
  std::string host;          // empty: this machine's hostname
  bool json = false;
};

// A bad key or value. what() names the key, the value, where it came from and what is allowed.
class ConfigError : public std::invalid_argument {
 public:
  ConfigError(std::string key, const std::string& message)
      : std::invalid_argument(message), key_(std::move(key)) {}
  const std::string& key() const noexcept { return key_; }

 private:
  std::string key_;
};

enum class KeyType { boolean, integer, number, text };

struct KeyInfo {
  std::string_view name;  // YAML key; the command-line option is --name with '-' for '_'
  KeyType type;
  std::string_view allowed;  // human text: "0 or more", "mlp|cnn"
  std::string_view help;
};
const std::vector<KeyInfo>& config_keys();

// Applies one key=value. `source` names where it came from ("config.yaml", "--num-workers") for
// the message. Accepts '-' for '_' in the key. Throws ConfigError.
void set_config_value(RunConfig& config, std::string_view key, const std::string& value,
                      const std::string& source);

// Applies a YAML document (a map of scalars) from text; `source` is its file name.
void apply_yaml(RunConfig& config, const std::string& yaml_text, const std::string& source);
// Reads and applies a YAML file; a missing or unreadable file is a ConfigError naming it.
void apply_yaml_file(RunConfig& config, const std::string& path);

// Checks the relations between keys (e.g. steps and duration); throws ConfigError.
void validate_config(const RunConfig& config);

// This process's share of a multi-process job, from rank/world_size or torchrun's $RANK and
// $WORLD_SIZE. `labelled` tells whether a rank was given at all (the metrics label it).
struct Placement {
  std::int64_t rank = 0;
  std::int64_t world_size = 1;
  bool labelled = false;
};
// Throws ConfigError naming the key or the variable: a bad $RANK/$WORLD_SIZE, rank >= world_size.
Placement resolve_placement(const RunConfig& config);

// The effective configuration as typed key/value pairs, in table order.
std::vector<std::pair<std::string, ConfigValue>> config_entries(const RunConfig& config);

// "key1, key2, ..." of every key.
std::string allowed_keys_text();

}  // namespace feedscope
