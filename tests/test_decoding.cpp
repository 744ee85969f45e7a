// Greedy decoding and beam search on the KV-cache path; beam search against
// an exhaustive search under the same scoring.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "autograd/engine.h"
#include "reverser_model.h"
#include "test_nn_helpers.h"
#include "infer/decoding.h"

using namespace sf;
using namespace sf::infer;
using testing::random_sentences;
using testing::trained_reverser;

namespace {

// The model's log-probability of `tokens` then [EOS] (teacher forcing).
double sequence_log_prob(nn::Transformer& model, const std::vector<int32_t>& src,
                         const std::vector<int32_t>& tokens) {
  NoGradGuard no_grad;
  int64_t length = std::max<int64_t>(src.size(), tokens.size() + 1);
  testing::Batch b = testing::make_batch({src}, {tokens}, length);
  Tensor lp = testing::log_probs(model, b.src, b.tgt);
  double total = 0.0;
  for (size_t t = 0; t <= tokens.size(); ++t)
    total += lp.data()[t * lp.size(-1) + b.label.ints()[t]];
  return total;
}

}  // namespace

TEST_CASE("decoding: beam width 1 is greedy decoding exactly; batched equals one by one") {
  auto model = trained_reverser();
  Rng rng(5);
  auto sources = random_sentences(rng, 12, 1, 7);
  Tensor src = testing::pad_batch(sources, 8);
  std::vector<TokenIds> greedy = greedy_decode(*model, src, 12);
  std::vector<Hypothesis> beam1 = beam_search(*model, src, 1, 0.6f, 12);
  std::vector<Hypothesis> beam4 = beam_search(*model, src, 4, 0.6f, 12);
  int correct = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    CAPTURE(i);
    CHECK(beam1[i].tokens == greedy[i]);
    // One sentence at a time, padded to its own length, gives the same lines.
    Tensor one = testing::pad_batch({sources[i]}, static_cast<int64_t>(sources[i].size()));
    CHECK(greedy_decode(*model, one, 12)[0] == greedy[i]);
    CHECK(beam_search(*model, one, 4, 0.6f, 12)[0].tokens == beam4[i].tokens);
    std::vector<int32_t> reversed(sources[i].rbegin(), sources[i].rend());
    correct += greedy[i] == reversed;
  }
  CHECK(correct >= 6);  // the model did learn something
}

TEST_CASE("decoding: a wider beam never lowers the chosen hypothesis's score") {
  auto model = trained_reverser();
  Rng rng(9);
  auto sources = random_sentences(rng, 16, 2, 7);
  Tensor src = testing::pad_batch(sources, 8);
  std::vector<std::vector<Hypothesis>> by_width;
  for (int64_t width : {1, 2, 4, 8}) by_width.push_back(beam_search(*model, src, width, 0.6f, 12));
  for (size_t i = 0; i < sources.size(); ++i) {
    CAPTURE(i);
    for (size_t w = 1; w < by_width.size(); ++w)
      CHECK(by_width[w][i].score >= by_width[w - 1][i].score - 1e-6);
    // The reported log-probability is the model's, recomputed by teacher forcing.
    const Hypothesis& h = by_width.back()[i];
    CHECK(h.log_prob == doctest::Approx(sequence_log_prob(*model, sources[i], h.tokens)).epsilon(1e-4));
  }
}

