// Metrics against values worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <stdexcept>

#include "eval/metrics.h"

using namespace sf::eval;
using doctest::Approx;

namespace {
Words words(const std::string& text) {
  Words out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}
}  // namespace

TEST_CASE("metrics: corpus BLEU with a brevity penalty, 3 sentence pairs") {
  std::vector<Words> hyp = {words("the cat sat on the mat"), words("a dog runs"), words("hello world")};
  std::vector<Words> ref = {words("the cat sat on a mat"), words("the dog runs fast"), words("hello world")};
  // Clipped matches / hypothesis n-grams, summed over the corpus:
  // 1-grams (5+2+2)/(6+3+2) = 9/11; 2-grams (3+1+1)/(5+2+1) = 5/8;
  // 3-grams (2+0+0)/(4+1+0) = 2/5; 4-grams 1/3. c = 11 < r = 12: BP = e^(1-12/11).
  double expect = std::exp(1.0 - 12.0 / 11.0) * std::pow(9.0 / 11 * 5.0 / 8 * 2.0 / 5 * 1.0 / 3, 0.25);
  CHECK(corpus_bleu(hyp, ref) == Approx(100 * expect));
}

TEST_CASE("metrics: corpus BLEU without a brevity penalty, and with an order unmatched") {
  std::vector<Words> hyp = {words("the cat sat on the mat"), words("a dog runs"), words("hello world again")};
  std::vector<Words> ref = {words("the cat sat on a mat"), words("the dog runs fast"), words("hello world")};
  // c = 12 = r: BP = 1. 1-grams (5+2+2)/(6+3+3) = 9/12, 2-grams (3+1+1)/(5+2+2)
  // = 5/9, 3-grams (2+0+0)/(4+1+1) = 2/6, 4-grams 1/3.
  CHECK(corpus_bleu(hyp, ref) == Approx(100 * std::pow(9.0 / 12 * 5.0 / 9 * 2.0 / 6 * 1.0 / 3, 0.25)));
  // No 4-gram matches at all: NLTK without smoothing gives 0.
  CHECK(corpus_bleu({words("a b c d")}, {words("a b c e")}) == 0.0);
  CHECK(corpus_bleu({words("a b c d e")}, {words("a b c d e")}) == Approx(100.0));
}

TEST_CASE("metrics: chrF2 by hand, sentence and corpus statistics") {
  // "ab" vs "abc": 1-grams P 2/2 R 2/3, 2-grams P 1/1 R 1/2, no 3-grams in the
  // hypothesis. Mean P = 1, R = 7/12; F2 = 5 P R / (4 P + R) = 7/11.
  CHECK(corpus_chrf({U"ab"}, {U"abc"}) == Approx(100.0 * 7 / 11));
  // Spaces are ignored.
  CHECK(corpus_chrf({U"a b c"}, {U"abc"}) == Approx(100.0));
  // Summed over the corpus: adding "x" vs "y" gives 1-grams P 2/3 R 2/4 and
  // 2-grams P 1 R 1/2: P = 5/6, R = 1/2, F2 = 25/46.
  CHECK(corpus_chrf({U"ab", U"x"}, {U"abc", U"y"}) == Approx(100.0 * 25 / 46));
  // Accented letters are one character each.
  CHECK(corpus_chrf({U"perché"}, {U"perché"}) == Approx(100.0));
}

TEST_CASE("metrics: CER and WER as total edits over total reference length") {
  CHECK(corpus_cer({U"kitten"}, {U"sitting"}) == Approx(3.0 / 7));
  CHECK(corpus_wer({words("a b c")}, {words("a x c d")}) == Approx(2.0 / 4));
  // Corpus level: (3 + 0) / (7 + 3), not the mean of per-sentence rates.
  CHECK(corpus_cer({U"kitten", U"abc"}, {U"sitting", U"abc"}) == Approx(3.0 / 10));
  CHECK(edit_distance(std::u32string(U"flaw"), std::u32string(U"lawn")) == 2);
}

TEST_CASE("metrics: an empty hypothesis") {
  std::vector<Words> hyp = {Words{}}, ref = {words("the cat")};
  CHECK(corpus_bleu(hyp, ref) == 0.0);
  CHECK(corpus_chrf({U""}, {U"the cat"}) == 0.0);
  CHECK(corpus_cer({U""}, {U"the cat"}) == Approx(1.0));
  CHECK(corpus_wer(hyp, ref) == Approx(1.0));
}

