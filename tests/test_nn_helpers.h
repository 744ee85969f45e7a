// Shared pieces of the nn tests: a tiny model, token batches, a scratch folder.
#pragma once
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "autograd/safetensors.h"
#include "data/framing.h"
#include "nn/transformer.h"

namespace sf::testing {

inline nn::TransformerConfig tiny_config() {
  nn::TransformerConfig c;
  c.src_vocab_size = 13;
  c.tgt_vocab_size = 11;
  c.src_seq_len = c.tgt_seq_len = 24;
  c.d_model = 8;
  c.N = 2;
  c.h = 2;
  c.d_ff = 16;
  c.dropout = 0.1f;
  return c;
}

inline std::unique_ptr<nn::Transformer> tiny_model(const nn::TransformerConfig& c = tiny_config(),
                                                   uint64_t seed = 42) {
  Rng init(seed);
  return nn::build_transformer(c, init);
}

// Sentences of token ids (no specials), padded with [PAD] to `length` each.
inline Tensor pad_batch(const std::vector<std::vector<int32_t>>& rows, int64_t length) {
  std::vector<int32_t> ids;
  for (const auto& row : rows) {
    REQUIRE(static_cast<int64_t>(row.size()) <= length);
    ids.insert(ids.end(), row.begin(), row.end());
    ids.insert(ids.end(), length - row.size(), data::kPadId);
  }
  return Tensor::from_ints(ids, {static_cast<int64_t>(rows.size()), length});
}

// Teacher forcing as training batches it (data/framing.h): decoder input
// [SOS] w..., label w... [EOS]. The sources are taken as they are.
struct Batch {
  Tensor src, tgt, label;
};

inline Batch make_batch(const std::vector<std::vector<int32_t>>& sources,
                        const std::vector<std::vector<int32_t>>& targets, int64_t length) {
  std::vector<int32_t> inputs, labels;
  for (const auto& t : targets) {
    std::vector<int32_t> input = data::frame_decoder_input(t, length), label = data::frame_labels(t, length);
    inputs.insert(inputs.end(), input.begin(), input.end());
    labels.insert(labels.end(), label.begin(), label.end());
  }
  Shape shape{static_cast<int64_t>(targets.size()), length};
  return {pad_batch(sources, length), Tensor::from_ints(inputs, shape), Tensor::from_ints(labels, shape)};
}

inline Tensor log_probs(nn::Transformer& model, const Tensor& src, const Tensor& tgt) {
  Tensor src_mask = data::encoder_keep_mask(src);
  Tensor memory = model.encode(src, src_mask);
  return model.project(model.decode(memory, src_mask, tgt, data::decoder_keep_mask(tgt)));
}

// The training loss: label-smoothed cross-entropy ignoring [PAD] labels, as
// torch.nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=ε).
inline Tensor batch_loss(nn::Transformer& model, const Batch& b, float smoothing = 0.1f) {
  return cross_entropy(log_probs(model, b.src, b.tgt), b.label, data::kPadId, smoothing);
}

// The file at `bf16` is a bf16 export of the one at `fp32`: the same metadata
// and tensor names in the same order, each tensor BF16 with exactly the
// float32 values rounded.
inline void check_bf16_export(const std::string& fp32, const std::string& bf16) {
  safetensors::Contents a = safetensors::load(fp32), b = safetensors::load(bf16);
  CHECK(b.metadata == a.metadata);
  REQUIRE(b.tensors.size() == a.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    CAPTURE(a.tensors[i].first);
    CHECK(b.tensors[i].first == a.tensors[i].first);
    CHECK(b.tensors[i].second.dtype() == DType::BF16);
    CHECK(b.tensors[i].second.shape() == a.tensors[i].second.shape());
    std::vector<float> rounded = a.tensors[i].second.to_vector();
    for (float& v : rounded) v = kernels::round_to_bf16(v);
    CHECK(b.tensors[i].second.to_vector() == rounded);
  }
}

// A fresh folder under the system's temp dir, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "sf_test_XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace sf::testing
