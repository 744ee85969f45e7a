// normalize-punctuation.perl (Moses, snapshot moses-3a0631a), rule by rule in
// the script's order. The script reads bytes, not characters: its \d and \s
// are ASCII, its "[a-z]" with /i matches ASCII letters only, and its
// multi-byte literals (“, —, the no-break space) match as byte sequences,
// which on valid UTF-8 is the same as matching the characters. Several of its
// rules are written with a no-break space (U+00A0) where they look like a
// space; they are written \u00A0 here.
#include "moses_tokenizer.h"

#include <initializer_list>
#include <utility>

#include "data/unicode.h"
#include "eval/text_rules.h"

namespace sf::eval {

namespace {

using Text = std::u32string;
using View = std::u32string_view;

bool is_ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool is_ascii_letter(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
// Perl's \s on bytes: space, \t \n \v \f \r.
bool is_ascii_space(char32_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

void replace(Text& text, View from, View to) { replace_all(text, from, to); }  // the script's s/from/to/g

// Several literal rules in a row, in order: a later one sees what the earlier wrote.
void replace_each(Text& text, std::initializer_list<std::pair<View, View>> rules) {
  for (auto [from, to] : rules) replace(text, from, to);
}

// s/ +/ /g: the script squeezes spaces after each rule that may double them.
void squeeze_spaces(Text& text) {
  Text out;
  for (char32_t c : text)
    if (c != ' ' || out.empty() || out.back() != ' ') out += c;
  text = out;
}

// A three-character rule "x MIDDLE y" -> "x REPLACEMENT y" where x and y pass
// their tests, as s/(x)MIDDLE(y)/$1REPLACEMENT$2/g.
template <class First, class Last>
Text rewrite_middle(const Text& text, First first, char32_t middle, Last last, View replacement) {
  return rewrite(
      text, 3, [&](const Text& t, size_t i) { return first(t[i]) && t[i + 1] == middle && last(t[i + 2]); },
      [&](Text& out, const Text& t, size_t i) { ((out += t[i]) += replacement) += t[i + 2]; });
}

// s/(\.+)\"(\s*[^<])/\"$1$2/g, "don't fix period at end of sentence": a run of
// periods before a quote goes behind it when something other than "<" follows
// the quote (after any spaces). The script's lines keep their newline, which
// counts as that something: a final `."` becomes `".` after all.
Text quote_before_periods(const Text& text) {
  Text out;
  size_t i = 0;
  while (i < text.size()) {
    size_t run = i;
    while (run < text.size() && text[run] == '.') ++run;
    if (run == i) {
      out += text[i++];
      continue;
    }
    size_t quote = run;
    size_t spaces_end = quote + 1;
    while (spaces_end < text.size() && is_ascii_space(text[spaces_end])) ++spaces_end;
    // \s*[^<]: the spaces and a character other than "<"; when none follows
    // them, the regex backtracks and lets the last space be that character.
    size_t end = 0;
    if (quote < text.size() && text[quote] == '"') {
      if (spaces_end < text.size() && text[spaces_end] != '<') end = spaces_end + 1;
      else if (spaces_end > quote + 1) end = spaces_end;
    }
    if (end == 0) {
      out.append(text, i, run - i);
      i = run;
      continue;
    }
    ((out += U'"') += text.substr(i, run - i)) += text.substr(quote + 1, end - quote - 1);
    i = end;
  }
  return out;
}

// s/\"([,\.]+)/$1\"/g: a quote followed by commas and periods goes behind them.
Text quote_after_punctuation(const Text& text) {
  Text out;
  for (size_t i = 0; i < text.size();) {
    size_t run = i + 1;
    while (text[i] == '"' && run < text.size() && (text[run] == ',' || text[run] == '.')) ++run;
    if (text[i] == '"' && run > i + 1) {
      (out += text.substr(i + 1, run - i - 1)) += U'"';
      i = run;
    } else {
      out += text[i++];
    }
  }
  return out;
}

}  // namespace

std::string moses_normalize_punctuation(std::string_view line, std::string_view language) {
  Text text = data::decode_utf8(line) + U"\n";  // the script sees each line with its newline
  replace(text, U"\r", U"");
  // Spaces around brackets and before : ; and % tidied.
  replace(text, U"(", U" (");
  replace(text, U")", U") ");
  squeeze_spaces(text);
  text = rewrite_middle(text, [](char32_t c) { return c == ')'; }, ' ',
                        [](char32_t c) { return View(U".!:?;,").find(c) != View::npos; }, U"");
  replace(text, U"( ", U"(");
  replace(text, U" )", U")");
  text = rewrite_middle(text, is_ascii_digit, ' ', [](char32_t c) { return c == '%'; }, U"");
  replace(text, U" :", U":");
  replace(text, U" ;", U";");
  // Typographic quotes, dashes, apostrophes and the ellipsis made ASCII.
  replace_each(text, {{U"`", U"'"}, {U"''", U" \" "}, {U"„", U"\""}, {U"“", U"\""}, {U"”", U"\""}, {U"–", U"-"},
                      {U"—", U" - "}});
  squeeze_spaces(text);
  replace(text, U"´", U"'");
  // A single quotation mark between two letters is an apostrophe ("don’t"),
  // elsewhere a quotation mark.
  text = rewrite_middle(text, is_ascii_letter, U'‘', is_ascii_letter, U"'");
  text = rewrite_middle(text, is_ascii_letter, U'’', is_ascii_letter, U"'");
  // (The script's rule "´´" to a quote, after "''", cannot match: "´" is gone.)
  replace_each(text, {{U"‘", U"\""}, {U"‚", U"\""}, {U"’", U"\""}, {U"''", U"\""}, {U"…", U"..."}});
  // French guillemets, with the no-break spaces French puts inside them.
  replace_each(text, {{U"\u00A0«\u00A0", U" \""}, {U"«\u00A0", U"\""}, {U"«", U"\""}, {U"\u00A0»\u00A0", U"\" "},
                      {U"\u00A0»", U"\""}, {U"»", U"\""}});
  // No-break spaces: dropped before % : ? ! ; and made spaces before units
  // and after "nº" and a comma.
  replace_each(text, {{U"\u00A0%", U"%"}, {U"nº\u00A0", U"nº "}, {U"\u00A0:", U":"}, {U"\u00A0ºC", U" ºC"},
                      {U"\u00A0cm", U" cm"}, {U"\u00A0?", U"?"}, {U"\u00A0!", U"!"}, {U"\u00A0;", U";"},
                      {U",\u00A0", U", "}});
  squeeze_spaces(text);
  if (language == "en") {
    // English puts commas and periods inside the quotes: `"word,` becomes `word,"`.
    text = quote_after_punctuation(text);
  } else if (language != "cs" && language != "cz") {  // Czech is left alone
    // German, Spanish, French: the comma and the period go outside.
    replace(text, U",\"", U"\",");
    text = quote_before_periods(text);
  }
  // A no-break space between two digits (a thousands separator) becomes a
  // comma in German, Spanish, Czech and French, a period elsewhere: "1 000"
  // -> "1,000" or "1.000". An ordinary space stays.
  bool comma = language == "de" || language == "es" || language == "cz" || language == "cs" || language == "fr";
  text = rewrite_middle(text, is_ascii_digit, U'\u00A0', is_ascii_digit, comma ? U"," : U".");
  text.pop_back();  // the newline
  std::string out;
  for (char32_t c : text) data::append_utf8(out, c);
  return out;
}

}  // namespace sf::eval
