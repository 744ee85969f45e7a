// Global gradient-norm clipping, as torch.nn.utils.clip_grad_norm_.
#pragma once
#include "optimizer.h"

namespace sf::optim {

// The L2 norm of all the parameters' gradients taken together.
float grad_norm(const NamedTensors& params);

// Scales every gradient by max_norm / (norm + 1e-6) when that is below 1, so
// the direction is kept. Returns the norm before clipping.
float clip_grad_norm(const NamedTensors& params, float max_norm);

// The same in pieces, for a ZeRO-1 rank that holds the summed gradients of
// its slices alone (dist/data_parallel.h): the sum of the squares of the
// elements `slices[i]` of each gradient (the ranks' sums add up to the
// squared norm), and the scaling of those elements given the whole norm.
double grad_squares(const NamedTensors& params, const std::vector<Slice>& slices);
void clip_to_norm(const NamedTensors& params, const std::vector<Slice>& slices, float norm, float max_norm);

}  // namespace sf::optim
