#include "layers.h"

#include <cmath>

#include "autograd/init.h"
#include "base/error.h"

namespace sf::nn {

// PyTorch's Linear init (kaiming_uniform with a = sqrt(5) for the weight) comes
// to U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the weight and the bias alike.
Linear::Linear(int64_t in_features, int64_t out_features, Rng& init) {
  float bound = 1.0f / std::sqrt(static_cast<float>(in_features));
  weight = register_parameter("weight", uniform({out_features, in_features}, -bound, bound, init));
  bias = register_parameter("bias", uniform({out_features}, -bound, bound, init));
}

Tensor Linear::forward(const Tensor& x) const {
  return matmul(x, weight, {.trans_b = true}) + bias;
}

Tensor Linear::forward_relu(const Tensor& x) const {
  return bias_relu(matmul(x, weight, {.trans_b = true}), bias);
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Rng& init) {
  weight = register_parameter("weight", normal({num_embeddings, dim}, 0.0f, 1.0f, init));
}

InputEmbeddings::InputEmbeddings(int64_t d_model, int64_t vocab_size, Rng& init)
    : embedding(vocab_size, d_model, init), d_model_(d_model) {
  register_module("embedding", embedding);
}

Tensor InputEmbeddings::forward(const Tensor& ids) const {
  return embedding.forward(ids) * std::sqrt(static_cast<float>(d_model_));
}

static Tensor sinusoidal_table(int64_t d_model, int64_t seq_len) {
  Tensor pe = Tensor::zeros({1, seq_len, d_model});
  float* p = pe.data();
  for (int64_t pos = 0; pos < seq_len; ++pos)
    for (int64_t i = 0; 2 * i < d_model; ++i) {
      double angle = static_cast<double>(pos) / std::pow(10000.0, 2.0 * i / d_model);
      p[pos * d_model + 2 * i] = static_cast<float>(std::sin(angle));
      if (2 * i + 1 < d_model) p[pos * d_model + 2 * i + 1] = static_cast<float>(std::cos(angle));
    }
  return pe;
}

PositionalEncoding::PositionalEncoding(int64_t d_model, int64_t seq_len, float p, Rng& noise)
    : dropout(p, noise) {
  register_module("dropout", dropout);
  pe = register_buffer("pe", sinusoidal_table(d_model, seq_len));
}

Tensor PositionalEncoding::forward(const Tensor& x, int64_t start) {
  int64_t length = x.size(1), seq_len = pe.size(1);
  if (start + length > seq_len)
    internal_fail("positional encoding: positions ", start, "..", start + length - 1,
                  " are beyond seq_len ", seq_len);
  return dropout.forward(x + slice(pe, 1, start, start + length));
}

LayerNormalization::LayerNormalization(int64_t features, float eps) : eps_(eps) {
  alpha = register_parameter("alpha", Tensor::ones({features}));
  bias = register_parameter("bias", Tensor::zeros({features}));
}

// alpha * (x - mean) / (std + eps) + bias, one fused op.
Tensor LayerNormalization::forward(const Tensor& x) const {
  return layer_norm(x, alpha, bias, eps_);
}

const char* activation_name(Activation a) { return a == Activation::Gelu ? "gelu" : "relu"; }

std::optional<Activation> activation_named(const std::string& name) {
  for (Activation a : {Activation::Relu, Activation::Gelu})
    if (name == activation_name(a)) return a;
  return std::nullopt;
}

std::vector<std::string> activation_names() {
  return {activation_name(Activation::Relu), activation_name(Activation::Gelu)};
}

FeedForwardBlock::FeedForwardBlock(int64_t d_model, int64_t d_ff, float p, Rng& init, Rng& noise,
                                   Activation activation)
    : linear_1(d_model, d_ff, init), dropout(p, noise), linear_2(d_ff, d_model, init), activation_(activation) {
  register_module("linear_1", linear_1);
  register_module("dropout", dropout);
  register_module("linear_2", linear_2);
}

Tensor FeedForwardBlock::forward(const Tensor& x) {
  // ReLU fuses with linear_1's bias (Linear::forward_relu).
  Tensor hidden = activation_ == Activation::Gelu ? gelu(linear_1.forward(x)) : linear_1.forward_relu(x);
  return linear_2.forward(dropout.forward(hidden));
}

ResidualConnection::ResidualConnection(int64_t features, float p, Rng& noise, bool post_norm)
    : dropout(p, noise), norm(features), post_norm_(post_norm) {
  register_module("dropout", dropout);
  register_module("norm", norm);
}

Tensor ResidualConnection::forward(const Tensor& x, const std::function<Tensor(const Tensor&)>& sublayer) {
  if (post_norm_) return norm.forward(dropout.forward_add(x, sublayer(x)));
  return dropout.forward_add(x, sublayer(norm.forward(x)));
}

ProjectionLayer::ProjectionLayer(int64_t d_model, int64_t vocab_size, Rng& init)
    : proj(d_model, vocab_size, init) {
  register_module("proj", proj);
}

}  // namespace sf::nn
