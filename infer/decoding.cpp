#include "decoding.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "autograd/engine.h"

namespace sf::infer {

namespace {

// Weights [B, h, queries, keys] on the host.
struct HostWeights {
  int64_t heads, queries, keys;
  std::vector<float> values;
  explicit HostWeights(const Tensor& w)
      : heads(w.size(1)), queries(w.size(2)), keys(w.size(3)), values(w.to_vector()) {}
  const float* at(int64_t b, int64_t head, int64_t query) const {
    return values.data() + ((b * heads + head) * queries + query) * keys;
  }
};

// Row b's weights of a whole-sequence pass, cropped to `n` queries and keys.
AttentionWeights crop(const HostWeights& w, int64_t b, int64_t n) {
  AttentionWeights out{w.heads, n, n, {}};
  for (int64_t h = 0; h < w.heads; ++h)
    for (int64_t q = 0; q < n; ++q) out.values.insert(out.values.end(), w.at(b, h, q), w.at(b, h, q) + n);
  return out;
}

// One sentence's weights of its one-query steps, step t read from batch row
// rows[t], each keeping `keys` keys or, growing with the step
// (self-attention), zero after the step's own position.
AttentionWeights stack_steps(const std::vector<HostWeights>& steps, const std::vector<int64_t>& rows, int64_t keys) {
  int64_t n = static_cast<int64_t>(rows.size()), heads = steps.at(0).heads;
  AttentionWeights out{heads, n, keys, std::vector<float>(heads * n * keys, 0.0f)};
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t t = 0; t < n; ++t) {
      const float* row = steps[t].at(rows[t], h, 0);
      std::copy(row, row + std::min(keys, steps[t].keys), out.values.begin() + (h * n + t) * keys);
    }
  return out;
}

// Where a sentence ran in the batch: the row of its source, and the row of
// each decoding step (greedy: its own; beam search: its hypothesis's beam).
struct BatchRows {
  int64_t source;
  std::vector<int64_t> steps;
};

// Every sentence's record from the weights the blocks recorded: one
// whole-source pass per encoder layer, one pass per step per decoder layer.
std::vector<AttentionRecord> gather_attention(const AttentionRecorder& recorded, const Tensor& src,
                                              const std::vector<TokenIds>& decoder_inputs,
                                              const std::vector<BatchRows>& rows) {
  const std::vector<int32_t> ids = src.to_int_vector();
  const int64_t width = src.size(1);
  std::vector<AttentionRecord> records(decoder_inputs.size());
  for (size_t b = 0; b < records.size(); ++b) {
    // The framed source ends at its [EOS]; only [PAD] follows.
    const int32_t* row = ids.data() + rows[b].source * width;
    int64_t n = width;
    while (n > 0 && row[n - 1] == data::kPadId) --n;
    records[b].source.assign(row, row + n);
    records[b].target = decoder_inputs[b];
  }
  for (const std::vector<Tensor>& layer : recorded.encoder_self) {
    HostWeights w(layer.at(0));
    for (size_t b = 0; b < records.size(); ++b)
      records[b].encoder_self.push_back(crop(w, rows[b].source, records[b].source.size()));
  }
  for (size_t l = 0; l < recorded.decoder_self.size(); ++l) {
    std::vector<HostWeights> self, cross;
    for (const Tensor& w : recorded.decoder_self[l]) self.emplace_back(w);
    for (const Tensor& w : recorded.cross[l]) cross.emplace_back(w);
    for (size_t b = 0; b < records.size(); ++b) {
      records[b].decoder_self.push_back(stack_steps(self, rows[b].steps, records[b].target.size()));
      records[b].cross.push_back(stack_steps(cross, rows[b].steps, records[b].source.size()));
    }
  }
  return records;
}

}  // namespace

AttentionRecorder::AttentionRecorder(nn::Transformer& model)
    : encoder_self(model.encoder.layers.size()), decoder_self(model.decoder.layers.size()),
      cross(model.decoder.layers.size()), model_(model) {
  auto into = [](std::vector<Tensor>& calls) { return [&calls](const Tensor& weights) { calls.push_back(weights); }; };
  for (size_t l = 0; l < encoder_self.size(); ++l)
    model.encoder.layers[l].self_attention_block.weights_hook = into(encoder_self[l]);
  for (size_t l = 0; l < decoder_self.size(); ++l) {
    model.decoder.layers[l].self_attention_block.weights_hook = into(decoder_self[l]);
    model.decoder.layers[l].cross_attention_block.weights_hook = into(cross[l]);
  }
}

AttentionRecorder::~AttentionRecorder() {
  for (size_t l = 0; l < encoder_self.size(); ++l) model_.encoder.layers[l].self_attention_block.weights_hook = nullptr;
  for (size_t l = 0; l < decoder_self.size(); ++l) {
    model_.decoder.layers[l].self_attention_block.weights_hook = nullptr;
    model_.decoder.layers[l].cross_attention_block.weights_hook = nullptr;
  }
}

