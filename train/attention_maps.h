// Attention heatmaps: what each head of each layer attends to for one sentence
// pair, as SVG with the tokens on the axes. Used by `translate --attention` and
// by the training report.
#pragma once
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "nn/transformer.h"

namespace sf::train {

struct AttentionMap {
  std::string title;                    // e.g. "decoder layer 0 cross-attention, head 3"
  std::vector<std::string> rows, cols;  // query tokens, key tokens
  std::vector<float> weights;           // [rows, cols], each row sums to 1
};

// Runs the model (eval mode, no grad) on source ids and the target ids that
// follow [SOS] (e.g. a translation), and collects every attention block's
// weights: encoder self-attention, decoder self-attention and cross-attention,
// per layer and head.
std::vector<AttentionMap> capture_attention(nn::Transformer& model, const data::Tokenizer& src_tokenizer,
                                            const data::Tokenizer& tgt_tokenizer,
                                            const std::vector<int32_t>& src,
                                            const std::vector<int32_t>& tgt);

// The maps as one <svg> element, heads side by side and one row per block.
std::string attention_svg(const std::vector<AttentionMap>& maps, int64_t heads_per_row);

// Escapes text for XML/HTML.
std::string escape_xml(const std::string& text);

}  // namespace sf::train
