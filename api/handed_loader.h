#pragma once
// feedscope's loader handed out batch by batch, the one core of feedscope.DataLoader (Python,
// through the C ABI: python/loader_api.cc) and feedscope::Loader (C++, include/feedscope/loader.h):
// the dataset and the BatchLoader that `feedscope run` builds from the same keys
// (cli/dataset_setup.h), or a dataset the caller gives; each batch as two DLPack tensors that view
// its slab (or, on a GPU, the copy engine's device buffer); the loader's stage spans forwarded to a
// Session that wraps it. Tests drive it directly, on a simulated device.
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cli/config.h"
#include "loader/batch_loader.h"
#include "loader/span_recorder.h"
#include "pinned_memory/copy_engine.h"
#include "api/detail/dlpack.h"

namespace feedscope {
class Session;
namespace detail {
class CudaOps;
}
}  // namespace feedscope

namespace feedscope {

// Where a wrapped loader's spans go: a Session's span registry, for as long as the session records.
// Shared by the session's C handle and every loader attached to it; close() (the session finishing
// or being freed) turns every later forward into nothing. Thread-safe.
class SpanSink {
 public:
  explicit SpanSink(Session* session) : session_(session) {}
  // Re-records `spans` (of `lanes`, the loader's registry's) in the session's registry: worker and
  // copy lanes on lanes of their own there, training-lane spans on the calling thread's lane, which
  // is the loop's (the thread that iterates the loader is the one the session times).
  void forward(const std::vector<Span>& spans, const std::vector<LaneInfo>& lanes);
  // A loader at num_workers=auto: its moves so far, timed from start_ns (Session::set_autotune).
  void forward_autotune(const AutotuneSummary& autotune, std::int64_t start_ns);
  // The loader's per-sample costs so far (Session::set_sample_costs).
  void forward_samples(SampleCosts samples);
  void close();

 private:
  struct Target {
    SpanRing* ring = nullptr;
    std::uint16_t lane = 0;
  };
  std::mutex mutex_;
  Session* session_;            // null once closed
  std::vector<Target> targets_;  // by the loader's lane id
};

// The loader's options: run's keys, and those that exist only here.
struct HandedLoaderOptions {
  RunConfig config;  // dataset, batch_size, num_workers, image_pipeline, ... device
  // The caller's own dataset (a torch dataset, feedscope::Loader's): config.dataset is then only
  // its name. Null: the dataset config.dataset names.
  std::shared_ptr<const DataSource> dataset;
  // Who set the options, for messages: "(from feedscope.DataLoader)".
  std::string source = "feedscope.DataLoader";
  // Unset: pinned slabs when the batches go to a GPU, pageable ones otherwise. Set on with no GPU:
  // pageable slabs, and HandedLoader::pin_memory_note() says why.
  std::optional<bool> pin_memory;
  // Batches the loop may keep alive at once (a list of the last N) before the loader slows: the
  // pool (and, on a GPU, the device buffers) grow to make room, up to this; past it next() fails.
  int max_held_batches = 16;
  detail::CudaOps* cuda = nullptr;  // tests: a simulated device; null: the CUDA runtime
};

// Reads the options JSON of feedscope_loader_create (and of feedscope::Loader's options): run's keys
// (image_pipeline as "pipeline"), pin_memory and max_held_batches. A JSON null leaves the default.
// Throws ConfigError naming the key, the value, what is allowed and `source`, in run's words;
// `dataset` may be missing only where the caller gives its own dataset (need_dataset false).
HandedLoaderOptions parse_loader_options(const std::string& json,
                                         const std::string& source = "feedscope.DataLoader",
                                         bool need_dataset = true);

// One delivered batch: DLPack tensors of its samples and labels, each owned by whoever takes it
// (torch's from_dlpack, or dlpack_delete). The images view the batch's slab, which returns to the
// pool once they are deleted; on the host the labels are a copy of their own (a loop that keeps
// labels keeps no slab), on a GPU they share the device buffer with the images.
struct HandedBatch {
  std::int64_t index = -1;
  std::uint64_t epoch = 0;
  std::int64_t size = 0;
  dlpack::DLManagedTensor* images = nullptr;
  dlpack::DLManagedTensor* labels = nullptr;
};

// Not thread-safe for the loop's calls (begin_epoch, next, attach): the C ABI serializes them. The
// tensors it hands out may be deleted on any thread, also after the HandedLoader is gone.
class HandedLoader {
 public:
  // Opens the dataset and starts the workers on epoch 0. Throws ConfigError (a bad key or value),
  // DatasetError (a dataset that cannot be opened), DeviceError (no such GPU).
  explicit HandedLoader(HandedLoaderOptions options);
  ~HandedLoader();
  HandedLoader(const HandedLoader&) = delete;
  HandedLoader& operator=(const HandedLoader&) = delete;

