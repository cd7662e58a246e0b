#pragma once
// Loader worker churn: a DataLoader without persistent_workers starts its worker processes again
// at every epoch, and the training thread waits for each new set's first batch (the fork, the
// workers' own start-up: imports, worker_init_fn, the dataset's files, then the batch). Short
// epochs make that wait most of the loop's (pytorch/examples' imagenet on an H200, 2026-11-28:
// waiting 72-77 % with its workers half idle). Counted from the process tree's readings: the
// generations of workers seen start, and the looks at the training thread (sampler/thread_wait.h)
// from each generation's start while they found it blocked, less what the loop waits anyway: a
// loop its workers cannot keep up with waits most of the time, start-up or not (tests/corpus's
// imagefolder-j1 waits 80 % at every reading; its workers restart in 10 ms).
#include <cstddef>
#include <optional>
#include <vector>

#include "sampler/utilization_sample.h"

namespace feedscope {

struct WorkerChurn {
  int generations = 0;      // sets of loader workers started together (an epoch's each)
  int workers_started = 0;  // loader worker processes seen start
  double first_start_s = 0;  // the first generation's start, seconds after the first reading
  double span_s = 0;         // from it to the last reading
  // The training thread's wait for a generation's first batch beyond its steady wait (the share of
  // time it waits once the workers run): the first generation's (which persistent workers pay
  // too), and the later ones' summed, with how many were measured. Not measured (null, 0) where the
  // loop was never seen outside a start-up, which leaves no steady wait to tell it from.
  std::optional<double> first_startup_s;
  double restart_wait_s = 0;
  int restarts_measured = 0;
  std::optional<double> steady_wait_share;
  // Its whole wait on the loader while workers were alive, from the same looks, and how many looks.
  double wait_s = 0;
  std::size_t looks = 0;
};

// New workers belong to the generation still alive: a DataLoader's iterator forks its workers one
// after another, and the tree is walked at most twice a second (sampler/utilization_sampler.h), so a
// set may be seen over two readings 0.6 s apart; a new set starts once the last one's workers all
// ended (an iterator's workers are joined before the next epoch's are forked).
// One parent's loader workers over the readings. Not thread-safe: the digest calls it under its
// lock.
class WorkerChurnTracker {
 public:
  // A reading at `t_s`, `dt_s` after the previous one: this parent's loader workers alive, how many
  // of them were seen for the first time, and the looks at its training thread since the previous
  // reading (null: not looked at).
  void add(double t_s, double dt_s, int alive, int started, const MainThreadWaits* looks);
  // None where no worker was seen start.
  std::optional<WorkerChurn> summary() const;

 private:
  // A generation's start-up, as the looks saw it: the readings from its start while they found the
  // thread blocked (kBlocked of the looks or more), and the one in which that ended.
  struct Startup {
    double blocked_s = 0;       // the readings' time
    double blocked_wait_s = 0;  // of it, the thread's wait
    double end_s = 0;           // the reading that ended it: its time and wait share
    double end_share = 0;
    bool ended = false;
  };

  WorkerChurn churn_;
  std::vector<Startup> startups_;  // one per generation
  double generation_start_s_ = 0;
  double last_s_ = 0;
  // The readings outside every start-up: the loop's steady wait.
  double steady_s_ = 0;
  double steady_wait_s_ = 0;
};

}  // namespace feedscope
