#pragma once
// What a device minute leaves behind: a recording of what `feedscope run` or `feedscope watch`
// handed the diagnosis, and its replay through the same summary and the same rules, on any
// machine, without a GPU. A lent GPU is rare and short; its runs, recorded, become tests that run
// on CPUs from then on (tests/fixtures/gpu/, docs/gpu.md#recordings).
//
// A recording is a directory:
//   recording.json  the manifest: schema, kind ("run" or "watch"), the GPU records kept and left
//                   out, or why there was no GPU trace
//   input.json      the diagnosis' input but the GPU summary: DiagnosisInput for run,
//                   WatchDiagnosisInput for watch (exporters/detail/evidence_json.h), lossless
//   gpu.fsgpu       the GPU activity records feedscope received, in the watch wire format
//                   (profiler/gpu_activity_wire.h); absent without a GPU trace
//   steps.json      run: the measured step windows the summary was made over
//   expect.json     the diagnosis and the GPU summary a replay must give
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "profiler/diagnosis.h"
#include "profiler/gpu_activity.h"
#include "profiler/gpu_trace.h"
#include "profiler/report.h"
#include "profiler/watch_diagnosis.h"

namespace feedscope {

// Where run and watch record, unless --record-dir names a directory.
inline constexpr const char* kRecordDirEnv = "FEEDSCOPE_RECORD_DIR";
// The most GPU records a recording keeps (0: all of them); default kRecordMaxRecords.
inline constexpr const char* kRecordMaxRecordsEnv = "FEEDSCOPE_RECORD_MAX_RECORDS";
// About 2 MB of wire format: kernel records are 36 bytes, API calls 32.
inline constexpr std::size_t kRecordMaxRecords = 50'000;
inline constexpr const char* kRecordingSchema = "feedscope.recording/1";

// A recording that cannot be read: a file missing or corrupt, a key missing or of the wrong type.
// what() names the file, and the key where one is at fault.
class RecordingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The GPU records of a run or a watched program, and for a run what its summary was made over
// (summarize_measured_steps' arguments).
struct RecordedGpu {
  GpuActivity activity;
  std::vector<StepWindow> steps;  // run only
  std::int64_t steps_complete_until_ns = std::numeric_limits<std::int64_t>::max();
  std::int64_t measured_begin_ns = 0;
};

struct Recording {
  // Exactly one is set. Their gpu_trace is neither stored nor read: a replay makes it from `gpu`.
  std::optional<DiagnosisInput> run;
  std::optional<WatchDiagnosisInput> watch;
  // None: there was no GPU trace (run: no tracer; watch: no CUDA record), and the diagnosis had no
  // GPU summary.
  std::optional<RecordedGpu> gpu;
  std::string gpu_trace_unavailable;  // why not, where not
  // Read back: the records the run had, and those the recording's cap left out (counted in
  // gpu->activity.not_kept too).
  std::uint64_t records_seen = 0;
  std::uint64_t records_left_out = 0;
  // A recording no device made: the generator that fabricated it (a test support function), which
  // expect.json names; empty for one recorded by `run` or `watch`.
  std::string fabricated_by;
};

// A diagnosis and the GPU summary it read.
struct Replayed {
  Diagnosis diagnosis;
  std::optional<GpuTraceSummary> gpu_trace;
};

// The recording's records through the summary `run` makes (summarize_measured_steps) or `watch`
// makes (kernel_active_windows, summarize_program_activity), and the input through the same
// diagnosis (diagnose, diagnose_watched).
Replayed replay(const Recording& recording);

// The recording's input through today's diagnosis with `gpu_trace` as its GPU summary: of a capped
// recording, what today's rules say of the run's own summary (expect.json's "run", made of every
// record before the cap), which the replay of the records kept must agree with.
Replayed diagnose_with(const Recording& recording, const std::optional<GpuTraceSummary>& gpu_trace);

struct RecordingWritten {
  std::uint64_t records_kept = 0;
  std::uint64_t records_left_out = 0;
  std::uintmax_t bytes = 0;  // every file together
  // The written recording, read back and replayed, against what it expects: one line per
  // difference (empty: it replays faithfully).
  std::vector<std::string> replay_differences;
  // Where the cap left records out: whether the replay of what was kept names the run's bottleneck
  // with the run's rules.
  bool verdict_kept = true;
};

// Writes `recording` into `dir` (created; files of an earlier recording there are replaced) with
// at most `max_records` GPU records (0: all). `produced` is what the run or watch diagnosed; it is
// what expect.json holds where every record was kept. Where the cap left records out, it keeps
// whole measured steps from the first (a run: as a tracer's own memory cap does, the summary of
// the kept records the one the run would have made had its tracer stopped there) or a watched
// program's last whole seconds (its steady state, the start-up left out): expect.json then holds
// that replay, and under "run" what the run itself produced. Throws std::runtime_error naming a
// file that cannot be written.
RecordingWritten write_recording(const std::filesystem::path& dir, const Recording& recording,
                                 const Replayed& produced, std::size_t max_records);

// One line for the log: where, the GPU records kept and left out, the size, and whether it
// replays to what it expects.
std::string describe_recording(const std::filesystem::path& dir, const RecordingWritten& written);

// Throws RecordingError.
Recording read_recording(const std::filesystem::path& dir);

// expect.json: what a replay must give, and where the cap left records out, what the run gave.
struct Expectation {
  Replayed expected;
  std::optional<Replayed> run;
  std::string fabricated_by;  // Recording::fabricated_by; empty: recorded on a device
};
Expectation read_expectation(const std::filesystem::path& dir);  // throws RecordingError

// One line per difference between `got` and `expected`: the bottleneck, the input-bound class, the
// rules, the recommendations' settings, and every number (predictions, the data stall, each GPU
// summary figure) beyond `relative_tolerance`. The verdict's and evidence's wording is not
// compared. Empty: the same.
std::vector<std::string> compare_replay(const Replayed& got, const Replayed& expected,
                                        double relative_tolerance = 1e-6);

// `feedscope replay DIR`: the replay as text, and against expect.json where there is one.
std::string format_replay(const std::filesystem::path& dir, const Recording& recording,
                          const Replayed& replayed, const std::optional<Expectation>& expect);
// `--json`: {"recording", "kind", "diagnosis", "gpu_trace", "expect": {"differences"} or null}.
std::string replay_to_json(const std::filesystem::path& dir, const Recording& recording,
                           const Replayed& replayed, const std::optional<Expectation>& expect);

// The directory to record into: `flag` where given, else $FEEDSCOPE_RECORD_DIR; empty: none.
std::string recording_dir(const std::string& flag);
// $FEEDSCOPE_RECORD_MAX_RECORDS, else kRecordMaxRecords. Throws std::invalid_argument naming the
// variable for a value that is not a whole number of 0 or more.
std::size_t recording_max_records();

}  // namespace feedscope
