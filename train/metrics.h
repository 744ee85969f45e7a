// Translation quality metrics (SPEC §8), corpus-level, as the reference tools
// compute them. Inputs are hypothesis/reference pairs already put through the
// tokenizer's pre-tokenisation: words, or for the character metrics those
// words joined by single spaces, as code points.
#pragma once
#include <string>
#include <vector>

namespace sf::train {

using Words = std::vector<std::string>;

// Corpus BLEU-4 (uniform weights, brevity penalty, no smoothing) x 100, equal to
// NLTK's corpus_bleu: clipped n-gram matches and hypothesis n-gram counts are
// summed over the corpus; 0 when any order has no match.
double corpus_bleu(const std::vector<Words>& hypotheses, const std::vector<Words>& references);

// Corpus chrF2 x 100 as sacreBLEU 2 computes it: character 1..6-gram
// statistics with whitespace removed, summed over the corpus; precision and
// recall averaged over the orders both sides have, then F-beta with beta = 2.
double corpus_chrf(const std::vector<std::u32string>& hypotheses,
                   const std::vector<std::u32string>& references);

// Total edit distance over total reference length, as torchmetrics: CER over
// characters (spaces included), WER over words.
double corpus_cer(const std::vector<std::u32string>& hypotheses,
                  const std::vector<std::u32string>& references);
double corpus_wer(const std::vector<Words>& hypotheses, const std::vector<Words>& references);

// Levenshtein distance (unit insert, delete, substitute).
template <class Sequence>
int64_t edit_distance(const Sequence& a, const Sequence& b);

}  // namespace sf::train
