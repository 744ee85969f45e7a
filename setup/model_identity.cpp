#include "model_identity.h"

#include "base/error.h"
#include "nn/checkpoint.h"

namespace sf::setup {

nn::TransformerConfig model_config(const Config& c, int64_t src_vocab_size, int64_t tgt_vocab_size) {
  return {.src_vocab_size = src_vocab_size, .tgt_vocab_size = tgt_vocab_size, .src_seq_len = c.seq_len,
          .tgt_seq_len = c.seq_len, .d_model = c.d_model, .N = c.N, .h = c.h, .d_ff = c.d_ff, .dropout = c.dropout,
          .activation = *nn::activation_named(c.activation), .post_norm = c.norm == "post",
          .tie_embeddings = c.tie_embeddings};
}

namespace {

// The tokenizer keys, beside the members holding their values.
constexpr std::pair<const char*, std::string ModelIdentity::*> kTokenizerKeys[] = {
    {"tokenizer", &ModelIdentity::tokenizer},
    {"src_tokenizer_sha256", &ModelIdentity::src_tokenizer_sha256},
    {"tgt_tokenizer_sha256", &ModelIdentity::tgt_tokenizer_sha256}};

bool is_vocabulary_size(const std::string& key) { return key == "src_vocab_size" || key == "tgt_vocab_size"; }

// Every key with its value, in the order they are compared: what the config
// sets, then the tokenizers, then the vocabulary sizes that follow from them.
std::vector<std::pair<std::string, std::string>> keys_in_order(const ModelIdentity& identity) {
  std::vector<std::pair<std::string, std::string>> keys, sizes;
  for (auto& [key, value] : nn::architecture_keys(identity.model))
    (is_vocabulary_size(key) ? sizes : keys).emplace_back(std::move(key), std::move(value));
  for (const auto& [key, member] : kTokenizerKeys) keys.emplace_back(key, identity.*member);
  keys.insert(keys.end(), sizes.begin(), sizes.end());
  return keys;
}

}  // namespace

std::string IdentityDifference::shown(const std::string& value) const {
  return key.ends_with("_sha256") ? value.substr(0, 12) + "..." : value;
}

safetensors::Metadata ModelIdentity::tokenizer_labels() const {
  safetensors::Metadata labels;
  for (const auto& [key, member] : kTokenizerKeys)
    if (!(this->*member).empty()) labels[key] = this->*member;
  return labels;
}

ModelIdentity ModelIdentity::of_run(const Config& config, const data::TokenizerFile& src,
                                    const data::TokenizerFile& tgt) {
  return {model_config(config, src.tokenizer.vocab_size(), tgt.tokenizer.vocab_size()), config.tokenizer, src.sha256,
          tgt.sha256};
}

std::optional<ModelIdentity> ModelIdentity::of_file(const std::string& path) {
  safetensors::Metadata metadata = safetensors::load_metadata(path);
  if (metadata.empty()) return std::nullopt;
  ModelIdentity identity{nn::config_from_metadata(metadata, path), "", "", ""};
  for (const auto& [key, member] : kTokenizerKeys)
    if (auto it = metadata.find(key); it != metadata.end()) identity.*member = it->second;
  if (!identity.tokenizer.empty() && identity.tokenizer != "word" && identity.tokenizer != "bpe")
    fail(path, ": __metadata__ 'tokenizer' is \"", identity.tokenizer, "\", not \"word\" or \"bpe\"");
  return identity;
}

std::optional<IdentityDifference> first_difference(const ModelIdentity& in_file, const ModelIdentity& expected) {
  auto file_keys = keys_in_order(in_file), expected_keys = keys_in_order(expected);
  for (size_t i = 0; i < file_keys.size(); ++i) {
    const auto& [key, value] = file_keys[i];
    const std::string& wanted = expected_keys[i].second;
    if (!value.empty() && !wanted.empty() && value != wanted) return IdentityDifference{key, value, wanted};
  }
  return std::nullopt;
}

void check_weights_fit(const std::string& weights, const ModelIdentity& in_file, const ModelIdentity& expected,
                       const Config& config) {
  std::optional<IdentityDifference> d = first_difference(in_file, expected);
  if (!d) return;
  bool source = d->key.starts_with("src_");
  std::string tokenizer_file = config.tokenizer_path(source ? config.lang_src : config.lang_tgt);
  if (d->key.ends_with("_sha256"))
    fail(tokenizer_file, ": is not the ", source ? "source" : "target", " tokenizer ", weights,
         " was trained with (SHA-256 ", d->shown(d->expected), ", the model's ", d->shown(d->in_file),
         "); point tokenizer_file at the tokenizer files of the run that trained it");
  if (is_vocabulary_size(d->key))
    fail(tokenizer_file, ": has ", d->expected, " tokens, but ", weights, " was trained with ", d->key, " ",
         d->in_file, "; point tokenizer_file at the tokenizer files of the run that trained it");
  fail(config.source, ": key '", d->key, "' is ", d->expected, ", but ", weights, " was trained with ", d->key, " ",
       d->in_file);
}

}  // namespace sf::setup
