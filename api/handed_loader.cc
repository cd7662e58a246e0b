#include "api/handed_loader.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli/dataset_setup.h"
#include "exporters/autotune_report.h"
#include "exporters/json_report.h"
#include "exporters/session_access.h"
#include "loader/image_folder_dataset.h"
#include "loader/sharded_dataset.h"
#include "profiler/slow_samples.h"
#include "pinned_memory/detail/cuda_ops.h"
#include "pinned_memory/device_probe.h"
#include "pinned_memory/errors.h"

namespace feedscope {

// --- SpanSink -----------------------------------------------------------------------------------

void SpanSink::forward(const std::vector<Span>& spans, const std::vector<LaneInfo>& lanes) {
  const std::lock_guard lock(mutex_);
  if (session_ == nullptr || session_->finished()) return;
  SpanRegistry& registry = SessionAccess::spans(*session_);
  for (const Span& span : spans) {
    const LaneRole role = lanes.at(span.lane).role;
    if (role == LaneRole::training) {
      registry.record(role, span.stage, span.batch, span.begin_ns, span.end_ns);
      continue;
    }
    if (targets_.size() <= span.lane) targets_.resize(span.lane + std::size_t{1});
    Target& target = targets_[span.lane];
    if (target.ring == nullptr) target.ring = &registry.add_lane(role, &target.lane);
    Span moved = span;
    moved.lane = target.lane;
    target.ring->push(moved);
  }
}

void SpanSink::forward_autotune(const AutotuneSummary& autotune, std::int64_t start_ns) {
  const std::lock_guard lock(mutex_);
  if (session_ != nullptr && !session_->finished()) SessionAccess::set_autotune(*session_, autotune, start_ns);
}

void SpanSink::forward_samples(SampleCosts samples) {
  const std::lock_guard lock(mutex_);
  if (session_ != nullptr && !session_->finished()) SessionAccess::set_sample_costs(*session_, std::move(samples));
}

void SpanSink::close() {
  const std::lock_guard lock(mutex_);
  session_ = nullptr;
}

// --- Options ------------------------------------------------------------------------------------

namespace {

// feedscope.DataLoader's keys that are run's, and run's name for each.
constexpr std::array<std::pair<std::string_view, std::string_view>, 21> kRunKeys = {{
    {"dataset", "dataset"},
    {"batch_size", "batch_size"},
    {"num_workers", "num_workers"},
    {"pipeline", "image_pipeline"},
    {"image_size", "image_size"},
    {"shuffle", "shuffle"},
    {"seed", "seed"},
    {"drop_last", "drop_last"},
    {"prefetch", "prefetch"},
    {"device", "device"},
    {"rank", "rank"},
    {"world_size", "world_size"},
    {"bad_sample", "bad_sample"},
    {"max_bad_ratio", "max_bad_ratio"},
    {"reduced_decode", "reduced_decode"},
    {"shuffle_buffer", "shuffle_buffer"},
    {"label_key", "label_key"},
    {"classes", "classes"},
    {"synthetic_samples", "synthetic_samples"},
    {"max_workers", "max_workers"},
    {"ram_budget_mib", "ram_budget_mib"},
}};

std::string allowed_options() {
  std::string out;
  for (const auto& [name, run_name] : kRunKeys) out += std::string(name) + ", ";
  return out + "pin_memory, max_held_batches";
}

// A JSON value as run's config reads it from YAML: true/false as on/off, numbers as written.
std::string config_text(std::string_view key, const nlohmann::json& value, const std::string& source) {
  if (value.is_boolean()) return value.get<bool>() ? "on" : "off";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number()) return value.dump();
  throw ConfigError(std::string(key), std::string(key) + ": " + value.dump() + " (from " + source +
                                          ") is not a single value");
}

void set_run_key(RunConfig& config, std::string_view key, std::string_view run_key,
                 const nlohmann::json& value, const std::string& source) {
  try {
    set_config_value(config, run_key, config_text(key, value, source), source);
  } catch (const ConfigError& e) {
    if (key == run_key) throw;
    // Named as the caller wrote it: "pipeline: 'x' ...", not run's "image_pipeline: 'x' ...".
    std::string message = e.what();
    if (message.rfind(std::string(run_key), 0) == 0) message.replace(0, run_key.size(), key);
    throw ConfigError(std::string(key), message);
  }
}

int take_max_held(const nlohmann::json& value, const std::string& source) {
  constexpr int kMost = 4096;
  if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
      value.get<std::int64_t>() > kMost)
    throw ConfigError("max_held_batches", "max_held_batches: " + value.dump() + " (from " +
                                              source + ") is not allowed; allowed: 0 to " +
                                              std::to_string(kMost));
  return value.get<int>();
}

}  // namespace

