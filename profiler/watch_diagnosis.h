#pragma once
// What `feedscope watch` hands the diagnosis of a program it ran: what a watcher can see without
// the program's help (its process tree by role, profiler/process_tree.h; the machine's CPU, disk
// and pressure; the CUPTI trace of its CUDA work) and the spans of a feedscope Session inside it,
// where it has one. It is filed into the one Evidence (profiler/evidence.h) and diagnosed by the
// same rules as `run`: the spans decide where there are any, and the tree adds its evidence.
// The thresholds below are the outside rules' (profiler/rules/tree_rules.cc).
#include <optional>

#include "profiler/diagnosis.h"
#include "profiler/process_tree.h"
#include "profiler/program_torch.h"
#include "profiler/report.h"

namespace feedscope {

// Thresholds on the tree's busy shares (of one core).
inline constexpr double kThreadPinned = 0.75;   // the thread is the limit where it is this busy
inline constexpr double kWorkersSaturated = 0.75;
inline constexpr double kIoWaitHigh = 0.3;      // share of readings in D (I/O) wait
// The host blocked in CUDA syncs this much of the traced time: the syncs set the pace.
inline constexpr double kSyncWaitDominant = 0.2;
// The training thread working this share of a core or more (its syncs' spin left out), beside a
// GPU whose own work fills less than kGpuMostlyIdle of the time and that idles between its kernels
// kHostGapShare of it or more: the host's dispatch sets the pace (compiled nanoGPT on an H200,
// 2026-11-28: the thread 69 %, the GPU 8 %, idle between kernels 91 %).
inline constexpr double kHostBusy = 0.5;
inline constexpr double kGpuMostlyIdle = 0.5;
inline constexpr double kHostGapShare = 0.5;
// Loader workers started again at every epoch explain the loop's wait where, over kChurnMinRestarts
// or more restarts, the training thread's waits for each new set's first batch are
// kChurnExplainsWait or more of its whole wait on the loader (and kModeratelyInputBound of the run),
// kChurnMinStartupS or more each (a set that starts in less is a batch's load, not a start-up), read
// over kMinQueueLooks looks or more (a Hogwild script's training processes, started as a set and
// not yet known for trainers, read 0.05 s each over 92 looks).
inline constexpr int kChurnMinRestarts = 2;
inline constexpr double kChurnExplainsWait = 0.5;
inline constexpr double kChurnMinStartupS = 0.1;
// The machine's cores are full where fewer than this many are idle (of its cores together).
inline constexpr double kIdleCoresFull = 0.25;
// The trainer's other threads under this many cores: its step runs on one thread; an idle core
// this large is worth a second one.
inline constexpr double kOneThreadOthers = 0.25;
// Cores of yielding threads (ProcessTreeSummary::yielding_threads_cores) worth an evidence line.
inline constexpr double kYieldingCoresNamed = 0.05;
inline constexpr double kIdleCoreWorthAThread = 0.5;
// A program that failed or crashed sooner than this, with no spans and no CUDA kernels, ran too
// briefly for its tree to say anything (a missing script, a bad argument): no bottleneck.
inline constexpr double kTooShortToDiagnoseS = 10;
// A program reading less than this from storage, with no data file open and no loader workers,
// holds its data in memory.
inline constexpr double kInMemoryReadBytesPerS = 1e6;

struct WatchDiagnosisInput {
  ProcessTreeSummary tree;
  int cpus = 1;
  Utilization utilization;  // the sampler's series: system CPU, disk, pressure, GPUs
  // Over the program's CUDA-active time (one window from its first CUDA call to its last).
  std::optional<GpuTraceSummary> gpu_trace;
  // The span diagnosis' input where the program's Session sent its spans; its utilization and
  // gpu_trace are the watcher's.
  std::optional<DiagnosisInput> spans;
  // The program's torch (profiler/program_torch.h), where its memory map showed one.
  std::optional<ProgramTorch> torch;
  // The program's own `Time ... Data ...` lines (cli/output_scanner.h), where they were read.
  std::optional<PrintedDataWait> printed;
  // How many data files (images, shards) the program was seen holding open (profiler/data_files.h);
  // unset where watch did not look.
  std::optional<std::size_t> data_files_seen;
  // What those files were: "images", "shards" (tar, TFRecord), "none" (no data file seen open:
  // in memory, a memory-mapped array, another format); empty where watch did not look.
  std::string data_kind;
  // The per-sample cost of the program's files, measured with feedscope's decoder after it ended
  // (try_loader); unset where not measured.
  std::optional<SampleCosts> samples;
  // How it ended (ProgramSummary's `ended` and `exit`) and after how long.
  std::string ended;
  std::string exit;
  double wall_s = 0;
};

Evidence evidence_of(const WatchDiagnosisInput& input);
Diagnosis diagnose_watched(const WatchDiagnosisInput& input);

}  // namespace feedscope
