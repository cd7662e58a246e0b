#pragma once
// The report of one run: DESIGN.md's report.json schema as plain structs, filled by the profiler
// and written by the exporters. No JSON or torch types here.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "loader/autotune.h"
#include "profiler/gpu_activity.h"
#include "profiler/process_tree.h"
#include "profiler/program_torch.h"

namespace feedscope {

inline constexpr const char* kReportSchema = "feedscope.report/1";

// A config key's value; nullptr: not known (a wrapped loop's pin_memory where the loader said
// nothing), written as null.
using ConfigValue = std::variant<bool, std::int64_t, double, std::string, std::nullptr_t>;

struct Environment {
  int cpus = 0;
  std::uint64_t memory_total_bytes = 0;
  std::string device;  // "cpu" or "cuda:0 (NVIDIA H100 80GB HBM3)"
  std::string torch_version;
  std::string cuda_version;  // "none" without CUDA
  std::string feedscope_version;
  std::string hostname;
};

struct Throughput {
  double samples_per_s = 0;
  double batches_per_s = 0;
  std::int64_t steps = 0;  // measured steps, warm-up excluded
  std::int64_t samples = 0;
  double wall_s = 0;  // measured wall time, warm-up excluded
  // A watched program: where the figures came from (a Session's spans, or which of its own lines,
  // read how); empty: not measured. Its tokens/s where its lines count tokens (0: not measured).
  std::string source;
  double tokens_per_s = 0;
  // Where only a line that repeats steadily was read (cli/progress_counters.h): its lines/s.
  double lines_per_s = 0;
};

struct StageStats {
  std::string name;
  std::int64_t count = 0;  // spans
  double busy_s = 0;       // sum of span durations
  double mean_ms = 0;
  double p50_ms = 0;
  double p95_ms = 0;
  double share = 0;  // busy_s / (wall_s x lanes): fraction of its threads' time
  int lanes = 0;     // threads that ran the stage
};

struct SeriesStats {
  double mean = 0;
  double p95 = 0;
  double max = 0;
};

struct Utilization {
  double cpu_process_ratio = 0;  // process CPU time / (wall x cpus)
  double cpu_system_ratio = 0;   // busy / total ticks of /proc/stat over the run
  // CPU of descendant processes (a DataLoader's workers) over the window, in cores.
  std::optional<double> cpu_child_processes_cores;
  // Bytes the process fetched from storage over the window (read_bytes of /proc/self/io: the
  // page cache's hits are not in it) / wall seconds.
  std::optional<double> storage_read_bytes_per_s;
  std::uint64_t rss_bytes_peak = 0;
  // Means of the sampler's series; empty where the source was unavailable.
  std::optional<double> disk_read_bytes_per_s;
  std::optional<double> io_pressure_ratio;
  std::optional<double> gpu_util_ratio;
  std::size_t samples = 0;                        // sampler readings in the window
  std::map<std::string, SeriesStats> series;      // every sampled series
  std::map<std::string, double> threads;          // mean busy ratio per thread name
  std::map<std::string, std::string> unavailable; // source -> reason
};

struct Recommendation {
  std::string action;   // one line a person acts on
  std::string setting;  // "num_workers=2"
  // Both unset where the evidence supports no number ("no prediction", null in report.json):
  // never 0. The speed-up alone where samples were not counted (a watched program's CPU shares).
  std::optional<double> predicted_samples_per_s;
  std::optional<double> predicted_speedup;
  std::string basis;  // how the prediction was made, or why there is none
  // The changes it names as `watch --try` runs them ("threads=2", "num_workers=2"), where its
  // setting does not say them: a guess with no setting claimed ("try giving torch's intra-op pool
  // the idle cores"), or a change --try measured; so that a trial settles it (cli/try_verdicts.h).
  // Not in report.json.
  std::vector<std::string> changes = {};
};

// report.json's recommendations[].basis_kind: "measured" (by a trial: `run`'s what-if trials,
// `watch --try`, feedscope's loader on the program's files), "predicted" (a model's number), or
// "not measured" (no number: a guess to try, or advice whose effect was not measured).
inline const char* basis_kind(const Recommendation& r) {
  if (!r.predicted_speedup && !r.predicted_samples_per_s) return "not measured";
  return r.basis.starts_with("measured") ? "measured" : "predicted";
}

// The rank of a torch.distributed job that holds the others back: in a synchronous job every rank
// runs at the slowest one's pace, the others waiting in the gradients' all-reduce.
struct Straggler {
  std::optional<int> rank;  // none where its environment had no RANK (a spawned rank)
  std::string host;
  int pid = 0;
  std::string bottleneck;  // its own diagnosis' name
  std::vector<std::string> evidence;
};

// A memory finding (profiler/rules/memory_rules.cc), beside the bottleneck: what grows, how fast,
// when the machine runs out where the trend holds, and the fix. Figures none where not measured.
struct MemoryFinding {
  std::string kind;  // the rule's name: memory_copy_on_access, memory_leak_one_process, ...
  std::string role;  // whose memory: "loader_worker", "trainer", "rank", "other"
  std::vector<int> pids;
  std::string summary;  // one sentence a person reads first
  // The processes' private memory together, and their shared, per second (a copy: shared falls).
  std::optional<double> private_bytes_per_s;
  std::optional<double> shared_bytes_per_s;
  std::optional<double> headroom_bytes;  // MemAvailable at the last reading
  std::optional<double> exhausted_in_s;  // headroom / growth, where memory grows and was judged
  std::string fix;
  // How long the processes were watched (their readings, start-up included); none where the
  // finding is not about growth over time.
  std::optional<double> watched_s = std::nullopt;
};

struct Diagnosis {
  std::string bottleneck;  // one of DESIGN.md's names
  double data_stall_ratio = 0;
  // What measured data_stall_ratio: "wait spans", or a watched program's own `Time ... Data ...`
  // lines. Empty: nothing did (a watch without either), and report.json says null.
  std::string data_stall_source;
  std::string input_bound;  // "no", "moderately", "highly" (TensorFlow profiler thresholds)
  std::string verdict;
  std::vector<std::string> evidence;
  std::vector<Recommendation> recommendations;
  // A torch.distributed job: the straggler, none where the ranks keep pace (or there is one rank).
  std::optional<Straggler> straggler;
  // The rules that fired, in their order (profiler/rules/registry.cc): which one named the
  // bottleneck, and what else weighed in.
  std::vector<std::string> rules;
  std::vector<MemoryFinding> memory;  // none found: empty
};

// One rank of a torch.distributed job, as `feedscope watch` saw it (profiler/rank_digest.h).
// Every figure is none where it was not measured: spans' only with the rank's Session, GPU ones
// only with its CUDA trace.
struct RankSummary {
  std::optional<int> rank;
  std::optional<int> local_rank;
  std::optional<int> node_rank;
  // The launcher whose variables named the rank: "torch", "openmpi", "pmi", "slurm"
  // (sampler/rank_identity.h); empty for a torch.multiprocessing.spawn rank, which none names.
  std::string rank_source;
  std::string host;
  int pid = 0;
  std::string device;      // "cpu", "cuda:N"
  std::string bottleneck;  // its own diagnosis, as if it ran alone
  std::string verdict;
  std::optional<double> samples_per_s;
  std::optional<double> data_stall_ratio;
  std::optional<double> step_ms;    // its step span, mean
  std::optional<double> period_ms;  // wall time per batch: the job's pace
  int num_workers = 0;
  std::optional<double> worker_busy;  // a worker's mean busy share of one core; none without
  // A worker's share of time ready to run but waiting for a core: busy + this is what it would
  // take of a core to itself (a saturated loader on a full machine reads 60 % busy, 35 % waiting).
  std::optional<double> worker_run_wait;
  std::optional<double> main_thread_busy;
  std::optional<double> cpu_cores;    // the rank's process, all its threads
  std::optional<double> gpu_busy;
  // Share of its time waiting in collectives for the other ranks, and how it was measured.
  std::optional<double> collective_wait_ratio;
  std::string collective_wait_source;
  std::optional<Recommendation> advice;  // its own diagnosis' first recommendation
  // Over the run, means of `timeline_bucket_s` seconds from the watch's first reading: its loader
  // workers' cores and its main thread's busy share, and where its Session streamed windows its
  // data stall (nullopt: no window in that bucket; empty: no Session). report.html's rank x time
  // view, and a straggler that moves from rank to rank.
  double timeline_bucket_s = 0;
  std::vector<double> timeline_workers_cores;
  std::vector<double> timeline_main_thread_busy;
  std::vector<std::optional<double>> timeline_data_stall;
  double first_seen_s = 0;  // seconds after the watch's first reading
  double last_seen_s = 0;
  std::string ended;  // "" while the job ran, else when it left (RankSummary::ended by kLeftEarlyS)
};

// The job as a whole: which reports it was built from (one per machine) and when.
struct JobSummary {
  std::string id;  // MASTER_ADDR:MASTER_PORT rdzv=RUN_ID
  std::optional<int> world_size;
  std::vector<std::string> hosts;
  std::vector<std::string> notes;  // ranks not seen, reports that overlap only in part
  // How the ranks relate (rank_digest.h's JobVerdict::pattern): one_rank, keep_pace, straggler,
  // moving_straggler, all_input_bound; empty where the job ended before anything was measured.
  std::string pattern;
  // The wall-clock span the reports cover (Unix seconds), where they say.
  std::optional<double> begin_unix_s;
  std::optional<double> end_unix_s;
};

// GPU activity over the measured steps (profiler/gpu_trace.h computes it from CUPTI records).
// Durations in microseconds, ratios in 0..1, bytes and GB/s (1e9 bytes/s) as named.
struct GpuTraceSummary {
  std::int64_t steps = 0;     // step windows analysed
  double step_wall_s = 0;     // their summed length: the denominator of every share below
  std::int64_t kernels = 0;   // kernels that started inside a step
  double kernels_per_step = 0;
  double mean_kernel_us = 0;
  double p50_kernel_us = 0;
  double p95_kernel_us = 0;
  double gpu_busy_s = 0;      // union of kernel, memcpy and memset time inside steps
  double gpu_busy_ratio = 0;  // gpu_busy_s / step_wall_s
  // The GPU's kernel (and memset) time from the first step's start to the last step's end,
  // between the steps too, per step: what a step costs the device. A loop that waits for data between steps lets
  // the device finish a step's kernels in the wait, outside every step window.
  double device_s_per_step = 0;
  // Idle time between consecutive stretches of GPU activity within a step.
  std::int64_t launch_gaps = 0;
  double mean_gap_us = 0;
  double p95_gap_us = 0;
  double gap_share = 0;  // summed gaps / step_wall_s
  // Host-blocking synchronizations that started inside a step: CUPTI synchronization records
  // and synchronous runtime calls (cudaDeviceSynchronize, cudaMemcpy, ...), each counted once.
  std::int64_t syncs = 0;
  double syncs_per_step = 0;
  double sync_wait_s = 0;  // host time blocked in them
  // The same syncs by the runtime call that made them ("cudaStreamSynchronize", "cudaMemcpy");
  // a synchronization record no runtime call of the trace matches is named by its kind
  // ("stream synchronize", made through the driver API).
  std::map<std::string, std::int64_t> syncs_by_call;
  // Launches inside steps: the traced launch calls (cudaLaunchKernel and friends, CUDA 13's
  // __cudaLaunchKernel, the driver's cuLaunchKernel and cuGraphLaunch), and each kernel whose
  // correlation id no traced launch call has (launched through a call the trace did not record),
  // counted from the kernel.
  std::int64_t launch_calls = 0;
  double mean_launch_call_us = 0;          // host time per traced call
  std::int64_t launches_without_call = 0;  // of launch_calls, counted from their kernels
  // How the trace was taken (which calls CUPTI recorded); none where the source did not say.
  std::optional<TracingMode> tracing;
  // Copies from the first step's start to the last step's end: the copy stream runs ahead of
  // the step, so its copies need not lie inside one.
  std::uint64_t h2d_pinned_bytes = 0;
  std::uint64_t h2d_pageable_bytes = 0;
  std::uint64_t h2d_other_bytes = 0;
  std::optional<double> h2d_pinned_gbps;    // bytes / summed copy time; none without copies
  std::optional<double> h2d_pageable_gbps;
  double h2d_share = 0;  // union of H2D copy time inside steps / step_wall_s
  double h2d_pageable_s_per_step = 0;  // summed pageable H2D copy time, per step
  std::uint64_t d2h_bytes = 0;
  // Blocking input copies: a host sync (cudaStreamSynchronize, ...) within a millisecond after a
  // host-to-device copy call on the same thread: torch's `.to(device)` without non_blocking.
  // Counted among `syncs` too; pinned memory and non_blocking=True remove them.
  std::int64_t syncs_after_h2d = 0;
  double sync_after_h2d_wait_s = 0;
  // CUDA graphs and compiled code, over the kernels that started inside a step: kernels a graph's
  // replay launched (CUPTI's graphId not 0), the distinct graphs, and their replays (distinct
  // graph and launch correlation); kernel launches made through the driver API (cuLaunchKernel:
  // Triton's under torch.compile, and cuBLAS's own in any loop: seen on an H200, 2 a step of a
  // plain MLP); the kernels Triton generated (named triton_*: torch.compile's code).
  std::int64_t graph_kernels = 0;
  std::int64_t graphs = 0;
  std::int64_t graph_replays = 0;
  std::int64_t driver_launch_calls = 0;
  std::int64_t triton_kernels = 0;
  // Collectives (NCCL kernels: the name contains "nccl"), inside steps: their union, its share of
  // the steps, and the share in which they alone ran (no other kernel, copy or memset on any
  // device): a rank's wait for the other ranks, with the transfer. gpu_busy_ratio less that share
  // is the device's own work.
  double collective_s = 0;
  double collective_share = 0;
  double collective_alone_share = 0;
  // Per device, where the steps' kernels and copies ran on more than one (empty otherwise): the
  // union over every stream of that device inside the steps.
  struct DeviceBusy {
    std::uint32_t device = 0;
    std::int64_t kernels = 0;
    double busy_s = 0;
    double busy_ratio = 0;  // busy_s / step_wall_s
  };
  std::vector<DeviceBusy> devices;
  std::uint64_t dropped = 0;  // records the tracer lost
  // Records left out for times that mean nothing (a start or end of 0, or an end before the
  // start), and tracer buffers whose records ended early at an incomplete one.
  std::uint64_t records_bad_timestamps = 0;
  std::uint64_t buffers_incomplete = 0;
  // Memory caps: records past the tracer's are counted here, not analysed; and when records or
  // step windows were left out, the summary covers only the measured steps that ended before
  // this many seconds into the measured window.
  std::uint64_t records_not_kept = 0;
  std::optional<double> covered_until_s;
  // Under sampled tracing (TracingMode::sampling): what was read, and how the totals were scaled;
  // none under whole tracing. Shares, rates, means and per-step figures are the read windows' own;
  // every count and summed time above (steps, step_wall_s, kernels, gpu_busy_s, syncs, their
  // waits, launch calls, bytes, ...) is the read windows' times their scale, an estimate of the
  // span. The lead (the first traced window: each process's first seconds of kernels, traced whole,
  // with its warm-up) is a stratum of its own, exact; only the later windows are scaled. Once
  // kLaterWindowsWithoutLead later windows were read, the figures are theirs alone (the steady
  // state, as torch.profiler's schedule leaves its warm-up out), and the lead is said apart.
  struct Sampled {
    TraceSampling sampling;
    double read_s = 0;  // of the span, the time the figures read
    double span_s = 0;  // the time the scaled totals stand for
    double scale = 1;   // span_s / read_s
    std::int64_t windows = 0;  // read, with a step or a piece of one in them
    // Windows with launch calls but not one device record, left out (a CUPTI that did not record
    // again after a window closed).
    std::int64_t windows_without_records = 0;
    // What each stratum holds: the steps (a piece counted as its share) and time read in it, the
    // span of the steps it stands for, its windows.
    struct Stratum {
      double read_s = 0;
      double span_s = 0;
      double steps = 0;
      std::int64_t windows = 0;
    };
    Stratum lead;
    Stratum later;
    bool lead_in_figures = true;
  };
  std::optional<Sampled> sampled;
};

// How much of the run trace.json holds: at most max_spans stage spans (--trace-max-spans), the
// first ones and the latest. When some were left out, they are exactly those that began from
// omitted_from_s to omitted_to_s (seconds after the run's start, as trace.json's timestamps).
struct TraceSummary {
  std::uint64_t max_spans = 0;
  std::uint64_t spans_total = 0;
  std::uint64_t spans_kept = 0;
  std::optional<double> omitted_from_s;
  std::optional<double> omitted_to_s;
};

struct TrainingSummary {
  std::string model;  // "mlp 3072-512-512-10" or "none (loader only)"
  std::int64_t parameters = 0;
  std::optional<double> first_loss;  // of the first step, warm-up included
  std::optional<double> last_loss;
};

struct DataErrorExample {
  std::uint64_t index = 0;
  std::string file;  // the sample's source: file (and record)
  std::string message;
};

// Samples that failed to load, under the run's bad-sample policy.
struct DataErrorsSummary {
  std::string policy = "fail";  // fail | skip
  double max_bad_ratio = 0;
  std::uint64_t count = 0;      // bad samples
  std::uint64_t attempted = 0;  // samples whose load was tried
  double ratio = 0;             // count / attempted
  // max_bad_ratio is applied to at least this many samples (LoaderOptions::bad_ratio_floor): up
  // to max_bad_ratio x ratio_floor bad samples pass before then. 0: not known.
  std::uint64_t ratio_floor = 0;
  std::vector<DataErrorExample> examples;  // the first few
};

// One of the slowest samples: its file (or shard and key), its load time, and what it is where
// that is known (unset otherwise: a shard member's bytes, a file that is not an image).
struct SlowSample {
  std::string file;
  double ms = 0;
  std::optional<std::uint64_t> bytes;
  std::optional<int> width;
  std::optional<int> height;
  std::string format;  // "jpeg", "png", ...; empty where not known
};

// Each sample's load time (read, decode and transform together): its distribution, the share of
// all load time the slowest took, and the slowest files. report.json's `samples`.
struct SampleCosts {
  // "feedscope's loader" (run, feedscope.DataLoader); under watch, "feedscope's decoder on the
  // program's files": the program's own per-sample times are not visible from outside.
  std::string measured_by;
  std::uint64_t count = 0;
  double total_s = 0;
  double mean_ms = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  double slowest_1pct_share = 0;  // of all load time, the slowest 1 % of samples
  double slowest_5pct_share = 0;
  // The slow samples: those that took kSlowSampleFactor x the p90 or more. How many, and the
  // load time they took beyond the median's cost (what they would save at the median's cost).
  double slow_threshold_ms = 0;
  std::uint64_t slow_count = 0;
  double slow_excess_s = 0;
  std::vector<SlowSample> slowest;  // up to 20, slowest first
  // The loop's wait in the loader for its batches, and the part of it in which the batch it waited
  // for was loading its slowest sample; unset where nothing waited in feedscope's loader.
  std::optional<double> wait_s;
  std::optional<double> wait_on_slowest_s;
  // The pipeline's output side (images:DIR's --image-size), for the size the advice names; 0
  // where the dataset is not images.
  int image_size = 0;
};

// An argv as one line, the words joined by spaces (for people to read, not to run).
inline std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& word : argv) out += (out.empty() ? "" : " ") + word;
  return out;
}

