#include "loader/batch_loader.h"
#include "loader/detail/autotune_probe.h"
#include "loader/detail/tsan.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <tbb/concurrent_queue.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include "pinned_memory/host_allocator.h"

namespace feedscope {

namespace {
constexpr std::size_t kLabelAlign = 64;

std::size_t align_up(std::size_t value, std::size_t align) {
  return (value + align - 1) / align * align;
}

std::string percent(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g%%", ratio * 100.0);
  return text;
}
}  // namespace

void DataErrorLog::add(std::uint64_t attempted, std::vector<BadSample>& bad) {
  std::lock_guard lock(mutex_);
  errors_.attempted += attempted;
  errors_.bad += bad.size();
  for (BadSample& b : bad) {
    if (errors_.examples.size() >= max_examples_) break;
    // A bad file fails again every epoch; the examples should show different ones.
    const bool known = std::any_of(errors_.examples.begin(), errors_.examples.end(),
                                   [&](const BadSample& e) { return e.index == b.index && e.source == b.source; });
    if (!known) errors_.examples.push_back(std::move(b));
  }
  bad.clear();
}

DataErrors DataErrorLog::snapshot() const {
  std::lock_guard lock(mutex_);
  return errors_;
}

struct BatchLoader::Impl {
  // One in-flight batch. Indexed by its slab's id: a slab carries at most one batch at a time.
  struct Job {
    std::int64_t batch = -1;
    std::uint64_t epoch = 0;
    std::uint64_t generation = 0;  // the Schedule it belongs to
    // Its Schedule's plan, kept alive while the job loads: a job of an abandoned epoch may still
    // be reading it after begin_epoch() has moved on.
    std::shared_ptr<const std::vector<std::size_t>> plan;
    const std::size_t* indexes = nullptr;  // its samples, `count` of them, within *plan
    std::size_t count = 0;
    std::size_t attempted = 0;  // loads tried
    std::size_t filled = 0;     // samples written, bad ones left out
    Slab slab;
    std::exception_ptr error;
    std::vector<BadSample> bad;  // this job's bad samples, moved to the log on delivery
    // Stream mode: the stream's seq-th batch of the epoch; `end`: the stream ran out in it.
    std::size_t stream = 0;
    std::int64_t seq = 0;
    bool end = false;
    // Its slowest sample's load: when the consumer waits for this batch, the part of the wait
    // in this span is the wait for that one sample.
    std::int64_t slowest_begin_ns = 0;
    std::int64_t slowest_end_ns = 0;
  };

  std::shared_ptr<const DataSource> source;  // the one below that is set
  std::shared_ptr<const Dataset> dataset;    // index mode
  std::shared_ptr<const IndexSampler> sampler;
  std::shared_ptr<const ShardedDataset> sharded;  // stream mode
  ShardPlan plan;
  LoaderOptions options;
  SpanRegistry* spans;
  std::size_t sample_bytes;
  std::size_t labels_offset;
  std::shared_ptr<PinnedPool> pool;
  int initial_slabs = 0;  // the pool's size at start (sized for capacity().most), before growth
  std::vector<Job> jobs;

  LoaderCapacity capacity;
  std::unique_ptr<tbb::global_control> parallelism;
  std::unique_ptr<tbb::task_arena> arena;
  tbb::task_group group;
  bool timed = false;  // workers time their loads for the tuner; set before any starts
  // Below state is shared with worker threads.
  tbb::concurrent_bounded_queue<int> done;  // slab ids of finished jobs
  std::atomic<bool> stopping{false};
  std::atomic<std::int64_t> worker_busy_ns{0};  // wall time in loads, with `timed`
  std::atomic<std::int64_t> worker_cpu_ns{0};
  std::atomic<std::int64_t> worker_queued_ns{0};
  // Index mode's workers are runners: each takes the jobs in `pending` in order until none is
  // left or more runners run than `target_runners` (the worker count, which may change while
  // they run). Under `runners_mutex`.
  std::mutex runners_mutex;
  std::deque<int> pending;
  int runners = 0;
  int target_runners = 0;

  // kAuto: what next() measures and the tuner that reads it. Consumer-thread state.
  struct Tuning {
    AutoTuner tuner;
    detail::WaitWindow window;
    detail::IdleCoreMeter meter;
    std::function<std::optional<double>()> idle_cores;
    std::int64_t (*clock)() noexcept;
    std::int64_t busy_mark = 0;  // worker_*_ns at the window's start
    std::int64_t cpu_mark = 0;
    std::int64_t queued_mark = 0;
  };
  std::unique_ptr<Tuning> tuning;

  // One epoch's batches: its sample order, and how far scheduling and delivery have got.
  struct Schedule {
    std::uint64_t generation = 0;  // unique per Schedule: tells a job of an abandoned one apart
    std::uint64_t epoch = 0;
    std::shared_ptr<const std::vector<std::size_t>> plan;  // sample indexes, in order
    std::int64_t batches = 0;
    std::int64_t next_schedule = 0;
    std::int64_t next_deliver = 0;
    std::map<std::int64_t, int> ready;  // finished batches not yet delivered: batch -> job id
  };

