#include "validation.h"

#include <algorithm>
#include <filesystem>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "data/detokenizer.h"
#include "train/loss.h"
#include "train/report.h"
#include "train/trainer.h"

namespace sf::train {

// Validation sentences whose attention the report draws, the first ones.
constexpr size_t kHeatmapSentences = 2;

ValidationResult validate(Run& run) {
  ValidationResult result;
  nn::Transformer& model = *run.model;
  const auto& examples = run.valid_set->examples();
  if (examples.empty()) return result;
  model.eval();
  {
    NoGradGuard no_grad;
    AutocastGuard autocast(run.config.precision_dtype());
    double total = 0;
    int64_t count = 0;
    for (data::EpochBatches batches(*run.valid_set, 0); !batches.done();) {
      data::Batch b = batches.next();
      Tensor memory = model.encode(b.encoder_input, b.encoder_mask);
      Tensor features = model.decode(memory, b.encoder_mask, b.decoder_input, b.decoder_mask);
      total += translation_loss(model, features, b.label, run.config.label_smoothing).item() * b.label_tokens;
      count += b.label_tokens;
    }
    result.loss = count > 0 ? total / count : 0.0;
    // The first kHeatmapSentences are decoded on their own, recording their
    // attention for the report; recording every sentence would keep every
    // weight of the validation set.
    size_t heatmaps = std::min(kHeatmapSentences, examples.size());
    std::vector<std::vector<int32_t>> recorded, rest;
    for (size_t i = 0; i < examples.size(); ++i) (i < heatmaps ? recorded : rest).push_back(examples[i].src);
    DecodeOptions options = DecodeOptions::from_config(run.config);
    std::vector<TokenIds> outputs = translate_ids(model, recorded, options, &result.attention);
    std::vector<TokenIds> rest_outputs = translate_ids(model, rest, options);
    outputs.insert(outputs.end(), rest_outputs.begin(), rest_outputs.end());
    for (const TokenIds& ids : outputs) result.predictions.push_back(run.tgt_tokenizer->decode(ids));
    for (const data::Example& e : examples) {
      result.sources.push_back(e.text.src);
      result.references.push_back(e.text.tgt);
    }
    result.scores = score_translations(result.predictions, result.references);
  }
  model.train();
  return result;
}

void print_validation(const Run& run, int64_t epoch, const ValidationResult& v) {
  say(run.comm, "epoch %02lld validation on %zu sentences: loss %.4f  %s\n", static_cast<long long>(epoch),
      v.predictions.size(), v.loss, format_scores(v.scores).c_str());
  for (int64_t i = 0; i < std::min<int64_t>(run.config.val_examples, v.predictions.size()); ++i)
    say(run.comm, "    SOURCE: %s\n    TARGET: %s\n PREDICTED: %s\n", v.sources[i].c_str(), v.references[i].c_str(),
        data::detokenize(v.predictions[i]).c_str());
}

void write_validation_report(const Run& run, const ValidationResult& v) {
  constexpr size_t kSamples = 5;
  ReportContent content;
  content.title = "Scratchformer: " + run.config.experiment_name;
  content.metrics_path = run.metrics_path;
  content.heads = run.config.h;
  for (size_t i = 0; i < std::min(kSamples, v.predictions.size()); ++i)
    content.samples.push_back({v.sources[i], v.references[i], data::detokenize(v.predictions[i])});
  for (const AttentionRecord& record : v.attention)
    content.attention.push_back(attention_maps(record, *run.src_tokenizer, *run.tgt_tokenizer));
  write_report((std::filesystem::path(run.config.experiment_name) / "report.html").string(), content);
}

}  // namespace sf::train
