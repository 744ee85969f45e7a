#include "clip.h"

#include <cmath>
#include <vector>

#include "autograd/ops.h"

namespace sf::optim {

namespace {

std::vector<Slice> whole(const NamedTensors& params) {
  std::vector<Slice> slices;
  for (const auto& [name, p] : params) slices.push_back({0, p.numel()});
  return slices;
}

}  // namespace

// Each gradient's squared norm goes to its element of one array on the
// device; reading that array is the step's one wait for the device.
double grad_squares(const NamedTensors& params, const std::vector<Slice>& slices) {
  std::vector<Tensor> runs;
  for (size_t i = 0; i < params.size(); ++i)
    if (Tensor g = params[i].second.grad(); g.defined() && slices[i].size() > 0)
      runs.push_back(g.view(slices[i].begin, {slices[i].size()}));
  double total = 0.0;
  for (float square : sums_of_squares(runs).to_vector()) total += square;
  return total;
}

float grad_norm(const NamedTensors& params) {
  return static_cast<float>(std::sqrt(grad_squares(params, whole(params))));
}

void clip_to_norm(const NamedTensors& params, const std::vector<Slice>& slices, float norm, float max_norm) {
  float coef = max_norm / (norm + 1e-6f);
  // A NaN or infinite norm is left for the caller to see (the trainer skips
  // that update) instead of scaling every gradient by NaN or 0.
  if (!std::isfinite(norm) || coef >= 1.0f) return;
  for (size_t i = 0; i < params.size(); ++i)
    if (Tensor g = params[i].second.grad(); g.defined()) mul_scalar_(g.view(slices[i].begin, {slices[i].size()}), coef);
}

float clip_grad_norm(const NamedTensors& params, float max_norm) {
  float norm = grad_norm(params);
  clip_to_norm(params, whole(params), norm, max_norm);
  return norm;
}

}  // namespace sf::optim
