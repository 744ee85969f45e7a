// Validation at the end of each epoch (docs/07-training.md): the loss over
// the validation pairs, their translations with the config's decoding
// settings, every metric of them; its log lines and the report it feeds.
#pragma once
#include <string>
#include <vector>

#include "train/inference.h"
#include "train/metrics.h"

namespace sf::train {

struct Run;  // train/trainer.h

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
  std::vector<AttentionRecord> attention;
};

// In eval mode (no dropout), without gradients; the model is back in training
// mode after. Nothing (no predictions) when the validation set is empty.
ValidationResult validate(Run& run);

// On rank 0: the scores, then the first val_examples sentences beside their references.
void print_validation(const Run& run, int64_t epoch, const ValidationResult& v);

// {experiment_name}/report.html: the curves of metrics.jsonl, and the
// first validation sentences as samples and in the attention explorer.
void write_validation_report(const Run& run, const ValidationResult& v);

}  // namespace sf::train
