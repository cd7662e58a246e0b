#include "cli/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <variant>

#include <yaml-cpp/yaml.h>

#include "loader/synthetic_dataset.h"
#include "pinned_memory/device_probe.h"
#include "profiler/trace_sampling.h"

namespace feedscope {

namespace {

using Field = std::variant<bool RunConfig::*, std::int64_t RunConfig::*, double RunConfig::*,
                           std::string RunConfig::*>;

struct KeySpec {
  KeyInfo info;
  Field field;
  double min = 0;
  double max = 0;
  // For text keys: throws ConfigError when the value is not allowed.
  void (*check)(const std::string& key, const std::string& value, const std::string& source) =
      nullptr;
  bool takes_auto = false;  // an integer key that also takes "auto" (kAutoValue): tuned while running
};

[[noreturn]] void fail(const std::string& key, const std::string& value, const std::string& source,
                       const std::string& why, std::string_view allowed) {
  throw ConfigError(key, key + ": '" + value + "' (from " + source + ") " + why + "; allowed: " +
                             std::string(allowed));
}

void check_dataset(const std::string& key, const std::string& value, const std::string& source) {
  constexpr std::string_view allowed =
      "images:DIR | webdataset:PATTERN | tfrecord:PATTERN | records:DIR | synthetic:SHAPE (e.g. 3x32x32)";
  const std::size_t colon = value.find(':');
  if (colon == std::string::npos || colon + 1 == value.size())
    fail(key, value, source, "is not KIND:VALUE", allowed);
  const std::string kind = value.substr(0, colon);
  if (kind == "synthetic") {
    try {
      parse_shape(value.substr(colon + 1));
    } catch (const DatasetError& e) {
      fail(key, value, source, std::string("has a bad shape (") + e.what() + ")", allowed);
    }
  } else if (kind != "images" && kind != "records" && kind != "webdataset" && kind != "tfrecord") {
    fail(key, value, source, "has unknown kind '" + kind + "'", allowed);
  }
}

void check_image_pipeline(const std::string& key, const std::string& value, const std::string& source) {
  if (value != "train" && value != "eval") fail(key, value, source, "is not an image pipeline", "train | eval");
}

void check_device(const std::string& key, const std::string& value, const std::string& source) {
  constexpr std::string_view allowed = "auto | cpu | cuda | cuda:N";
  if (value == "auto" || value == "cpu" || value == "cuda" || cuda_device_index(value)) return;
  fail(key, value, source, "is not a device", allowed);
}

constexpr std::string_view kGpuTraceAllowed = "whole | W/P seconds, 0 < W < P <= 3600 (e.g. 1/10)";

void check_gpu_trace(const std::string& key, const std::string& value, const std::string& source) {
  std::string why;
  if (!parse_trace_sampling(value, 0, why)) fail(key, value, source, "is not a tracing mode", kGpuTraceAllowed);
}

void check_model(const std::string& key, const std::string& value, const std::string& source) {
  if (value != "mlp" && value != "cnn") fail(key, value, source, "is not a built-in model", "mlp | cnn");
}

void check_address(const std::string& key, const std::string& value, const std::string& source) {
  constexpr std::string_view allowed = "HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464";
  if (value.empty()) return;  // no endpoint
  const std::size_t colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0) fail(key, value, source, "has no HOST:PORT", allowed);
  int port = -1;
  const char* begin = value.data() + colon + 1;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(begin, end, port);
  if (ec != std::errc() || ptr != end || port < 0 || port > 65535)
    fail(key, value, source, "has a bad port", allowed);
}

void check_bad_sample(const std::string& key, const std::string& value, const std::string& source) {
  if (value != "fail" && value != "skip")
    fail(key, value, source, "is not a bad-sample policy", "fail | skip");
}

void check_label_key(const std::string& key, const std::string& value, const std::string& source) {
  if (value.empty() || value.find('/') != std::string::npos || value.front() == '.')
    fail(key, value, source, "is not a member extension", "an extension without its dot, e.g. cls, label.txt");
}

void check_nonempty(const std::string& key, const std::string& value, const std::string& source) {
  if (value.empty()) fail(key, value, source, "is empty", "a directory path");
}

const std::vector<KeySpec>& specs() {
  constexpr double kNoMax = 1e18;
  static const std::vector<KeySpec> table = {
      {{"dataset", KeyType::text,
        "images:DIR | webdataset:PATTERN | tfrecord:PATTERN | records:DIR | synthetic:SHAPE",
        "what to load"}, &RunConfig::dataset, 0, 0, check_dataset},
      {{"synthetic_samples", KeyType::integer, "1 to 100000000",
        "samples in a synthetic dataset"}, &RunConfig::synthetic_samples, 1, 1e8},
      {{"image_pipeline", KeyType::text, "train | eval",
        "images:DIR transforms: RandomResizedCrop + flip, or Resize + CenterCrop"},
       &RunConfig::image_pipeline, 0, 0, check_image_pipeline},
      {{"image_size", KeyType::integer, "8 to 1024", "output side of images:DIR samples"},
       &RunConfig::image_size, 8, 1024},
      {{"reduced_decode", KeyType::boolean, "on | off",
        "images:DIR: decode a large JPEG at 1/2, 1/4 or 1/8 scale where the crop stays 3x the output "
        "(off: always full size, as PIL)"},
       &RunConfig::reduced_decode},
      {{"model", KeyType::text, "mlp | cnn", "built-in model to train"}, &RunConfig::model, 0, 0,
       check_model},
      {{"hidden", KeyType::integer, "1 to 65536", "hidden width of the mlp / channels of the cnn"},
       &RunConfig::hidden, 1, 65536},
      {{"layers", KeyType::integer, "1 to 64", "hidden layers of the mlp / conv blocks of the cnn"},
       &RunConfig::layers, 1, 64},
      {{"classes", KeyType::integer, "2 to 100000",
        "classes of a synthetic dataset; of webdataset/tfrecord shards (a label outside 0..classes-1 is a bad sample)"},
       &RunConfig::classes, 2, 100000},
      {{"shuffle_buffer", KeyType::integer, "0 to 1000000",
        "webdataset/tfrecord with shuffle on: samples each worker holds to shuffle (0 or 1: the shards' own order)"},
       &RunConfig::shuffle_buffer, 0, 1e6},
      {{"label_key", KeyType::text, "a member extension, e.g. cls",
        "webdataset: the member holding a sample's label (an integer in text)"},
       &RunConfig::label_key, 0, 0, check_label_key},
      {{"lr", KeyType::number, "greater than 0, at most 10", "SGD learning rate"}, &RunConfig::lr,
       1e-12, 10},
      {{"loader_only", KeyType::boolean, "on | off", "no training step: pure loader throughput"},
       &RunConfig::loader_only},
      {{"num_workers", KeyType::integer, "0 (load in the training thread) to 256, or auto",
        "loader worker threads; auto: tuned while training runs, within max_workers"},
       &RunConfig::num_workers, 0, 256, nullptr, true},
      {{"batch_size", KeyType::integer, "1 to 1048576", "samples per batch"},
       &RunConfig::batch_size, 1, 1048576},
      {{"prefetch", KeyType::integer, "1 to 64, or auto",
        "batches in flight per worker; auto: tuned while training runs, within ram_budget_mib"},
       &RunConfig::prefetch, 1, 64, nullptr, true},
      {{"max_workers", KeyType::integer, "0 (the cores) to 256",
        "the most workers num_workers=auto (and tune) may use"},
       &RunConfig::max_workers, 0, 256},
      {{"ram_budget_mib", KeyType::integer, "0 (a quarter of the available memory) to 1000000000",
        "slab memory auto (and tune) may use, in MiB"},
       &RunConfig::ram_budget_mib, 0, 1e9},
      {{"pin_memory", KeyType::boolean, "on | off", "collate into page-locked slabs (CUDA only)"},
       &RunConfig::pin_memory},
      {{"shuffle", KeyType::boolean, "on | off", "seeded random order each epoch"},
       &RunConfig::shuffle},
      {{"drop_last", KeyType::boolean, "on | off",
        "drop the last partial batch of an epoch (DataLoader's drop_last; the sampler's is sampler_drop_last)"},
       &RunConfig::drop_last},
      {{"sampler_drop_last", KeyType::boolean, "on | off",
        "world_size > 1: cut each epoch to a multiple of world_size instead of padding it "
        "(DistributedSampler's drop_last)"},
       &RunConfig::sampler_drop_last},
      {{"cold_cache", KeyType::boolean, "on | off",
        "drop the dataset's files from the page cache before every epoch: measure cold storage"},
       &RunConfig::cold_cache},
      {{"device", KeyType::text, "auto | cpu | cuda | cuda:N", "where the step runs"},
       &RunConfig::device, 0, 0, check_device},
      {{"cpu_threads", KeyType::integer, "0 (the cores the workers leave) to 1024",
        "threads of a CPU step: torch's intra-op pool and OpenBLAS's"},
       &RunConfig::cpu_threads, 0, 1024},
      {{"steps", KeyType::integer, "1 or more", "measured training steps (after warm-up)"},
       &RunConfig::steps, 1, kNoMax},
      {{"duration", KeyType::number, "0 (use steps) to 86400 seconds",
        "measured seconds instead of a step count"}, &RunConfig::duration, 0, 86400},
      {{"warmup", KeyType::integer, "0 or more", "steps run before measuring"},
       &RunConfig::warmup, 0, kNoMax},
      {{"seed", KeyType::integer, "0 or more", "seed of data order, data and weights"},
       &RunConfig::seed, 0, kNoMax},
      {{"report_dir", KeyType::text, "a directory path", "where report.json is written"},
       &RunConfig::report_dir, 0, 0, check_nonempty},
      {{"record_dir", KeyType::text, "a directory path (default: $FEEDSCOPE_RECORD_DIR, else none)",
        "record what the diagnosis read (GPU records, its input, its verdict) for `feedscope replay`"},
       &RunConfig::record_dir},
      {{"trace_max_spans", KeyType::integer, "0 to 1000000000",
        "stage spans kept for trace.json: the first half and the latest half"},
       &RunConfig::trace_max_spans, 0, 1e9},
      {{"gpu_trace", KeyType::text, kGpuTraceAllowed,
        "GPU tracing: whole, or the device's records W s of every P after gpu_trace_lead s (scaled to the whole)"},
       &RunConfig::gpu_trace, 0, 0, check_gpu_trace},
      {{"gpu_trace_lead", KeyType::number, "0 to 3600 seconds",
        "sampled GPU tracing: seconds traced whole from the first kernel"},
       &RunConfig::gpu_trace_lead, 0, 3600},
      {{"sample_hz", KeyType::number, "0 (off) to 1000", "utilization samples per second"},
       &RunConfig::sample_hz, 0, 1000},
      {{"timeseries_max_mib", KeyType::integer, "0 (no limit) to 1048576",
        "timeseries.csv's size: past it, every other row is dropped and half the samples written"},
       &RunConfig::timeseries_max_mib, 0, 1048576},
      {{"metrics_addr", KeyType::text, "HOST:PORT (loopback unless you name another address)",
        "serve Prometheus metrics"}, &RunConfig::metrics_addr, 0, 0, check_address},
      {{"rank", KeyType::integer, "-1 (from $RANK, else 0) or 0 and more",
        "this process's rank: its share of the data and the metrics label"},
       &RunConfig::rank, -1, 1e6},
      {{"world_size", KeyType::integer, "0 (from $WORLD_SIZE, else 1) or 1 and more",
        "processes sharing the data: each rank loads 1/world_size of every epoch"},
       &RunConfig::world_size, 0, 1e6},
      {{"bad_sample", KeyType::text, "fail | skip",
        "a sample that fails to load stops the run (fail) or is left out (skip)"},
       &RunConfig::bad_sample, 0, 0, check_bad_sample},
      {{"max_bad_ratio", KeyType::number, "0 to 1",
        "skip: the run stops once more than this share of samples failed, counted over at least 1000 "
        "samples (up to ratio x 1000 may fail among the first 1000)"},
       &RunConfig::max_bad_ratio, 0, 1},
      {{"host", KeyType::text, "a host name", "host label of the metrics (default: hostname)"},
       &RunConfig::host},
      {{"json", KeyType::boolean, "on | off", "print report.json on stdout"}, &RunConfig::json},
  };
  return table;
}

std::string normalize(std::string_view key) {
  std::string out(key);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diag = up;
    }
  }
  return row[b.size()];
}

