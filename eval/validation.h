// Validation at the end of each epoch (docs/07-training.md): the loss over
// the validation pairs, their translations with the config's decoding
// settings, every metric of them, and its log lines. The report it feeds is
// report/validation_report.h's.
#pragma once
#include <string>
#include <vector>

#include "data/batching.h"
#include "data/tokenizer.h"
#include "eval/metrics.h"
#include "infer/inference.h"
#include "nn/transformer.h"
#include "setup/config.h"

namespace sf::eval {

struct ValidationResult {
  double loss = 0;
  Scores scores;
  // The raw source and reference texts; the predictions as spaced tokens, as
  // the model wrote them: what the metrics compare.
  std::vector<std::string> sources, references, predictions;
  // The first predictions (at least val_examples, and those in the report)
  // as people read them: unknown words replaced (see Translation), printed
  // and reported detokenized.
  std::vector<std::string> shown;
  // What the model attended to while translating the first few sentences
  // (the report's attention explorer), recorded during that same decoding.
  std::vector<infer::AttentionRecord> attention;
};

// The mean loss per target token of the pairs of `set`, teacher-forced: the
// training loss (with `label_smoothing`) of every batch, weighted by its
// labels. Without gradients, in the precision autocast has set; the model's
// mode is the caller's. validate's loss, and eval's.
double mean_loss(nn::Transformer& model, const data::BatchedDataset& set, float label_smoothing);

// In eval mode (no dropout), without gradients; the model is back in training
// mode after. Nothing (no predictions) when the validation set is empty.
// `config`: precision, label smoothing, decoding and val_examples.
ValidationResult validate(nn::Transformer& model, const data::BatchedDataset& valid_set,
                          const data::Tokenizer& src_tokenizer, const data::Tokenizer& tgt_tokenizer,
                          const setup::Config& config);

// The log lines: the scores, then the first `examples` sentences beside their references.
std::string validation_lines(int64_t epoch, const ValidationResult& v, int64_t examples);

}  // namespace sf::eval
