#include "sampler/rank_identity.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

namespace feedscope {

namespace {

std::optional<int> number_of(const EnvironmentLookup& env, std::string_view key) {
  const auto v = env(key);
  if (!v) return std::nullopt;
  int n = 0;
  const auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || ptr != v->data() + v->size() || n < 0) return std::nullopt;
  return n;
}

// What one launcher's variables say, in the order they are believed (the header says why).
struct Claim {
  const char* source;
  const char* starter;  // the command that sets them, for the notes
  std::string rank_key, world_key;
  std::optional<int> rank, world_size, local_rank, node_rank, local_size;
  bool named() const { return rank.has_value(); }
};

// This node's tasks in Slurm's "4(x2),3" (4 on each of the first two nodes, 3 on the third).
std::optional<int> slurm_tasks_on_node(std::string_view per_node, int node) {
  int first = 0;  // the first node of the item read
  while (!per_node.empty()) {
    const std::size_t comma = per_node.find(',');
    const std::string_view item = per_node.substr(0, comma);
    per_node = comma == std::string_view::npos ? std::string_view() : per_node.substr(comma + 1);
    int tasks = 0, nodes = 1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), tasks);
    if (ec != std::errc()) return std::nullopt;
    const std::string_view rest = item.substr(static_cast<std::size_t>(end - item.data()));
    if (!rest.empty() && (std::sscanf(std::string(rest).c_str(), "(x%d)", &nodes) != 1 || nodes < 1))
      return std::nullopt;
    if (node < first + nodes) return tasks;
    first += nodes;
  }
  return std::nullopt;
}

Claim torch_claim(const EnvironmentLookup& env) {
  Claim c{"torch", "torchrun", "RANK", "WORLD_SIZE", {}, {}, {}, {}, {}};
  // RANK alone is someone else's variable; with WORLD_SIZE set, torch.distributed's.
  if (env("WORLD_SIZE")) c.rank = number_of(env, "RANK");
  c.world_size = number_of(env, "WORLD_SIZE");
  c.local_rank = number_of(env, "LOCAL_RANK");
  c.node_rank = number_of(env, "GROUP_RANK");
  if (!c.node_rank) c.node_rank = number_of(env, "NODE_RANK");
  c.local_size = number_of(env, "LOCAL_WORLD_SIZE");
  return c;
}

// An MPI launcher's four variables: the rank (believed with the world size), the local rank and
// the ranks on this node.
Claim mpi_claim(const EnvironmentLookup& env, const char* source, const char* starter, const char* rank_key,
                const char* world_key, const char* local_rank_key, const char* local_size_key) {
  Claim c{source, starter, rank_key, world_key, {}, {}, {}, {}, {}};
  c.world_size = number_of(env, c.world_key);
  if (c.world_size) c.rank = number_of(env, c.rank_key);
  c.local_rank = number_of(env, local_rank_key);
  c.local_size = number_of(env, local_size_key);
  return c;
}

