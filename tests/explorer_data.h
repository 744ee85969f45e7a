// Reading back the attention explorer's page (report/attention_explorer.h):
// its JSON, and the weights in it, quantised to bytes and base64-encoded.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sf::testing {

// The inverse of quantised_base64: the bytes (RFC 4648 base64).
inline std::vector<uint8_t> base64_bytes(const std::string& text) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    if (c == '=') break;
    bits = bits << 6 | static_cast<uint32_t>(alphabet.find(c));
    if ((count += 6) >= 8) out.push_back(static_cast<uint8_t>(bits >> (count -= 8)));
  }
  return out;
}

// The JSON the explorer keeps its data in.
inline nlohmann::json explorer_data(const std::string& html) {
  std::string open = "<script type=\"application/json\" id=\"attention-data\">";
  size_t begin = html.find(open);
  REQUIRE(begin != std::string::npos);
  begin += open.size();
  return nlohmann::json::parse(html.substr(begin, html.find("</script>", begin) - begin));
}

}  // namespace sf::testing
