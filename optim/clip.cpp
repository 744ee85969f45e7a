#include "clip.h"

#include <cmath>
#include <numeric>
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

double grad_squares(const NamedTensors& params, const std::vector<Slice>& slices) {
  GradSquares squares(params, slices);
  squares.add_all();
  return squares.total();
}

void GradSquares::add(std::span<const size_t> which) {
  std::vector<size_t> listed;
  std::vector<Tensor> runs;
  for (size_t i : which)
    if (Tensor g = params_[i].second.grad(); g.defined() && slices_[i].size() > 0) {
      listed.push_back(i);
      runs.push_back(g.view(slices_[i].begin, {slices_[i].size()}));
      elements_ += slices_[i].size();
    }
  if (!runs.empty()) parts_.emplace_back(std::move(listed), sums_of_squares(runs));
}

void GradSquares::add_all() {
  std::vector<size_t> all(params_.size());
  std::iota(all.begin(), all.end(), size_t{0});
  add(all);
}

// Each part's squares are one array on the device; reading them here is the
// step's one wait for the device. Each gradient's square is a float of its
// own, so the sum in parameter order does not depend on how they were parted.
double GradSquares::total() const {
  std::vector<float> square_of(params_.size(), 0.0f);
  for (const auto& [listed, squares] : parts_) {
    std::vector<float> values = squares.to_vector();
    for (size_t k = 0; k < listed.size(); ++k) square_of[listed[k]] = values[k];
  }
  double total = 0.0;
  for (float square : square_of) total += square;
  return total;
}

float grad_norm(const NamedTensors& params) {
  return static_cast<float>(std::sqrt(grad_squares(params, whole(params))));
}

float clip_coefficient(float norm, float max_norm) {
  float coef = max_norm / (norm + 1e-6f);
  // A NaN or infinite norm is left for the caller to see (the trainer skips
  // that update) instead of scaling every gradient by NaN or 0.
  if (!std::isfinite(norm) || coef >= 1.0f) return 1.0f;
  return coef;
}

float clip_grad_norm(const NamedTensors& params, float max_norm) {
  float norm = grad_norm(params);
  if (float coef = clip_coefficient(norm, max_norm); coef != 1.0f)
    for (const auto& [name, p] : params)
      if (Tensor g = p.grad(); g.defined()) mul_scalar_(g, coef);
  return norm;
}

}  // namespace sf::optim
