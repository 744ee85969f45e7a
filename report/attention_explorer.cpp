#include "attention_explorer.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "infer/attention_maps.h"

namespace sf::report {

namespace {

// The script and style, embedded at build time (see the Makefile).
const char kScript[] =
#include "report/attention_explorer.js.inc"
    ;
const char kStyle[] =
#include "report/attention_explorer.css.inc"
    ;

nlohmann::json layers(const std::vector<infer::AttentionWeights>& block) {
  nlohmann::json out = nlohmann::json::array();
  for (const infer::AttentionWeights& w : block) out.push_back(quantised_base64(w.values));
  return out;
}

}  // namespace

std::string quantised_base64(const std::vector<float>& weights) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes;
  for (float w : weights) bytes.push_back(static_cast<uint8_t>(std::lround(std::clamp(w, 0.0f, 1.0f) * 255.0f)));
  std::string out;
  // Each 3 bytes become 4 characters of 6 bits; '=' pads the last group.
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t group = uint32_t(bytes[i]) << 16;
    if (i + 1 < bytes.size()) group |= uint32_t(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) group |= bytes[i + 2];
    out += kAlphabet[(group >> 18) & 63];
    out += kAlphabet[(group >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(group >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[group & 63] : '=';
  }
  return out;
}

std::string attention_explorer(const std::vector<ExplorerSentence>& sentences, const data::Tokenizer& src_tokenizer,
                               const data::Tokenizer& tgt_tokenizer) {
  nlohmann::json list = nlohmann::json::array();
  for (const ExplorerSentence& s : sentences) {
    const infer::AttentionRecord& r = s.record;
    list.push_back({{"text", s.text},
                    {"translation", s.translation},
                    {"source", infer::token_texts(src_tokenizer, r.source)},
                    {"target", infer::token_texts(tgt_tokenizer, r.target)},
                    {"layers", r.cross.size()},
                    {"heads", r.cross.empty() ? 0 : r.cross[0].heads},
                    {"blocks",
                     {{"encoder_self", layers(r.encoder_self)},
                      {"decoder_self", layers(r.decoder_self)},
                      {"cross", layers(r.cross)}}}});
  }
  // Inside <script>, "</" could end the element early; "<\/" is the same JSON.
  std::string json;
  for (char c : nlohmann::json{{"sentences", list}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) {
    if (c == '/' && !json.empty() && json.back() == '<') json += '\\';
    json += c;
  }
  std::string html = "<section id=\"explorer\">\n<style>\n";
  html += kStyle;
  html += "</style>\n<h2>Attention explorer</h2>\n"
          "<p class=\"note\" id=\"translation\"></p>\n<div class=\"controls\">\n"
          "<label>Sentence <select id=\"sentence\"></select></label>\n"
          "<label>Attention <select id=\"block\"><option value=\"cross\">cross-attention (decoder to source)</option>"
          "<option value=\"encoder_self\">encoder self-attention</option>"
          "<option value=\"decoder_self\">decoder self-attention</option></select></label>\n"
          "<label>Layer <select id=\"layer\"></select></label>\n<label>Head <select id=\"head\"></select></label>\n"
          "</div>\n<p id=\"explorer-status\"></p>\n"
          "<div class=\"tokens\"><span class=\"side\">queries</span><div id=\"queries\"></div></div>\n"
          "<div class=\"tokens\"><span class=\"side\">keys</span><div id=\"keys\"></div></div>\n"
          "<p class=\"note\">Hover or focus a query token (arrow keys move between them): the bars are its attention "
          "weights over the keys, highlighted from half the largest. A decoder position is shown by its input, "
          "[SOS] then each generated token, and predicts the next token.</p>\n"
          "<table id=\"matrix\"></table>\n<script type=\"application/json\" id=\"attention-data\">";
  html += json;
  html += "</script>\n<script>\n";
  html += kScript;
  html += "</script>\n</section>\n";
  return html;
}

std::string attention_explorer_page(const std::string& title, const std::vector<ExplorerSentence>& sentences,
                                    const data::Tokenizer& src_tokenizer, const data::Tokenizer& tgt_tokenizer) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + infer::escape_xml(title) +
         "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}h2{font-size:16px}</style></head>"
         "<body>\n" + attention_explorer(sentences, src_tokenizer, tgt_tokenizer) + "</body></html>\n";
}

}  // namespace sf::report
