// Generating translations with a trained model, batched over sentences, on the
// incremental (KV-cache) decoding path: each new token costs one position of
// decoder work, not the whole prefix again.
#pragma once
#include <cstdint>
#include <vector>

#include "data/framing.h"
#include "nn/transformer.h"

namespace sf::infer {

using TokenIds = std::vector<int32_t>;

// One attention block's weights for one sentence, [heads, queries, keys],
// each row summing to 1 (a decoder self-attention row is 0 past its query).
struct AttentionWeights {
  int64_t heads = 0, queries = 0, keys = 0;
  std::vector<float> values;
};

// What the model attended to while translating one sentence: the positions
// it ran (the framed source, and the decoder inputs: [SOS] and every
// generated token fed back) and each layer's weights over them.
struct AttentionRecord {
  TokenIds source, target;
  std::vector<AttentionWeights> encoder_self, decoder_self, cross;  // per layer
};

// Records every attention block's weights while it lives, through the
// blocks' weights_hook (unset again when it goes): per encoder layer, per
// decoder layer, each call's weights in the order the calls came.
class AttentionRecorder {
 public:
  explicit AttentionRecorder(nn::Transformer& model);
  ~AttentionRecorder();
  AttentionRecorder(const AttentionRecorder&) = delete;
  AttentionRecorder& operator=(const AttentionRecorder&) = delete;

  std::vector<std::vector<Tensor>> encoder_self, decoder_self, cross;

 private:
  nn::Transformer& model_;
};

// Greedy decoding of each row of src [B, S] (framed sources, see
// data/framing.h): start from [SOS], append the most likely next token until
// [EOS] or until the decoder input holds max_len tokens. Results exclude [SOS]
// and [EOS]. With `attention`, it also receives each sentence's record,
// gathered step by step from the same forward passes (nothing is recomputed).
std::vector<TokenIds> greedy_decode(nn::Transformer& model, const Tensor& src, int64_t max_len,
                                    std::vector<AttentionRecord>* attention = nullptr);

struct Hypothesis {
  TokenIds tokens;        // without [SOS] and [EOS]
  double log_prob = 0.0;  // sum of log p of the tokens, [EOS] included when generated
  double score = 0.0;     // log_prob / length^length_penalty
};

// Beam search of width `beam` for each row of src [B, S], batched: each source
// encoded once, one decoder row per live hypothesis (finished ones leave). A
// hypothesis finishes at [EOS] (or when the decoder input reaches max_len);
// finished hypotheses are ranked by log_prob / length^length_penalty, length
// counting the generated tokens with the [EOS]. A sentence stops when it has
// `beam` finished hypotheses. Width 1 is exactly greedy decoding. With
// `attention`, it also receives each sentence's record for the hypothesis
// returned, read from the steps of the beams it descends from.
std::vector<Hypothesis> beam_search(nn::Transformer& model, const Tensor& src, int64_t beam,
                                    float length_penalty, int64_t max_len,
                                    std::vector<AttentionRecord>* attention = nullptr);

}  // namespace sf::infer