bool parse_bool(const std::string& text, bool& out) {
  std::string v = text;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "on" || v == "true" || v == "yes" || v == "1") return out = true, true;
  if (v == "off" || v == "false" || v == "no" || v == "0") return out = false, true;
  return false;
}

}  // namespace

const std::vector<KeyInfo>& config_keys() {
  static const std::vector<KeyInfo> keys = [] {
    std::vector<KeyInfo> out;
    for (const KeySpec& s : specs()) out.push_back(s.info);
    return out;
  }();
  return keys;
}

std::string allowed_keys_text() {
  std::string out;
  for (const KeySpec& s : specs()) out += (out.empty() ? "" : ", ") + std::string(s.info.name);
  return out;
}

void set_config_value(RunConfig& config, std::string_view raw_key, const std::string& value,
                      const std::string& source) {
  const std::string key = normalize(raw_key);
  const auto it = std::find_if(specs().begin(), specs().end(),
                               [&](const KeySpec& s) { return s.info.name == key; });
  if (it == specs().end()) {
    std::string message = "unknown key '" + std::string(raw_key) + "' (from " + source + ")";
    std::string_view best;
    std::size_t best_distance = 3;
    for (const KeySpec& s : specs()) {
      const std::size_t d = edit_distance(key, s.info.name);
      if (d < best_distance) best = s.info.name, best_distance = d;
    }
    if (!best.empty()) message += "; did you mean '" + std::string(best) + "'?";
    throw ConfigError(std::string(raw_key), message + " allowed keys: " + allowed_keys_text());
  }
  const KeySpec& spec = *it;
  std::visit(
      [&](auto member) {
        using T = std::remove_reference_t<decltype(config.*member)>;
        if constexpr (std::is_same_v<T, bool>) {
          bool v = false;
          if (!parse_bool(value, v)) fail(key, value, source, "is not on/off", spec.info.allowed);
          config.*member = v;
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          if (spec.takes_auto && value == "auto") {
            config.*member = kAutoValue;
            return;
          }
          std::int64_t v = 0;
          const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
          if (ec != std::errc() || ptr != value.data() + value.size())
            fail(key, value, source, "is not an integer", spec.info.allowed);
          if (static_cast<double>(v) < spec.min || static_cast<double>(v) > spec.max)
            fail(key, value, source, "is out of range", spec.info.allowed);
          config.*member = v;
        } else if constexpr (std::is_same_v<T, double>) {
          double v = 0;
          std::size_t used = 0;
          try {
            v = std::stod(value, &used);
          } catch (const std::exception&) {
            used = 0;
          }
          if (used == 0 || used != value.size() || !std::isfinite(v))
            fail(key, value, source, "is not a number", spec.info.allowed);
          if (v < spec.min || v > spec.max)
            fail(key, value, source, "is out of range", spec.info.allowed);
          config.*member = v;
        } else {
          if (spec.check) spec.check(key, value, source);
          config.*member = value;
        }
      },
      spec.field);
  // A step count and a duration are two ways to say how long to run: the later source wins.
  if (key == "steps") config.duration = 0;
}

