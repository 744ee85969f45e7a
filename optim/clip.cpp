#include "clip.h"

#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace sf::optim {

float grad_norm(const NamedTensors& params) {
  NoGradGuard no_grad;
  double total = 0.0;
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor flat = reshape(g, {1, g.numel()});
    total += matmul(flat, flat, {.trans_b = true}).item();  // sum of squares
  }
  return static_cast<float>(std::sqrt(total));
}

float clip_grad_norm(const NamedTensors& params, float max_norm) {
  float norm = grad_norm(params);
  float coef = max_norm / (norm + 1e-6f);
  if (coef >= 1.0f) return norm;
  const kernels::Table& k = kernels::active();
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (g.defined()) k.unary(kernels::Unary::MulScalar, g.data(), g.data(), g.numel(), coef);
  }
  return norm;
}

}  // namespace sf::optim
