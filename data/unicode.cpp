#include "unicode.h"

#include <algorithm>

#include "base/error.h"

namespace sf::data {

namespace {

// Distinguishes "not UTF-8" (returns false) from a decoded code point, so the
// validator and the decoder share one implementation.
bool try_decode(std::string_view text, size_t& pos, char32_t& cp) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char lead = byte(pos);
  if (lead < 0x80) {
    cp = lead;
    ++pos;
    return true;
  }
  int extra;
  char32_t min;  // the smallest code point that needs this many bytes (no overlongs)
  if ((lead & 0xE0) == 0xC0) extra = 1, cp = lead & 0x1F, min = 0x80;
  else if ((lead & 0xF0) == 0xE0) extra = 2, cp = lead & 0x0F, min = 0x800;
  else if ((lead & 0xF8) == 0xF0) extra = 3, cp = lead & 0x07, min = 0x10000;
  else return false;  // a continuation byte or 0xF8..0xFF cannot start a sequence
  if (pos + extra >= text.size()) return false;  // truncated
  for (int i = 1; i <= extra; ++i) {
    unsigned char next = byte(pos + i);
    if ((next & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (next & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  pos += extra + 1;
  return true;
}

}  // namespace

bool detail::in_ranges(char32_t cp, const CodePointRange* table, size_t size) {
  const CodePointRange* end = table + size;
  // The first range whose last code point is >= cp is the only candidate.
  auto it = std::lower_bound(table, end, cp, [](const CodePointRange& r, char32_t c) { return r.last < c; });
  return it != end && it->first <= cp;
}

char32_t next_code_point(std::string_view text, size_t& pos) {
  char32_t cp;
  if (!try_decode(text, pos, cp)) internal_fail("invalid UTF-8 at byte ", pos);
  return cp;
}

size_t find_invalid_utf8(std::string_view text) {
  size_t pos = 0;
  char32_t cp;
  while (pos < text.size())
    if (!try_decode(text, pos, cp)) return pos;
  return std::string_view::npos;
}

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  for (size_t pos = 0; pos < text.size();) out.push_back(next_code_point(text, pos));
  return out;
}

bool is_word_char(char32_t cp) {
  // ASCII first: almost every character of the corpora is ASCII.
  if (cp < 0x80)
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
           cp == '_';
  return detail::in_ranges(cp, detail::kWordRanges, detail::kWordRanges_size);
}

bool is_space_char(char32_t cp) {
  // ASCII \s in Python: \t \n \v \f \r (9..13), the separators 28..31, space.
  if (cp < 0x80) return (cp >= 9 && cp <= 13) || (cp >= 28 && cp <= 32);
  return detail::in_ranges(cp, detail::kSpaceRanges, detail::kSpaceRanges_size);
}

bool is_blank(std::string_view text) {
  for (size_t pos = 0; pos < text.size();)
    if (!is_space_char(next_code_point(text, pos))) return false;
  return true;
}

void append_utf8(std::string& out, char32_t cp) {
  // The lead byte says how many continuation bytes (10xxxxxx) follow.
  if (cp < 0x80) {
    out += static_cast<char>(cp);
    return;
  }
  int extra = cp < 0x800 ? 1 : cp < 0x10000 ? 2 : 3;
  static constexpr unsigned char kLead[] = {0, 0xC0, 0xE0, 0xF0};
  out += static_cast<char>(kLead[extra] | (cp >> (6 * extra)));
  for (int i = extra - 1; i >= 0; --i) out += static_cast<char>(0x80 | ((cp >> (6 * i)) & 0x3F));
}

}  // namespace sf::data