  // Consumer-thread state.
  Schedule current;
  // With prefetch_next_epoch: epoch + 1, started once every batch of `current` is scheduled, so
  // the workers do not idle through the end of an epoch; begin_epoch(epoch + 1) adopts it, any
  // other epoch drops it.
  std::optional<Schedule> ahead;
  std::uint64_t generations = 0;
  int in_flight = 0;  // jobs of either Schedule, and of abandoned ones still finishing
  std::unique_ptr<DataErrorLog> errors;
  std::unique_ptr<SampleCostRecorder> costs;
  std::int64_t wait_begin_ns = 0;  // next()'s start while it may wait for a worker; 0 otherwise
  std::exception_ptr over_ratio;  // sticky BadDataError: the data is beyond tolerance for good

  // Stream mode: one per worker, rebuilt by each epoch (after drain(), so no task holds one).
  struct Stream {
    std::unique_ptr<SampleStream> reader;  // used by the task running this stream's jobs only
    // Below state is shared with worker threads, under `mutex`: the jobs waiting for the
    // stream's task, and whether one is running (it takes them in turn, so never two at once).
    std::mutex mutex;
    std::deque<int> queue;
    bool running = false;
    // Consumer-thread state.
    std::int64_t next_schedule = 0;
    std::int64_t next_deliver = 0;
    int in_flight = 0;
    bool end_seen = false;  // a finished job ran out: schedule no more
    bool finished = false;  // its last batch is delivered
    std::map<std::int64_t, int> ready;  // seq -> job id
  };
  std::vector<std::unique_ptr<Stream>> streams;
  std::size_t turn = 0;          // the stream whose batch is delivered next
  std::int64_t delivered = 0;    // batches of the epoch delivered, for Batch::index
  std::int64_t stream_jobs = 0;  // jobs of the epoch scheduled, for their spans' batch number

  // Returns whether the job goes on after this bad sample.
  bool bad_sample(Job& job, const SampleError& error, std::exception_ptr thrown) {
    job.bad.push_back(BadSample{error.index(), error.source(), error.what()});
    if (options.bad_sample == BadSamplePolicy::skip) return true;
    job.error = std::move(thrown);
    return false;
  }

  // One sample's load time, into the worker's recording and the job's slowest.
  void timed_sample(Job& job, int worker, std::size_t index, std::int64_t begin, std::int64_t end) noexcept {
    costs->record(worker, index, end - begin);
    if (end - begin > job.slowest_end_ns - job.slowest_begin_ns) {
      job.slowest_begin_ns = begin;
      job.slowest_end_ns = end;
    }
  }

  void fill(Job& job, LoadContext& ctx) {
    const std::span<std::byte> slab = job.slab.bytes();
    auto* labels = reinterpret_cast<std::int64_t*>(slab.data() + labels_offset);
    std::size_t filled = 0;
    for (std::size_t i = 0; i < job.count; ++i) {
      if (stopping.load(std::memory_order_relaxed)) return;
      const std::size_t index = job.indexes[i];
      job.attempted = i + 1;
      try {
        const std::int64_t begin = options.record_sample_costs ? now_ns() : 0;
        // A bad sample's slot is overwritten by the next good one: the batch stays compact.
        labels[filled] =
            dataset->load(index, slab.subspan(filled * sample_bytes, sample_bytes), ctx);
        ++filled;
        if (options.record_sample_costs) timed_sample(job, ctx.worker, index, begin, now_ns());
      } catch (const SampleError& e) {
        if (!bad_sample(job, e, std::current_exception())) break;
      } catch (const std::exception& e) {
        SampleError wrapped(index, dataset->describe(index), e.what());
        if (!bad_sample(job, wrapped, std::make_exception_ptr(wrapped))) break;
      }
    }
    job.filled = filled;
  }

  void fill_stream(Job& job, SampleStream& reader, LoadContext& ctx) {
    const std::span<std::byte> slab = job.slab.bytes();
    auto* labels = reinterpret_cast<std::int64_t*>(slab.data() + labels_offset);
    const auto batch = static_cast<std::size_t>(options.batch_size);
    std::size_t filled = 0;
    while (filled < batch) {
      if (stopping.load(std::memory_order_relaxed)) break;
      ++job.attempted;
      try {
        const std::int64_t begin = options.record_sample_costs ? now_ns() : 0;
        const std::optional<std::int64_t> label =
            reader.next(slab.subspan(filled * sample_bytes, sample_bytes), ctx);
        if (!label) {
          --job.attempted;
          job.end = true;
          break;
        }
        labels[filled++] = *label;
        if (options.record_sample_costs)
          timed_sample(job, ctx.worker, SampleCostRecorder::kNoIndex, begin, now_ns());
      } catch (const SampleError& e) {
        if (!bad_sample(job, e, std::current_exception())) break;
      } catch (const std::exception& e) {
        SampleError wrapped(job.attempted - 1, source->name(), e.what());
        if (!bad_sample(job, wrapped, std::make_exception_ptr(wrapped))) break;
      }
    }
    // DataLoader's drop_last over an IterableDataset: each worker's last partial batch.
    if (job.end && options.drop_last && filled < batch) filled = 0;
    job.filled = filled;
  }

