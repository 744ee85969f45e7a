// The two kinds of rewrite rule the reference tokenizers (mteval's 13a,
// Moses' normalize-punctuation.perl and tokenizer.perl) are written in, as
// plain loops: a literal replaced everywhere, and a pattern of a few
// characters, each tested by a predicate. Both go left to right and never
// overlap, as a regex substitution with /g does: after a match the search
// resumes behind it, so in "a,,b" the rule "non-digit then ','" matches "a,"
// and not ",,".
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

namespace sf::eval {

// Every occurrence of `from` (not empty) in `text` replaced by `to`. (The
// character type comes from `text` alone, so literals convert.)
template <class Char>
void replace_all(std::basic_string<Char>& text, std::type_identity_t<std::basic_string_view<Char>> from,
                 std::type_identity_t<std::basic_string_view<Char>> to) {
  for (size_t at = text.find(from); at != std::basic_string<Char>::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

// One pass of a rule whose pattern is `width` characters: where
// matches(text, i) says the pattern starts at i, write(out, text, i) writes
// what replaces text[i, i + width) and the search resumes at i + width.
template <class String, class Matches, class Write>
String rewrite(const String& text, size_t width, Matches matches, Write write) {
  String out;
  out.reserve(text.size() + text.size() / 4);
  for (size_t i = 0; i < text.size();) {
    if (i + width <= text.size() && matches(text, i)) {
      write(out, text, i);
      i += width;
    } else {
      out += text[i++];
    }
  }
  return out;
}

}  // namespace sf::eval
