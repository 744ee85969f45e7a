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

Tokenizer build_tokenizer(const std::vector<Pair>& pairs, Side side, int64_t min_frequency) {
  std::vector<std::string_view> texts;
  texts.reserve(pairs.size());
  for (const Pair& pair : pairs) texts.push_back(side == Side::Source ? pair.src : pair.tgt);
  return Tokenizer::train(texts, min_frequency);
}

TokenizerFile load_or_build_tokenizer(const std::string& path, const std::vector<Pair>& train,
                                      Side side, int64_t min_frequency, bool save) {
  if (std::filesystem::exists(path)) return {Tokenizer::load(path), true};
  Tokenizer tokenizer = build_tokenizer(train, side, min_frequency);
  if (save) tokenizer.save(path);
  return {std::move(tokenizer), false};
}

}  // namespace sf::data
