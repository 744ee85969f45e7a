// Byte-pair encoding of words into subword units (Sennrich, Haddow & Birch
// 2016, "Neural Machine Translation of Rare Words with Subword Units"), the
// model behind a Tokenizer of kind BPE (tokenizer.h).
//
// A word starts as its characters, the last one marked with the end-of-word
// suffix "</w>" (the paper's marker): "low" -> l o w</w>. Decoding is exact,
// since a piece that ends in "</w>" ends a word and every other piece is
// glued to the next.
//
// Training (Algorithm 1 of the paper): the symbols are every character seen,
// each both plain and with "</w>" (so a word of seen characters never needs
// [UNK], whichever character ends it); then, until the vocabulary has
// vocab_size entries, the most frequent adjacent pair of symbols over the
// words' counts is merged into one new symbol. Ties go to the pair whose
// (left id, right id) is smallest, so training is a function of the counts.
// Pair counts are updated incrementally: a merge revisits only the words
// that hold the pair (the paper's Figure 1 recounts everything).
//
// Encoding applies the merges by rank as Hugging Face tokenizers' BPE model
// does: while some adjacent pair has a merge, the one with the lowest rank
// (the earliest learnt), leftmost first, is merged. A character outside the
// vocabulary is [UNK] on its own (HF's fuse_unk = false).
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sf::data {

inline constexpr std::string_view kEndOfWordSuffix = "</w>";

// One token of an encoded word: its id and how many bytes of the word it
// covers (its text without the suffix).
struct BpePiece {
  int32_t id;
  uint32_t bytes;
};

struct BpeVocabulary {
  std::vector<std::string> tokens;  // by id: `first_tokens`, the alphabet, then one per merge
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
};

// Learns merges from words with their counts until there are vocab_size
// tokens (or no pair is left). `first_tokens` (the special tokens) take the
// first ids; the alphabet is sorted byte-wise, plain characters first.
BpeVocabulary train_bpe(const std::vector<std::pair<std::string_view, int64_t>>& word_counts,
                        const std::vector<std::string>& first_tokens, int64_t vocab_size);

// The merge table of a vocabulary, and the encoder of words that uses it.
class BpeModel {
 public:
  // `tokens` by id, `merges` by rank. A merge whose parts or result are not
  // tokens is an error (sf::Error naming it, prefixed by `source`).
  BpeModel(const std::vector<std::string>& tokens, std::vector<std::pair<std::string, std::string>> merges,
           int32_t unk_id, const std::string& source);

  // The pieces of one pre-tokenised word (not empty). Results are cached per
  // word, under a lock, so encoding may run on several threads.
  std::vector<BpePiece> encode_word(std::string_view word) const;

  const std::vector<std::pair<std::string, std::string>>& merges() const { return merges_; }

 private:
  struct Merge {
    int32_t rank, result;
  };
  std::vector<BpePiece> initial_pieces(std::string_view word) const;
  void merge_by_rank(std::vector<BpePiece>& pieces) const;

  std::vector<std::pair<std::string, std::string>> merges_;
  std::unordered_map<uint64_t, Merge> by_pair_;  // key: left id << 32 | right id
  // The tokens a word starts from: one character, with or without the suffix.
  std::unordered_map<std::string, int32_t> symbol_ids_;
  int32_t unk_id_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<BpePiece>> cache_;
};

}  // namespace sf::data
