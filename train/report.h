// The training report: {experiment_name}/report.html, one self-contained page
// (inline CSS and SVG, nothing fetched) with the loss and learning-rate curves
// over steps, every metric of train/metrics.h over epochs, sample translations
// and attention heatmaps. Rewritten after each validation.
#pragma once
#include <string>
#include <vector>

#include "train/attention_maps.h"

namespace sf::train {

struct ReportSample {
  std::string source, reference, prediction;
};

struct ReportContent {
  std::string title;
  std::string metrics_path;  // metrics.jsonl, read for the curves and the table
  std::vector<ReportSample> samples;
  // Per sentence, its attention maps (see attention_maps).
  std::vector<std::vector<AttentionMap>> attention;
  int64_t heads = 1;
};

void write_report(const std::string& path, const ReportContent& content);

}  // namespace sf::train
