#include "attention_maps.h"

#include <algorithm>
#include <cstdio>
#include <sstream>


namespace sf::infer {

std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<std::string> token_texts(const data::Tokenizer& tokenizer, const TokenIds& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(tokenizer.id_to_token(id));
  return out;
}

namespace {

// Splits a block's weights [h, rows, cols] into one map per head.
void add_heads(std::vector<AttentionMap>& maps, const std::string& block, const AttentionWeights& weights,
               const std::vector<std::string>& rows, const std::vector<std::string>& cols) {
  int64_t size = weights.queries * weights.keys;
  for (int64_t h = 0; h < weights.heads; ++h) {
    auto w = weights.values.begin() + h * size;
    maps.push_back({block + ", head " + std::to_string(h), rows, cols, std::vector<float>(w, w + size)});
  }
}

}  // namespace

std::vector<AttentionMap> attention_maps(const AttentionRecord& record, const data::Tokenizer& src_tokenizer,
                                         const data::Tokenizer& tgt_tokenizer) {
  std::vector<std::string> src_words = token_texts(src_tokenizer, record.source);
  std::vector<std::string> tgt_words = token_texts(tgt_tokenizer, record.target);
  std::vector<AttentionMap> maps;
  for (size_t l = 0; l < record.encoder_self.size(); ++l)
    add_heads(maps, "encoder layer " + std::to_string(l) + " self-attention", record.encoder_self[l],
              src_words, src_words);
  for (size_t l = 0; l < record.decoder_self.size(); ++l) {
    std::string layer = "decoder layer " + std::to_string(l);
    add_heads(maps, layer + " self-attention", record.decoder_self[l], tgt_words, tgt_words);
    add_heads(maps, layer + " cross-attention", record.cross[l], tgt_words, src_words);
  }
  return maps;
}

std::string attention_svg(const std::vector<AttentionMap>& maps, int64_t heads_per_row) {
  // Layout: each map is a grid of cells with the key tokens rotated above it
  // and the query tokens to its left; maps flow left to right, wrapping after
  // `heads_per_row`.
  constexpr double kCell = 14, kLabel = 70, kTitle = 16, kGap = 18;
  size_t max_rows = 1, max_cols = 1;
  for (const AttentionMap& m : maps) {
    max_rows = std::max(max_rows, m.rows.size());
    max_cols = std::max(max_cols, m.cols.size());
  }
  // Wide enough for the panel's title, too.
  double panel_w = std::max(kLabel + kCell * max_cols + kGap, 240.0), panel_h = kTitle + kLabel + kCell * max_rows + kGap;
  int64_t per_row = std::max<int64_t>(1, heads_per_row);
  int64_t grid_rows = (static_cast<int64_t>(maps.size()) + per_row - 1) / per_row;
  std::ostringstream svg;
  char buffer[256];
  std::snprintf(buffer, sizeof buffer,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"attention\" width=\"%.0f\" height=\"%.0f\" "
                "font-family=\"sans-serif\" font-size=\"10\">\n",
                panel_w * std::min<int64_t>(per_row, static_cast<int64_t>(maps.size())), panel_h * grid_rows);
  svg << buffer;
  for (size_t i = 0; i < maps.size(); ++i) {
    const AttentionMap& m = maps[i];
    double x0 = panel_w * static_cast<double>(i % per_row), y0 = panel_h * static_cast<double>(i / per_row);
    double gx = x0 + kLabel, gy = y0 + kTitle + kLabel;
    svg << "<g class=\"heatmap\"><title>" << escape_xml(m.title) << "</title>\n";
    std::snprintf(buffer, sizeof buffer, "<text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\">", x0, y0 + 11);
    svg << buffer << escape_xml(m.title) << "</text>\n";
    for (size_t c = 0; c < m.cols.size(); ++c) {
      double x = gx + kCell * (c + 0.5);
      std::snprintf(buffer, sizeof buffer, "<text transform=\"translate(%.1f %.1f) rotate(-60)\">", x + 3, gy - 3);
      svg << buffer << escape_xml(m.cols[c]) << "</text>\n";
    }
    for (size_t r = 0; r < m.rows.size(); ++r) {
      std::snprintf(buffer, sizeof buffer, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", gx - 3,
                    gy + kCell * (r + 0.75));
      svg << buffer << escape_xml(m.rows[r]) << "</text>\n";
      for (size_t c = 0; c < m.cols.size(); ++c) {
        float w = m.weights[r * m.cols.size() + c];
        std::snprintf(buffer, sizeof buffer,
                      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"#1f4e9c\" "
                      "fill-opacity=\"%.3f\" stroke=\"#ddd\" stroke-width=\"0.5\"><title>%.3f</title></rect>\n",
                      gx + kCell * c, gy + kCell * r, kCell, kCell, std::clamp(w, 0.0f, 1.0f), w);
        svg << buffer;
      }
    }
    svg << "</g>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace sf::infer
