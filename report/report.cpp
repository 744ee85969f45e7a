#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/atomic_file.h"
#include "infer/attention_maps.h"
#include "report/metrics_log.h"
#include "eval/moses_bleu.h"
#include "eval/sacrebleu.h"

namespace sf::report {

using infer::escape_xml;

namespace {

std::string number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", v);
  return buffer;
}

// At most `limit` points: consecutive points averaged in equal groups, so a
// long run's curve stays small and smooth.
std::vector<std::pair<double, double>> thin(const std::vector<std::pair<double, double>>& points, size_t limit) {
  if (points.size() <= limit) return points;
  std::vector<std::pair<double, double>> out;
  size_t group = (points.size() + limit - 1) / limit;
  for (size_t i = 0; i < points.size(); i += group) {
    size_t end = std::min(points.size(), i + group);
    double x = 0, y = 0;
    for (size_t j = i; j < end; ++j) x += points[j].first, y += points[j].second;
    out.push_back({x / double(end - i), y / double(end - i)});
  }
  return out;
}

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> points;
};

// An SVG line chart of one or more series of (x, y) points, the legend in a
// column right of the plot so that it never covers a curve.
std::string line_chart(const std::string& title, const std::string& x_label, const std::vector<Series>& series) {
  constexpr double kCharWidth = 7, kLegendLine = 15;  // generous for 11 px sans-serif
  size_t longest = 0;
  for (const Series& s : series) longest = std::max(longest, s.name.size());
  const double legend_w = 16 + kCharWidth * double(longest);
  const double W = 420 + legend_w, H = 240, L = 56, R = 12 + legend_w, T = 28, B = 40;
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  for (const Series& s : series)
    for (auto [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      x_min = std::min(x_min, x), x_max = std::max(x_max, x);
      y_min = std::min(y_min, y), y_max = std::max(y_max, y);
    }
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<text x=\"" << L << "\" y=\"16\" font-weight=\"bold\">" << escape_xml(title) << "</text>\n";
  if (!std::isfinite(x_min)) return svg.str() + "<text x=\"60\" y=\"120\">no data yet</text></svg>\n";
  if (x_max == x_min) x_max = x_min + 1;
  if (y_max == y_min) y_max = y_min + 1;
  auto px = [&](double x) { return L + (x - x_min) / (x_max - x_min) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y_min) / (y_max - y_min) * (H - T - B); };
  // Axes with their end values, and the x label.
  svg << "<path d=\"M" << L << " " << T << " V" << H - B << " H" << W - R << "\" stroke=\"#444\" fill=\"none\"/>\n";
  for (double y : {y_min, (y_min + y_max) / 2, y_max})
    svg << "<text x=\"" << L - 4 << "\" y=\"" << py(y) + 4 << "\" text-anchor=\"end\">" << number(y) << "</text>\n"
        << "<path d=\"M" << L << " " << py(y) << " H" << W - R << "\" stroke=\"#eee\"/>\n";
  for (double x : {x_min, x_max})
    svg << "<text x=\"" << px(x) << "\" y=\"" << H - B + 14 << "\" text-anchor=\"middle\">" << number(x) << "</text>\n";
  svg << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 8 << "\" text-anchor=\"middle\">" << escape_xml(x_label)
      << "</text>\n";
  double legend_x = W - legend_w + 4;
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    svg << "<polyline class=\"series\" fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"1.5\" points=\"";
    for (auto [x, y] : s.points)
      if (std::isfinite(y)) svg << number(px(x)) << "," << number(py(y)) << " ";
    svg << "\"/>\n";
    if (s.points.size() == 1)
      svg << "<circle cx=\"" << px(s.points[0].first) << "\" cy=\"" << py(s.points[0].second)
          << "\" r=\"3\" fill=\"" << s.color << "\"/>\n";
    svg << "<text x=\"" << legend_x << "\" y=\"" << T + 8 + kLegendLine * double(i) << "\" fill=\"" << s.color << "\">"
        << escape_xml(s.name) << "</text>\n";
  }
  return svg.str() + "</svg>\n";
}

