#include "cli/watch.h"

#include <algorithm>
#include <ftw.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <limits>
#include <memory>
#include <optional>

#include "cli/attached_process.h"
#include "cli/child_process.h"
#include "cli/interrupt.h"
#include "cli/config.h"
#include "cli/output_scanner.h"
#include "cli/rank_task.h"
#include "cli/try_changes.h"
#include "cli/try_loader.h"
#include "cli/run.h"
#include "exporters/console_report.h"
#include "exporters/metrics_exporter.h"
#include "exporters/recording.h"
#include "exporters/report_assembly.h"
#include "exporters/watch_channel.h"
#include "loader/span_recorder.h"
#include "loader/stage.h"
#include "profiler/gpu_activity_wire.h"
#include "profiler/gpu_trace.h"
#include "profiler/data_files.h"
#include "profiler/process_tree.h"
#include "profiler/program_torch.h"
#include "profiler/rank_digest.h"
#include "profiler/trace_sampling.h"
#include "profiler/watch_diagnosis.h"
#include "sampler/proc_fs.h"

namespace feedscope {

namespace {

// The per-sample costs of a watched program's files: up to 2 s of feedscope's decoder after it
// ended, and no more than 1000 files (a folder of tens of thousands is measured on a random share).
constexpr double kSampleCostSeconds = 2.0;
constexpr std::size_t kSampleCostMaxSamples = 1000;
constexpr double kWaitLooksPerSecond = 50;
constexpr std::size_t kFileLooksPerReading = 8;  // processes whose open files a reading looks at
constexpr std::int64_t kFileLooksEveryReadingNs = 10'000'000'000;  // then at every fifth reading
constexpr double kAttachWaitLooksPerSecond = 10;
// watch after its first 10 s: half the looks, still 1500 a minute (a stall's sampling error under
// 1.3 points at 1 sigma), and a node of 8 ranks x 12 workers watched at 2 % of a core or less.
constexpr double kWatchLaterWaitLooksPerSecond = 25;
constexpr double kAttachMemoryCpuShare = 0.001;
constexpr double kWatchMemoryCpuShare = 0.05;
constexpr std::size_t kWatchMemoryFullShareProcesses = 12;

namespace fs = std::filesystem;

void validate(const WatchOptions& o) {
  if (o.attach_pid != 0 && !o.command.empty())
    throw ConfigError("command", "attach: takes a PID, not a command (`feedscope attach PID`); to "
                                 "start a program and watch it: feedscope watch -- COMMAND");
  if (o.attach_pid != 0 && o.try_loader)
    throw ConfigError("try_loader", "attach: feedscope's loader is not tried on the files of a "
                                    "program that runs on (it would take its cores)");
  if (o.attach_pid != 0 && o.try_changes)
    throw ConfigError("try", "attach: --try runs the program again, which a program attach did "
                             "not start cannot be; use it with `feedscope watch --try -- COMMAND`");
  if (o.try_changes && (!(o.try_seconds >= 2) || o.try_seconds > 3600))
    throw ConfigError("try_seconds", "--try-seconds: " + std::to_string(o.try_seconds) +
                                         " is out of range; allowed: 2 to 3600 seconds");
  if (o.try_changes && (o.try_rounds < 1 || o.try_rounds > 10))
    throw ConfigError("try_rounds", "--try-rounds: " + std::to_string(o.try_rounds) +
                                        " is out of range; allowed: 1 to 10");
  if (o.command.empty() && o.attach_pid == 0)
    throw ConfigError("command", "watch: no program to run; usage: feedscope watch [options] -- "
                                 "COMMAND [ARGS...]");
  if (const std::string srun = srun_tasks_are_not_children(o.command, o.report_dir); !srun.empty())
    throw ConfigError("command", srun);
  if (!(o.sample_hz > 0) || o.sample_hz > 1000)
    throw ConfigError("sample_hz", "--sample-hz: " + std::to_string(o.sample_hz) +
                                       " is out of range; allowed: greater than 0, at most 1000");
  if (o.duration_s < 0)
    throw ConfigError("duration", "--duration: " + std::to_string(o.duration_s) +
                                      " is out of range; allowed: seconds >= 0 (0: until it exits)");
  if (o.report_dir.empty()) throw ConfigError("report_dir", "--report-dir: must not be empty");
  if (!o.throughput_pattern.empty()) check_throughput_pattern(o.throughput_pattern);
  if (!o.throughput_unit.empty()) parse_throughput_unit(o.throughput_unit);
  if (o.batch_size < 0)
    throw ConfigError("batch_size", "--batch-size: " + std::to_string(o.batch_size) +
                                        " is out of range; allowed: 1 or more (0: not known)");
  if (!(o.gpu_trace_lead_s >= 0 && o.gpu_trace_lead_s <= 3600))
    throw ConfigError("gpu_trace_lead", "--gpu-trace-lead: " + std::to_string(o.gpu_trace_lead_s) +
                                            " is out of range; allowed: 0 to 3600 seconds");
  std::string why;
  if (!parse_trace_sampling(o.gpu_trace, o.gpu_trace_lead_s, why))
    throw ConfigError("gpu_trace", "--gpu-trace: " + why);
}

// The program's lines are always read (they pass through to ours as they come): its progress
// lines in a known format give its throughput and data wait without a flag, and the first line's
// time where its work began. A pattern picks the throughput's figure instead.
OutputScanner output_scanner(const WatchOptions& o, const std::vector<std::string>& command) {
  const ThroughputUnit unit = o.throughput_unit.empty() ? infer_throughput_unit(o.throughput_pattern)
                                                        : parse_throughput_unit(o.throughput_unit);
  CommandBatchSize batch{o.batch_size, "--batch-size", 0, ""};
  if (const std::optional<CommandBatchSize> given = batch_size_in_command(command)) {
    if (o.batch_size <= 0) batch = *given;
    batch.accumulation = given->accumulation;
    batch.accumulation_flag = given->accumulation_flag;
  }
  return OutputScanner(o.throughput_pattern, unit, batch);
}

// torchrun's failure table is read where the lines were read before they always were: a
// launcher's output, a pattern's or a sweep point's.
bool reads_launcher_failures(const WatchOptions& o) {
  return !o.throughput_pattern.empty() || o.keep_output || starts_distributed_launcher(o.command);
}

// The throughput the program printed, where it sent no spans: samples/s where the batch size
// allows, iterations per second (batches_per_s) where the figure is one.
void take_printed_throughput(const OutputScanner& scanner, const WatchOptions& o, Report& report,
                             ProgramSummary& program) {
  const PrintedThroughput t = scanner.throughput();
  if (t.lines == 0) {
    if (!o.throughput_pattern.empty())
      program.notes.push_back("throughput: no line matched --throughput-pattern '" +
                              o.throughput_pattern + "'");
    return;
  }
  if (t.samples_per_s) report.throughput.samples_per_s = *t.samples_per_s;
  if (t.iterations_per_s) report.throughput.batches_per_s = *t.iterations_per_s;
  if (t.tokens_per_s) report.throughput.tokens_per_s = *t.tokens_per_s;
  if (t.lines_per_s) report.throughput.lines_per_s = *t.lines_per_s;
  report.throughput.source = t.source;
  program.notes.push_back(t.basis);
}

// Where the program's own lines measured its data stall, the notes say so, as the evidence does.
void note_printed_data_stall(const Diagnosis& d, ProgramSummary& program) {
  const auto rule = std::find(d.rules.begin(), d.rules.end(), "printed_data_stall");
  if (rule == d.rules.end()) return;
  for (const std::string& line : d.evidence)
    if (line.rfind("the program's own lines:", 0) == 0) program.notes.push_back("data stall: " + line);
}

// Where start-up ends: the first CUDA kernel, else the first line the program printed, unless
// that came in the last tenth of the run (its closing summary, not the start of its work).
void note_work_began(std::optional<std::int64_t> first_kernel_ns, const OutputScanner& scanner,
                     std::int64_t begin_ns, double wall_s, WatchOutcome& outcome) {
  const auto since_begin = [begin_ns](std::int64_t ns) { return static_cast<double>(ns - begin_ns) / 1e9; };
  if (first_kernel_ns && *first_kernel_ns >= begin_ns) {
    outcome.work_began_s = since_begin(*first_kernel_ns);
    outcome.work_began_at = "its first CUDA kernel";
  } else if (const auto line = scanner.first_line_ns();
             line && since_begin(*line) < 0.9 * wall_s) {
    outcome.work_began_s = since_begin(*line);
    outcome.work_began_at = "the first line it printed";
  }
}

// The CUPTI injection library of this program: where an installed feedscope has it
// (<prefix>/lib/feedscope/), beside its build (build/profiler/), or where FEEDSCOPE_INJECTION_LIBRARY
// names it; empty with the reason (naming where it looked) when there is none.
std::string injection_library(std::string& why_not) {
  if (const char* named = std::getenv("FEEDSCOPE_INJECTION_LIBRARY"); named && *named) {
    if (fs::exists(named)) return named;
    why_not = std::string("FEEDSCOPE_INJECTION_LIBRARY names '") + named + "', which does not exist";
    return "";
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path dir = exe.parent_path();
  const fs::path candidates[] = {dir / "../lib/feedscope/libfeedscope_inject.so",
                                 dir / "../profiler/libfeedscope_inject.so",
                                 dir / "libfeedscope_inject.so"};
  for (const fs::path& candidate : candidates)
    if (fs::exists(candidate, ec)) return fs::weakly_canonical(candidate, ec).string();
  if (!FEEDSCOPE_WITH_CUDA) {
    why_not = "feedscope was built without CUDA: no CUDA trace";
    return "";
  }
  why_not = "the CUPTI injection library is missing: looked for " +
            fs::weakly_canonical(candidates[0], ec).string() + ", " +
            fs::weakly_canonical(candidates[1], ec).string() + " and " +
            fs::weakly_canonical(candidates[2], ec).string() +
            " (reinstall feedscope, or name it with FEEDSCOPE_INJECTION_LIBRARY): no CUDA trace";
  return "";
}

// A private directory for the channel, removed when the watch ends.
struct ChannelDir {
  fs::path path;
  ChannelDir() {
    const fs::path base = fs::temp_directory_path() / "feedscope-watch-XXXXXX";
    std::string templ = base.string();
    if (::mkdtemp(templ.data()) == nullptr)
      throw std::runtime_error("cannot create a directory for feedscope watch in " +
                               fs::temp_directory_path().string());
    path = templ;
  }
  // Not std::filesystem::remove_all: the CUDA wheels' libtorch.so (torch 2.11+cu130) exports a
  // std::filesystem::remove_all(path, error_code&) of its own that jumps to a null pointer, and it
  // comes before libstdc++ in this program's symbol lookup. nftw is libc's alone.
  ~ChannelDir() {
    ::nftw(path.c_str(),
           [](const char* p, const struct stat*, int type, struct FTW*) {
             return type == FTW_DP ? ::rmdir(p) : ::unlink(p);
           },
           16, FTW_DEPTH | FTW_PHYS);
  }
};

std::vector<StageStats> empty_stages() {
  std::vector<StageStats> out;
  for (const std::string_view name : kStageNames) out.push_back(StageStats{std::string(name)});
  return out;
}

// The span diagnosis' input from what a Session inside the program measured.
DiagnosisInput span_input_of(const SessionHandoff& s, int tree_workers, int cpus) {
  DiagnosisInput in;
  in.stages = s.stages;
  in.wall_s = s.throughput.wall_s;
  in.batches = s.throughput.steps;
  in.batch_size = s.batch_size > 0 ? s.batch_size
                  : s.throughput.steps > 0 ? s.throughput.samples / s.throughput.steps
                                            : 0;
  in.samples_per_s = s.throughput.samples_per_s;
  in.num_workers = s.num_workers > 0 ? s.num_workers : tree_workers;
  in.cpus = cpus;
  in.on_gpu = s.device.rfind("cuda", 0) == 0;
  in.model_parameters = s.training.parameters;
  return in;
}

// A torch.distributed job: every rank's summary, the straggler, and the job's diagnosis, which is
// the straggler's where one holds the others back (its stages too, where its Session sent them).
// Returns the pid whose spans the report shows, 0 where that did not change.
// How each rank torchrun reported failed ended, and what the others did.
void note_failures(const std::vector<LauncherFailure>& failures, std::vector<RankSummary>& ranks,
                   JobSummary& job) {
  for (const LauncherFailure& f : failures) {
    const std::string how = f.exitcode < 0 ? "killed by signal " + std::to_string(-f.exitcode)
                                           : "exited with " + std::to_string(f.exitcode);
    for (RankSummary& r : ranks)
      if (r.pid == f.pid || (r.rank && *r.rank == f.rank))
        r.ended = how + (f.root_cause ? " (torchrun: the first observed failure)" : "") +
                  (r.ended.empty() ? "" : "; " + r.ended);
    job.notes.push_back("rank " + std::to_string(f.rank) + " (pid " + std::to_string(f.pid) + ") " + how +
                        (f.root_cause ? ", the first failure torchrun observed" : ""));
  }
  if (!failures.empty())
    job.notes.push_back(std::to_string(failures.size()) + " of " + std::to_string(ranks.size()) +
                        " ranks failed; torchrun stopped the job (its failure table, in the output above)");
}

int digest_ranks(const ProcessTreeDigest& tree, const std::vector<SessionHandoff>& sessions,
                 const WatchedGpu& gpu, const std::vector<LauncherFailure>& failures,
                 const WatchTask& task, WatchDiagnosisInput wd, Report& report) {
  const ProcessTreeSummary& t = wd.tree;
  // One rank here is a job too where WORLD_SIZE says others ran elsewhere (feedscope merge).
  if (t.ranks < 2 && !(t.ranks == 1 && t.world_size.value_or(1) > 1)) return 0;
  std::vector<RankObservation> observed;
  for (ProcessTreeSummary& view : tree.rank_views()) {
    RankObservation o;
    o.host = report.environment.hostname;
    for (const SessionHandoff& s : sessions)
      if (s.pid == view.trainer_pid) o.spans = span_input_of(s, view.workers, wd.cpus);
    if (const auto g = gpu.by_pid.find(view.trainer_pid); g != gpu.by_pid.end()) o.gpu = g->second;
    o.view = std::move(view);
    observed.push_back(std::move(o));
  }
  report.ranks = summarize_ranks(observed, wd);
  JobSummary summary;
  summary.id = t.job;
  summary.world_size = t.world_size;
  summary.hosts = {report.environment.hostname};
  if (task.one_task && t.ranks == 1)
    summary.notes.push_back("this watch is one task of the job (rank " + std::to_string(*task.identity.rank) +
                            " by " + task.identity.source + "'s variables); its other " +
                            std::to_string(t.world_size.value_or(1) - 1) + " ranks are other tasks' "
                            "(feedscope merge joins the tasks' reports)");
  else if (t.world_size && *t.world_size > t.ranks)
    summary.notes.push_back("WORLD_SIZE is " + std::to_string(*t.world_size) + " and " +
                            std::to_string(t.ranks) + " ranks ran here: the others ran on other "
                            "machines (feedscope merge joins their reports)");
  summary.notes.insert(summary.notes.end(), t.rank_notes.begin(), t.rank_notes.end());
  note_failures(failures, report.ranks, summary);
  report.job = std::move(summary);
  // A job that ended before anything could be measured is not judged.
  if (report.diagnosis.bottleneck.empty()) return 0;
  JobVerdict job = judge_ranks(report.ranks);
  report.job->pattern = job.pattern;
  // The job's diagnosis is the straggler's where there is one, else the trainer's (the busiest
  // rank), each read as its own process with its own workers.
  Diagnosis& d = report.diagnosis;
  const int judged = job.straggler ? job.straggler->pid : t.trainer_pid;
  for (const RankObservation& o : observed)
    if (o.view.trainer_pid == judged) d = diagnose_rank(o, wd);
  if (job.straggler) {
    d.verdict = job.verdict + ". " + rank_name(*job.straggler) + ": " + d.verdict;
    // Its first advice, said of it, with what the others would gain.
    if (!d.recommendations.empty()) d.recommendations.erase(d.recommendations.begin());
  } else if (!job.verdict.empty()) {
    d.verdict = job.verdict + ". " + d.verdict;
  }
  d.evidence.insert(d.evidence.begin(), job.evidence.begin(), job.evidence.end());
  if (job.recommendation) d.recommendations.insert(d.recommendations.begin(), *job.recommendation);
  d.straggler = std::move(job.straggler);
  d.rules.insert(d.rules.begin(), job.rule);
  for (const SessionHandoff& s : sessions)
    if (s.pid == judged) {
      report.throughput = s.throughput;
      report.stages = s.stages;
      report.custom_stages = s.custom_stages;
      return s.pid;
    }
  return 0;
}

const SessionHandoff* busiest(const std::vector<SessionHandoff>& sessions) {
  const SessionHandoff* best = nullptr;
  for (const SessionHandoff& s : sessions)
    if (!best || s.throughput.steps > best->throughput.steps) best = &s;
  return best;
}

// The open files of the process read and of its descendants (a DataLoader's workers), a few of
// them a reading, in turn: a node's ranks' workers read alike, and the descriptors of each of 105
// processes (8 ranks x 12 workers) at every reading cost 2.5 % of a core, most of a watch's.
void look_at_files(DataFilesSeen& seen, const UtilizationSample& s, std::size_t& turn) {
  std::vector<int> pids;
  if (s.pid > 0) pids.push_back(s.pid);
  for (const ProcessCpu& p : s.children) pids.push_back(p.pid);
  const std::size_t looks = std::min(pids.size(), kFileLooksPerReading);
  for (std::size_t i = 0; i < looks; ++i) seen.look(pids[(turn + i) % pids.size()]);
  turn += looks;
}

// What the GPU summary of a watched program leaves out, for program.notes.
std::string describe_left_out(const ActiveWindows& w, std::int64_t program_begin_ns) {
  const auto s = [](std::int64_t ns) { return static_cast<double>(ns) / 1e9; };
  std::int64_t measured_ns = 0;
  for (const StepWindow& x : w.windows) measured_ns += x.end_ns - x.begin_ns;
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "CUDA trace: the GPU figures cover %.2f s, from the first kernel (or the copy "
                "that fed it; %.2f s into the run) to the last (%.2f s); left out: %.2f s of CUDA "
                "start-up before it, %.2f s after the last",
                s(measured_ns), s(w.windows.front().begin_ns - program_begin_ns),
                s(w.windows.back().end_ns - program_begin_ns), s(w.before_ns), s(w.after_ns));
  std::string out = buf;
  for (const StepWindow& gap : w.idle) {
    std::snprintf(buf, sizeof buf, "; %.2f s with no CUDA activity at all (%.2f s to %.2f s)",
                  s(gap.end_ns - gap.begin_ns), s(gap.begin_ns - program_begin_ns),
                  s(gap.end_ns - program_begin_ns));
    out += buf;
  }
  return out;
}

// The GPU trace of what the injection library wrote, or why there is none. Returns when its
// first kernel began (or the copy that fed it); null without one.
std::optional<std::int64_t> fill_gpu_trace(const WatchedGpu& gpu, const std::string& no_injection,
                                           Report& report, ProgramSummary& program,
                                           std::int64_t program_begin_ns) {
  for (const std::string& e : gpu.errors) program.notes.push_back("CUDA trace: " + e);
  std::string last_status;
  for (const auto& [pid, statuses] : gpu.statuses_by_pid)
    for (const std::string& status : statuses) {
      // Each says something but a bare "recording" (records came back): the first names the
      // libcupti the program traced with and its clock.
      if (status != "recording") program.notes.push_back("CUDA trace of pid " + std::to_string(pid) + ": " + status);
      last_status = status;
    }
  if (gpu.activity.empty()) {
    report.gpu_trace_unavailable =
        !no_injection.empty()     ? no_injection
        : !last_status.empty() && !last_status.starts_with("recording")
            ? "CUPTI injection: " + last_status
            : "the program made no CUDA call (no process of it initialized CUDA)";
    return std::nullopt;
  }
  const ActiveWindows active = kernel_active_windows(gpu.activity);
  if (!active.windows.empty() && active.left_out_ns() >= 100'000'000)  // a tenth of a second is worth saying
    program.notes.push_back(describe_left_out(active, program_begin_ns));
  report.gpu_trace = summarize_program_activity(gpu.activity, active);
  if (active.windows.empty()) return std::nullopt;
  return active.windows.front().begin_ns;
}

// CPU this process (every thread of it) has taken so far, in seconds.
double own_cpu_s() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::string ended_how(const ChildExit& exit, int received, bool duration_ran_out) {
  if (duration_ran_out) return "duration";
  if (received != 0) return "interrupted";
  if (exit.signal != 0) return "crashed";
  return exit.code == 0 ? "exited" : "failed";
}

void make_report_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create report directory '" + dir + "': " + ec.message());
}

// The program's environment: the channel its Sessions hand their spans to, and the CUPTI
// injection library where no other tool traces CUDA (else why not in `no_injection`).
std::map<std::string, std::string> program_env(const WatchOptions& o, const fs::path& channel,
                                               std::string& no_injection) {
  std::map<std::string, std::string> env = o.env;
  env[kWatchDirEnv] = channel.string();
  // Its output goes through a pipe, which Python holds back until exit: unbuffered, each progress
  // line passes through, and is read, when it is printed.
  if (std::getenv("PYTHONUNBUFFERED") == nullptr) env.try_emplace("PYTHONUNBUFFERED", "1");
  if (const char* taken = std::getenv("CUDA_INJECTION64_PATH"); taken && *taken) {
    no_injection = std::string("CUDA_INJECTION64_PATH is already set to '") + taken +
                   "' (another tool traces CUDA): no feedscope CUDA trace";
  } else if (const std::string lib = injection_library(no_injection); !lib.empty()) {
    env["CUDA_INJECTION64_PATH"] = lib;
    // The injection's schedule (detail/cupti_records.h's tracing_request reads it).
    env["FEEDSCOPE_GPU_TRACE_SAMPLE"] = o.gpu_trace;  // validated already
    env["FEEDSCOPE_GPU_TRACE_LEAD"] = std::to_string(o.gpu_trace_lead_s);
  }
  return env;
}

std::unique_ptr<MetricsExporter> start_metrics(const RankAddress& at, const Environment& environment,
                                               std::ostream& log) {
  if (at.address.empty()) return nullptr;
  auto metrics = std::make_unique<MetricsExporter>(
      metrics_options(environment, at.address, environment.hostname, std::nullopt));
  log << "feedscope watch: metrics on http://" << metrics->address() << "/metrics"
      << (at.how.empty() ? "" : " (" + at.how + ")") << std::endl;
  return metrics;
}

ChildProcess::Options child_options(const WatchOptions& o, std::map<std::string, std::string> env,
                                    OutputScanner& scanner) {
  ChildProcess::Options co;
  co.argv = o.command;
  co.env = std::move(env);
  if (o.keep_output) co.output_path = (fs::path(o.report_dir) / "output.log").string();
  co.on_line = [&scanner](std::string_view line) { scanner.text(line, now_ns()); };
  return co;
}

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What watch reads of the program besides its utilization, all owned by watch_program.
struct Observers {
  ProcessTreeDigest& tree;
  ProgramTorchProbe& torch;
  DataFilesSeen& data_files;
  MetricsExporter* metrics;
  fs::path channel;
};

SamplingOptions sampling_options(const WatchOptions& o, int pid, Observers seen) {
  SamplingOptions so;
  so.hz = o.sample_hz;
  so.pid = pid;
  // The training thread's waits on its loader workers' queue, its data stall from outside: 50
  // looks a second give 200 in 4 s (a look measured ~80 us: 0.4 % of a core). Attach, which
  // may read a job for hours beside it (a sidecar, under 1 % of a core for 2 ranks x 4 workers),
  // goes down to one look a sample after the first 10 s, at the sample (no wake-up of its own):
  // 700 looks in its default 30 s at 10 Hz.
  so.wait_probe_hz = kWaitLooksPerSecond;
  so.wait_probe_later_hz = o.attach_pid != 0 ? kAttachWaitLooksPerSecond : kWatchLaterWaitLooksPerSecond;
  // Memory readings at most 5 % of a core (a torch process's map takes the kernel ~7 ms to walk:
  // each process every 0.5 s at most; at 1 %, a trainer and 4 workers came every 3 s, too few
  // for a trend in a minute); attach 0.1 % (a rank's map cost 35 ms here: the 11 processes of a
  // 2 x 4 job every 2 minutes or so, the first at the start).
  so.memory_cpu_share = o.attach_pid != 0 ? kAttachMemoryCpuShare : kWatchMemoryCpuShare;
  // A node of 8 ranks x 12 workers: each process's memory read less often, at 0.6 % of a core,
  // so that the whole watch stays under 2 % (docs/benchmarks.md); a trainer and 11 workers at 5 %.
  if (o.attach_pid == 0) so.memory_share_processes = kWatchMemoryFullShareProcesses;
  // Each reading goes to the tree, which may ask to read a launcher's program instead; the process
  // read is looked at for the torch it imported.
  // Twice a second the ranks' Sessions' live windows, for each rank's data stall over time, and
  // with an endpoint the ranks' series. With try_loader, the files the program holds open: at
  // every reading until a few are seen (a file is open only while it is read) or for the first
  // 10 s, then at every fifth, until the set is full: a program whose data is in memory opens
  // none, and was looked at 10 times a second for the whole run.
  so.retarget = [&tree = seen.tree, &torch = seen.torch, &data_files = seen.data_files,
                 try_loader = o.try_loader, readings = 0, file_turn = std::size_t{0}, started = pid,
                 first_ns = std::int64_t{0}, m = seen.metrics,
                 dir = seen.channel, polled_ns = std::int64_t{0}](const UtilizationSample& s) mutable {
    torch.look(s.pid > 0 ? s.pid : started, s.time_ns);
    if (first_ns == 0) first_ns = s.time_ns;
    const bool few = data_files.files().size() < 8 && s.time_ns - first_ns < kFileLooksEveryReadingNs;
    if (try_loader && !data_files.full() && (few || readings % 5 == 0))
      look_at_files(data_files, s, file_turn);
    ++readings;
    const int next = tree.add(s);
    if (m) m->update_ranks(tree.latest_ranks());
    if (m)
      if (const std::optional<double> stall = tree.latest_data_stall()) m->set_data_stall_ratio(*stall);
    if (s.time_ns - polled_ns >= 500'000'000) {
      polled_ns = s.time_ns;
      const std::vector<LiveWindow> windows = read_live_windows(dir);
      for (const LiveWindow& w : windows) tree.add_live_window(w.pid, w.end_ns, w.wall_s, w.wait_s);
      if (m) m->update_rank_windows(windows);
    }
    return next;
  };
  return so;
}

// Waits out --duration (where given); returns whether it ran out, the program then stopped with
// SIGINT, SIGTERM after the grace period, SIGKILL 5 s after that.
bool stop_after_duration(ChildProcess& child, const WatchOptions& o, std::ostream& log) {
  if (o.duration_s <= 0) return false;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(o.duration_s);
  if (child.wait_exited(std::chrono::time_point_cast<std::chrono::steady_clock::duration>(deadline)))
    return false;
  log << "feedscope watch: --duration " << o.duration_s << " s ran out: stopping the program (SIGINT)"
      << std::endl;
  child.signal(SIGINT);
  const auto grace = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                            std::chrono::duration<double>(o.grace_s));
  if (!child.wait_exited(grace)) {
    child.signal(SIGTERM);
    if (!child.wait_exited(std::chrono::steady_clock::now() + std::chrono::seconds(5)))
      child.signal(SIGKILL);
  }
  return true;
}

