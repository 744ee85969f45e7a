#include "transformer.h"

#include "autograd/init.h"
#include "base/error.h"

namespace sf::nn {

EncoderBlock::EncoderBlock(const TransformerConfig& c, Rng& init, Rng& noise)
    : self_attention_block(c.d_model, c.h, c.dropout, init, noise),
      feed_forward_block(c.d_model, c.d_ff, c.dropout, init, noise, c.activation) {
  register_module("self_attention_block", self_attention_block);
  register_module("feed_forward_block", feed_forward_block);
  register_module("residual_connections", residual_connections);
  for (int i = 0; i < 2; ++i) residual_connections.append(c.d_model, c.dropout, noise, c.post_norm);
}

Tensor EncoderBlock::forward(const Tensor& x, const Tensor& src_mask) {
  Tensor y = residual_connections[0].forward(x, [&](const Tensor& z) {
    return self_attention_block.forward(z, z, z, src_mask);
  });
  return residual_connections[1].forward(y, [&](const Tensor& z) {
    return feed_forward_block.forward(z);
  });
}

Encoder::Encoder(const TransformerConfig& c, Rng& init, Rng& noise) {
  register_module("layers", layers);
  if (!c.post_norm) register_module("norm", norm.emplace(c.d_model));
  for (int64_t i = 0; i < c.N; ++i) layers.append(c, init, noise);
}

Tensor Encoder::forward(const Tensor& x, const Tensor& mask) {
  Tensor y = x;
  for (size_t i = 0; i < layers.size(); ++i) y = layers[i].forward(y, mask);
  return norm ? norm->forward(y) : y;
}

DecoderBlock::DecoderBlock(const TransformerConfig& c, Rng& init, Rng& noise)
    : self_attention_block(c.d_model, c.h, c.dropout, init, noise),
      cross_attention_block(c.d_model, c.h, c.dropout, init, noise),
      feed_forward_block(c.d_model, c.d_ff, c.dropout, init, noise, c.activation) {
  register_module("self_attention_block", self_attention_block);
  register_module("cross_attention_block", cross_attention_block);
  register_module("feed_forward_block", feed_forward_block);
  register_module("residual_connections", residual_connections);
  for (int i = 0; i < 3; ++i) residual_connections.append(c.d_model, c.dropout, noise, c.post_norm);
}

Tensor DecoderBlock::forward(const Tensor& x, const Tensor& memory, const Tensor& src_mask, const Tensor& tgt_mask) {
  Tensor y = residual_connections[0].forward(x, [&](const Tensor& z) {
    return self_attention_block.forward(z, z, z, tgt_mask);
  });
  y = residual_connections[1].forward(y, [&](const Tensor& z) {
    return cross_attention_block.forward(z, memory, memory, src_mask);
  });
  return residual_connections[2].forward(y, [&](const Tensor& z) {
    return feed_forward_block.forward(z);
  });
}

Tensor DecoderBlock::forward_cached(const Tensor& x, LayerCache& cache, const Tensor& src_mask,
                                    const Tensor& self_mask) {
  Tensor y = residual_connections[0].forward(x, [&](const Tensor& z) {
    // A position's key and value depend only on its own input, so the earlier
    // positions' are reused and the new ones appended.
    KeyValues fresh = self_attention_block.project_kv(z);
    if (cache.self.keys.defined()) {
      cache.self.keys = concat({cache.self.keys, fresh.keys}, 2);
      cache.self.values = concat({cache.self.values, fresh.values}, 2);
    } else {
      cache.self = fresh;
    }
    return self_attention_block.attend(z, cache.self, self_mask);
  });
  y = residual_connections[1].forward(y, [&](const Tensor& z) {
    return cross_attention_block.attend(z, cache.cross, src_mask);
  });
  return residual_connections[2].forward(y, [&](const Tensor& z) {
    return feed_forward_block.forward(z);
  });
}

Decoder::Decoder(const TransformerConfig& c, Rng& init, Rng& noise) {
  register_module("layers", layers);
  if (!c.post_norm) register_module("norm", norm.emplace(c.d_model));
  for (int64_t i = 0; i < c.N; ++i) layers.append(c, init, noise);
}

Tensor Decoder::forward(const Tensor& x, const Tensor& memory, const Tensor& src_mask, const Tensor& tgt_mask) {
  Tensor y = x;
  for (size_t i = 0; i < layers.size(); ++i) y = layers[i].forward(y, memory, src_mask, tgt_mask);
  return norm ? norm->forward(y) : y;
}

Tensor Decoder::forward_cached(const Tensor& x, DecoderCache& cache, const Tensor& src_mask,
                               const Tensor& self_mask) {
  if (cache.layers.size() != layers.size())
    internal_fail("decoder: the cache has ", cache.layers.size(), " layers, the decoder ", layers.size());
  int64_t n = x.size(1);
  // One new position sees every cached one: no mask needed. Several new ones
  // must not see each other's future.
  if (n > 1 && !self_mask.defined())
    fail("decoder: ", n, " new positions need a causal mask");
  Tensor y = x;
  for (size_t i = 0; i < layers.size(); ++i)
    y = layers[i].forward_cached(y, cache.layers[i], src_mask, self_mask);
  cache.length += n;
  return norm ? norm->forward(y) : y;
}

Transformer::Transformer(const TransformerConfig& config, Rng& init)
    : config_(config), dropout_rng_(init.next_u64()), encoder(config, init, dropout_rng_),
      decoder(config, init, dropout_rng_), src_embed(config.d_model, config.src_vocab_size, init),
      tgt_embed(config.d_model, config.tgt_vocab_size, init),
      src_pos(config.d_model, config.src_seq_len, config.dropout, dropout_rng_),
      tgt_pos(config.d_model, config.tgt_seq_len, config.dropout, dropout_rng_),
      projection_layer(config.d_model, config.tgt_vocab_size, init) {
  register_module("encoder", encoder);
  register_module("decoder", decoder);
  register_module("src_embed", src_embed);
  register_module("tgt_embed", tgt_embed);
  register_module("src_pos", src_pos);
  register_module("tgt_pos", tgt_pos);
  register_module("projection_layer", projection_layer);
  if (config.tie_embeddings) {
    if (config.src_vocab_size != config.tgt_vocab_size)
      fail("tie_embeddings: the source and target vocabularies differ (", config.src_vocab_size, " and ",
           config.tgt_vocab_size, " tokens); one matrix needs one vocabulary (shared_vocab: true)");
    tgt_embed.embedding.share_weight(src_embed.embedding.weight);
    projection_layer.proj.share_weight(src_embed.embedding.weight);
  }
}

// Token ids and masks are built on the host; each entry point takes the masks
// to the model's device once (the embedding lookups take the ids). A mask
// already there costs nothing, so decoding, which calls decode_next at every
// token, uploads its source mask once beforehand.
Tensor Transformer::encode(const Tensor& src, const Tensor& src_mask) {
  return encoder.forward(src_pos.forward(src_embed.forward(src)), src_mask.to(device()));
}

Tensor Transformer::decode(const Tensor& memory, const Tensor& src_mask, const Tensor& tgt, const Tensor& tgt_mask) {
  return decoder.forward(tgt_pos.forward(tgt_embed.forward(tgt)), memory, src_mask.to(device()),
                         tgt_mask.to(device()));
}

DecoderCache Transformer::start_decoding(const Tensor& memory) const {
  DecoderCache cache;
  for (size_t i = 0; i < decoder.layers.size(); ++i)
    cache.layers.push_back({{}, decoder.layers[i].cross_attention_block.project_kv(memory)});
  return cache;
}

Tensor Transformer::decode_next(DecoderCache& cache, const Tensor& src_mask, const Tensor& tgt,
                                const Tensor& tgt_mask) {
  return decoder.forward_cached(tgt_pos.forward(tgt_embed.forward(tgt), cache.length), cache,
                                src_mask.to(device()),
                                tgt_mask.defined() ? tgt_mask.to(device()) : Tensor());
}

std::unique_ptr<Transformer> build_transformer(const TransformerConfig& config, Rng& init) {
  if (config.src_vocab_size <= 0 || config.tgt_vocab_size <= 0 || config.d_model <= 0 ||
      config.N <= 0 || config.d_ff <= 0 || config.src_seq_len <= 0 || config.tgt_seq_len <= 0)
    internal_fail("build_transformer: sizes must be positive (vocab ", config.src_vocab_size, "/",
                  config.tgt_vocab_size, ", seq_len ", config.src_seq_len, "/", config.tgt_seq_len,
                  ", d_model ", config.d_model, ", N ", config.N, ", d_ff ", config.d_ff, ")");
  auto model = std::make_unique<Transformer>(config, init);
  for (const Tensor& p : model->parameters())
    if (p.ndim() > 1) p.copy_from(xavier_uniform(p.shape(), init));
  return model;
}

double parameter_count(const TransformerConfig& c) {
  double d = static_cast<double>(c.d_model), d_ff = static_cast<double>(c.d_ff);
  double linear = d * d + d;                            // weight and bias, d -> d
  double attention = 4 * linear;                        // w_q, w_k, w_v, w_o
  double feed_forward = (d * d_ff + d_ff) + (d_ff * d + d);
  double norm = 2 * d;                                  // alpha and bias
  double encoder_layer = attention + feed_forward + 2 * norm;
  double decoder_layer = 2 * attention + feed_forward + 3 * norm;
  double src_matrix = static_cast<double>(c.src_vocab_size) * d, tgt_matrix = static_cast<double>(c.tgt_vocab_size) * d;
  double projection_bias = static_cast<double>(c.tgt_vocab_size);
  double final_norms = c.post_norm ? 0 : 2 * norm;
  double matrices = c.tie_embeddings ? src_matrix : src_matrix + 2 * tgt_matrix;
  return matrices + projection_bias + static_cast<double>(c.N) * (encoder_layer + decoder_layer) + final_norms;
}

double state_dict_floats(const TransformerConfig& c) {
  // A tied matrix is written under each of its three names.
  double tied_copies = c.tie_embeddings ? 2 * static_cast<double>(c.src_vocab_size) * static_cast<double>(c.d_model) : 0;
  return parameter_count(c) + tied_copies +
         static_cast<double>(c.src_seq_len + c.tgt_seq_len) * static_cast<double>(c.d_model);
}

std::unique_ptr<Transformer> build_transformer(int64_t src_vocab_size, int64_t tgt_vocab_size,
                                               int64_t src_seq_len, int64_t tgt_seq_len,
                                               int64_t d_model, int64_t N, int64_t h,
                                               float dropout, int64_t d_ff, uint64_t seed) {
  Rng init(seed);
  return build_transformer({src_vocab_size, tgt_vocab_size, src_seq_len, tgt_seq_len, d_model, N,
                            h, d_ff, dropout},
                           init);
}

}  // namespace sf::nn
