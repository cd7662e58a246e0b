// plain_torch_loop.cc with feedscope: the lines marked `// feedscope` are all it takes to time
// the loop, trace the GPU, export metrics and write a report with a diagnosis.
// Usage: wrap_torch_loop [EPOCHS] [REPORT_DIR] [METRICS_ADDR]
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "examples/mnist_like.h"
#include <feedscope/session.h>  // feedscope

int main(int argc, char** argv) {
  const int epochs = example::epochs_arg(argc, argv);

  auto dataset = example::MnistLike(example::kSamples).map(torch::data::transforms::Stack<>());
  auto data_loader = torch::data::make_data_loader(
      std::move(dataset),
      torch::data::DataLoaderOptions().batch_size(example::kBatchSize).workers(example::kWorkers));
  example::Mlp model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));

  feedscope::Session fs({.report_dir = argc > 2 ? argv[2] : "wrap-report", .warmup = 5, .metrics_addr = argc > 3 ? argv[3] : "", .num_workers = example::kWorkers});  // feedscope
  torch::Tensor loss;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (auto& batch : fs.wrap(*data_loader)) {  // feedscope
      auto step = fs.step(batch.data.size(0));  // feedscope
      optimizer.zero_grad();
      loss = torch::nn::functional::cross_entropy(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
    }
  }
  std::cout << "final loss " << loss.item<float>() << std::endl;
  return 0;
}
