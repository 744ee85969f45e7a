// A tiny model trained briefly to reverse sentences, and sentences to give
// it: what the decoding tests decode.
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include "optim/optimizer.h"
#include "test_nn_helpers.h"

namespace sf::testing {

// Random sentences over the non-special ids 4..10.
inline std::vector<std::vector<int32_t>> random_sentences(Rng& rng, int count, int min_len, int max_len) {
  std::vector<std::vector<int32_t>> out(count);
  for (auto& s : out) {
    int64_t len = min_len + static_cast<int64_t>(rng.below(max_len - min_len + 1));
    for (int64_t i = 0; i < len; ++i) s.push_back(4 + static_cast<int32_t>(rng.below(7)));
  }
  return out;
}

// A tiny model trained briefly to reverse its input: confident but imperfect,
// so beams have real choices to make.
inline std::unique_ptr<nn::Transformer> trained_reverser() {
  nn::TransformerConfig c = tiny_config();
  c.d_model = 32;
  c.h = 4;
  c.d_ff = 64;
  c.dropout = 0.0f;
  auto model = tiny_model(c, 7);
  optim::Adam adam(model->named_parameters(), 3e-3f);
  Rng rng(11);
  for (int step = 0; step < 400; ++step) {
    auto src = random_sentences(rng, 16, 2, 6);
    auto tgt = src;
    for (auto& s : tgt) std::reverse(s.begin(), s.end());
    Batch b = make_batch(src, tgt, 8);
    adam.zero_grad();
    batch_loss(*model, b, 0.0f).backward();
    adam.step();
  }
  model->eval();
  return model;
}

}  // namespace sf::testing
