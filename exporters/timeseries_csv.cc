#include "exporters/timeseries_csv.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace feedscope {

namespace {

// "%.6g", without printf's locale and format parsing (ten rows a second, for hours).
std::string cell(std::optional<double> v) {
  if (!v) return "";
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, *v, std::chars_format::general, 6).ptr;
  return std::string(buf, end);
}

std::optional<double> as_double(std::optional<std::uint64_t> v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

}  // namespace

TimeseriesCsv::TimeseriesCsv(const std::string& path, std::int64_t origin_ns,
                             std::uint64_t max_bytes)
    : path_(path), out_(path, std::ios::trunc), origin_ns_(origin_ns), max_bytes_(max_bytes) {
  if (!out_) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

std::string TimeseriesCsv::header(const UtilizationSample& first) {
  std::string h = "time_s,cpu_system_ratio,cpu_process_ratio,rss_bytes,memory_available_bytes,"
                  "pinned_bytes,disk_read_bytes_per_s,disk_busy_ratio,process_read_bytes_total,"
                  "cpu_pressure_ratio,io_pressure_ratio,memory_pressure_ratio";
  for (std::size_t i = 0; i < first.cpu_core_ratio.size(); ++i)
    h += ",core" + std::to_string(i) + "_ratio";
  for (const GpuSample& g : first.gpus) {
    const std::string p = ",gpu" + std::to_string(g.index) + "_";
    h += p + "util_ratio" + p + "memory_util_ratio" + p + "memory_used_bytes" + p +
         "pcie_tx_bytes_per_s" + p + "pcie_rx_bytes_per_s" + p + "sm_clock_mhz" + p + "power_watts";
  }
  return h + "\n";
}

std::string TimeseriesCsv::row(const UtilizationSample& s, std::int64_t origin_ns,
                               std::size_t cores, std::size_t gpus) {
  double read = 0, busy = 0;
  for (const DiskSample& d : s.disks) read += d.read_bytes_per_s, busy = std::max(busy, d.busy_ratio);
  const bool disks = !s.disks.empty();
  std::string r = cell(static_cast<double>(s.time_ns - origin_ns) / 1e9);
  r += "," + cell(s.cpu_system_ratio) + "," + cell(s.cpu_process_ratio) + "," +
       cell(as_double(s.rss_bytes)) + "," + cell(as_double(s.memory_available_bytes)) + "," +
       cell(static_cast<double>(s.pinned_bytes)) + "," +
       cell(disks ? std::optional<double>(read) : std::nullopt) + "," +
       cell(disks ? std::optional<double>(busy) : std::nullopt) + "," +
       cell(as_double(s.process_read_bytes_total)) + "," +
       cell(s.cpu_pressure ? std::optional<double>(s.cpu_pressure->some_avg10) : std::nullopt) + "," +
       cell(s.io_pressure ? std::optional<double>(s.io_pressure->some_avg10) : std::nullopt) + "," +
       cell(s.memory_pressure ? std::optional<double>(s.memory_pressure->some_avg10) : std::nullopt);
  for (std::size_t i = 0; i < cores; ++i)
    r += "," + cell(i < s.cpu_core_ratio.size() ? std::optional<double>(s.cpu_core_ratio[i]) : std::nullopt);
  for (std::size_t i = 0; i < gpus; ++i) {
    if (i < s.gpus.size()) {
      const GpuSample& g = s.gpus[i];
      r += "," + cell(g.util_ratio) + "," + cell(g.memory_util_ratio) + "," +
           cell(as_double(g.memory_used_bytes)) + "," + cell(g.pcie_tx_bytes_per_s) + "," +
           cell(g.pcie_rx_bytes_per_s) + "," + cell(g.sm_clock_mhz) + "," + cell(g.power_watts);
    } else {
      r += ",,,,,,,";
    }
  }
  return r + "\n";
}

void TimeseriesCsv::write(const UtilizationSample& s) {
  std::lock_guard lock(mutex_);
  if (!header_written_) {
    const std::string h = header(s);
    out_ << h;
    bytes_ += h.size();
    cores_ = s.cpu_core_ratio.size();
    gpus_ = s.gpus.size();
    header_written_ = true;
  }
  const std::uint64_t n = samples_++;
  if (n % stride_ != 0) return;
  const std::string r = row(s, origin_ns_, cores_, gpus_);
  if (max_bytes_ > 0 && bytes_ + r.size() > max_bytes_) {
    thin();
    if (n % stride_ != 0) return;
  }
  out_ << r;
  out_.flush();
  if (!out_) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  bytes_ += r.size();
}

// Row k of the file is sample k x stride, so keeping the even rows leaves samples k x 2 stride.
void TimeseriesCsv::thin() {
  out_.close();
  const std::string tmp = path_ + ".tmp";
  {
    std::ifstream in(path_);
    std::ofstream kept(tmp, std::ios::trunc);
    if (!in || !kept)
      throw std::runtime_error("cannot thin " + path_ + " through " + tmp + ": " +
                               std::strerror(errno));
    std::string line;
    std::getline(in, line);  // the header
    kept << line << '\n';
    std::uint64_t size = line.size() + 1;
    for (std::uint64_t k = 0; std::getline(in, line); ++k) {
      if (k % 2 != 0) continue;
      kept << line << '\n';
      size += line.size() + 1;
    }
    kept.flush();
    if (!kept) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
    bytes_ = size;
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0)
    throw std::runtime_error("cannot rename " + tmp + " to " + path_ + ": " + std::strerror(errno));
  stride_ *= 2;
  out_.open(path_, std::ios::app);
  if (!out_) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
}

std::uint64_t TimeseriesCsv::stride() const {
  std::lock_guard lock(mutex_);
  return stride_;
}

std::uint64_t TimeseriesCsv::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace feedscope