std::vector<TokenIds> greedy_decode(nn::Transformer& model, const Tensor& src, int64_t max_len,
                                    std::vector<AttentionRecord>* attention) {
  // One search: greedy decoding is beam search of width 1 (its length
  // penalty ranks one hypothesis, so any value gives the same result).
  std::vector<TokenIds> out;
  for (Hypothesis& h : beam_search(model, src, 1, 0.0f, max_len, attention)) out.push_back(std::move(h.tokens));
  return out;
}

namespace {

double normalized(double log_prob, int64_t length, float length_penalty) {
  return log_prob / std::pow(static_cast<double>(std::max<int64_t>(length, 1)), length_penalty);
}

struct Beam {
  TokenIds tokens;
  double log_prob;
  std::vector<int64_t> rows;  // the batch row of each step that fed it ([SOS], tokens...)
};

// One sentence's search: its live beams (at the start one, [SOS]) and the
// hypotheses that ended, each with the batch rows that fed it (as Beam::rows).
struct SentenceSearch {
  std::vector<Beam> live{Beam{{}, 0.0, {}}};
  std::vector<Hypothesis> finished;
  std::vector<std::vector<int64_t>> finished_rows;
};

// The step's k best continuations of each batch row, on the host.
struct RowBest {
  int64_t per_row, vocab;
  std::vector<float> log_probs;
  std::vector<int32_t> tokens;
};

// The next step's batch: for each row, the row it continues, its sentence and its last token.
struct NextRows {
  std::vector<int32_t> parents, sentence, last;
};

// Sentence `b`, whose live beams are batch rows [first, first + live): its
// best continuations over those beams, one per free slot of its `k`. A
// continuation ending in [EOS] finishes and takes its slot for good, so the
// beam narrows as hypotheses finish (and width 1 is greedy); the others go
// to `next`.
void extend(SentenceSearch& s, int32_t b, int64_t first, int64_t k, const RowBest& best, float length_penalty,
            bool record_rows, NextRows& next) {
  const auto live = std::ssize(s.live);
  std::vector<std::pair<double, int64_t>> candidates;  // (log-prob, parent * vocab + token)
  for (int64_t i = 0; i < live; ++i)
    for (int64_t j = (first + i) * best.per_row; j < (first + i + 1) * best.per_row; ++j)
      candidates.push_back({s.live[i].log_prob + best.log_probs[j], i * best.vocab + best.tokens[j]});
  size_t slots = std::min<size_t>(candidates.size(), k - s.finished.size());
  std::partial_sort(candidates.begin(), candidates.begin() + slots, candidates.end(),
                    [](const auto& x, const auto& y) {
                      return x.first > y.first || (x.first == y.first && x.second < y.second);
                    });
  std::vector<Beam> extended;
  for (size_t c = 0; c < slots; ++c) {
    auto [log_prob, index] = candidates[c];
    int64_t parent = index / best.vocab;
    auto token = static_cast<int32_t>(index % best.vocab);
    TokenIds tokens = s.live[parent].tokens;
    std::vector<int64_t> steps;  // kept only for an attention record
    if (record_rows) {
      steps = s.live[parent].rows;
      steps.push_back(first + parent);
    }
    if (token == data::kEosId) {
      // Its length counts the [EOS], as its labels would.
      double score = normalized(log_prob, data::framed_target_width(tokens.size()), length_penalty);
      s.finished.push_back({tokens, log_prob, score});
      s.finished_rows.push_back(std::move(steps));
      continue;
    }
    tokens.push_back(token);
    next.parents.push_back(static_cast<int32_t>(first + parent));
    next.sentence.push_back(b);
    next.last.push_back(token);
    extended.push_back({std::move(tokens), log_prob, std::move(steps)});
  }
  s.live = std::move(extended);
}

// Sentence `sentence[r]`'s source framed in `src`, for each batch row r.
Tensor rows_of(const std::vector<int32_t>& src_ids, int64_t width, const std::vector<int32_t>& sentence) {
  std::vector<int32_t> ids;
  ids.reserve(sentence.size() * static_cast<size_t>(width));
  for (int32_t b : sentence) ids.insert(ids.end(), src_ids.begin() + b * width, src_ids.begin() + (b + 1) * width);
  return Tensor::from_ints(ids, {std::ssize(sentence), width});
}

// The cache for the next batch: each live hypothesis's row of the
// self-attention cache, taken from its parent's; the source's keys, values
// and mask only where the rows' sentences changed. (Rows that each continue
// their own hypothesis, as in greedy decoding before any sentence ends, keep
// their cache where it is.)
void follow_parents(nn::DecoderCache& cache, Tensor& src_mask, const NextRows& next, int64_t rows,
                    const std::vector<int32_t>& sentence, const std::vector<int32_t>& src_ids, int64_t width) {
  Tensor from = Tensor::from_ints(next.parents, {std::ssize(next.parents)});
  bool same_rows = std::ssize(next.parents) == rows;
  for (int64_t r = 0; same_rows && r < rows; ++r) same_rows = next.parents[r] == r;
  if (!same_rows)
    for (nn::LayerCache& layer : cache.layers)
      layer.self = {index_select(layer.self.keys, from), index_select(layer.self.values, from)};
  if (next.sentence != sentence) {
    for (nn::LayerCache& layer : cache.layers)
      layer.cross = {index_select(layer.cross.keys, from), index_select(layer.cross.values, from)};
    src_mask = data::encoder_keep_mask(rows_of(src_ids, width, next.sentence)).to(src_mask.device());
  }
}

// The sentence's best-scoring hypothesis, and the batch rows that fed it.
// Out of length before `beam` hypotheses finished, the live ones count too,
// without an [EOS].
std::pair<Hypothesis, std::vector<int64_t>> best_of(SentenceSearch& s, float length_penalty) {
  for (const Beam& live : s.live) {
    s.finished.push_back({live.tokens, live.log_prob, normalized(live.log_prob, std::ssize(live.tokens), length_penalty)});
    s.finished_rows.push_back(live.rows);
  }
  auto chosen = std::max_element(s.finished.begin(), s.finished.end(),
                                 [](const Hypothesis& x, const Hypothesis& y) { return x.score < y.score; });
  return {*chosen, s.finished_rows[chosen - s.finished.begin()]};
}

}  // namespace

