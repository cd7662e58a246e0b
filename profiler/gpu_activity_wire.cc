#include "profiler/gpu_activity_wire.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
#include <system_error>
#include <unordered_map>

#include "loader/detail/crc32c.h"

namespace feedscope {

namespace {

constexpr char kMagic[4] = {'F', 'S', 'G', 'A'};
// 2: a records payload counts the records left out for their times and the buffers cut short.
// 3: a kernel carries its graph id, a host call its API (runtime or driver); a tracing frame says
// which calls CUPTI recorded. A reader takes 2 as well (no graphs, every call the runtime's).
// 4: a records payload ends with the host records left out between sampled windows and the
// windows' time it covers; a tracing frame ends with the sampling (window, period, lead).
constexpr std::uint16_t kVersion = 4;
constexpr std::uint16_t kOldestReadable = 2;
constexpr std::uint16_t kStatusFrame = 1;
constexpr std::uint16_t kRecordsFrame = 2;
constexpr std::uint16_t kTracingFrame = 3;
constexpr std::size_t kHeaderBytes = 16;
constexpr std::size_t kCheckedHeaderBytes = 12;
// A writer flushes every 200 ms; no batch comes near this. A larger length is a corrupt header,
// not a frame to wait for.
constexpr std::uint32_t kMaxPayloadBytes = 1u << 30;

class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(std::uint16_t v) { le(v); }
  void u32(std::uint32_t v) { le(v); }
  void u64(std::uint64_t v) { le(v); }
  void i64(std::int64_t v) { le(static_cast<std::uint64_t>(v)); }
  void bytes(std::string_view s) { out_.append(s); }
  std::string& str() { return out_; }

 private:
  template <typename T>
  void le(T v) {
    for (std::size_t i = 0; i < sizeof v; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
  std::string out_;
};

// Bounds-checked: every read past the end sets failed() and yields zeros.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  std::uint8_t u8() { return static_cast<std::uint8_t>(le(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(le(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(le(4)); }
  std::uint64_t u64() { return le(8); }
  std::int64_t i64() { return static_cast<std::int64_t>(le(8)); }
  std::string_view bytes(std::size_t n) {
    if (failed_ || in_.size() - at_ < n) {
      failed_ = true;
      return {};
    }
    const std::string_view s = in_.substr(at_, n);
    at_ += n;
    return s;
  }
  // A count of items of at least `min_item_bytes` each that the rest of the input can hold.
  std::uint32_t count(std::size_t min_item_bytes) {
    const std::uint32_t n = u32();
    if (static_cast<std::uint64_t>(n) * min_item_bytes > in_.size() - at_) failed_ = true;
    return failed_ ? 0 : n;
  }
  void fail() { failed_ = true; }
  bool failed() const { return failed_; }
  bool done() const { return at_ == in_.size(); }

 private:
  std::uint64_t le(std::size_t n) {
    const std::string_view s = bytes(n);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < s.size(); ++i)
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[i])) << (8 * i);
    return v;
  }
  std::string_view in_;
  std::size_t at_ = 0;
  bool failed_ = false;
};

std::string frame(std::uint16_t type, std::string_view payload) {
  Writer w;
  w.bytes(std::string_view(kMagic, sizeof kMagic));
  w.u16(kVersion);
  w.u16(type);
  w.u32(static_cast<std::uint32_t>(payload.size()));
  std::uint32_t crc = detail::crc32c(w.str().data(), kCheckedHeaderBytes);
  crc = detail::crc32c(payload.data(), payload.size(), crc);
  w.u32(crc);
  w.bytes(payload);
  return std::move(w.str());
}

// Kernel and runtime API names repeat thousands of times a batch: each is written once, in a
// table, and records carry its index.
class NameTable {
 public:
  std::uint32_t index(const std::string& name) {
    auto [it, added] = index_.try_emplace(name, static_cast<std::uint32_t>(names_.size()));
    if (added) names_.push_back(&it->first);
    return it->second;
  }
  void write(Writer& w) const {
    w.u32(static_cast<std::uint32_t>(names_.size()));
    for (const std::string* name : names_) {
      w.u32(static_cast<std::uint32_t>(name->size()));
      w.bytes(*name);
    }
  }

 private:
  std::unordered_map<std::string, std::uint32_t> index_;
  std::vector<const std::string*> names_;
};

