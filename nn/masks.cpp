#include "masks.h"

#include "autograd/error.h"
#include "autograd/ops.h"

namespace sf::nn {

Tensor padding_mask(const Tensor& tokens, int32_t pad_id) {
  if (tokens.ndim() != 2 || tokens.dtype() != DType::I32)
    internal_fail("padding_mask: tokens must be int32 [B, S], got ", to_string(tokens.dtype()), " ",
         to_string(tokens.shape()));
  Tensor keep = ne(tokens, Tensor::from_ints({pad_id}, {}));
  return reshape(keep, {tokens.size(0), 1, 1, tokens.size(1)});
}

Tensor causal_mask(int64_t queries, int64_t keys) {
  if (queries > keys) internal_fail("causal_mask: ", queries, " queries for ", keys, " keys");
  // Query i is position i + offset; it sees keys j with j <= i + offset.
  int64_t offset = keys - queries;
  Tensor mask = Tensor::empty({1, 1, queries, keys}, DType::I32);
  for (int64_t i = 0; i < queries; ++i)
    for (int64_t j = 0; j < keys; ++j) mask.ints()[i * keys + j] = j <= i + offset ? 1 : 0;
  return mask;
}

Tensor decoder_mask(const Tensor& tokens, int32_t pad_id) {
  int64_t length = tokens.size(1);
  return logical_and(padding_mask(tokens, pad_id), causal_mask(length, length));
}

}  // namespace sf::nn