void record_exit(const ChildExit& exit, int received, bool duration_ran_out,
                 ProgramSummary& program, Report& report) {
  program.exit = exit.describe();
  program.exit_code = exit.shell_code();
  program.ended = ended_how(exit, received, duration_ran_out);
  if (program.ended == "interrupted") {
    const char* name = ::sigabbrev_np(received);
    report.interrupted = name ? std::string("SIG") + name : "signal";
  }
}

void fill_sampled_utilization(const Sampling& sampling, Utilization& u) {
  if (sampling.sampler) {
    fill_utilization(sampling.sampler->summary(), u);
  } else {
    u.unavailable["sampler"] = "sampling off";
  }
}

// The tree's view in the report's utilization, with notes on which process was read as the
// trainer; returns whether that is a launcher's program rather than the one watch started.
bool take_tree_view(const ProgramSummary& program, int cpus, Utilization& u,
                    std::vector<std::string>& notes) {
  const ProcessTreeSummary& t = program.tree;
  u.cpu_process_ratio = t.trainer_cores / cpus;
  u.cpu_child_processes_cores = t.workers_cores + t.other_processes_cores;
  u.storage_read_bytes_per_s = t.storage_read_bytes_per_s;
  for (const WatchedProcess& p : t.processes)
    if (p.role == ProcessRole::trainer) u.rss_bytes_peak = p.rss_peak_bytes;
  const bool followed = t.trainer_pid != program.pid;  // a launcher's program is the trainer
  if (followed)
    notes.push_back("trainer: " + t.trainer_name + " (pid " + std::to_string(t.trainer_pid) +
                    "), run by the launcher feedscope started (pid " + std::to_string(program.pid) +
                    "); its process is what the diagnosis reads");
  if (t.ranks > 1)
    notes.push_back(
        "torch.distributed: " + std::to_string(t.ranks) + " ranks, each read for the whole run with "
        "its main thread and its own workers (report.json's ranks); the one read thread by thread is " +
        (t.trainer_rank ? "rank " + std::to_string(*t.trainer_rank) : std::string("a rank")) +
        " (pid " + std::to_string(t.trainer_pid) + "), the busiest when it was followed");
  if (const auto it = u.series.find("cpu_system_ratio"); it != u.series.end())
    u.cpu_system_ratio = it->second.mean;
  return followed;
}

