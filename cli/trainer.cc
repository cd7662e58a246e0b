#include "cli/trainer.h"

#include <dlfcn.h>

#include <chrono>

#include <torch/torch.h>
#include <torch/version.h>

#include "cli/trial_rounds.h"
#include "pinned_memory/device_probe.h"
#include "pinned_memory/errors.h"
#include "pinned_memory/step_fence.h"

namespace feedscope {

namespace {

// A trial's timed steps in rounds, its figure their median (cli/trial_rounds.h).
constexpr int kTrialRounds = 5;

torch::Device resolve_device(const std::string& name) {
  const bool cuda = torch::cuda::is_available();
  if (name == "auto") return cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (name == "cpu") return torch::Device(torch::kCPU);
  if (!cuda) {
    const DeviceProbe probe = probe_cuda();
    const std::string why = !probe.available() ? probe.unavailable_reason
                                               : "this libtorch " + torch_version() +
                                                     " was built without CUDA";
    throw DeviceError("device '" + name + "' is not available: " + why +
                      "; use --device cpu or auto");
  }
  torch::Device device(name);
  const auto count = static_cast<int>(torch::cuda::device_count());
  if (device.has_index() && device.index() >= count)
    throw DeviceError("device '" + name + "' does not exist: " + std::to_string(count) +
                      " CUDA device(s) present");
  // "cuda" is the first device, named with its index: the copy engine, the step fence and the
  // report all name the one device the step runs on.
  if (!device.has_index()) device = torch::Device(torch::kCUDA, 0);
  return device;
}

torch::nn::Sequential make_mlp(std::int64_t in, std::int64_t hidden, std::int64_t layers,
                               std::int64_t classes) {
  torch::nn::Sequential net{torch::nn::Flatten()};
  std::int64_t width = in;
  for (std::int64_t i = 0; i < layers; ++i) {
    net->push_back(torch::nn::Linear(width, hidden));
    net->push_back(torch::nn::ReLU());
    width = hidden;
  }
  net->push_back(torch::nn::Linear(width, classes));
  return net;
}

// Inputs larger than 32x32 (images:DIR gives 3x224x224) first go through a patchify stem, a
// convolution whose stride equals its kernel, down to about 32x32: the step then costs what a
// 32x32 input costs, so a CPU run still measures the loader rather than the convolutions.
std::int64_t cnn_stem_stride(std::int64_t height, std::int64_t width) {
  return std::max<std::int64_t>(1, std::min(height, width) / 32);
}

torch::nn::Sequential make_cnn(std::int64_t channels_in, std::int64_t height, std::int64_t width,
                               std::int64_t channels, std::int64_t blocks, std::int64_t classes) {
  torch::nn::Sequential net;
  std::int64_t c = channels_in;
  if (const std::int64_t stride = cnn_stem_stride(height, width); stride > 1) {
    net->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(c, channels, stride).stride(stride)));
    net->push_back(torch::nn::ReLU());
    c = channels;
  }
  for (std::int64_t i = 0; i < blocks; ++i) {
    net->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(c, channels, 3).padding(1)));
    net->push_back(torch::nn::ReLU());
    if (i + 1 < blocks) net->push_back(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)));
    c = channels;
  }
  net->push_back(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions(1)));
  net->push_back(torch::nn::Flatten());
  net->push_back(torch::nn::Linear(c, classes));
  return net;
}