  void open_streams(std::uint64_t epoch) {
    const std::size_t n = static_cast<std::size_t>(std::max(1, options.num_workers));
    streams.clear();
    for (std::size_t w = 0; w < n; ++w) {
      auto stream = std::make_unique<Stream>();
      stream->reader = sharded->open_stream(stream_shards(sharded->shard_count(), plan, w, n, epoch), plan, w, epoch);
      streams.push_back(std::move(stream));
    }
    turn = 0;
    delivered = 0;
    stream_jobs = 0;
  }

  void prepare_stream(Job& job, Slab slab, std::size_t stream) {
    Stream& st = *streams[stream];
    job.batch = stream_jobs++;
    job.epoch = current.epoch;
    job.generation = current.generation;
    job.plan.reset();
    job.indexes = nullptr;
    job.count = static_cast<std::size_t>(options.batch_size);
    job.attempted = 0;
    job.filled = 0;
    job.slab = std::move(slab);
    job.error = nullptr;
    job.bad.clear();
    job.stream = stream;
    job.seq = st.next_schedule++;
    job.end = false;
    job.slowest_begin_ns = job.slowest_end_ns = 0;
  }

  // Runs the stream's queued jobs one after another until none is left.
  void run_stream(Stream& st) {
    detail::tsan_acquire(this);  // the enqueue inside libtbb orders the Stream's making before this
    for (;;) {
      int id = -1;
      {
        std::unique_lock lock(st.mutex);
        if (st.queue.empty()) {
          st.running = false;
          lock.unlock();
          detail::tsan_release(this);  // drain()'s group.wait() orders this before the Stream's end
          return;
        }
        id = st.queue.front();
        st.queue.pop_front();
      }
      detail::tsan_acquire(this);
      Job& j = jobs[static_cast<std::size_t>(id)];
      LoadContext ctx{spans, LaneRole::worker, j.batch,
                      std::max(0, tbb::this_task_arena::current_thread_index()), j.epoch};
      timed_load([&] { fill_stream(j, *st.reader, ctx); });
      detail::tsan_release(this);
      done.push(id);
    }
  }

  void schedule_stream(Slab slab, std::size_t stream) {
    const int id = slab.id();
    prepare_stream(jobs[static_cast<std::size_t>(id)], std::move(slab), stream);
    Stream& st = *streams[stream];
    ++st.in_flight;
    ++in_flight;
    detail::tsan_release(this);
    bool start = false;
    {
      const std::lock_guard lock(st.mutex);
      st.queue.push_back(id);
      start = !st.running;
      st.running = true;
    }
    if (start) enqueue([this, &st] { run_stream(st); });
  }

  void top_up_streams() {
    for (bool more = true; more;) {
      more = false;
      for (std::size_t k = 0; k < streams.size(); ++k) {
        const std::size_t w = (turn + k) % streams.size();
        Stream& st = *streams[w];
        if (st.end_seen || st.finished || st.in_flight >= options.prefetch) continue;
        Slab slab = acquire_slab();
        if (!slab) return;
        schedule_stream(std::move(slab), w);
        more = true;
      }
    }
  }

  void finished_stream(int id) {
    Job& job = jobs[static_cast<std::size_t>(id)];
    if (job.generation != current.generation) {
      job.slab.reset();
      return;
    }
    Stream& st = *streams[job.stream];
    --st.in_flight;
    if (job.end) st.end_seen = true;
    if (st.finished) {
      job.slab.reset();
      return;
    }
    st.ready.emplace(job.seq, id);
  }

  // `wait` false: nullopt where the next batch is not collated yet.
  std::optional<Batch> next_stream(bool wait) {
    if (options.num_workers == 0) {
      if (!wait) return std::nullopt;
      Stream& st = *streams[0];
      while (!st.finished) {
        Slab slab = acquire_slab();
        if (!slab) throw_exhausted();
        const int id = slab.id();
        Job& job = jobs[static_cast<std::size_t>(id)];
        prepare_stream(job, std::move(slab), 0);
        LoadContext ctx{spans, LaneRole::training, job.batch, 0, job.epoch};
        fill_stream(job, *st.reader, ctx);
        st.finished = job.end;
        if (std::optional<Batch> batch = deliver(id)) {
          batch->index = delivered++;
          return batch;
        }
      }
      return std::nullopt;
    }
    top_up_streams();
    for (;;) {
      std::size_t k = 0;
      while (k < streams.size() && streams[(turn + k) % streams.size()]->finished) ++k;
      if (k == streams.size()) return std::nullopt;
      turn = (turn + k) % streams.size();
      Stream& st = *streams[turn];
      if (auto it = st.ready.find(st.next_deliver); it != st.ready.end()) {
        const int id = it->second;
        st.ready.erase(it);
        ++st.next_deliver;
        if (jobs[static_cast<std::size_t>(id)].end) {
          st.finished = true;
          for (auto& [seq, later] : st.ready) jobs[static_cast<std::size_t>(later)].slab.reset();
          st.ready.clear();
        }
        turn = (turn + 1) % streams.size();
        std::optional<Batch> batch = deliver(id);
        top_up_streams();
        if (batch) {
          batch->index = delivered++;
          return batch;
        }
        continue;
      }
      if (in_flight == 0) {
        top_up_streams();
        if (in_flight == 0) {
          if (!wait) return std::nullopt;
          throw_exhausted();
        }
      }
      int id = -1;
      if (!take_done(wait, id)) return std::nullopt;
      --in_flight;
      finished_stream(id);
    }
  }

