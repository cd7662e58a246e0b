#pragma once
// What both example loops share: an MNIST-shaped dataset made in memory (1x28x28 images whose
// class is a brightness pattern, so a small MLP learns it), that MLP, and their EPOCHS argument.
// No download.
#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

namespace example {

class MnistLike : public torch::data::datasets::Dataset<MnistLike> {
 public:
  explicit MnistLike(std::int64_t count, std::int64_t classes = 10) {
    torch::manual_seed(0);
    labels_ = torch::randint(classes, {count}, torch::kInt64);
    // Each class lights a different band of rows; noise on top.
    images_ = torch::randn({count, 1, 28, 28}) * 0.3;
    auto band = (labels_ * (28 / classes)).view({count, 1, 1, 1});
    auto rows = torch::arange(28).view({1, 1, 28, 1});
    images_ += ((rows >= band) & (rows < band + 28 / classes)).to(torch::kFloat32);
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

struct MlpImpl : torch::nn::Module {
  MlpImpl() : fc1(register_module("fc1", torch::nn::Linear(784, 128))),
              fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    return fc2->forward(torch::relu(fc1->forward(x.flatten(1))));
  }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Mlp);

inline constexpr std::int64_t kSamples = 2048;
inline constexpr std::int64_t kBatchSize = 64;
inline constexpr std::int64_t kWorkers = 2;

// The examples' first argument, EPOCHS (default 2): --help prints the usage and exits 0; anything
// but a whole number from 1 on says so and exits 2, before a loop of no batch leaves no loss.
inline int epochs_arg(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string arg = argv[1];
  const std::string usage = std::string("usage: ") + argv[0] +
                            " [EPOCHS] (default 2), then what its first lines say";
  if (arg == "--help" || arg == "-h") {
    std::cout << usage << std::endl;
    std::exit(0);
  }
  char* end = nullptr;
  const long epochs = std::strtol(arg.c_str(), &end, 10);
  if (arg.empty() || *end != '\0' || epochs < 1 || epochs > 100000) {
    std::cerr << "EPOCHS: '" << arg << "' is not allowed; allowed: 1 to 100000\n" << usage << std::endl;
    std::exit(2);
  }
  return static_cast<int>(epochs);
}

}  // namespace example