void apply_yaml(RunConfig& config, const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError("", source + ":" + std::to_string(e.mark.line + 1) + ":" +
                              std::to_string(e.mark.column + 1) + ": not valid YAML: " + e.msg);
  }
  if (root.IsNull()) return;  // an empty file changes nothing
  if (!root.IsMap())
    throw ConfigError("", source + ": the top level must be a map of key: value; allowed keys: " +
                              allowed_keys_text());
  bool saw_steps = false, saw_duration = false;
  double duration = 0;
  for (const auto& entry : root) {
    const std::string where = source + ":" + std::to_string(entry.first.Mark().line + 1);
    // YAML allows any node as a key ("? [a, b]: 1", "? : 1"); only a name can be one of ours.
    if (!entry.first.IsScalar())
      throw ConfigError("", where + ": a key must be a name, not " +
                                (entry.first.IsNull() ? "null" : entry.first.IsMap() ? "a map" : "a list") +
                                "; allowed keys: " + allowed_keys_text());
    const std::string key = entry.first.Scalar();
    const YAML::Node& value = entry.second;
    if (!value.IsScalar()) {
      // Unknown keys are reported as unknown even when their value is not a scalar.
      RunConfig probe;
      try {
        set_config_value(probe, key, "", where);
      } catch (const ConfigError& e) {
        if (std::string(e.what()).rfind("unknown key", 0) == 0) throw;
      }
      throw ConfigError(key, normalize(key) + " (from " + where + ") must be a single value, not " +
                                 (value.IsNull() ? "empty" : value.IsMap() ? "a map" : "a list"));
    }
    set_config_value(config, key, value.Scalar(), where);
    saw_steps |= normalize(key) == "steps";
    if (normalize(key) == "duration") saw_duration = true, duration = config.duration;
  }
  if (saw_steps && saw_duration && duration > 0)
    throw ConfigError("duration", source + " sets both steps and duration; choose one");
}