  Schedule make_schedule(std::uint64_t epoch) {
    Schedule s;
    s.generation = ++generations;
    s.epoch = epoch;
    s.plan = std::make_shared<const std::vector<std::size_t>>(sampler->epoch_indices(epoch));
    const std::size_t samples = s.plan->size();
    const auto batch = static_cast<std::size_t>(options.batch_size);
    s.batches = static_cast<std::int64_t>(options.drop_last ? samples / batch
                                                            : (samples + batch - 1) / batch);
    return s;
  }

  void prepare(Job& job, Slab slab, Schedule& from) {
    job.batch = from.next_schedule++;
    job.epoch = from.epoch;
    job.generation = from.generation;
    const std::size_t begin =
        static_cast<std::size_t>(job.batch) * static_cast<std::size_t>(options.batch_size);
    job.plan = from.plan;
    job.indexes = from.plan->data() + begin;
    job.count = std::min(from.plan->size() - begin, static_cast<std::size_t>(options.batch_size));
    job.attempted = 0;
    job.filled = 0;
    job.slab = std::move(slab);
    job.error = nullptr;
    job.bad.clear();
    job.slowest_begin_ns = job.slowest_end_ns = 0;
  }

  // A worker's load of one job, timed for the tuner under kAuto.
  template <typename Load>
  void timed_load(Load&& load) {
    if (!timed) return load();
    const std::int64_t wall = now_ns(), cpu = detail::thread_cpu_ns();
    const std::int64_t queued = detail::thread_queued_ns();
    load();
    worker_queued_ns.fetch_add(detail::thread_queued_ns() - queued, std::memory_order_relaxed);
    worker_cpu_ns.fetch_add(detail::thread_cpu_ns() - cpu, std::memory_order_relaxed);
    worker_busy_ns.fetch_add(now_ns() - wall, std::memory_order_relaxed);
  }

  void schedule(Slab slab, Schedule& from) {
    const int id = slab.id();
    Job& job = jobs[static_cast<std::size_t>(id)];
    prepare(job, std::move(slab), from);
    ++in_flight;
    bool start = false;
    {
      const std::lock_guard lock(runners_mutex);
      pending.push_back(id);
      if (runners < target_runners) start = (++runners, true);
    }
    if (start) start_runner();
  }

  void start_runner() {
    detail::tsan_release(this);  // the enqueue inside libtbb orders what came before the task
    enqueue([this] { run_jobs(); });
  }

  // Hands fn to a worker of the arena. Enqueued, not run() from inside the arena: oneTBB
  // guarantees a worker only for enqueued work. A task_group::run() from this thread lands in its
  // own slot's pool, and a worker that misses the wake-up leaves it there while next() blocks on
  // `done` (oneTBB issues 738 and 1684; the likely cause of one TSan ctest run that hung here).
  // The group still counts it for drain(). The task object holding fn's captures is written here
  // and read on the worker before fn can say anything, so the edge is drawn on an address both
  // sides know without reading the task (a TSan CI run saw the worker's read of `this`).
  template <typename Fn>
  void enqueue(Fn fn) {
    auto task = group.defer([fn = std::move(fn)] {
      detail::tsan_acquire(&detail::tsan_task_handoff);
      fn();
    });
    detail::tsan_release(&detail::tsan_task_handoff);
    arena->enqueue(std::move(task));
  }

  // One worker: loads pending jobs in order until none is left or it is one too many.
  void run_jobs() {
    detail::tsan_acquire(this);
    for (;;) {
      int id = -1;
      {
        const std::lock_guard lock(runners_mutex);
        if (pending.empty() || runners > target_runners) {
          --runners;
          return;
        }
        id = pending.front();
        pending.pop_front();
      }
      Job& j = jobs[static_cast<std::size_t>(id)];
      LoadContext ctx{spans, LaneRole::worker, j.batch,
                      std::max(0, tbb::this_task_arena::current_thread_index()), j.epoch};
      timed_load([&] { fill(j, ctx); });
      detail::tsan_release(this);
      done.push(id);
    }
  }

  // Index mode: `workers` runners from now on; the ones too many stop after their current job.
  void set_runners(int workers) {
    int start = 0;
    {
      const std::lock_guard lock(runners_mutex);
      target_runners = workers;
      start = std::max(0, std::min(static_cast<int>(pending.size()), workers - runners));
      runners += start;
    }
    for (int i = 0; i < start; ++i) start_runner();
  }

  // A new setting: index mode's runners follow at once, stream mode's stream count at the next
  // epoch; the in-flight bound (workers x prefetch) with the next top-up.
  void apply(LoaderSetting to) {
    options.num_workers = to.num_workers;
    options.prefetch = to.prefetch;
    if (!sharded) set_runners(to.num_workers);
  }