template <typename Enum>
std::optional<Enum> enum_at_most(std::uint8_t raw, Enum last) {
  if (raw > static_cast<std::uint8_t>(last)) return std::nullopt;
  return static_cast<Enum>(raw);
}

// Smallest encoded size of one record of each kind, so a corrupt count cannot allocate much.
constexpr std::size_t kKernelBytes = 4 + 8 + 8 + 4 * 3;  // version 2's; 3 adds 4
constexpr std::size_t kMemcpyBytes = 3 + 8 + 8 + 8 + 4 * 3;
constexpr std::size_t kMemsetBytes = 8 + 8 + 8 + 4 * 3;
constexpr std::size_t kSyncBytes = 1 + 8 + 8 + 4 * 2;
constexpr std::size_t kRuntimeBytes = 4 + 8 + 8 + 4 * 2;
constexpr std::size_t kWindowBytes = 8 + 8;

std::string records_payload(const GpuActivity& a) {
  NameTable names;
  Writer body;
  body.u32(static_cast<std::uint32_t>(a.kernels.size()));
  for (const KernelRecord& k : a.kernels) {
    body.u32(names.index(k.name));
    body.i64(k.start_ns);
    body.i64(k.end_ns);
    body.u32(k.device);
    body.u32(k.stream);
    body.u32(k.correlation_id);
    body.u32(k.graph_id);
  }
  body.u32(static_cast<std::uint32_t>(a.memcpys.size()));
  for (const MemcpyRecord& m : a.memcpys) {
    body.u8(static_cast<std::uint8_t>(m.kind));
    body.u8(static_cast<std::uint8_t>(m.src));
    body.u8(static_cast<std::uint8_t>(m.dst));
    body.u64(m.bytes);
    body.i64(m.start_ns);
    body.i64(m.end_ns);
    body.u32(m.device);
    body.u32(m.stream);
    body.u32(m.correlation_id);
  }
  body.u32(static_cast<std::uint32_t>(a.memsets.size()));
  for (const MemsetRecord& m : a.memsets) {
    body.u64(m.bytes);
    body.i64(m.start_ns);
    body.i64(m.end_ns);
    body.u32(m.device);
    body.u32(m.stream);
    body.u32(m.correlation_id);
  }
  body.u32(static_cast<std::uint32_t>(a.syncs.size()));
  for (const SyncRecord& y : a.syncs) {
    body.u8(static_cast<std::uint8_t>(y.type));
    body.i64(y.start_ns);
    body.i64(y.end_ns);
    body.u32(y.stream);
    body.u32(y.correlation_id);
  }
  body.u32(static_cast<std::uint32_t>(a.runtime.size()));
  for (const RuntimeApiRecord& r : a.runtime) {
    body.u32(names.index(r.name));
    body.i64(r.start_ns);
    body.i64(r.end_ns);
    body.u32(r.thread_id);
    body.u32(r.correlation_id);
    body.u8(static_cast<std::uint8_t>(r.domain));
  }
  body.u64(a.outside_windows);
  body.u32(static_cast<std::uint32_t>(a.traced_windows.size()));
  for (const TimeWindow& t : a.traced_windows) {
    body.i64(t.begin_ns);
    body.i64(t.end_ns);
  }
  Writer w;
  w.u64(a.dropped);
  w.u64(a.not_kept);
  w.i64(a.kept_until_ns);
  w.u64(a.bad_timestamps);
  w.u64(a.incomplete_buffers);
  names.write(w);
  w.bytes(body.str());
  return std::move(w.str());
}

