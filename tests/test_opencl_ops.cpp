// Every op, forward and backward, on the OpenCL device against the CPU: the
// same inputs and output weights on both, then the outputs and every input's
// gradient must agree within 1e-4 relative. Backward runs twice, so gradients
// accumulating into an existing gradient are checked too. Built only with
// OPENCL=1 (suite "opencl"); skipped where the machine has no OpenCL device.
#ifdef SF_OPENCL
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "autograd/engine.h"
#include "autograd/init.h"
#include "autograd/ops.h"
#include "base/random.h"
#include "opencl_helpers.h"

using namespace sf;
using sf::testing::opencl_device;
using V = std::vector<Tensor>;
using Fn = std::function<Tensor(const V&)>;

namespace {

Tensor random_tensor(const Shape& shape, uint64_t seed, float low = -1.0f, float high = 1.0f) {
  Rng rng(seed);
  return uniform(shape, low, high, rng);
}

Tensor ints(const std::vector<int32_t>& values, const Shape& shape) {
  return Tensor::from_ints(values, shape);
}

void check_close(const std::vector<float>& device, const std::vector<float>& cpu, float rtol,
                 const char* what) {
  REQUIRE(device.size() == cpu.size());
  int bad = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    bool both_nan = std::isnan(device[i]) && std::isnan(cpu[i]);
    if (!both_nan && !(std::fabs(device[i] - cpu[i]) <= rtol * std::max(1.0f, std::fabs(cpu[i]))) &&
        ++bad <= 5)
      FAIL_CHECK(what, " element ", i, ": opencl ", device[i], " vs cpu ", cpu[i]);
  }
  CHECK_MESSAGE(bad == 0, what, ": ", bad, " of ", cpu.size(), " elements differ");
}

// Runs f on copies of `inputs` on the CPU and on the OpenCL device and compares
// outputs; for a float output, backward (twice) with the same weights and
// compares every float input's gradient.
void check_matches_cpu(const Fn& f, const V& inputs, float rtol = 1e-4f) {
  Device* device = opencl_device();
  REQUIRE(device);
  V on_cpu, on_device;
  for (const Tensor& x : inputs) {
    Tensor c = x.clone(), d = x.to(*device);
    if (x.dtype() == DType::F32) {
      c.set_requires_grad();
      d.set_requires_grad();
    }
    on_cpu.push_back(c);
    on_device.push_back(d);
  }
  Tensor out_cpu = f(on_cpu), out_device = f(on_device);
  CHECK(&out_device.device() == device);
  REQUIRE(out_device.shape() == out_cpu.shape());
  if (out_cpu.dtype() == DType::I32) {
    CHECK(out_device.to_int_vector() == out_cpu.to_int_vector());
    return;
  }
  check_close(out_device.to_vector(), out_cpu.to_vector(), rtol, "output");
  if (!out_cpu.requires_grad()) return;
  Rng rng(99);
  Tensor w = normal(out_cpu.shape(), 0.0f, 1.0f, rng);
  for (int pass = 0; pass < 2; ++pass) {
    (pass ? f(on_cpu) : out_cpu).backward(w);
    (pass ? f(on_device) : out_device).backward(w.to(*device));
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (on_cpu[i].grad().defined()) {
      REQUIRE(on_device[i].grad().defined());
      CHECK(&on_device[i].grad().device() == device);
      check_close(on_device[i].grad().to_vector(), on_cpu[i].grad().to_vector(), rtol, "gradient");
    }
}

}  // namespace

