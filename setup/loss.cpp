#include "loss.h"

#include "autograd/ops.h"
#include "data/tokenizer.h"

namespace sf::setup {

// A padded position's loss term is ignored, so its logits are never needed.
// The projection to the vocabulary is the largest product of a step (for the
// bench's small model, a quarter of the step's multiply-adds, forward and
// backward), and padding is up to a quarter of a batch (the bench's random
// lengths; bucketing by length leaves less): the features of the labelled
// positions are gathered first and only they are projected. The mean is over
// the same rows, so the loss and every gradient are unchanged.
Tensor translation_loss(nn::Transformer& model, const Tensor& features, const Tensor& labels, float label_smoothing) {
  const std::vector<int32_t> label_ids = labels.to_int_vector();
  std::vector<int32_t> rows, targets;
  for (size_t i = 0; i < label_ids.size(); ++i)
    if (label_ids[i] != data::kPadId) {
      rows.push_back(static_cast<int32_t>(i));
      targets.push_back(label_ids[i]);
    }
  const auto count = static_cast<int64_t>(rows.size());
  // Nothing to drop, or nothing left (a mean over no rows: NaN, as in PyTorch).
  if (count == 0 || count == static_cast<int64_t>(label_ids.size()))
    return cross_entropy(model.logits(features), labels, data::kPadId, label_smoothing);
  Tensor labelled = index_select(reshape(features, {-1, features.size(-1)}), Tensor::from_ints(rows, {count}));
  return cross_entropy(model.logits(labelled), Tensor::from_ints(targets, {count}), data::kPadId, label_smoothing);
}

Tensor batch_features(nn::Transformer& model, const data::Batch& batch) {
  Tensor memory = model.encode(batch.encoder_input, batch.encoder_mask);
  return model.decode(memory, batch.encoder_mask, batch.decoder_input, batch.decoder_mask);
}

Tensor batch_loss(nn::Transformer& model, const data::Batch& batch, float label_smoothing) {
  return translation_loss(model, batch_features(model, batch), batch.label, label_smoothing);
}

}  // namespace sf::setup
