// tokenizer.perl (Moses, snapshot moses-3a0631a) without its options (no -a,
// no -penn, no protected patterns; escaping on), rule by rule in the script's
// order. Its classes (\p{IsAlnum}, \p{IsN}, ...) are Perl's, from
// moses_char_classes.h.
#include "moses_tokenizer.h"

#include <algorithm>

#include "data/lowercase.h"
#include "data/unicode.h"
#include "eval/moses_char_classes.h"
#include "eval/moses_prefixes.h"
#include "eval/text_rules.h"

namespace sf::eval {

namespace {

using Text = std::u32string;

// "  a \t b " -> "a b": whitespace runs made one space, the ASCII control
// characters left after that deleted, the ends trimmed.
Text clean_whitespace(const Text& line) {
  Text spaced;
  for (char32_t c : U" " + line + U" ") {
    if (is_perl_space(c)) {
      if (spaced.empty() || spaced.back() != ' ') spaced += ' ';
    } else if (c >= 0x20) {
      spaced += c;
    }
  }
  // Deleting a control character may have left two spaces together.
  Text out;
  for (char32_t c : spaced)
    if (c != ' ' || (!out.empty() && out.back() != ' ')) out += c;
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Every character but letters, digits, spaces and . ' ` , - becomes a word of
// its own: "(red)" -> " ( red ) ".
Text split_symbols(const Text& text) {
  Text out;
  for (char32_t c : text) {
    if (is_perl_alnum(c) || c == ' ' || c == '.' || c == '\'' || c == '`' || c == ',' || c == '-') out += c;
    else ((out += ' ') += c) += ' ';
  }
  return out;
}

// Two or more periods stay together as one word ("wait..." -> "wait ...");
// the script protects them as DOTMULTI placeholders, which also keeps the
// final-period rule below away from them (see is_dot_run).
Text split_dot_runs(const Text& text) {
  Text out;
  for (size_t i = 0; i < text.size();) {
    size_t end = i;
    while (end < text.size() && text[end] == '.') ++end;
    if (end - i >= 2) {
      (out += ' ') += text.substr(i, end - i);
      if (end < text.size()) out += ' ';
      i = end;
    } else {
      out += text[i++];
    }
  }
  return out;
}

// A comma is split off unless it is between two numbers ("5,300"), in two
// passes as the script does (one pass would miss the middle comma of "a,b,c"),
// and also after a number at the very end.
Text split_commas(const Text& text) {
  auto not_number = [](char32_t c) { return !is_perl_number(c); };
  Text out = rewrite(
      text, 2, [&](const Text& t, size_t i) { return not_number(t[i]) && t[i + 1] == ','; },
      [](Text& o, const Text& t, size_t i) { (o += t[i]) += U" , "; });
  out = rewrite(
      out, 2, [&](const Text& t, size_t i) { return t[i] == ',' && not_number(t[i + 1]); },
      [](Text& o, const Text& t, size_t i) { (o += U" , ") += t[i + 1]; });
  if (out.size() >= 2 && out.back() == ',' && is_perl_number(out[out.size() - 2])) {
    out.pop_back();
    out += U" ,";
  }
  return out;
}

// A rule on "x ' y" for letters-or-not x and y, as s/(x)[']([y])/$1...$2/g.
template <class Before, class After>
Text apostrophe_rule(const Text& text, Before before, After after, std::u32string_view replacement) {
  return rewrite(
      text, 3, [&](const Text& t, size_t i) { return before(t[i]) && t[i + 1] == '\'' && after(t[i + 2]); },
      [&](Text& o, const Text& t, size_t i) { ((o += t[i]) += replacement) += t[i + 2]; });
}

// Apostrophes: English splits them to the right ("don't" -> "don 't",
// "1990's" -> "1990 's"), French, Italian and Irish to the left ("l'eau" ->
// "l' eau"); other languages make every apostrophe a word.
Text split_apostrophes(const Text& text, std::string_view language) {
  auto alpha = [](char32_t c) { return is_perl_alpha(c); };
  auto not_alpha = [](char32_t c) { return !is_perl_alpha(c); };
  if (language == "en") {
    Text out = apostrophe_rule(text, not_alpha, not_alpha, U" ' ");
    out = apostrophe_rule(out, [](char32_t c) { return !is_perl_alpha(c) && !is_perl_number(c); }, alpha, U" ' ");
    out = apostrophe_rule(out, alpha, not_alpha, U" ' ");
    out = apostrophe_rule(out, alpha, alpha, U" '");
    return apostrophe_rule(out, is_perl_number, [](char32_t c) { return c == 's'; }, U" '");
  }
  if (language == "fr" || language == "it" || language == "ga") {
    Text out = apostrophe_rule(text, not_alpha, not_alpha, U" ' ");
    out = apostrophe_rule(out, not_alpha, alpha, U" ' ");
    out = apostrophe_rule(out, alpha, not_alpha, U" ' ");
    return apostrophe_rule(out, alpha, alpha, U"' ");
  }
  Text out;
  for (char32_t c : text) out += c == '\'' ? Text(U" ' ") : Text(1, c);
  return out;
}

// The words between single spaces, as Perl's split(/\s/): two spaces in a row
// give an empty word, which counts as "the next word" below; empty words at
// the end are dropped.
std::vector<Text> split_on_spaces(const Text& text) {
  std::vector<Text> words(1);
  for (char32_t c : text) {
    if (c == ' ') words.emplace_back();
    else words.back() += c;
  }
  while (!words.empty() && words.back().empty()) words.pop_back();
  return words;
}

bool is_dot_run(const Text& word) {
  return std::all_of(word.begin(), word.end(), [](char32_t c) { return c == '.'; });
}

// A word's final period is split off ("house." -> "house ."), except
// after an abbreviation: a word with a period and a letter before its last
// period ("z.b."), a nonbreaking prefix ("ca."), or before a lowercase word;
// and after a prefix for numbers ("pp.") before a number.
Text split_final_periods(const Text& text, std::string_view language) {
  std::vector<Text> words = split_on_spaces(text);
  Text out;
  for (size_t i = 0; i < words.size(); ++i) {
    const Text& word = words[i];
    bool has_next = i + 1 < words.size();
    if (word.size() >= 2 && word.back() == '.' && !is_dot_run(word)) {
      Text stem = word.substr(0, word.size() - 1);
      NonbreakingPrefix prefix = nonbreaking_prefix(stem, language);
      bool dotted = stem.find('.') != Text::npos && std::any_of(stem.begin(), stem.end(), is_perl_alpha);
      bool next_lower = has_next && !words[i + 1].empty() && is_perl_lower(words[i + 1][0]);
      bool next_number = has_next && !words[i + 1].empty() && words[i + 1][0] >= '0' && words[i + 1][0] <= '9';
      bool keep = dotted || prefix == NonbreakingPrefix::always || next_lower ||
                  (prefix == NonbreakingPrefix::before_number && next_number);
      out += keep ? word : stem + U" .";
    } else {
      out += word;
    }
    out += ' ';
  }
  return out;
}

// tokenizer.perl's escaping, for the markup Moses' decoder reads: one
// character to one entity, so it changes no word boundary and no match.
void append_escaped(std::string& out, char32_t c) {
  switch (c) {
    case '&': out += "&amp;"; break;
    case '|': out += "&#124;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '\'': out += "&apos;"; break;
    case '"': out += "&quot;"; break;
    case '[': out += "&#91;"; break;
    case ']': out += "&#93;"; break;
    default: data::append_utf8(out, c);
  }
}

}  // namespace

Words moses_tokenize(std::string_view line, std::string_view language) {
  Text text = clean_whitespace(data::decode_utf8(line));
  text = split_symbols(text);
  text = split_dot_runs(text);
  text = split_commas(text);
  text = split_apostrophes(text, language);
  text = split_final_periods(text, language);
  // "word.'" at the very end: the period and the quote both split off
  // (English only reaches this; other languages split every apostrophe).
  std::vector<Text> pieces = split_on_spaces(text);
  std::erase_if(pieces, [](const Text& w) { return w.empty(); });
  if (!pieces.empty() && pieces.back().size() >= 2 && pieces.back().ends_with(U".'")) {
    Text& last = pieces.back();
    last.resize(last.size() - 2);
    if (last.empty()) pieces.pop_back();
    pieces.push_back(U".");
    pieces.push_back(U"'");
  }
  Words words;
  for (const Text& piece : pieces) {
    std::string& word = words.emplace_back();
    for (char32_t c : piece) append_escaped(word, c);
  }
  return words;
}

Words moses_lowercase_tokens(std::string_view line, std::string_view language) {
  return moses_tokenize(moses_normalize_punctuation(data::lowercase(line, data::FinalSigma::perl), language), language);
}

}  // namespace sf::eval