  void start_tuning() {
    const AutoTuneOptions& o = options.autotune;
    std::int64_t (*clock)() noexcept = o.clock ? o.clock : &now_ns;
    const std::int64_t now = clock();
    tuning = std::make_unique<Tuning>(Tuning{AutoTuner(capacity.tuner, capacity.start, now), {}, {},
                                             o.idle_cores, clock});
    tuning->window.reset(now);
    if (!tuning->idle_cores) tuning->meter.read();  // the first reading is the baseline
    timed = true;
  }

  // kAuto: one delivered batch and the time the consumer waited for it; at a window's end, the
  // tuner's turn.
  void tuned_batch(std::int64_t wait_begin, std::int64_t now) {
    Tuning& t = *tuning;
    t.window.add(now - wait_begin);
    if (now - t.window.begin_ns() < t.tuner.window_ns() || t.window.batches() < t.tuner.min_batches())
      return;
    const std::int64_t busy = worker_busy_ns.load(std::memory_order_relaxed);
    const std::int64_t cpu = worker_cpu_ns.load(std::memory_order_relaxed);
    const std::int64_t queued = worker_queued_ns.load(std::memory_order_relaxed);
    const std::optional<double> idle = t.idle_cores ? t.idle_cores() : t.meter.read();
    const detail::WorkerTimes workers{static_cast<double>(busy - t.busy_mark) / 1e9,
                                      static_cast<double>(cpu - t.cpu_mark) / 1e9,
                                      static_cast<double>(queued - t.queued_mark) / 1e9};
    const TunerWindow w = t.window.close(now, workers, idle);
    t.busy_mark = busy;
    t.cpu_mark = cpu;
    t.queued_mark = queued;
    t.window.reset(now);
    const LoaderSetting to = t.tuner.observe(w);
    if (!(to == LoaderSetting{options.num_workers, options.prefetch})) apply(to);
  }

  // The Schedule the next job comes from: the current epoch's until all of it is scheduled,
  // then the next epoch's; null when both are.
  Schedule* next_to_schedule() {
    if (current.next_schedule < current.batches) return &current;
    if (!options.prefetch_next_epoch) return nullptr;
    if (!ahead) ahead = make_schedule(current.epoch + 1);
    return ahead->next_schedule < ahead->batches ? &*ahead : nullptr;
  }

  void top_up() {
    const int max_in_flight = options.num_workers * options.prefetch;
    while (in_flight < max_in_flight) {
      Schedule* from = next_to_schedule();
      if (!from) break;
      Slab slab = acquire_slab();
      if (!slab) break;
      schedule(std::move(slab), *from);
    }
  }

  // A finished job: ready for delivery, or dropped if its epoch was abandoned meanwhile.
  void finished(int id) {
    Job& job = jobs[static_cast<std::size_t>(id)];
    if (job.generation == current.generation) {
      current.ready.emplace(job.batch, id);
    } else if (ahead && job.generation == ahead->generation) {
      ahead->ready.emplace(job.batch, id);
    } else {
      job.slab.reset();
    }
  }

  static void release_ready(Schedule& schedule, std::vector<Job>& jobs) {
    for (auto& [batch, id] : schedule.ready) jobs[static_cast<std::size_t>(id)].slab.reset();
    schedule.ready.clear();
  }

  // A finished job's id from `done`: waits for one, or with `wait` false, false when none is.
  bool take_done(bool wait, int& id) {
    if (wait) {
      done.pop(id);
    } else if (!done.try_pop(id)) {
      return false;
    }
    detail::tsan_acquire(this);
    return true;
  }

  // Waits for every in-flight job and drops its result.
  void drain() {
    stopping.store(true);
    while (in_flight > 0) {
      int id = -1;
      done.pop(id);
      detail::tsan_acquire(this);
      jobs[static_cast<std::size_t>(id)].slab.reset();
      --in_flight;
    }
    if (arena) arena->execute([this] { group.wait(); });
    detail::tsan_acquire(this);
    release_ready(current, jobs);
    if (ahead) release_ready(*ahead, jobs);
    for (auto& st : streams) {
      for (auto& [seq, id] : st->ready) jobs[static_cast<std::size_t>(id)].slab.reset();
      st->ready.clear();
      st->in_flight = 0;
    }
    ahead.reset();
    stopping.store(false);
  }

  // Accounts the job's bad samples, then hands out its batch; nullopt when skipping left it empty.
  std::optional<Batch> deliver(int id) {
    Job& job = jobs[static_cast<std::size_t>(id)];
    if (wait_begin_ns != 0) {
      const std::int64_t now = now_ns();
      const std::int64_t on_slowest = std::min(now, job.slowest_end_ns) -
                                      std::max(wait_begin_ns, job.slowest_begin_ns);
      costs->add_wait(now - wait_begin_ns, std::max<std::int64_t>(0, on_slowest));
      wait_begin_ns = 0;
    }
    const bool had_bad = !job.bad.empty();
    errors->add(job.attempted, job.bad);
    if (job.error) {
      std::exception_ptr error = job.error;
      job.error = nullptr;
      job.slab.reset();
      std::rethrow_exception(error);
    }
    if (had_bad && !over_ratio) check_ratio();
    if (over_ratio) {
      job.slab.reset();
      std::rethrow_exception(over_ratio);
    }
    if (job.filled == 0) {
      job.slab.reset();
      return std::nullopt;
    }
    Batch batch;
    batch.index = job.batch;
    batch.epoch = job.epoch;
    batch.size = static_cast<std::int64_t>(job.filled);
    batch.data = job.slab.data();
    batch.labels = reinterpret_cast<std::int64_t*>(job.slab.data() + labels_offset);
    batch.slab = std::move(job.slab);
    return batch;
  }