// feedscope's loader measured on a watched program's own files once it ended (the fix a
// cpu_preprocess diagnosis offers: feedscope.DataLoader), or why it was not.
struct LoaderTry {
  std::string skipped;  // why nothing was measured; empty when it was
  std::string dataset;  // "images:ROOT", as found in the program's open files
  std::vector<std::string> files_seen;  // the first few of those files
  // Where they were found: "open files" (/proc/PID/fd while it ran), or "command line" (none was
  // seen open; the program's arguments named them).
  std::string files_from;
  int num_workers = 0;
  std::int64_t batch_size = 0;
  std::int64_t image_size = 0;
  // Where each came from: the program ("`--train-crop-size 128` on its command line", "its
  // spans"), watch's own option, or feedscope's default where none says it.
  std::string batch_size_from;
  std::string image_size_from;
  double seconds = 0;           // measured, after one warm-up batch
  std::optional<double> samples_per_s;
  std::optional<double> program_samples_per_s;  // where the program's rate was measured
  std::optional<double> ratio;                   // samples_per_s / program_samples_per_s
};

// One change `watch --try` ran against the unchanged command (cli/try_changes.h).
struct TriedChange {
  std::string change;  // "OMP_NUM_THREADS=2", "-j 3"
  std::string why;     // what made it a candidate
  std::string setting;  // the same as a setting: "threads=2", "num_workers=3", "batch_size=128"
  std::vector<std::string> command;
  std::map<std::string, std::string> env;  // added to the watched run's
  // Each round's rate (ChangeTries::unit); none where that run measured none or failed.
  std::vector<std::optional<double>> rates;
  // Its rates over the unchanged runs' of the same rounds (those where both measured); none where
  // no round measured both.
  std::optional<double> speedup;
  std::vector<std::string> failed;  // how its runs that failed ended ("failed (exited with 1)")
  // "gain" (advised, with its measured ratio), "loss", "within the noise" (neither advised), or
  // "not measured"; empty before it is judged.
  std::string outcome;
  std::optional<double> noise;  // the unchanged runs' spread it was judged against; none: one round
};

