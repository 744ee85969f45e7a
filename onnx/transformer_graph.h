// The Transformer (nn/transformer.h) as the two ONNX graphs Hugging Face's
// exporters (Optimum) write for an encoder-decoder model, computing exactly
// what the model computes (docs/14-onnx.md draws one attention block):
//
// encoder_graph: input_ids, attention_mask [batch, source length] (int64; the
//   mask 1 on tokens, 0 on [PAD]) -> last_hidden_state [batch, length, d_model].
//
// decoder_graph, the "merged" decoder: one graph for the first step and for
//   every later one. Inputs: input_ids [batch, n] (the new positions),
//   encoder_attention_mask, encoder_hidden_states, for each layer i
//   past_key_values.i.decoder.{key,value} [batch, h, past, d_k] (its
//   self-attention keys and values of the earlier positions) and
//   past_key_values.i.encoder.{key,value} [batch, h, source length, d_k] (its
//   cross-attention ones), and use_cache_branch (bool [1]). An If node on
//   use_cache_branch picks the cache: true reads the past inputs; false
//   ignores them (a runtime passes them empty) and computes the
//   cross-attention keys and values from encoder_hidden_states. Outputs:
//   logits [batch, n, V_tgt] (before log_softmax), and present.i.* (the past
//   with the new positions appended; the cross-attention ones as computed).
//   The new positions attend to every cached one and causally to each other,
//   at positions past, past + 1, ... (their sinusoidal encodings).
#pragma once
#include "ir.h"
#include "nn/transformer.h"

namespace sf::onnx {

Graph encoder_graph(const nn::Transformer& model);
Graph decoder_graph(const nn::Transformer& model);

}  // namespace sf::onnx
