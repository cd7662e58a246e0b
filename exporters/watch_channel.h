#pragma once
// How a program under `feedscope watch` talks to the watcher: the watcher names a directory in
// FEEDSCOPE_WATCH_DIR; a feedscope Session inside the program (C++, or Python's over the C ABI)
// leaves its report there as session-<pid>.json when it finishes, and the CUPTI injection library
// its GPU records as gpu-<pid>.fsgpu (profiler/gpu_activity_wire.h). Files, not a socket: what a
// crashed program wrote before it died is still there, and nothing in the program waits on the
// watcher.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "profiler/report.h"

namespace feedscope {

inline constexpr const char* kWatchDirEnv = "FEEDSCOPE_WATCH_DIR";

// The channel directory when this process runs under `feedscope watch`.
std::optional<std::filesystem::path> watch_channel_dir();

// Leaves `report` in the channel as session-<pid>.json (written whole, then renamed).
void hand_report_to_watcher(const std::filesystem::path& dir, const Report& report);

// One window (about a second) of a Session's spans while the program runs, left as
// live-<pid>.json for the watcher's live per-rank series: its data stall and its pace.
struct LiveWindow {
  int pid = 0;
  std::optional<int> rank;  // the Session's (RANK of a torch.distributed job)
  double wall_s = 0;        // the window's length
  double wait_s = 0;        // the training thread's wait for data in it
  std::int64_t steps = 0;   // step spans that began in it
  std::int64_t end_ns = 0;  // when it ended, CLOCK_MONOTONIC (one clock for every process here)
};
void hand_live_window(const std::filesystem::path& dir, const LiveWindow& window);
// Every live-<pid>.json in `dir`; one that cannot be read (being replaced) is left out.
std::vector<LiveWindow> read_live_windows(const std::filesystem::path& dir);

// What a Session inside the watched program measured, read back from its session-<pid>.json.
struct SessionHandoff {
  int pid = 0;
  Throughput throughput;
  std::vector<StageStats> stages;
  std::vector<StageStats> custom_stages;
  std::int64_t batch_size = 0;  // as configured; 0: unknown
  int num_workers = 0;
  std::string device;
  TrainingSummary training;
  DataErrorsSummary data_errors;
};

// Every session-<pid>.json in `dir`, by pid. A file that cannot be parsed is skipped with its
// name and the reason in `errors`.
std::vector<SessionHandoff> read_session_handoffs(const std::filesystem::path& dir,
                                                  std::vector<std::string>& errors);

}  // namespace feedscope
