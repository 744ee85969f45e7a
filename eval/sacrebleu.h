// BLEU as sacreBLEU 2.x computes it by default (Post 2018, "A Call for Clarity
// in Reporting BLEU Scores"), so that a score can stand beside published ones:
// each detokenized hypothesis and its raw reference are tokenized with the 13a
// tokenizer of WMT's mteval-v13a.pl, clipped n-gram statistics are summed over
// the corpus, and orders without a match are smoothed exponentially.
//
// Token BLEU (corpus_bleu in metrics.h) scores our own pre-tokenised words
// instead; the two differ on the same output and only this one is comparable
// across papers.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "eval/metrics.h"

namespace sf::eval {

// The words of `line` under sacreBLEU's "13a" tokenizer (mteval-v13a.pl's
// language-independent rules): trailing whitespace dropped; "<skipped>" and
// "-\n" removed, other newlines made spaces; &quot; &amp; &lt; &gt; unescaped;
// ASCII symbols split off; "." and "," split off unless between digits (the
// line's ends count as non-digits); "-"
// split off after a digit; then split on Unicode whitespace (Python's
// str.split()). `line` must be valid UTF-8.
Words tokenize_13a(std::string_view line);

// Whether BLEU compares the text as written or lowercased, as sacreBLEU's
// `--lowercase` (BLEU(lowercase=True)) does with Python's str.lower() on both
// sides before tokenizing: "Der" then matches "der".
enum class Case { mixed, lowercase };

// Corpus BLEU x 100 as sacreBLEU's default BLEU() computes it: one reference
// per hypothesis, case kept (or lowercased), 13a tokenization, BLEU-4 with
// "exp" smoothing and no effective order. See sacrebleu_from_statistics for
// the formula.
double corpus_sacrebleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                        Case text_case = Case::mixed);

// The score from statistics already summed over a corpus, sacreBLEU's
// compute_bleu with smooth_method "exp": precision p_n = matched_n / total_n,
// except that the k-th order (in increasing n) with no match gets
// 1 / (2^k total_n) (mteval-v13a.pl's smoothing; Chen & Cherry 2014, method 3);
// BLEU = BP * exp(mean log p_n) with BP = exp(1 - r/c) when c < r (0 when c = 0).
// 0 when nothing matches at all or some order has no hypothesis n-gram.
double sacrebleu_from_statistics(const BleuStatistics& stats);

// sacreBLEU's signature of the score corpus_sacrebleu computes, e.g.
// "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0" ("case:lc"
// lowercased).
std::string sacrebleu_signature(Case text_case = Case::mixed);

// The same signature with another tokenizer and smoothing: sacreBLEU's
// "nrefs:1|case:CASE|eff:no|tok:TOKENIZER|smooth:SMOOTHING|version:2.6.0".
std::string sacrebleu_signature(Case text_case, std::string_view tokenizer, std::string_view smoothing);

}  // namespace sf::eval
