// The feedscope command line: parses it, runs the subcommand, maps errors to DESIGN.md's exit
// codes. cli/program.cc is the program's main(); tests parse the documented commands through
// feedscope_main's check-only mode (cli/feedscope_main.h).
#include "cli/feedscope_main.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "cli/config.h"
#include "cli/help_examples.h"
#include "cli/interrupt.h"
#include "cli/make_dataset.h"
#include "cli/probe.h"
#include "cli/process_by_name.h"
#include "cli/run.h"
#include "cli/sweep.h"
#include "cli/sweep_command.h"
#include "cli/merge.h"
#include "cli/replay.h"
#include "cli/watch.h"
#include "exporters/job_merge.h"
#include "cli/child_process.h"
#include "exporters/console_report.h"
#include "exporters/json_report.h"
#include "exporters/recording.h"
#include "loader/batch_loader.h"
#include "loader/image_dataset_maker.h"
#include "loader/record_dataset.h"
#include "pinned_memory/errors.h"
#include "sampler/proc_fs.h"

namespace {

using namespace feedscope;

enum ExitCode { kDone = 0, kUsage = 2, kBadData = 3, kRuntime = 4 };

// Every config key as a command-line option. Values stay text until set_config_value() checks
// them, so the command line and YAML share one validation and one set of messages.
struct RunOptions {
  std::string config_file;
  std::map<std::string, std::string> values;
  std::map<std::string, CLI::Option*> options;

  void add_to(CLI::App& app) {
    app.add_option("--config", config_file, "YAML file of keys (the command line wins)");
    for (const KeyInfo& key : config_keys()) {
      std::string flag = "--" + std::string(key.name);
      for (char& c : flag) c = c == '_' ? '-' : c;
      const std::string help = std::string(key.help) + " [" + std::string(key.allowed) + "]";
      std::string& value = values[std::string(key.name)];
      CLI::Option* opt = app.add_option(flag, value, help);
      // A boolean key alone means on; it also takes a value, as `--pin-memory off` or `=off`.
      if (key.type == KeyType::boolean) opt->expected(0, 1)->default_str("on");
      options[std::string(key.name)] = opt;
    }
    options["steps"]->excludes(options["duration"]);
  }

  void apply(RunConfig& config) const {
    if (!config_file.empty()) apply_yaml_file(config, config_file);
    for (const auto& [key, opt] : options)
      if (opt->count() > 0 && !lists.count(key))
        set_config_value(config, key, values.at(key), opt->get_name());
  }