// What feedscope Sessions inside the program handed over; a handoff that cannot be read is noted.
std::vector<SessionHandoff> read_sessions(const fs::path& channel, std::vector<std::string>& notes) {
  std::vector<std::string> channel_errors;
  std::vector<SessionHandoff> sessions = read_session_handoffs(channel, channel_errors);
  for (const std::string& e : channel_errors) notes.push_back("unreadable: " + e);
  return sessions;
}

// What the program measured of itself, where a feedscope Session inside it sent its spans (the
// busiest Session's), else what it printed; returns the spans' diagnosis input, if any.
std::optional<DiagnosisInput> take_program_measurements(const std::vector<SessionHandoff>& sessions,
                                                        const OutputScanner& scanner,
                                                        const WatchOptions& o, int cpus,
                                                        Report& report, ProgramSummary& program) {
  std::optional<DiagnosisInput> span_input;
  report.stages = empty_stages();
  report.throughput.wall_s = program.wall_s;
  if (const SessionHandoff* s = busiest(sessions)) {
    program.spans = "session (pid " + std::to_string(s->pid) + ")";
    report.throughput = s->throughput;
    report.throughput.source = "the spans of a feedscope Session in the program (pid " + std::to_string(s->pid) + ")";
    report.stages = s->stages;
    report.custom_stages = s->custom_stages;
    report.training = s->training;
    report.data_errors = s->data_errors;
    span_input = span_input_of(*s, program.tree.workers, cpus);
  } else {
    take_printed_throughput(scanner, o, report, program);
  }
  return span_input;
}

