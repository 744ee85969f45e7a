// One finite-difference gradient check per differentiable op (see gradcheck.h),
// with broadcasting and 4-d shapes where the op allows them.
#include "gradcheck.h"

using namespace sf;
using sf::testing::check_gradients;
using sf::testing::random_tensor;
using V = std::vector<Tensor>;

TEST_CASE("grad: add with broadcasting") {
  check_gradients([](const V& x) { return x[0] + x[1]; },
                  {random_tensor({2, 3, 4, 5}, 1), random_tensor({3, 1, 5}, 2)});
  check_gradients([](const V& x) { return x[0] + x[1]; },
                  {random_tensor({4, 1}, 3), random_tensor({5}, 4)});
}

TEST_CASE("grad: sub with broadcasting") {
  check_gradients([](const V& x) { return x[0] - x[1]; },
                  {random_tensor({2, 3, 4, 5}, 5), random_tensor({4, 1}, 6)});
  check_gradients([](const V& x) { return x[0] - x[1]; },
                  {random_tensor({}, 7), random_tensor({2, 3}, 8)});
}

TEST_CASE("grad: mul with broadcasting") {
  check_gradients([](const V& x) { return x[0] * x[1]; },
                  {random_tensor({2, 3, 4, 5}, 9), random_tensor({2, 1, 4, 1}, 10)});
}

TEST_CASE("grad: div with broadcasting") {
  check_gradients([](const V& x) { return x[0] / x[1]; },
                  {random_tensor({2, 3, 4, 5}, 11), random_tensor({5}, 12, 0.5f, 2.0f)});
}

TEST_CASE("grad: neg") {
  check_gradients([](const V& x) { return -x[0]; }, {random_tensor({2, 3, 4, 5}, 13)});
}

TEST_CASE("grad: scalar ops") {
  check_gradients([](const V& x) { return (x[0] + 2.0f) * 3.0f - 1.5f; },
                  {random_tensor({3, 4}, 14)});
  check_gradients([](const V& x) { return 2.0f - x[0]; }, {random_tensor({3, 4}, 15)});
  check_gradients([](const V& x) { return 2.0f / x[0]; }, {random_tensor({3, 4}, 16, 0.5f, 2.f)});
  check_gradients([](const V& x) { return x[0] / 4.0f; }, {random_tensor({3, 4}, 17)});
}

TEST_CASE("grad: pow") {
  check_gradients([](const V& x) { return pow(x[0], 3.0f); }, {random_tensor({2, 3, 4}, 18)});
  check_gradients([](const V& x) { return pow(x[0], -0.5f); },
                  {random_tensor({2, 3, 4}, 19, 0.5f, 2.0f)});
}

TEST_CASE("grad: exp") {
  check_gradients([](const V& x) { return exp(x[0]); }, {random_tensor({2, 3, 4, 5}, 20)});
}

TEST_CASE("grad: log") {
  check_gradients([](const V& x) { return log(x[0]); },
                  {random_tensor({2, 3, 4, 5}, 21, 0.5f, 3.0f)});
}

TEST_CASE("grad: sqrt") {
  check_gradients([](const V& x) { return sqrt(x[0]); },
                  {random_tensor({2, 3, 4, 5}, 22, 0.5f, 3.0f)});
}

TEST_CASE("grad: relu") {
  // Keep inputs away from the kink at 0, where the derivative jumps.
  Tensor x = random_tensor({2, 3, 4, 5}, 23, 0.1f, 1.0f);
  for (int64_t i = 0; i < x.numel(); i += 2) x.data()[i] = -x.data()[i];
  check_gradients([](const V& v) { return relu(v[0]); }, {x});
}

// GELU is smooth everywhere, so inputs may straddle 0.
TEST_CASE("grad: gelu") {
  check_gradients([](const V& x) { return gelu(x[0]); }, {random_tensor({2, 3, 4, 5}, 29, -3, 3)});
}

TEST_CASE("grad: tanh") {
  check_gradients([](const V& x) { return tanh(x[0]); }, {random_tensor({2, 3, 4, 5}, 24, -2, 2)});
}

TEST_CASE("grad: sigmoid") {
  check_gradients([](const V& x) { return sigmoid(x[0]); },
                  {random_tensor({2, 3, 4, 5}, 25, -3, 3)});
}

TEST_CASE("grad: matmul 2-d in all four layouts") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      Shape sa = ta ? Shape{4, 3} : Shape{3, 4}, sb = tb ? Shape{5, 4} : Shape{4, 5};
      check_gradients([=](const V& x) { return matmul(x[0], x[1], {ta, tb}); },
                      {random_tensor(sa, 26), random_tensor(sb, 27)});
    }
}

