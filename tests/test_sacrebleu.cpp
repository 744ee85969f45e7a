// sacreBLEU's BLEU: worked examples from the published definitions (BLEU:
// Papineni et al. 2002; "exp" smoothing: mteval-v13a.pl, Chen & Cherry 2014
// method 3; 13a: mteval-v13a.pl's tokenization rules), then sacreBLEU's own
// answers on 400 real sentence pairs (tests/sacrebleu_fixture.py).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/sacrebleu.h"
#include "tests/bleu_fixture.h"

using namespace sf::eval;
using doctest::Approx;

namespace {
// The 13a words of `line` joined by spaces (no word holds one), so a failed
// check prints both sides.
std::string tokens_13a(const std::string& line) {
  std::string joined;
  for (const std::string& word : tokenize_13a(line)) joined += (joined.empty() ? "" : " ") + word;
  return joined;
}

double sentence_sacrebleu(const std::string& hypothesis, const std::string& reference) {
  return corpus_sacrebleu({hypothesis}, {reference});
}

// Every pair alone as a corpus of one against sacreBLEU's score of it: the
// smoothed and zero-score cases a whole corpus does not reach.
void check_sentences(const nlohmann::json& expected, const std::vector<std::string>& hypotheses,
                     const std::vector<std::string>& references, Case text_case) {
  const auto sentences = expected.get<std::vector<double>>();
  REQUIRE(sentences.size() == hypotheses.size());
  int differ = 0;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    double score = corpus_sacrebleu({hypotheses[i]}, {references[i]}, text_case);
    if (score != Approx(sentences[i]).epsilon(1e-9) && ++differ <= 3)
      CHECK_MESSAGE(false, "pair ", i, ": ", score, " vs sacreBLEU ", sentences[i]);
  }
  CHECK(differ == 0);
}
}  // namespace

TEST_CASE("sacrebleu: 13a splits ASCII symbols off and keeps letters, apostrophes and dashes in words") {
  CHECK(tokens_13a("Hello, world!") == "Hello , world !");
  CHECK(tokens_13a("(a/b) [c] {d} x+y=z @home #1 50% ~ ` ^ _ |") ==
        "( a / b ) [ c ] { d } x + y = z @ home # 1 50 % ~ ` ^ _ |");
  CHECK(tokens_13a("don't well-known") == "don't well-known");
  CHECK(tokens_13a("  spaced \t out  ") == "spaced out");
  CHECK(tokens_13a("") == "");
}

TEST_CASE("sacrebleu: 13a keeps '.' and ',' between digits and splits them elsewhere, the line's ends included") {
  CHECK(tokens_13a("It costs $3.50, or 1,000.5 yen.") == "It costs $ 3.50 , or 1,000.5 yen .");
  CHECK(tokens_13a("It is 3.") == "It is 3 .");
  CHECK(tokens_13a(".5 mm") == ". 5 mm");
  CHECK(tokens_13a("e.g. U.S.A.") == "e . g . U . S . A .");
  CHECK(tokens_13a("x,, 1.,5 a..b") == "x , , 1 . , 5 a . . b");
}

TEST_CASE("sacrebleu: 13a splits a dash off after a digit only") {
  CHECK(tokens_13a("1990-2000 well-known") == "1990 - 2000 well-known");
  CHECK(tokens_13a("-5 a-1") == "-5 a-1");
}

TEST_CASE("sacrebleu: 13a unescapes four HTML entities and drops <skipped> and hyphenated line breaks") {
  CHECK(tokens_13a("&quot;Hi&quot; &amp; &lt;b&gt;") == "\" Hi \" & < b >");
  // Unescaped once, left to right, as Python's str.replace in that order.
  CHECK(tokens_13a("&amp;quot; &apos;") == "& quot ; & apos ;");
  CHECK(tokens_13a("<skipped>a-\nb\nc") == "ab c");
  // Trailing whitespace goes first, so a final "-\n" leaves the dash.
  CHECK(tokens_13a("end-\n") == "end-");
}

