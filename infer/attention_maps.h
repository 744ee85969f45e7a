// Attention heatmaps: what each head of each layer attends to for one sentence
// pair, as SVG with the tokens on the axes. Used by `translate --attention` and
// by the training report.
#pragma once
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "infer/decoding.h"

namespace sf::infer {

struct AttentionMap {
  std::string title;                    // e.g. "decoder layer 0 cross-attention, head 3"
  std::vector<std::string> rows, cols;  // query tokens, key tokens
  std::vector<float> weights;           // [rows, cols], each row sums to 1
};

// One map per layer and head of what greedy decoding recorded (see
// greedy_decode's `attention`): encoder self-attention, then per decoder layer
// its self-attention and cross-attention, tokens as the tokenizers spell them.
std::vector<AttentionMap> attention_maps(const AttentionRecord& record, const data::Tokenizer& src_tokenizer,
                                         const data::Tokenizer& tgt_tokenizer);

// The maps as one <svg> element, heads side by side and one row per block.
std::string attention_svg(const std::vector<AttentionMap>& maps, int64_t heads_per_row);

// The tokens of `ids` as the tokenizer spells them, special tokens included.
std::vector<std::string> token_texts(const data::Tokenizer& tokenizer, const TokenIds& ids);

// Escapes text for XML/HTML.
std::string escape_xml(const std::string& text);

}  // namespace sf::infer