namespace {

// A hypothesis and its score, computed without the beam code.
struct Scored {
  TokenIds tokens;
  bool ended = false;  // with [EOS]
  double log_prob = 0, score = 0;
};

// The ranking: log-probability over length^penalty, the length counting the
// [EOS] when there is one.
void score_all(std::vector<Scored>& all, float penalty) {
  for (Scored& s : all) s.score = s.log_prob / std::pow(double(s.tokens.size() + (s.ended ? 1 : 0)), penalty);
}

// Every hypothesis beam search can return for one source with decoder inputs
// of at most max_len tokens: n < max_len - 1 tokens other than [EOS], then
// [EOS]; or max_len - 1 such tokens, out of length. Each gets its
// log-probability by teacher forcing (the whole sequence decoded at once, no
// cache), and its score for `penalty`. Decoding feeds back whatever token it
// chose, [PAD] included, so the decoder mask here is causal only, as on the
// cached path.
std::vector<Scored> all_hypotheses(nn::Transformer& model, const std::vector<int32_t>& src, int64_t max_len,
                                   float penalty) {
  NoGradGuard no_grad;
  const int64_t n = max_len - 1;
  const int64_t vocab = model.projection_layer.proj.bias.numel();
  std::vector<int32_t> words;  // every token but [EOS]
  for (int32_t t = 0; t < vocab; ++t)
    if (t != data::kEosId) words.push_back(t);
  std::vector<TokenIds> sequences = {{}};  // all n-token sequences of words
  for (int64_t i = 0; i < n; ++i) {
    std::vector<TokenIds> longer;
    for (const TokenIds& s : sequences)
      for (int32_t w : words) {
        longer.push_back(s);
        longer.back().push_back(w);
      }
    sequences = std::move(longer);
  }
  // Decoder input [SOS] s_0 .. s_{n-2}: position i gives log p(. | [SOS] s_<i).
  const auto rows = static_cast<int64_t>(sequences.size());
  std::vector<int32_t> src_ids, tgt_ids;
  for (const TokenIds& s : sequences) {
    src_ids.insert(src_ids.end(), src.begin(), src.end());
    TokenIds input = data::frame_decoder_input(TokenIds(s.begin(), s.end() - 1), n);
    tgt_ids.insert(tgt_ids.end(), input.begin(), input.end());
  }
  Tensor src_t = Tensor::from_ints(src_ids, {rows, int64_t(src.size())}), tgt = Tensor::from_ints(tgt_ids, {rows, n});
  Tensor src_mask = data::encoder_keep_mask(src_t);
  Tensor lp = model.project(model.decode(model.encode(src_t, src_mask), src_mask, tgt, data::causal_keep_mask(n, n)));
  const float* p = lp.data();
  std::vector<Scored> out;
  for (int64_t r = 0; r < rows; ++r) {
    const TokenIds& s = sequences[r];
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* at = p + (r * n + i) * vocab;
      // s_0 .. s_{i-1} then [EOS], counted once (for the sequence that continues with words[0]).
      if (std::all_of(s.begin() + i, s.end(), [&](int32_t t) { return t == words[0]; }))
        out.push_back({TokenIds(s.begin(), s.begin() + i), true, sum + at[data::kEosId]});
      sum += at[s[i]];
    }
    out.push_back({s, false, sum});
  }
  score_all(out, penalty);
  return out;
}

// A random (untrained) model over a target vocabulary of 7: the 4 special
// tokens and 3 words; no dropout.
std::unique_ptr<nn::Transformer> random_model(uint64_t seed) {
  nn::TransformerConfig c = testing::tiny_config();
  c.tgt_vocab_size = 7;
  c.dropout = 0.0f;
  auto model = testing::tiny_model(c, seed);
  model->eval();
  return model;
}

}  // namespace