  // For sweep: these keys take comma lists ("0,1,2"), checked value by value by parse_grid.
  std::map<std::string, std::string> lists;
  void take_lists(std::initializer_list<const char*> keys) {
    for (const char* key : keys)
      if (options.at(key)->count() > 0) lists[key] = values.at(key);
  }
};

// Options sweep and tune add to the run options.
struct SearchOptions {
  int repeats = 3;
  double budget_s = 300;
  std::int64_t max_batch_size = 0;
  double min_gain = 0.03;
};

int run_and_print(const RunConfig& config) {
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  std::ostream& human = config.json ? std::cerr : std::cout;
  Report report;
  {
    const InterruptGuard interrupts;
    report = run_profiled(config, std::cerr);
  }
  human << "\n" << format_console_report(report, tty && !config.json);
  human << "\nreport: " << config.report_dir << "/report.json\n";
  if (config.json) std::cout << report_to_json(report);
  return report.interrupted.empty() ? kDone : interrupted_exit_code(report.interrupted);
}

// What sweep and tune check before their first run: the config, a sweep's grid, and the program
// points' pattern and unit.
void check_search(const RunConfig& config, const std::map<std::string, std::string>& lists,
                  const ProgramPoints& program) {
  validate_config(config);
  parse_grid(lists);
  if (!program.command.empty()) program_point_runner(config, program);
}

// MemAvailable (free plus reclaimable page cache), as the sampler reads it; 1 GiB when unknown.
std::uint64_t available_memory_bytes() {
  if (const auto meminfo = ProcFs().read("/proc/meminfo"))
    if (const auto mem = parse_meminfo(*meminfo)) return mem->available_bytes;
  return std::uint64_t{1} << 30;
}

// The demo trains a small CNN on ImageNet-like JPEGs, the pipeline feedscope is for: decode,
// RandomResizedCrop, flip, normalize on two workers.
constexpr const char* kDemoImages = "feedscope-demo/images";

RunConfig demo_defaults() {
  RunConfig c;
  c.dataset = std::string("images:") + kDemoImages;
  c.model = "cnn";
  c.hidden = 32;
  c.layers = 2;
  c.num_workers = 2;
  c.batch_size = 32;
  c.steps = 60;
  c.warmup = 5;
  c.report_dir = "feedscope-demo";
  return c;
}

// Makes the demo's dataset the first time: 512 JPEGs of 500x375 in 4 classes, from seed 0.
void make_demo_images_if_missing(const RunConfig& config) {
  if (config.dataset != std::string("images:") + kDemoImages) return;  // the user chose another
  if (std::filesystem::exists(kDemoImages)) return;
  ImageDatasetOptions o;
  o.out = kDemoImages;
  o.count = 512;
  o.classes = 4;
  std::cerr << "feedscope demo: writing " << o.count << " JPEG files (" << o.width << "x"
            << o.height << ") to " << kDemoImages << " (once)" << std::endl;
  make_image_dataset(o);
}

// The subcommands and the options each binds. CLI11 keeps pointers to the members: it stays
// where it was made, as long as the app.
struct CommandLine {
  explicit CommandLine(CLI::App& app);
  void add_searches(CLI::App& app);
  void add_watch(CLI::App& app);
  void add_attach(CLI::App& app);
  void add_merge(CLI::App& app);
  void add_replay(CLI::App& app);

  CLI::App* probe = nullptr;
  bool probe_json_out = false;
  CLI::App* demo = nullptr;
  RunOptions demo_options;
  CLI::App* run = nullptr;
  RunOptions run_options;
  SearchOptions search;
  CLI::App* sweep = nullptr;
  RunOptions sweep_options;
  CLI::App* tune = nullptr;
  RunOptions tune_options;
  ProgramPoints program;
  std::optional<MakeDatasetCommand> make_dataset;
  CLI::App* watch = nullptr;
  WatchOptions watch_options;
  bool no_try_loader = false;
  std::string try_mode;  // --try: "true" (CLI11's value of a bare flag); --try=auto: "auto"; not given: empty
  CLI::App* attach = nullptr;
  WatchOptions attach_options;
  std::string attach_name;  // --name: the job found by its command line instead of a PID
  double attach_wait_s = 60;
  bool attach_list = false;
  CLI::App* merge = nullptr;
  std::string merge_out;
  std::vector<std::string> merge_dirs;
  CLI::App* replay = nullptr;
  std::string replay_dir;
  bool replay_json = false;
};

// The subcommands in the order --help lists them.
CommandLine::CommandLine(CLI::App& app) {
  probe = app.add_subcommand("probe", "CPUs, memory, disks, CUDA devices, CUPTI, NVML");
  probe->add_flag("--json", probe_json_out, "print as JSON");

  demo = app.add_subcommand(
      "demo", "a profiled training run on embedded defaults; prints the diagnosis");
  demo_options.add_to(*demo);

  run = app.add_subcommand("run", "a profiled training run (or --loader-only)");
  run_options.add_to(*run);

  add_searches(app);
  make_dataset.emplace(app);
  add_watch(app);
  add_attach(app);
  add_merge(app);
  add_replay(app);
}

void CommandLine::add_searches(CLI::App& app) {
  sweep = app.add_subcommand(
      "sweep", "a grid over --num-workers, --batch-size, --prefetch, --pin-memory (comma lists)");
  sweep_options.add_to(*sweep);
  sweep->add_option("--repeats", search.repeats,
                    "runs per point at most; the median is kept, and a point stops repeating once "
                    "its runs (2 or more) agree: max - min within 3 % of their median [3]")
      ->check(CLI::Range(1, 100));

  tune = app.add_subcommand(
      "tune", "automatic search from minimal parallelism, guided by the diagnosis");
  tune_options.add_to(*tune);
  tune->add_option("--budget", search.budget_s, "time budget in seconds")
      ->check(CLI::Range(1.0, 86400.0));
  tune->add_option("--max-batch-size", search.max_batch_size,
                   "let the tuner double the batch size up to this [default: fixed]")
      ->check(CLI::Range(0, 1048576));
  tune->add_option("--min-gain", search.min_gain,
                   "a move is kept when it gains more than this ratio [default: 0.03]")
      ->check(CLI::Range(0.0, 1.0));
  // `-- COMMAND`: the points run the user's program under watch (cli/command_points.h).
  for (CLI::App* search_app : {sweep, tune}) {
    search_app->add_option("--throughput-pattern", program.throughput_pattern,
                           "with -- COMMAND: regex with one group, the figure the program prints "
                           "(samples/s, it/s or s/it; it/s and s/it x {batch_size} for samples/s)");
    search_app->add_option("--throughput-unit", program.throughput_unit,
                           "with -- COMMAND: the pattern's unit: samples/s, it/s or s/it [what the "
                           "pattern's text names: it/s, s/it or Time; else samples/s]");
    search_app->add_option("--workload-samples", program.workload_samples,
                           "with -- COMMAND: samples one run processes (throughput from the time "
                           "between its first CUDA kernel, else its first output line, and its end)")
        ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()));
  }
}