WatchDiagnosisInput watch_diagnosis_input(const ProgramSummary& program, int cpus,
                                          const Report& report,
                                          const std::optional<DiagnosisInput>& span_input,
                                          const OutputScanner& scanner,
                                          const DataFilesSeen* data_files) {
  WatchDiagnosisInput wd;
  wd.tree = program.tree;
  wd.cpus = cpus;
  wd.utilization = report.utilization;
  wd.gpu_trace = report.gpu_trace;
  wd.spans = span_input;
  wd.torch = program.torch;
  wd.ended = program.ended;
  wd.exit = program.exit;
  wd.wall_s = program.wall_s;
  if (const PrintedDataWait w = scanner.data_wait(); w.lines > 0) wd.printed = w;
  // The files it held open, as the sampler saw them; not the ones its arguments name, which are
  // looked at later, for the loader's try, and may never have been read.
  if (data_files) {
    wd.data_files_seen = data_files->files().size();
    const std::optional<std::string> dataset = data_files->from_arguments() ? std::nullopt : data_files->dataset();
    wd.data_kind = !dataset ? (data_files->files().empty() ? "none" : "")
                   : dataset->rfind("images:", 0) == 0 ? "images"
                                                       : "shards";
  }
  return wd;
}

// With try_loader, feedscope's loader measured on the data files the program read.
void offer_loader(const WatchOptions& o, DataFilesSeen& data_files,
                  const std::optional<DiagnosisInput>& span_input, Report& report) {
  LoaderTrySetup setup;
  setup.enabled = o.try_loader;
  setup.num_workers = span_input && span_input->num_workers > 0 ? span_input->num_workers
                                                                : report.program->tree.workers;
  // The program's own batch and crop: feedscope's loader is measured on its workload.
  const std::vector<std::string>& command = report.program->command;
  if (o.batch_size > 0) {
    setup.batch_size = o.batch_size;
    setup.batch_size_from = "watch's --batch-size";
  } else if (span_input && span_input->batch_size > 0) {
    setup.batch_size = span_input->batch_size;
    setup.batch_size_from = "the program's spans";
  } else if (const auto b = batch_size_in_command(command)) {
    setup.batch_size = b->batch_size;
    setup.batch_size_from = "`" + b->flag + "` on its command line";
  }
  if (const auto crop = image_size_in_command(command)) {
    setup.image_size = crop->value;
    setup.image_size_from = "`" + crop->flag + "` on its command line";
  }
  // No file seen open (a short run, or readings late on a loaded machine): the data its arguments name.
  if (o.try_loader && data_files.files().empty()) data_files.look_at_arguments(command);
  offer_feedscope_loader(data_files, setup, report);
}

