#include "bpe.h"

#include <algorithm>
#include <queue>
#include <set>

#include "base/error.h"
#include "unicode.h"

namespace sf::data {

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}
int32_t left_of(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t right_of(uint64_t key) { return static_cast<int32_t>(key & 0xffffffffu); }

// The code points of `word` as separate strings.
std::vector<std::string> characters(std::string_view word) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < word.size();) {
    size_t start = pos;
    next_code_point(word, pos);
    out.emplace_back(word.substr(start, pos - start));
  }
  return out;
}

// The training state: each distinct word as a sequence of symbol ids with its
// count, the count of every adjacent pair over all words, and for each pair
// the words that held it when it was counted (a superset of those holding it
// now: a merge rescans them).
class PairCounts {
 public:
  PairCounts(std::vector<std::vector<int32_t>> words, std::vector<int64_t> counts)
      : words_(std::move(words)), counts_(std::move(counts)) {
    for (size_t w = 0; w < words_.size(); ++w) add_pairs(w, +1);
    for (const auto& [key, count] : pair_counts_) push(key);
  }

  // The most frequent pair, ties to the smallest key; false when none is left.
  bool best(uint64_t& key) {
    while (!queue_.empty()) {
      auto [count, negated_key] = queue_.top();
      queue_.pop();
      uint64_t candidate = ~negated_key;
      auto it = pair_counts_.find(candidate);
      // An entry is stale once its pair's count changed (a newer entry holds it).
      if (it == pair_counts_.end() || it->second != count || count <= 0) continue;
      key = candidate;
      return true;
    }
    return false;
  }

  // Replaces every occurrence of the pair, left to right, by `merged`.
  void merge(uint64_t key, int32_t merged) {
    std::vector<int32_t> holders = std::move(holders_[key]);
    holders_.erase(key);
    std::sort(holders.begin(), holders.end());
    holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
    std::set<uint64_t> changed;
    for (int32_t w : holders) {
      std::vector<int32_t>& word = words_[w];
      if (!holds(word, key)) continue;
      add_pairs(w, -1, &changed);
      std::vector<int32_t> out;
      for (size_t i = 0; i < word.size(); ++i) {
        if (i + 1 < word.size() && pair_key(word[i], word[i + 1]) == key) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(word[i]);
        }
      }
      word = std::move(out);
      add_pairs(w, +1, &changed);
    }
    for (uint64_t k : changed) push(k);
  }

 private:
  static bool holds(const std::vector<int32_t>& word, uint64_t key) {
    for (size_t i = 0; i + 1 < word.size(); ++i)
      if (pair_key(word[i], word[i + 1]) == key) return true;
    return false;
  }
  void add_pairs(size_t w, int64_t sign, std::set<uint64_t>* changed = nullptr) {
    const std::vector<int32_t>& word = words_[w];
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      uint64_t key = pair_key(word[i], word[i + 1]);
      pair_counts_[key] += sign * counts_[w];
      if (sign > 0) holders_[key].push_back(static_cast<int32_t>(w));
      if (changed) changed->insert(key);
    }
  }
  void push(uint64_t key) {
    int64_t count = pair_counts_[key];
    if (count > 0) queue_.push({count, ~key});  // a larger ~key is a smaller key
  }

  std::vector<std::vector<int32_t>> words_;
  std::vector<int64_t> counts_;
  std::unordered_map<uint64_t, int64_t> pair_counts_;
  std::unordered_map<uint64_t, std::vector<int32_t>> holders_;
  std::priority_queue<std::pair<int64_t, uint64_t>> queue_;  // (count, ~key): the max is the best
};

}  // namespace

