#include "detokenizer.h"

#include <algorithm>

#include "unicode.h"

namespace sf::data {

namespace {

// Punctuation written against the word before it.
bool is_closing(char32_t cp) {
  static constexpr std::u32string_view kClosing = U".,;:!?)]}%…»”’";
  return kClosing.find(cp) != std::u32string_view::npos;
}

// Punctuation written against the word after it. Spanish opens questions and
// exclamations with ¿ and ¡. (German „ … “ is paired with the other quotes
// below.)
bool is_opening(char32_t cp) {
  static constexpr std::u32string_view kOpening = U"([{¿¡«‘";
  return kOpening.find(cp) != std::u32string_view::npos;
}

// Characters that join the two words around them: apostrophes of contractions
// and possessives (don ' t, Tom ' s, l ' uomo) and hyphens of compounds
// (T - Shirt). A dash written between spaces is rarer in the corpora than a
// hyphen, so the hyphen reading wins.
bool joins_words(std::u32string_view run) {
  return run == U"'" || run == U"’" || run == U"-";
}

// German leaves a suspended hyphen open before a conjunction: "Obst- und
// Gemüsehändler", "Kunst- oder Musikschule".
bool is_suspending_conjunction(std::u32string_view word) { return word == U"und" || word == U"oder"; }

// Separators inside numbers: thousands, decimals and clock times.
bool joins_digits(std::u32string_view run) { return run == U"," || run == U"." || run == U":"; }

bool is_digits(std::u32string_view word) {
  return !word.empty() && std::all_of(word.begin(), word.end(), [](char32_t c) { return c >= U'0' && c <= U'9'; });
}

bool is_word(std::u32string_view token) { return !token.empty() && is_word_char(token.front()); }

// How one punctuation run sits against its neighbours.
struct Attachment {
  bool left = false, right = false;
};

// The quotations open so far in the sentence. Quotes that look the same at
// both ends of a quotation (" and ') are paired by counting: the first of a
// pair opens, the second closes. “ opens in English but closes a German „,
// so it closes when a „ is open.
struct OpenQuotes {
  bool straight = false, single = false;
  int low = 0;  // „
};

Attachment attach_punctuation(std::u32string_view run, OpenQuotes& open) {
  Attachment result;
  for (size_t i = 0; i < run.size(); ++i) {
    char32_t cp = run[i];
    bool opens = false, closes = false;
    if (cp == U'"') {
      open.straight = !open.straight;
      (open.straight ? opens : closes) = true;
    } else if (cp == U'\'') {
      open.single = !open.single;
      (open.single ? opens : closes) = true;
    } else if (cp == U'“') {
      if (open.low > 0) --open.low, closes = true;
      else opens = true;
    } else if (cp == U'„') {
      ++open.low, opens = true;
    } else {
      opens = is_opening(cp);
      closes = is_closing(cp);
    }
    if (i == 0) result.left = closes;
    if (i + 1 == run.size()) result.right = opens;
  }
  return result;
}

}  // namespace

std::string detokenize(const std::vector<std::string_view>& words) {
  std::vector<std::u32string> tokens;
  for (std::string_view w : words) tokens.push_back(decode_utf8(w));
  // no_space[i]: no space between words[i - 1] and words[i].
  std::vector<bool> no_space(words.size(), false);
  OpenQuotes open;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::u32string& t = tokens[i];
    if (is_word(t)) continue;
    bool between_words = i > 0 && i + 1 < tokens.size() && is_word(tokens[i - 1]) && is_word(tokens[i + 1]);
    if (between_words && (joins_words(t) ||
                          (joins_digits(t) && is_digits(tokens[i - 1]) && is_digits(tokens[i + 1])))) {
      no_space[i] = true;
      no_space[i + 1] = !(t == U"-" && is_suspending_conjunction(tokens[i + 1]));
      continue;
    }
    Attachment a = attach_punctuation(t, open);
    if (a.left && i > 0) no_space[i] = true;
    if (a.right && i + 1 < tokens.size()) no_space[i + 1] = true;
  }
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0 && !no_space[i]) out += ' ';
    out += words[i];
  }
  return out;
}

std::string detokenize(std::string_view spaced) {
  std::vector<std::string_view> words;
  for (size_t start = 0; start <= spaced.size();) {
    size_t end = std::min(spaced.find(' ', start), spaced.size());
    if (end > start) words.push_back(spaced.substr(start, end - start));
    start = end + 1;
  }
  return detokenize(words);
}

}  // namespace sf::data