HandedLoaderOptions parse_loader_options(const std::string& text, const std::string& source,
                                         bool need_dataset) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw ConfigError("", source + " options: not a JSON object: " + text);
  HandedLoaderOptions o;
  o.source = source;
  o.config.device = "cpu";
  bool has_dataset = false;
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) continue;
    if (key == "pin_memory") {
      if (!value.is_boolean())
        throw ConfigError(key, "pin_memory: " + value.dump() + " (from " + source +
                                   ") is not on/off; allowed: " +
                                   (source.starts_with("feedscope.") ? "True | False" : "true | false"));
      o.pin_memory = value.get<bool>();
      continue;
    }
    if (key == "max_held_batches") {
      o.max_held_batches = take_max_held(value, source);
      continue;
    }
    const auto it = std::find_if(kRunKeys.begin(), kRunKeys.end(),
                                 [&](const auto& k) { return k.first == key; });
    if (it == kRunKeys.end())
      throw ConfigError(key, "unknown option '" + key + "' (from " + source +
                                 "); allowed: " + allowed_options());
    set_run_key(o.config, it->first, it->second, value, source);
    has_dataset |= key == "dataset";
  }
  if (!has_dataset && need_dataset)
    throw ConfigError("dataset", "dataset: missing (from " + source +
                                     "); allowed: images:DIR | webdataset:PATTERN | tfrecord:PATTERN | "
                                     "records:DIR | synthetic:SHAPE");
  resolve_placement(o.config);  // rank below world_size, $RANK and $WORLD_SIZE well formed
  return o;
}

// --- Tensors ------------------------------------------------------------------------------------

// The engine and its lock: the loop submits copies, and a device tensor's deleter releases its
// buffer from whatever thread drops the tensor, also after the HandedLoader is gone.
struct HandedLoader::DeviceSide {
  std::mutex mutex;
  std::unique_ptr<CopyEngine> engine;
};

// A batch fetched and (on a GPU) its copy queued, not yet handed out.
struct HandedLoader::Ahead {
  Batch host;        // the slab on the host path; index, epoch and size on both
  DeviceCopy copy;   // the device path
};

namespace {

// What both tensors of one batch share; the memory goes back when the last of them is deleted.
struct BatchMemory {
  Batch host;
  DeviceCopy copy;
  std::shared_ptr<void> side_lock_owner;  // keeps the DeviceSide (its engine and mutex) alive
  std::mutex* side_mutex = nullptr;
  void* stream = nullptr;  // the torch stream current when it was handed out
  ~BatchMemory() {
    if (!copy) return;
    const std::lock_guard lock(*side_mutex);
    // Taken on a side stream, a batch may be read on the default one (a prefetcher: `with
    // torch.cuda.stream(side): x = next(it)`, then main.wait_stream(side)): the buffer is reused
    // after the work queued by now on both, each waited for by the copy alone.
    copy.release_after(stream, nullptr);
  }
};

constexpr int kMaxDims = 8;

struct Tensor {
  dlpack::DLManagedTensor managed{};
  std::array<std::int64_t, kMaxDims> shape{};
  std::array<std::int64_t, kMaxDims> strides{};
  std::shared_ptr<void> memory;  // a BatchMemory, or a host batch's own copy of its labels
};

void delete_tensor(dlpack::DLManagedTensor* managed) {
  delete static_cast<Tensor*>(managed->manager_ctx);
}

dlpack::DLDataType dl_type(DType dtype) {
  return dtype == DType::uint8 ? dlpack::DLDataType{dlpack::kDLUInt, 8, 1}
                               : dlpack::DLDataType{dlpack::kDLFloat, 32, 1};
}

// A compact tensor of `shape` at `data`, owned by `memory`.
dlpack::DLManagedTensor* make_tensor(std::shared_ptr<void> memory, void* data,
                                     const std::vector<std::int64_t>& shape,
                                     dlpack::DLDataType type, dlpack::DLDevice device) {
  auto t = std::make_unique<Tensor>();
  const auto ndim = static_cast<int>(shape.size());
  std::int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    t->shape[static_cast<std::size_t>(d)] = shape[static_cast<std::size_t>(d)];
    t->strides[static_cast<std::size_t>(d)] = stride;
    stride *= shape[static_cast<std::size_t>(d)];
  }
  t->memory = std::move(memory);
  dlpack::DLTensor& dl = t->managed.dl_tensor;
  dl.data = data;
  dl.device = device;
  dl.ndim = ndim;
  dl.dtype = type;
  dl.shape = t->shape.data();
  dl.strides = t->strides.data();
  dl.byte_offset = 0;
  t->managed.manager_ctx = t.get();
  t->managed.deleter = &delete_tensor;
  return &t.release()->managed;
}

