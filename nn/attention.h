// Multi-head scaled dot-product attention (Vaswani et al. 2017, §3.2.1-3.2.2):
//   Attention(Q, K, V) = softmax(Q Kᵀ / √d_k, masked) V
// for h heads of d_k = d_model / h features each, with projections w_q, w_k,
// w_v in and w_o out.
//
// Masks are int32 and mean KEEP: 1 where a query may attend to a key, 0 where
// it may not (data/framing.h builds them), or undefined for none. They
// broadcast against the scores [B, h, queries, keys]; hidden scores are set to
// -1e9 before the softmax, so hidden keys get weight exactly 0.
#pragma once
#include <functional>

#include "layers.h"

namespace sf::nn {

// Keys and values split into heads, [B, h, keys, d_k] each. For incremental
// decoding these are cached: the self-attention's grow by one position per
// step; the cross-attention's (of the encoder output) are computed once.
struct KeyValues {
  Tensor keys, values;
};

class MultiHeadAttentionBlock : public Module {
 public:
  MultiHeadAttentionBlock(int64_t d_model, int64_t h, float dropout, Rng& init, Rng& noise);

  // q [B, Sq, d_model], k and v [B, Sk, d_model] -> [B, Sq, d_model].
  Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask);

  // The two halves of forward, for the cached decoding path:
  // project_kv(x) = (w_k x, w_v x) split into heads (bf16 under a bf16 autocast);
  // attend(q, kv, mask) = w_o(concat of the heads' attention of w_q q over kv).
  KeyValues project_kv(const Tensor& x) const;
  Tensor attend(const Tensor& q, const KeyValues& kv, const Tensor& mask);

  Linear w_q, w_k, w_v, w_o;
  Dropout dropout;

  // Observes each call's attention weights [B, h, Sq, Sk] (before dropout,
  // detached), as a PyTorch forward hook would: how decoding records what
  // the model attended to (infer/decoding.h: AttentionRecorder). The block
  // keeps nothing itself.
  std::function<void(const Tensor& weights)> weights_hook;

 private:
  Tensor split_heads(const Tensor& x) const;  // [B, S, d_model] -> [B, h, S, d_k]
  Tensor merge_heads(const Tensor& x) const;  // [B, h, S, d_k] -> [B, S, d_model]

  int64_t d_model_, h_, d_k_;
};

}  // namespace sf::nn
