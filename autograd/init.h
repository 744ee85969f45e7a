// Tensors filled with random numbers from an Rng (base/random.h): the
// initialisations of torch.nn.init that the layers use.
#pragma once
#include "base/random.h"
#include "tensor.h"

namespace sf {

// Tensors filled from `rng`.
Tensor uniform(const Shape& shape, float low, float high, Rng& rng);
Tensor normal(const Shape& shape, float mean, float stddev, Rng& rng);
// torch.nn.init.xavier_uniform_: U(-a, a), a = sqrt(6 / (fan_in + fan_out)),
// fan_in = shape[1] * receptive field, fan_out = shape[0] * receptive field.
Tensor xavier_uniform(const Shape& shape, Rng& rng);

}  // namespace sf
