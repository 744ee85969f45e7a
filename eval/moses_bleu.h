// BLEU as the multimodal-translation papers on Multi30k report it (the WMT
// multimodal task, and fairseq's baselines such as transformer_tiny's 41.0 on
// test2016): multi-bleu.perl, corpus BLEU-4 without smoothing, on the
// whitespace tokens of lowercased, Moses-normalized, Moses-tokenized text
// (moses_tokenizer.h). Equal to sacreBLEU's BLEU with `--tokenize none
// --smooth-method none` on those tokens.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace sf::eval {

// Hypotheses and references are raw text (the hypotheses detokenized); both
// are lowercased, normalized and tokenized with the rules of the target
// language `language` ("de", "es", ...).
double corpus_moses_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                         std::string_view language);

// sacreBLEU's signature of that score on the tokenized text:
// "nrefs:1|case:lc|eff:no|tok:none|smooth:none|version:2.6.0". (The text is
// lowercased already, so sacreBLEU's -lc would change nothing.)
std::string moses_bleu_signature();

}  // namespace sf::eval