std::vector<std::pair<std::string, ConfigValue>> watch_config(const WatchOptions& o, const WatchTask& task,
                                                               const MetricsExporter* metrics) {
  std::vector<std::pair<std::string, ConfigValue>> c = {{"mode", std::string("watch")},
                                                        {"command", command_line(o.command)},
                                                        {"report_dir", o.report_dir},
                                                        {"metrics_addr", o.metrics_addr},
                                                        {"sample_hz", o.sample_hz},
                                                        {"duration", o.duration_s},
                                                        {"throughput_pattern", o.throughput_pattern},
                                                        {"throughput_unit", o.throughput_unit},
                                                        {"batch_size", o.batch_size}};
  if (metrics) {
    c.emplace_back("metrics_address", metrics->address());
    c.emplace_back("metrics_port_offset", std::int64_t{task.metrics.port_offset});
  }
  // The rank this watch is a task of, where srun or mpirun started it as one (cli/rank_task.h).
  if (task.one_task) {
    c.emplace_back("rank", std::int64_t{*task.identity.rank});
    c.emplace_back("rank_source", task.identity.source);
  }
  return c;
}

// With record_dir: what the program's diagnosis read and what it said, for `feedscope replay` (the
// one-process diagnosis; a job's judgement of its ranks is not recorded). A recording that cannot be
// written is said and costs the watch nothing.
void record_watch(const WatchOptions& o, const WatchDiagnosisInput& wd, const Diagnosis& diagnosis,
                  const WatchedGpu& gpu, const std::string& unavailable, std::ostream& log) {
  if (o.record_dir.empty()) return;
  Recording r;
  r.watch = wd;
  r.gpu_trace_unavailable = unavailable;
  if (wd.gpu_trace) r.gpu = RecordedGpu{gpu.activity, {}, std::numeric_limits<std::int64_t>::max(), 0};
  try {
    log << describe_recording(o.record_dir, write_recording(o.record_dir, r, {diagnosis, wd.gpu_trace},
                                                            recording_max_records()))
        << std::endl;
  } catch (const std::exception& e) {
    log << "feedscope: no recording: " << e.what() << std::endl;
  }
}