void CommandLine::add_watch(CLI::App& app) {
  watch = app.add_subcommand(
      "watch", "run a training program feedscope did not write and diagnose it: feedscope watch "
               "[options] -- COMMAND [ARGS...]");
  watch->add_option("--report-dir", watch_options.report_dir,
                    "report directory; a watch that srun or mpirun started as one task of a job "
                    "writes its rank-N folder [feedscope-watch]");
  watch->add_flag("--force", watch_options.force,
                  "replace the report in a task's rank-N folder though it is another job's");
  watch->add_option("--metrics-addr", watch_options.metrics_addr,
                    "HOST:PORT of a Prometheus endpoint while the program runs; a task of a job "
                    "listens on PORT + its local rank, or {local_rank} in HOST:PORT is replaced by it");
  watch->add_option("--sample-hz", watch_options.sample_hz, "utilization samples per second [10]");
  watch->add_option("--duration", watch_options.duration_s,
                    "stop the program after this many seconds (SIGINT, then SIGTERM) [until it exits]");
  watch->add_option("--throughput-pattern", watch_options.throughput_pattern,
                    "regex with one group: the figure in a line the program prints (samples/s, "
                    "it/s or s/it) [its progress lines in a known format: torchvision MetricLogger, "
                    "timm, ImageNet Time/Data, nanoGPT, word_language_model, tqdm, N samples/s; "
                    "else a counter timed on arrival: [N/TOTAL (P%)], (i/N), i/N, a Keras bar; "
                    "else a line repeating steadily, in lines/s]");
  watch->add_option("--throughput-unit", watch_options.throughput_unit,
                    "the pattern's unit: samples/s, it/s or s/it [what the pattern's text names: "
                    "it/s, s/it or Time; else samples/s]");
  watch->add_option("--batch-size", watch_options.batch_size,
                    "the program's batch size: turns it/s and s/it into samples/s [its command "
                    "line's -b, --batch-size or --batch_size; else not known]")
      ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()));
  watch->add_option("--record-dir", watch_options.record_dir,
                    "record what the diagnosis read (GPU records, its input, its verdict) for "
                    "`feedscope replay` [$FEEDSCOPE_RECORD_DIR, else none]");
  watch->add_flag("--try", try_mode,
                  "once the program has ended, run it again with each change feedscope can make "
                  "from outside (the thread count; the worker count or batch size where its "
                  "command line has the flag), alternating with the unchanged command, and settle "
                  "the advice with what each measured; --try=auto: only the changes that settle a "
                  "guess left in the advice")
      ->option_text("[=auto]");
  watch->add_option("--try-seconds", watch_options.try_seconds,
                    "with --try: seconds each run of a change (and of the unchanged command) lasts [20]");
  watch->add_option("--try-rounds", watch_options.try_rounds,
                    "with --try: runs of each change, each beside one of the unchanged command [2]");
  watch->add_option("--gpu-trace", watch_options.gpu_trace,
                    "how CUPTI traces the program's GPU: W/P takes the kernels', copies' and "
                    "memsets' records in W of every P seconds and scales, saying so; whole takes "
                    "them all (the kernels' records alone cost a launch-bound loop a tenth of its "
                    "speed) [1/10]");
  watch->add_option("--gpu-trace-lead", watch_options.gpu_trace_lead_s,
                    "with a sampled --gpu-trace: seconds traced whole from each process's first kernel [5]");
  watch->add_flag("--no-try-loader", no_try_loader,
                  "do not measure the program's files after it ends: feedscope's loader on a "
                  "cpu_preprocess program's, each image's load time with feedscope's decoder");
}

