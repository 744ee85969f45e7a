#include "attention.h"

#include <cmath>

#include "base/error.h"

namespace sf::nn {

MultiHeadAttentionBlock::MultiHeadAttentionBlock(int64_t d_model, int64_t h, float p, Rng& init, Rng& noise)
    : w_q(d_model, d_model, init), w_k(d_model, d_model, init), w_v(d_model, d_model, init),
      w_o(d_model, d_model, init), dropout(p, noise), d_model_(d_model), h_(h), d_k_(h > 0 ? d_model / h : 0) {
  if (h <= 0 || d_model % h != 0) internal_fail("attention: d_model ", d_model, " is not divisible by h ", h);
  register_module("w_q", w_q);
  register_module("w_k", w_k);
  register_module("w_v", w_v);
  register_module("w_o", w_o);
  register_module("dropout", dropout);
}

Tensor MultiHeadAttentionBlock::split_heads(const Tensor& x) const {
  return transpose(reshape(x, {x.size(0), x.size(1), h_, d_k_}), 1, 2);
}

Tensor MultiHeadAttentionBlock::merge_heads(const Tensor& x) const {
  return reshape(transpose(x, 1, 2), {x.size(0), x.size(2), d_model_});
}

// Under a bf16 autocast the cache keeps the keys and values as the products
// read them (docs/13-bf16.md), rounded once here rather than at every step.
KeyValues MultiHeadAttentionBlock::project_kv(const Tensor& x) const {
  return {autocast_operand(split_heads(w_k.forward(x))), autocast_operand(split_heads(w_v.forward(x)))};
}

Tensor MultiHeadAttentionBlock::attend(const Tensor& q, const KeyValues& kv, const Tensor& mask) {
  Tensor query = split_heads(w_q.forward(q));
  // weights = softmax(Q K^T / sqrt(d_k)) with hidden keys' scores set to -1e9,
  // [B, h, Sq, Sk]; the scaling, masking and softmax are one fused op.
  Tensor scores = matmul(query, kv.keys, {.trans_b = true});
  Tensor weights = masked_softmax(scores, mask, 1.0f / std::sqrt(static_cast<float>(d_k_)));
  if (weights_hook) weights_hook(weights.detach());
  // weights V, heads concatenated, then the output projection.
  return w_o.forward(merge_heads(matmul(dropout.forward(weights), kv.values)));
}

Tensor MultiHeadAttentionBlock::forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  return attend(q, {split_heads(w_k.forward(k)), split_heads(w_v.forward(v))}, mask);
}

}  // namespace sf::nn
