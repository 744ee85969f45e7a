// XOR with a two-layer network, through the library's public API:
// tensors, autograd, an nn::Linear pair, cross-entropy and an optimizer.
//
//   build/examples/xor [adam|adamw|sgd]
//
// docs/00-start.md, the course's first chapter, runs it and explains it.
#include <cstdio>
#include <memory>
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "nn/layers.h"
#include "optim/optimizer.h"

using namespace sf;

int main(int argc, char** argv) {
  std::string kind = argc > 1 ? argv[1] : "adam";
  Rng init(1);
  nn::Linear hidden(2, 8, init), output(8, 2, init);
  NamedTensors params = {{"hidden.weight", hidden.weight}, {"hidden.bias", hidden.bias},
                                {"output.weight", output.weight}, {"output.bias", output.bias}};
  std::unique_ptr<optim::Optimizer> optimizer;
  if (kind == "sgd")
    optimizer = std::make_unique<optim::Sgd>(params, 0.5f, optim::SgdOptions{.momentum = 0.9f});
  else if (kind == "adam" || kind == "adamw")
    optimizer = std::make_unique<optim::Adam>(
        params, 0.05f, optim::AdamOptions{.weight_decay = 0.01f, .decoupled = kind == "adamw"});
  else {
    std::fprintf(stderr, "xor: unknown optimizer '%s' (adam, adamw or sgd)\n", kind.c_str());
    return 2;
  }

  // The four inputs and their classes: x0 XOR x1.
  Tensor x = Tensor::from({0, 0, 0, 1, 1, 0, 1, 1}, {4, 2});
  Tensor y = Tensor::from_ints({0, 1, 1, 0}, {4});
  auto logits = [&] { return output.forward(tanh(hidden.forward(x))); };

  for (int step = 1; step <= 300; ++step) {
    optimizer->zero_grad();
    Tensor loss = cross_entropy(logits(), y);
    loss.backward();
    optimizer->step();
    if (step % 100 == 0) std::printf("step %d  loss %.4f\n", step, loss.item());
  }

  NoGradGuard no_grad;
  Tensor predicted = argmax(logits());
  int correct = 0;
  for (int i = 0; i < 4; ++i) {
    std::printf("%g XOR %g -> %d\n", x.data()[2 * i], x.data()[2 * i + 1], predicted.ints()[i]);
    correct += predicted.ints()[i] == y.ints()[i];
  }
  std::printf("accuracy: %d%%\n", correct * 25);
  return correct == 4 ? 0 : 1;
}
