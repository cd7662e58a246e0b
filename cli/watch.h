#pragma once
// `feedscope watch [options] -- COMMAND [ARGS...]`: runs a training program feedscope did not
// write and diagnoses it as `run` diagnoses its own. The program runs unchanged (argv, no shell),
// its output and exit code pass through, and signals sent to feedscope reach it. Meanwhile
// feedscope samples its process tree by role (profiler/process_tree.h), the machine and the GPUs;
// traces its CUDA work with the CUPTI injection library (CUDA_INJECTION64_PATH); and takes the
// stage spans of a feedscope Session inside it (exporters/watch_channel.h). The report directory
// gets the files `run` writes, with report.json's `program` section, also when the program crashes
// or is interrupted.
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "profiler/report.h"

namespace feedscope {

struct WatchOptions {
  std::vector<std::string> command;
  // `feedscope attach PID`: read this running program instead of starting `command` (empty then);
  // duration_s 0 reads it until it ends.
  int attach_pid = 0;
  // A watch that srun or mpirun started as one task of a job writes REPORT_DIR/rank-N, and
  // refuses one holding another job's report unless `force` (cli/rank_task.h).
  std::string report_dir = "feedscope-watch";
  bool force = false;
  // HOST:PORT of a Prometheus endpoint while it runs; empty: none. A watch of a rank of a job
  // listens on PORT + its local rank, or `{local_rank}` in HOST:PORT is replaced by it.
  std::string metrics_addr;
  double sample_hz = 10;
  double duration_s = 0;     // > 0: stop the program (SIGINT, then SIGTERM) after this long
  double grace_s = 10;       // from the SIGINT of --duration to the SIGTERM
  // A regular expression with one group, a figure in a line the program prints
  // (cli/output_scanner.h). Its output then passes through a pipe, which also reads its
  // `Time ... Data ...` lines for the data-wait share.
  std::string throughput_pattern;
  // The figure's unit: "samples/s", "it/s" or "s/it"; empty: what the pattern's text implies.
  std::string throughput_unit;
  // The program's batch size, which turns it/s and s/it into samples/s; 0: not known.
  std::int64_t batch_size = 0;
  std::map<std::string, std::string> env;  // added to the program's environment
  // Its output to <report_dir>/output.log (through a pipe, so its lines are read as they come)
  // instead of passing through.
  bool keep_output = false;
  bool print = true;  // the console report on stderr at the end
  // A cpu_preprocess program: measure feedscope's loader on the files it read, once it has ended
  // (cli/try_loader.h). The `watch` command turns it on unless --no-try-loader; sweep and tune
  // of a command leave it off (a few seconds a point).
  bool try_loader = false;
  // Where to record what the diagnosis read, for `feedscope replay` (exporters/recording.h); empty:
  // nowhere. The `watch` command fills it from --record-dir, else $FEEDSCOPE_RECORD_DIR.
  std::string record_dir;
  // `watch --try` (cli/try_changes.h): once the program has ended, run it again with each change
  // feedscope can make from outside, `try_rounds` times for `try_seconds` each, alternating with
  // the unchanged command, and report each change's speed-up as measured.
  bool try_changes = false;
  bool try_auto = false;  // --try=auto: only the changes that settle a guess left in the advice
  double try_seconds = 20;
  int try_rounds = 2;
  // How the CUPTI injection traces the program's GPU (profiler/trace_sampling.h): "whole", or the
  // device's records in W of every P seconds, each process traced whole until its first kernel and
  // `gpu_trace_lead_s` from it. Sampled by default: the kernels' records alone cost a
  // launch-bound loop 11 points of its speed (H200).
  std::string gpu_trace = "1/10";
  double gpu_trace_lead_s = 5;
};

struct WatchOutcome {
  Report report;
  std::string report_dir;  // where it was written: options.report_dir, or its rank-N folder
  int exit_code = 0;  // the program's (shell convention), or 0 where --duration stopped it
  // The first sign of its work, seconds after it started: its first CUDA kernel where it ran
  // one, else the first line it printed (where its output was read); null: neither. What is
  // before it is start-up (interpreter, imports, data set indexing, CUDA context).
  std::optional<double> work_began_s;
  std::string work_began_at;  // "its first CUDA kernel", "the first line it printed"
};

// Throws ConfigError (cli/config.h) for a bad option, ChildStartError (cli/child_process.h) for a
// program that cannot start (nothing is written then), std::runtime_error for a report directory
// that cannot be written.
WatchOutcome watch_program(const WatchOptions& options, std::ostream& log);

// The options' checks watch_program makes before it starts the program; throws ConfigError.
void validate_watch_options(const WatchOptions& options);

// The `watch` subcommand: watch_program, the console report, the program's exit code.
int watch_command(const WatchOptions& options);

// The `attach` subcommand (options.attach_pid): watch_program of the running program, the console
// report; 0 once the report is written, the program's end included.
int attach_command(const WatchOptions& options);

}  // namespace feedscope
