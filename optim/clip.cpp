#include "clip.h"

#include <cmath>
#include <vector>

namespace sf::optim {

// Each gradient's squared norm goes to its element of one array on the
// device; reading that array is the step's one wait for the device.
float grad_norm(const NamedTensors& params) {
  std::vector<Tensor> grads;
  for (const auto& [name, p] : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0.0f;
  Tensor squares = Tensor::empty({static_cast<int64_t>(grads.size())}, DType::F32, grads[0].device());
  for (size_t i = 0; i < grads.size(); ++i)
    grads[i].device().kernels().dot(grads[i].mem(), grads[i].mem(), grads[i].numel(), squares.mem() + i);
  double total = 0.0;
  for (float square : squares.to_vector()) total += square;
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