TEST_CASE("decoding: a beam as wide as the hypotheses are many finds the exhaustive search's best, score by hand") {
  constexpr int64_t kMaxLen = 5;  // up to 4 tokens: 6^4 without [EOS], 1 + 6 + 36 + 216 with one
  int ended = 0, out_of_length = 0, penalty_decided = 0;
  for (uint64_t seed : {1, 2, 3}) {
    auto model = random_model(seed);
    Rng rng(seed);
    for (const auto& src : random_sentences(rng, 2, 2, 5)) {
      std::vector<Scored> all = all_hypotheses(*model, src, kMaxLen, 0.0f);
      REQUIRE(all.size() == 1296 + 259);
      std::set<TokenIds> winners;  // over the penalties
      for (float penalty : {0.0f, 0.6f, 1.0f, 2.0f}) {
        CAPTURE(seed);
        CAPTURE(penalty);
        score_all(all, penalty);
        std::sort(all.begin(), all.end(), [](const Scored& a, const Scored& b) { return a.score > b.score; });
        const Scored& best = all[0];
        CHECK(best.score - all[1].score > 1e-4);  // a clear winner, whatever the rounding
        Tensor one = testing::pad_batch({src}, int64_t(src.size()));
        Hypothesis h = beam_search(*model, one, int64_t(all.size()), penalty, kMaxLen)[0];
        CHECK(h.tokens == best.tokens);
        CHECK(h.log_prob == doctest::Approx(best.log_prob).epsilon(1e-5));
        CHECK(h.score == doctest::Approx(best.score).epsilon(1e-5));
        (best.ended ? ended : out_of_length) += 1;
        winners.insert(best.tokens);
      }
      penalty_decided += winners.size() > 1;
    }
  }
  // Both ends and the length penalty did decide some of the cases.
  CHECK(ended > 0);
  CHECK(out_of_length > 0);
  CHECK(penalty_decided > 0);
}

TEST_CASE("decoding: when [EOS] never wins, decoding stops at max_len and ranks by log p / (max_len - 1)^penalty") {
  constexpr int64_t kMaxLen = 5;
  constexpr float kPenalty = 0.6f;
  auto model = random_model(4);
  model->projection_layer.proj.bias.data()[data::kEosId] = -40.0f;  // p([EOS]) < e^-30 everywhere
  Rng rng(4);
  auto sources = random_sentences(rng, 3, 2, 5);
  Tensor src = testing::pad_batch(sources, 5);
  std::vector<TokenIds> greedy = greedy_decode(*model, src, kMaxLen);
  for (size_t i = 0; i < sources.size(); ++i) {
    CAPTURE(i);
    CHECK(greedy[i].size() == kMaxLen - 1);
    std::vector<Scored> all = all_hypotheses(*model, sources[i], kMaxLen, kPenalty);
    auto best = std::max_element(all.begin(), all.end(), [](const Scored& a, const Scored& b) { return a.score < b.score; });
    CHECK_FALSE(best->ended);
    for (int64_t width : {int64_t(1), int64_t(3), int64_t(all.size())}) {
      CAPTURE(width);
      Hypothesis h = beam_search(*model, testing::pad_batch({sources[i]}, 5), width, kPenalty, kMaxLen)[0];
      REQUIRE(h.tokens.size() == kMaxLen - 1);
      if (width == 1) CHECK(h.tokens == greedy[i]);
      if (width == int64_t(all.size())) CHECK(h.tokens == best->tokens);
      // Its log-probability is its tokens' alone (no [EOS] was generated),
      // and its score that over 4^0.6 = 2.2973967...
      auto same = std::find_if(all.begin(), all.end(), [&](const Scored& s) { return !s.ended && s.tokens == h.tokens; });
      REQUIRE(same != all.end());
      CHECK(h.log_prob == doctest::Approx(same->log_prob).epsilon(1e-5));
      CHECK(h.score == doctest::Approx(h.log_prob / 2.29739670999407).epsilon(1e-6));
    }
  }
}