std::vector<Hypothesis> beam_search(nn::Transformer& model, const Tensor& src, int64_t beam,
                                    float length_penalty, int64_t max_len,
                                    std::vector<AttentionRecord>* attention) {
  NoGradGuard no_grad;
  std::optional<AttentionRecorder> recorder;
  if (attention) recorder.emplace(model);
  const int64_t batch = src.size(0), width = src.size(1);
  const std::vector<int32_t> src_ids = src.to_int_vector();
  // Each source is encoded once; its cross-attention keys and values are then
  // selected for as many rows as it has live hypotheses.
  Tensor src_mask = data::encoder_keep_mask(src).to(model.device());
  nn::DecoderCache cache = model.start_decoding(model.encode(src, src_mask));

  // The batch holds one row per live hypothesis, sentence by sentence. A
  // hypothesis that ends, and a sentence whose search is over, leave the
  // batch, so every row decoded is one that can still win.
  std::vector<SentenceSearch> searches(batch);
  std::vector<int32_t> sentence(batch);  // the sentence of each row
  for (int64_t b = 0; b < batch; ++b) sentence[b] = static_cast<int32_t>(b);
  std::vector<int32_t> last(batch, data::kSosId);
  for (int64_t length = 1; length < max_len && !last.empty(); ++length) {
    const auto rows = std::ssize(last);
    Tensor log_probs = model.project(model.decode_next(cache, src_mask, Tensor::from_ints(last, {rows, 1})));
    const int64_t vocab = log_probs.size(-1);
    // A sentence's best k continuations are among the k best of each of its
    // beams, so only those cross to the host.
    const int64_t per_row = std::min(beam, vocab);
    auto [top_values, top_indices] = topk(reshape(log_probs, {rows, vocab}), per_row);
    const RowBest best{per_row, vocab, top_values.to_vector(), top_indices.to_int_vector()};
    NextRows next;
    for (int64_t first = 0; first < rows;) {
      const int32_t b = sentence[first];
      const auto live = std::ssize(searches[b].live);
      extend(searches[b], b, first, beam, best, length_penalty, attention != nullptr, next);
      first += live;
    }
    if (next.last.empty() || length + 1 >= max_len) break;
    follow_parents(cache, src_mask, next, rows, sentence, src_ids, width);
    sentence = std::move(next.sentence);
    last = std::move(next.last);
  }

  std::vector<Hypothesis> best(batch);
  std::vector<TokenIds> fed(batch);
  std::vector<BatchRows> rows(batch);
  for (int64_t b = 0; b < batch; ++b) {
    auto [hypothesis, steps] = best_of(searches[b], length_penalty);
    best[b] = std::move(hypothesis);
    rows[b] = {b, std::move(steps)};
    fed[b] = {data::kSosId};
    fed[b].insert(fed[b].end(), best[b].tokens.begin(), best[b].tokens.end());
    fed[b].resize(rows[b].steps.size());
  }
  if (attention) *attention = gather_attention(*recorder, src, fed, rows);
  return best;
}

}  // namespace sf::infer
