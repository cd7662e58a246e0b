#include "profiler/gpu_activity.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <mutex>
#include <ostream>
#include <unordered_set>

#include "profiler/time_windows.h"

namespace feedscope {

namespace {

struct NameHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// The process's names. Leaked on purpose: records may be read while static destructors run (CUPTI's
// last buffer, an atexit flush).
struct NameStore {
  std::mutex mutex;
  std::unordered_set<std::string, NameHash, std::equal_to<>> names;  // guarded by mutex
};

NameStore& name_store() {
  static NameStore* store = new NameStore;
  return *store;
}

const std::string* intern(std::string_view name) {
  NameStore& store = name_store();
  std::lock_guard lock(store.mutex);
  auto it = store.names.find(name);
  if (it == store.names.end()) it = store.names.emplace(name).first;
  return &*it;  // an unordered_set's elements stay where they are as it grows
}

template <typename T>
void move_append(std::vector<T>& to, std::vector<T>& from) {
  if (to.empty()) {
    to = std::move(from);
  } else {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  }
  from.clear();
}
}  // namespace

InternedName::InternedName() {
  static const std::string* const empty = intern({});  // records are made empty by the million
  name_ = empty;
}

InternedName::InternedName(std::string_view name) : name_(intern(name)) {}

std::ostream& operator<<(std::ostream& out, const InternedName& name) { return out << name.str(); }

void GpuActivity::append(GpuActivity&& more) {
  move_append(kernels, more.kernels);
  move_append(memcpys, more.memcpys);
  move_append(memsets, more.memsets);
  move_append(syncs, more.syncs);
  move_append(runtime, more.runtime);
  dropped += more.dropped;
  more.dropped = 0;
  not_kept += more.not_kept;
  more.not_kept = 0;
  kept_until_ns = std::min(kept_until_ns, more.kept_until_ns);
  more.kept_until_ns = std::numeric_limits<std::int64_t>::max();
  bad_timestamps += more.bad_timestamps;
  more.bad_timestamps = 0;
  incomplete_buffers += more.incomplete_buffers;
  more.incomplete_buffers = 0;
  if (!tracing) tracing = std::move(more.tracing);
  more.tracing.reset();
  move_append(traced_windows, more.traced_windows);
  traced_windows = merged_windows(std::move(traced_windows));
  outside_windows += more.outside_windows;
  more.outside_windows = 0;
}

const char* to_string(TracingMode::Calls calls) {
  switch (calls) {
    case TracingMode::Calls::selected: return "selected";
    case TracingMode::Calls::all: return "all";
    case TracingMode::Calls::none: break;
  }
  return "none";
}

bool is_collective_kernel(std::string_view name) {
  for (std::size_t i = 0; i + 4 <= name.size(); ++i)
    if ((name[i] | 0x20) == 'n' && (name[i + 1] | 0x20) == 'c' && (name[i + 2] | 0x20) == 'c' &&
        (name[i + 3] | 0x20) == 'l')
      return true;
  return false;
}

const char* to_string(MemcpyKind kind) {
  switch (kind) {
    case MemcpyKind::h2d: return "HtoD";
    case MemcpyKind::d2h: return "DtoH";
    case MemcpyKind::d2d: return "DtoD";
    case MemcpyKind::other: break;
  }
  return "other";
}

const char* to_string(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::pageable: return "pageable";
    case MemoryKind::pinned: return "pinned";
    case MemoryKind::device: return "device";
    case MemoryKind::other: break;
  }
  return "other";
}

const char* to_string(SyncType type) {
  switch (type) {
    case SyncType::event: return "event";
    case SyncType::stream: return "stream";
    case SyncType::context: return "context";
    case SyncType::stream_wait_event: return "stream_wait_event";
    case SyncType::other: break;
  }
  return "other";
}

}  // namespace feedscope
