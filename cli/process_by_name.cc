#include "cli/process_by_name.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "cli/config.h"

namespace feedscope {

namespace {

struct Seen {
  int ppid = 0;
  unsigned long long start = 0;  // clock ticks after boot (/proc/PID/stat's field 22)
  std::string command;
  bool matches = false;
};

// The parent and start time of a /proc/PID/stat line; false where it is not one.
bool parent_and_start(const std::string& stat, int& ppid, unsigned long long& start) {
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {  // counted as proc(5) counts them
    if (i == 4) ppid = std::atoi(field.c_str());
    if (i == 22) {
      start = std::strtoull(field.c_str(), nullptr, 10);
      return true;
    }
  }
  return false;
}

std::string comm_of(const std::string& stat) {
  const std::size_t open = stat.find('('), close = stat.rfind(')');
  return open < close ? stat.substr(open + 1, close - open - 1) : "";
}

// This process and its ancestors: the shell that runs `feedscope attach --name train.py` matches.
std::set<int> self_and_ancestors(const ProcFs& fs) {
  std::set<int> out;
  for (int pid = ::getpid(); pid > 0 && out.insert(pid).second;) {
    int ppid = 0;
    unsigned long long start = 0;
    if (!parent_and_start(fs.read("/proc/" + std::to_string(pid) + "/stat").value_or(""), ppid, start)) break;
    pid = ppid;
  }
  return out;
}

std::regex pattern_of(const std::string& pattern) {
  if (pattern.empty()) throw ConfigError("name", "--name: empty; give a part of the job's command line, e.g. train.py");
  try {
    return std::regex(pattern, std::regex::extended | std::regex::nosubs);
  } catch (const std::regex_error& e) {
    throw ConfigError("name", "--name: '" + pattern + "' is not an extended regular expression: " + e.what());
  }
}

}  // namespace

std::vector<JobProcess> jobs_named(const ProcFs& fs, const std::string& pattern) {
  const std::regex re = pattern_of(pattern);
  const std::set<int> skip = self_and_ancestors(fs);
  std::map<int, Seen> seen;
  for (const std::string& name : fs.list_dir("/proc")) {
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int pid = std::atoi(name.c_str());
    const std::string dir = "/proc/" + name;
    Seen s;
    const std::string stat = fs.read(dir + "/stat").value_or("");
    if (!parent_and_start(stat, s.ppid, s.start)) continue;  // it ended meanwhile
    s.command = fs.read(dir + "/cmdline").value_or("");
    while (!s.command.empty() && s.command.back() == '\0') s.command.pop_back();
    std::replace(s.command.begin(), s.command.end(), '\0', ' ');
    s.matches = !s.command.empty() && !skip.contains(pid) && comm_of(stat) != "feedscope" &&
                std::regex_search(s.command, re);
    seen.emplace(pid, std::move(s));
  }
  std::vector<std::pair<unsigned long long, JobProcess>> jobs;
  for (const auto& [pid, s] : seen) {
    const auto parent = seen.find(s.ppid);
    if (s.matches && (parent == seen.end() || !parent->second.matches))
      jobs.push_back({s.start, JobProcess{pid, s.command}});
  }
  std::sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second.pid < b.second.pid;
  });
  std::vector<JobProcess> out;
  for (auto& [start, job] : jobs) out.push_back(std::move(job));
  return out;
}

JobProcess wait_for_job_named(const ProcFs& fs, const std::string& pattern, double wait_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(wait_s, 0.0));
  for (;;) {
    const std::vector<JobProcess> jobs = jobs_named(fs, pattern);
    if (!jobs.empty()) return jobs.front();
    if (std::chrono::steady_clock::now() >= deadline)
      throw ConfigError("name", "attach --name '" + pattern + "': no process's command line matched it in " +
                                    std::to_string(static_cast<int>(wait_s)) + " s (--wait)");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace feedscope
