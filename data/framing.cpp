#include "framing.h"

#include <algorithm>

#include "autograd/ops.h"
#include "base/error.h"

namespace sf::data {

namespace {

// `before` ids `after`, then [PAD] up to `length`.
std::vector<int32_t> frame(std::initializer_list<int32_t> before, const std::vector<int32_t>& ids,
                           std::initializer_list<int32_t> after, int64_t length) {
  int64_t used = static_cast<int64_t>(before.size() + ids.size() + after.size());
  if (used > length) internal_fail("frame: ", ids.size(), " tokens do not fit in ", length, " positions");
  std::vector<int32_t> out(before);
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), after);
  out.resize(static_cast<size_t>(length), kPadId);
  return out;
}

}  // namespace

std::vector<int32_t> frame_source(const std::vector<int32_t>& ids, int64_t length) {
  return frame({kSosId}, ids, {kEosId}, length);
}

std::vector<int32_t> frame_decoder_input(const std::vector<int32_t>& ids, int64_t length) {
  return frame({kSosId}, ids, {}, length);
}

std::vector<int32_t> frame_labels(const std::vector<int32_t>& ids, int64_t length) {
  return frame({}, ids, {kEosId}, length);
}

Tensor frame_sources(const std::vector<std::vector<int32_t>>& sources) {
  size_t longest = 0;
  for (const auto& s : sources) longest = std::max(longest, s.size());
  int64_t width = framed_source_width(longest);
  std::vector<int32_t> ids;
  ids.reserve(sources.size() * static_cast<size_t>(width));
  for (const auto& s : sources) {
    const std::vector<int32_t> framed = frame_source(s, width);
    ids.insert(ids.end(), framed.begin(), framed.end());
  }
  return Tensor::from_ints(ids, {static_cast<int64_t>(sources.size()), width});
}

Tensor encoder_keep_mask(const Tensor& tokens) {
  if (tokens.ndim() != 2 || tokens.dtype() != DType::I32)
    internal_fail("encoder_keep_mask: tokens must be int32 [B, S], got ", to_string(tokens.dtype()), " ",
                  to_string(tokens.shape()));
  Tensor keep = ne(tokens, Tensor::from_ints({kPadId}, {}));
  return reshape(keep, {tokens.size(0), 1, 1, tokens.size(1)});
}

Tensor causal_keep_mask(int64_t queries, int64_t keys) {
  if (queries > keys) internal_fail("causal_keep_mask: ", queries, " queries for ", keys, " keys");
  // Query i is position i + offset; it sees keys j with j <= i + offset.
  int64_t offset = keys - queries;
  Tensor mask = Tensor::empty({1, 1, queries, keys}, DType::I32);
  for (int64_t i = 0; i < queries; ++i)
    for (int64_t j = 0; j < keys; ++j) mask.ints()[i * keys + j] = j <= i + offset ? 1 : 0;
  return mask;
}

Tensor decoder_keep_mask(const Tensor& tokens) {
  int64_t length = tokens.size(1);
  return logical_and(encoder_keep_mask(tokens), causal_keep_mask(length, length));
}

}  // namespace sf::data
