#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "data/detokenizer.h"
#include "data/pretokenizer.h"
#include "data/unicode.h"
#include "eval/moses_bleu.h"
#include "eval/sacrebleu.h"

namespace sf::eval {

namespace {

void require_same_size(size_t hypotheses, size_t references, const char* metric) {
  if (hypotheses != references)
    internal_fail(metric, ": ", hypotheses, " hypotheses for ", references, " references");
}

// Counts of the n-grams of `items`.
template <class Sequence>
std::map<Sequence, int64_t> ngram_counts(const Sequence& items, size_t n) {
  std::map<Sequence, int64_t> counts;
  for (size_t i = 0; i + n <= items.size(); ++i) ++counts[Sequence(items.begin() + i, items.begin() + i + n)];
  return counts;
}

// One n-gram order's statistics over a corpus: the hypothesis's and the
// reference's n-grams, and the matches clipped by the reference counts (sum
// over the hypothesis's n-grams of min(hyp count, ref count)).
struct NgramTotals {
  int64_t hyp = 0, ref = 0, matched = 0;
};

// Adds one sentence pair's n-grams to `orders`, entry n - 1 for order n.
template <class Sequence>
void add_ngrams(const Sequence& hyp, const Sequence& ref, std::vector<NgramTotals>& orders) {
  for (size_t n = 1; n <= orders.size(); ++n) {
    std::map<Sequence, int64_t> h = ngram_counts(hyp, n), r = ngram_counts(ref, n);
    NgramTotals& t = orders[n - 1];
    for (const auto& [gram, count] : h) {
      t.hyp += count;
      if (auto it = r.find(gram); it != r.end()) t.matched += std::min(count, it->second);
    }
    for (const auto& [gram, count] : r) t.ref += count;
  }
}

}  // namespace

BleuStatistics bleu_statistics(const std::vector<Words>& hypotheses, const std::vector<Words>& references) {
  require_same_size(hypotheses.size(), references.size(), "bleu");
  std::vector<NgramTotals> orders(BleuStatistics::kOrder);
  BleuStatistics stats;
  for (size_t s = 0; s < hypotheses.size(); ++s) {
    stats.hyp_length += static_cast<int64_t>(hypotheses[s].size());
    stats.ref_length += static_cast<int64_t>(references[s].size());
    add_ngrams(hypotheses[s], references[s], orders);
  }
  for (int n = 0; n < BleuStatistics::kOrder; ++n) {
    stats.matched[n] = orders[n].matched;
    stats.hyp_ngrams[n] = orders[n].hyp;
  }
  return stats;
}

double corpus_bleu(const std::vector<Words>& hypotheses, const std::vector<Words>& references) {
  BleuStatistics stats = bleu_statistics(hypotheses, references);
  // Without smoothing, an order with no match makes the geometric mean 0.
  double log_precision = 0.0;
  for (int n = 0; n < BleuStatistics::kOrder; ++n) {
    if (stats.matched[n] == 0) return 0.0;
    log_precision += std::log(double(stats.matched[n]) / double(stats.hyp_ngrams[n])) / BleuStatistics::kOrder;
  }
  // Brevity penalty: exp(1 - r/c) when the hypotheses are shorter.
  double bp = stats.hyp_length > stats.ref_length
                  ? 1.0
                  : std::exp(1.0 - double(stats.ref_length) / double(stats.hyp_length));
  return 100.0 * bp * std::exp(log_precision);
}

double corpus_chrf(const std::vector<std::u32string>& hypotheses, const std::vector<std::u32string>& references) {
  require_same_size(hypotheses.size(), references.size(), "chrf");
  constexpr int kOrder = 6;
  constexpr double kBeta = 2.0;
  std::vector<NgramTotals> orders(kOrder);
  auto without_spaces = [](std::u32string s) {
    s.erase(std::remove_if(s.begin(), s.end(), [](char32_t c) { return c == U' '; }), s.end());
    return s;
  };
  for (size_t s = 0; s < hypotheses.size(); ++s)
    add_ngrams(without_spaces(hypotheses[s]), without_spaces(references[s]), orders);
  // Average precision and recall over the orders present on both sides.
  double precision = 0.0, recall = 0.0;
  int effective = 0;
  for (const NgramTotals& t : orders) {
    if (t.hyp == 0 || t.ref == 0) continue;
    precision += double(t.matched) / double(t.hyp);
    recall += double(t.matched) / double(t.ref);
    ++effective;
  }
  if (effective == 0) return 0.0;
  precision /= effective;
  recall /= effective;
  if (precision + recall == 0.0) return 0.0;
  double b2 = kBeta * kBeta;
  return 100.0 * (1.0 + b2) * precision * recall / (b2 * precision + recall);
}

template <class Sequence>
int64_t edit_distance(const Sequence& a, const Sequence& b) {
  // One row of the dynamic-programming table at a time.
  std::vector<int64_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int64_t diagonal = row[0];
    row[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int64_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

template int64_t edit_distance(const std::u32string&, const std::u32string&);
template int64_t edit_distance(const Words&, const Words&);

template <class Sequence>
static double error_rate(const std::vector<Sequence>& hypotheses,
                         const std::vector<Sequence>& references, const char* metric) {
  require_same_size(hypotheses.size(), references.size(), metric);
  int64_t errors = 0, length = 0;
  for (size_t s = 0; s < hypotheses.size(); ++s) {
    errors += edit_distance(hypotheses[s], references[s]);
    length += static_cast<int64_t>(references[s].size());
  }
  return length == 0 ? (errors == 0 ? 0.0 : INFINITY) : double(errors) / double(length);
}

double corpus_cer(const std::vector<std::u32string>& hypotheses, const std::vector<std::u32string>& references) {
  return error_rate(hypotheses, references, "cer");
}

double corpus_wer(const std::vector<Words>& hypotheses, const std::vector<Words>& references) {
  return error_rate(hypotheses, references, "wer");
}

// The share of hypotheses equal to their reference, word for word.
static double exact_match(const PreTokenizedPairs& p) {
  int64_t exact = 0;
  for (size_t s = 0; s < p.hyp_words.size(); ++s) exact += p.hyp_words[s] == p.ref_words[s];
  return p.hyp_words.empty() ? 0.0 : double(exact) / double(p.hyp_words.size());
}

// Total hypothesis words over total reference words: sacreBLEU's BLEU "ratio"
// (Post 2018), the c/r of BLEU's brevity penalty exp(1 - r/c). Below 1 the model
// stops too early, above 1 too late; BLEU alone does not say which.
static double length_ratio(const PreTokenizedPairs& p) {
  int64_t hyp = 0, ref = 0;
  for (size_t s = 0; s < p.hyp_words.size(); ++s) {
    hyp += static_cast<int64_t>(p.hyp_words[s].size());
    ref += static_cast<int64_t>(p.ref_words[s].size());
  }
  return ref == 0 ? (hyp == 0 ? 1.0 : INFINITY) : double(hyp) / double(ref);
}

// The table: a metric is a function above and a row here.
// The share of hypotheses in which some word comes three or more times in a
// row ("La La La"): the degenerate output of an undertrained or overconfident
// model, which BLEU hides in an average.
static double repeats(const PreTokenizedPairs& p) {
  int64_t degenerate = 0;
  for (const Words& w : p.hyp_words)
    for (size_t i = 2; i < w.size(); ++i)
      if (w[i] == w[i - 1] && w[i] == w[i - 2]) {
        ++degenerate;
        break;
      }
  return p.hyp_words.empty() ? 0.0 : double(degenerate) / double(p.hyp_words.size());
}

static const std::vector<Metric> kMetrics = {
    {"bleu", "token BLEU", Better::higher, "BLEU and chrF", "%.2f",
     [](const PreTokenizedPairs& p) { return corpus_bleu(p.hyp_words, p.ref_words); }},
    {"sacrebleu", "sacreBLEU", Better::higher, "BLEU and chrF", "%.2f",
     [](const PreTokenizedPairs& p) { return corpus_sacrebleu(p.hyp_text, p.ref_text); }},
    {"sacrebleu_lc", "sacreBLEU lowercased", Better::higher, "BLEU and chrF", "%.2f",
     [](const PreTokenizedPairs& p) { return corpus_sacrebleu(p.hyp_text, p.ref_text, Case::lowercase); }},
    {"bleu_lc_tok", "BLEU on lowercased Moses tokens (Multi30k papers)", Better::higher, "BLEU and chrF", "%.2f",
     [](const PreTokenizedPairs& p) { return corpus_moses_bleu(p.hyp_text, p.ref_text, p.language); }},
    {"chrf", "chrF", Better::higher, "BLEU and chrF", "%.2f",
     [](const PreTokenizedPairs& p) { return corpus_chrf(p.hyp_chars, p.ref_chars); }},
    {"cer", "CER", Better::lower, "error and exact-match rates", "%.4f",
     [](const PreTokenizedPairs& p) { return corpus_cer(p.hyp_chars, p.ref_chars); }},
    {"wer", "WER", Better::lower, "error and exact-match rates", "%.4f",
     [](const PreTokenizedPairs& p) { return corpus_wer(p.hyp_words, p.ref_words); }},
    {"repeats", "a word 3 times in a row", Better::lower, "error and exact-match rates", "%.3f", repeats},
    {"exact_match", "exact match", Better::higher, "error and exact-match rates", "%.3f", exact_match},
    {"length_ratio", "length ratio", Better::neither, "length ratio (hypothesis / reference)", "%.3f", length_ratio},
};

const std::vector<Metric>& metrics() { return kMetrics; }

double Scores::at(std::string_view name) const {
  for (size_t i = 0; i < kMetrics.size(); ++i)
    if (kMetrics[i].name == name) return values.at(i);
  throw std::out_of_range("no metric named '" + std::string(name) + "'");  // a caller's bug, as std::map::at
}

Scores score_translations(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                          std::string_view language) {
  require_same_size(hypotheses.size(), references.size(), "score_translations");
  PreTokenizedPairs pairs;
  pairs.language = language;
  auto add = [](const std::string& line, std::vector<Words>& words, std::vector<std::u32string>& chars) {
    std::string text = data::pre_tokenized_text(line);
    Words& w = words.emplace_back();
    for (std::string_view word : data::pre_tokenize(text)) w.emplace_back(word);
    chars.push_back(data::decode_utf8(text));
  };
  for (size_t s = 0; s < hypotheses.size(); ++s) {
    add(hypotheses[s], pairs.hyp_words, pairs.hyp_chars);
    add(references[s], pairs.ref_words, pairs.ref_chars);
    pairs.hyp_text.push_back(data::detokenize(hypotheses[s]));
    pairs.ref_text.push_back(references[s]);
  }
  Scores scores;
  for (const Metric& m : kMetrics) scores.values.push_back(m.compute(pairs));
  return scores;
}

void add_scores(nlohmann::ordered_json& record, const Scores& scores) {
  for (size_t i = 0; i < kMetrics.size(); ++i) record[kMetrics[i].name] = scores.values.at(i);
}

std::string format_scores(const Scores& scores) {
  std::string out;
  for (size_t i = 0; i < kMetrics.size(); ++i) {
    char value[64];
    std::snprintf(value, sizeof value, kMetrics[i].format, scores.values.at(i));
    out += (i == 0 ? "" : "  ") + std::string(kMetrics[i].name) + " " + value;
  }
  return out;
}

}  // namespace sf::eval
