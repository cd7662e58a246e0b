#pragma once
// `feedscope watch` as one task of a launcher's job, as users write it:
//   srun -n 4 feedscope watch --report-dir R -- python3 train.py
//   mpirun -n 4 feedscope watch --report-dir R -- python3 train.py
// Each watch is one rank's (its environment names it: sampler/rank_identity.h): it writes
// R/rank-N, the layout a Session uses, refuses a rank folder that holds another job's report
// unless --force, and listens for Prometheus on its port plus its local rank. `feedscope merge R`
// then judges the job. And the other way round, `watch -- srun ...`, which cannot work: srun's
// tasks are slurmstepd's children, not srun's, so no rank would ever be read.
#include <optional>
#include <string>
#include <vector>

#include "cli/watch.h"
#include "exporters/rank_address.h"
#include "exporters/report_assembly.h"
#include "sampler/rank_identity.h"

namespace feedscope {

struct WatchTask {
  RankIdentity identity;  // of the program watch starts (its environment is watch's, plus options.env)
  std::string report_dir;  // R/rank-N for a rank of a job of 2 or more, else R as given
  bool one_task = false;   // the program is one rank of such a job, this watch one task of it
  RankAddress metrics;     // where its endpoint listens (empty address: none)
};

// The rank the program watch starts will be: watch's own environment with options.env over it.
RankIdentity started_identity(const WatchOptions& options);

// Where the watch of `identity` writes and listens. Throws ConfigError naming the rank folder's
// report.json where it holds another job's report (unless options.force), and naming the address
// where the local rank takes its port past 65535.
WatchTask place_watch_task(const WatchOptions& options, const RankIdentity& identity);

// One of the N tasks of a machine (each under its own watch) takes an Nth of what a watch's looks
// at the training thread and its memory readings may cost, 10 looks a second at least: the N
// watches cost about what one watch of the machine's launcher does, and each rank is looked at
// about as often as it is there.
void share_with_the_other_tasks(const WatchTask& task, SamplingOptions& sampling);

// Whether `command` starts a launcher of ranks: torchrun, deepspeed, accelerate,
// torch.distributed.run, mpirun, mpiexec.
bool launches_ranks(const std::vector<std::string>& command);

// For `watch -- srun ...`: why it reads no rank and the per-task command that does; empty for a
// command that does not start with srun.
std::string srun_tasks_are_not_children(const std::vector<std::string>& command,
                                        const std::string& report_dir);

// For a watch of mpirun or mpiexec that read fewer ranks than the job's size (its ranks on other
// hosts are the children of a daemon there): the per-task command that reads them all; nullopt
// for another command, or where every rank was read.
std::optional<std::string> mpi_ranks_elsewhere(const std::vector<std::string>& command,
                                               const std::string& report_dir, int ranks_read,
                                               std::optional<int> world_size);

}  // namespace feedscope