  // Starts `epoch`, dropping what is left of the current one; the epoch the workers are already
  // loading (the first, or the next one they started ahead) is kept.
  void begin_epoch(std::uint64_t epoch);
  // The next batch of the epoch; false at its end. Waits for this batch only, never for the one
  // after. `stream`: where the batch goes to a GPU, the stream the batch is taken on (a
  // cudaStream_t, null: the legacy default; Python passes torch's current stream at the call):
  // its later work waits for the copy. The device buffer is reused only after the work queued by
  // the time the tensors die on that stream and on the legacy default stream (a batch taken on a
  // side stream and read on the default one, once it waited for the side stream). Work on a third
  // stream is ordered by neither. Rethrows the loader's SampleError and BadDataError; LoaderError
  // when the loop holds every slab the bound allows.
  bool next(void* stream, HandedBatch& out);
  // The session the spans go to from now on (null: none). Spans recorded before are dropped.
  void attach(std::shared_ptr<SpanSink> sink);

  // What Python shows: samples, classes, batches_per_epoch, sample shape and dtype, device, ...
  nlohmann::json describe() const;
  nlohmann::json data_errors() const;
  // Each sample's load time so far: report.json's `samples` object.
  nlohmann::json sample_costs();
  // num_workers/prefetch "auto": {"num_workers", "prefetch": where it runs now, "autotune": the
  // report's autotune object, "lines": the console lines of the moves judged since the last call};
  // null for a loader at fixed settings.
  nlohmann::json autotune();
  int slabs() const { return loader_->pool().slab_count(); }
  int device_buffers() const;
  // Why pin_memory=True was not honoured (no GPU), or empty.
  const std::string& pin_memory_note() const { return pin_note_; }

 private:
  struct DeviceSide;
  struct Ahead;
  Ahead to_device(Batch batch);  // under the DeviceSide's lock
  void check_buffers() const;   // under the DeviceSide's lock
  void look_ahead();
  void record_copies();  // under the DeviceSide's lock
  void drop_ahead();
  void export_batch(Ahead batch, void* stream, HandedBatch& out);
  void forward_spans();
  void forward_autotune();
  // Every kSamplesEvery batches, at an epoch's end and on attach: often enough that a session
  // finishing at any moment reports nearly all of the run.
  void forward_samples();
  SampleCosts costs();
  static constexpr std::int64_t kSamplesEvery = 64;

  HandedLoaderOptions options_;
  std::string pin_note_;
  int device_ = -1;  // the GPU batches go to; -1: they stay on the host
  SpanRegistry spans_;
  std::shared_ptr<const DataSource> dataset_;
  std::unique_ptr<BatchLoader> loader_;
  std::shared_ptr<DeviceSide> device_side_;  // also held by every device batch alive
  SpanRing* copy_ring_ = nullptr;
  std::uint16_t copy_lane_ = 0;
  std::vector<CopyTiming> timings_;
  std::shared_ptr<SpanSink> sink_;
  std::vector<Span> drained_;
  // num_workers=auto: what the session was last told (the moves, whether the last one is judged,
  // the setting), and the console lines handed to Python so far.
  using TunedState = std::tuple<std::size_t, bool, LoaderSetting>;
  std::optional<TunedState> session_told_;
  std::size_t lines_told_ = 0;
  std::int64_t batches_since_samples_ = 0;
  std::map<std::size_t, SampleFile> named_;  // the slowest files, each probed once
  // The epoch being delivered, and whether any of it was asked for: a fresh one (the workers
  // loading it already) need not be started again.
  std::uint64_t epoch_ = 0;
  bool started_ = false;
  // On a GPU, one batch is copied ahead of the one the loop holds, where it was collated by the
  // time the loop took the one before (never waited for) and its copy would not block the host;
  // else it is taken, or its copy started, by the next call. An error met taking it waits for the
  // call after, so that it is not blamed on the batch delivered now.
  std::unique_ptr<Ahead> ahead_;
  std::optional<Batch> held_back_;  // collated, its copy not started
  bool epoch_done_ = false;
  std::exception_ptr pending_error_;
};

// Deletes a tensor torch never took (a capsule that was not consumed).
void dlpack_delete(dlpack::DLManagedTensor* tensor) noexcept;

}  // namespace feedscope
