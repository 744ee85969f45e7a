// The training objective: label-smoothed cross-entropy of the decoder's
// predictions against the labels, averaged over the positions that have one.
#pragma once
#include "autograd/tensor.h"
#include "nn/transformer.h"

namespace sf::train {

// `features` [B, T, d_model] from Transformer::decode, `labels` int32 [B, T]
// on the host, [PAD] where a position has no label. Equal to
// cross_entropy(model.project(features), labels, [PAD], label_smoothing).
Tensor translation_loss(nn::Transformer& model, const Tensor& features, const Tensor& labels, float label_smoothing);

}  // namespace sf::train