BpeVocabulary train_bpe(const std::vector<std::pair<std::string_view, int64_t>>& word_counts,
                        const std::vector<std::string>& first_tokens, int64_t vocab_size) {
  std::set<std::string> alphabet;
  for (const auto& [word, count] : word_counts)
    for (std::string& c : characters(word)) alphabet.insert(std::move(c));

  BpeVocabulary vocab;
  vocab.tokens = first_tokens;
  std::unordered_map<std::string, int32_t> ids;
  auto add_token = [&](std::string token) {
    ids.emplace(token, static_cast<int32_t>(vocab.tokens.size()));
    vocab.tokens.push_back(std::move(token));
  };
  for (const std::string& c : alphabet) add_token(c);
  for (const std::string& c : alphabet) add_token(c + std::string(kEndOfWordSuffix));

  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  for (const auto& [word, count] : word_counts) {
    std::vector<std::string> chars = characters(word);
    if (chars.empty()) continue;
    chars.back() += kEndOfWordSuffix;
    std::vector<int32_t> symbols;
    for (const std::string& c : chars) symbols.push_back(ids.at(c));
    words.push_back(std::move(symbols));
    counts.push_back(count);
  }
  if (words.empty()) return vocab;

  PairCounts pairs(std::move(words), std::move(counts));
  uint64_t key;
  while (static_cast<int64_t>(vocab.tokens.size()) < vocab_size && pairs.best(key)) {
    const std::string& left = vocab.tokens[left_of(key)];
    const std::string& right = vocab.tokens[right_of(key)];
    vocab.merges.emplace_back(left, right);
    std::string merged = left + right;
    // Two different pairs can spell the same token (a+bc, ab+c): it keeps its first id.
    auto [it, added] = ids.emplace(merged, static_cast<int32_t>(vocab.tokens.size()));
    if (added) vocab.tokens.push_back(std::move(merged));
    pairs.merge(key, it->second);
  }
  return vocab;
}

BpeModel::BpeModel(const std::vector<std::string>& tokens, std::vector<std::pair<std::string, std::string>> merges,
                   int32_t unk_id, const std::string& source)
    : merges_(std::move(merges)), unk_id_(unk_id) {
  std::unordered_map<std::string_view, int32_t> ids;
  for (size_t id = 0; id < tokens.size(); ++id) {
    ids.emplace(tokens[id], static_cast<int32_t>(id));
    std::string_view token = tokens[id];
    if (token.ends_with(kEndOfWordSuffix) && token.size() > kEndOfWordSuffix.size())
      token.remove_suffix(kEndOfWordSuffix.size());
    if (find_invalid_utf8(token) == std::string_view::npos && characters(token).size() == 1)
      symbol_ids_.emplace(tokens[id], static_cast<int32_t>(id));
  }
  auto id_of = [&](size_t rank, const std::string& token) {
    auto it = ids.find(token);
    if (it == ids.end())
      fail(source, ": merge ", rank, " (\"", merges_[rank].first, " ", merges_[rank].second, "\"): \"", token,
           "\" is not in the vocabulary");
    return it->second;
  };
  for (size_t rank = 0; rank < merges_.size(); ++rank) {
    const auto& [left, right] = merges_[rank];
    Merge merge{static_cast<int32_t>(rank), id_of(rank, left + right)};
    // As HF, a pair listed twice keeps its last rank.
    by_pair_[pair_key(id_of(rank, left), id_of(rank, right))] = merge;
  }
}

std::vector<BpePiece> BpeModel::initial_pieces(std::string_view word) const {
  std::vector<BpePiece> pieces;
  std::string symbol;
  for (size_t pos = 0; pos < word.size();) {
    size_t start = pos;
    next_code_point(word, pos);
    symbol.assign(word.substr(start, pos - start));
    if (pos == word.size()) symbol += kEndOfWordSuffix;
    auto it = symbol_ids_.find(symbol);
    pieces.push_back({it == symbol_ids_.end() ? unk_id_ : it->second, static_cast<uint32_t>(pos - start)});
  }
  return pieces;
}

void BpeModel::merge_by_rank(std::vector<BpePiece>& pieces) const {
  for (;;) {
    const Merge* best = nullptr;
    size_t at = 0;
    for (size_t i = 0; i + 1 < pieces.size(); ++i) {
      auto it = by_pair_.find(pair_key(pieces[i].id, pieces[i + 1].id));
      if (it != by_pair_.end() && (!best || it->second.rank < best->rank)) {
        best = &it->second;
        at = i;
      }
    }
    if (!best) return;
    pieces[at] = {best->result, pieces[at].bytes + pieces[at + 1].bytes};
    pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
}

std::vector<BpePiece> BpeModel::encode_word(std::string_view word) const {
  {
    std::lock_guard lock(cache_mutex_);
    if (auto it = cache_.find(std::string(word)); it != cache_.end()) return it->second;
  }
  std::vector<BpePiece> pieces = initial_pieces(word);
  merge_by_rank(pieces);
  std::lock_guard lock(cache_mutex_);
  cache_.emplace(word, pieces);
  return pieces;
}

}  // namespace sf::data
