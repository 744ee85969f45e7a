// Parallel corpora: reading `source<TAB>target` TSV files and JSONL files of
// Hugging Face datasets translation rows ({"translation": {"en": ..., "it": ...}}),
// and the train/valid split used when no valid file is given.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sf::data {

struct Pair {
  std::string src, tgt;
  std::string origin;  // where it came from, for messages: "FILE:LINE" or "TASK#INDEX"
};

struct ReadResult {
  std::vector<Pair> pairs;
  int64_t blank_lines = 0;  // empty or whitespace-only lines, skipped
};

// One `source<TAB>target` line, split at its TAB (an sf::Error "WHERE: ..."
// without one TAB exactly); `where` becomes the pair's origin.
Pair split_tsv_line(std::string_view line, const std::string& where);

// Every error is an sf::Error "FILE:LINE: what is wrong" (invalid UTF-8, a
// missing or extra TAB, an empty side; for JSONL bad JSON, a row that is not
// {"translation": {...}}, a missing or non-string language key).
ReadResult read_tsv(const std::string& path);
ReadResult read_jsonl(const std::string& path, const std::string& lang_src, const std::string& lang_tgt);
// format: "tsv" | "jsonl".
ReadResult read_pairs(const std::string& path, const std::string& format,
                      const std::string& lang_src, const std::string& lang_tgt);

struct Split {
  std::vector<Pair> train, valid;
};

// A random split, as torch.utils.data.random_split(pairs, [floor((1 - f) n),
// n - floor((1 - f) n)]) with f = val_fraction: train gets the first count,
// valid the rest, drawn by a permutation from Rng(seed). Each part keeps the
// input order, so the result depends only on (pairs, val_fraction, seed).
Split split_pairs(std::vector<Pair> pairs, double val_fraction, uint64_t seed);

}  // namespace sf::data
