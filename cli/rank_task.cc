#include "cli/rank_task.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "cli/config.h"
#include "cli/output_scanner.h"

namespace feedscope {

namespace {

namespace fs = std::filesystem;

std::string program_name(const std::string& word) { return word.substr(word.rfind('/') + 1); }

bool is_mpi_launcher(const std::vector<std::string>& command) {
  if (command.empty()) return false;
  const std::string name = program_name(command.front());
  return name == "mpirun" || name == "mpiexec" || name == "orterun";
}

// The launcher's options that take a value as the next word (`-n 4`, `--ntasks 4`); `--mca` and
// `-mca` take two. A word of another option that starts with '-' takes none, as `--pty`.
const std::set<std::string>& srun_value_options() {
  static const std::set<std::string> options = {
      "-A", "-b", "-c", "-D", "-d", "-e", "-G", "-i", "-J", "-L", "-m", "-n", "-N", "-o", "-p",
      "-q", "-S", "-t", "-T", "-w", "-W", "-x", "--account", "--begin", "--cpus-per-task",
      "--chdir", "--dependency", "--error", "--gpus", "--gres", "--input", "--job-name",
      "--licenses", "--distribution", "--ntasks", "--nodes", "--output", "--partition", "--qos",
      "--core-spec", "--time", "--threads", "--nodelist", "--wait", "--exclude", "--mem",
      "--mem-per-cpu", "--mem-per-gpu", "--ntasks-per-node", "--gpus-per-task", "--gpus-per-node",
      "--constraint", "--reservation", "--export", "--mpi", "--cpu-bind", "--jobid", "--het-group"};
  return options;
}

const std::set<std::string>& mpirun_value_options() {
  static const std::set<std::string> options = {
      "-n", "-np", "-c", "-N", "-H", "-host", "--host", "-hostfile", "--hostfile", "-machinefile",
      "--machinefile", "-x", "-wdir", "--wdir", "-wd", "-map-by", "--map-by", "-rank-by",
      "--rank-by", "-bind-to", "--bind-to", "-npernode", "--npernode", "-npersocket", "--prefix",
      "-prefix", "-output-filename", "--output-filename", "-ppn", "-f", "-genv", "-env"};
  return options;
}

bool takes_two(const std::string& option) {
  return option == "--mca" || option == "-mca" || option == "-gmca" || option == "--gmca" ||
         option == "-genv" || option == "-env";
}

// Where the program starts in a launcher's command: the first word after the launcher and its
// options; the command's size where none is found.
std::size_t program_start(const std::vector<std::string>& command, const std::set<std::string>& values) {
  std::size_t i = 1;
  while (i < command.size() && command[i].size() > 1 && command[i][0] == '-') {
    const std::string& word = command[i];
    if (takes_two(word)) i += 3;
    else if (values.contains(word)) i += 2;
    else ++i;
  }
  return std::min(i, command.size());
}

// `LAUNCHER OPTIONS... feedscope watch --report-dir DIR -- PROGRAM ARGS...`.
std::string per_task_command(const std::vector<std::string>& command, const std::set<std::string>& values,
                             const std::string& report_dir) {
  const std::size_t at = program_start(command, values);
  std::vector<std::string> out(command.begin(), command.begin() + static_cast<std::ptrdiff_t>(at));
  for (const char* word : {"feedscope", "watch", "--report-dir"}) out.emplace_back(word);
  out.push_back(report_dir);
  out.emplace_back("--");
  out.insert(out.end(), command.begin() + static_cast<std::ptrdiff_t>(at), command.end());
  if (at == command.size()) out.emplace_back("PROGRAM [ARGS...]");
  return command_line(out);
}

// The job id a report.json names, "" where it names none; nullopt where it cannot be read.
std::optional<std::string> job_of_report(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    const auto job = j.find("job");
    if (job == j.end() || !job->is_object()) return "";
    const auto id = job->find("id");
    return id != job->end() && id->is_string() ? id->get<std::string>() : std::string();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// Refuses a rank folder whose report.json is another job's: each task of a job writes its own.
void check_rank_folder(const fs::path& dir, const RankIdentity& id) {
  const fs::path report = dir / "report.json";
  std::error_code ec;
  if (!fs::exists(report, ec)) return;
  const std::optional<std::string> there = job_of_report(report);
  const std::string mine = job_key(id.job);
  if (there && !mine.empty() && job_key(*there) == mine) return;  // this job's own, written again
  const std::string whose = !there ? "a report that cannot be read"
                            : there->empty() ? "the report of a watch that was no rank of a job"
                                             : "the report of job " + *there;
  throw ConfigError("report_dir",
                    report.string() + " holds " + whose + ", not this job's (" +
                        (id.job.empty() ? std::string("no job id in its environment") : id.job) + ", rank " +
                        std::to_string(*id.rank) + " by " + id.source +
                        "): give each run its own --report-dir, or --force to replace it");
}

}  // namespace

RankIdentity started_identity(const WatchOptions& o) {
  return rank_identity([&o](std::string_view key) -> std::optional<std::string_view> {
    if (const auto it = o.env.find(std::string(key)); it != o.env.end()) return std::string_view(it->second);
    const char* v = std::getenv(std::string(key).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string_view(v);
  });
}

WatchTask place_watch_task(const WatchOptions& o, const RankIdentity& identity) {
  WatchTask task;
  task.identity = identity;
  task.report_dir = o.report_dir;
  if (identity.rank && identity.world_size.value_or(0) >= 2) {
    const fs::path dir = fs::path(o.report_dir) / ("rank-" + std::to_string(*identity.rank));
    if (!o.force) check_rank_folder(dir, identity);
    task.report_dir = dir.string();
    task.one_task = true;
  }
  if (!o.metrics_addr.empty()) {
    try {
      task.metrics = metrics_address_of_rank(o.metrics_addr, identity);
    } catch (const std::invalid_argument& e) {
      throw ConfigError("metrics_addr", e.what());
    }
  }
  return task;
}

void share_with_the_other_tasks(const WatchTask& task, SamplingOptions& so) {
  constexpr double kLeastLooksPerSecond = 10;
  const int tasks = task.one_task ? task.identity.local_size.value_or(1) : 1;
  if (tasks <= 1) return;
  so.wait_probe_hz = std::max(std::min(kLeastLooksPerSecond, so.wait_probe_hz), so.wait_probe_hz / tasks);
  so.memory_cpu_share /= tasks;
}

bool launches_ranks(const std::vector<std::string>& command) {
  return starts_distributed_launcher(command) || is_mpi_launcher(command);
}

std::string srun_tasks_are_not_children(const std::vector<std::string>& command,
                                        const std::string& report_dir) {
  if (command.empty() || program_name(command.front()) != "srun") return "";
  return "watch: srun's tasks are not its children (slurmd's slurmstepd starts them, on every "
         "node), so a watch of srun would read no rank. Watch each task instead, one watch per rank, "
         "and join their reports:\n  " +
         per_task_command(command, srun_value_options(), report_dir) + "\n  feedscope merge " +
         report_dir;
}

std::optional<std::string> mpi_ranks_elsewhere(const std::vector<std::string>& command,
                                               const std::string& report_dir, int ranks_read,
                                               std::optional<int> world_size) {
  if (!is_mpi_launcher(command)) return std::nullopt;
  const std::string name = program_name(command.front());
  if (ranks_read > 0 && (!world_size || *world_size <= ranks_read)) return std::nullopt;
  return name + " started " + (ranks_read == 0 ? std::string("no rank this watch read")
                                               : "ranks on other hosts") +
         ": those are the children of its daemon there, not this watch's descendants. One watch "
         "per rank reads them all: " +
         per_task_command(command, mpirun_value_options(), report_dir) + ", then feedscope merge " +
         report_dir;
}

}  // namespace feedscope
