// Mixed precision (docs/13-bf16.md) at the level of tensors and ops: the bf16
// dtype, to_dtype, and what an autocast scope changes (matrix products, in
// both passes) and what it does not (everything else, the parameters).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "autograd/engine.h"
#include "autograd/init.h"
#include "autograd/kernels/gemm.h"
#include "autograd/ops.h"
#include "base/error.h"
#include "base/random.h"

using namespace sf;

namespace {

Tensor random_matrix(const Shape& shape, uint64_t seed) {
  Rng rng(seed);
  return uniform(shape, -1.0f, 1.0f, rng);
}

// x with every element rounded to bf16, as float32.
Tensor rounded(const Tensor& x) { return to_dtype(to_dtype(x, DType::BF16), DType::F32); }

// Runs `body` at each bf16 GEMM level this CPU has: bf16 tensors multiplied
// by a faster bf16 product (AVX512-BF16, AMX), and the portable level's bf16
// values kept in float32 (ops.h: autocast). Then restores the default.
template <class F>
void at_each_bf16_level(F body) {
  const kernels::Bf16Gemm original = kernels::bf16_gemm();
  for (kernels::Bf16Gemm level : kernels::kBf16Gemms) {
    if (!kernels::set_bf16_gemm(level)) continue;
    CAPTURE(kernels::to_string(level));
    body();
  }
  kernels::set_bf16_gemm(original);
}

double max_difference(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_vector(), y = b.to_vector();
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(double(x[i]) - y[i]));
  return worst;
}

}  // namespace

TEST_CASE("bf16: a tensor of 2-byte elements; to_dtype rounds to nearest even and widens exactly") {
  Tensor x = Tensor::from({1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f, 3.14159265f, 1e-40f, INFINITY}, {7});
  Tensor h = to_dtype(x, DType::BF16);
  CHECK(h.dtype() == DType::BF16);
  CHECK(element_bytes(h.dtype()) == 2);
  CHECK(std::string(to_string(h.dtype())) == "bfloat16");
  // Ties go to the even mantissa; pi keeps 8 significant bits (3.140625);
  // a subnormal float becomes the nearest bf16 subnormal (1e-40 -> 2^-133, 9.2e-41).
  const std::vector<float> want{1.0f, 1.0f, 1.0f + 0x1p-6f, -2.5f, 3.140625f, 0x1p-133f, INFINITY};
  CHECK(h.to_vector() == want);
  CHECK(to_dtype(h, DType::F32).to_vector() == want);
  CHECK(to_dtype(x, DType::F32).same_storage(x));  // already float32: x itself
  CHECK(Tensor::zeros({3}, DType::BF16).to_vector() == std::vector<float>(3, 0.0f));
  CHECK_THROWS_AS(h.data(), InternalError);
  CHECK_THROWS_AS(to_dtype(Tensor::from_ints({1}, {1}), DType::BF16), InternalError);
  CHECK_THROWS_AS(Tensor::zeros({2}, DType::BF16).set_requires_grad(), InternalError);
  // Shape ops copy bf16 rows by their 2-byte width.
  CHECK(concat({h, h}, 0).to_vector().size() == 14);
  CHECK(slice(h, 0, 2, 5).to_vector() == std::vector<float>(want.begin() + 2, want.begin() + 5));
}

// Beam search reorders the decoder's cached keys and values, bf16 under
// autocast, by the rows of the surviving hypotheses.
TEST_CASE("bf16: round_to_bf16 rounds as to_dtype does, bit for bit, and keeps float32; the gradient passes") {
  std::vector<float> values = random_matrix({1000}, 11).to_vector();
  for (float v : {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -0.0f, 1e-40f, -1e-45f, 3.4e38f, INFINITY, -INFINITY, NAN})
    values.push_back(v);
  Tensor x = Tensor::from(values, {static_cast<int64_t>(values.size())}).set_requires_grad();
  Tensor r = round_to_bf16(x);
  CHECK(r.dtype() == DType::F32);
  const std::vector<float> got = r.to_vector(), want = rounded(x).to_vector();
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]), values[i]);
  Tensor w = random_matrix({static_cast<int64_t>(values.size())}, 12);
  sum(mul(r, w)).backward();
  CHECK(x.grad().to_vector() == w.to_vector());
}

TEST_CASE("bf16: index_select picks the rows of a bf16 tensor bit for bit, as bf16") {
  Tensor x = to_dtype(random_matrix({4, 3, 5}, 3), DType::BF16);
  Tensor rows = Tensor::from_ints({2, 0, 2, 3, 1}, {5});
  Tensor picked = index_select(x, rows);
  CHECK(picked.dtype() == DType::BF16);
  CHECK(picked.shape() == Shape{5, 3, 5});
  std::vector<float> all = x.to_vector(), want;
  for (int32_t r : rows.to_int_vector()) want.insert(want.end(), all.begin() + r * 15, all.begin() + (r + 1) * 15);
  CHECK(picked.to_vector() == want);
}