void CommandLine::add_attach(CLI::App& app) {
  attach = app.add_subcommand(
      "attach", "read a training program that is already running and diagnose it, without "
                "stopping, restarting or changing it: feedscope attach [options] PID");
  attach_options.report_dir = "feedscope-attach";
  attach_options.duration_s = 30;
  attach->add_option("pid", attach_options.attach_pid, "the training process (or its launcher: torchrun)");
  attach->add_option("--name", attach_name,
                     "instead of a PID: the job whose command line matches this extended regex (as "
                     "pgrep -f), the oldest matching process whose parent does not match (a sidecar's "
                     "way: configs/k8s/)");
  attach->add_option("--wait", attach_wait_s, "with --name: seconds to wait for the job to start [60]")
      ->check(CLI::Range(0.0, 1e9));
  attach->add_flag("--list", attach_list, "with --name: print the matching jobs (PID and command), oldest first, and exit");
  attach->add_option("--duration", attach_options.duration_s,
                     "seconds to read it; 0: until it ends (a sidecar with --metrics-addr) [30]")
      ->check(CLI::Range(0.0, 1e9));
  attach->add_option("--report-dir", attach_options.report_dir, "report directory [feedscope-attach]");
  attach->add_option("--metrics-addr", attach_options.metrics_addr,
                     "HOST:PORT of a Prometheus endpoint while it is read");
  attach->add_option("--sample-hz", attach_options.sample_hz, "utilization samples per second [10]");
  attach->add_option("--record-dir", attach_options.record_dir,
                     "record what the diagnosis read for `feedscope replay` [$FEEDSCOPE_RECORD_DIR, else none]");
}

void CommandLine::add_merge(CLI::App& app) {
  merge = app.add_subcommand(
      "merge", "join the reports of a distributed job's machines (each `feedscope watch "
               "--report-dir D -- torchrun --nnodes N ...`) or tasks (`srun feedscope watch "
               "--report-dir R -- ...`: R/rank-N each) into one job report");
  merge->add_option("--report-dir", merge_out,
                    "the job report's directory [the folder of rank folders, where one is given]");
  merge->add_option("reports", merge_dirs,
                    "the machines' report directories, or a folder of rank-N folders")
      ->required()
      ->expected(1, 1 << 16);
}

void CommandLine::add_replay(CLI::App& app) {
  replay = app.add_subcommand(
      "replay", "a recording of run or watch (--record-dir, $FEEDSCOPE_RECORD_DIR) through the same "
                "GPU summary and diagnosis, without a GPU; compared with its expect.json");
  replay->add_option("recording", replay_dir, "the recording's directory")->required();
  replay->add_flag("--json", replay_json, "print the replay as JSON");
}

