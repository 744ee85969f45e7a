// How token ids become model inputs: the special tokens, the framing of a
// sentence pair, and the attention masks. The one place that knows them; the
// tokenizer, batches, decoding and attention maps all use it, and nn/ only
// ever sees the resulting tensors.
//
// For a pair (src, tgt) of token ids, padded with [PAD] to a length:
//   encoder input   [SOS] src [EOS] [PAD]...
//   decoder input   [SOS] tgt [PAD]...
//   labels          tgt [EOS] [PAD]...
// The decoder input is the labels shifted right by one ("teacher forcing",
// Vaswani et al. 2017, §3.1: "output embeddings are offset by one position").
//
// Masks are int32 and mean KEEP: 1 = this query may attend to this key,
// 0 = hidden (as the boolean attn_mask of torch.nn.functional.
// scaled_dot_product_attention, where True takes part in attention). They
// broadcast against the attention scores [B, h, queries, keys].
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "autograd/tensor.h"

namespace sf::data {

// The tokenizer's first four ids, in this order in every vocabulary.
inline constexpr int32_t kUnkId = 0, kPadId = 1, kSosId = 2, kEosId = 3;
inline constexpr std::array<std::string_view, 4> kSpecialTokens = {"[UNK]", "[PAD]", "[SOS]",
                                                                   "[EOS]"};

// The positions a sentence of `tokens` tokens takes once framed: a source
// gains [SOS] and [EOS], a target one of them (the decoder input's [SOS], the
// labels' [EOS]). And the converse: the most tokens `positions` hold.
constexpr int64_t framed_source_width(size_t tokens) { return static_cast<int64_t>(tokens) + 2; }
constexpr int64_t framed_target_width(size_t tokens) { return static_cast<int64_t>(tokens) + 1; }
constexpr int64_t longest_source(int64_t positions) { return positions - 2; }
constexpr int64_t longest_target(int64_t positions) { return positions - 1; }

// The framing of one sentence, padded with [PAD] to `length` positions, which
// must hold it (its framed width above).
std::vector<int32_t> frame_source(const std::vector<int32_t>& ids, int64_t length);        // [SOS] ids [EOS]
std::vector<int32_t> frame_decoder_input(const std::vector<int32_t>& ids, int64_t length); // [SOS] ids
std::vector<int32_t> frame_labels(const std::vector<int32_t>& ids, int64_t length);        // ids [EOS]

// Encoder inputs [B, S] of several sources, S = the longest + 2.
Tensor frame_sources(const std::vector<std::vector<int32_t>>& sources);

// tokens [B, S] -> [B, 1, 1, S]: 1 where the key is not [PAD]. The encoder's
// self-attention mask and the decoder's cross-attention mask.
Tensor encoder_keep_mask(const Tensor& tokens);

// [1, 1, queries, keys]: the last `queries` of `keys` positions, each seeing
// itself and every earlier position (key j <= query i + keys - queries). With
// queries == keys it is the lower triangle; incremental decoding uses
// queries < keys when new positions attend to a cached prefix.
Tensor causal_keep_mask(int64_t queries, int64_t keys);

// decoder inputs [B, T] -> [B, 1, T, T]: the key is not [PAD] and not in the
// query's future. The decoder's self-attention mask in training.
Tensor decoder_keep_mask(const Tensor& tokens);

}  // namespace sf::data
