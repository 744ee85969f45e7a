// Global gradient-norm clipping, as torch.nn.utils.clip_grad_norm_.
#pragma once
#include "optimizer.h"

namespace sf::optim {

// The L2 norm of all the parameters' gradients taken together.
float grad_norm(const NamedTensors& params);

// Scales every gradient by max_norm / (norm + 1e-6) when that is below 1, so
// the direction is kept. Returns the norm before clipping.
float clip_grad_norm(const NamedTensors& params, float max_norm);

}  // namespace sf::optim