// The validation charts: one per distinct Metric::chart, in table order, with
// a curve per metric over epochs.
std::string metric_charts(const std::vector<ValidRecord>& valid) {
  static const char* kColors[] = {"#2ca02c", "#9467bd", "#d62728", "#8c564b", "#17becf", "#bcbd22", "#e377c2"};
  std::vector<std::pair<std::string, std::vector<Series>>> charts;  // title, curves
  for (size_t i = 0; i < eval::metrics().size(); ++i) {
    const eval::Metric& m = eval::metrics()[i];
    auto at = std::find_if(charts.begin(), charts.end(), [&](const auto& chart) { return chart.first == m.chart; });
    if (at == charts.end()) at = charts.insert(at, {m.chart, {}});
    Series series{m.label, kColors[i % std::size(kColors)], {}};
    for (const ValidRecord& r : valid) series.points.push_back({double(r.epoch), r.scores.values.at(i)});
    at->second.push_back(std::move(series));
  }
  std::string svg;
  for (const auto& [title, curves] : charts) svg += line_chart(title, "epoch", curves);
  return svg;
}

}  // namespace

void write_report(const std::string& path, const ReportContent& c) {
  std::vector<StepRecord> steps;
  std::vector<ValidRecord> valid;
  read_metrics(c.metrics_path, steps, valid);
  std::vector<std::pair<double, double>> loss, lr, valid_loss;
  for (const StepRecord& r : steps) {
    loss.push_back({double(r.step), r.loss});
    lr.push_back({double(r.step), r.lr});
  }
  for (const ValidRecord& r : valid) valid_loss.push_back({double(r.epoch), r.loss});
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << escape_xml(c.title)
       << "</title>\n<style>\n"
          "body{font-family:sans-serif;margin:24px;color:#222}h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
          ".charts{display:flex;flex-wrap:wrap;gap:12px}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f4f4f4}\n</style></head><body>\n"
       << "<h1>" << escape_xml(c.title) << "</h1>\n<h2>Training</h2>\n<div class=\"charts\">\n"
       << line_chart("training loss", "step", {{"loss", "#1f77b4", thin(loss, 1000)}})
       << line_chart("learning rate", "step", {{"lr", "#ff7f0e", thin(lr, 1000)}})
       << "</div>\n<h2>Validation</h2>\n<div class=\"charts\">\n"
       << line_chart("validation loss", "epoch", {{"loss", "#1f77b4", valid_loss}}) << metric_charts(valid)
       << "</div>\n<table><tr><th>epoch</th><th>step</th><th>loss</th>";
  // The table's metric columns, each marked with the direction that is better.
  for (const eval::Metric& m : eval::metrics())
    html << "<th>" << escape_xml(m.label)
         << (m.better == eval::Better::higher ? " ↑" : m.better == eval::Better::lower ? " ↓" : "") << "</th>";
  html << "</tr>\n";
  for (const ValidRecord& r : valid) {
    html << "<tr><td>" << number(double(r.epoch)) << "</td><td>" << number(double(r.step)) << "</td><td>"
         << number(r.loss) << "</td>";
    for (double value : r.scores.values) html << "<td>" << number(value) << "</td>";
    html << "</tr>\n";
  }
  html << "</table>\n<p>token BLEU scores our own word tokens; sacreBLEU scores the detokenized output as sacreBLEU "
          "does, comparable with published figures: "
       << escape_xml(eval::sacrebleu_signature()) << " (lowercased: " << escape_xml(eval::sacrebleu_signature(eval::Case::lowercase))
       << "). The Multi30k papers' BLEU scores lowercased Moses tokens as multi-bleu.perl does: "
       << escape_xml(eval::moses_bleu_signature()) << "</p>\n<h2>Sample translations</h2>\n<table><tr><th>source</th><th>reference</th><th>prediction</th></tr>\n";
  for (const ReportSample& s : c.samples)
    html << "<tr><td>" << escape_xml(s.source) << "</td><td>" << escape_xml(s.reference) << "</td><td>"
         << escape_xml(s.prediction) << "</td></tr>\n";
  html << "</table>\n" << c.explorer << "</body></html>\n";
  write_file_atomically(path, html.str());
}

}  // namespace sf::report
