// feedscope::Loader (include/feedscope/loader.h): the HandedLoader that feedscope.DataLoader uses,
// its DLPack batches taken by libtorch as tensors that free them. The one torch source of the
// public API; the rest of it is torch-free.
#include <feedscope/loader.h>
#include <feedscope/session.h>

#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/handed_loader.h"
#include "loader/torch_adapter.h"

namespace feedscope {

namespace {

constexpr const char* kSource = "feedscope::Loader::Options";

// A TorchSamples as the dataset TorchDatasetAdapter loads: its size() and get().
struct SamplesRef {
  std::shared_ptr<TorchSamples> samples;
  std::optional<std::size_t> size() const { return samples->size(); }
  torch::data::Example<> get(std::size_t index) { return samples->get(index); }
};

// The options as feedscope.DataLoader hands them over, so both are read by one parser, with run's
// messages (naming kSource).
std::string options_json(const Loader::Options& o) {
  nlohmann::json j;
  if (!o.dataset.empty()) j["dataset"] = o.dataset;
  j["batch_size"] = o.batch_size;
  j["num_workers"] = o.num_workers == Loader::kAuto ? nlohmann::json("auto") : nlohmann::json(o.num_workers);
  j["prefetch"] = o.prefetch == Loader::kAuto ? nlohmann::json("auto") : nlohmann::json(o.prefetch);
  j["shuffle"] = o.shuffle;
  j["seed"] = o.seed;
  j["drop_last"] = o.drop_last;
  j["pipeline"] = o.pipeline;
  j["image_size"] = o.image_size;
  j["device"] = o.device;
  if (o.pin_memory) j["pin_memory"] = *o.pin_memory;
  if (o.rank != -1) j["rank"] = o.rank;
  if (o.world_size != -1) j["world_size"] = o.world_size;
  j["max_held_batches"] = o.max_held_batches;
  for (const auto& [key, value] : o.more) {
    if (j.contains(key))
      throw std::invalid_argument(key + ": set in Loader::Options::more and as a field (from " +
                                  std::string(kSource) + "); give it once");
    j[key] = value;
  }
  return j.dump();
}

HandedLoaderOptions handed_options(const Loader::Options& o, std::shared_ptr<TorchSamples> samples) {
  if (samples && !o.dataset.empty())
    throw std::invalid_argument("dataset: '" + o.dataset + "' (from " + kSource +
                                ") given beside a torch dataset; give one of them");
  HandedLoaderOptions h = parse_loader_options(options_json(o), kSource, samples == nullptr);
  if (samples) {
    TorchDatasetAdapter<SamplesRef>::Options ao;
    ao.num_classes = o.num_classes;
    h.dataset = std::make_shared<TorchDatasetAdapter<SamplesRef>>(SamplesRef{std::move(samples)}, ao);
    h.config.dataset = "torch";
  }
  return h;
}

// A DLPack tensor as a torch tensor that deletes it when torch frees it.
torch::Tensor take(dlpack::DLManagedTensor* managed) {
  const dlpack::DLTensor& t = managed->dl_tensor;
  const std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim);
  const std::vector<std::int64_t> strides(t.strides, t.strides + t.ndim);
  const torch::Dtype dtype = t.dtype.code == dlpack::kDLFloat ? torch::kFloat32
                             : t.dtype.code == dlpack::kDLInt ? torch::kInt64
                                                              : torch::kUInt8;
  const torch::Device device = t.device.device_type == dlpack::kDLCUDA
                                   ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(t.device.device_id))
                                   : torch::Device(torch::kCPU);
  try {
    return torch::from_blob(static_cast<char*>(t.data) + t.byte_offset, shape, strides,
                            [managed](void*) { dlpack_delete(managed); },
                            torch::TensorOptions().dtype(dtype).device(device));
  } catch (...) {
    dlpack_delete(managed);
    throw;
  }
}

}  // namespace

struct Loader::Impl {
  Options options;
  std::unique_ptr<HandedLoader> loader;
  std::shared_ptr<SpanSink> sink;
  std::uint64_t next_epoch = 0;  // the epoch the next begin() starts
};

Loader::Loader(Options options) : Loader(std::shared_ptr<TorchSamples>(), std::move(options)) {}

Loader::Loader(std::shared_ptr<TorchSamples> samples, Options options)
    : impl_(std::make_unique<Impl>()) {
  impl_->loader = std::make_unique<HandedLoader>(handed_options(options, std::move(samples)));
  impl_->options = std::move(options);
}

Loader::~Loader() {
  if (impl_ && impl_->sink) impl_->sink->close();
}
Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&&) noexcept = default;

Loader::Iterator Loader::begin() {
  Impl& s = *impl_;
  s.loader->begin_epoch(s.next_epoch++);
  Iterator it(this);
  ++it;
  return it;
}

void Loader::set_epoch(std::uint64_t epoch) { impl_->next_epoch = epoch; }

bool Loader::next(Batch& out) {
  HandedBatch batch;
  if (!impl_->loader->next(impl_->options.stream, batch)) return false;
  try {
    out.data = take(std::exchange(batch.images, nullptr));
  } catch (...) {
    dlpack_delete(batch.labels);
    throw;
  }
  out.target = take(batch.labels);
  return true;
}

std::optional<std::size_t> Loader::size() const {
  const nlohmann::json d = impl_->loader->describe();
  return d["samples"].is_null() ? std::nullopt : std::optional(d["samples"].get<std::size_t>());
}

std::optional<std::int64_t> Loader::batches_per_epoch() const {
  const nlohmann::json d = impl_->loader->describe();
  return d["batches_per_epoch"].is_null() ? std::nullopt
                                          : std::optional(d["batches_per_epoch"].get<std::int64_t>());
}

const Loader::Options& Loader::options() const noexcept { return impl_->options; }

void Loader::attach(Session& session) {
  Impl& s = *impl_;
  if (s.sink) s.sink->close();
  // What the diagnosis cannot read off the loop: the loader's settings (a tuned one tells its own).
  const Options& o = s.options;
  Session::LoaderSettings settings;
  settings.batch_size = o.batch_size;
  if (o.num_workers != kAuto) settings.num_workers = o.num_workers;
  if (o.num_workers > 0 && o.prefetch != kAuto) settings.prefetch_factor = o.prefetch;
  settings.pin_memory = s.loader->describe()["pin_memory"].get<bool>();
  settings.persistent_workers = true;  // the workers are threads that live as long as the loader
  session.set_loader_settings(settings);
  s.sink = std::make_shared<SpanSink>(&session);
  s.loader->attach(s.sink);
}

}  // namespace feedscope