// What a watch holds while the program runs, and reads once it has ended or the window is over:
// the same for a program watch started and one it attached to.
struct Watching {
  const WatchOptions& o;  // with report_dir where the task's is (WatchTask::report_dir)
  const WatchTask& task;
  std::ostream& log;
  Report report;
  ProgramSummary program;
  int cpus = 1;
  std::string no_injection;  // why there is no CUDA trace, where there is none by design
  std::unique_ptr<MetricsExporter> metrics;
  std::int64_t begin_ns = 0;
  double begin_unix_s = 0;
  double cpu_begin_s = 0;
  std::optional<ProcessTreeDigest> tree;  // from start_sampling on
  ProgramTorchProbe torch;
  DataFilesSeen data_files;
  SpanRegistry no_spans;
  Sampling sampling;

  Watching(const WatchOptions& options, const WatchTask& placed, std::ostream& out)
      : o(options), task(placed), log(out) {
    make_report_dir(o.report_dir);
    report.environment = gather_environment("");
    cpus = std::max(report.environment.cpus, 1);
    metrics = start_metrics(task.metrics, report.environment, log);
  }
  // When the program's time begins: just before watch starts it, or when attach begins to read.
  void mark_begin() {
    begin_ns = now_ns();
    begin_unix_s = unix_now_s();
    cpu_begin_s = own_cpu_s();
  }
  // `pid`: the program; `parent`: whoever started it (the watcher, or its own parent).
  void start_sampling_at(int pid, int parent, const fs::path& channel) {
    program.pid = pid;
    tree.emplace(pid, parent, task.identity);
    if (launches_ranks(program.command)) tree->launches_ranks();
    SamplingOptions so = sampling_options(o, pid, {*tree, torch, data_files, metrics.get(), channel});
    share_with_the_other_tasks(task, so);
    sampling = start_sampling(std::move(so), o.report_dir, begin_ns, no_spans, metrics.get());
  }
  // The sampler's last readings, taken while the program's /proc entry is still there.
  void stop_sampling() {
    if (sampling.sampler) sampling.sampler->stop();
    program.watcher_cpu_s = own_cpu_s() - cpu_begin_s;
    program.wall_s = static_cast<double>(now_ns() - begin_ns) / 1e9;
  }
  // Everything read, diagnosed, and written to the report directory.
  WatchOutcome finish(const fs::path& channel, const OutputScanner& scanner);
};

