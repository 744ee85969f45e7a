// The Transformer's building blocks other than attention (Vaswani et al. 2017,
// §3.3-§3.5; the maths is derived in docs/04-layers.md), each a Module whose
// parameter names are the state_dict keys listed in docs/05-transformer.md.
// Constructors take `init`, the generator for the initial weights (PyTorch's
// defaults; build_transformer then re-initialises every 2-D+ parameter with
// Xavier-uniform), and `noise`, the model's dropout generator.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "module.h"

namespace sf::nn {

// torch.nn.Linear: y = x W^T + b, weight [out, in], bias [out], both drawn from
// U(-1/sqrt(in), 1/sqrt(in)) as PyTorch's default initialisation gives.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, Rng& init);
  Tensor forward(const Tensor& x) const;
  Tensor forward_relu(const Tensor& x) const;  // relu(forward(x)), bias and relu fused
  // Weight tying: this layer's weight becomes `shared` (same shape).
  void share_weight(const Tensor& shared) { weight = replace_parameter("weight", shared); }

  Tensor weight, bias;
};

// torch.nn.Embedding: rows of weight [num_embeddings, dim], initialised N(0, 1).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, Rng& init);
  Tensor forward(const Tensor& ids) const { return embedding(weight, ids); }
  // Weight tying: this table becomes `shared` (same shape).
  void share_weight(const Tensor& shared) { weight = replace_parameter("weight", shared); }

  Tensor weight;
};

// Token ids [B, S] -> embeddings [B, S, d_model], scaled by sqrt(d_model).
class InputEmbeddings : public Module {
 public:
  InputEmbeddings(int64_t d_model, int64_t vocab_size, Rng& init);
  Tensor forward(const Tensor& ids) const;

  Embedding embedding;

 private:
  int64_t d_model_;
};

// Adds the sinusoidal encoding of positions start, start+1, ... to x [B, S, D]
// and applies dropout. pe[0, pos, 2i] = sin(pos / 10000^(2i/D)),
// pe[0, pos, 2i+1] = cos(pos / 10000^(2i/D)); a buffer [1, seq_len, D], saved
// in the state dict as a registered buffer is in PyTorch's.
class PositionalEncoding : public Module {
 public:
  PositionalEncoding(int64_t d_model, int64_t seq_len, float dropout, Rng& noise);
  Tensor forward(const Tensor& x, int64_t start = 0);

  Tensor pe;
  Dropout dropout;
};

// alpha * (x - mean) / (std + eps) + bias over the last dim, std unbiased
// (n - 1), eps added to the std (not torch.nn.LayerNorm, which adds eps to
// the biased variance); docs/04-layers.md works one example by hand.
class LayerNormalization : public Module {
 public:
  explicit LayerNormalization(int64_t features, float eps = 1e-6f);
  Tensor forward(const Tensor& x) const;

  Tensor alpha, bias;

 private:
  float eps_;
};

// The feed-forward block's nonlinearity: the paper's ReLU, or GELU (tanh
// form, autograd/ops.h: gelu). Either has no parameters, so a model's state
// dict is the same with both.
enum class Activation { Relu, Gelu };
// "relu", "gelu": the config's and a checkpoint's spelling.
const char* activation_name(Activation a);
// The activation of that name, or none.
std::optional<Activation> activation_named(const std::string& name);
std::vector<std::string> activation_names();

// linear_2(dropout(activation(linear_1(x)))).
class FeedForwardBlock : public Module {
 public:
  FeedForwardBlock(int64_t d_model, int64_t d_ff, float dropout, Rng& init, Rng& noise,
                   Activation activation = Activation::Relu);
  Tensor forward(const Tensor& x);

  Linear linear_1;
  Dropout dropout;
  Linear linear_2;

 private:
  Activation activation_;
};

// Pre-norm residual: x + dropout(sublayer(norm(x))).
class ResidualConnection : public Module {
 public:
  // `post_norm`: norm(x + dropout(sublayer(x))); else x + dropout(sublayer(norm(x))).
  ResidualConnection(int64_t features, float dropout, Rng& noise, bool post_norm = false);
  Tensor forward(const Tensor& x, const std::function<Tensor(const Tensor&)>& sublayer);

  Dropout dropout;
  LayerNormalization norm;

 private:
  bool post_norm_;
};

// [..., d_model] -> log-probabilities [..., vocab_size]: log_softmax(proj(x)).
class ProjectionLayer : public Module {
 public:
  ProjectionLayer(int64_t d_model, int64_t vocab_size, Rng& init);
  Tensor forward(const Tensor& x) const { return log_softmax(proj.forward(x)); }

  Linear proj;
};

}  // namespace sf::nn
