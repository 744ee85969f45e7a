// The training report: {experiment_name}/report.html, one self-contained page
// (inline CSS and SVG, nothing fetched) with the loss and learning-rate curves
// over steps, every metric of eval/metrics.h over epochs, sample translations
// and the attention explorer. Rewritten after each validation.
#pragma once
#include <string>
#include <vector>

namespace sf::report {

struct ReportSample {
  std::string source, reference, prediction;
};

struct ReportContent {
  std::string title;
  std::string metrics_path;  // metrics.jsonl, read for the curves and the table
  std::vector<ReportSample> samples;
  std::string explorer;  // the attention explorer's section (report/attention_explorer.h)
};

void write_report(const std::string& path, const ReportContent& content);

}  // namespace sf::report
