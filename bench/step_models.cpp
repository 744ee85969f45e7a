#include "step_models.h"

#include <numeric>
#include <vector>

#include "data/batching.h"
#include "setup/loss.h"

namespace sf::bench {

const StepConfig& config_named(const std::string& name) { return name == "small" ? kSmall : kTiny; }

std::unique_ptr<nn::Transformer> build(const StepConfig& c, Device& device) {
  Rng init(42);
  auto model = nn::build_transformer({c.vocab, c.vocab, c.seq_len, c.seq_len, c.d_model, c.N, c.h,
                                      c.d_ff, 0.1f},
                                     init);
  model->to(device);
  return model;
}

StepBatch random_batch(const StepConfig& c, Rng& rng) {
  const int64_t specials = std::ssize(data::kSpecialTokens);
  auto word = [&] { return static_cast<int32_t>(specials + rng.next_u64() % (c.vocab - specials)); };
  std::vector<data::Example> examples(static_cast<size_t>(c.batch));
  for (data::Example& e : examples) {
    int64_t width = c.seq_len / 2 + static_cast<int64_t>(rng.next_u64() % static_cast<uint64_t>(c.seq_len / 2));
    for (int64_t t = 0; t < data::longest_source(width); ++t) {
      e.src.push_back(word());
      e.tgt.push_back(word());
    }
  }
  std::vector<size_t> all(examples.size());
  std::iota(all.begin(), all.end(), 0);
  data::Batch b = data::BatchedDataset(std::move(examples), {c.batch, c.seq_len, false, false}).make_batch(all);
  return {b.encoder_input, b.decoder_input, b.label, b.encoder_mask, b.decoder_mask};
}

Tensor step_loss(nn::Transformer& model, const StepBatch& b) {
  Tensor memory = model.encode(b.src, b.src_mask);
  return setup::translation_loss(model, model.decode(memory, b.src_mask, b.tgt, b.tgt_mask), b.label, 0.1f);
}

TrainingSteps::TrainingSteps(const StepConfig& c, Device& device)
    : model(build(c, device)), adam(model->named_parameters(), 1e-4f) {
  Rng data(7);
  for (int i = 0; i < 4; ++i) batches.push_back(random_batch(c, data));
}

void TrainingSteps::step(DType precision) {
  Tensor loss;
  {
    AutocastGuard autocast(precision);
    loss = step_loss(*model, next_batch());
  }
  loss.backward();
  adam.step();
  adam.zero_grad();
  (void)loss.item();
}

}  // namespace sf::bench
