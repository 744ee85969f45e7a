// Using a trained model: what `translate`, `eval` and `score` do, and what
// validation reuses. A Session holds the config, both tokenizers and the
// model loaded from a checkpoint; it never needs the training data.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/batching.h"
#include "data/tokenizer.h"
#include "nn/transformer.h"
#include "train/config.h"
#include "train/decoding.h"

namespace sf::train {

struct Session {
  Config config;
  data::Tokenizer src_tokenizer, tgt_tokenizer;
  std::unique_ptr<nn::Transformer> model;
  std::string checkpoint;  // the weights file loaded

  // `checkpoint`: a weights file, or the latest complete one in model_folder.
  static Session open(const Config& config, const std::optional<std::string>& checkpoint);
};

struct DecodeOptions {
  int64_t beam = 1;  // 1: greedy
  float length_penalty = 0.6f;
  int64_t max_len = 350;  // decoder positions (seq_len)
  int64_t batch_size = 32;
};

// Translates every source (token ids), batched by similar lengths; the results
// come back in input order. With `attention`, it also receives each
// sentence's attention record (see greedy_decode and beam_search), in input order.
std::vector<TokenIds> translate_ids(nn::Transformer& model,
                                    const std::vector<std::vector<int32_t>>& sources,
                                    const DecodeOptions& options,
                                    std::vector<AttentionRecord>* attention = nullptr);

// Encodes `text` with the source tokenizer, checking it fits seq_len
// (`where` names it in the error).
std::vector<int32_t> encode_source(const Session& session, const std::string& text,
                                   const std::string& where);

// The translate command's lines for `sentences`; `attention` as translate_ids.
std::vector<std::string> translate_lines(Session& session, const std::vector<std::string>& sentences,
                                         const DecodeOptions& options,
                                         std::vector<AttentionRecord>* attention = nullptr);

struct Scores {
  double bleu = 0, chrf = 0, cer = 0, wer = 0;
  double exact_match = 0;  // fraction of hypotheses equal to their reference
};

// Each hypothesis against its raw reference, both pre-tokenised (see metrics.h).
Scores score_translations(const std::vector<std::string>& hypotheses,
                          const std::vector<std::string>& references);

struct PairNll {
  double nll;      // -sum log p of the target tokens and [EOS]
  int64_t tokens;  // target tokens + 1
};

// Teacher-forced negative log-likelihood of each example (source and target
// ids, batched as training batches them, so one too long for seq_len is an
// error naming its origin): dropout off, no label smoothing.
std::vector<PairNll> score_pairs(nn::Transformer& model, std::vector<data::Example> examples,
                                 int64_t seq_len, int64_t batch_size);

}  // namespace sf::train