// What `watch --try` measured, or why it ran nothing.
struct ChangeTries {
  std::string skipped;  // why nothing ran; empty when the tries ran
  double seconds = 0;   // each run's window (--try-seconds)
  int rounds = 0;       // runs of each change, each beside one of the unchanged command
  std::string unit;     // "samples/s", "it/s", "tokens/s" or "lines/s": the watched run's own measure
  bool auto_only = false;  // --try=auto: only the changes a guess in the advice names
  std::vector<std::optional<double>> unchanged_rates;  // each round's
  std::vector<TriedChange> changes;
};

// A program `feedscope watch` ran: how it ended and what its process tree did.
struct ProgramSummary {
  std::vector<std::string> command;
  int pid = 0;
  std::string exit;    // "exited with 0", "killed by SIGSEGV (core dumped)"
  int exit_code = 0;   // the shell's: the status, or 128 + the signal
  // How it ended: "exited", "failed" (non-zero status), "crashed" (a signal nobody sent it),
  // "interrupted" (a signal feedscope received and passed on), "duration" (--duration ran out).
  // Attached to (`feedscope attach`), how the window ended: "duration", "interrupted" (feedscope
  // was; the program runs on) or "ended" (the program ended during it).
  std::string ended;
  // `feedscope attach`: read while it ran, not started by feedscope; and what `watch` would have
  // measured that attach could not ("CUDA trace: ...").
  bool attached = false;
  std::vector<std::string> unmeasured;
  double wall_s = 0;
  std::string spans;  // "session (pid N)" when a feedscope Session inside it sent its spans
  std::vector<std::string> notes;  // what the watcher could not read, and why
  double watcher_cpu_s = 0;  // CPU feedscope itself took while watching (all its threads)
  ProcessTreeSummary tree;
  // The torch the program runs (not feedscope's: environment.torch_version is the one feedscope
  // was built with); none where its memory map showed no torch.
  std::optional<ProgramTorch> torch;
  std::optional<LoaderTry> try_loader;  // unset: the diagnosis was not cpu_preprocess
  std::optional<ChangeTries> tries;     // unset: `watch` without --try
};

