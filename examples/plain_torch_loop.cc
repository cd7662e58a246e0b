// A plain libtorch training loop, as a user has it before feedscope: wrap_torch_loop.cc is the
// same file with the `// feedscope` lines added. Usage: plain_torch_loop [EPOCHS]
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "examples/mnist_like.h"

int main(int argc, char** argv) {
  const int epochs = example::epochs_arg(argc, argv);

  auto dataset = example::MnistLike(example::kSamples).map(torch::data::transforms::Stack<>());
  auto data_loader = torch::data::make_data_loader(
      std::move(dataset),
      torch::data::DataLoaderOptions().batch_size(example::kBatchSize).workers(example::kWorkers));
  example::Mlp model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));

  torch::Tensor loss;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (auto& batch : *data_loader) {
      optimizer.zero_grad();
      loss = torch::nn::functional::cross_entropy(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
    }
  }
  std::cout << "final loss " << loss.item<float>() << std::endl;
  return 0;
}