TEST_CASE("grad: batched matmul with batch broadcasting and transposes") {
  // [2,3,M,K] x [3,K,N]: b broadcast over the first batch dim.
  check_gradients([](const V& x) { return matmul(x[0], x[1]); },
                  {random_tensor({2, 3, 2, 4}, 28), random_tensor({3, 4, 5}, 29)});
  // [2,1,M,K] x [1,3,N,K]^T: both broadcast (the per-matrix loop).
  check_gradients([](const V& x) { return matmul(x[0], x[1], {.trans_b = true}); },
                  {random_tensor({2, 1, 3, 4}, 30), random_tensor({1, 3, 5, 4}, 31)});
  // [2,K,M]^T x [2,K,N]
  check_gradients([](const V& x) { return matmul(x[0], x[1], {.trans_a = true}); },
                  {random_tensor({2, 4, 3}, 32), random_tensor({2, 4, 5}, 33)});
  // [2,3,K] x [N,K]^T: a Linear layer (batch folded into rows).
  check_gradients([](const V& x) { return matmul(x[0], x[1], {.trans_b = true}); },
                  {random_tensor({2, 3, 4}, 34), random_tensor({5, 4}, 35)});
  // [M,K] x [2,K,N]: a broadcast over b's batch.
  check_gradients([](const V& x) { return matmul(x[0], x[1]); },
                  {random_tensor({3, 4}, 36), random_tensor({2, 4, 5}, 37)});
}

TEST_CASE("grad: sum over an axis, keepdim and all elements") {
  Tensor x = random_tensor({2, 3, 4, 5}, 38);
  for (int axis : {0, 1, 2, -1})
    for (bool keepdim : {false, true}) {
      CAPTURE(axis);
      CAPTURE(keepdim);
      check_gradients([=](const V& v) { return sum(v[0], axis, keepdim); }, {x.clone()});
    }
  check_gradients([](const V& v) { return sum(v[0]); }, {x.clone()});
}

TEST_CASE("grad: mean over an axis and all elements") {
  Tensor x = random_tensor({2, 3, 4, 5}, 39);
  check_gradients([](const V& v) { return mean(v[0], 2, true); }, {x.clone()});
  check_gradients([](const V& v) { return mean(v[0], -1); }, {x.clone()});
  check_gradients([](const V& v) { return mean(v[0]); }, {x.clone()});
}

TEST_CASE("grad: max over an axis") {
  // Distinct values spaced more than 2h apart, so the maximum does not move.
  Tensor x = Tensor::empty({2, 3, 4, 5});
  Rng rng(40);
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = 0.1f * static_cast<float>((i * 37) % 120);
  for (int axis : {0, 1, 3})
    for (bool keepdim : {false, true}) {
      CAPTURE(axis);
      check_gradients([=](const V& v) { return max(v[0], axis, keepdim); }, {x.clone()});
    }
}

TEST_CASE("grad: var and std (unbiased)") {
  Tensor x = random_tensor({2, 3, 4, 5}, 41);
  check_gradients([](const V& v) { return var(v[0], -1, true); }, {x.clone()});
  check_gradients([](const V& v) { return var(v[0], 1); }, {x.clone()});
  check_gradients([](const V& v) { return stddev(v[0], -1, true); }, {x.clone()});
  check_gradients([](const V& v) { return stddev(v[0], 0); }, {x.clone()});
}

TEST_CASE("grad: softmax") {
  check_gradients([](const V& x) { return softmax(x[0]); }, {random_tensor({2, 3, 4, 5}, 42, -2, 2)});
}

TEST_CASE("grad: log_softmax") {
  check_gradients([](const V& x) { return log_softmax(x[0]); },
                  {random_tensor({2, 3, 4, 5}, 43, -2, 2)});
}

TEST_CASE("grad: fill_where with a broadcast mask") {
  Tensor mask = Tensor::from_ints({1, 0, 0, 1, 0}, {1, 5});
  check_gradients([=](const V& x) { return fill_where(x[0], mask, -1e9f); },
                  {random_tensor({2, 3, 4, 5}, 44)});
}

TEST_CASE("grad: reshape and unsqueeze") {
  check_gradients([](const V& x) { return reshape(x[0], {6, -1}) * reshape(x[0], {6, 20}); },
                  {random_tensor({2, 3, 4, 5}, 45)});
  check_gradients([](const V& x) { return unsqueeze(x[0], 1) * 2.0f; }, {random_tensor({3, 4}, 46)});
}

TEST_CASE("grad: transpose") {
  check_gradients([](const V& x) { return transpose(x[0], 1, -1); },
                  {random_tensor({2, 3, 4, 5}, 47)});
}

TEST_CASE("grad: permute") {
  check_gradients([](const V& x) { return permute(x[0], {2, 0, 3, 1}); },
                  {random_tensor({2, 3, 4, 5}, 48)});
}

TEST_CASE("grad: concat") {
  check_gradients([](const V& x) { return concat({x[0], x[1], x[0]}, 2); },
                  {random_tensor({2, 3, 4, 5}, 49), random_tensor({2, 3, 1, 5}, 50)});
  check_gradients([](const V& x) { return concat({x[0], x[1]}, 0); },
                  {random_tensor({1, 3}, 51), random_tensor({2, 3}, 52)});
}

