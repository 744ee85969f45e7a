// Greedy decoding and beam search on the KV-cache path.
#include <doctest/doctest.h>

#include "autograd/engine.h"
#include "optim/optimizer.h"
#include "test_nn_helpers.h"
#include "train/decoding.h"

using namespace sf;
using namespace sf::train;

namespace {

// Random sentences over the non-special ids 4..10.
std::vector<std::vector<int32_t>> random_sentences(Rng& rng, int count, int min_len, int max_len) {
  std::vector<std::vector<int32_t>> out(count);
  for (auto& s : out) {
    int64_t len = min_len + static_cast<int64_t>(rng.below(max_len - min_len + 1));
    for (int64_t i = 0; i < len; ++i) s.push_back(4 + static_cast<int32_t>(rng.below(7)));
  }
  return out;
}

// A tiny model trained briefly to reverse its input: confident but imperfect,
// so beams have real choices to make.
std::unique_ptr<nn::Transformer> trained_reverser() {
  nn::TransformerConfig c = testing::tiny_config();
  c.d_model = 32;
  c.h = 4;
  c.d_ff = 64;
  c.dropout = 0.0f;
  auto model = testing::tiny_model(c, 7);
  optim::Adam adam(model->named_parameters(), 3e-3f);
  Rng rng(11);
  for (int step = 0; step < 400; ++step) {
    auto src = random_sentences(rng, 16, 2, 6);
    auto tgt = src;
    for (auto& s : tgt) std::reverse(s.begin(), s.end());
    testing::Batch b = testing::make_batch(src, tgt, 8);
    adam.zero_grad();
    testing::batch_loss(*model, b, 0.0f).backward();
    adam.step();
  }
  model->eval();
  return model;
}

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
