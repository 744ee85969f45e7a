#include "step_models.h"

#include <vector>

#include "data/framing.h"

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
  const int32_t pad = 1, sos = 2, eos = 3;
  int64_t s = c.seq_len;
  std::vector<int32_t> src(c.batch * s, pad), tgt(c.batch * s, pad), label(c.batch * s, pad);
  for (int64_t b = 0; b < c.batch; ++b) {
    int64_t length = s / 2 + static_cast<int64_t>(rng.next_u64() % static_cast<uint64_t>(s / 2)) - 2;
    src[b * s] = tgt[b * s] = sos;
    for (int64_t t = 1; t <= length; ++t) {
      src[b * s + t] = static_cast<int32_t>(4 + rng.next_u64() % (c.vocab - 4));
      tgt[b * s + t] = static_cast<int32_t>(4 + rng.next_u64() % (c.vocab - 4));
      label[b * s + t - 1] = tgt[b * s + t];
    }
    src[b * s + length + 1] = eos;
    label[b * s + length] = eos;
  }
  StepBatch batch{Tensor::from_ints(src, {c.batch, s}), Tensor::from_ints(tgt, {c.batch, s}),
                  Tensor::from_ints(label, {c.batch, s}), {}, {}};
  batch.src_mask = data::encoder_keep_mask(batch.src);
  batch.tgt_mask = data::decoder_keep_mask(batch.tgt);
  return batch;
}

}  // namespace sf::bench