TEST_CASE("grad: slice") {
  check_gradients([](const V& x) { return slice(x[0], 2, 1, 3); }, {random_tensor({2, 3, 4, 5}, 53)});
  check_gradients([](const V& x) { return slice(x[0], -1, 0, 5); }, {random_tensor({2, 3, 4, 5}, 54)});
}

TEST_CASE("grad: embedding lookup scatter-adds repeated ids") {
  Tensor ids = Tensor::from_ints({0, 3, 3, 1, 0, 2}, {2, 3});
  check_gradients([=](const V& x) { return embedding(x[0], ids); }, {random_tensor({5, 4}, 55)});
}

TEST_CASE("grad: dropout with a fixed seed") {
  check_gradients(
      [](const V& x) {
        Rng rng(7);  // same mask on every evaluation
        return dropout(x[0], 0.3f, rng);
      },
      {random_tensor({2, 3, 4, 5}, 56)});
}

// The fused residual sum is x + dropout(y) exactly (the same mask for a seed),
// and its gradient is g for x and dropout(g) for y.
TEST_CASE("grad: dropout_add with a fixed seed") {
  Tensor x = random_tensor({2, 3, 4, 5}, 57), y = random_tensor({2, 3, 4, 5}, 58);
  Rng fused(7), apart(7);
  CHECK(dropout_add(x, y, 0.3f, fused).to_vector() == (x + dropout(y, 0.3f, apart)).to_vector());
  check_gradients(
      [](const V& v) {
        Rng rng(7);
        return dropout_add(v[0], v[1], 0.3f, rng);
      },
      {x, y});
}

TEST_CASE("grad: cross_entropy with label smoothing and ignored targets") {
  Tensor targets = Tensor::from_ints({2, 1, 1, 4, 0, 3}, {2, 3});  // 1 is ignored
  for (float eps : {0.0f, 0.1f}) {
    CAPTURE(eps);
    check_gradients([=](const V& x) { return cross_entropy(x[0], targets, 1, eps); },
                    {random_tensor({2, 3, 5}, 57, -2, 2)});
  }
}

TEST_CASE("grad: sum_to and broadcast_to are adjoint") {
  check_gradients([](const V& x) { return sum_to(x[0], {3, 1}); }, {random_tensor({2, 3, 4}, 58)});
  check_gradients([](const V& x) { return broadcast_to(x[0], {2, 3, 4}); },
                  {random_tensor({3, 1}, 59)});
}

TEST_CASE("grad: a tensor used twice accumulates its gradient") {
  Tensor x = Tensor::from({1.0f, 2.0f, 3.0f}, {3}).set_requires_grad();
  // y = x*x + x: dy/dx = 2x + 1
  sum(x * x + x).backward();
  CHECK(x.grad().to_vector() == std::vector<float>{3.0f, 5.0f, 7.0f});
  // A second backward adds to the gradient, as in PyTorch, until zero_grad().
  sum(x * 2.0f).backward();
  CHECK(x.grad().to_vector() == std::vector<float>{5.0f, 7.0f, 9.0f});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  // A composite graph through several paths.
  check_gradients([](const V& v) { return tanh(v[0]) * v[0] + exp(v[0] * v[1]) / (v[1] * v[1] + 1.0f); },
                  {random_tensor({3, 4}, 60), random_tensor({4}, 61)});
}

TEST_CASE("grad: masked_softmax (scaled, broadcast padding and causal masks)") {
  Tensor pad = Tensor::from_ints({1, 1, 0, 1, 1, 1, 1, 0}, {2, 1, 1, 4});  // [B,1,1,S]
  check_gradients([=](const V& x) { return masked_softmax(x[0], pad, 0.5f); },
                  {random_tensor({2, 3, 4, 4}, 62, -2, 2)});
  Tensor causal = ge(reshape(arange(4), {4, 1}), reshape(arange(4), {1, 4}));  // [T,T]
  check_gradients([=](const V& x) { return masked_softmax(x[0], causal, 1.0f); },
                  {random_tensor({2, 4, 4}, 63, -2, 2)});
  check_gradients([](const V& x) { return masked_softmax(x[0], Tensor(), 2.0f); },
                  {random_tensor({3, 5}, 64, -1, 1)});
}

TEST_CASE("grad: layer_norm (unbiased std, eps added to std)") {
  check_gradients([](const V& x) { return layer_norm(x[0], x[1], x[2], 1e-6f); },
                  {random_tensor({2, 3, 6}, 65, -2, 2), random_tensor({6}, 66, 0.5f, 1.5f),
                   random_tensor({6}, 67)});
}

TEST_CASE("grad: bias_relu") {
  Tensor x = random_tensor({2, 3, 5}, 68, 0.2f, 1.0f);
  for (int64_t i = 0; i < x.numel(); i += 3) x.data()[i] = -x.data()[i] - 0.5f;
  check_gradients([](const V& v) { return bias_relu(v[0], v[1]); },
                  {x, random_tensor({5}, 69, -0.1f, 0.1f)});
}
