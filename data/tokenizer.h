// A tokenizer as Hugging Face `tokenizers` builds one (Whitespace
// pre-tokenizer, no normaliser), saved and loaded in that library's
// tokenizer.json format, with one of two models:
//
// WordLevel, the default: one id per pre-tokenised word. Vocabulary order (as
// HF's WordLevelTrainer): the four special tokens of framing.h with ids 0..3,
// then every word with count >= min_frequency, by descending count, ties by
// ascending byte-wise string order. Unlike HF's trainer there is no
// vocab_size cap: every frequent word is kept.
//
// BPE: each word is split into subword units (bpe.h), so no word of seen
// characters is [UNK]. Ids: the four special tokens, the alphabet, then one
// token per learnt merge; the file's decoder is HF's BPEDecoder.
//
// A tokenizer we build records what it was built from (Origin), in its file's
// model object under "built_from" (HF's tokenizers ignores keys it does not
// know there, not at the top level), so a run can tell whether an existing
// file is its own (data/pipeline.h).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bpe.h"
#include "framing.h"

namespace sf::data {

// The words a tokenizer encodes `text` into, one per id, as views into it: the
// special tokens written in the text ("[UNK]", ...), and the pre-tokenised
// words between them (see pretokenizer.h).
std::vector<std::string_view> split_words(std::string_view text);

class Tokenizer {
 public:
  // The training pairs a tokenizer was built from: how many, the settings
  // ("word min_frequency 2", "bpe vocab_size 8000", "... shared"), and a
  // digest (FNV-1a 64) of the texts it learnt from.
  struct Origin {
    int64_t pairs = 0;
    std::string settings, digest;
    bool operator==(const Origin&) const = default;
  };

  // Counts the pre-tokenised words of `texts` (one side of the training pairs).
  static Tokenizer train(const std::vector<std::string_view>& texts, int64_t min_frequency);
  // Learns BPE merges from the pre-tokenised words of `texts` until the
  // vocabulary, special tokens included, has vocab_size tokens (or no pair is
  // left; it is never smaller than the specials and the alphabet).
  static Tokenizer train_bpe(const std::vector<std::string_view>& texts, int64_t vocab_size);
  // The model comes from the file's model.type. `source` names the file in
  // error messages.
  static Tokenizer from_json(const nlohmann::json& json, const std::string& source);
  // With `sha256`, also the SHA-256 of the file's bytes (64 hex digits).
  static Tokenizer load(const std::string& path, std::string* sha256 = nullptr);

  nlohmann::ordered_json to_json() const;  // keys in the order HF writes them
  // Writes to_json() (creating missing parent folders) and returns the bytes
  // written, whose SHA-256 is the file's.
  std::string save(const std::string& path) const;
  std::string file_text() const;  // to_json() as save() writes it

  // What it was built from; none for a file that does not say (one made by
  // other tools, or before the record was written).
  const std::optional<Origin>& origin() const { return origin_; }
  void set_origin(Origin origin) { origin_ = std::move(origin); }

  bool is_bpe() const { return bpe_ != nullptr; }

  // Ids of the words (WordLevel: unknown words are [UNK]) or of their subword
  // units (BPE: characters without a token are [UNK]). As HF, the special
  // tokens' texts ("[PAD]", ...) written in the input are recognised as those
  // tokens.
  std::vector<int32_t> encode(std::string_view text) const;
  // What each id of encode(text) stands for, as views into `text`: a word, a
  // special token, or (BPE) the part of a word a subword unit covers.
  std::vector<std::string_view> token_texts(std::string_view text) const;
  // The words joined by single spaces, without [SOS], [EOS] and [PAD] ([UNK]
  // kept as "[UNK]"), as `translate --tokens` prints them: WordLevel writes
  // each token as a word, BPE glues each unit to the next unless it ends with
  // "</w>". With `unknown_as` (one entry per id), an [UNK] whose entry is not
  // empty is written as that entry instead.
  std::string decode(const std::vector<int32_t>& ids, std::span<const std::string_view> unknown_as = {}) const;

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::string& id_to_token(int32_t id) const;
  // The id of a vocabulary entry, or -1 when it has none.
  int32_t token_to_id(std::string_view token) const;

 private:
  explicit Tokenizer(std::vector<std::string> tokens, std::shared_ptr<const BpeModel> bpe = nullptr);

  std::vector<std::string> tokens_;  // by id
  std::shared_ptr<const BpeModel> bpe_;  // null for WordLevel; shared by copies (its cache is a memo)
  std::optional<Origin> origin_;
  // Transparent hash and equality, so lookups take a string_view.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
};

}  // namespace sf::data
