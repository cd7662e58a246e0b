#pragma once
// timeseries.csv: one row per utilization sample, columns fixed by the first sample (per-core and
// per-GPU columns included).
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>

#include "sampler/utilization_sample.h"

namespace feedscope {

// Thread-safe. Rows are flushed as written, so a stopped run keeps what it sampled.
class TimeseriesCsv {
 public:
  // Throws std::runtime_error naming the path when it cannot be created.
  TimeseriesCsv(const std::string& path, std::int64_t origin_ns);
  void write(const UtilizationSample& sample);
  static std::string header(const UtilizationSample& first);
  static std::string row(const UtilizationSample& sample, std::int64_t origin_ns,
                         std::size_t cores, std::size_t gpus);

 private:
  std::mutex mutex_;
  std::ofstream out_;
  std::int64_t origin_ns_;
  std::size_t cores_ = 0;
  std::size_t gpus_ = 0;
  bool header_written_ = false;
};

}  // namespace feedscope