Claim openmpi_claim(const EnvironmentLookup& env) {
  return mpi_claim(env, "openmpi", "mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                   "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE");
}

Claim pmi_claim(const EnvironmentLookup& env) {
  return mpi_claim(env, "pmi", "mpiexec", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
}

Claim slurm_claim(const EnvironmentLookup& env) {
  Claim c{"slurm", "srun", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", {}, {}, {}, {}, {}};
  // A task of an srun step; a batch script has SLURM_PROCID and SLURM_NTASKS but no step.
  if (!env("SLURM_STEP_ID") && !env("SLURM_STEPID")) return c;
  c.world_size = number_of(env, c.world_key);
  if (!c.world_size) {
    c.world_key = "SLURM_NTASKS";
    c.world_size = number_of(env, c.world_key);
  }
  if (c.world_size) c.rank = number_of(env, c.rank_key);
  c.local_rank = number_of(env, "SLURM_LOCALID");
  c.node_rank = number_of(env, "SLURM_NODEID");
  auto per_node = env("SLURM_STEP_TASKS_PER_NODE");
  if (!per_node) per_node = env("SLURM_TASKS_PER_NODE");
  if (per_node) c.local_size = slurm_tasks_on_node(*per_node, c.node_rank.value_or(0));
  return c;
}

std::string said(const Claim& c) {
  std::string out = c.rank_key + "=" + std::to_string(*c.rank);
  if (c.world_size) out += " of " + c.world_key + "=" + std::to_string(*c.world_size);
  return out;
}

// Why `used` is believed over `other`, which names another rank or size.
std::string why_used(const Claim& used, const Claim& other) {
  if (std::string_view(used.source) == "torch")
    return std::string("RANK and WORLD_SIZE are what torch.distributed reads, set by the launcher "
                       "closest to the process (a torchrun or script that ") +
           other.starter + " started)";
  if (std::string_view(other.source) == "slurm")
    return std::string(used.starter) + " in a Slurm allocation starts its daemons with srun, one "
                                       "task per node: SLURM_PROCID numbers the nodes, not the ranks";
  return std::string(used.source) + "'s variables come before " + other.source + "'s";
}

std::string job_of(const EnvironmentLookup& env) {
  std::string job;
  const auto addr = env("MASTER_ADDR"), port = env("MASTER_PORT"), run_id = env("TORCHELASTIC_RUN_ID");
  if (addr || port || run_id)
    job = std::string(addr.value_or("")) + ":" + std::string(port.value_or(""));
  if (run_id) job += " rdzv=" + std::string(*run_id);
  const auto slurm_job = env("SLURM_JOB_ID");
  auto slurm_step = env("SLURM_STEP_ID");
  if (!slurm_step) slurm_step = env("SLURM_STEPID");
  if (slurm_job && slurm_step)
    job += std::string(job.empty() ? "" : " ") + "slurm=" + std::string(*slurm_job) + "." +
           std::string(*slurm_step);
  auto mpi = env("PMIX_NAMESPACE");
  if (!mpi) mpi = env("OMPI_MCA_ess_base_jobid");
  if (mpi) job += std::string(job.empty() ? "" : " ") + "mpi=" + std::string(*mpi);
  return job;
}

}  // namespace

RankIdentity rank_identity(const EnvironmentLookup& env) {
  RankIdentity id;
  const Claim claims[] = {torch_claim(env), openmpi_claim(env), pmi_claim(env), slurm_claim(env)};
  const Claim* used = nullptr;
  for (const Claim& c : claims)
    if (c.named() && used == nullptr) used = &c;
  const Claim& from = used ? *used : claims[0];  // no launcher: torch's LOCAL_RANK, GROUP_RANK
  id.rank = from.rank;
  id.world_size = from.world_size;
  id.local_rank = from.local_rank;
  id.local_size = from.local_size;
  id.node_rank = from.node_rank;
  if (used) id.source = used->source;
  id.master = env("MASTER_ADDR").has_value() || env("MASTER_PORT").has_value();
  id.job = job_of(env);
  if (!used) return id;
  for (const Claim& c : claims)
    if (&c != used && c.named() && (c.rank != used->rank || c.world_size != used->world_size))
      id.notes.push_back(said(c) + " names another rank than " + said(*used) + ", which is used: " +
                         why_used(*used, c));
  return id;
}

RankIdentity rank_identity_of_environ(std::string_view environ) {
  std::unordered_map<std::string_view, std::string_view> vars;
  std::size_t start = 0;
  while (start < environ.size()) {
    std::size_t end = environ.find('\0', start);
    if (end == std::string_view::npos) end = environ.size();
    const std::string_view entry = environ.substr(start, end - start);
    start = end + 1;
    const std::size_t eq = entry.find('=');
    if (eq != std::string_view::npos && eq > 0) vars.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return rank_identity([&vars](std::string_view key) -> std::optional<std::string_view> {
    const auto it = vars.find(key);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

RankIdentity rank_identity_of_this_process() {
  return rank_identity([](std::string_view key) -> std::optional<std::string_view> {
    const char* v = std::getenv(std::string(key).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string_view(v);
  });
}

std::string job_key(std::string_view job) {
  for (const std::string_view token : {"rdzv=", "slurm=", "mpi="}) {
    const std::size_t at = job.find(token);
    if (at == std::string_view::npos || (at > 0 && job[at - 1] != ' ')) continue;
    const std::size_t end = job.find(' ', at);
    return std::string(job.substr(at, end == std::string_view::npos ? job.size() - at : end - at));
  }
  const std::size_t space = job.find(' ');
  return std::string(job.substr(0, space));
}

}  // namespace feedscope