// The GPU a device name means, -1 for the host. Throws DeviceError naming the key and the reason.
int resolve_device(const std::string& device, const std::string& source, detail::CudaOps& cuda) {
  if (device == "cpu") return -1;
  const char* why = nullptr;
  const int count = cuda.device_count(&why);
  if (device == "auto") return count > 0 ? 0 : -1;
  const int index = cuda_device_index(device).value_or(0);
  const std::string head = "device: '" + device + "' (from " + source + ") ";
  if (count == 0)
    throw DeviceError(head + "needs a GPU: no CUDA device: " + (why ? why : "none found") +
                      "; allowed: cpu");
  if (index >= count)
    throw DeviceError(head + "does not exist: " + std::to_string(count) +
                      " CUDA device(s); allowed: cpu, cuda:0 to cuda:" + std::to_string(count - 1));
  return index;
}

}  // namespace

void dlpack_delete(dlpack::DLManagedTensor* tensor) noexcept {
  if (tensor != nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
}

// --- HandedLoader -----------------------------------------------------------------------------------

HandedLoader::HandedLoader(HandedLoaderOptions options) : options_(std::move(options)) {
  const RunConfig& c = options_.config;
  detail::CudaOps& cuda = options_.cuda != nullptr ? *options_.cuda : detail::cuda_runtime_ops();
  device_ = resolve_device(c.device, options_.source, cuda);
  bool pin = options_.pin_memory.value_or(device_ >= 0);
  if (pin && device_ < 0) {
    const char* why = nullptr;
    if (cuda.device_count(&why) == 0) {
      pin = false;
      pin_note_ = std::string("pin_memory=True: no CUDA device (") + (why ? why : "none found") +
                  "), so the batches are in ordinary memory";
    }
  }
  dataset_ = options_.dataset ? options_.dataset : open_dataset(c);
  LoaderOptions lo = loader_options(c);
  lo.pin_memory = pin;
  // Nothing between a Python loop's epochs changes feedscope's dataset, so the workers may start
  // the next epoch early, as `run` lets them; set_epoch() to another epoch drops that start.
  lo.prefetch_next_epoch = true;
  // A Python loop holds the batch its loop variable still names while it asks for the next, and
  // often one more (a peek, the previous batch): three spares before the pool grows.
  lo.spare_slabs = 3;
  lo.max_extra_slabs = std::max(0, options_.max_held_batches - lo.spare_slabs);
  loader_ = make_batch_loader(c, dataset_, lo, &spans_);
  if (std::string why = loader_->empty_epoch_reason(); !why.empty())
    throw ConfigError(c.drop_last ? "batch_size" : "dataset", why);
  if (device_ >= 0) {
    CopyEngine::Options eo;
    eo.device = device_;
    eo.buffer_bytes = loader_->pool().slab_bytes();
    eo.max_extra_buffers = options_.max_held_batches;
    eo.ops = options_.cuda;
    device_side_ = std::make_shared<DeviceSide>();
    device_side_->engine = std::make_unique<CopyEngine>(eo);
    copy_ring_ = &spans_.add_lane(LaneRole::copy, &copy_lane_);
  }
}

HandedLoader::~HandedLoader() {
  drop_ahead();
  loader_.reset();  // joins the workers; slabs held by live tensors stay theirs
}

void HandedLoader::drop_ahead() {
  held_back_.reset();
  if (!ahead_) return;
  // Its copy was never read: the buffer is free once the copy itself is done.
  const std::lock_guard lock(device_side_->mutex);
  ahead_.reset();
}

void HandedLoader::begin_epoch(std::uint64_t epoch) {
  if (epoch == epoch_ && !started_) return;  // the workers are loading it already
  drop_ahead();
  epoch_done_ = false;
  pending_error_ = nullptr;
  loader_->begin_epoch(epoch);
  epoch_ = epoch;
  started_ = false;
}

void HandedLoader::check_buffers() const {
  const CopyEngine& engine = *device_side_->engine;
  if (engine.buffers_in_use() >= engine.max_buffers())
    throw LoaderError("all " + std::to_string(engine.buffers()) +
                      " device buffers are held by batches still alive in the training loop "
                      "(max_held_batches " + std::to_string(options_.max_held_batches) +
                      "); a buffer returns when its tensors are freed: clone() batches you keep");
}

HandedLoader::Ahead HandedLoader::to_device(Batch batch) {
  CopyEngine& engine = *device_side_->engine;
  const std::size_t bytes =
      loader_->labels_offset() + sizeof(std::int64_t) * static_cast<std::size_t>(batch.size);
  record_copies();
  Ahead a;
  a.copy = engine.submit(std::move(batch.slab), bytes, batch.index);
  a.host = std::move(batch);
  return a;
}

void HandedLoader::record_copies() {
  timings_.clear();
  device_side_->engine->reclaim(&timings_);  // also returns the slabs of finished copies
  for (const CopyTiming& t : timings_)
    copy_ring_->push(Span{t.begin_ns, t.end_ns, t.tag, Stage::h2d, copy_lane_});
}

// The next batch's copy, started beside the step on this one without a wait: only a batch the
// loader has collated, only where the copy would not block the host (CopyEngine::can_submit_now).
void HandedLoader::look_ahead() {
  if (epoch_done_) return;
  try {
    if (!held_back_) held_back_ = loader_->try_next();
    if (!held_back_) return;
    const std::lock_guard lock(device_side_->mutex);
    if (!device_side_->engine->can_submit_now(held_back_->slab.pinned())) return;
    ahead_ = std::make_unique<Ahead>(to_device(std::move(*held_back_)));
    held_back_.reset();
  } catch (...) {
    pending_error_ = std::current_exception();
  }
}

bool HandedLoader::next(void* stream, HandedBatch& out) {
  started_ = true;
  std::optional<Ahead> current;
  if (!device_side_) {
    if (std::optional<Batch> batch = loader_->next()) current = Ahead{std::move(*batch), {}};
  } else {
    if (pending_error_) std::rethrow_exception(std::exchange(pending_error_, nullptr));
    if (!ahead_) {
      // Checked before a batch is taken from the loader: one taken and then refused would be lost.
      if (!held_back_ && !epoch_done_) {
        {
          const std::lock_guard lock(device_side_->mutex);
          check_buffers();
        }
        held_back_ = loader_->next();
        epoch_done_ = !held_back_;
      }
      if (held_back_) {
        const std::lock_guard lock(device_side_->mutex);
        check_buffers();  // a held-back batch stays held back
        ahead_ = std::make_unique<Ahead>(to_device(std::move(*held_back_)));
        held_back_.reset();
      }
    }
    if (ahead_) {
      current = std::move(*ahead_);
      ahead_.reset();
      look_ahead();
    }
  }
  forward_spans();
  forward_autotune();
  if (!current || ++batches_since_samples_ >= kSamplesEvery) forward_samples();
  if (!current) return false;
  export_batch(std::move(*current), stream, out);
  return true;
}

void HandedLoader::export_batch(Ahead batch, void* stream, HandedBatch& out) {
  const SampleSpec& spec = dataset_->spec();
  out.index = batch.host.index;
  out.epoch = batch.host.epoch;
  out.size = batch.host.size;
  auto memory = std::make_shared<BatchMemory>();
  std::byte* data = batch.host.data;
  dlpack::DLDevice where{dlpack::kDLCPU, 0};
  if (batch.copy) {
    data = batch.copy.data();
    where = {dlpack::kDLCUDA, device_};
    memory->side_lock_owner = device_side_;
    memory->side_mutex = &device_side_->mutex;
    memory->stream = stream;
    const std::lock_guard lock(device_side_->mutex);
    batch.copy.order_before(stream);
  }
  // On the host the labels are copied out (8 bytes a sample): a loop that keeps them, to score an
  // epoch, must not keep the whole slab alive. On a GPU they stay in the batch's device buffer.
  void* labels = data + loader_->labels_offset();
  std::shared_ptr<void> labels_owner = memory;
  if (!batch.copy) {
    auto own = std::make_shared<std::vector<std::int64_t>>(batch.host.labels,
                                                           batch.host.labels + out.size);
    labels = own->data();
    labels_owner = std::move(own);
  }
  memory->copy = std::move(batch.copy);
  memory->host = std::move(batch.host);
  std::vector<std::int64_t> shape{out.size};
  shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
  out.images = make_tensor(std::move(memory), data, shape, dl_type(spec.dtype), where);
  out.labels = make_tensor(std::move(labels_owner), labels, {out.size},
                           dlpack::DLDataType{dlpack::kDLInt, 64, 1}, where);
}

void HandedLoader::attach(std::shared_ptr<SpanSink> sink) {
  drained_.clear();
  spans_.drain(drained_);  // recorded before the session: not its
  sink_ = std::move(sink);
  session_told_.reset();
  forward_autotune();
  forward_samples();
}

SampleCosts HandedLoader::costs() {
  SampleCostSnapshot snapshot = loader_->sample_costs(false);
  if (const auto* indexed = dynamic_cast<const Dataset*>(dataset_.get()))
    for (SlowSampleCost& s : snapshot.slowest) {
      auto it = named_.find(s.index);
      if (it == named_.end()) it = named_.emplace(s.index, indexed->sample_file(s.index)).first;
      s.file = it->second;
    }
  const RunConfig& c = options_.config;
  return sample_costs_of(snapshot, "feedscope's loader",
                         c.dataset.starts_with("images:") ? static_cast<int>(c.image_size) : 0);
}

void HandedLoader::forward_samples() {
  batches_since_samples_ = 0;
  if (sink_) sink_->forward_samples(costs());
}

nlohmann::json HandedLoader::sample_costs() { return nlohmann::json::parse(samples_to_json(costs())); }

void HandedLoader::forward_autotune() {
  if (!sink_ || !loader_->autotuned()) return;
  const std::vector<TunerMove>& moves = loader_->autotune_moves();
  // A trial is judged in place (its `after` filled in), so the count alone misses it.
  const TunedState state{moves.size(), !moves.empty() && autotune_move_judged(moves.back()),
                         loader_->setting()};
  if (session_told_ == state) return;
  session_told_ = state;
  if (auto summary = autotune_summary(*loader_, 0.0))
    sink_->forward_autotune(*summary, loader_->autotune_start_ns());
}

void HandedLoader::forward_spans() {
  if (!sink_) return;
  drained_.clear();
  spans_.drain(drained_);
  if (!drained_.empty()) sink_->forward(drained_, spans_.lanes());
}

int HandedLoader::device_buffers() const {
  if (!device_side_) return 0;
  const std::lock_guard lock(device_side_->mutex);
  return device_side_->engine->buffers();
}

nlohmann::json HandedLoader::describe() const {
  const SampleSpec& spec = dataset_->spec();
  nlohmann::json j;
  j["dataset"] = dataset_->name();
  j["num_classes"] = dataset_->num_classes();
  j["classes"] = nullptr;
  if (const auto* images = dynamic_cast<const ImageFolderDataset*>(dataset_.get()))
    j["classes"] = images->classes();
  const auto* indexed = dynamic_cast<const Dataset*>(dataset_.get());
  const auto* sharded = dynamic_cast<const ShardedDataset*>(dataset_.get());
  j["samples"] = indexed ? nlohmann::json(indexed->size()) : nlohmann::json(nullptr);
  j["shards"] = sharded ? nlohmann::json(sharded->shard_count()) : nlohmann::json(nullptr);
  j["batches_per_epoch"] = indexed ? nlohmann::json(loader_->batches_per_epoch()) : nlohmann::json(nullptr);
  j["sample_shape"] = spec.shape;
  j["dtype"] = dtype_name(spec.dtype);
  j["device"] = device_ >= 0 ? "cuda:" + std::to_string(device_) : std::string("cpu");
  j["pin_memory"] = loader_->pool().pinned();
  j["pin_memory_note"] = pin_note_;
  j["slabs"] = loader_->pool().slab_count();
  j["max_slabs"] = loader_->pool().max_slab_count();
  j["slab_bytes"] = loader_->pool().slab_bytes();
  j["device_buffers"] = device_buffers();
  return j;
}

nlohmann::json HandedLoader::autotune() {
  const std::optional<AutotuneSummary> summary = autotune_summary(*loader_, 0.0);
  if (!summary) return nullptr;
  nlohmann::json lines = nlohmann::json::array();
  const std::vector<TunerMove>& moves = summary->moves;
  while (lines_told_ < moves.size() && autotune_move_judged(moves[lines_told_]))
    lines.push_back("feedscope: " + describe_autotune_move(moves[lines_told_++]));
  const LoaderSetting now = loader_->setting();
  return {{"num_workers", now.num_workers},
          {"prefetch", now.prefetch},
          {"autotune", nlohmann::json::parse(autotune_to_json(summary))},
          {"lines", std::move(lines)}};
}

nlohmann::json HandedLoader::data_errors() const {
  const DataErrors e = loader_->data_errors();
  nlohmann::json examples = nlohmann::json::array();
  for (const BadSample& b : e.examples)
    examples.push_back({{"index", b.index}, {"source", b.source}, {"message", b.message}});
  return {{"bad", e.bad}, {"attempted", e.attempted}, {"examples", examples}};
}

}  // namespace feedscope