  // Only a new bad sample can push the ratio up, so this runs only when one arrived.
  void check_ratio() {
    DataErrors e = errors->snapshot();
    const double budget = options.max_bad_ratio *
                          static_cast<double>(std::max<std::uint64_t>(e.attempted, options.bad_ratio_floor));
    if (static_cast<double>(e.bad) <= budget) return;
    std::string what = "bad data: " + std::to_string(e.bad) + " of " + std::to_string(e.attempted) +
                       " samples failed to load (" + percent(e.ratio()) +
                       "), over max_bad_ratio " + percent(options.max_bad_ratio);
    if (e.attempted < options.bad_ratio_floor)
      what += " of the first " + std::to_string(options.bad_ratio_floor) + " samples";
    if (!e.examples.empty()) what += "; first: " + e.examples.front().message;
    over_ratio = std::make_exception_ptr(BadDataError(what, std::move(e)));
  }

  // Batches delivered and still alive in the caller's hands (or its device copies).
  int held_by_caller() const {
    std::size_t ready = current.ready.size() + (ahead ? ahead->ready.size() : 0);
    for (const auto& st : streams) ready += st->ready.size();
    return pool->slabs_in_use() - in_flight - static_cast<int>(ready);
  }

  // A free slab, or an empty one. Where the caller holds more batches than the spare slabs, the
  // pool grows (up to max_extra_slabs) rather than take slabs from the workers' prefetch.
  Slab acquire_slab() {
    Slab slab = pool->try_acquire();
    if (!slab && held_by_caller() > options.spare_slabs && pool->grow()) slab = pool->try_acquire();
    return slab;
  }