// Caps the threads a CPU step runs on: torch's intra-op pool, and OpenBLAS's own pool where
// libtorch's BLAS is OpenBLAS (Debian's libtorch reaches it through libblas.so.3). OpenBLAS's
// threads spin between calls, so with the default of one per core a training step takes every
// core the loader's workers need: 16 % fewer samples/s at 2 workers on 2 cores here.
void set_cpu_threads(int threads) {
  torch::set_num_threads(threads);
  using SetThreads = void (*)(int);
  if (auto* set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set(threads);
}

class TorchTrainer final : public Trainer {
 public:
  explicit TorchTrainer(const TrainerOptions& o)
      : options_(o), device_(resolve_device(o.device)) {
    torch::manual_seed(o.seed);
    if (!device_.is_cuda() && o.cpu_threads > 0) set_cpu_threads(o.cpu_threads);
    const std::int64_t features = o.sample.elements();
    if (o.model == "cnn") {
      if (o.sample.shape.size() != 3)
        throw std::invalid_argument("model cnn needs CxHxW samples, got " + o.sample.to_string());
      const std::int64_t stem = cnn_stem_stride(o.sample.shape[1], o.sample.shape[2]);
      net_ = make_cnn(o.sample.shape[0], o.sample.shape[1], o.sample.shape[2], o.hidden, o.layers,
                      o.classes);
      describe_ = "cnn " + (stem > 1 ? "stem/" + std::to_string(stem) + " " : std::string()) +
                  std::to_string(o.layers) + "x conv" + std::to_string(o.hidden) + "-" +
                  std::to_string(o.classes);
    } else {
      net_ = make_mlp(features, o.hidden, o.layers, o.classes);
      describe_ = "mlp " + std::to_string(features);
      for (std::int64_t i = 0; i < o.layers; ++i) describe_ += "-" + std::to_string(o.hidden);
      describe_ += "-" + std::to_string(o.classes);
    }
    // The threads the CPU step runs on, in the report's training.model.
    if (!device_.is_cuda()) {
      const int threads = torch::get_num_threads();
      describe_ += ", " + std::to_string(threads) + (threads == 1 ? " CPU thread" : " CPU threads");
    }
    net_->to(device_);
    if (device_.is_cuda()) fence_ = std::make_unique<StepFence>(device_.index(), 2);
    for (const auto& p : net_->parameters()) parameters_ += p.numel();
    optimizer_ = std::make_unique<torch::optim::SGD>(
        net_->parameters(), torch::optim::SGDOptions(o.lr).momentum(0.9));
    shape_.push_back(0);
    shape_.insert(shape_.end(), o.sample.shape.begin(), o.sample.shape.end());
  }

  void step(const DeviceBatch& batch) override {
    shape_[0] = batch.size;
    const auto dtype = options_.sample.dtype == DType::uint8 ? torch::kUInt8 : torch::kFloat32;
    // Views of the batch where it lives, the slab on the CPU or the engine's device buffer: no
    // copy and no allocation for the input.
    const auto where = torch::TensorOptions().device(batch.on_device ? device_ : torch::kCPU);
    torch::Tensor x = torch::from_blob(batch.data, shape_, where.dtype(dtype));
    torch::Tensor y = torch::from_blob(batch.labels, {batch.size}, where.dtype(torch::kInt64));
    if (device_.is_cuda()) {
      if (!batch.on_device) {  // no copy engine: a plain copy on the step's stream
        x = x.to(device_);
        y = y.to(device_);
      }
      fence_->wait_for_previous();
      // libtorch queues on the device's legacy default stream unless told otherwise: the null
      // stream, with the step's device current (the engine and the fence make it so).
      batch.order_before(nullptr);
    }
    if (dtype != torch::kFloat32) x = x.to(torch::kFloat32);
    optimizer_->zero_grad();
    loss_ = torch::nn::functional::cross_entropy(net_->forward(x), y);
    loss_.backward();
    optimizer_->step();
    if (device_.is_cuda()) fence_->mark(nullptr);
  }

  double last_loss() override { return loss_.defined() ? loss_.item<double>() : 0.0; }

  void drain() override {
    if (fence_) fence_->wait_all();
  }

  std::string describe() const override { return describe_; }
  std::int64_t parameters() const override { return parameters_; }
  std::string device() const override { return device_.str(); }
  bool on_gpu() const override { return device_.is_cuda(); }
  int cuda_index() const override { return device_.is_cuda() ? device_.index() : -1; }
  void set_step_threads(int threads) override {
    if (!device_.is_cuda() && threads > 0) set_cpu_threads(threads);
  }

 private:
  TrainerOptions options_;
  torch::Device device_;
  torch::nn::Sequential net_{nullptr};
  std::unique_ptr<torch::optim::SGD> optimizer_;
  std::unique_ptr<StepFence> fence_;
  torch::Tensor loss_;
  std::vector<std::int64_t> shape_;
  std::string describe_;
  std::int64_t parameters_ = 0;
};

}  // namespace

std::unique_ptr<Trainer> make_trainer(const TrainerOptions& options) {
  return std::make_unique<TorchTrainer>(options);
}

std::optional<double> trial_step_seconds(const TrainerOptions& options, std::int64_t batch_size,
                                         int steps, double budget_s, std::string& why_not) {
  try {
    TorchTrainer trainer(options);
    const torch::Device device(trainer.device());
    std::vector<std::int64_t> shape{batch_size};
    shape.insert(shape.end(), options.sample.shape.begin(), options.sample.shape.end());
    const auto on = torch::TensorOptions().device(device);
    const torch::Tensor x = options.sample.dtype == DType::uint8
                                ? torch::randint(0, 256, shape, on.dtype(torch::kUInt8))
                                : torch::randn(shape, on.dtype(torch::kFloat32));
    const torch::Tensor y =
        torch::randint(0, std::max<std::int64_t>(options.classes, 1), {batch_size}, on.dtype(torch::kInt64));
    DeviceBatch batch;
    batch.size = batch_size;
    batch.data = static_cast<std::byte*>(x.data_ptr());
    batch.labels = y.data_ptr<std::int64_t>();
    batch.on_device = device.is_cuda();
    for (int i = 0; i < 3; ++i) trainer.step(batch);
    const auto now_s = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
    return time_in_rounds([&] { trainer.step(batch); }, [&] { trainer.drain(); }, steps, budget_s,
                          kTrialRounds, now_s)
        .median_s;
  } catch (const std::exception& e) {
    why_not = e.what();
    const std::size_t line = why_not.find('\n');  // c10::Error appends a C++ backtrace
    if (line != std::string::npos) why_not.resize(line);
    return std::nullopt;
  }
}

std::string torch_version() { return TORCH_VERSION; }

bool torch_cuda_available() { return torch::cuda::is_available(); }

}  // namespace feedscope
