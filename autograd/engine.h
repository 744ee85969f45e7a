// The reverse-mode engine. Each op that runs with grad enabled and has an input
// requiring grad records a Node: an edge per input and a function mapping the
// output's gradient to theirs. backward() walks the nodes once in reverse
// topological order, summing gradients where a tensor is used more than once,
// and then frees the graph (saved tensors included) so memory does not grow
// from step to step.
//
// An edge says where an input's gradient goes, never holds the input's data:
// only the tensors a backward function captures stay alive until backward. So
// the logits that log_softmax turns into log-probabilities, or the scores a
// masked softmax normalises, are freed as soon as the forward pass moves on,
// as in PyTorch, where a node keeps only what it saved for backward.
#pragma once
#include <functional>

#include "tensor.h"

namespace sf {

// Where the gradient of one input of an op goes. An input that needs no
// gradient (a constant, an undefined tensor) has an empty edge.
struct Edge {
  std::shared_ptr<Node> grad_fn;  // the op that computed the input, if any
  Tensor leaf;                    // the input itself when it is a leaf requiring grad
  Shape shape;                    // the input's shape, which its gradient must have

  bool requires_grad() const { return grad_fn || leaf.defined(); }
};

struct Node {
  const char* op;
  std::vector<Edge> inputs;
  BackwardFn backward;
};

// Returns `out`, with a Node attached when grad is enabled and some input needs
// a gradient. `backward` returns one gradient per input (same shape).
Tensor record(const Tensor& out, const char* op, std::vector<Tensor> inputs, BackwardFn backward);

// Observers of one backward pass, for work that should overlap it
// (data-parallel training all-reduces gradients while backward still runs).
struct BackwardHooks {
  // Called once for each leaf reached, as soon as its gradient is final: no op
  // left in this pass would add to it. The gradient may be undefined when no
  // path carried one.
  std::function<void(const Tensor& leaf)> grad_ready;
};

void run_backward(const Tensor& root, const Tensor& grad, const BackwardHooks& hooks = {});

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
bool grad_enabled();  // false inside a NoGradGuard

}  // namespace sf
