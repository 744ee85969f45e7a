// Unknown-word replacement (Luong et al. 2015, "Addressing the Rare Word
// Problem in Neural Machine Translation", with the alignment read from the
// attention as in Luong, Pham and Manning 2015, §5.1): a word-level model
// writes [UNK] for every word outside its vocabulary, mostly names and rare
// nouns that a translation copies unchanged. So each [UNK] in an output is
// replaced by the source word that output position attends to most.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"
#include "infer/decoding.h"

namespace sf::infer {

// For each generated token (record.target without its [SOS]), the index of the
// source word it attends to most: cross-attention averaged over the layers
// and heads, over the source's words (not its [SOS] and [EOS]). -1 when there
// is none: an empty source, or a token generated after the last one the
// decoder was fed (the last token of a translation cut at seq_len).
std::vector<int64_t> attended_source_words(const AttentionRecord& record, size_t generated);

// `output` as spaced tokens (as Tokenizer::decode writes them), each [UNK]
// replaced by the source word it attends to most. `source_words` are the
// source's words (BPE: subword units), one per source id (Tokenizer::token_texts
// of its text). A BPE replacement is glued to the unit after it, as an [UNK]
// is: with BPE only a character never seen in training is [UNK].
std::string replace_unknown_words(const TokenIds& output, const AttentionRecord& record,
                                  const std::vector<std::string_view>& source_words,
                                  const data::Tokenizer& target_tokenizer);

}  // namespace sf::infer
