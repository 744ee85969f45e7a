// Attention masks as the seed builds them: int32, 1 = the key may be attended
// to (keep), 0 = hidden. They broadcast against attention scores
// [B, h, queries, keys].
#pragma once
#include <cstdint>

#include "autograd/tensor.h"

namespace sf::nn {

constexpr int32_t kPadId = 1;  // [PAD] (SPEC §5)

// tokens [B, S] -> [B, 1, 1, S]: 1 where the token is not [PAD]. The encoder
// mask, and the key-padding half of the decoder mask.
Tensor padding_mask(const Tensor& tokens, int32_t pad_id = kPadId);

// [1, 1, queries, keys]: the last `queries` of `keys` positions, each seeing
// itself and every earlier position (key j <= query i + keys - queries). With
// queries == keys it is the lower triangle; incremental decoding uses
// queries < keys when several new positions attend to a cached prefix.
Tensor causal_mask(int64_t queries, int64_t keys);

// tokens [B, T] -> [B, 1, T, T]: not [PAD] and not in the future.
Tensor decoder_mask(const Tensor& tokens, int32_t pad_id = kPadId);

}  // namespace sf::nn