TEST_CASE("sacrebleu: 13a leaves non-ASCII characters in words and splits on Unicode whitespace") {
  CHECK(tokens_13a("Straße café — naïve\u00a0über. „Hallo“") == "Straße café — naïve über . „Hallo“");
  CHECK(tokens_13a("a\u3000b\u2009c\u00a0") == "a b c");
}

TEST_CASE("sacrebleu: a perfect match scores 100") {
  CHECK(sentence_sacrebleu("The cat sat on the mat.", "The cat sat on the mat.") == Approx(100.0));
}

TEST_CASE("sacrebleu: a shorter hypothesis pays the brevity penalty, and the unmatched 4-gram is smoothed") {
  // 13a: [The cat sat .] (c = 4) against [The cat sat on the mat .] (r = 7).
  // Precisions 4/4, 2/3, 1/2, and for 4-grams 0/1 smoothed to 1/(2 * 1).
  // sacreBLEU 2.6.0 prints: BLEU = 30.18 100.0/66.7/50.0/50.0 (BP = 0.472 ...).
  double expect = std::exp(1.0 - 7.0 / 4.0) * 100.0 * std::pow(1.0 * (2.0 / 3) * (1.0 / 2) * (1.0 / 2), 0.25);
  CHECK(sentence_sacrebleu("The cat sat.", "The cat sat on the mat.") == Approx(expect).epsilon(1e-12));
  CHECK(sentence_sacrebleu("The cat sat.", "The cat sat on the mat.") == Approx(30.18).epsilon(1e-4));
}

TEST_CASE("sacrebleu: a longer hypothesis pays no brevity penalty") {
  // c = 7 > r = 6: BP = 1. Precisions 6/7, 5/6, 4/5, 3/4.
  double expect = 100.0 * std::pow(6.0 / 7 * 5.0 / 6 * 4.0 / 5 * 3.0 / 4, 0.25);
  CHECK(sentence_sacrebleu("the cat sat on the mat today", "the cat sat on the mat") == Approx(expect).epsilon(1e-12));
}

TEST_CASE("sacrebleu: orders without a match are smoothed by 1/2, 1/4, ... where token BLEU is 0") {
  // Precisions 5/6, 3/5, 1/4, and no 4-gram of 3 matched: 1/(2 * 3).
  double one_unmatched = 100.0 * std::pow(5.0 / 6 * 3.0 / 5 * 1.0 / 4 * 1.0 / 6, 0.25);
  CHECK(sentence_sacrebleu("the cat sat by the mat", "the cat sat on the mat") ==
        Approx(one_unmatched).epsilon(1e-12));
  CHECK(corpus_bleu({tokenize_13a("the cat sat by the mat")}, {tokenize_13a("the cat sat on the mat")}) == 0.0);
  // Precisions 6/6, 2/5, then 0/4 -> 1/(2 * 4) and 0/3 -> 1/(4 * 3).
  double two_unmatched = 100.0 * std::pow(1.0 * 2.0 / 5 * 1.0 / 8 * 1.0 / 12, 0.25);
  CHECK(sentence_sacrebleu("the cat on sat the mat", "the cat sat on the mat") ==
        Approx(two_unmatched).epsilon(1e-12));
}

TEST_CASE("sacrebleu: 0 when nothing matches, when an order has no n-gram, and for empty hypotheses or corpora") {
  CHECK(sentence_sacrebleu("x y z w", "a b c d") == 0.0);
  // Three words have no 4-gram: without effective order the score is 0, even
  // for a perfect match (sacreBLEU floors log 0).
  CHECK(sentence_sacrebleu("the cat sat", "the cat sat") == 0.0);
  CHECK(sentence_sacrebleu("", "the cat") == 0.0);
  CHECK(sentence_sacrebleu("", "") == 0.0);
  CHECK(corpus_sacrebleu({}, {}) == 0.0);  // sacreBLEU refuses an empty corpus; we call it no match
}

