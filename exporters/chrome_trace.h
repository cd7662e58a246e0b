#pragma once
// trace.json in the Chrome trace event format (the {"traceEvents": [...]} object form), which
// Perfetto UI and chrome://tracing open: one host process with a track per span lane, and a
// "GPU" process with a track per (device, stream). Written as a stream of events, never built as
// one document in memory, so a run of millions of spans costs no more than its file.
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loader/span_recorder.h"
#include "profiler/gpu_activity.h"

namespace feedscope {

// Writes `text` as a JSON string literal: quotes, backslashes and control characters escaped,
// and bytes that are not valid UTF-8 replaced by U+FFFD so that strict parsers accept the file.
void write_json_string(std::ostream& out, std::string_view text);

// One trace, event by event. Timestamps are nanoseconds in now_ns() time, written as
// microseconds after `origin_ns`; events that end before the origin are left out. Not
// thread-safe: one writer per stream. finish() (or the destructor) closes the document.
class ChromeTraceWriter {
 public:
  using Args = std::initializer_list<std::pair<std::string_view, std::int64_t>>;

  ChromeTraceWriter(std::ostream& out, std::int64_t origin_ns);
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  void name_process(int pid, std::string_view name, int sort_index);
  void name_thread(int pid, int tid, std::string_view name, int sort_index);
  // A complete ("X") event.
  void complete(int pid, int tid, std::string_view name, std::string_view category,
                std::int64_t begin_ns, std::int64_t end_ns, Args args = {});
  void finish();

 private:
  void begin_event();
  void metadata(int pid, int tid, std::string_view kind, std::string_view arg_name,
                std::string_view text, bool number, std::int64_t value);

  std::ostream& out_;
  std::int64_t origin_ns_;
  bool first_ = true;
  bool finished_ = false;
};

inline constexpr int kHostPid = 1;
inline constexpr int kGpuPid = 2;

// The whole trace of a run: stage spans on their lanes and, when given, the GPU's kernels,
// copies and memsets. `gpu` may be null (no GPU trace).
void write_chrome_trace(std::ostream& out, std::span<const Span> spans,
                        const std::vector<LaneInfo>& lanes, const GpuActivity* gpu,
                        std::int64_t origin_ns);

// The same into `path`, through a temporary file and a rename. Throws std::runtime_error naming
// the path when it cannot be written.
void write_chrome_trace_file(const std::string& path, std::span<const Span> spans,
                             const std::vector<LaneInfo>& lanes, const GpuActivity* gpu,
                             std::int64_t origin_ns);

}  // namespace feedscope
