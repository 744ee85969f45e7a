// The training objective: label-smoothed cross-entropy of the decoder's
// predictions against the labels, averaged over the positions that have one.
#pragma once
#include "autograd/tensor.h"
#include "data/batching.h"
#include "nn/transformer.h"

namespace sf::setup {

// `features` [B, T, d_model] from Transformer::decode, `labels` int32 [B, T]
// on the host, [PAD] where a position has no label. Equal to
// cross_entropy(model.project(features), labels, [PAD], label_smoothing).
Tensor translation_loss(nn::Transformer& model, const Tensor& features, const Tensor& labels, float label_smoothing);

// A batch's forward pass, as training, validation and scoring all run it: the
// sources encoded, the shifted targets decoded against them; the decoder's
// features [B, T, d_model].
Tensor batch_features(nn::Transformer& model, const data::Batch& batch);
// translation_loss of a batch's features against its labels.
Tensor batch_loss(nn::Transformer& model, const data::Batch& batch, float label_smoothing);

}  // namespace sf::setup
