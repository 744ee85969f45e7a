// Values of ops against numbers computed by hand.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/init.h"
#include "autograd/ops.h"

using namespace sf;
using doctest::Approx;

static void check_close(const Tensor& t, const std::vector<float>& expect, double eps = 1e-6) {
  REQUIRE(t.numel() == static_cast<int64_t>(expect.size()));
  for (size_t i = 0; i < expect.size(); ++i) {
    CAPTURE(i);
    CHECK(t.data()[i] == Approx(expect[i]).epsilon(eps));
  }
}

TEST_CASE("values: softmax and log_softmax of [1, 2, 3]") {
  // e^1 + e^2 + e^3 = 30.19287485
  Tensor x = Tensor::from({1, 2, 3}, {1, 3});
  check_close(softmax(x), {0.09003057f, 0.24472847f, 0.66524096f});
  check_close(log_softmax(x), {-2.40760596f, -1.40760596f, -0.40760596f});
}

TEST_CASE("values: softmax of large logits does not overflow") {
  Tensor x = Tensor::from({1000, 1001, 1002, -1000}, {1, 4});
  Tensor y = softmax(x);
  check_close(y, {0.09003057f, 0.24472847f, 0.66524096f, 0.0f});
  Tensor l = log_softmax(x);
  // Logits near 1000 are only exact to float32's spacing there, 6e-5.
  check_close(slice(l, 1, 0, 3), {-2.40760596f, -1.40760596f, -0.40760596f}, 1e-4);
  CHECK(l.data()[3] == Approx(-2002.40760596f));
  for (float v : l.to_vector()) CHECK(std::isfinite(v));
}

TEST_CASE("values: cross_entropy plain, smoothed, ignored and with large logits") {
  // Row 0: logits [1,2,3], target 2: -log p = 0.40760596.
  // Row 1: logits [0,0,0], target 0: -log p = log 3 = 1.09861229.
  Tensor logits = Tensor::from({1, 2, 3, 0, 0, 0, 5, 5, 5}, {3, 3});
  Tensor targets = Tensor::from_ints({2, 0, -100}, {3});
  CHECK(cross_entropy(logits, targets).item() == Approx((0.40760596 + 1.09861229) / 2));
  // Smoothing eps = 0.1: row 0 adds eps * mean(-log p) = mean(2.40760596, 1.40760596,
  // 0.40760596) = 1.40760596; row 1's mean is log 3.
  double row0 = 0.9 * 0.40760596 + 0.1 * 1.40760596;
  double row1 = 0.9 * 1.09861229 + 0.1 * 1.09861229;
  CHECK(cross_entropy(logits, targets, -100, 0.1f).item() == Approx((row0 + row1) / 2));
  // An ignore index that is a real class id (as [PAD] = 1 is in training).
  Tensor pad_targets = Tensor::from_ints({2, 1, 1}, {3});
  CHECK(cross_entropy(logits, pad_targets, 1, 0.1f).item() == Approx(row0));
  // Large logits: exactly the same loss as the shifted ones.
  Tensor big = Tensor::from({1001, 1002, 1003}, {1, 3});
  CHECK(cross_entropy(big, Tensor::from_ints({2}, {1})).item() == Approx(0.40760596));
}

TEST_CASE("values: cross_entropy gradient is softmax minus smoothed one-hot, over counted rows") {
  Tensor logits = Tensor::from({1, 2, 3, 4, 4, 4}, {2, 3}).set_requires_grad();
  Tensor targets = Tensor::from_ints({2, -100}, {2});
  cross_entropy(logits, targets, -100, 0.3f).backward();
  // Row 0 (the only counted row): p - (0.7 onehot + 0.1); row 1 ignored: 0.
  check_close(logits.grad(), {0.09003057f - 0.1f, 0.24472847f - 0.1f, 0.66524096f - 0.8f, 0, 0, 0},
              1e-5);
}