void apply_yaml_file(RunConfig& config, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("config", "config: cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  apply_yaml(config, text.str(), path);
}

void validate_config(const RunConfig& config) {
  resolve_placement(config);
  if (config.model == "cnn" && config.dataset.rfind("synthetic:", 0) == 0) {
    const auto shape = parse_shape(config.dataset.substr(10));
    if (shape.size() != 3 || shape[1] < 4 || shape[2] < 4)
      throw ConfigError("model", "model: 'cnn' needs CxHxW samples of at least 4x4, and dataset '" +
                                     config.dataset + "' is not; allowed: mlp for other shapes");
  }
}

namespace {

// An integer from the environment, or nullopt when unset; a ConfigError names the variable.
std::optional<std::int64_t> env_integer(const char* name, std::int64_t min) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  std::int64_t v = 0;
  const char* end = text + std::strlen(text);
  const auto [ptr, ec] = std::from_chars(text, end, v);
  if (ec != std::errc() || ptr != end || v < min)
    throw ConfigError(name, std::string("$") + name + ": '" + text + "' is not allowed; allowed: " +
                                std::to_string(min) + " or more");
  return v;
}

}  // namespace

Placement resolve_placement(const RunConfig& config) {
  Placement p;
  if (config.rank >= 0) {
    p.rank = config.rank;
    p.labelled = true;
  } else if (const auto rank = env_integer("RANK", 0)) {
    p.rank = *rank;
    p.labelled = true;
  }
  if (config.world_size > 0) {
    p.world_size = config.world_size;
  } else if (const auto world = env_integer("WORLD_SIZE", 1)) {
    p.world_size = *world;
  }
  if (p.rank >= p.world_size)
    throw ConfigError("rank", "rank: " + std::to_string(p.rank) + " is not below world_size " +
                                  std::to_string(p.world_size) + " (rank from " +
                                  (config.rank >= 0 ? "--rank or the config" : "$RANK") + ", world_size from " +
                                  (config.world_size > 0 ? "--world-size or the config" : "$WORLD_SIZE or 1") +
                                  "); allowed: 0 to " + std::to_string(p.world_size - 1));
  return p;
}

std::vector<std::pair<std::string, ConfigValue>> config_entries(const RunConfig& config) {
  std::vector<std::pair<std::string, ConfigValue>> out;
  for (const KeySpec& s : specs()) {
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(config.*member)>;
          if constexpr (std::is_same_v<T, std::int64_t>)
            if (s.takes_auto && config.*member == kAutoValue) {
              out.emplace_back(std::string(s.info.name), ConfigValue(std::string("auto")));
              return;
            }
          out.emplace_back(std::string(s.info.name), ConfigValue(config.*member));
        },
        s.field);
  }
  return out;
}

}  // namespace feedscope
