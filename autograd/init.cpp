#include "init.h"

#include <cmath>

#include "base/error.h"

namespace sf {

Tensor uniform(const Shape& shape, float low, float high, Rng& rng) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = rng.uniform(low, high);
  return t;
}

Tensor normal(const Shape& shape, float mean, float stddev, Rng& rng) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = mean + stddev * rng.normal();
  return t;
}

Tensor xavier_uniform(const Shape& shape, Rng& rng) {
  if (shape.size() < 2) internal_fail("xavier_uniform needs 2 or more dims, got ", to_string(shape));
  int64_t receptive = numel(shape) / (shape[0] * shape[1]);
  float fan_in = static_cast<float>(shape[1] * receptive);
  float fan_out = static_cast<float>(shape[0] * receptive);
  float bound = std::sqrt(6.0f / (fan_in + fan_out));
  return uniform(shape, -bound, bound, rng);
}

}  // namespace sf