// The training thread's time handing each batch to the copy engine (a `run` on a GPU), which the
// `wait` stage leaves out: wait is the time it waits for a batch and nothing else. From pinned
// memory a submission is a few runtime calls; from pageable memory it is the copy itself.
struct CopySubmission {
  std::int64_t count = 0;  // batches submitted in the measured window
  double busy_s = 0;
};

// Changes `feedscope run` tried for a moment after its measured window, so that a recommendation
// stands on what the change measured rather than on a model of it: a bigger batch on the GPU, the
// same model on the CPU, the batch copied from pinned memory. Unset: not tried; a reason in
// `not_run` says why one that was wanted could not run.
struct WhatIfTrials {
  std::int64_t bigger_batch = 0;               // the batch size tried on the run's GPU
  std::optional<double> bigger_batch_step_s;   // seconds per step there
  std::optional<double> run_batch_step_s;      // the run's own batch tried the same way: the scale
  std::optional<double> cpu_step_s;            // the run's batch on the CPU, seconds per step
  int cpu_threads = 0;                         // the threads that CPU step had
  std::optional<double> pinned_h2d_gbps;       // one batch copied from pinned memory, event-timed
  std::vector<std::string> not_run;            // "batch 1600: CUDA out of memory ..."
};

// num_workers=auto or prefetch=auto: what the loader's tuner did over the whole run (warm-up
// included), with the bounds it moved within.
struct AutotuneSummary {
  std::vector<TunerMove> moves;
  LoaderSetting final;
  LoaderSetting most;  // max_workers and max_prefetch after the RAM budget
  std::uint64_t ram_budget_bytes = 0;
  bool tunes_workers = false;  // false: a stream dataset, whose workers are its streams
  bool tunes_prefetch = false;
};

