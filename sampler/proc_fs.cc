#include "sampler/proc_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <string_view>
#include <thread>

#include "sampler/proc_file_cache.h"

namespace feedscope {

std::optional<std::string> ProcFs::read(const std::string& path) const {
  // Plain read(2): /proc files report size 0, and iostreams cost more than the parsing.
  const std::string full = root_ == "/" ? path : root_ + path;
  const int fd = ::open(full.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

std::vector<std::string> ProcFs::list_dir(const std::string& path) const {
  std::vector<std::string> names;
  const std::string full = root_ == "/" ? path : root_ + path;
  DIR* dir = ::opendir(full.c_str());
  if (dir == nullptr) return names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

bool parse_u64(std::string_view text, std::uint64_t& value) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::vector<std::string_view> split_ws(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

std::string_view first_line(std::string_view text) {
  return text.substr(0, std::min(text.find('\n'), text.size()));
}

// "Key:   123 kB" lines; returns the value in bytes when the unit is kB.
std::optional<std::uint64_t> kb_field(std::string_view text, std::string_view key) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':')
      continue;
    const auto fields = split_ws(line.substr(key.size() + 1));
    std::uint64_t value = 0;
    if (fields.empty() || !parse_u64(fields[0], value)) return std::nullopt;
    const bool kb = fields.size() > 1 && fields[1] == "kB";
    return kb ? value * 1024 : value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<CpuTimes> parse_cpu_times(const std::string& proc_stat) {
  const auto fields = split_ws(first_line(proc_stat));
  // cpu user nice system idle iowait irq softirq steal [guest guest_nice]
  if (fields.size() < 9 || fields[0] != "cpu") return std::nullopt;
  std::uint64_t v[8];
  for (int i = 0; i < 8; ++i)
    if (!parse_u64(fields[static_cast<std::size_t>(i) + 1], v[i])) return std::nullopt;
  CpuTimes times;
  times.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  times.total = times.busy + v[3] + v[4];
  return times;
}

namespace {

// Fields `first` and `first` + 1 of a /proc/<pid>/stat line, added, counted from 1 as proc(5)
// numbers them. The command name (field 2) is in parentheses and may contain spaces: the fields
// are counted after the last ')', where field 3 (the state) comes first.
std::optional<std::uint64_t> stat_field_pair_sum(const std::string& stat_line, std::size_t first) {
  const std::size_t close = stat_line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  const auto fields = split_ws(first_line(std::string_view(stat_line).substr(close + 1)));
  const std::size_t index = first - 3;
  if (fields.size() < index + 2) return std::nullopt;
  std::uint64_t a = 0, b = 0;
  if (!parse_u64(fields[index], a) || !parse_u64(fields[index + 1], b)) return std::nullopt;
  return a + b;
}

}  // namespace

std::optional<std::uint64_t> parse_task_cpu_ticks(const std::string& stat_line) {
  return stat_field_pair_sum(stat_line, 14);  // utime, stime
}

std::optional<std::uint64_t> parse_reaped_children_cpu_ticks(const std::string& stat_line) {
  return stat_field_pair_sum(stat_line, 16);  // cutime, cstime
}

std::optional<TaskStat> parse_task_stat(const std::string& stat_line) {
  const std::size_t close = stat_line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  const auto fields = split_ws(first_line(std::string_view(stat_line).substr(close + 1)));
  // Counted from field 3 (the state): ppid is field 4, minflt 10, majflt 12, utime 14, stime 15,
  // rss 24.
  if (fields.size() < 22 || fields[0].size() != 1) return std::nullopt;
  std::uint64_t ppid = 0, minflt = 0, majflt = 0, utime = 0, stime = 0, rss_pages = 0;
  if (!parse_u64(fields[1], ppid) || !parse_u64(fields[7], minflt) ||
      !parse_u64(fields[9], majflt) || !parse_u64(fields[11], utime) ||
      !parse_u64(fields[12], stime) || !parse_u64(fields[21], rss_pages))
    return std::nullopt;
  TaskStat out;
  if (const std::size_t open = stat_line.find('('); open < close)
    out.name.assign(stat_line, open + 1, close - open - 1);
  out.state = fields[0][0];
  out.ppid = static_cast<int>(ppid);
  out.cpu_ticks = utime + stime;
  out.system_ticks = stime;
  out.faults = minflt + majflt;
  out.rss_bytes = rss_pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return out;
}

namespace {

// Reader: ProcFs or ProcFileCache.
template <typename Reader>
std::vector<int> descendants_through(Reader& fs, bool* readable, const std::string& root) {
  constexpr std::size_t kMaxProcesses = 256;  // a fork bomb must not stall sampling
  std::vector<int> out;
  std::vector<std::string> queue = {root};
  if (readable != nullptr) *readable = false;
  for (std::size_t i = 0; i < queue.size() && out.size() < kMaxProcesses; ++i) {
    const std::string tasks = "/proc/" + queue[i] + "/task";
    for (const std::string& tid : fs.list_dir(tasks)) {
      const auto text = fs.read(tasks + "/" + tid + "/children");
      if (!text) continue;
      if (readable != nullptr) *readable = true;
      for (const std::string_view pid : split_ws(*text)) {
        std::uint64_t value = 0;
        if (!parse_u64(pid, value) || value == 0 || out.size() >= kMaxProcesses) continue;
        out.push_back(static_cast<int>(value));
        queue.emplace_back(pid);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<int> descendant_pids(const ProcFs& fs, bool* readable, const std::string& root) {
  return descendants_through(fs, readable, root);
}

std::vector<int> descendant_pids(ProcFileCache& files, bool* readable, const std::string& root) {
  return descendants_through(files, readable, root);
}

std::optional<std::uint64_t> descendants_cpu_ticks(const ProcFs& fs, const std::string& root) {
  const auto self = fs.read("/proc/" + root + "/stat");
  const auto reaped = self ? parse_reaped_children_cpu_ticks(*self) : std::nullopt;
  if (!reaped) return std::nullopt;
  std::uint64_t ticks = *reaped;
  for (const int pid : descendant_pids(fs, nullptr, root)) {
    const auto stat = fs.read("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) continue;  // it exited between listing and reading: its parent reaps it later
    ticks += parse_task_cpu_ticks(*stat).value_or(0) +
             parse_reaped_children_cpu_ticks(*stat).value_or(0);
  }
  return ticks;
}

std::optional<MemInfo> parse_meminfo(const std::string& meminfo) {
  const auto total = kb_field(meminfo, "MemTotal");
  const auto available = kb_field(meminfo, "MemAvailable");
  if (!total || !available) return std::nullopt;
  return MemInfo{*total, *available};
}

bool in_nested_pid_namespace(const std::string& status) {
  const std::size_t at = status.find("\nNSpid:");
  if (at == std::string::npos) return false;
  const std::size_t end = std::min(status.find('\n', at + 1), status.size());
  int pids = 0;
  bool in_pid = false;
  for (std::size_t i = at + 7; i < end; ++i) {
    const bool digit = status[i] >= '0' && status[i] <= '9';
    if (digit && !in_pid) ++pids;
    in_pid = digit;
  }
  return pids > 1;
}

std::optional<ProcessMemory> parse_process_status(const std::string& status) {
  const auto rss = kb_field(status, "VmRSS");
  const auto hwm = kb_field(status, "VmHWM");
  if (!rss || !hwm) return std::nullopt;
  return ProcessMemory{*rss, *hwm};
}

std::optional<MemoryRollup> parse_smaps_rollup(const std::string& text) {
  const auto rss = kb_field(text, "Rss");
  const auto pss = kb_field(text, "Pss");
  const auto private_clean = kb_field(text, "Private_Clean");
  const auto private_dirty = kb_field(text, "Private_Dirty");
  const auto shared_clean = kb_field(text, "Shared_Clean");
  const auto shared_dirty = kb_field(text, "Shared_Dirty");
  if (!rss || !pss || !private_clean || !private_dirty || !shared_clean || !shared_dirty)
    return std::nullopt;
  return MemoryRollup{*rss, *pss, *private_clean, *private_dirty, *shared_clean, *shared_dirty};
}

int online_cpus(const ProcFs& fs) {
  if (fs.root() == "/") {
    const unsigned n = std::thread::hardware_concurrency();
    if (n > 0) return static_cast<int>(n);
  }
  // Fixture roots: count cpuN lines of /proc/stat.
  const auto stat = fs.read("/proc/stat");
  if (!stat) return 1;
  int count = 0;
  std::size_t pos = 0;
  while ((pos = stat->find("\ncpu", pos)) != std::string::npos) {
    pos += 4;
    if (pos < stat->size() && (*stat)[pos] >= '0' && (*stat)[pos] <= '9') ++count;
  }
  return std::max(count, 1);
}

std::vector<std::string> block_devices(const ProcFs& fs) {
  std::vector<std::string> devices;
  for (const std::string& name : fs.list_dir("/sys/block")) {
    if (name.rfind("loop", 0) == 0 || name.rfind("ram", 0) == 0 || name.rfind("zram", 0) == 0)
      continue;
    devices.push_back(name);
  }
  return devices;
}

long clock_ticks_per_second() noexcept {
  static const long ticks = [] {
    const long value = ::sysconf(_SC_CLK_TCK);
    return value > 0 ? value : 100L;
  }();
  return ticks;
}

}  // namespace feedscope

namespace feedscope {

namespace {

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

bool to_u64(std::string_view text, std::uint64_t& value) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool to_double(std::string_view text, double& value) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

}  // namespace

std::vector<CpuTimes> parse_core_times(const std::string& proc_stat) {
  std::vector<CpuTimes> cores;
  for (const std::string_view line : lines_of(proc_stat)) {
    if (line.size() < 4 || line.substr(0, 3) != "cpu" || line[3] < '0' || line[3] > '9') continue;
    const auto f = fields_of(line);
    std::uint64_t v[8];
    bool ok = f.size() >= 9;
    for (std::size_t i = 0; ok && i < 8; ++i) ok = to_u64(f[i + 1], v[i]);
    if (!ok) return {};  // one malformed core line: per-core data is unavailable
    cores.push_back(CpuTimes{v[0] + v[1] + v[2] + v[5] + v[6] + v[7],
                             v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7]});
  }
  return cores;
}

std::vector<DiskCounters> parse_diskstats(const std::string& diskstats,
                                          const std::vector<std::string>& devices) {
  std::vector<DiskCounters> out;
  for (const std::string_view line : lines_of(diskstats)) {
    const auto f = fields_of(line);
    // major minor name reads merged sectors_read ms_reading writes merged sectors ms io_now io_ms
    if (f.size() < 13) continue;
    if (std::find(devices.begin(), devices.end(), f[2]) == devices.end()) continue;
    DiskCounters d;
    d.device = std::string(f[2]);
    if (!to_u64(f[5], d.sectors_read) || !to_u64(f[12], d.io_time_ms)) continue;
    out.push_back(std::move(d));
  }
  return out;
}

std::optional<std::uint64_t> parse_io_read_bytes(const std::string& proc_io) {
  for (const std::string_view line : lines_of(proc_io)) {
    const auto f = fields_of(line);
    std::uint64_t value = 0;
    if (f.size() == 2 && f[0] == "read_bytes:" && to_u64(f[1], value)) return value;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> parse_io_syscalls(const std::string& proc_io) {
  std::optional<std::uint64_t> reads, writes;
  for (const std::string_view line : lines_of(proc_io)) {
    const auto f = fields_of(line);
    std::uint64_t value = 0;
    if (f.size() != 2 || !to_u64(f[1], value)) continue;
    if (f[0] == "syscr:") reads = value;
    if (f[0] == "syscw:") writes = value;
  }
  if (!reads || !writes) return std::nullopt;
  return *reads + *writes;
}

RankIdentity parse_distributed_env(const std::string& environ) {
  return rank_identity_of_environ(environ);
}

std::optional<std::uint64_t> parse_schedstat_run_delay_ns(const std::string& schedstat) {
  const auto f = fields_of(schedstat);
  std::uint64_t on_cpu = 0, delay = 0;
  if (f.size() < 2 || !to_u64(f[0], on_cpu) || !to_u64(f[1], delay)) return std::nullopt;
  return delay;
}

std::optional<Pressure> parse_pressure(const std::string& text) {
  Pressure p;
  bool some = false;
  for (const std::string_view line : lines_of(text)) {
    const auto f = fields_of(line);
    if (f.size() < 5 || (f[0] != "some" && f[0] != "full")) continue;
    double avg10 = 0;
    std::uint64_t total = 0;
    if (f[1].substr(0, 6) != "avg10=" || !to_double(f[1].substr(6), avg10)) return std::nullopt;
    if (f[4].substr(0, 6) != "total=" || !to_u64(f[4].substr(6), total)) return std::nullopt;
    if (f[0] == "some") {
      p.some_avg10 = avg10;
      p.some_total_us = total;
      some = true;
    } else {
      p.full_avg10 = avg10;
    }
  }
  if (!some) return std::nullopt;
  return p;
}

std::optional<long> parse_loadavg_last_pid(const std::string& text) {
  const auto lines = lines_of(text);
  if (lines.empty()) return std::nullopt;
  const auto f = fields_of(lines.front());
  std::uint64_t pid = 0;
  if (f.size() < 5 || f[3].find('/') == std::string_view::npos || !to_u64(f[4], pid)) return std::nullopt;
  return static_cast<long>(pid);
}

}  // namespace feedscope