// `-- COMMAND [ARGS...]` of watch, sweep and tune is the program's, options and all: split off
// before parsing, so CLI11 never reads the program's own flags as feedscope's.
std::vector<std::string> split_off_command(int& argc, char** argv) {
  std::vector<std::string> command;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) != "--") continue;
    command.assign(argv + i + 1, argv + argc);
    argc = i;
    break;
  }
  return command;
}

TuneOptions tune_options(const RunConfig& config, const SearchOptions& search) {
  TuneOptions t;
  t.time_budget_s = search.budget_s;
  t.max_workers = config.max_workers > 0 ? static_cast<int>(config.max_workers)
                                         : static_cast<int>(std::thread::hardware_concurrency());
  t.max_threads = static_cast<int>(std::thread::hardware_concurrency());
  t.max_batch_size = search.max_batch_size;
  t.min_gain = search.min_gain;
  t.max_prefetch = 8;
  t.ram_budget_bytes = config.ram_budget_mib > 0
                           ? static_cast<std::uint64_t>(config.ram_budget_mib) << 20
                           : available_memory_bytes() / 4;
  return t;
}

int search_command(CommandLine& cl, const std::vector<std::string>& command,
                   const CommandLineMode& mode) {
  const bool sweep = static_cast<bool>(*cl.sweep);
  RunConfig config;
  RunOptions& options = sweep ? cl.sweep_options : cl.tune_options;
  if (sweep) options.take_lists({"num_workers", "batch_size", "prefetch", "pin_memory", "cpu_threads"});
  options.apply(config);
  for (const auto& [key, value] : {std::pair{"num_workers", config.num_workers},
                                   std::pair{"prefetch", config.prefetch}})
    if (value == kAutoValue)
      throw ConfigError(key, std::string(key) + ": 'auto' is for run: " +
                                 (sweep ? "sweep" : "tune") +
                                 " measures fixed settings, one run each");
  if (!config.record_dir.empty())
    throw ConfigError("record_dir", std::string("record_dir: is for run and watch: ") +
                                        (sweep ? "sweep" : "tune") + " runs many points");
  ProgramPoints& program = cl.program;
  program.command = command;
  program.sample_hz = config.sample_hz;
  if (mode.check_only) return check_search(config, options.lists, program), kDone;
  const InterruptGuard interrupts;
  if (sweep) return sweep_command(config, options.lists, cl.search.repeats, program);
  return tune_command(config, tune_options(config, cl.search), program);
}

// `attach PID`, or `attach --name PATTERN` (--list: only say which jobs match).
int attach_subcommand(CommandLine& cl, const CommandLineMode& mode) {
  WatchOptions& o = cl.attach_options;
  if ((o.attach_pid != 0) == !cl.attach_name.empty())
    throw ConfigError("pid", "attach: give a PID or --name PATTERN (one of them): feedscope attach [options] PID");
  if (cl.attach_list && cl.attach_name.empty()) throw ConfigError("list", "attach: --list goes with --name PATTERN");
  o.record_dir = recording_dir(o.record_dir);
  if (!cl.attach_name.empty() && mode.check_only) {
    jobs_named(ProcFs(), cl.attach_name);  // a bad pattern throws
    o.attach_pid = 1;  // stands for the job found, for the other options' checks
  } else if (!cl.attach_name.empty()) {
    if (cl.attach_list) {
      for (const JobProcess& job : jobs_named(ProcFs(), cl.attach_name)) std::cout << job.pid << " " << job.command << "\n";
      return kDone;
    }
    const JobProcess job = wait_for_job_named(ProcFs(), cl.attach_name, cl.attach_wait_s);
    std::cerr << "feedscope attach: --name '" << cl.attach_name << "' is pid " << job.pid << ": " << job.command << std::endl;
    o.attach_pid = job.pid;
  }
  if (mode.check_only) return validate_watch_options(o), kDone;
  return attach_command(o);
}

