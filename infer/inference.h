// Using a trained model: what the `translate`, `eval` and `score` commands do,
// and what validation reuses. A Session holds the config, both tokenizers and the
// model loaded from a checkpoint; it never needs the training data.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/batching.h"
#include "data/tokenizer.h"
#include "nn/transformer.h"
#include "setup/config.h"
#include "setup/model_identity.h"
#include "infer/decode_place.h"
#include "infer/decoding.h"

namespace sf::infer {

struct Session {
  setup::Config config;
  data::Tokenizer src_tokenizer, tgt_tokenizer;
  std::unique_ptr<nn::Transformer> model;
  std::string checkpoint;  // the weights file loaded
  setup::ModelIdentity identity;  // what that file records (an export or an average records it again)

  // `checkpoint`: a weights file, or the latest complete one in model_folder.
  // It must be the model the config and its tokenizer files describe
  // (setup/model_identity.h).
  static Session open(const setup::Config& config, const std::optional<std::string>& checkpoint);
};

// Sentences per inference batch: the training batch size, but at least 32, as
// decoding a few sentences at a time leaves the machine idle.
int64_t inference_batch_size(const setup::Config& config);

struct DecodeOptions {
  int64_t beam;  // 1: greedy
  float length_penalty;
  int64_t max_len;  // decoder positions (seq_len)
  int64_t batch_size;
  // Whether Translation::shown replaces each [UNK] by the source word it
  // attends to most (infer/unknown_words.h), which needs the attention.
  bool replace_unknown_words = true;
  // Where each size class of batches decodes (infer/decode_place.h): the
  // process's choices, or a test's own.
  DecodePlaces* places = &DecodePlaces::process();

  // The config's beam (or `beam`, e.g. --beam), length_penalty and seq_len,
  // batches of inference_batch_size.
  static DecodeOptions from_config(const setup::Config& config, std::optional<int64_t> beam = std::nullopt);
};

// Translates every source (token ids), batched by similar lengths; the results
// come back in input order. A model on a device the host cannot address
// decodes each batch there or on a CPU copy, whichever is faster for batches
// of its size (infer/decode_place.h). With `attention`, it also receives each
// sentence's attention record (see greedy_decode and beam_search), in input order.
std::vector<TokenIds> translate_ids(nn::Transformer& model, const std::vector<std::vector<int32_t>>& sources,
                                    const DecodeOptions& options, std::vector<AttentionRecord>* attention = nullptr);

// A sentence to translate: its token ids, and the words or subword units they
// encode (one per id, see Tokenizer::token_texts), views into its text.
struct SourceSentence {
  std::vector<int32_t> ids;
  std::vector<std::string_view> words;
};

// A translation as spaced target tokens (as Tokenizer::decode writes them).
struct Translation {
  std::string tokens;  // as the model wrote them, [UNK] kept: what the metrics compare
  std::string shown;   // for people to read: each [UNK] replaced, when the options say so
};

// The translations of `sources`; `attention` as translate_ids.
std::vector<Translation> translate_sentences(nn::Transformer& model, const data::Tokenizer& target_tokenizer,
                                             const std::vector<SourceSentence>& sources, const DecodeOptions& options,
                                             std::vector<AttentionRecord>* attention = nullptr);

// The translations of `sentences` (each checked to be UTF-8 and to fit
// seq_len), as translate_sentences gives them.
std::vector<Translation> translate_lines(Session& session, const std::vector<std::string>& sentences,
                                         const DecodeOptions& options,
                                         std::vector<AttentionRecord>* attention = nullptr);

struct PairNll {
  double nll;      // -sum log p of the target tokens and [EOS]
  int64_t tokens;  // target tokens + 1
};

// Teacher-forced negative log-likelihood of each example (source and target
// ids, batched as training batches them, so one too long for seq_len is an
// error naming its origin): dropout off, no label smoothing.
std::vector<PairNll> score_pairs(nn::Transformer& model, std::vector<data::Example> examples, int64_t seq_len,
                                 int64_t batch_size);

}  // namespace sf::infer