  [[noreturn]] void throw_exhausted() const {
    const int grown = pool->slab_count() - initial_slabs;
    throw LoaderError("all " + std::to_string(pool->slab_count()) +
                      " batch slabs are held by batches still alive in the training loop" +
                      (grown > 0 ? " (the pool grew by " + std::to_string(grown) + ", its most)"
                                 : std::string()) +
                      "; a slab returns to the pool when its batch (and any tensor viewing it) "
                      "is freed: clone() batches you keep, or raise prefetch");
  }
};

std::size_t slab_labels_offset(std::size_t sample_bytes, int batch_size) {
  return align_up(sample_bytes * static_cast<std::size_t>(batch_size), kLabelAlign);
}

std::size_t slab_bytes(std::size_t sample_bytes, int batch_size) {
  return slab_labels_offset(sample_bytes, batch_size) +
         sizeof(std::int64_t) * static_cast<std::size_t>(batch_size);
}

int slab_count(const LoaderOptions& options) {
  return std::max(1, options.num_workers * options.prefetch) + std::max(1, options.spare_slabs);
}

namespace {

void check_options(const LoaderOptions& options) {
  if (options.num_workers < 0 && options.num_workers != kAuto)
    throw std::invalid_argument("num_workers: " + std::to_string(options.num_workers) +
                                " is negative; allowed: 0 (load in the training thread) or more, "
                                "or kAuto");
  if (options.batch_size <= 0)
    throw std::invalid_argument("batch_size: " + std::to_string(options.batch_size) +
                                " is not allowed; allowed: 1 or more");
  if (options.prefetch <= 0 && options.prefetch != kAuto)
    throw std::invalid_argument("prefetch: " + std::to_string(options.prefetch) +
                                " is not allowed; allowed: 1 or more, or kAuto");
  if (options.max_extra_slabs < 0)
    throw std::invalid_argument("max_extra_slabs: " + std::to_string(options.max_extra_slabs) +
                                " is negative; allowed: 0 or more");
  if (!(options.max_bad_ratio >= 0.0 && options.max_bad_ratio <= 1.0))
    throw std::invalid_argument("max_bad_ratio: " + std::to_string(options.max_bad_ratio) +
                                " is not allowed; allowed: 0 to 1");
}

}  // namespace

void BatchLoader::start(LoaderOptions options, SpanRegistry* spans) {
  if (options.spare_slabs < 1) options.spare_slabs = 1;
  Impl& s = *impl_;
  s.spans = spans;
  s.errors = std::make_unique<DataErrorLog>(options.error_examples);
  s.sample_bytes = s.source->spec().bytes();
  s.labels_offset = slab_labels_offset(s.sample_bytes, options.batch_size);
  const std::size_t slab = slab_bytes(s.sample_bytes, options.batch_size);
  const bool wants_machine = options.num_workers == kAuto || options.prefetch == kAuto;
  const MachineShape machine{detail::usable_cores(),
                             wants_machine ? detail::available_memory_bytes().value_or(0) : 0};
  s.capacity = resolve_capacity(options.num_workers, options.prefetch, options.spare_slabs,
                                options.autotune, PinnedPool::rounded_slab_bytes(slab), machine,
                                s.sharded != nullptr);
  options.num_workers = s.capacity.start.num_workers;
  options.prefetch = s.capacity.start.prefetch;
  s.options = options;
  LoaderOptions most = options;
  most.num_workers = s.capacity.most.num_workers;
  most.prefetch = s.capacity.most.prefetch;
  const int slabs = slab_count(most);
  s.initial_slabs = slabs;
  s.pool = PinnedPool::create(slab, slabs,
                              options.pin_memory ? make_pinned_allocator() : make_page_allocator(),
                              slabs + options.max_extra_slabs);
  // A job per slab the pool may ever have: growth never moves a Job a worker is filling.
  s.jobs.resize(static_cast<std::size_t>(s.pool->max_slab_count()));
  if (most.num_workers > 0) {
    // One slot stays reserved for the consumer thread that submits work; the rest are workers.
    // The default TBB market caps workers at cores-1, so ask for as many as configured.
    s.parallelism = std::make_unique<tbb::global_control>(
        tbb::global_control::max_allowed_parallelism,
        static_cast<std::size_t>(most.num_workers) + 1);
    s.arena = std::make_unique<tbb::task_arena>(most.num_workers + 1, 1);
  }
  // One recording per arena slot (the workers' and the submitting thread's); slot 0 at 0 workers.
  s.costs = std::make_unique<SampleCostRecorder>(most.num_workers + 1);
  s.target_runners = options.num_workers;
  if (s.capacity.tuned) s.start_tuning();
  begin_epoch(0);
}

BatchLoader::BatchLoader(std::shared_ptr<const Dataset> dataset,
                         std::shared_ptr<const IndexSampler> sampler, LoaderOptions options,
                         SpanRegistry* spans)
    : impl_(std::make_unique<Impl>()) {
  if (!dataset) throw std::invalid_argument("loader: no dataset");
  if (!sampler) throw std::invalid_argument("loader: no index sampler");
  check_options(options);
  impl_->source = dataset;
  impl_->dataset = std::move(dataset);
  impl_->sampler = std::move(sampler);
  start(options, spans);
}

BatchLoader::BatchLoader(std::shared_ptr<const ShardedDataset> dataset, ShardPlan plan,
                         LoaderOptions options, SpanRegistry* spans)
    : impl_(std::make_unique<Impl>()) {
  if (!dataset) throw std::invalid_argument("loader: no dataset");
  check_options(options);
  if (plan.world_size < 1 || plan.rank >= plan.world_size)
    throw std::invalid_argument("rank: " + std::to_string(plan.rank) + " is not below world_size " +
                                std::to_string(plan.world_size));
  impl_->source = dataset;
  impl_->sharded = std::move(dataset);
  impl_->plan = plan;
  start(options, spans);
}

BatchLoader::~BatchLoader() {
  impl_->drain();
  if (impl_->arena) impl_->arena->terminate();
}

void BatchLoader::begin_epoch(std::uint64_t epoch) {
  Impl& s = *impl_;
  if (s.ahead && s.ahead->epoch == epoch) {
    // The workers started this epoch already. What is left of the current one is dropped: its
    // ready batches now, its jobs still loading as they finish (finished() no longer knows them).
    Impl::release_ready(s.current, s.jobs);
    s.current = std::move(*s.ahead);
    s.ahead.reset();
    return;
  }
  s.drain();
  if (s.sharded) {
    s.current = Impl::Schedule{};
    s.current.generation = ++s.generations;
    s.current.epoch = epoch;
    s.open_streams(epoch);
    return;
  }
  s.current = s.make_schedule(epoch);
}

std::optional<Batch> BatchLoader::next() {
  Impl& s = *impl_;
  if (!s.tuning) return next_batch(true);
  const std::int64_t begin = s.tuning->clock();
  std::optional<Batch> batch = next_batch(true);
  if (batch) s.tuned_batch(begin, s.tuning->clock());
  return batch;
}

std::optional<Batch> BatchLoader::try_next() {
  Impl& s = *impl_;
  std::optional<Batch> batch = next_batch(false);
  // A batch taken without a wait is one the consumer did not wait for: the tuner counts it so.
  if (batch && s.tuning) {
    const std::int64_t now = s.tuning->clock();
    s.tuned_batch(now, now);
  }
  return batch;
}

std::optional<Batch> BatchLoader::next_batch(bool wait) {
  Impl& s = *impl_;
  if (s.over_ratio) std::rethrow_exception(s.over_ratio);
  // Loading in this thread is no wait for a worker.
  s.wait_begin_ns = wait && s.options.num_workers > 0 ? now_ns() : 0;
  if (s.sharded) return s.next_stream(wait);

  if (s.options.num_workers == 0) {
    if (!wait) return std::nullopt;
    while (s.current.next_deliver < s.current.batches) {
      Slab slab = s.acquire_slab();
      if (!slab) s.throw_exhausted();
      const int id = slab.id();
      s.current.next_schedule = s.current.next_deliver;
      Impl::Job& job = s.jobs[static_cast<std::size_t>(id)];
      s.prepare(job, std::move(slab), s.current);
      LoadContext ctx{s.spans, LaneRole::training, job.batch, 0, job.epoch};
      s.fill(job, ctx);
      ++s.current.next_deliver;
      if (std::optional<Batch> batch = s.deliver(id)) return batch;
    }
    return std::nullopt;
  }

  s.top_up();
  Impl::Schedule& current = s.current;  // stays the same object: only begin_epoch() replaces it
  for (;;) {
    if (current.next_deliver >= current.batches) return std::nullopt;
    auto it = s.options.in_order ? current.ready.find(current.next_deliver) : current.ready.begin();
    if (it != current.ready.end()) {
      const int id = it->second;
      current.ready.erase(it);
      ++current.next_deliver;
      std::optional<Batch> batch = s.deliver(id);
      s.top_up();
      if (batch) return batch;
      continue;
    }
    if (s.in_flight == 0) {
      // Nothing is loading and nothing is ready, so every slab is held by the caller: waiting
      // would never end.
      s.top_up();
      if (s.in_flight == 0) {
        if (!wait) return std::nullopt;
        s.throw_exhausted();
      }
    }
    int id = -1;
    if (!s.take_done(wait, id)) return std::nullopt;
    --s.in_flight;
    s.finished(id);
  }
}

std::size_t BatchLoader::batches_per_epoch() const {
  return static_cast<std::size_t>(impl_->current.batches);
}
std::string BatchLoader::empty_epoch_reason() const {
  const Impl& s = *impl_;
  if (s.sharded) {
    const std::size_t shards = s.sharded->shard_count();
    if (s.plan.rank < shards) return "";
    return "rank " + std::to_string(s.plan.rank) + " of " + std::to_string(s.plan.world_size) +
           " gets no shard: " + s.sharded->name() + " has " + std::to_string(shards) +
           " shard(s), and shards are split over ranks";
  }
  if (s.current.batches > 0) return "";
  const std::size_t size = s.dataset->size();
  std::string why = "no batch of batch_size " + std::to_string(s.options.batch_size) +
                    " in an epoch: ";
  const std::size_t share = s.current.plan ? s.current.plan->size() : 0;
  why += share == size ? "the dataset holds " + std::to_string(size) + " samples"
                       : "the sampler's share is " + std::to_string(share) +
                                     " of the dataset's " + std::to_string(size) + " samples";
  if (s.options.drop_last && share > 0) why += ", and drop_last drops a partial batch";
  return why;
}
LoaderSetting BatchLoader::setting() const {
  return {impl_->options.num_workers, impl_->options.prefetch};
}
const LoaderCapacity& BatchLoader::capacity() const { return impl_->capacity; }

void BatchLoader::set_setting(LoaderSetting to) {
  Impl& s = *impl_;
  if (s.tuning)
    throw LoaderError("set_setting: this loader tunes its own setting (num_workers or prefetch is kAuto)");
  const LoaderSetting most = s.capacity.most;
  if (to.num_workers < 1 || to.num_workers > most.num_workers)
    throw std::invalid_argument("num_workers: " + std::to_string(to.num_workers) +
                                " is out of this loader's bounds; allowed: 1 to " +
                                std::to_string(most.num_workers) + " (autotune.max_workers)");
  if (to.prefetch < 1 || to.num_workers * to.prefetch > most.num_workers * most.prefetch)
    throw std::invalid_argument("prefetch: " + std::to_string(to.prefetch) + " at " +
                                std::to_string(to.num_workers) + " workers is out of this "
                                "loader's slabs; allowed: 1 to " +
                                std::to_string(most.num_workers * most.prefetch / to.num_workers));
  s.apply(to);
  if (!s.sharded) s.top_up();
}

const std::vector<TunerMove>& BatchLoader::autotune_moves() const {
  static const std::vector<TunerMove> none;
  return impl_->tuning ? impl_->tuning->tuner.moves() : none;
}
bool BatchLoader::autotuned() const { return impl_->tuning != nullptr; }
std::int64_t BatchLoader::autotune_start_ns() const {
  return impl_->tuning ? impl_->tuning->tuner.start_ns() : 0;
}
int BatchLoader::batches_in_flight() const { return impl_->in_flight; }
int BatchLoader::batches_ready() const {
  const Impl& s = *impl_;
  std::size_t ready = s.current.ready.size() + (s.ahead ? s.ahead->ready.size() : 0);
  for (const auto& stream : s.streams) ready += stream->ready.size();
  return static_cast<int>(ready);
}
const LoaderOptions& BatchLoader::options() const { return impl_->options; }
const DataSource& BatchLoader::dataset() const { return *impl_->source; }
const PinnedPool& BatchLoader::pool() const { return *impl_->pool; }
std::shared_ptr<const PinnedPool> BatchLoader::shared_pool() const { return impl_->pool; }
DataErrors BatchLoader::data_errors() const { return impl_->errors->snapshot(); }
SampleCostSnapshot BatchLoader::sample_costs(bool name_files) const {
  SampleCostSnapshot out = impl_->costs->snapshot();
  if (impl_->dataset && name_files)
    for (SlowSampleCost& s : out.slowest) s.file = impl_->dataset->sample_file(s.index);
  return out;
}
std::size_t BatchLoader::labels_offset() const { return impl_->labels_offset; }

}  // namespace feedscope
