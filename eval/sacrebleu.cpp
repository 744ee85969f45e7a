#include "sacrebleu.h"

#include <cmath>

#include "data/lowercase.h"
#include "data/unicode.h"
#include "eval/text_rules.h"

namespace sf::eval {

namespace {

// The version of sacreBLEU whose code this file follows and whose output the
// tests were generated with (tests/sacrebleu_fixture.py). Other 2.x releases
// probably agree (the 13a rules are older than 2.0), but the signature names
// only the release actually checked against.
constexpr const char* kSacrebleuVersion = "2.6.0";

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_period_or_comma(char c) { return c == '.' || c == ','; }

// The ASCII symbols mteval-v13a.pl always splits off: every printable ASCII
// character except letters, digits, "'", "-", "." and ",".
bool is_split_symbol(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}

// One left-to-right pass of a two-character rule, matches not overlapping (as a
// regex substitution does): where first(a) and second(b) hold for adjacent a b,
// writes `before` a `middle` b `after` and resumes after b. Working on UTF-8
// bytes gives the same result as on code points: the rules' characters are
// ASCII, and a byte of a multi-byte character is neither a digit nor "." ",".
template <class First, class Second>
std::string split_pairs(const std::string& text, First first, Second second, const char* before,
                        const char* middle, const char* after) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (size_t i = 0; i < text.size(); ++i) {
    if (i + 1 < text.size() && first(text[i]) && second(text[i + 1])) {
      ((out += before) += text[i]) += middle;
      (out += text[i + 1]) += after;
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The words of `text` split on Unicode whitespace, as Python's str.split().
Words split_on_whitespace(std::string_view text) {
  Words words;
  size_t word_start = std::string::npos;
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    bool space = data::is_space_char(data::next_code_point(text, pos));
    if (space && word_start != std::string::npos) {
      words.emplace_back(text.substr(word_start, start - word_start));
      word_start = std::string::npos;
    } else if (!space && word_start == std::string::npos) {
      word_start = start;
    }
  }
  if (word_start != std::string::npos) words.emplace_back(text.substr(word_start));
  return words;
}

// `text` without its trailing Unicode whitespace, as Python's str.rstrip().
std::string_view without_trailing_whitespace(std::string_view text) {
  size_t end = 0;
  for (size_t pos = 0; pos < text.size();)
    if (!data::is_space_char(data::next_code_point(text, pos))) end = pos;
  return text.substr(0, end);
}

}  // namespace

Words tokenize_13a(std::string_view line) {
  // sacreBLEU strips trailing whitespace before tokenizing, so a final "-\n"
  // stays a dash.
  std::string text(without_trailing_whitespace(line));
  replace_all(text, "<skipped>", "");
  replace_all(text, "-\n", "");
  replace_all(text, "\n", " ");
  replace_all(text, "&quot;", "\"");
  replace_all(text, "&amp;", "&");
  replace_all(text, "&lt;", "<");
  replace_all(text, "&gt;", ">");

  // The line is padded with a space each side first, so "." or "," at either
  // end counts as beside a non-digit: "in 3." ends in "3 .", ".5" starts ". 5".
  std::string symbols_split = " ";
  for (char c : text) {
    if (is_split_symbol(c)) ((symbols_split += ' ') += c) += ' ';
    else symbols_split += c;
  }
  symbols_split += ' ';
  auto not_digit = [](char c) { return !is_digit(c); };
  // "." and "," split off unless preceded by a digit, then unless followed by
  // one: "3.5" and "1,000" stay whole, "end." and "2." do not.
  text = split_pairs(symbols_split, not_digit, is_period_or_comma, "", " ", " ");
  text = split_pairs(text, is_period_or_comma, not_digit, " ", " ", "");
  // A dash after a digit is split off: "1990-2000" -> "1990 - 2000", but
  // "well-known" stays one word.
  text = split_pairs(text, is_digit, [](char c) { return c == '-'; }, "", " ", " ");
  return split_on_whitespace(text);
}

double sacrebleu_from_statistics(const BleuStatistics& stats) {
  bool any_match = false;
  for (int64_t m : stats.matched) any_match = any_match || m > 0;
  if (!any_match) return 0.0;
  // mteval's smoothing: the k-th unmatched order counts as 1 / 2^k matches.
  double smoothing = 1.0, log_precision_sum = 0.0;
  for (int n = 0; n < BleuStatistics::kOrder; ++n) {
    // sacreBLEU floors log(0) at -9999999999, which makes the score exactly 0.
    if (stats.hyp_ngrams[n] == 0) return 0.0;
    double matched = double(stats.matched[n]);
    if (stats.matched[n] == 0) {
      smoothing *= 2.0;
      matched = 1.0 / smoothing;
    }
    log_precision_sum += std::log(100.0 * matched / double(stats.hyp_ngrams[n]));
  }
  double brevity_penalty = 1.0;
  if (stats.hyp_length < stats.ref_length)
    brevity_penalty = std::exp(1.0 - double(stats.ref_length) / double(stats.hyp_length));
  return brevity_penalty * std::exp(log_precision_sum / BleuStatistics::kOrder);
}

double corpus_sacrebleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                        Case text_case) {
  auto words = [&](const std::vector<std::string>& lines) {
    std::vector<Words> out;
    for (const std::string& line : lines)
      out.push_back(tokenize_13a(text_case == Case::lowercase ? data::lowercase(line, data::FinalSigma::python) : line));
    return out;
  };
  return sacrebleu_from_statistics(bleu_statistics(words(hypotheses), words(references)));
}

std::string sacrebleu_signature(Case text_case) { return sacrebleu_signature(text_case, "13a", "exp"); }

std::string sacrebleu_signature(Case text_case, std::string_view tokenizer, std::string_view smoothing) {
  return std::string("nrefs:1|case:") + (text_case == Case::lowercase ? "lc" : "mixed") + "|eff:no|tok:" +
         std::string(tokenizer) + "|smooth:" + std::string(smoothing) + "|version:" + kSacrebleuVersion;
}

}  // namespace sf::eval
