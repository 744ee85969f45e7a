#include "decoding.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/engine.h"

namespace sf::train {

std::vector<TokenIds> greedy_decode(nn::Transformer& model, const Tensor& src, int64_t max_len) {
  NoGradGuard no_grad;
  int64_t batch = src.size(0);
  Tensor src_mask = nn::padding_mask(src);
  nn::DecoderCache cache = model.start_decoding(model.encode(src, src_mask));
  std::vector<TokenIds> out(batch);
  std::vector<bool> done(batch, false);
  Tensor next = Tensor::from_ints(std::vector<int32_t>(batch, kSosId), {batch, 1});
  for (int64_t length = 1; length < max_len; ++length) {
    next = argmax(model.logits(model.decode_next(cache, src_mask, next)));  // [B, 1]
    std::vector<int32_t> tokens = next.to_int_vector();
    int64_t active = 0;
    for (int64_t b = 0; b < batch; ++b) {
      if (done[b]) continue;
      int32_t token = tokens[b];
      if (token == kEosId)
        done[b] = true;
      else
        out[b].push_back(token), ++active;
    }
    if (active == 0) break;
  }
  return out;
}

namespace {

double normalized(double log_prob, size_t length, float length_penalty) {
  return log_prob / std::pow(static_cast<double>(std::max<size_t>(length, 1)), length_penalty);
}

struct Beam {
  TokenIds tokens;
  double log_prob;
};

}  // namespace

std::vector<Hypothesis> beam_search(nn::Transformer& model, const Tensor& src, int64_t beam,
                                    float length_penalty, int64_t max_len) {
  NoGradGuard no_grad;
  const int64_t batch = src.size(0), k = beam;
  const double kNone = -std::numeric_limits<double>::infinity();
  // Each sentence's source is repeated for its k beams: row b * k + i.
  const int64_t width = src.size(1);
  const std::vector<int32_t> ids = src.to_int_vector();
  std::vector<int32_t> repeated;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < k; ++i)
      repeated.insert(repeated.end(), ids.begin() + b * width, ids.begin() + (b + 1) * width);
  Tensor src_k = Tensor::from_ints(repeated, {batch * k, width});
  Tensor src_mask = nn::padding_mask(src_k);
  nn::DecoderCache cache = model.start_decoding(model.encode(src_k, src_mask));

  // Only beam 0 is live at the start, so the first step does not pick k copies.
  std::vector<std::vector<Beam>> beams(batch);
  for (auto& b : beams) {
    b.assign(k, Beam{{}, kNone});
    b[0].log_prob = 0.0;
  }
  std::vector<std::vector<Hypothesis>> finished(batch);
  std::vector<bool> done(batch, false);
  std::vector<int32_t> last(batch * k, kSosId);

  for (int64_t length = 1; length < max_len; ++length) {
    Tensor log_probs = model.project(
        model.decode_next(cache, src_mask, Tensor::from_ints(last, {batch * k, 1})));
    const int64_t vocab = log_probs.size(-1);
    // A sentence's best k continuations are among the k best of each of its
    // beams, so only those cross to the host.
    const int64_t per_beam = std::min(k, vocab);
    auto [top_values, top_indices] = topk(reshape(log_probs, {batch * k, vocab}), per_beam);
    const std::vector<float> best_lp = top_values.to_vector();
    const std::vector<int32_t> best_token = top_indices.to_int_vector();
    std::vector<int32_t> parents(batch * k);
    bool all_done = true;
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Beam> next;
      if (done[b]) {  // keep feeding the finished sentence's rows; ignore them
        for (int64_t i = 0; i < k; ++i) parents[b * k + i] = static_cast<int32_t>(b * k + i);
        continue;
      }
      // The best continuations over all live beams, one per free slot; a
      // continuation ending in [EOS] finishes and takes its slot for good, so
      // the beam narrows as hypotheses finish (and width 1 is greedy).
      std::vector<std::pair<double, int64_t>> candidates;
      for (int64_t i = 0; i < k; ++i) {
        if (beams[b][i].log_prob == kNone) continue;
        for (int64_t j = (b * k + i) * per_beam; j < (b * k + i + 1) * per_beam; ++j)
          candidates.push_back({beams[b][i].log_prob + best_lp[j], i * vocab + best_token[j]});
      }
      size_t slots = std::min<size_t>(candidates.size(), k - finished[b].size());
      std::partial_sort(candidates.begin(), candidates.begin() + slots, candidates.end(),
                        [](const auto& x, const auto& y) {
                          return x.first > y.first || (x.first == y.first && x.second < y.second);
                        });
      for (size_t c = 0; c < slots; ++c) {
        auto [log_prob, index] = candidates[c];
        int64_t parent = index / vocab;
        auto token = static_cast<int32_t>(index % vocab);
        TokenIds tokens = beams[b][parent].tokens;
        if (token == kEosId) {
          finished[b].push_back({tokens, log_prob, normalized(log_prob, tokens.size() + 1, length_penalty)});
          continue;
        }
        tokens.push_back(token);
        parents[b * k + static_cast<int64_t>(next.size())] = static_cast<int32_t>(b * k + parent);
        next.push_back({std::move(tokens), log_prob});
      }
      done[b] = next.empty();
      while (static_cast<int64_t>(next.size()) < k) {  // pad with dead beams
        parents[b * k + static_cast<int64_t>(next.size())] = static_cast<int32_t>(b * k);
        next.push_back({{}, kNone});
      }
      beams[b] = std::move(next);
      for (int64_t i = 0; i < k; ++i)
        last[b * k + i] = beams[b][i].tokens.empty() ? kEosId : beams[b][i].tokens.back();
      all_done = all_done && done[b];
    }
    if (all_done) break;
    Tensor rows = Tensor::from_ints(parents, {batch * k});
    for (nn::LayerCache& layer : cache.layers)
      layer.self = {index_select(layer.self.keys, rows), index_select(layer.self.values, rows)};
  }

  std::vector<Hypothesis> best(batch);
  for (int64_t b = 0; b < batch; ++b) {
    // Out of length before `beam` hypotheses finished: the live ones count too,
    // without an [EOS].
    if (!done[b])
      for (const Beam& live : beams[b])
        if (live.log_prob != kNone)
          finished[b].push_back({live.tokens, live.log_prob,
                                 normalized(live.log_prob, live.tokens.size(), length_penalty)});
    best[b] = *std::max_element(finished[b].begin(), finished[b].end(),
                                [](const Hypothesis& x, const Hypothesis& y) { return x.score < y.score; });
  }
  return best;
}

}  // namespace sf::train
