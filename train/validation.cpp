#include "validation.h"

#include <algorithm>
#include <filesystem>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "data/detokenizer.h"
#include "train/attention_explorer.h"
#include "train/loss.h"
#include "train/report.h"
#include "train/trainer.h"

namespace sf::train {

// Validation sentences whose attention the report's explorer shows, the first ones.
constexpr size_t kExplorerSentences = 20;

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
      total += batch_loss(model, b, run.config.label_smoothing).item() * b.label_tokens;
      count += b.label_tokens;
    }
    result.loss = count > 0 ? total / count : 0.0;
    // The metrics need only the tokens. The sentences people read (printed,
    // reported) have their unknown words replaced, which reads the attention
    // they were translated with; the first kExplorerSentences keep it for the
    // report's explorer (keeping every sentence's would hold every weight of
    // the validation set).
    std::vector<SourceSentence> sources;
    for (const data::Example& e : examples) sources.push_back({e.src, data::split_words(e.text.src)});
    size_t explored = std::min(kExplorerSentences, sources.size());
    size_t shown = std::min(sources.size(), std::max(explored, static_cast<size_t>(run.config.val_examples)));
    auto translate = [&](size_t begin, size_t end, bool replace, std::vector<AttentionRecord>* attention) {
      DecodeOptions options = DecodeOptions::from_config(run.config);
      options.replace_unknown_words = replace;
      std::vector<SourceSentence> part(sources.begin() + begin, sources.begin() + end);
      for (Translation& t : translate_sentences(model, *run.tgt_tokenizer, part, options, attention)) {
        result.predictions.push_back(std::move(t.tokens));
        if (replace) result.shown.push_back(std::move(t.shown));
      }
    };
    translate(0, explored, true, &result.attention);
    translate(explored, shown, true, nullptr);
    translate(shown, sources.size(), false, nullptr);
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
  for (int64_t i = 0; i < std::min<int64_t>(run.config.val_examples, v.shown.size()); ++i)
    say(run.comm, "    SOURCE: %s\n    TARGET: %s\n PREDICTED: %s\n", v.sources[i].c_str(), v.references[i].c_str(),
        data::detokenize(v.shown[i]).c_str());
}

void write_validation_report(const Run& run, const ValidationResult& v) {
  constexpr size_t kSamples = 5;
  ReportContent content;
  content.title = "Scratchformer: " + run.config.experiment_name;
  content.metrics_path = run.metrics_path;
  for (size_t i = 0; i < std::min(kSamples, v.shown.size()); ++i)
    content.samples.push_back({v.sources[i], v.references[i], data::detokenize(v.shown[i])});
  std::vector<ExplorerSentence> explored;
  for (size_t i = 0; i < v.attention.size(); ++i)
    explored.push_back({v.sources[i], data::detokenize(v.shown[i]), v.attention[i]});
  content.explorer = attention_explorer(explored, *run.src_tokenizer, *run.tgt_tokenizer);
  write_report((std::filesystem::path(run.config.experiment_name) / "report.html").string(), content);
}

}  // namespace sf::train
