// The attention explorer: an interactive view of what the model attended to
// while translating a few sentences, in the training report and in the page
// `translate --attention OUT.html` writes. Pick a sentence, a block (encoder
// self-attention, decoder self-attention, cross-attention), a layer and a head
// or the mean over heads; hovering or focusing a query token (arrow keys move
// between them) draws its weights as bars over the key tokens, the largest
// ones highlighted, beside the block's whole matrix. Self-contained: the
// weights, quantised to 8 bits, and the script and style are in the page.
#pragma once
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "infer/decoding.h"

namespace sf::report {

struct ExplorerSentence {
  std::string text, translation;  // the source as given, its translation as printed
  infer::AttentionRecord record;
};

// The explorer as one <section id="explorer">: its data, controls, style and script.
std::string attention_explorer(const std::vector<ExplorerSentence>& sentences, const data::Tokenizer& src_tokenizer,
                               const data::Tokenizer& tgt_tokenizer);

// A page holding only the explorer, titled `title`.
std::string attention_explorer_page(const std::string& title, const std::vector<ExplorerSentence>& sentences,
                                    const data::Tokenizer& src_tokenizer, const data::Tokenizer& tgt_tokenizer);

// Weights in [0, 1] as bytes round(255 w), base64-encoded (RFC 4648).
std::string quantised_base64(const std::vector<float>& weights);

}  // namespace sf::report