namespace {

// Each block's weights of a teacher-forced pass [1, h, q, k] against the
// recorded ones of one sentence; returns the largest difference.
float max_difference(const std::vector<Tensor>& recorded, const AttentionWeights& weights) {
  REQUIRE(recorded.size() == 1);
  REQUIRE(recorded[0].shape() == Shape{1, weights.heads, weights.queries, weights.keys});
  std::vector<float> expect = recorded[0].to_vector();
  float worst = 0.0f;
  for (size_t i = 0; i < expect.size(); ++i) worst = std::max(worst, std::fabs(expect[i] - weights.values[i]));
  return worst;
}

// Decoding with recording (greedy, or a beam of `beam`): the output is
// unchanged, and every record equals the weights of one teacher-forced pass
// over the framed source and the decoder inputs it recorded (causal mask only:
// decoding feeds back any token, [PAD] included).
void check_recorded_attention(nn::Transformer& model, const std::vector<std::vector<int32_t>>& sources,
                              int64_t max_len, int64_t beam) {
  NoGradGuard no_grad;
  Tensor src = data::frame_sources(sources);
  std::vector<AttentionRecord> records;
  std::vector<TokenIds> out;
  if (beam == 1) {
    out = greedy_decode(model, src, max_len, &records);
    CHECK(out == greedy_decode(model, src, max_len));
  } else {
    std::vector<Hypothesis> plain = beam_search(model, src, beam, 0.6f, max_len);
    for (const Hypothesis& h : beam_search(model, src, beam, 0.6f, max_len, &records)) out.push_back(h.tokens);
    for (size_t b = 0; b < out.size(); ++b) CHECK(out[b] == plain[b].tokens);
  }
  REQUIRE(records.size() == sources.size());
  for (size_t b = 0; b < sources.size(); ++b) {
    CAPTURE(b);
    const AttentionRecord& r = records[b];
    CHECK(r.source == data::frame_source(sources[b], static_cast<int64_t>(sources[b].size()) + 2));
    // [SOS], then the generated tokens fed back: all of them after an [EOS],
    // all but the last when max_len stopped it.
    TokenIds fed = {data::kSosId};
    fed.insert(fed.end(), out[b].begin(), out[b].end());
    if (static_cast<int64_t>(fed.size()) == max_len) fed.pop_back();
    CHECK(r.target == fed);

    int64_t S = static_cast<int64_t>(r.source.size()), T = static_cast<int64_t>(r.target.size());
    Tensor s = Tensor::from_ints(r.source, {1, S}), t = Tensor::from_ints(r.target, {1, T});
    AttentionRecorder recorded(model);
    Tensor mask = data::encoder_keep_mask(s);
    model.decode(model.encode(s, mask), mask, t, data::causal_keep_mask(T, T));
    for (size_t l = 0; l < model.encoder.layers.size(); ++l) {
      CHECK(max_difference(recorded.encoder_self[l], r.encoder_self[l]) < 1e-6f);
      CHECK(max_difference(recorded.decoder_self[l], r.decoder_self[l]) < 1e-6f);
      CHECK(max_difference(recorded.cross[l], r.cross[l]) < 1e-6f);
    }
  }
}

}  // namespace

TEST_CASE("decoding: greedy and beam decoding record the attention of their own steps, as a teacher-forced pass gives it") {
  Rng rng(5);
  auto sources = random_sentences(rng, 4, 1, 6);  // different lengths: padded rows in one batch
  auto ending = trained_reverser();  // sentences that end with [EOS]
  auto endless = random_model(4);    // sentences stopped by max_len
  endless->projection_layer.proj.bias.data()[data::kEosId] = -40.0f;
  for (int64_t beam : {1, 3}) {
    CAPTURE(beam);
    check_recorded_attention(*ending, sources, 10, beam);
    check_recorded_attention(*endless, sources, 5, beam);
  }
}

TEST_CASE("decoding: attention hooks are set only while a record is asked for, and unset after") {
  auto model = random_model(2);
  auto hooked = [&] {
    int count = 0;
    for (size_t l = 0; l < model->encoder.layers.size(); ++l)
      count += bool(model->encoder.layers[l].self_attention_block.weights_hook) +
               bool(model->decoder.layers[l].self_attention_block.weights_hook) +
               bool(model->decoder.layers[l].cross_attention_block.weights_hook);
    return count;
  };
  model->eval();
  std::vector<AttentionRecord> records;
  {
    AttentionRecorder recorder(*model);
    CHECK(hooked() == 3 * static_cast<int>(model->encoder.layers.size()));
  }
  CHECK(hooked() == 0);
  greedy_decode(*model, data::frame_sources({{4, 5, 6}, {7}}), 6, &records);
  beam_search(*model, data::frame_sources({{4, 5, 6}}), 2, 0.6f, 6, &records);
  CHECK(records.size() == 1);
  CHECK(hooked() == 0);
}
