#include "exporters/chrome_trace.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <ostream>
#include <stdexcept>
#include <tuple>

#include "profiler/trace_sampling.h"

namespace feedscope {

namespace {

// Length of the valid UTF-8 sequence at p, or 0 when the bytes there are not one.
std::size_t utf8_length(const unsigned char* p, std::size_t n) {
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  std::size_t len = 0;
  std::uint32_t cp = 0, min = 0;
  if ((c >> 5) == 0x6) {
    len = 2, cp = c & 0x1f, min = 0x80;
  } else if ((c >> 4) == 0xe) {
    len = 3, cp = c & 0x0f, min = 0x800;
  } else if ((c >> 3) == 0x1e) {
    len = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (std::size_t i = 1; i < len; ++i) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

void write_int(std::ostream& out, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.write(buf, r.ptr - buf);
}

// Nanoseconds as microseconds with three decimals, exactly: no floating point on the way.
void write_us(std::ostream& out, std::int64_t ns) {
  write_int(out, ns / 1000);
  char frac[4] = {'.', '0', '0', '0'};
  std::int64_t rest = ns % 1000;
  for (int i = 3; i >= 1; --i, rest /= 10) frac[i] = static_cast<char>('0' + rest % 10);
  out.write(frac, 4);
}

// The Unix time, in nanoseconds, of `origin_ns` on the now_ns() clock: both clocks read together,
// the gap between them carried back to the origin.
std::int64_t unix_ns_at(std::int64_t origin_ns) {
  const std::int64_t unix_now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::system_clock::now().time_since_epoch()).count();
  return unix_now - (now_ns() - origin_ns);
}

int lane_sort_index(const LaneInfo& lane) {
  // Training first, then the copy stream, then the workers in order: the step's story reads
  // top-down.
  switch (lane.role) {
    case LaneRole::training: return lane.id;
    case LaneRole::copy: return 1000 + lane.id;
    case LaneRole::worker: break;
  }
  return 2000 + lane.id;
}

std::string memcpy_name(const MemcpyRecord& m) {
  std::string name = "Memcpy ";
  name += to_string(m.kind);
  if (m.kind == MemcpyKind::h2d || m.kind == MemcpyKind::d2h) {
    name += " (";
    name += to_string(m.kind == MemcpyKind::h2d ? m.src : MemoryKind::device);
    name += ")";
  }
  return name;
}

}  // namespace

void write_json_string(std::ostream& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.put('"');
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t run = 0;  // start of the pending stretch that needs no escaping
  std::size_t i = 0;
  const auto flush = [&](std::size_t upto) {
    if (upto > run) out.write(text.data() + run, static_cast<std::streamsize>(upto - run));
  };
  while (i < n) {
    const unsigned char c = p[i];
    const char* esc = nullptr;
    switch (c) {
      case '"': esc = "\\\""; break;
      case '\\': esc = "\\\\"; break;
      case '\b': esc = "\\b"; break;
      case '\f': esc = "\\f"; break;
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\t': esc = "\\t"; break;
      default: break;
    }
    if (esc) {
      flush(i);
      out << esc;
      run = ++i;
    } else if (c < 0x20) {
      flush(i);
      const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
      out.write(u, 6);
      run = ++i;
    } else if (c < 0x80) {
      ++i;
    } else if (const std::size_t len = utf8_length(p + i, n - i); len > 0) {
      i += len;
    } else {
      flush(i);
      out << "\\ufffd";
      run = ++i;
    }
  }
  flush(n);
  out.put('"');
}

ChromeTraceWriter::ChromeTraceWriter(std::ostream& out, std::int64_t origin_ns)
    : out_(out), origin_ns_(origin_ns) {
  // baseTimeNanoseconds: where ts 0 is in Unix time, the key PyTorch's profiler writes, so that
  // traces of one job written by different processes line up.
  out_ << "{\"displayTimeUnit\":\"ms\",\"baseTimeNanoseconds\":";
  write_int(out_, unix_ns_at(origin_ns));
  out_ << ",\"traceEvents\":[";
}

ChromeTraceWriter::~ChromeTraceWriter() { finish(); }

void ChromeTraceWriter::finish() {
  if (finished_) return;
  finished_ = true;
  out_ << "\n]}\n";
}

void ChromeTraceWriter::begin_event() {
  out_ << (first_ ? "\n" : ",\n");
  first_ = false;
}

void ChromeTraceWriter::metadata(int pid, int tid, std::string_view kind,
                                 std::string_view arg_name, std::string_view text, bool number,
                                 std::int64_t value) {
  begin_event();
  out_ << "{\"ph\":\"M\",\"pid\":";
  write_int(out_, pid);
  out_ << ",\"tid\":";
  write_int(out_, tid);
  out_ << ",\"name\":";
  write_json_string(out_, kind);
  out_ << ",\"args\":{";
  write_json_string(out_, arg_name);
  out_ << ':';
  if (number)
    write_int(out_, value);
  else
    write_json_string(out_, text);
  out_ << "}}";
}

void ChromeTraceWriter::name_process(int pid, std::string_view name, int sort_index) {
  metadata(pid, 0, "process_name", "name", name, false, 0);
  metadata(pid, 0, "process_sort_index", "sort_index", {}, true, sort_index);
}

void ChromeTraceWriter::name_thread(int pid, int tid, std::string_view name, int sort_index) {
  metadata(pid, tid, "thread_name", "name", name, false, 0);
  metadata(pid, tid, "thread_sort_index", "sort_index", {}, true, sort_index);
}

void ChromeTraceWriter::complete(int pid, int tid, std::string_view name,
                                 std::string_view category, std::int64_t begin_ns,
                                 std::int64_t end_ns, Args args) {
  if (end_ns < origin_ns_) return;
  const std::int64_t begin = std::max(begin_ns, origin_ns_) - origin_ns_;
  const std::int64_t dur = std::max<std::int64_t>(end_ns - origin_ns_ - begin, 0);
  begin_event();
  out_ << "{\"ph\":\"X\",\"pid\":";
  write_int(out_, pid);
  out_ << ",\"tid\":";
  write_int(out_, tid);
  out_ << ",\"ts\":";
  write_us(out_, begin);
  out_ << ",\"dur\":";
  write_us(out_, dur);
  out_ << ",\"name\":";
  write_json_string(out_, name);
  out_ << ",\"cat\":";
  write_json_string(out_, category);
  out_ << ",\"args\":{";
  bool first = true;
  for (const auto& [key, value] : args) {
    if (!first) out_ << ',';
    first = false;
    write_json_string(out_, key);
    out_ << ':';
    write_int(out_, value);
  }
  out_ << "}}";
}

namespace {

// A sampled trace's windows on a track of their own, above the streams: between them the GPU
// tracks are empty because nothing was recorded, not because the GPU was idle.
void write_traced_windows(ChromeTraceWriter& w, const GpuActivity& gpu, int tid) {
  if (!gpu.sampled()) return;
  w.name_thread(kGpuPid, tid, "traced (sampled: " + describe_sampling(gpu.tracing->sampling) + ")",
                0);
  for (const TimeWindow& t : gpu.traced_windows)
    w.complete(kGpuPid, tid, "traced", "sampling", t.begin_ns, t.end_ns);
}

}  // namespace

void write_chrome_trace(std::ostream& out, std::span<const Span> spans,
                        const std::vector<LaneInfo>& lanes, const GpuActivity* gpu,
                        std::int64_t origin_ns) {
  ChromeTraceWriter w(out, origin_ns);
  w.name_process(kHostPid, "feedscope (host)", 0);
  // tid 0 is the process itself in some viewers; lanes start at 1.
  for (const LaneInfo& lane : lanes)
    w.name_thread(kHostPid, lane.id + 1, lane.name, lane_sort_index(lane));
  for (const Span& s : spans)
    w.complete(kHostPid, s.lane + 1, stage_name(s.stage), "stage", s.begin_ns, s.end_ns,
               {{"batch", s.batch}});
  if (gpu != nullptr) {
    // One track per (device, stream), numbered in that order.
    std::map<std::pair<std::uint32_t, std::uint32_t>, int> tracks;
    for (const KernelRecord& k : gpu->kernels) tracks.emplace(std::pair{k.device, k.stream}, 0);
    for (const MemcpyRecord& m : gpu->memcpys) tracks.emplace(std::pair{m.device, m.stream}, 0);
    for (const MemsetRecord& m : gpu->memsets) tracks.emplace(std::pair{m.device, m.stream}, 0);
    w.name_process(kGpuPid, "GPU", 1);
    int next = 1;
    for (auto& [key, tid] : tracks) {
      tid = next++;
      w.name_thread(kGpuPid, tid,
                    "GPU " + std::to_string(key.first) + " stream " + std::to_string(key.second),
                    tid);
    }
    const auto track = [&tracks](std::uint32_t device, std::uint32_t stream) {
      return tracks.at({device, stream});
    };
    for (const KernelRecord& k : gpu->kernels)
      w.complete(kGpuPid, track(k.device, k.stream), k.name, "kernel", k.start_ns, k.end_ns,
                 {{"device", k.device}, {"stream", k.stream}, {"correlation", k.correlation_id}});
    for (const MemcpyRecord& m : gpu->memcpys)
      w.complete(kGpuPid, track(m.device, m.stream), memcpy_name(m), "memcpy", m.start_ns,
                 m.end_ns,
                 {{"bytes", static_cast<std::int64_t>(m.bytes)},
                  {"correlation", m.correlation_id}});
    for (const MemsetRecord& m : gpu->memsets)
      w.complete(kGpuPid, track(m.device, m.stream), "Memset", "memset", m.start_ns, m.end_ns,
                 {{"bytes", static_cast<std::int64_t>(m.bytes)},
                  {"correlation", m.correlation_id}});
    write_traced_windows(w, *gpu, next);
  }
  w.finish();
}

void write_chrome_trace_file(const std::string& path, std::span<const Span> spans,
                             const std::vector<LaneInfo>& lanes, const GpuActivity* gpu,
                             std::int64_t origin_ns) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
    write_chrome_trace(out, spans, lanes, gpu, origin_ns);
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
}

}  // namespace feedscope
