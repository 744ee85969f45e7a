// What a weights file says its model is, and what the command reading it
// expects: the architecture (every key that shapes the model,
// nn/checkpoint.h) and the tokenizers that give its token ids their meaning
// (the tokenizer kind and the SHA-256 of each tokenizer file, which
// `sha256sum` prints too). Every command that reads weights (train's preload
// and resume, translate, eval, score, export, average) compares the two and
// names the first difference, so a model never runs with another
// architecture's settings or another run's vocabulary (docs/10-formats.md).
#pragma once
#include <optional>
#include <string>

#include "autograd/safetensors.h"
#include "data/pipeline.h"
#include "nn/transformer.h"
#include "setup/config.h"

namespace sf::setup {

// The model `config` describes for vocabularies of these sizes.
nn::TransformerConfig model_config(const Config& config, int64_t src_vocab_size, int64_t tgt_vocab_size);

struct ModelIdentity {
  nn::TransformerConfig model;
  // "word" | "bpe", and each tokenizer file's SHA-256 (64 hex digits). Empty
  // where unknown: a file written before they were recorded is checked
  // against its tokenizers by the vocabulary sizes alone.
  std::string tokenizer, src_tokenizer_sha256, tgt_tokenizer_sha256;

  // The keys a weights file carries beside the architecture's (the known ones).
  safetensors::Metadata tokenizer_labels() const;
  // What `config` builds with these tokenizer files.
  static ModelIdentity of_run(const Config& config, const data::TokenizerFile& src, const data::TokenizerFile& tgt);
  // What the weights file `path` records; nullopt for a file without
  // metadata (weights exported from PyTorch), whose shapes alone are checked.
  static std::optional<ModelIdentity> of_file(const std::string& path);
};

// A key whose values differ, as the metadata writes them.
struct IdentityDifference {
  std::string key, in_file, expected;
  // A value as messages show it (a digest's first 12 hex digits).
  std::string shown(const std::string& value) const;
};

// The first difference between a file's identity and the expected one, in a
// fixed order: the config's keys, then the tokenizer files, then the
// vocabulary sizes that follow from them. Keys unknown on either side are
// skipped.
std::optional<IdentityDifference> first_difference(const ModelIdentity& in_file, const ModelIdentity& expected);

// Fails, naming the first difference and what to do about it, unless the
// weights file `weights` (whose identity is `in_file`) is the model that
// `config` and its tokenizer files (`expected`) describe.
void check_weights_fit(const std::string& weights, const ModelIdentity& in_file, const ModelIdentity& expected,
                       const Config& config);

}  // namespace sf::setup