TEST_SUITE("opencl") {
  TEST_CASE("opencl ops: arithmetic with broadcasting") {
    SF_NEED_OPENCL();
    for (auto op : {Fn([](const V& x) { return x[0] + x[1]; }), Fn([](const V& x) { return x[0] - x[1]; }),
                    Fn([](const V& x) { return x[0] * x[1]; }), Fn([](const V& x) { return x[0] / x[1]; })}) {
      check_matches_cpu(op, {random_tensor({2, 3, 4, 5}, 1), random_tensor({3, 1, 5}, 2, 0.5f, 2.0f)});
      check_matches_cpu(op, {random_tensor({7, 1}, 3), random_tensor({17}, 4, 0.5f, 2.0f)});
      check_matches_cpu(op, {random_tensor({}, 5), random_tensor({65, 3}, 6, 0.5f, 2.0f)});
    }
  }

  TEST_CASE("opencl ops: unary and scalar ops") {
    SF_NEED_OPENCL();
    Tensor x = random_tensor({2, 3, 4, 5}, 7, 0.5f, 2.0f);
    for (auto op : {Fn([](const V& v) { return -v[0]; }), Fn([](const V& v) { return (v[0] + 2.0f) * 3.0f; }),
                    Fn([](const V& v) { return 2.0f - v[0]; }), Fn([](const V& v) { return 2.0f / v[0]; }),
                    Fn([](const V& v) { return pow(v[0], -0.5f); }), Fn([](const V& v) { return exp(v[0]); }),
                    Fn([](const V& v) { return log(v[0]); }), Fn([](const V& v) { return sqrt(v[0]); }),
                    Fn([](const V& v) { return relu(v[0] - 1.2f); }), Fn([](const V& v) { return tanh(v[0]); }),
                    Fn([](const V& v) { return sigmoid(v[0]); })})
      check_matches_cpu(op, {x});
  }

  TEST_CASE("opencl ops: fill_where") {
    SF_NEED_OPENCL();
    Tensor mask = ints({1, 0, 0, 1, 1}, {5});
    check_matches_cpu([&](const V& v) { return fill_where(v[0], mask, -3.0f); },
                      {random_tensor({2, 3, 4, 5}, 8)});
  }

  TEST_CASE("opencl ops: matmul, all layouts, batched and broadcast") {
    SF_NEED_OPENCL();
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        auto op = [=](const V& v) { return matmul(v[0], v[1], {.trans_a = ta, .trans_b = tb}); };
        for (auto [m, n, k] : {std::tuple{1, 1, 1}, {7, 17, 5}, {65, 63, 129}}) {
          Shape sa = ta ? Shape{k, m} : Shape{m, k}, sb = tb ? Shape{n, k} : Shape{k, n};
          check_matches_cpu(op, {random_tensor(sa, 9), random_tensor(sb, 10)}, 1e-4f * std::sqrt(k));
          Shape ba = sa, bb = sb;
          ba.insert(ba.begin(), {2, 3});
          bb.insert(bb.begin(), 3);  // broadcast over the first batch dim
          check_matches_cpu(op, {random_tensor(ba, 11), random_tensor(bb, 12)}, 1e-4f * std::sqrt(k));
        }
      }
    // Activations [B, T, K] times a weight [N, K]^T, as Linear does.
    check_matches_cpu([](const V& v) { return matmul(v[0], v[1], {.trans_b = true}); },
                      {random_tensor({3, 7, 33}, 13), random_tensor({17, 33}, 14)});
  }

  TEST_CASE("opencl ops: reductions") {
    SF_NEED_OPENCL();
    Tensor x = random_tensor({3, 4, 5, 7}, 15);
    for (int axis : {0, 2, -1}) {
      check_matches_cpu([=](const V& v) { return sum(v[0], axis, axis == 2); }, {x});
      check_matches_cpu([=](const V& v) { return mean(v[0], axis); }, {x});
      check_matches_cpu([=](const V& v) { return max(v[0], axis); }, {x});
      check_matches_cpu([=](const V& v) { return var(v[0], axis); }, {x});
      check_matches_cpu([=](const V& v) { return stddev(v[0], axis, true); }, {x});
    }
    check_matches_cpu([](const V& v) { return sum(v[0]); }, {x});
    check_matches_cpu([](const V& v) { return sum_to(v[0], {4, 1, 7}); }, {x});
  }

  TEST_CASE("opencl ops: softmax, log_softmax, masked_softmax") {
    SF_NEED_OPENCL();
    for (int64_t cols : {1, 7, 65, 129, 4099}) {  // 4099: rows of many pieces (launch.h: pieces)
      Tensor x = random_tensor({3, 5, cols}, 16, -4.0f, 4.0f);
      check_matches_cpu([](const V& v) { return softmax(v[0]); }, {x});
      check_matches_cpu([](const V& v) { return log_softmax(v[0]); }, {x});
    }
    // Attention scores [B, h, q, k] under a padding mask [B, 1, 1, k] and a causal one.
    std::vector<int32_t> keep(2 * 9, 1);
    for (int j = 6; j < 9; ++j) keep[9 + j] = 0;
    Tensor padding = ints(keep, {2, 1, 1, 9});
    std::vector<int32_t> lower(9 * 9);
    for (int i = 0; i < 9; ++i)
      for (int j = 0; j < 9; ++j) lower[i * 9 + j] = j <= i;
    Tensor causal = ints(lower, {1, 1, 9, 9});
    Tensor scores = random_tensor({2, 3, 9, 9}, 17, -3.0f, 3.0f);
    for (const Tensor& mask : {padding, causal, Tensor()})
      check_matches_cpu([&](const V& v) { return masked_softmax(v[0], mask, 0.35f); }, {scores});
  }

  TEST_CASE("opencl ops: layer_norm and bias_relu") {
    SF_NEED_OPENCL();
    for (int64_t cols : {2, 7, 64, 129, 1000}) {
      check_matches_cpu([](const V& v) { return layer_norm(v[0], v[1], v[2], 1e-6f); },
                        {random_tensor({3, 17, cols}, 18, -2.0f, 2.0f), random_tensor({cols}, 19),
                         random_tensor({cols}, 20)});
      check_matches_cpu([](const V& v) { return bias_relu(v[0], v[1]); },
                        {random_tensor({17, cols}, 21), random_tensor({cols}, 22)});
    }
  }

  TEST_CASE("opencl ops: cross_entropy with label smoothing and ignored rows") {
    SF_NEED_OPENCL();
    std::vector<int32_t> targets(3 * 7);
    for (size_t i = 0; i < targets.size(); ++i) targets[i] = i % 4 == 1 ? 1 : static_cast<int32_t>(i * 5 % 65);
    Tensor t = ints(targets, {3, 7});
    for (float eps : {0.0f, 0.1f})
      check_matches_cpu([&](const V& v) { return cross_entropy(v[0], t, 1, eps); },
                        {random_tensor({3, 7, 65}, 23, -5.0f, 5.0f)});
  }

  TEST_CASE("opencl ops: shapes") {
    SF_NEED_OPENCL();
    Tensor x = random_tensor({2, 3, 4, 5}, 24);
    check_matches_cpu([](const V& v) { return reshape(v[0], {6, -1}); }, {x});
    check_matches_cpu([](const V& v) { return transpose(v[0], 1, 2); }, {x});
    check_matches_cpu([](const V& v) { return permute(v[0], {3, 0, 2, 1}); }, {x});
    check_matches_cpu([](const V& v) { return slice(v[0], 2, 1, 3); }, {x});
    check_matches_cpu([](const V& v) { return concat({v[0], v[1]}, 1); }, {x, random_tensor({2, 7, 4, 5}, 25)});
    check_matches_cpu([](const V& v) { return concat({v[0], v[1]}, -1); }, {x, random_tensor({2, 3, 4, 1}, 26)});
  }

  TEST_CASE("opencl ops: embedding, dropout and dropout_add (the same masks as the CPU for a seed)") {
    SF_NEED_OPENCL();
    Tensor ids = ints({3, 0, 9, 3, 3, 7}, {2, 3});
    check_matches_cpu([&](const V& v) { return embedding(v[0], ids) * 2.0f; },
                      {random_tensor({10, 17}, 27)});
    check_matches_cpu([](const V& v) {
      Rng rng(5);
      return dropout(v[0], 0.3f, rng);
    }, {random_tensor({7, 129}, 28)}, 0.0f);  // bit-identical
    check_matches_cpu([](const V& v) {
      Rng rng(5);
      return dropout_add(v[0], v[1], 0.3f, rng);
    }, {random_tensor({7, 129}, 31), random_tensor({7, 129}, 32)}, 0.0f);
  }

  TEST_CASE("opencl ops: argmax, topk, comparisons") {
    SF_NEED_OPENCL();
    Tensor x = random_tensor({5, 65}, 29);
    check_matches_cpu([](const V& v) { return argmax(v[0]); }, {x});
    check_matches_cpu([](const V& v) { return topk(v[0], 4).first; }, {x});
    check_matches_cpu([](const V& v) { return topk(v[0], 4).second; }, {x});
    check_matches_cpu([](const V& v) { return lt(v[0], v[1]); }, {x, random_tensor({65}, 30)});
    check_matches_cpu([](const V& v) { return logical_and(v[0], v[1]); },
                      {ints({0, 1, 2, 0, 5, 1}, {2, 3}), ints({1, 0, 3}, {3})});
  }

  TEST_CASE("opencl ops: operands on different devices are an error") {
    SF_NEED_OPENCL();
    Device* device = opencl_device();
    Tensor a = random_tensor({3}, 31), b = a.to(*device);
    CHECK_THROWS_WITH_AS(a + b, doctest::Contains("different devices"), InternalError);
    CHECK_THROWS_WITH_AS(b.data(), doctest::Contains("lives on opencl"), InternalError);
  }
}
#endif  // SF_OPENCL
