#include "pretokenizer.h"

#include <cstdio>

#include "unicode.h"

namespace sf::data {

namespace {
enum class CharClass { Word, Space, Other };

CharClass classify(char32_t cp) {
  if (is_word_char(cp)) return CharClass::Word;
  if (is_space_char(cp)) return CharClass::Space;
  return CharClass::Other;
}
}  // namespace

std::vector<std::string_view> pre_tokenize(std::string_view text) {
  std::vector<std::string_view> words;
  size_t start = 0;
  CharClass run = CharClass::Space;  // the class of the run that began at `start`
  for (size_t pos = 0; pos < text.size();) {
    size_t here = pos;
    CharClass cls = classify(next_code_point(text, pos));
    if (cls == run) continue;
    if (run != CharClass::Space) words.push_back(text.substr(start, here - start));
    start = here;
    run = cls;
  }
  if (run != CharClass::Space) words.push_back(text.substr(start));
  return words;
}

namespace {

// Ranges as the inside of a regex character class: \x{41}-\x{5A}...
std::string class_ranges(const detail::CodePointRange* ranges, size_t count) {
  std::string out;
  char buffer[32];
  for (size_t i = 0; i < count; ++i) {
    std::snprintf(buffer, sizeof buffer, "\\x{%X}", static_cast<unsigned>(ranges[i].first));
    out += buffer;
    if (ranges[i].last == ranges[i].first) continue;
    std::snprintf(buffer, sizeof buffer, "-\\x{%X}", static_cast<unsigned>(ranges[i].last));
    out += buffer;
  }
  return out;
}

}  // namespace

std::string pre_tokenizer_regex() {
  std::string word = class_ranges(detail::kWordRanges, detail::kWordRanges_size);
  std::string space = class_ranges(detail::kSpaceRanges, detail::kSpaceRanges_size);
  return "[" + word + "]+|[^" + word + space + "]+";
}

std::string pre_tokenized_text(std::string_view text) {
  std::string out;
  for (std::string_view word : pre_tokenize(text)) {
    if (!out.empty()) out += ' ';
    out += word;
  }
  return out;
}

}  // namespace sf::data