// False on a payload that does not parse; `out` then holds nothing of it. `version`: the frame's.
bool decode_records(std::string_view payload, std::uint16_t version, GpuActivity& out) {
  const bool v3 = version >= 3;
  Reader r(payload);
  GpuActivity a;
  a.dropped = r.u64();
  a.not_kept = r.u64();
  a.kept_until_ns = r.i64();
  a.bad_timestamps = r.u64();
  a.incomplete_buffers = r.u64();
  std::vector<InternedName> names(r.count(4));
  for (InternedName& name : names) name = r.bytes(r.u32());
  const auto name_at = [&](std::uint32_t i) -> InternedName {
    if (i >= names.size()) {
      r.fail();
      return {};
    }
    return names[i];
  };
  a.kernels.resize(r.count(kKernelBytes + (v3 ? 4 : 0)));
  for (KernelRecord& k : a.kernels) {
    k.name = name_at(r.u32());
    k.start_ns = r.i64();
    k.end_ns = r.i64();
    k.device = r.u32();
    k.stream = r.u32();
    k.correlation_id = r.u32();
    if (v3) k.graph_id = r.u32();
  }
  a.memcpys.resize(r.count(kMemcpyBytes));
  for (MemcpyRecord& m : a.memcpys) {
    const auto kind = enum_at_most(r.u8(), MemcpyKind::other);
    const auto src = enum_at_most(r.u8(), MemoryKind::other);
    const auto dst = enum_at_most(r.u8(), MemoryKind::other);
    if (!kind || !src || !dst) r.fail();
    m.kind = kind.value_or(MemcpyKind::other);
    m.src = src.value_or(MemoryKind::other);
    m.dst = dst.value_or(MemoryKind::other);
    m.bytes = r.u64();
    m.start_ns = r.i64();
    m.end_ns = r.i64();
    m.device = r.u32();
    m.stream = r.u32();
    m.correlation_id = r.u32();
  }
  a.memsets.resize(r.count(kMemsetBytes));
  for (MemsetRecord& m : a.memsets) {
    m.bytes = r.u64();
    m.start_ns = r.i64();
    m.end_ns = r.i64();
    m.device = r.u32();
    m.stream = r.u32();
    m.correlation_id = r.u32();
  }
  a.syncs.resize(r.count(kSyncBytes));
  for (SyncRecord& y : a.syncs) {
    const auto type = enum_at_most(r.u8(), SyncType::other);
    if (!type) r.fail();
    y.type = type.value_or(SyncType::other);
    y.start_ns = r.i64();
    y.end_ns = r.i64();
    y.stream = r.u32();
    y.correlation_id = r.u32();
  }
  a.runtime.resize(r.count(kRuntimeBytes + (v3 ? 1 : 0)));
  for (RuntimeApiRecord& x : a.runtime) {
    x.name = name_at(r.u32());
    x.start_ns = r.i64();
    x.end_ns = r.i64();
    x.thread_id = r.u32();
    x.correlation_id = r.u32();
    if (v3) {
      const auto domain = enum_at_most(r.u8(), ApiDomain::driver);
      if (!domain) r.fail();
      x.domain = domain.value_or(ApiDomain::runtime);
    }
  }
  if (version >= 4) {
    a.outside_windows = r.u64();
    a.traced_windows.resize(r.count(kWindowBytes));
    for (TimeWindow& t : a.traced_windows) {
      t.begin_ns = r.i64();
      t.end_ns = r.i64();
      if (t.end_ns < t.begin_ns) r.fail();
    }
  }
  if (r.failed() || !r.done()) return false;
  out.append(std::move(a));
  return true;
}

std::string tracing_payload(const TracingMode& t) {
  Writer w;
  w.u8(static_cast<std::uint8_t>(t.runtime_calls));
  w.u32(t.runtime_callbacks);
  w.u8(static_cast<std::uint8_t>(t.driver_calls));
  w.u32(t.driver_callbacks);
  w.u8(!t.sync_records ? 2 : t.completed_syncs_only ? 1 : 0);  // 2: none at all
  w.u32(static_cast<std::uint32_t>(t.note.size()));
  w.bytes(t.note);
  w.i64(t.sampling.window_ns);
  w.i64(t.sampling.period_ns);
  w.i64(t.sampling.lead_ns);
  return std::move(w.str());
}

// False on a payload that does not parse. `version`: the frame's.
bool decode_tracing(std::string_view payload, std::uint16_t version, TracingMode& out) {
  Reader r(payload);
  TracingMode t;
  const auto runtime = enum_at_most(r.u8(), TracingMode::Calls::none);
  t.runtime_callbacks = r.u32();
  const auto driver = enum_at_most(r.u8(), TracingMode::Calls::none);
  t.driver_callbacks = r.u32();
  const std::uint8_t completed = r.u8();
  t.note = r.bytes(r.u32());
  if (version >= 4) {
    t.sampling.window_ns = r.i64();
    t.sampling.period_ns = r.i64();
    t.sampling.lead_ns = r.i64();
    const TraceSampling& p = t.sampling;
    if (p.period_ns < 0 || p.lead_ns < 0 ||
        (p.period_ns > 0 && (p.window_ns <= 0 || p.window_ns >= p.period_ns)))
      r.fail();
  }
  if (!runtime || !driver || completed > 2 || r.failed() || !r.done()) return false;
  t.runtime_calls = *runtime;
  t.driver_calls = *driver;
  t.completed_syncs_only = completed == 1;
  t.sync_records = completed != 2;
  out = std::move(t);
  return true;
}

