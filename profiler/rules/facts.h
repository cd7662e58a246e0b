#pragma once
// What the rules derive from the evidence, computed once per diagnosis so that no two rules
// derive the same figure two ways: the loop's per-batch costs and the loader's capacity, the
// cores a watched program holds and could use.
#include <optional>
#include <string>

#include "loader/stage.h"
#include "profiler/evidence.h"

namespace feedscope {

// Per-batch costs, in seconds, that the what-if model composes.
struct Costs {
  double worker = 0;  // read+decode+transform+collate per batch, one thread
  double step = 0;    // training step per batch
  double submit = 0;  // the training thread's copy submission per batch (h2d_submit)
  // The loop's time per batch beyond its step span (the wait, the submission, its bookkeeping),
  // and the same without the submission: what a change to the step or the copy leaves as it was.
  double outside = 0;
  double other = 0;
};

// The loader's work over the window, in seconds of one core, and where it was measured: the
// loader's stage spans where feedscope loads (`feedscope run`), else the CPU its worker processes
// took (a wrapped loop over a PyTorch DataLoader with workers, sampled as this process's
// children). Nothing where neither was measured: a wrapped loop that loads in its own thread, or
// in threads feedscope cannot tell apart.
struct LoaderWork {
  double busy_s = 0;
  bool measured = false;
  bool from_processes = false;
};

// What the loop's spans give every loop rule.
struct LoopFacts {
  double wall = 0;  // the spans' window, never 0
  double wait = 0;  // the loop's wait for batches, seconds
  double stall = 0;  // wait / wall, in 0..1: the data stall
  double measured = 0;  // samples/s
  LoaderWork loader;
  Costs c;
  double load_s = 0;             // the loader's busy seconds
  double h2d_s = 0;              // the copy stream's busy seconds
  double worker_capacity_s = 0;  // the workers' seconds together (one for num_workers=0)
  double cpu_saturation = 0;     // the process's CPU share of the machine
  // A GPU trace of measured steps, on a GPU; none otherwise (a trace with no measured step says
  // nothing about the step).
  const GpuTraceSummary* gpu = nullptr;
  double submit_share = 0;            // copy submission / wall
  // The GPU's work per step (device_s_per_step) fills kGpuBusyCompute of the loop's time per
  // batch or more: the device sets the pace, whatever the training thread does beside it.
  bool gpu_paces_loop = false;
  // Submission takes kH2dStepShare of the run or more, and the GPU does not set the pace.
  bool copies_on_the_thread = false;
  bool input_side = false;            // input-bound (or loader-only), not copy-bound
  double loader_rate = 0;  // samples/s the loader sustains at its current workers, step free
};

// What the machine's cores hold: the program's processes together, the cores nobody used, and the
// program's threads that were ready to run but found no core (schedstat's run-queue wait).
struct CpuBudget {
  double idle_cores = 0;
  double program_cores = 0;  // trainer (all threads), loader workers, other descendants
  double system_busy = 0;
  double queued_cores = 0;   // the training thread's and the workers' run-queue wait, in cores
  // Idle cores the program could use: where its threads waited for a core, the idle time came at
  // other moments (an epoch's end, start-up), and a new worker would wait like them.
  double usable_idle() const;
  bool full() const;
  // How far the program could grow before the machine is full: every usable idle core given to it.
  double growth() const;
};

// What the process tree gives every rule that reads a program from outside.
struct TreeFacts {
  CpuBudget cpu;
  bool traced = false;    // a CUDA trace with kernels
  double spinning = 0;    // the main thread's busy share spent spinning in CUDA syncs
  double working = 0;     // its busy share less that
  bool trainer_pinned = false;
  bool workers_busy = false;
  double io_wait = 0;     // the loaders' (workers', else the main thread's) share in I/O wait
  bool storage = false;   // in I/O wait while reading from storage
  // The data stall measured from outside: the share of the looks at the training thread that found
  // it blocked on its loader workers' queue (kMinQueueLooks or more); none otherwise.
  std::optional<double> queue_stall;
  // The loop's share of time not waiting for data where queue_stall measured it, else the main
  // thread's working share: how much faster the loop could go if batches came at once is 1/this.
  double not_waiting = 0;
  // How many times today's rate the loader workers can carry (1 / their demand of a core); 0
  // where there are none: a faster loop waits for them.
  double loader_pace = 0;
};

// What the tree's memory readings give the memory rules (processes with a MemoryTrend).
struct MemoryFacts {
  std::vector<const WatchedProcess*> workers;  // loader workers whose rate was measured
  // Processes whose private memory grew steadily, kMemoryGrowthBytesPerS and kMemoryGrowthBytes or
  // more: any role; and of those, the loader workers whose shared memory fell as it grew.
  std::vector<const WatchedProcess*> growing;
  std::vector<const WatchedProcess*> copying;
  // The copying workers' mean rates times the workers alive at once: the tree's copy per second.
  double copy_private_bytes_per_s = 0;
  double copy_shared_bytes_per_s = 0;
  const WatchedProcess* trainer = nullptr;  // with its memory read
  std::optional<double> headroom_bytes;     // MemAvailable at the last reading
};

struct Facts {
  const Evidence& e;
  std::optional<LoopFacts> loop;
  std::optional<TreeFacts> tree;
  std::optional<MemoryFacts> memory;  // with the tree's smaps_rollup readings
};

Facts facts_of(const Evidence& e);

// Batches per second the pipeline sustains with `workers` loader threads. Workers overlap with
// the step; with none, loading and stepping alternate in one thread. On the CPU the step and the
// workers share the cores, so their summed CPU time per batch bounds the rate too.
double predicted_batches_per_s(const Costs& c, int workers, double cpus, bool on_gpu);

// A stage's busy seconds and mean seconds in the loop's spans; 0 where it has none.
double busy(const LoopSpans& in, Stage stage);
double mean_s(const LoopSpans& in, Stage stage);

// The mean of a utilization series, where the sampler recorded it.
std::optional<double> series_mean(const Utilization& u, const char* name);

// Whether the process's private memory grew steadily by the kMemoryGrowth* thresholds.
bool memory_grows(const WatchedProcess& p);

// What a worker would take of a core it had to itself: its busy share and the time it was ready to
// run but waited for a core (a worker on a full machine reads 60 % busy and 40 % waiting).
double worker_demand(const ProcessTreeSummary& t);

// The share of the window the host spent blocked in syncs. CUDA's default schedule spins in a
// synchronize while cores are plentiful, so a thread waiting in .item() reads as busy in /proc.
double sync_share(const GpuTraceSummary& g);

// The device's own work, a share of the steps: busy less the time NCCL's collectives ran alone
// (a rank waiting for the others is not computing); with several devices, the busiest one's.
double gpu_work_share(const GpuTraceSummary& g);
// Of several devices, the busiest and the idlest; null with one.
const GpuTraceSummary::DeviceBusy* busiest_device(const GpuTraceSummary& g);
const GpuTraceSummary::DeviceBusy* idlest_device(const GpuTraceSummary& g);

// The steps' kernels come mostly from CUDA graph replays, or half or more are Triton's (named
// triton_*: torch.compile's code). Driver-API launches alone say nothing: cuBLAS makes them in
// any loop (2 a step of a plain MLP on an H200).
bool graphed(const GpuTraceSummary& g);
bool compiled(const GpuTraceSummary& g);
// The host's time in kernel launch calls, a share of the steps: what a CUDA graph could save.
double launch_host_share(const GpuTraceSummary& g);

// The syncs that are no input copy's (`.to(device)`'s): .item(), .cpu(), a synchronize.
double other_syncs_per_step(const GpuTraceSummary& g);
double other_sync_wait_s(const GpuTraceSummary& g);

// "cudaStreamSynchronize 500, cudaMemcpy 3": the calls behind the syncs, most first.
std::string syncs_by_call(const GpuTraceSummary& g);

}  // namespace feedscope
