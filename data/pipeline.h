// The data steps of a training run, from the config's data options (the keys
// are listed in docs/10-formats.md): read or generate the pairs, split off
// validation pairs when there is no valid file, and load or build each
// language's tokenizer (a Hugging Face tokenizers JSON file). Then
// batching.h: encode_pairs, drop_long_examples (max_len_filter), BatchedDataset.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "corpus.h"
#include "tokenizer.h"

namespace sf::data {

struct CorpusOptions {
  std::string task;             // a built-in toy task (toy_tasks.h) ...
  int64_t size = 20000;         // ... and how many pairs to generate
  std::string train, valid;     // or files; `valid` optional
  std::string format = "tsv";   // tsv | jsonl
  std::string lang_src = "en", lang_tgt = "it";  // the JSONL keys
  double val_fraction = 0.1;    // used when there is no valid file
  uint64_t seed = 42;           // generation and split
};

struct Corpus {
  std::vector<Pair> train, valid;
  int64_t blank_lines = 0;  // skipped in the files read
};

Corpus load_corpus(const CorpusOptions& options);

enum class Side { Source, Target };

// The config's tokenizer keys (docs/10-formats.md).
struct TokenizerOptions {
  std::string kind = "word";  // word | bpe
  int64_t min_frequency = 2;  // word
  int64_t vocab_size = 8000;  // bpe, special tokens included
  bool shared_vocab = false;  // bpe: one vocabulary learnt from both sides
};

// What a tokenizer built from one side of `pairs` with `options` records as
// its origin (both sides with shared_vocab).
Tokenizer::Origin tokenizer_origin(const std::vector<Pair>& pairs, Side side, const TokenizerOptions& options);

// A tokenizer trained on one side of `pairs` (both sides with shared_vocab:
// then the source's and the target's are the same), its origin recorded.
// Callers pass the training pairs only, so no validation sentence shapes the
// vocabulary.
Tokenizer build_tokenizer(const std::vector<Pair>& pairs, Side side, const TokenizerOptions& options);

struct TokenizerFile {
  Tokenizer tokenizer;
  std::string sha256;  // of the file's bytes (of the bytes it would have, when not saved)
  bool loaded = false;  // true: read from the existing file; false: built (and saved there)
};

// Reads a tokenizer file, which must hold a tokenizer of `kind` ("word" | "bpe").
TokenizerFile read_tokenizer_file(const std::string& path, const std::string& kind);

// When an existing file built from other data than this run's (its origin
// differs) may be used or replaced. A file that records no origin (made by
// other tools) is used as it is.
struct TokenizerReuse {
  // The SHA-256 of the tokenizer of a model the run starts from (preload):
  // a file with it is that model's, and is used whatever it was built from.
  std::string model_sha256;
  bool overwrite = false;  // build it again and save it over the old one
  // Use the file whatever it was built from: a data-parallel rank other than
  // the writer, which decides (unless it builds the file again).
  bool any_origin = false;
};

// If `path` exists the tokenizer is loaded from it when it was built from
// `train` with `options` (or `reuse` allows it); otherwise built from the
// training pairs and, with `save`, saved to it (creating its folder). A file
// built from other data is an error naming it and what to do.
TokenizerFile load_or_build_tokenizer(const std::string& path, const std::vector<Pair>& train, Side side,
                                      const TokenizerOptions& options, bool save = true,
                                      const TokenizerReuse& reuse = {});

}  // namespace sf::data
