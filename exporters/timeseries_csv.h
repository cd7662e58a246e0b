#pragma once
// timeseries.csv: one row per utilization sample, columns fixed by the first sample (per-core and
// per-GPU columns included), in a file of bounded size: when the next row would take it over its
// limit, every other row is dropped and from then on every other sample is written, so the file
// covers the whole run at an even resolution that halves each time it fills (as an RRD
// consolidates), however long the run. The report's statistics count every sample regardless.
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>

#include "sampler/utilization_sample.h"

namespace feedscope {

// Thread-safe. Rows are flushed as written, so a stopped run keeps what it sampled.
class TimeseriesCsv {
 public:
  // At 10 Hz: 13 days of full resolution with 2 cores (59-byte rows), 3 hours with 64 (610).
  static constexpr std::uint64_t kDefaultMaxBytes = std::uint64_t{64} << 20;

  // max_bytes 0: no limit. Throws std::runtime_error naming the path when it cannot be created.
  TimeseriesCsv(const std::string& path, std::int64_t origin_ns,
                std::uint64_t max_bytes = kDefaultMaxBytes);
  // Writes the sample's row if it falls on the current stride. Thinning rewrites the file (a
  // temporary renamed over it) on the sampling thread: 0.08-0.1 s for 64 MiB here.
  // Throws std::runtime_error naming the path when the file cannot be written or thinned.
  void write(const UtilizationSample& sample);
  std::uint64_t stride() const;  // one row per `stride` samples: 1, 2, 4, ...
  std::uint64_t bytes() const;
  static std::string header(const UtilizationSample& first);
  static std::string row(const UtilizationSample& sample, std::int64_t origin_ns,
                         std::size_t cores, std::size_t gpus);

 private:
  void thin();  // drops every other row; doubles the stride

  mutable std::mutex mutex_;
  std::string path_;
  std::ofstream out_;
  std::int64_t origin_ns_;
  std::uint64_t max_bytes_;
  std::uint64_t bytes_ = 0;    // the file's size
  std::uint64_t samples_ = 0;  // seen, written or not
  std::uint64_t stride_ = 1;
  std::size_t cores_ = 0;
  std::size_t gpus_ = 0;
  bool header_written_ = false;
};

}  // namespace feedscope
