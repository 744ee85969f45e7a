// Generating translations with a trained model, batched over sentences, on the
// incremental (KV-cache) decoding path: each new token costs one position of
// decoder work, not the whole prefix again.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/transformer.h"

namespace sf::train {

constexpr int32_t kSosId = 2, kEosId = 3;  // [SOS], [EOS] (SPEC §5)

using TokenIds = std::vector<int32_t>;

// The seed's greedy_decode for each row of src [B, S] (padded with [PAD]):
// start from [SOS], append the most likely next token until [EOS] or until
// the decoder input holds max_len tokens. Results exclude [SOS] and [EOS].
std::vector<TokenIds> greedy_decode(nn::Transformer& model, const Tensor& src, int64_t max_len);

struct Hypothesis {
  TokenIds tokens;        // without [SOS] and [EOS]
  double log_prob = 0.0;  // sum of log p of the tokens, [EOS] included when generated
  double score = 0.0;     // log_prob / length^length_penalty
};

// Beam search of width `beam` for each row of src [B, S], batched. A
// hypothesis finishes at [EOS] (or when the decoder input reaches max_len);
// finished hypotheses are ranked by log_prob / length^length_penalty, length
// counting the generated tokens with the [EOS]. A sentence stops when it has
// `beam` finished hypotheses. Width 1 is exactly greedy decoding.
std::vector<Hypothesis> beam_search(nn::Transformer& model, const Tensor& src, int64_t beam,
                                    float length_penalty, int64_t max_len);

}  // namespace sf::train
