// Whole-string integer parsing for numbers read from files (safetensors
// metadata, file names, ...). std::stoll and atoi read "5abc" as 5, skip
// leading spaces and either throw or clamp on overflow; here the whole text
// must be a base-10 integer ('-' allowed, no '+', no spaces) that fits int64,
// or there is no value at all.
#pragma once
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sf {

inline std::optional<int64_t> parse_int64(std::string_view text) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace sf
