// The reverse-mode engine. Each op that runs with grad enabled and has an input
// requiring grad records a Node: its inputs and a function mapping the output's
// gradient to theirs. backward() walks the nodes once in reverse topological
// order, summing gradients where a tensor is used more than once, and then frees
// the graph (saved tensors included) so memory does not grow from step to step.
#pragma once
#include "tensor.h"

namespace sf {

struct Node {
  const char* op;
  std::vector<Tensor> inputs;
  BackwardFn backward;
};

// Returns `out`, with a Node attached when grad is enabled and some input needs
// a gradient. `backward` returns one gradient per input (same shape).
Tensor record(const Tensor& out, const char* op, std::vector<Tensor> inputs, BackwardFn backward);

void run_backward(const Tensor& root, const Tensor& grad);

bool grad_enabled();

// Disables recording in its scope (inference, optimizer steps, backward itself).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace sf
