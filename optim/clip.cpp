#include "clip.h"

#include <cmath>

namespace sf::optim {

float grad_norm(const NamedTensors& params) {
  double total = 0.0;
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (g.defined()) total += g.device().kernels().dot(g.mem(), g.mem(), g.numel());
  }
  return static_cast<float>(std::sqrt(total));
}

float clip_grad_norm(const NamedTensors& params, float max_norm) {
  float norm = grad_norm(params);
  float coef = max_norm / (norm + 1e-6f);
  // A NaN or infinite norm is left for the caller to see (the trainer skips
  // that update) instead of scaling every gradient by NaN or 0.
  if (!std::isfinite(norm) || coef >= 1.0f) return norm;
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (g.defined())
      g.device().kernels().unary(kernels::Unary::MulScalar, g.mem(), g.mem(), g.numel(), coef);
  }
  return norm;
}

}  // namespace sf::optim
