#pragma once
// Which rank of a distributed job a process is, from the variables its launcher put in its
// environment. One reading for every reader: a watched process's /proc/PID/environ
// (sampler/proc_fs.h's parse_distributed_env), and the environment of a Session or of a
// `feedscope watch` that srun or mpirun started as one of the job's tasks.
//
// The launchers, in the order they are believed where several named a rank:
//   torch    RANK, WORLD_SIZE, LOCAL_RANK, GROUP_RANK, LOCAL_WORLD_SIZE (torchrun, deepspeed, accelerate, a script):
//            what torch.distributed itself reads, set by the launcher closest to the process.
//   openmpi  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK (mpirun, Open MPI).
//   pmi      PMI_RANK, PMI_SIZE, MPI_LOCALRANKID (MPICH's and Intel MPI's mpiexec).
//   slurm    SLURM_PROCID, SLURM_STEP_NUM_TASKS (else SLURM_NTASKS), SLURM_LOCALID, SLURM_NODEID
//            of a task of an srun step (SLURM_STEP_ID set: a batch script has SLURM_PROCID too).
// MPI comes before Slurm: mpirun and mpiexec in a Slurm allocation start their daemons with srun,
// one task per node, so their ranks carry that step's SLURM_PROCID, a node's number.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace feedscope {

struct RankIdentity {
  std::optional<int> rank;  // set only where the same launcher also gave the job's size
  std::optional<int> local_rank;
  // The ranks on this machine: LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS,
  // this node's count in SLURM_STEP_TASKS_PER_NODE ("4(x2),3").
  std::optional<int> local_size;
  std::optional<int> world_size;
  std::optional<int> node_rank;  // GROUP_RANK / NODE_RANK, SLURM_NODEID: which machine
  // The launcher whose variables gave the rank: "torch", "openmpi", "pmi", "slurm"; empty: none.
  std::string source;
  bool master = false;  // MASTER_ADDR or MASTER_PORT set (torch.multiprocessing.spawn's parent)
  // The job, for telling one job's reports from another's: "ADDR:PORT" of MASTER_ADDR/PORT, then
  // " rdzv=ID" (TORCHELASTIC_RUN_ID), " slurm=JOB.STEP", " mpi=ID" (PMIX_NAMESPACE, else
  // OMPI_MCA_ess_base_jobid), each where set; empty where none is.
  std::string job;
  // Launchers whose variables name another rank or size than the one used: which is used, why.
  std::vector<std::string> notes;
};

// An environment variable's value, nullopt where it is not set.
using EnvironmentLookup = std::function<std::optional<std::string_view>(std::string_view)>;

RankIdentity rank_identity(const EnvironmentLookup& env);
// Of an environment block as /proc/PID/environ holds it (KEY=VALUE, NUL-separated).
RankIdentity rank_identity_of_environ(std::string_view environ);
// Of this process's own environment (getenv).
RankIdentity rank_identity_of_this_process();

// What every rank of one job shares in RankIdentity::job: its rendezvous id, else its Slurm step,
// else its MPI job, else MASTER_ADDR:MASTER_PORT ("rdzv=abc", "slurm=12.0", "10.0.0.1:29500").
std::string job_key(std::string_view job);

}  // namespace feedscope
