// A small libtorch training loop of your own, profiled by feedscope: the lines marked
// `// feedscope` are all it takes. Usage: train [REPORT_DIR] [--feedscope-loader]
//   REPORT_DIR          where report.json and the rest go (default consumer-report)
//   --feedscope-loader  load the same dataset with feedscope::Loader instead of torch::data's
#include <torch/torch.h>

#include <feedscope/loader.h>   // feedscope (only for --feedscope-loader)
#include <feedscope/session.h>  // feedscope

#include <cstdint>
#include <iostream>
#include <string>

namespace {

// 1x28x28 images whose class is a brightness band, so the MLP learns it; made in memory.
class Bands : public torch::data::datasets::Dataset<Bands> {
 public:
  static constexpr std::int64_t kClasses = 8;
  explicit Bands(std::int64_t count) {
    torch::manual_seed(0);
    labels_ = torch::randint(kClasses, {count}, torch::kInt64);
    images_ = torch::randn({count, 1, 28, 28}) * 0.3;
    auto band = (labels_ * (28 / kClasses)).view({count, 1, 1, 1});
    auto rows = torch::arange(28).view({1, 1, 28, 1});
    images_ += ((rows >= band) & (rows < band + 28 / kClasses)).to(torch::kFloat32);
  }
  torch::data::Example<> get(std::size_t index) override {
    const auto i = static_cast<std::int64_t>(index);
    return {images_[i], labels_[i]};
  }
  torch::optional<std::size_t> size() const override {
    return static_cast<std::size_t>(labels_.size(0));
  }

 private:
  torch::Tensor images_, labels_;
};

struct Model : torch::nn::Module {
  Model() : fc1(register_module("fc1", torch::nn::Linear(784, 64))),
            fc2(register_module("fc2", torch::nn::Linear(64, Bands::kClasses))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2->forward(torch::relu(fc1->forward(x.flatten(1)))); }
  torch::nn::Linear fc1, fc2;
};

constexpr std::int64_t kSamples = 1024;
constexpr std::int64_t kBatch = 32;
constexpr int kEpochs = 2;

}  // namespace

int main(int argc, char** argv) {
  const std::string report_dir = argc > 1 ? argv[1] : "consumer-report";
  const bool feedscope_loader = argc > 2 && std::string(argv[2]) == "--feedscope-loader";
  torch::set_num_threads(1);
  Model model;
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.1));
  torch::Tensor loss;
  const auto train_step = [&](const torch::Tensor& data, const torch::Tensor& target) {
    optimizer.zero_grad();
    loss = torch::nn::functional::cross_entropy(model.forward(data), target);
    loss.backward();
    optimizer.step();
  };

  feedscope::Session fs({.report_dir = report_dir, .warmup = 2, .num_workers = 2});  // feedscope
  if (feedscope_loader) {
    feedscope::Loader loader(Bands(kSamples), {.batch_size = kBatch, .num_workers = 2,
                                               .shuffle = true, .num_classes = Bands::kClasses});
    loader.attach(fs);  // its workers' stages join the report
    for (int epoch = 0; epoch < kEpochs; ++epoch)
      for (auto& batch : fs.wrap(loader)) {       // feedscope
        auto step = fs.step(batch.data.size(0));  // feedscope
        train_step(batch.data, batch.target);
      }
  } else {
    auto loader = torch::data::make_data_loader(
        Bands(kSamples).map(torch::data::transforms::Stack<>()),
        torch::data::DataLoaderOptions().batch_size(kBatch).workers(2));
    for (int epoch = 0; epoch < kEpochs; ++epoch)
      for (auto& batch : fs.wrap(*loader)) {      // feedscope
        auto step = fs.step(batch.data.size(0));  // feedscope
        train_step(batch.data, batch.target);
      }
  }
  const feedscope::Session::Summary& summary = fs.finish();  // feedscope (or at ~Session)
  std::cout << "consumer: final loss " << loss.item<float>() << "; feedscope " << feedscope::library_version()
            << ": " << summary.bottleneck << ": " << summary.verdict << std::endl;
  return 0;
}