WatchOutcome Watching::finish(const fs::path& channel, const OutputScanner& scanner) {
  fill_sampled_utilization(sampling, report.utilization);
  program.tree = tree->summary();
  program.torch = torch.found();
  const bool followed = take_tree_view(program, cpus, report.utilization, program.notes);

  const std::vector<SessionHandoff> sessions = read_sessions(channel, program.notes);
  const std::optional<DiagnosisInput> span_input =
      take_program_measurements(sessions, scanner, o, cpus, report, program);
  if (report.training.model.empty())
    report.training.model = "the program's own (" +
                            (followed && !program.tree.trainer_name.empty() ? program.tree.trainer_name
                                                                             : program.command.at(0)) + ")";

  const WatchedGpu gpu = read_watch_gpu_dir(channel);
  const std::optional<std::int64_t> first_kernel_ns = fill_gpu_trace(gpu, no_injection, report, program, begin_ns);
  WatchDiagnosisInput wd = watch_diagnosis_input(program, cpus, report, span_input, scanner,
                                                 o.try_loader && sampling.sampler ? &data_files : nullptr);
  // The program's per-sample times are not visible from outside; its files' are, with feedscope's
  // decoder, now that it has ended.
  if (o.try_loader) {
    if (data_files.files().empty()) data_files.look_at_arguments(program.command);
    wd.samples = measure_program_sample_costs(data_files, kSampleCostSeconds, kSampleCostMaxSamples,
                                              program.notes);
    report.samples = wd.samples;
  }
  report.diagnosis = diagnose_watched(wd);
  const Diagnosis watched = report.diagnosis;
  const std::vector<LauncherFailure> failures =
      reads_launcher_failures(o) ? scanner.launcher_failures() : std::vector<LauncherFailure>{};
  if (const int shown = digest_ranks(*tree, sessions, gpu, failures, task, wd, report))
    program.spans = "session (pid " + std::to_string(shown) + ")";
  if (const auto elsewhere = mpi_ranks_elsewhere(o.command, o.report_dir, program.tree.ranks,
                                                 program.tree.world_size)) {
    program.notes.push_back(*elsewhere);
    log << "feedscope watch: " << *elsewhere << std::endl;
  }
  note_printed_data_stall(report.diagnosis, program);
  if (report.job) {
    report.job->begin_unix_s = begin_unix_s;
    report.job->end_unix_s = begin_unix_s + program.wall_s;
  }
  report.program = std::move(program);
  offer_loader(o, data_files, span_input, report);
  if (o.try_changes) try_changes(o, report, log);
  else offer_tries(o, report);
  if (metrics) metrics->set_bottleneck(report.diagnosis.bottleneck);
  report.environment.device = report.gpu_trace && report.gpu_trace->kernels > 0 ? "cuda" : "cpu";

  report.config = watch_config(o, task, metrics.get());
  WatchOutcome outcome;
  outcome.report_dir = o.report_dir;
  note_work_began(first_kernel_ns, scanner, begin_ns, report.program->wall_s, outcome);
  write_report_files(o.report_dir, report, sampling.sampler.get(), {}, {},
                     gpu.activity.empty() ? nullptr : &gpu.activity, begin_ns);
  record_watch(o, wd, watched, gpu, report.gpu_trace_unavailable, log);
  outcome.report = std::move(report);
  return outcome;
}

constexpr const char* kAttachedNoTrace =
    "attached to a running program: a CUDA trace is injected only when a program starts "
    "(CUDA_INJECTION64_PATH, as `feedscope watch` starts it); the GPU is read through NVML's "
    "per-process readings instead";

int parent_of(int pid) {
  const auto stat = ProcFs().read("/proc/" + std::to_string(pid) + "/stat");
  const auto parsed = stat ? parse_task_stat(*stat) : std::nullopt;
  return parsed ? parsed->ppid : 0;
}

// The channel a watch gave the program (its environment's FEEDSCOPE_WATCH_DIR), where its
// Sessions hand their spans; none for a program started outside feedscope.
std::optional<fs::path> watch_dir_of(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string prefix = std::string(kWatchDirEnv) + "=";
  for (std::string var; std::getline(in, var, '\0');)
    if (var.rfind(prefix, 0) == 0 && fs::is_directory(var.substr(prefix.size()))) return var.substr(prefix.size());
  return std::nullopt;
}

std::string attach_ended(AttachEnd end) {
  switch (end) {
    case AttachEnd::duration: return "duration";
    case AttachEnd::interrupted: return "interrupted";
    case AttachEnd::program_ended: return "ended";
  }
  return "?";
}

