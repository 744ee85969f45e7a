// The training loss drops padded positions before the projection; it must
// equal the straightforward loss, cross-entropy of every position's log-probs
// with [PAD] ignored, in value and in every gradient.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "data/framing.h"
#include "test_nn_helpers.h"
#include "setup/loss.h"

using namespace sf;
using namespace sf::testing;

TEST_CASE("translation_loss: the loss and gradients of cross-entropy over every position") {
  auto model = tiny_model();
  model->eval();  // the same forward pass twice: no dropout
  Batch b = make_batch({{4, 5, 6, 7}, {8, 9}, {5}}, {{4, 4, 5, 6, 7}, {8}, {9, 10}}, 7);
  Tensor src_mask = data::encoder_keep_mask(b.src);
  auto gradients = [&](Tensor loss) {
    model->zero_grad();
    loss.backward();
    std::vector<std::vector<float>> grads;
    for (const Tensor& p : model->parameters()) grads.push_back(p.grad().defined() ? p.grad().to_vector() : std::vector<float>{});
    return std::pair{loss.item(), grads};
  };
  auto features = [&] { return model->decode(model->encode(b.src, src_mask), src_mask, b.tgt, data::decoder_keep_mask(b.tgt)); };
  auto [expected, expected_grads] = gradients(batch_loss(*model, b));
  auto [loss, grads] = gradients(setup::translation_loss(*model, features(), b.label, 0.1f));
  CHECK(loss == doctest::Approx(expected).epsilon(1e-6));
  REQUIRE(grads.size() == expected_grads.size());
  // The same sums in another order: equal to float rounding, relative to each
  // parameter's largest gradient.
  for (size_t p = 0; p < grads.size(); ++p) {
    REQUIRE(grads[p].size() == expected_grads[p].size());
    float largest = 0.0f;
    for (float g : expected_grads[p]) largest = std::max(largest, std::fabs(g));
    for (size_t i = 0; i < grads[p].size(); ++i)
      CHECK(std::fabs(grads[p][i] - expected_grads[p][i]) <= 1e-5f * largest + 1e-8f);
  }
}

TEST_CASE("translation_loss: every position padded gives NaN, as the mean over no tokens") {
  auto model = tiny_model();
  Batch b = make_batch({{4}}, {{}}, 3);
  Tensor label = Tensor::from_ints({data::kPadId, data::kPadId, data::kPadId}, {1, 3});
  Tensor src_mask = data::encoder_keep_mask(b.src);
  Tensor f = model->decode(model->encode(b.src, src_mask), src_mask, b.tgt, data::decoder_keep_mask(b.tgt));
  CHECK(std::isnan(setup::translation_loss(*model, f, label, 0.1f).item()));
}