TEST_CASE("bf16: to_dtype passes the gradient through, in float32") {
  Tensor x = random_matrix({3, 4}, 1).set_requires_grad();
  Tensor w = random_matrix({3, 4}, 2);
  Tensor y = to_dtype(x, DType::BF16);
  // The bf16 tensor's gradient is float32, as every gradient is here.
  Tensor loss = sum(mul(to_dtype(y, DType::F32), w));
  loss.backward();
  CHECK(x.grad().dtype() == DType::F32);
  CHECK(x.grad().to_vector() == w.to_vector());
}

TEST_CASE("bf16: under autocast matmul multiplies the bf16-rounded operands and accumulates in float32") {
  at_each_bf16_level([] {
    Tensor a = random_matrix({5, 70}, 3), b = random_matrix({70, 9}, 4);
    Tensor exact = matmul(a, b), of_rounded = matmul(rounded(a), rounded(b));
    Tensor mixed;
    {
      AutocastGuard autocast(DType::BF16);
      CHECK(autocast_dtype() == DType::BF16);
      mixed = matmul(a, b);
    }
    CHECK(autocast_dtype() == DType::F32);
    CHECK(mixed.dtype() == DType::F32);
    // The same exact products summed in float32 (only the order of the sums
    // may differ); not the float32 product, which differs by bf16 rounding.
    CHECK(max_difference(mixed, of_rounded) < 1e-5);
    CHECK(max_difference(mixed, exact) > 1e-4);
    CHECK(max_difference(mixed, exact) < 0.05);
  });
}

TEST_CASE("bf16: the backward's products round the output gradient and use the saved bf16 operands") {
  at_each_bf16_level([] {
    Tensor a = random_matrix({6, 33}, 5).set_requires_grad(), b = random_matrix({33, 8}, 6).set_requires_grad();
    Tensor g = random_matrix({6, 8}, 7);
    {
      AutocastGuard autocast(DType::BF16);
      matmul(a, b).backward(g);
    }
    // dA = g B^T and dB = A^T g, each from bf16 operands.
    Tensor want_a = matmul(rounded(g), rounded(b), {.trans_b = true});
    Tensor want_b = matmul(rounded(a), rounded(g), {.trans_a = true});
    CHECK(max_difference(a.grad(), want_a) < 1e-5);
    CHECK(max_difference(b.grad(), want_b) < 1e-5);
    CHECK(max_difference(a.grad(), matmul(g, b, {.trans_b = true})) > 1e-4);
    // The parameters themselves stay float32.
    CHECK(a.dtype() == DType::F32);
    CHECK(a.grad().dtype() == DType::F32);
  });
}

TEST_CASE("bf16: every op but matmul computes in float32 under autocast") {
  Tensor x = random_matrix({4, 10}, 8), keep = Tensor::from_ints(std::vector<int32_t>(40, 1), {4, 10});
  Tensor plain = layer_norm(softmax(exp(x) + x), Tensor::ones({10}), Tensor::zeros({10}), 1e-6f);
  AutocastGuard autocast(DType::BF16);
  CHECK(max_difference(layer_norm(softmax(exp(x) + x), Tensor::ones({10}), Tensor::zeros({10}), 1e-6f), plain) ==
        0.0);
}

TEST_CASE("bf16: a parameter is rounded once per autocast scope when nothing records gradients") {
  Tensor w = random_matrix({8, 8}, 9).set_requires_grad();
  Tensor x = random_matrix({2, 8}, 10);
  {
    NoGradGuard no_grad;
    AutocastGuard autocast(DType::BF16);
    Tensor first = autocast_operand(w), second = autocast_operand(w);
    // bf16 storage where bf16 products are faster, else bf16 values in float32.
    CHECK(first.dtype() == (cpu().multiplies_bf16_faster() ? DType::BF16 : DType::F32));
    CHECK(first.same_storage(second));  // decoding's weights: rounded once
    CHECK_FALSE(autocast_operand(x).same_storage(autocast_operand(x)));  // not a parameter: each time
    {
      AutocastGuard inner(DType::BF16);
      CHECK(autocast_operand(w).same_storage(first));  // an inner scope shares the outer one's copies
    }
    CHECK(autocast_operand(w).same_storage(first));
  }
  {
    NoGradGuard no_grad;
    AutocastGuard autocast(DType::BF16);
    w.data()[0] += 1.0f;  // a new scope sees the parameter as it is now
    CHECK(autocast_operand(w).to_vector()[0] == doctest::Approx(w.data()[0]).epsilon(1e-2));
  }
  // Recording: a fresh copy each time, so the gradient reaches the parameter.
  AutocastGuard autocast(DType::BF16);
  CHECK_FALSE(autocast_operand(w).same_storage(autocast_operand(w)));
  sum(matmul(x, w)).backward();
  CHECK(w.grad().defined());
}

TEST_CASE("bf16: matmul of a float32 and a bf16 operand outside autocast is an error") {
  Tensor a = random_matrix({2, 3}, 11), b = to_dtype(random_matrix({3, 2}, 12), DType::BF16);
  CHECK_THROWS_WITH_AS(matmul(a, b), doctest::Contains("both float32 or both bfloat16"), InternalError);
  CHECK(matmul(to_dtype(a, DType::BF16), b).dtype() == DType::F32);
  CHECK_THROWS_AS(AutocastGuard(DType::I32), InternalError);
}
