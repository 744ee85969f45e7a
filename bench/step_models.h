// The two models of the end-to-end benchmarks and their batches of random
// tokens (train_step.cpp, step_profile.cpp).
#pragma once
#include <memory>
#include <string>

#include "base/random.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"

namespace sf::bench {

struct StepConfig {
  const char* name;
  int64_t d_model, N, h, d_ff, seq_len, batch, vocab;
};

// The sizes of a toy task (tiny) and of a small real corpus such as Multi30k (small).
inline const StepConfig kTiny{"tiny", 128, 2, 4, 512, 32, 32, 4000};
inline const StepConfig kSmall{"small", 256, 3, 8, 1024, 64, 32, 8000};

const StepConfig& config_named(const std::string& name);  // "tiny" or "small"

// The model, initialised from a fixed seed, moved to `device`; dropout 0.1.
std::unique_ptr<nn::Transformer> build(const StepConfig& c, Device& device);

struct StepBatch {
  Tensor src, tgt, label, src_mask, tgt_mask;
};

// Framed source lengths uniform in [S/2, S-1], a target as long as its
// source, padded to S: a batch as training builds it (data::BatchedDataset):
// [SOS] tokens [EOS] [PAD]... for the encoder, [SOS] tokens [PAD]... for the
// decoder, tokens [EOS] [PAD]... as labels.
StepBatch random_batch(const StepConfig& c, Rng& rng);

// The forward pass and the loss of a training step (label smoothing 0.1), as
// training computes them.
Tensor step_loss(nn::Transformer& model, const StepBatch& b);

// What a benchmark's training steps run on: the model on `device`, its Adam
// (lr 1e-4) and 4 random batches taken in turn.
struct TrainingSteps {
  TrainingSteps(const StepConfig& c, Device& device);
  const StepBatch& next_batch() { return batches[next++ % batches.size()]; }
  // One whole step on the next batch: the forward pass and the loss with
  // matrix products in `precision` (DType::BF16: mixed precision, as
  // torch.autocast), backward, Adam; over when the loss is on the host, as in
  // training.
  void step(DType precision);

  std::unique_ptr<nn::Transformer> model;
  optim::Adam adam;
  std::vector<StepBatch> batches;
  size_t next = 0;
};

}  // namespace sf::bench
