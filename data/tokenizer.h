// A word-level tokenizer as Hugging Face `tokenizers` builds one (WordLevel
// model + Whitespace pre-tokenizer, no normaliser), saved and loaded in that
// library's tokenizer.json format.
//
// Vocabulary order (as HF's WordLevelTrainer): the four special tokens of
// framing.h with ids 0..3, then every word with count >= min_frequency, by
// descending count, ties by ascending byte-wise string order. Unlike HF's
// trainer there is no vocab_size cap: every frequent word is kept.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "framing.h"

namespace sf::data {

// The words a tokenizer encodes `text` into, one per id, as views into it: the
// special tokens written in the text ("[UNK]", ...), and the pre-tokenised
// words between them (see pretokenizer.h).
std::vector<std::string_view> split_words(std::string_view text);

class Tokenizer {
 public:
  // Counts the pre-tokenised words of `texts` (one side of the training pairs).
  static Tokenizer train(const std::vector<std::string_view>& texts, int64_t min_frequency);
  // `source` names the file in error messages.
  static Tokenizer from_json(const nlohmann::json& json, const std::string& source);
  static Tokenizer load(const std::string& path);

  nlohmann::ordered_json to_json() const;  // keys in the order HF writes them
  void save(const std::string& path) const;  // creates missing parent folders

  // Ids of the words; unknown words are [UNK]. As HF, the special tokens'
  // texts ("[PAD]", ...) written in the input are recognised as those tokens.
  std::vector<int32_t> encode(std::string_view text) const;
  // Tokens joined by single spaces, without [SOS], [EOS] and [PAD] ([UNK] kept
  // as "[UNK]"), as `translate` prints them.
  std::string decode(const std::vector<int32_t>& ids) const;

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::string& id_to_token(int32_t id) const;
  // The id of a vocabulary entry, or -1 when it has none.
  int32_t token_to_id(std::string_view token) const;

 private:
  explicit Tokenizer(std::vector<std::string> tokens);

  std::vector<std::string> tokens_;  // by id
  // Transparent hash and equality, so lookups take a string_view.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
};

}  // namespace sf::data