struct Report {
  std::vector<std::pair<std::string, ConfigValue>> config;
  Environment environment;
  Throughput throughput;
  std::vector<StageStats> stages;  // every stage name, in pipeline order
  // User-named stages of a wrapped loop (LoopProfiler::scope), in order of first use; never one
  // of the fixed names above.
  std::vector<StageStats> custom_stages;
  std::optional<CopySubmission> h2d_submit;  // none without a copy engine
  std::optional<WhatIfTrials> trials;         // `run` only, where the diagnosis asked for them
  Utilization utilization;
  TrainingSummary training;
  Diagnosis diagnosis;
  std::optional<GpuTraceSummary> gpu_trace;
  std::string gpu_trace_unavailable;  // why gpu_trace is empty
  DataErrorsSummary data_errors;
  std::uint64_t spans_dropped = 0;
  TraceSummary trace;
  // "SIGINT" or "SIGTERM" when the run was stopped early: the report covers the steps done.
  std::string interrupted;
  // Why the run ended before measuring what it was asked for: "interrupted" (a signal; the
  // message is its name) or "bad_data" (the message is the error). Empty when it did not.
  struct StoppedEarly {
    std::string reason;
    std::string message;
  } stopped_early;
  std::optional<ProgramSummary> program;  // `feedscope watch` only
  // A torch.distributed job's ranks (`watch` of a launcher, `merge`); empty otherwise.
  std::vector<RankSummary> ranks;
  std::optional<JobSummary> job;
  std::optional<AutotuneSummary> autotune;  // a run whose loader tuned itself
  // Each sample's load time and the slowest files: feedscope's loader (run, a Session over
  // feedscope.DataLoader), or under watch its decoder on the program's files afterwards.
  std::optional<SampleCosts> samples;
};

}  // namespace feedscope
