// Global gradient-norm clipping, as torch.nn.utils.clip_grad_norm_.
#pragma once
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "optimizer.h"

namespace sf::optim {

// The L2 norm of all the parameters' gradients taken together.
float grad_norm(const NamedTensors& params);

// Scales every gradient by max_norm / (norm + 1e-6) when that is below 1, so
// the direction is kept. Returns the norm before clipping.
float clip_grad_norm(const NamedTensors& params, float max_norm);

// The same in pieces: the sum of the squares of the elements `slices[i]` of
// each gradient, and the factor that clips gradients of that norm:
// max_norm / (norm + 1e-6) where that is below 1, else 1 (also for a NaN or
// infinite norm, left for the caller to see). Data-parallel ranks each take
// the squares of their own slices (dist/gradient_sync.h): the ranks' sums add
// up to the squared norm. The trainer hands the factor to the optimizer's
// step (Optimizer::step), which scales each gradient as it reads it.
double grad_squares(const NamedTensors& params, const std::vector<Slice>& slices);
float clip_coefficient(float norm, float max_norm);

// grad_squares in parts, parameter by parameter as their gradients become
// final: a data-parallel rank adds each bucket's as soon as its sums are in,
// while the later buckets are still summed. The total is the same to the bit
// in whatever order the parts came.
class GradSquares {
 public:
  GradSquares(const NamedTensors& params, const std::vector<Slice>& slices) : params_(params), slices_(slices) {}
  // Starts the squares of these parameters' gradients (on their device).
  void add(std::span<const size_t> which);
  // The same for every parameter.
  void add_all();
  // The sum of the squares of every parameter added, in parameter order.
  double total() const;
  // How many gradient elements have been squared: a data-parallel rank's
  // report shows by it that each rank took its own runs alone.
  int64_t elements() const { return elements_; }

 private:
  const NamedTensors& params_;
  const std::vector<Slice>& slices_;
  std::vector<std::pair<std::vector<size_t>, Tensor>> parts_;  // parameters, and their squares
  int64_t elements_ = 0;
};

}  // namespace sf::optim
