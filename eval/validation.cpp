#include "validation.h"

#include <algorithm>
#include <cstdio>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "data/detokenizer.h"
#include "setup/loss.h"

namespace sf::eval {

// Validation sentences whose attention the report's explorer shows, the first ones.
constexpr size_t kExplorerSentences = 20;

double mean_loss(nn::Transformer& model, const data::BatchedDataset& set, float label_smoothing) {
  NoGradGuard no_grad;
  double total = 0;
  int64_t count = 0;
  for (data::EpochBatches batches(set, 0); !batches.done();) {
    data::Batch b = batches.next();
    total += setup::batch_loss(model, b, label_smoothing).item() * b.label_tokens;
    count += b.label_tokens;
  }
  return count > 0 ? total / count : 0.0;
}

ValidationResult validate(nn::Transformer& model, const data::BatchedDataset& valid_set,
                          const data::Tokenizer& src_tokenizer, const data::Tokenizer& tgt_tokenizer,
                          const setup::Config& config) {
  ValidationResult result;
  const auto& examples = valid_set.examples();
  if (examples.empty()) return result;
  model.eval();
  {
    NoGradGuard no_grad;
    AutocastGuard autocast(config.precision_dtype());
    result.loss = mean_loss(model, valid_set, config.label_smoothing);
    // The metrics need only the tokens. The sentences people read (printed,
    // reported) have their unknown words replaced, which reads the attention
    // they were translated with; the first kExplorerSentences keep it for the
    // report's explorer (keeping every sentence's would hold every weight of
    // the validation set).
    std::vector<infer::SourceSentence> sources;
    for (const data::Example& e : examples) sources.push_back({e.src, src_tokenizer.token_texts(e.text.src)});
    size_t explored = std::min(kExplorerSentences, sources.size());
    size_t shown = std::min(sources.size(), std::max(explored, static_cast<size_t>(config.val_examples)));
    auto translate = [&](size_t begin, size_t end, bool replace, std::vector<infer::AttentionRecord>* attention) {
      infer::DecodeOptions options = infer::DecodeOptions::from_config(config);
      options.replace_unknown_words = replace;
      std::vector<infer::SourceSentence> part(sources.begin() + begin, sources.begin() + end);
      for (infer::Translation& t : infer::translate_sentences(model, tgt_tokenizer, part, options, attention)) {
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
    result.scores = score_translations(result.predictions, result.references, config.lang_tgt);
  }
  model.train();
  return result;
}

std::string validation_lines(int64_t epoch, const ValidationResult& v, int64_t examples) {
  char head[64];
  std::snprintf(head, sizeof head, "epoch %02lld validation on %zu sentences: loss %.4f  ", static_cast<long long>(epoch),
                v.predictions.size(), v.loss);
  std::string lines = head + format_scores(v.scores) + "\n";
  for (int64_t i = 0; i < std::min<int64_t>(examples, v.shown.size()); ++i)
    lines += "    SOURCE: " + v.sources[i] + "\n    TARGET: " + v.references[i] +
             "\n PREDICTED: " + data::detokenize(v.shown[i]) + "\n";
  return lines;
}

}  // namespace sf::eval
