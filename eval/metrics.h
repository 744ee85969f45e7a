// Translation quality metrics, corpus-level, as the reference tools compute
// them, and the one table of metrics that validation, `eval`, metrics.jsonl and
// the report all read. Adding a metric: its function and its row of kMetrics
// in metrics.cpp, and its test in tests/test_metrics.cpp.
//
// Every metric but the BLEUs of the field compares each hypothesis with its
// raw reference after the tokenizer's pre-tokenisation: as words, or for the
// character metrics those words joined by single spaces, as code points.
// sacreBLEU (sacrebleu.h), cased and lowercased, and the Multi30k papers' BLEU
// on lowercased Moses tokens (moses_bleu.h) score the detokenized hypothesis
// against the raw reference, each with its own tokenizer, as published
// scores are computed.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sf::eval {

using Words = std::vector<std::string>;

// BLEU-4's sufficient statistics over a corpus (Papineni et al. 2002): for each
// order n = 1..4 (entry n - 1) the hypotheses' n-grams and their matches clipped
// by the reference counts, and the total hypothesis and reference lengths.
struct BleuStatistics {
  static constexpr int kOrder = 4;
  int64_t matched[kOrder] = {}, hyp_ngrams[kOrder] = {};
  int64_t hyp_length = 0, ref_length = 0;
};
BleuStatistics bleu_statistics(const std::vector<Words>& hypotheses, const std::vector<Words>& references);

// Corpus BLEU-4 (uniform weights, brevity penalty, no smoothing) x 100, equal to
// NLTK's corpus_bleu: clipped n-gram matches and hypothesis n-gram counts are
// summed over the corpus; 0 when any order has no match.
double corpus_bleu(const std::vector<Words>& hypotheses, const std::vector<Words>& references);

// Corpus chrF2 x 100 as sacreBLEU 2 computes it: character 1..6-gram
// statistics with whitespace removed, summed over the corpus; precision and
// recall averaged over the orders both sides have, then F-beta with beta = 2.
double corpus_chrf(const std::vector<std::u32string>& hypotheses, const std::vector<std::u32string>& references);

// Total edit distance over total reference length, as torchmetrics: CER over
// characters (spaces included), WER over words.
double corpus_cer(const std::vector<std::u32string>& hypotheses, const std::vector<std::u32string>& references);
double corpus_wer(const std::vector<Words>& hypotheses, const std::vector<Words>& references);

// Levenshtein distance (unit insert, delete, substitute).
template <class Sequence>
int64_t edit_distance(const Sequence& a, const Sequence& b);

// Hypotheses and their references, pre-tokenised in both forms metrics use,
// and as text: the hypothesis detokenized, the reference raw (what sacreBLEU
// scores, with its own tokenizer), with the language they are in (the
// config's lang_tgt, "de"), whose rules the Moses tokenizer follows.
struct PreTokenizedPairs {
  std::vector<Words> hyp_words, ref_words;
  std::vector<std::u32string> hyp_chars, ref_chars;  // the words joined by single spaces
  std::vector<std::string> hyp_text, ref_text;
  std::string language;
};

// Which way a metric improves: up, down, or towards an ideal value (a ratio
// whose best is 1).
enum class Better { higher, lower, neither };

struct Metric {
  const char* name;   // its key in metrics.jsonl and eval's JSON, and in the log line
  const char* label;  // its name in the report's table and chart legends
  Better better;
  const char* chart;   // the report chart it is drawn in: metrics on one scale share one
  const char* format;  // printf format of its value in the log line
  double (*compute)(const PreTokenizedPairs& pairs);
};

// Every metric, in the order they are logged, written and drawn.
const std::vector<Metric>& metrics();

// One value per metric, in the order of metrics().
struct Scores {
  std::vector<double> values;
  double at(std::string_view name) const;  // the value of the metric `name`
};

// Every metric of the hypotheses (lines as `translate --tokens` prints them)
// against their raw references, in the target language `language`.
Scores score_translations(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                          std::string_view language);

// Adds "name": value for every metric to `record` (eval's output, a validation
// record of metrics.jsonl).
void add_scores(nlohmann::ordered_json& record, const Scores& scores);

// "name value" for every metric, two spaces apart (the validation log line).
std::string format_scores(const Scores& scores);

}  // namespace sf::eval
