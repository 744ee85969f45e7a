// Model weights as safetensors files (docs/10-formats.md): the state dict in
// its order, under PyTorch's names, with every key that shapes the model in
// __metadata__ as strings, defaults written out, so the file alone says what
// model to build:
//   d_model, N, h, d_ff, seq_len (or src_seq_len and tgt_seq_len when they
//   differ), src_vocab_size, tgt_vocab_size, activation, norm, tie_embeddings.
// Files written before the last three were always written lack them where
// they had their defaults (relu, pre, false), and are read so.
// Dropout is not stored: it is a training setting, not part of the model's shape.
// Callers add labels of their own beside these keys (the tokenizers' digests,
// setup/model_identity.h).
#pragma once
#include <string>
#include <vector>

#include "autograd/safetensors.h"
#include "transformer.h"

namespace sf::nn {

safetensors::Metadata checkpoint_metadata(const TransformerConfig& config);
// The architecture keys of checkpoint_metadata as (key, value) pairs, in the
// order they are compared (seq_len as "S" or "S_src/S_tgt").
std::vector<std::pair<std::string, std::string>> architecture_keys(const TransformerConfig& config);
// The config `metadata` describes (dropout left at its default); `path` names
// the file in errors.
TransformerConfig config_from_metadata(const safetensors::Metadata& metadata, const std::string& path);

// `dtype` F32 (training checkpoints) or BF16 (an export for inference, half
// the size): every tensor rounded to it, the names, order and metadata the
// same. `labels` go into __metadata__ beside the architecture keys.
void save_checkpoint(const Transformer& model, const std::string& path, DType dtype = DType::F32,
                     const safetensors::Metadata& labels = {});
// Loads weights into `model`: names and shapes must match its state dict
// exactly, dtypes too except that BF16 values load widened into the float32
// model, and the metadata, when the file has any (a file exported from
// PyTorch may not), must describe the same architecture.
void load_checkpoint(Transformer& model, const std::string& path);
// Loads into `model` the element-wise mean of the weights of `paths` (each
// checked as load_checkpoint checks it): checkpoint averaging, as Vaswani et
// al. 2017 (§6.1) averaged the last checkpoints of a run. The sums are kept in
// double and rounded once, so the mean does not depend on the files' order.
void load_average(Transformer& model, const std::vector<std::string>& paths);
// Reads only the header: the config to pass to build_transformer.
TransformerConfig read_checkpoint_config(const std::string& path);

}  // namespace sf::nn
