#pragma once
// A built-in model trained with SGD on feedscope batches. libtorch stays inside trainer.cc: this
// header is torch-free so the rest of the CLI compiles fast.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loader/device_feeder.h"

namespace feedscope {

struct TrainerOptions {
  std::string model = "mlp";  // mlp | cnn
  std::int64_t hidden = 512;
  std::int64_t layers = 2;
  std::int64_t classes = 10;
  double lr = 0.05;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  std::uint64_t seed = 0;
  SampleSpec sample;
  // Threads a step on the CPU may use (torch's intra-op pool and the BLAS library's); 0 leaves
  // libtorch's default, one per core, which spins on the cores the loader's workers need.
  int cpu_threads = 0;
};

// Not thread-safe: one training thread.
class Trainer {
 public:
  virtual ~Trainer() = default;
  // One forward/backward/optimizer step on a batch where the model lives. On a GPU the step's
  // work is ordered after the batch's copy by an event and queued, not waited for: the host runs
  // at most two steps ahead of the device (StepFence). The caller releases the batch after the
  // step (release_after(nullptr)), so its buffer is reused only once the step is done.
  virtual void step(const DeviceBatch& batch) = 0;
  // The loss of the last step. Waits for the device: call it rarely, not every step, and never
  // inside a measured step (the GPU trace would count the wait as a sync of the step's).
  virtual double last_loss() = 0;
  // Waits until the device has finished every step queued so far, by polling (feedscope's own
  // wait, never a host-synchronizing call). A no-op on the CPU. Call it after the measured
  // window, before the GPU trace stops, so the trace holds the last steps' kernels.
  virtual void drain() = 0;
  virtual std::string describe() const = 0;  // "mlp 3072-512-512-10"
  virtual std::int64_t parameters() const = 0;
  virtual std::string device() const = 0;    // "cpu", "cuda:0": always with its index on a GPU
  virtual int cuda_index() const = 0;        // N of cuda:N; -1 on the CPU
  virtual bool on_gpu() const = 0;
  // A CPU step's threads from now on (as TrainerOptions::cpu_threads): a tuned loader that took
  // or gave back a worker leaves the step the cores it left before. A no-op on a GPU.
  virtual void set_step_threads(int threads) = 0;
};

// Throws DeviceError when the device is not usable ("cuda" without a CUDA device or a CUDA
// libtorch), ConfigError-free: options are validated by the config first.
std::unique_ptr<Trainer> make_trainer(const TrainerOptions& options);

// What a step of the model costs on `options.device` at `batch_size`, measured: a fresh copy of
// the model (same options, so the same shapes and parameter count) trains on random inputs that
// are already where it runs, 3 warm-up steps, then `steps` timed steps (or what `budget_s`
// allows) in 5 rounds, each drained at both ends: seconds per step, the median of the rounds'
// (cli/trial_rounds.h). nullopt with the reason in `why_not` when the trial cannot run (the device
// missing, out of memory). For the diagnosis' what-ifs: a bigger batch, the CPU instead of a GPU.
// Changes torch's thread count on the CPU (options.cpu_threads).
std::optional<double> trial_step_seconds(const TrainerOptions& options, std::int64_t batch_size,
                                         int steps, double budget_s, std::string& why_not);

// The libtorch this binary runs with, and whether it can reach a CUDA device.
std::string torch_version();
bool torch_cuda_available();

}  // namespace feedscope
