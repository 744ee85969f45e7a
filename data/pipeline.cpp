#include "pipeline.h"

#include <filesystem>

#include "base/error.h"
#include "toy_tasks.h"

namespace sf::data {

Corpus load_corpus(const CorpusOptions& options) {
  Corpus corpus;
  std::vector<Pair> all;
  if (!options.task.empty()) {
    all = generate_toy_task(options.task, options.size, options.seed);
  } else {
    if (options.train.empty()) internal_fail("data: neither a task nor a train file");
    ReadResult train = read_pairs(options.train, options.format, options.lang_src, options.lang_tgt);
    corpus.blank_lines = train.blank_lines;
    if (!options.valid.empty()) {
      ReadResult valid = read_pairs(options.valid, options.format, options.lang_src, options.lang_tgt);
      corpus.train = std::move(train.pairs);
      corpus.valid = std::move(valid.pairs);
      corpus.blank_lines += valid.blank_lines;
      return corpus;
    }
    all = std::move(train.pairs);
  }
  Split split = split_pairs(std::move(all), options.val_fraction, options.seed);
  corpus.train = std::move(split.train);
  corpus.valid = std::move(split.valid);
  return corpus;
}

Tokenizer build_tokenizer(const std::vector<Pair>& pairs, Side side, const TokenizerOptions& options) {
  bool both = options.kind == "bpe" && options.shared_vocab;
  std::vector<std::string_view> texts;
  texts.reserve(pairs.size() * (both ? 2 : 1));
  for (const Pair& pair : pairs) {
    if (both || side == Side::Source) texts.push_back(pair.src);
    if (both || side == Side::Target) texts.push_back(pair.tgt);
  }
  if (options.kind == "bpe") return Tokenizer::train_bpe(texts, options.vocab_size);
  if (options.kind != "word") internal_fail("tokenizer kind \"", options.kind, "\"");
  return Tokenizer::train(texts, options.min_frequency);
}

TokenizerFile load_or_build_tokenizer(const std::string& path, const std::vector<Pair>& train,
                                      Side side, const TokenizerOptions& options, bool save) {
  if (std::filesystem::exists(path)) return {Tokenizer::load(path), true};
  Tokenizer tokenizer = build_tokenizer(train, side, options);
  if (save) tokenizer.save(path);
  return {std::move(tokenizer), false};
}

}  // namespace sf::data
