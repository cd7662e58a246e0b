#pragma once
// What feedscope's own clients (the Python client's C ABI, feedscope::Loader) reach inside a
// Session beyond its public API: the whole report, the span registry their loader's spans join,
// and what feedscope's loader tells the diagnosis. Not installed: users have feedscope/session.h.
#include <cstdint>

#include <feedscope/session.h>

#include "loader/autotune.h"
#include "loader/sample_costs.h"
#include "loader/span_recorder.h"
#include "profiler/loop_profiler.h"
#include "profiler/report.h"

namespace feedscope {

struct SessionAccess {
  // finish(), and the whole report it wrote.
  static const Report& finish(Session& session);
  static LoopProfiler& profiler(Session& session) noexcept;
  // The registry the session's collector drains: feedscope's own loader, wrapped, re-records its
  // worker spans here (api/handed_loader.h), so they join the report.
  static SpanRegistry& spans(Session& session) noexcept;
  // Each sample's load time and the slowest files of feedscope's loader: report.json's samples,
  // and the diagnosis' slow_samples. The latest call wins; ignored once finished.
  static void set_sample_costs(Session& session, SampleCosts samples);
  // The session's loader tunes itself (num_workers=auto): report.json's autotune,
  // feedscope_loader_workers/prefetch on the metrics endpoint, and a diagnosis that starts from
  // where the tuner ended. The moves' t_s count from `start_ns` (the tuner's start); the report
  // counts them from the session's. Each call replaces the last; ignored once finished. Called by
  // the training thread, as wrap() is.
  static void set_autotune(Session& session, AutotuneSummary autotune, std::int64_t start_ns);
};

}  // namespace feedscope
