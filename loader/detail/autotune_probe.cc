#include "loader/detail/autotune_probe.h"

#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace feedscope::detail {

namespace {

std::optional<std::string> read_text(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The unsigned integers of one line, after its first word.
std::vector<std::uint64_t> numbers(std::string_view line) {
  std::vector<std::uint64_t> out;
  std::size_t pos = line.find(' ');
  while (pos != std::string_view::npos && pos < line.size()) {
    pos = line.find_first_not_of(' ', pos);
    if (pos == std::string_view::npos) break;
    std::uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(line.data() + pos, line.data() + line.size(), v);
    if (ec != std::errc()) break;
    out.push_back(v);
    pos = static_cast<std::size_t>(ptr - line.data());
  }
  return out;
}

}  // namespace

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

std::optional<std::uint64_t> available_memory_bytes() {
  const auto text = read_text("/proc/meminfo");
  if (!text) return std::nullopt;
  const std::size_t at = text->find("MemAvailable:");
  if (at == std::string::npos) return std::nullopt;
  const std::vector<std::uint64_t> kib =
      numbers(std::string_view(*text).substr(at, text->find('\n', at) - at));
  if (kib.empty()) return std::nullopt;
  return kib.front() * 1024;
}

std::int64_t thread_cpu_ns() noexcept {
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

namespace {

// A worker's own /proc/thread-self/schedstat, opened once per thread: a pread is a syscall, an
// open per load would be three.
class SchedStat {
 public:
  SchedStat() : fd_(::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {}
  ~SchedStat() {
    if (fd_ >= 0) ::close(fd_);
  }
  SchedStat(const SchedStat&) = delete;
  SchedStat& operator=(const SchedStat&) = delete;
  // "<on-cpu ns> <run-queue wait ns> <timeslices>"
  std::int64_t queued_ns() const {
    char text[96];
    if (fd_ < 0) return 0;
    const ssize_t n = ::pread(fd_, text, sizeof text - 1, 0);
    if (n <= 0) return 0;
    const std::vector<std::uint64_t> v = numbers(std::string_view(text, static_cast<std::size_t>(n)));
    return v.empty() ? 0 : static_cast<std::int64_t>(v.front());
  }

 private:
  int fd_;
};

}  // namespace

std::int64_t thread_queued_ns() noexcept {
  thread_local const SchedStat stat;
  return stat.queued_ns();
}

std::optional<double> IdleCoreMeter::read() {
  const auto text = read_text("/proc/stat");
  if (!text) return std::nullopt;
  return read(*text);
}

std::optional<double> IdleCoreMeter::read(std::string_view stat) {
  if (stat.rfind("cpu ", 0) != 0) return std::nullopt;
  // user nice system idle iowait irq softirq steal (guest time is inside user already).
  const std::vector<std::uint64_t> ticks = numbers(stat.substr(0, stat.find('\n')));
  if (ticks.size() < 5) return std::nullopt;
  int cpus = 0;
  for (std::size_t pos = 0; (pos = stat.find("\ncpu", pos)) != std::string_view::npos;) {
    pos += 4;
    if (pos < stat.size() && stat[pos] >= '0' && stat[pos] <= '9') ++cpus;
  }
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < std::min<std::size_t>(ticks.size(), 8); ++i) total += ticks[i];
  const std::uint64_t idle = ticks[3] + ticks[4];
  const bool primed = primed_;
  const std::uint64_t last_total = total_, last_idle = idle_;
  idle_ = idle;
  total_ = total;
  primed_ = true;
  if (!primed || total <= last_total || idle < last_idle || cpus == 0) return std::nullopt;
  return static_cast<double>(idle - last_idle) / static_cast<double>(total - last_total) * cpus;
}

void WaitWindow::reset(std::int64_t begin_ns) {
  begin_ns_ = begin_ns;
  wait_ns_ = 0;
  waits_.clear();
}

TunerWindow WaitWindow::close(std::int64_t end_ns, const WorkerTimes& workers,
                              std::optional<double> idle_cores) const {
  TunerWindow w;
  w.begin_ns = begin_ns_;
  w.end_ns = end_ns;
  w.batches = batches();
  w.wait_s = static_cast<double>(wait_ns_) / 1e9;
  w.worker_busy_s = workers.busy_s;
  w.worker_cpu_s = workers.cpu_s;
  w.worker_queued_s = workers.queued_s;
  w.idle_cores = idle_cores;
  w.wait_concentration = wait_concentration(waits_);
  return w;
}

}  // namespace feedscope::detail