std::uint32_t le32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
std::uint16_t le16(const char* p) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(p[0]) |
                                    static_cast<unsigned char>(p[1]) << 8);
}

// Reads up to `n` bytes; fewer only at the end of the file.
std::size_t read_some(std::ifstream& in, char* to, std::size_t n) {
  in.read(to, static_cast<std::streamsize>(n));
  return static_cast<std::size_t>(in.gcount());
}

}  // namespace

std::string encode_gpu_status(std::string_view status) { return frame(kStatusFrame, status); }

std::string encode_gpu_activity(const GpuActivity& activity) {
  return frame(kRecordsFrame, records_payload(activity));
}

std::string encode_gpu_tracing(const TracingMode& tracing) {
  return frame(kTracingFrame, tracing_payload(tracing));
}

GpuActivityStream read_gpu_activity(const std::filesystem::path& file, std::uint64_t from_offset) {
  GpuActivityStream s;
  s.offset = from_offset;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    s.error = file.string() + ": cannot be opened: " + std::strerror(errno);
    return s;
  }
  in.seekg(static_cast<std::streamoff>(from_offset));
  if (!in) {
    s.error = file.string() + ": cannot seek to byte " + std::to_string(from_offset);
    return s;
  }
  const auto corrupt = [&](const std::string& what) {
    s.error = file.string() + ": " + what + " at byte " + std::to_string(s.offset);
  };
  std::string payload;
  for (;;) {
    char header[kHeaderBytes];
    const std::size_t got = read_some(in, header, kHeaderBytes);
    if (got == 0) break;
    if (got < kHeaderBytes) {
      s.torn_tail = true;
      break;
    }
    if (std::memcmp(header, kMagic, sizeof kMagic) != 0) {
      corrupt("not a feedscope GPU activity frame (bad magic)");
      break;
    }
    const std::uint16_t version = le16(header + 4);
    if (version < kOldestReadable || version > kVersion) {
      corrupt("frame version " + std::to_string(version) + ", this feedscope reads versions " +
              std::to_string(kOldestReadable) + " to " + std::to_string(kVersion) +
              (version > kVersion ? " (the file was written by a newer libfeedscope_inject.so)"
                                  : " (the file was written by an older libfeedscope_inject.so)"));
      break;
    }
    const std::uint16_t type = le16(header + 6);
    const std::uint32_t length = le32(header + 8);
    if (length > kMaxPayloadBytes) {
      corrupt("frame length " + std::to_string(length) + " past the limit");
      break;
    }
    payload.resize(length);
    if (read_some(in, payload.data(), length) < length) {
      s.torn_tail = true;
      break;
    }
    std::uint32_t crc = detail::crc32c(header, kCheckedHeaderBytes);
    crc = detail::crc32c(payload.data(), payload.size(), crc);
    if (crc != le32(header + 12)) {
      corrupt("checksum mismatch");
      break;
    }
    if (type == kStatusFrame) {
      s.statuses.push_back(payload);
    } else if (type == kRecordsFrame) {
      if (!decode_records(payload, version, s.activity)) {
        corrupt("records frame that does not parse");
        break;
      }
    } else if (type == kTracingFrame && version >= 3) {
      TracingMode tracing;
      if (!decode_tracing(payload, version, tracing)) {
        corrupt("tracing frame that does not parse");
        break;
      }
      if (!s.activity.tracing) s.activity.tracing = std::move(tracing);
    } else {
      corrupt("unknown frame type " + std::to_string(type));
      break;
    }
    s.offset += kHeaderBytes + length;
  }
  return s;
}

std::filesystem::path gpu_activity_file(const std::filesystem::path& dir, int pid) {
  return dir / ("gpu-" + std::to_string(pid) + ".fsgpu");
}

}  // namespace feedscope