TEST_CASE("sacrebleu: statistics are summed over the corpus before the score, an empty hypothesis adding length only") {
  // All n-grams of the second pair match; the empty hypothesis adds 2 to r:
  // c = 6, r = 8, BP = exp(1 - 8/6).
  CHECK(corpus_sacrebleu({"", "the cat sat on the mat"}, {"a b", "the cat sat on the mat"}) ==
        Approx(100.0 * std::exp(1.0 - 8.0 / 6.0)).epsilon(1e-12));
}

TEST_CASE("sacrebleu: the signature names sacreBLEU's defaults and version") {
  CHECK(sacrebleu_signature() == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
  CHECK(sacrebleu_signature(Case::lowercase) == "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:2.6.0");
}

TEST_CASE("sacrebleu: lowercased, case differences match, both sides lowercased before 13a") {
  CHECK(corpus_sacrebleu({"DER Hund läuft schnell weg."}, {"der hund LÄUFT schnell weg."}, Case::lowercase) ==
        Approx(100.0));
  CHECK(corpus_sacrebleu({"DER Hund läuft schnell weg."}, {"der hund LÄUFT schnell weg."}) < 50.0);
  // "&QUOT;" lowercased is the entity 13a unescapes: lowercasing comes first.
  CHECK(corpus_sacrebleu({"a &QUOT;b c d e"}, {"a \"b c d e"}, Case::lowercase) == Approx(100.0));
}

// sacreBLEU itself on 400 perturbed Multi30k sentence pairs: tokens, three
// corpus scores and every pair as a corpus of one. The same operations in the
// same order as sacreBLEU's Python, so the scores agree to rounding.
TEST_CASE("sacrebleu: matches sacreBLEU's tokens and scores on 400 sentence pairs (a committed fixture)") {
  const nlohmann::json fixture = sf::testing::bleu_fixture();
  CHECK(fixture.at("signature").get<std::string>() == sacrebleu_signature());
  const auto hypotheses = fixture.at("hypotheses").get<std::vector<std::string>>();
  const auto references = fixture.at("references").get<std::vector<std::string>>();
  const auto tokens = fixture.at("tokens").get<std::vector<Words>>();
  REQUIRE(hypotheses.size() == 400);
  int tokens_differ = 0;
  for (size_t i = 0; i < hypotheses.size(); ++i)
    if (tokenize_13a(hypotheses[i]) != tokens[i] && ++tokens_differ <= 3) CHECK_MESSAGE(false, hypotheses[i]);
  CHECK(tokens_differ == 0);
  check_sentences(fixture.at("sentences"), hypotheses, references, Case::mixed);
  sf::testing::check_corpus_scores(fixture.at("corpora"), hypotheses, references,
                                   [](const auto& hyp, const auto& ref, const nlohmann::json&) {
                                     return corpus_sacrebleu(hyp, ref);
                                   });
}

TEST_CASE("sacrebleu: matches sacreBLEU's lowercased BLEU (BLEU(lowercase=True)) on 400 sentence pairs") {
  const nlohmann::json fixture = sf::testing::bleu_fixture();
  const nlohmann::json& lowercase = fixture.at("lowercase");
  CHECK(lowercase.at("signature").get<std::string>() == sacrebleu_signature(Case::lowercase));
  const auto hypotheses = fixture.at("hypotheses").get<std::vector<std::string>>();
  const auto references = fixture.at("references").get<std::vector<std::string>>();
  check_sentences(lowercase.at("sentences"), hypotheses, references, Case::lowercase);
  sf::testing::check_corpus_scores(lowercase.at("corpora"), hypotheses, references,
                                   [](const auto& hyp, const auto& ref, const nlohmann::json&) {
                                     return corpus_sacrebleu(hyp, ref, Case::lowercase);
                                   });
}
