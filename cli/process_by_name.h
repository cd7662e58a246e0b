#pragma once
// `feedscope attach --name PATTERN`: a running training job found by its command line, as
// `pgrep -f` finds it, for a sidecar that cannot know the PID (a Kubernetes pod with
// shareProcessNamespace, configs/k8s/): the trainer starts beside it, in a PID namespace where
// PIDs are the pod's own. A job's launcher, its ranks and their loader workers all match a
// pattern such as "train.py": the job is the matching process whose parent does not match.
#include <string>
#include <vector>

#include "sampler/proc_fs.h"

namespace feedscope {

struct JobProcess {
  int pid = 0;
  std::string command;  // its command line, arguments joined by spaces
};

// The jobs whose command line matches `pattern` (an extended regular expression searched in it,
// as pgrep -f), oldest first: each a matching process whose parent does not match. This process,
// its ancestors (the shell that runs `feedscope attach --name ...` matches its own pattern) and
// other feedscope processes are never one. Throws ConfigError (key "name") for a bad pattern.
std::vector<JobProcess> jobs_named(const ProcFs& fs, const std::string& pattern);

// The oldest job named `pattern`, waiting up to `wait_s` seconds for one to start (the sidecar
// may start first); throws ConfigError naming the pattern where none did.
JobProcess wait_for_job_named(const ProcFs& fs, const std::string& pattern, double wait_s);

}  // namespace feedscope
