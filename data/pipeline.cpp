#include "pipeline.h"

#include <cstdio>
#include <filesystem>

#include "base/digest.h"
#include "base/error.h"
#include "base/sha256.h"
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

namespace {

// The texts a tokenizer learns from: one side of the pairs, or both when they share one vocabulary.
std::vector<std::string_view> learnt_texts(const std::vector<Pair>& pairs, Side side, const TokenizerOptions& options) {
  bool both = options.kind == "bpe" && options.shared_vocab;
  std::vector<std::string_view> texts;
  texts.reserve(pairs.size() * (both ? 2 : 1));
  for (const Pair& pair : pairs) {
    if (both || side == Side::Source) texts.push_back(pair.src);
    if (both || side == Side::Target) texts.push_back(pair.tgt);
  }
  return texts;
}

}  // namespace

Tokenizer::Origin tokenizer_origin(const std::vector<Pair>& pairs, Side side, const TokenizerOptions& options) {
  Digest digest;
  for (std::string_view text : learnt_texts(pairs, side, options)) {
    digest.add_words(text.data(), text.size());
    digest.add_value(text.size());  // where one text ends and the next begins
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest.value()));
  std::string settings = options.kind == "bpe" ? "bpe vocab_size " + std::to_string(options.vocab_size) +
                                                     (options.shared_vocab ? " shared" : "")
                                               : "word min_frequency " + std::to_string(options.min_frequency);
  return {static_cast<int64_t>(pairs.size()), settings, hex};
}

Tokenizer build_tokenizer(const std::vector<Pair>& pairs, Side side, const TokenizerOptions& options) {
  std::vector<std::string_view> texts = learnt_texts(pairs, side, options);
  if (options.kind != "bpe" && options.kind != "word") internal_fail("tokenizer kind \"", options.kind, "\"");
  Tokenizer tokenizer = options.kind == "bpe" ? Tokenizer::train_bpe(texts, options.vocab_size)
                                              : Tokenizer::train(texts, options.min_frequency);
  tokenizer.set_origin(tokenizer_origin(pairs, side, options));
  return tokenizer;
}

TokenizerFile read_tokenizer_file(const std::string& path, const std::string& kind) {
  std::string sha256;
  Tokenizer tokenizer = Tokenizer::load(path, &sha256);
  if (tokenizer.is_bpe() != (kind == "bpe"))
    fail(path, ": holds a ", tokenizer.is_bpe() ? "BPE" : "WordLevel", " tokenizer, but the config's tokenizer is \"",
         kind, "\" (delete the file or change tokenizer_file)");
  return {std::move(tokenizer), std::move(sha256), true};
}

// How a file's origin differs from this run's, most telling first.
static std::string origin_difference(const Tokenizer::Origin& file, const Tokenizer::Origin& run) {
  if (file.settings != run.settings) return "with other settings (" + file.settings + ") than this run's (" + run.settings + ")";
  if (file.pairs != run.pairs)
    return "from other training data (" + std::to_string(file.pairs) + " pairs) than this run's (" +
           std::to_string(run.pairs) + " pairs)";
  return "from other training sentences than this run's (" + std::to_string(run.pairs) + " pairs each)";
}

TokenizerFile load_or_build_tokenizer(const std::string& path, const std::vector<Pair>& train, Side side,
                                      const TokenizerOptions& options, bool save, const TokenizerReuse& reuse) {
  Tokenizer::Origin origin = tokenizer_origin(train, side, options);
  if (std::filesystem::exists(path)) {
    TokenizerFile file = read_tokenizer_file(path, options.kind);
    const std::optional<Tokenizer::Origin>& built_from = file.tokenizer.origin();
    bool own = !built_from || *built_from == origin || file.sha256 == reuse.model_sha256;
    if (own || (reuse.any_origin && !reuse.overwrite)) return file;
    if (!reuse.overwrite)
      fail(path, ": was built ", origin_difference(*built_from, origin), "; point tokenizer_file at a path of this ",
           "run's own, delete the file, or set overwrite to true to build it again");
  }
  Tokenizer tokenizer = build_tokenizer(train, side, options);
  std::string text = save ? tokenizer.save(path) : tokenizer.file_text();
  return {std::move(tokenizer), sha256_hex(text), false};
}

}  // namespace sf::data
