// The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et
// al. 2017, §3), with PyTorch-style state_dict names (docs/05-transformer.md):
// pre-norm residual blocks and a final norm after each stack (or the paper's
// post-norm blocks), projection to log-probabilities.
//
//   encode(src, src_mask)                      -> memory   [B, S, d_model]
//   decode(memory, src_mask, tgt, tgt_mask)    -> features [B, T, d_model]
//   project(features)                          -> log p    [B, T, V_tgt]
//   logits(features)                           -> z        [B, T, V_tgt], log p = log_softmax(z)
//
// Dropout sits in four places (Vaswani et al. 2017, §5.4, names two of them):
// after embedding + positional encoding, on the attention weights, inside the
// feed-forward block and on each sublayer's output; eval() turns all of it off.
// The model owns its one dropout generator (dropout_rng()), which training saves
// and restores.
//
// Incremental decoding: start_decoding(memory) computes each layer's
// cross-attention keys/values once; decode_next(cache, src_mask, tokens,
// tgt_mask) then runs only the new positions, attending to the cached
// keys/values of the earlier ones, and gives the same features as decode()
// over the whole prefix.
//
// Masks come in as tensors (int32, 1 = keep; data/framing.h builds them): the
// model knows no token ids.
#pragma once
#include <memory>
#include <optional>

#include "attention.h"

namespace sf::nn {

struct TransformerConfig {
  int64_t src_vocab_size = 0, tgt_vocab_size = 0;
  int64_t src_seq_len = 350, tgt_seq_len = 350;
  int64_t d_model = 512, N = 6, h = 8, d_ff = 2048;
  float dropout = 0.1f;
  Activation activation = Activation::Relu;  // the feed-forward blocks'
  // Where each block's layer norm sits: before its sublayer, x +
  // dropout(sublayer(norm(x))), with a final norm after each stack
  // (pre-norm, the default); or after the residual sum, norm(x +
  // dropout(sublayer(x))), with none (the paper's post-norm, §3.1).
  bool post_norm = false;
  // The source embedding, the target embedding and the projection's weight
  // are one matrix (Press & Wolf 2017; Vaswani et al. 2017, §3.4): one
  // vocabulary for both languages. Each name is still in the state dict.
  bool tie_embeddings = false;
};

class EncoderBlock : public Module {
 public:
  EncoderBlock(const TransformerConfig& c, Rng& init, Rng& noise);
  Tensor forward(const Tensor& x, const Tensor& src_mask);

  MultiHeadAttentionBlock self_attention_block;
  FeedForwardBlock feed_forward_block;
  ModuleList<ResidualConnection> residual_connections;  // 0: attention, 1: feed-forward
};

class Encoder : public Module {
 public:
  Encoder(const TransformerConfig& c, Rng& init, Rng& noise);
  Tensor forward(const Tensor& x, const Tensor& mask);

  ModuleList<EncoderBlock> layers;
  std::optional<LayerNormalization> norm;  // pre-norm only
};

// One decoder layer's cache: its self-attention keys/values of every position
// decoded so far, and its cross-attention keys/values of the encoder output.
struct LayerCache {
  KeyValues self, cross;
};

struct DecoderCache {
  std::vector<LayerCache> layers;
  int64_t length = 0;  // positions decoded so far
};

class DecoderBlock : public Module {
 public:
  DecoderBlock(const TransformerConfig& c, Rng& init, Rng& noise);
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& src_mask, const Tensor& tgt_mask);
  // The same for new positions x [B, n, d_model], appending their self-attention
  // keys/values to `cache`; self_mask [., 1, n, length + n] or undefined.
  Tensor forward_cached(const Tensor& x, LayerCache& cache, const Tensor& src_mask, const Tensor& self_mask);

  MultiHeadAttentionBlock self_attention_block, cross_attention_block;
  FeedForwardBlock feed_forward_block;
  ModuleList<ResidualConnection> residual_connections;  // 0: self, 1: cross, 2: feed-forward
};

class Decoder : public Module {
 public:
  Decoder(const TransformerConfig& c, Rng& init, Rng& noise);
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& src_mask, const Tensor& tgt_mask);
  Tensor forward_cached(const Tensor& x, DecoderCache& cache, const Tensor& src_mask, const Tensor& self_mask);

  ModuleList<DecoderBlock> layers;
  std::optional<LayerNormalization> norm;  // pre-norm only
};

class Transformer : public Module {
 public:
  // Parameters get PyTorch's default initialisation from `init`; the dropout
  // generator is seeded from it too. build_transformer adds the Xavier init.
  Transformer(const TransformerConfig& config, Rng& init);

  Tensor encode(const Tensor& src, const Tensor& src_mask);
  Tensor decode(const Tensor& memory, const Tensor& src_mask, const Tensor& tgt, const Tensor& tgt_mask);
  Tensor project(const Tensor& x) { return projection_layer.forward(x); }
  // The projection before its log_softmax. cross_entropy normalises what it
  // is given itself, and log_softmax(log_softmax(z)) = log_softmax(z), so the
  // loss of logits(x) equals the loss of project(x): training skips two
  // passes over the [tokens, vocab] matrix (forward and backward), and greedy
  // decoding takes the argmax of logits, which is the argmax of log p.
  Tensor logits(const Tensor& x) { return projection_layer.proj.forward(x); }

  DecoderCache start_decoding(const Tensor& memory) const;
  // tgt [B, n] are the next n target tokens (positions cache.length ...);
  // returns their decoder features [B, n, d_model]. tgt_mask [., 1, n,
  // cache.length + n] keeps what the new positions may see; it may be
  // undefined for one new position, which sees every cached one.
  Tensor decode_next(DecoderCache& cache, const Tensor& src_mask, const Tensor& tgt,
                     const Tensor& tgt_mask = Tensor());

  const TransformerConfig& config() const { return config_; }
  Rng& dropout_rng() { return dropout_rng_; }

 private:
  TransformerConfig config_;
  Rng dropout_rng_;

 public:
  // Registered in this order, so state_dict() lists names in the order a PyTorch
  // module declaring these members in this order would.
  Encoder encoder;
  Decoder decoder;
  InputEmbeddings src_embed, tgt_embed;
  PositionalEncoding src_pos, tgt_pos;
  ProjectionLayer projection_layer;
};

// build_transformer: the model, then Xavier-uniform init of every
// parameter with 2+ dims. Linear biases keep PyTorch's default init, alpha 1,
// bias 0. Same config and seed, same weights.
std::unique_ptr<Transformer> build_transformer(const TransformerConfig& config, Rng& init);
// The number of parameters build_transformer(config) makes, computed without
// building it (as a double: an absurd config must not overflow the count).
double parameter_count(const TransformerConfig& config);
// Floats in its state dict: the parameters and the positional-encoding tables.
double state_dict_floats(const TransformerConfig& config);
std::unique_ptr<Transformer> build_transformer(int64_t src_vocab_size, int64_t tgt_vocab_size,
                                               int64_t src_seq_len, int64_t tgt_seq_len,
                                               int64_t d_model = 512, int64_t N = 6,
                                               int64_t h = 8, float dropout = 0.1f,
                                               int64_t d_ff = 2048, uint64_t seed = 42);

}  // namespace sf::nn
