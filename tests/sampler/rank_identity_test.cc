// A process's rank from every launcher's variables (sampler/rank_identity.h), as real launchers
// set them: the environments below are the variables torchrun, srun 22.05, Open MPI 4.1's mpirun
// and MPICH's mpiexec put in a rank's environment (srun's and mpirun's copied from real tasks).
#include "sampler/rank_identity.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace feedscope {
namespace {

using namespace std::string_literals;

// A task of `srun -n 2`, as slurmstepd started it (job 7, step 0).
const std::string kSrunTask1 =
    "SLURM_JOB_ID=7\0SLURM_JOBID=7\0SLURM_STEP_ID=0\0SLURM_STEPID=0\0SLURM_PROCID=1\0"
    "SLURM_LOCALID=1\0SLURM_NODEID=0\0SLURM_NTASKS=2\0SLURM_NPROCS=2\0SLURM_STEP_NUM_TASKS=2\0"
    "SLURM_STEP_TASKS_PER_NODE=2\0"
    "PATH=/usr/bin\0"s;
// A rank of `mpirun -n 2`.
const std::string kMpirunRank1 =
    "OMPI_COMM_WORLD_RANK=1\0OMPI_COMM_WORLD_SIZE=2\0OMPI_COMM_WORLD_LOCAL_RANK=1\0"
    "OMPI_COMM_WORLD_NODE_RANK=1\0OMPI_COMM_WORLD_LOCAL_SIZE=2\0PMIX_NAMESPACE=1074659329\0PMIX_RANK=1\0"
    "OMPI_MCA_ess_base_jobid=1074659329\0"s;

TEST(RankIdentityTest, TorchrunsVariables) {
  const RankIdentity id = rank_identity_of_environ(
      "RANK=5\0WORLD_SIZE=8\0LOCAL_RANK=1\0GROUP_RANK=2\0MASTER_ADDR=10.0.0.1\0MASTER_PORT=29400\0"
      "TORCHELASTIC_RUN_ID=abc\0"s);
  EXPECT_EQ(id.rank, 5);
  EXPECT_EQ(id.world_size, 8);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_EQ(id.node_rank, 2);
  EXPECT_EQ(id.source, "torch");
  EXPECT_TRUE(id.master);
  EXPECT_EQ(id.job, "10.0.0.1:29400 rdzv=abc");
  EXPECT_TRUE(id.notes.empty());
}

TEST(RankIdentityTest, AnSrunTask) {
  const RankIdentity id = rank_identity_of_environ(kSrunTask1 + "MASTER_ADDR=127.0.0.1\0MASTER_PORT=29500\0"s);
  EXPECT_EQ(id.rank, 1);
  EXPECT_EQ(id.world_size, 2);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_EQ(id.local_size, 2);
  EXPECT_EQ(id.node_rank, 0);
  EXPECT_EQ(id.source, "slurm");
  EXPECT_EQ(id.job, "127.0.0.1:29500 slurm=7.0");
  EXPECT_EQ(job_key(id.job), "slurm=7.0");
}

// Slurm says a step's tasks per node as "4(x2),3": 4 on each of nodes 0 and 1, 3 on node 2.
TEST(RankIdentityTest, ThisNodesTasksOfAnSrunStep) {
  const std::string step = "SLURM_STEP_ID=0\0SLURM_PROCID=8\0SLURM_STEP_NUM_TASKS=11\0SLURM_STEP_TASKS_PER_NODE=4(x2),3\0"s;
  EXPECT_EQ(rank_identity_of_environ(step + "SLURM_NODEID=1\0"s).local_size, 4);
  EXPECT_EQ(rank_identity_of_environ(step + "SLURM_NODEID=2\0"s).local_size, 3);
  EXPECT_FALSE(rank_identity_of_environ(step + "SLURM_NODEID=3\0"s).local_size) << "no such node";
  EXPECT_FALSE(rank_identity_of_environ(
                   "SLURM_STEP_ID=0\0SLURM_PROCID=0\0SLURM_NTASKS=2\0SLURM_TASKS_PER_NODE=2(x\0"s)
                   .local_size)
      << "malformed: not known";
  EXPECT_EQ(rank_identity_of_environ("RANK=1\0WORLD_SIZE=8\0LOCAL_WORLD_SIZE=4\0"s).local_size, 4);
  EXPECT_EQ(rank_identity_of_environ("PMI_RANK=1\0PMI_SIZE=8\0MPI_LOCALNRANKS=4\0"s).local_size, 4);
}

TEST(RankIdentityTest, ABatchScriptIsNoRank) {
  // sbatch's script has SLURM_PROCID=0 and SLURM_NTASKS, but runs in no step: no task of one.
  const RankIdentity id = rank_identity_of_environ(
      "SLURM_JOB_ID=8\0SLURM_PROCID=0\0SLURM_LOCALID=0\0SLURM_NODEID=0\0SLURM_NTASKS=2\0"s);
  EXPECT_FALSE(id.rank);
  EXPECT_EQ(id.source, "");
}

TEST(RankIdentityTest, OpenMpiAndPmi) {
  const RankIdentity ompi = rank_identity_of_environ(kMpirunRank1);
  EXPECT_EQ(ompi.rank, 1);
  EXPECT_EQ(ompi.world_size, 2);
  EXPECT_EQ(ompi.local_rank, 1);
  EXPECT_EQ(ompi.local_size, 2);
  EXPECT_FALSE(ompi.node_rank) << "OMPI_COMM_WORLD_NODE_RANK is the rank within the node";
  EXPECT_EQ(ompi.source, "openmpi");
  EXPECT_EQ(ompi.job, "mpi=1074659329");

  const RankIdentity pmi = rank_identity_of_environ("PMI_RANK=3\0PMI_SIZE=4\0MPI_LOCALRANKID=1\0"s);
  EXPECT_EQ(pmi.rank, 3);
  EXPECT_EQ(pmi.world_size, 4);
  EXPECT_EQ(pmi.local_rank, 1);
  EXPECT_EQ(pmi.source, "pmi");
}

TEST(RankIdentityTest, ARankWithoutTheJobsSizeIsNoRank) {
  EXPECT_FALSE(rank_identity_of_environ("RANK=3\0"s).rank) << "RANK alone is someone else's variable";
  EXPECT_FALSE(rank_identity_of_environ("OMPI_COMM_WORLD_RANK=3\0"s).rank);
  EXPECT_FALSE(rank_identity_of_environ("PMI_RANK=3\0PMI_SIZE=x\0"s).rank);
  EXPECT_FALSE(rank_identity_of_environ("RANK=-1\0WORLD_SIZE=2\0"s).rank);
  EXPECT_FALSE(rank_identity_of_environ(""s).rank);
}

// torchrun that srun started, one task a node: its ranks carry srun's task number (the node's)
// and torchrun's RANK; RANK is the rank, and the disagreement is said.
TEST(RankIdentityTest, TorchsVariablesWinOverTheLauncherThatStartedTorchrun) {
  const RankIdentity id = rank_identity_of_environ(kSrunTask1 + "RANK=3\0WORLD_SIZE=4\0LOCAL_RANK=1\0"s);
  EXPECT_EQ(id.rank, 3);
  EXPECT_EQ(id.world_size, 4);
  EXPECT_EQ(id.source, "torch");
  ASSERT_EQ(id.notes.size(), 1u);
  EXPECT_EQ(id.notes[0],
            "SLURM_PROCID=1 of SLURM_STEP_NUM_TASKS=2 names another rank than RANK=3 of WORLD_SIZE=4, "
            "which is used: RANK and WORLD_SIZE are what torch.distributed reads, set by the launcher "
            "closest to the process (a torchrun or script that srun started)");
}

// mpirun in a Slurm allocation starts its daemons with srun: its ranks carry that step's task
// number, a node's.
TEST(RankIdentityTest, MpiWinsOverSlurmAndSaysWhy) {
  const RankIdentity id = rank_identity_of_environ(kSrunTask1 +
                                                   "OMPI_COMM_WORLD_RANK=5\0OMPI_COMM_WORLD_SIZE=8\0"s);
  EXPECT_EQ(id.rank, 5);
  EXPECT_EQ(id.source, "openmpi");
  ASSERT_EQ(id.notes.size(), 1u);
  EXPECT_NE(id.notes[0].find("SLURM_PROCID=1 of SLURM_STEP_NUM_TASKS=2 names another rank than "
                             "OMPI_COMM_WORLD_RANK=5 of OMPI_COMM_WORLD_SIZE=8, which is used: mpirun "
                             "in a Slurm allocation starts its daemons with srun"),
            std::string::npos)
      << id.notes[0];
  // Launchers that agree (srun --mpi=pmi2 sets PMI_RANK to SLURM_PROCID) say nothing.
  EXPECT_TRUE(rank_identity_of_environ(kSrunTask1 + "PMI_RANK=1\0PMI_SIZE=2\0"s).notes.empty());
}

TEST(RankIdentityTest, TheJobKeyIsWhatEveryRankShares) {
  EXPECT_EQ(job_key("10.0.0.1:29400 rdzv=abc slurm=7.0"), "rdzv=abc");
  EXPECT_EQ(job_key("10.0.0.1:29400 slurm=7.0 mpi=12"), "slurm=7.0");
  EXPECT_EQ(job_key("mpi=12"), "mpi=12");
  EXPECT_EQ(job_key("10.0.0.1:29400"), "10.0.0.1:29400");
  EXPECT_EQ(job_key(": rdzv=x"), "rdzv=x");
  EXPECT_EQ(job_key(""), "");
}

TEST(RankIdentityTest, ThisProcesssOwnEnvironment) {
  ::setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  const RankIdentity id = rank_identity_of_this_process();
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(id.rank, 2);
  EXPECT_EQ(id.world_size, 4);
  EXPECT_EQ(id.local_rank, 0);
  EXPECT_EQ(id.source, "openmpi");
}

}  // namespace
}  // namespace feedscope