TEST_CASE("values: unbiased var and std") {
  // [1, 2, 3, 4]: mean 2.5, squared deviations sum 5, / (4 - 1).
  Tensor x = Tensor::from({1, 2, 3, 4, 2, 2, 2, 2}, {2, 4});
  check_close(var(x, 1), {5.0f / 3.0f, 0.0f});
  check_close(stddev(x, -1, true), {std::sqrt(5.0f / 3.0f), 0.0f});
}

TEST_CASE("values: matmul by hand, all layouts") {
  Tensor a = Tensor::from({1, 2, 3, 4, 5, 6}, {2, 3});     // [[1,2,3],[4,5,6]]
  Tensor b = Tensor::from({7, 8, 9, 10, 11, 12}, {3, 2});  // [[7,8],[9,10],[11,12]]
  std::vector<float> ab = {58, 64, 139, 154};
  check_close(matmul(a, b), ab);
  check_close(matmul(transpose(a, 0, 1), b, {.trans_a = true}), ab);
  check_close(matmul(a, transpose(b, 0, 1), {.trans_b = true}), ab);
  check_close(matmul(transpose(a, 0, 1), transpose(b, 0, 1), {true, true}), ab);
}

TEST_CASE("values: reductions, shapes and keepdim") {
  Tensor x = Tensor::from({1, 5, 3, 4, 2, 6}, {2, 3});
  check_close(sum(x, 0), {5, 7, 9});
  check_close(mean(x, 1), {3, 4});
  CHECK(max(x, 1).to_vector() == std::vector<float>{5, 6});
  CHECK(max(x, 1, true).shape() == Shape{2, 1});
  CHECK(sum(x).item() == 21.0f);
  CHECK(argmax(x).to_int_vector() == std::vector<int32_t>{1, 2});
}

TEST_CASE("values: topk, comparisons, masks and arange") {
  Tensor x = Tensor::from({0.5f, 3, 1, 3, -2}, {1, 5});
  auto [values, indices] = topk(x, 3);
  CHECK(values.to_vector() == std::vector<float>{3, 3, 1});
  CHECK(indices.to_int_vector() == std::vector<int32_t>{1, 3, 2});  // ties: lower index first
  // The decoder's causal mask: position i may see keys j <= i.
  Tensor i = reshape(arange(3), {3, 1}), j = reshape(arange(3), {1, 3});
  CHECK(ge(i, j).to_int_vector() == std::vector<int32_t>{1, 0, 0, 1, 1, 0, 1, 1, 1});
  Tensor tokens = Tensor::from_ints({5, 7, 1}, {1, 3});
  Tensor not_pad = ne(tokens, Tensor::from_ints({1}, {}));
  CHECK(not_pad.to_int_vector() == std::vector<int32_t>{1, 1, 0});
  CHECK(logical_and(ge(i, j), not_pad).to_int_vector() ==
        std::vector<int32_t>{1, 0, 0, 1, 1, 0, 1, 1, 0});
  CHECK(logical_or(eq(i, j), lt(i, j)).to_int_vector() ==
        std::vector<int32_t>{1, 1, 1, 0, 1, 1, 0, 0, 1});
  CHECK(gt(x, Tensor::scalar(1.0f)).to_int_vector() == std::vector<int32_t>{0, 1, 0, 1, 0});
  CHECK(le(x, Tensor::scalar(1.0f)).to_int_vector() == std::vector<int32_t>{1, 0, 1, 0, 1});
  CHECK(to_float(arange(3)).to_vector() == std::vector<float>{0, 1, 2});
}

TEST_CASE("values: fill_where, concat and slice of int32 tensors") {
  Tensor scores = Tensor::from({1, 2, 3, 4}, {2, 2});
  Tensor mask = Tensor::from_ints({0, 1}, {2});
  CHECK(fill_where(scores, mask, -1e9f).to_vector() == std::vector<float>{1, -1e9f, 3, -1e9f});
  Tensor ids = concat({Tensor::from_ints({2, 5}, {1, 2}), Tensor::from_ints({9}, {1, 1})}, 1);
  CHECK(ids.to_int_vector() == std::vector<int32_t>{2, 5, 9});
  CHECK(slice(ids, 1, 1, 3).to_int_vector() == std::vector<int32_t>{5, 9});
}