// What `watch` would have measured that a program already running does not give.
void note_unmeasured_when_attached(ProgramSummary& program, bool sessions,
                                   const std::vector<std::string>& output_files) {
  program.unmeasured.push_back(std::string("CUDA trace: ") + kAttachedNoTrace);
  if (output_files.empty())
    program.unmeasured.push_back(
        "its output: it prints to a pipe or a terminal, which attach does not read (watch reads "
        "its progress lines for throughput and data wait); throughput is not measured unless a "
        "Session sends spans");
  for (const std::string& f : output_files)
    program.notes.push_back("its output: the lines it appended to " + f + " while attached were read");
  if (!sessions)
    program.unmeasured.push_back(
        "a feedscope Session's spans: one hands them over only to the watch that started the "
        "program (FEEDSCOPE_WATCH_DIR)");
  program.unmeasured.push_back(
      "its start-up and its end: the window is the stretch attach read, not the whole run");
}

// `feedscope attach`: the program runs on; the window ends with --duration, Ctrl-C or its end.
WatchOutcome attach_to(const WatchOptions& o, std::ostream& log) {
  const AttachedProcess target(o.attach_pid);
  const InterruptGuard interrupts;
  // Its rank, where a launcher named one; the address and the report folder stay as given.
  WatchTask task;
  task.identity = parse_distributed_env(
      ProcFs().read("/proc/" + std::to_string(target.pid()) + "/environ").value_or(""));
  task.report_dir = o.report_dir;
  task.metrics.address = o.metrics_addr;
  Watching w(o, task, log);
  w.program.command = target.command();
  w.program.attached = true;
  w.no_injection = kAttachedNoTrace;
  // A Session inside it hands its spans to the directory a watch gave it, if one did.
  const std::optional<fs::path> sessions_dir = watch_dir_of(target.pid());
  const ChannelDir none;
  const fs::path channel = sessions_dir ? *sessions_dir : none.path;
  log << "feedscope attach: reading " << target.what() << ", pid " << target.pid() << ", "
      << (o.duration_s > 0 ? "for " + (std::ostringstream() << o.duration_s).str() + " s"
                           : std::string("until it ends"))
      << " (Ctrl-C ends the window with the report); it is not stopped, signalled or traced" << std::endl;
  // Its progress lines, where it prints them into a file (not a pipe or a terminal).
  OutputScanner scanner = output_scanner(o, target.command());
  std::optional<OutputFollower> output;
  output.emplace(target.pid(), [&scanner](std::string_view line) { scanner.text(line, now_ns()); });
  w.mark_begin();
  w.start_sampling_at(target.pid(), parent_of(target.pid()), channel);
  const AttachEnd end = target.wait(o.duration_s);
  w.stop_sampling();
  const std::vector<std::string> followed = output->files();
  output.reset();  // its last lines read
  w.program.ended = attach_ended(end);
  w.program.exit = end == AttachEnd::program_ended ? "ended during the window (its exit status is its "
                                                     "parent's to read)"
                                                   : "still running";
  if (end == AttachEnd::interrupted) w.report.interrupted = interrupt_signal_name(interrupt_signal());
  note_unmeasured_when_attached(w.program, sessions_dir.has_value(), followed);
  WatchOutcome outcome = w.finish(channel, scanner);
  outcome.exit_code = 0;
  return outcome;
}

}  // namespace

WatchOutcome watch_program(const WatchOptions& given, std::ostream& log) {
  validate(given);
  if (given.attach_pid != 0) return attach_to(given, log);
  const WatchTask task = place_watch_task(given, started_identity(given));
  WatchOptions o = given;
  o.report_dir = task.report_dir;
  const ChannelDir channel;
  std::string no_injection;
  std::map<std::string, std::string> env = program_env(o, channel.path, no_injection);
  OutputScanner scanner = output_scanner(o, o.command);
  ChildProcess::Options co = child_options(o, std::move(env), scanner);

  Watching w(o, task, log);
  w.program.command = o.command;
  w.no_injection = no_injection;
  w.mark_begin();
  ChildProcess child(std::move(co));
  SignalForwarder forwarder(child.pid());
  w.start_sampling_at(child.pid(), ::getpid(), channel.path);

  const bool duration_ran_out = stop_after_duration(child, o, log);
  child.wait_exited(std::nullopt);
  w.stop_sampling();
  const ChildExit exit = child.reap();
  forwarder.child_ended();
  record_exit(exit, forwarder.received(), duration_ran_out, w.program, w.report);
  WatchOutcome outcome = w.finish(channel.path, scanner);
  outcome.exit_code = duration_ran_out ? 0 : exit.shell_code();
  return outcome;
}

int watch_command(const WatchOptions& options) {
  const WatchOutcome outcome = watch_program(options, std::cerr);
  const ProgramSummary& p = *outcome.report.program;
  if (options.print) {
    std::cerr << "\nfeedscope watch: " << command_line(p.command) << ": " << p.exit << " after "
              << p.wall_s << " s (" << p.ended << "); watching took " << p.watcher_cpu_s
              << " CPU-s (" << (p.wall_s > 0 ? 100 * p.watcher_cpu_s / p.wall_s : 0.0)
              << " % of one core)\n"
              << format_console_report(outcome.report, ::isatty(STDERR_FILENO) != 0)
              << "feedscope: report in " << outcome.report_dir << std::endl;
  }
  return outcome.exit_code;
}

void validate_watch_options(const WatchOptions& options) { validate(options); }

int attach_command(const WatchOptions& options) {
  const WatchOutcome outcome = watch_program(options, std::cerr);
  const ProgramSummary& p = *outcome.report.program;
  std::cerr << "\nfeedscope attach: pid " << p.pid << " (" << command_line(p.command) << "): read for "
            << p.wall_s << " s, " << (p.ended == "ended" ? "until it ended" : "it runs on")
            << "; reading took " << p.watcher_cpu_s << " CPU-s ("
            << (p.wall_s > 0 ? 100 * p.watcher_cpu_s / p.wall_s : 0.0) << " % of one core)\n"
            << format_console_report(outcome.report, ::isatty(STDERR_FILENO) != 0)
            << "feedscope: report in " << outcome.report_dir << std::endl;
  return outcome.exit_code;
}

}  // namespace feedscope
