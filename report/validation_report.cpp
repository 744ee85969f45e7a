#include "validation_report.h"

#include <algorithm>
#include <filesystem>

#include "data/detokenizer.h"
#include "report/attention_explorer.h"
#include "report/report.h"

namespace sf::report {

void write_validation_report(const std::string& experiment_name, const std::string& metrics_path,
                             const eval::ValidationResult& v, const data::Tokenizer& src_tokenizer,
                             const data::Tokenizer& tgt_tokenizer) {
  constexpr size_t kSamples = 5;
  ReportContent content;
  content.title = "Scratchformer: " + experiment_name;
  content.metrics_path = metrics_path;
  for (size_t i = 0; i < std::min(kSamples, v.shown.size()); ++i)
    content.samples.push_back({v.sources[i], v.references[i], data::detokenize(v.shown[i])});
  std::vector<ExplorerSentence> explored;
  for (size_t i = 0; i < v.attention.size(); ++i)
    explored.push_back({v.sources[i], data::detokenize(v.shown[i]), v.attention[i]});
  content.explorer = attention_explorer(explored, src_tokenizer, tgt_tokenizer);
  write_report((std::filesystem::path(experiment_name) / "report.html").string(), content);
}

}  // namespace sf::report