// The chosen subcommand, or under check_only what it would check before it starts.
int run_subcommand(CommandLine& cl, const std::vector<std::string>& command,
                   const CommandLineMode& mode, std::ostream& err) {
  if (cl.make_dataset->chosen()) {
    if (mode.check_only) return cl.make_dataset->check(), kDone;
    cl.make_dataset->run(std::cout);
    return kDone;
  }
  if (!command.empty() && !*cl.watch && !*cl.sweep && !*cl.tune) {
    err << "feedscope: error: `-- COMMAND` is for watch, sweep and tune\n";
    return kUsage;
  }
  if (*cl.watch) {
    cl.watch_options.command = command;
    cl.watch_options.try_loader = !cl.no_try_loader;
    if (!cl.try_mode.empty() && cl.try_mode != "true" && cl.try_mode != "auto")
      throw ConfigError("try", "--try=" + cl.try_mode + ": not a mode; allowed: --try (every change) or "
                               "--try=auto (the changes that settle a guess left in the advice)");
    cl.watch_options.try_changes = !cl.try_mode.empty();
    cl.watch_options.try_auto = cl.try_mode == "auto";
    cl.watch_options.record_dir = recording_dir(cl.watch_options.record_dir);
    if (mode.check_only) return validate_watch_options(cl.watch_options), kDone;
    return watch_command(cl.watch_options);
  }
  if (*cl.attach) return attach_subcommand(cl, mode);
  if (*cl.merge) {
    if (mode.check_only) return kDone;
    return merge_command(cl.merge_out, cl.merge_dirs, std::cerr);
  }
  if (*cl.replay) {
    if (mode.check_only) return kDone;
    return replay_command(cl.replay_dir, cl.replay_json, std::cout);
  }
  if (*cl.probe) {
    if (mode.check_only) return kDone;
    std::cout << (cl.probe_json_out ? probe_json() : probe_text());
    return kDone;
  }
  if (*cl.sweep || *cl.tune) return search_command(cl, command, mode);
  RunConfig config = *cl.demo ? demo_defaults() : RunConfig{};
  (*cl.demo ? cl.demo_options : cl.run_options).apply(config);
  config.record_dir = recording_dir(config.record_dir);
  if (mode.check_only) return validate_config(config), kDone;
  if (*cl.demo) make_demo_images_if_missing(config);
  return run_and_print(config);
}

}  // namespace

namespace feedscope {

int feedscope_main(int argc, char** argv, const CommandLineMode& mode) {
  std::ostream& out = mode.out ? *mode.out : std::cout;
  std::ostream& err = mode.err ? *mode.err : std::cerr;
  CLI::App app{"feedscope: feeds a libtorch training step as fast as the hardware allows, and "
               "says which stage of the input pipeline holds it back."};
  app.set_version_flag("--version", std::string("feedscope ") + FEEDSCOPE_VERSION);
  app.require_subcommand(1);
  CommandLine command_line(app);
  const std::vector<std::string> command = split_off_command(argc, argv);
  add_help_examples(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? kDone : kUsage;
  }

  // Each error's exit code, as DESIGN.md lists them.
  try {
    return run_subcommand(command_line, command, mode, err);
  } catch (const MergeError& e) {
    err << "feedscope merge: " << e.what() << "\n";
    return kUsage;
  } catch (const RecordingError& e) {
    err << "feedscope replay: " << e.what() << "\n";
    return kUsage;
  } catch (const ChildStartError& e) {
    err << "feedscope: " << e.what() << "\n";
    return e.exit_code();
  } catch (const ConfigError& e) {
    err << "feedscope: error: " << e.what() << "\n";
    return kUsage;
  } catch (const DatasetError& e) {
    err << "feedscope: error: " << e.what() << "\n";
    return kUsage;
  } catch (const SampleError& e) {
    err << "feedscope: bad data: " << e.what() << "\n";
    return kBadData;
  } catch (const BadDataError& e) {
    err << "feedscope: " << e.what() << "\n";
    return kBadData;
  } catch (const DeviceError& e) {
    err << "feedscope: device error: " << e.what() << "\n";
    return kRuntime;
  } catch (const std::exception& e) {
    err << "feedscope: runtime failure: " << e.what() << "\n";
    return kRuntime;
  }
}

}  // namespace feedscope