TEST_CASE("metrics: the table's names are unique keys, and at() finds each value") {
  std::set<std::string> names;
  for (const Metric& m : metrics()) CHECK(names.insert(m.name).second);
  for (const char* kept : {"bleu", "chrf", "cer", "wer"}) CHECK(names.count(kept) == 1);  // eval's and metrics.jsonl's keys
  Scores s = score_translations({"a b"}, {"a b"}, "en");
  REQUIRE(s.values.size() == metrics().size());
  for (size_t i = 0; i < metrics().size(); ++i) CHECK(s.at(metrics()[i].name) == s.values[i]);
  CHECK_THROWS_AS(s.at("no such metric"), std::out_of_range);
}

TEST_CASE("metrics: the lowercased BLEUs ignore case; the Multi30k one tokenizes by the target language") {
  // Cased, "Das" and "das" differ: 3/4, 2/3, 1/2 and the 4-gram smoothed to
  // 1/2; lowercased, the four 13a words all match.
  Scores s = score_translations({"Das ist gut ."}, {"das ist gut."}, "de");
  CHECK(s.at("sacrebleu") == Approx(100.0 * std::pow(3.0 / 4 * 2.0 / 3 * 1.0 / 2 * 1.0 / 2, 0.25)));
  CHECK(s.at("sacrebleu_lc") == Approx(100.0));
  CHECK(s.at("bleu_lc_tok") == Approx(100.0));
  // German keeps an ordinal's period ("2." is "second"), English splits it:
  // the hypothesis "er wurde 2." is 3 Moses tokens in German (no 4-gram: 0)
  // and the reference's 4 in English.
  CHECK(score_translations({"Er wurde 2 ."}, {"Er wurde 2 ."}, "de").at("bleu_lc_tok") == 0.0);
  CHECK(score_translations({"Er wurde 2 ."}, {"Er wurde 2 ."}, "en").at("bleu_lc_tok") == Approx(100.0));
}

TEST_CASE("metrics: score_translations compares pre-tokenised text") {
  // "cat,sat" and "cat , sat" are the same words: cat , sat.
  Scores s = score_translations({"the cat,sat", "a dog"}, {"the  cat , sat", "the dog"}, "en");
  CHECK(s.at("bleu") == Approx(corpus_bleu({words("the cat , sat"), words("a dog")},
                                           {words("the cat , sat"), words("the dog")})));
  CHECK(s.at("chrf") == Approx(corpus_chrf({U"the cat , sat", U"a dog"}, {U"the cat , sat", U"the dog"})));
  // One substitution: 1 of 4 + 2 words, "a" vs "the": 3 of 13 + 7 characters.
  CHECK(s.at("wer") == Approx(1.0 / 6));
  CHECK(s.at("cer") == Approx(3.0 / 20));
  CHECK(s.at("exact_match") == Approx(0.5));  // the first pair only
  CHECK(score_translations({"the dog", "a b"}, {"the cat", "a b"}, "en").at("exact_match") == Approx(0.5));  // word for word
  CHECK(score_translations({}, {}, "en").at("exact_match") == 0.0);
}

TEST_CASE("metrics: length ratio, total hypothesis words over total reference words") {
  // 3 of 6 words, then 4 ("Hello , world !": punctuation is a word) of 2:
  // (3 + 4) / (6 + 2), not the mean of the sentence ratios (1/2 + 2) / 2.
  Scores s = score_translations({"the cat sat", "Hello, world!"}, {"the cat sat on the mat", "hello world"}, "en");
  CHECK(s.at("length_ratio") == Approx(7.0 / 8));
  CHECK(score_translations({"a b"}, {"a b"}, "en").at("length_ratio") == Approx(1.0));
}

TEST_CASE("metrics: repeats, the share of hypotheses with a word three times in a row") {
  // Degenerate: "La La La" and a run of three "x" after a run of two; not:
  // an alternation, two in a row, three of one word apart, and the empty line.
  Scores s = score_translations({"La La La", "a b a b", "x x y x x x .", "no no", "y z y z y", ""},
                                {"Das ist gut", "a b", "x y", "no", "y", "z"}, "en");
  CHECK(s.at("repeats") == Approx(2.0 / 6));
  CHECK(score_translations({"a b c"}, {"a b c"}, "en").at("repeats") == 0.0);
  // Punctuation is a word: "! ! !" repeats, "!!!" is one word.
  CHECK(score_translations({"wow ! ! !", "wow!!!"}, {"wow", "wow"}, "en").at("repeats") == Approx(0.5));
}