TEST_CASE("values: dropout keeps the expectation and is reproducible") {
  Tensor x = Tensor::ones({10000});
  Rng a(3), b(3);
  Tensor ya = dropout(x, 0.25f, a), yb = dropout(x, 0.25f, b);
  CHECK(ya.to_vector() == yb.to_vector());
  int zeros = 0;
  for (float v : ya.to_vector()) {
    CHECK((v == 0.0f || v == Approx(1.0f / 0.75f)));
    zeros += v == 0.0f;
  }
  CHECK(zeros == doctest::Approx(2500).epsilon(0.08));
  CHECK(mean(ya).item() == Approx(1.0).epsilon(0.03));
  CHECK(dropout(x, 0.0f, a).same_storage(x));
}

TEST_CASE("random: same seed, same numbers; state save and restore") {
  Rng a(42), b(42);
  for (int i = 0; i < 100; ++i) CHECK(a.next_u64() == b.next_u64());
  Rng::State saved = a.state();
  float u = a.uniform(), n = a.normal();
  b.set_state(saved);
  CHECK(b.uniform() == u);
  CHECK(b.normal() == n);
  Rng c(42);
  Tensor w = xavier_uniform({30, 20}, c);
  float bound = std::sqrt(6.0f / 50.0f);
  float lo = 1, hi = -1;
  for (float v : w.to_vector()) lo = std::min(lo, v), hi = std::max(hi, v);
  CHECK(lo >= -bound);
  CHECK(hi < bound);
  CHECK(hi - lo > 1.8f * bound);  // it fills the range
}

TEST_CASE("values: fused ops equal their compositions") {
  Rng rng(5);
  Tensor x = uniform({2, 3, 4, 4}, -3, 3, rng);
  Tensor mask = Tensor::from_ints({1, 1, 0, 1, 1, 0, 0, 0}, {2, 1, 1, 4});
  Tensor composed = softmax(fill_where(x * 0.5f, eq(mask, Tensor::from_ints({0}, {})), -1e9f));
  Tensor fused = masked_softmax(x, mask, 0.5f);
  for (int64_t i = 0; i < x.numel(); ++i) CHECK(fused.data()[i] == Approx(composed.data()[i]));
  // A hidden key gets exactly zero weight.
  CHECK(fused.data()[2] == 0.0f);

  Tensor alpha = uniform({4}, 0.5f, 1.5f, rng), bias = uniform({4}, -1, 1, rng);
  Tensor ln = layer_norm(x, alpha, bias, 1e-6f);
  Tensor ln_composed = alpha * (x - mean(x, -1, true)) / (stddev(x, -1, true) + 1e-6f) + bias;
  for (int64_t i = 0; i < x.numel(); ++i) CHECK(ln.data()[i] == Approx(ln_composed.data()[i]));

  Tensor br = bias_relu(x, bias), br_composed = relu(x + bias);
  CHECK(br.to_vector() == br_composed.to_vector());
}

TEST_CASE("values: layer_norm of a known vector") {
  // [1, 2, 3, 4]: mean 2.5, unbiased std sqrt(5/3) = 1.29099445.
  Tensor x = Tensor::from({1, 2, 3, 4}, {1, 4});
  Tensor y = layer_norm(x, Tensor::from({1, 1, 2, 2}, {4}), Tensor::from({0, 0, 0, 1}, {4}), 1e-6f);
  double s = 1.29099445 + 1e-6;
  check_close(y, {float(-1.5 / s), float(-0.5 / s), float(2 * 0.5 / s), float(2 * 1.5 / s + 1)});
}
