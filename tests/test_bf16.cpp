// Mixed precision (docs/13-bf16.md) at the level of tensors and ops: the bf16
// dtype, to_dtype, and what an autocast scope changes (matrix products, in
// both passes) and what it does not (everything else, the parameters).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <vector>

#include "bf16_levels.h"
#include "autograd/engine.h"
#include "autograd/init.h"
#include "autograd/kernels/gemm.h"
#include "autograd/ops.h"
#include "base/error.h"
#include "base/random.h"
#include "nn/layers.h"

using namespace sf;

namespace {

Tensor random_matrix(const Shape& shape, uint64_t seed) {
  Rng rng(seed);
  return uniform(shape, -1.0f, 1.0f, rng);
}

// x with every element rounded to bf16, as float32.
Tensor rounded(const Tensor& x) { return to_dtype(to_dtype(x, DType::BF16), DType::F32); }

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
TEST_CASE("bf16: where bf16 products are no faster, autocast keeps float32 operands and the product rounds them") {
  const kernels::Bf16Gemm original = kernels::bf16_gemm();
  kernels::set_bf16_gemm(kernels::Bf16Gemm::kPortable);
  REQUIRE_FALSE(cpu().multiplies_bf16_faster());
  // Sizes through both of the float32 GEMM's paths: few rows (B rounded as it
  // is loaded) and the blocked one (rounded where it is packed), A and B
  // transposed or not. (Named copies of the sizes: clang before 16 cannot
  // capture structured bindings in a lambda, and CAPTURE makes one.)
  for (const auto& sizes : {std::array<int64_t, 3>{3, 70, 9}, {67, 530, 45}}) {
    const int64_t m = sizes[0], k = sizes[1], n = sizes[2];
    for (bool trans_b : {false, true}) {
      CAPTURE(m);
      CAPTURE(trans_b);
      Tensor a = random_matrix({m, k}, 13).set_requires_grad();
      Tensor b = random_matrix(trans_b ? Shape{n, k} : Shape{k, n}, 14).set_requires_grad();
      Tensor g = random_matrix({m, n}, 15);
      Tensor product;
      {
        AutocastGuard autocast(DType::BF16);
        CHECK(autocast_operand(a).same_storage(a));  // no rounded copy
        product = matmul(a, b, {.trans_b = trans_b});
      }
      product.backward(g);
      // The bits of the float32 GEMM on rounded copies: the same products,
      // summed in the same order. The gradients too (g rounded as well).
      const MatmulOptions t{.trans_b = trans_b};
      CHECK(product.to_vector() == matmul(rounded(a), rounded(b), t).to_vector());
      CHECK(a.grad().to_vector() == matmul(rounded(g), rounded(b), {.trans_b = !trans_b}).to_vector());
      const Tensor want_b = trans_b ? matmul(rounded(g), rounded(a), {.trans_a = true})
                                    : matmul(rounded(a), rounded(g), {.trans_a = true});
      CHECK(b.grad().to_vector() == want_b.to_vector());
      CHECK(max_difference(product, matmul(a, b, t)) > 1e-4);  // not the float32 product
    }
  }
  kernels::set_bf16_gemm(original);
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
  testing::at_each_bf16_gemm([](kernels::Bf16Gemm) {
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
  testing::at_each_bf16_gemm([](kernels::Bf16Gemm) {
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

// Autocast changes matrix products only (docs/13-bf16.md): a forward and
// backward through every other op a Transformer runs (the embedding, positional
// encoding and its dropout, a pre-norm residual with bias_relu, attention's
// masked softmax and dropout_add with the scores formed without a matmul,
// layer norm, tanh, sigmoid, log_softmax, var, the label-smoothed cross-entropy
// with padding) gives the same bits inside an autocast scope as outside it:
// the loss, the output, and every gradient. An op that rounded its operands
// to bf16 would move them by up to 2^-9 of their size.
TEST_CASE("bf16: every op but matmul computes in float32 under autocast") {
  constexpr int64_t kVocab = 16, kDim = 16, kLen = 7;
  struct Outcome {
    std::vector<float> loss, out, grad_embedding, grad_alpha, grad_bias, grad_b1, grad_norm_alpha;
  };
  auto forward_and_backward = [&] {
    Rng init(21), noise(22), attention_noise(23);
    nn::InputEmbeddings embed(kDim, kVocab, init);
    nn::PositionalEncoding positions(kDim, kLen, 0.1f, noise);
    nn::ResidualConnection residual(kDim, 0.1f, noise);
    nn::LayerNormalization norm(kDim);
    for (nn::Module* m : std::initializer_list<nn::Module*>{&embed, &positions, &residual, &norm}) m->train();
    Tensor b1 = random_matrix({kDim}, 24).set_requires_grad();
    residual.norm.alpha.data()[3] = 1.5f;  // not all ones, so its gradient is not trivially the same
    Tensor ids = Tensor::from_ints({1, 5, 7, 9, 11, 13, 15, 2, 4, 6, 8, 0, 0, 0}, {2, kLen});  // 0: padding
    Tensor labels = Tensor::from_ints({5, 7, 9, 11, 13, 15, 3, 4, 6, 8, 3, 0, 0, 0}, {2, kLen});
    Tensor x = positions.forward(embed.forward(ids));
    x = residual.forward(x, [&](const Tensor& h) { return bias_relu(h, b1); });
    // Attention scores q.k without a product: sum over d of x[b,i,d] x[b,j,d].
    Tensor scores = sum(mul(unsqueeze(x, 2), unsqueeze(x, 1)), 3);  // [2, 7, 7]
    Tensor causal = Tensor::from_ints(std::vector<int32_t>(kLen * kLen, 1), {1, kLen, kLen});
    for (int64_t i = 0; i < kLen; ++i)
      for (int64_t j = i + 1; j < kLen; ++j) causal.ints()[i * kLen + j] = 0;
    Tensor weights = masked_softmax(scores, causal, 0.25f);
    Tensor context = sum(mul(unsqueeze(weights, 3), unsqueeze(x, 1)), 2);  // [2, 7, 16]
    Tensor y = norm.forward(dropout_add(x, tanh(context), 0.1f, attention_noise));
    Tensor logits = y + sigmoid(y) * 0.5f;
    Tensor loss = cross_entropy(logits, labels, /*ignore_index=*/0, /*label_smoothing=*/0.1f) +
                  mean(var(log_softmax(logits), -1)) * 0.01f + mean(softmax(logits)) * 0.1f;
    loss.backward();
    return Outcome{loss.to_vector(), y.to_vector(), embed.embedding.weight.grad().to_vector(),
                   norm.alpha.grad().to_vector(), norm.bias.grad().to_vector(), b1.grad().to_vector(),
                   residual.norm.alpha.grad().to_vector()};
  };
  // Bit patterns, so that -0 against 0 or a NaN would show too.
  auto bits = [](const std::vector<float>& v) {
    std::vector<uint32_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = std::bit_cast<uint32_t>(v[i]);
    return out;
  };
  const Outcome plain = forward_and_backward();
  testing::at_each_bf16_gemm([&](kernels::Bf16Gemm) {
    Outcome mixed;
    {
      AutocastGuard autocast(DType::BF16);
      mixed = forward_and_backward();
    }
    CHECK(bits(mixed.loss) == bits(plain.loss));
    CHECK(bits(mixed.out) == bits(plain.out));
    CHECK(bits(mixed.grad_embedding) == bits(plain.grad_embedding));
    CHECK(bits(mixed.grad_alpha) == bits(plain.grad_alpha));
    CHECK(bits(mixed.grad_bias) == bits(plain.grad_bias));
    CHECK(bits(mixed.grad_b1) == bits(plain.grad_b1));
    CHECK(bits(mixed.grad_norm_alpha) == bits(plain.grad_norm_alpha));
  });
  // The gradient reached the embedding through every op.
  CHECK(std::any_of(plain.grad_embedding.begin(), plain.grad_embedding.end(), [](float g) { return g != 0; }));
}

// The error bound of one product under autocast, element by element. Rounding
// to nearest bf16 (8 significant bits) moves an operand by at most u = 2^-9 of
// itself, so a product of rounded operands a(1+d1) b(1+d2) is off by at most
// (2u + u^2)|a||b| (and is exact in float32: 8 + 8 significant bits). The
// float32 sums of k products (ours and float32's, in whatever order or
// blocking) each add at most gamma_k = k 2^-24 / (1 - k 2^-24) of the sum of
// their products' magnitudes. So with S = (|op(A)| |op(B)|)_ij,
//   |C_bf16 - C_f32|_ij <= (2u + u^2) S + gamma_k ((1 + u)^2 + 1) S
//                        = 2^-8 (1 + 2^-10 + 2^8 gamma_k (2 + 2u + u^2)) S,
// 1.0102 * 2^-8 S at k = 301; c = 1.05 leaves room. Operands whose rows and
// columns span 2^-20 to 2^20 make the bound element-wise: a bound on the
// whole matrix's largest error would let the small elements be wrong.
TEST_CASE("bf16: under autocast each product element is within 1.05 * 2^-8 of (|A||B|)_ij of float32's, and differs from it") {
  constexpr double kC = 1.05;
  testing::at_each_bf16_gemm([&](kernels::Bf16Gemm) {
    uint64_t seed = 100;
    double worst = 0;  // the largest |C_bf16 - C_f32|_ij / (2^-8 S_ij) over every shape
    for (int64_t k : {300, 301})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          CAPTURE(k);
          CAPTURE(ta);
          CAPTURE(tb);
          const int64_t m = 37, n = 45;
          // op(A) [m, k], op(B) [k, n], stored transposed where asked.
          std::vector<double> opa(m * k), opb(k * n);
          Tensor a = random_matrix(ta ? Shape{k, m} : Shape{m, k}, ++seed);
          Tensor b = random_matrix(tb ? Shape{n, k} : Shape{k, n}, ++seed);
          float* pa = a.data();
          float* pb = b.data();
          for (int64_t i = 0; i < m; ++i)
            for (int64_t p = 0; p < k; ++p) {
              float& v = ta ? pa[p * m + i] : pa[i * k + p];
              v = std::ldexp(v, int(i % 9) * 5 - 20);  // row i of op(A) scaled by 2^-20 .. 2^20
              opa[i * k + p] = v;
            }
          for (int64_t p = 0; p < k; ++p)
            for (int64_t j = 0; j < n; ++j) {
              float& v = tb ? pb[j * k + p] : pb[p * n + j];
              v = std::ldexp(v, int(j % 7) * 6 - 18);  // column j of op(B) by 2^-18 .. 2^18
              opb[p * n + j] = v;
            }
          const MatmulOptions o{.trans_a = ta, .trans_b = tb};
          const std::vector<float> f32 = matmul(a, b, o).to_vector();
          std::vector<float> bf16;
          {
            AutocastGuard autocast(DType::BF16);
            bf16 = matmul(a, b, o).to_vector();
          }
          const double gamma = double(k) * 0x1p-24 / (1 - double(k) * 0x1p-24), u = 0x1p-9;
          REQUIRE((2 * u + u * u + gamma * (2 + 2 * u + u * u)) <= kC * 0x1p-8);  // the derivation above
          int64_t over = 0, differ = 0;
          double worst_here = 0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double s = 0;
              for (int64_t p = 0; p < k; ++p) s += std::fabs(opa[i * k + p] * opb[p * n + j]);
              const double error = std::fabs(double(bf16[i * n + j]) - double(f32[i * n + j]));
              over += error > kC * 0x1p-8 * s;
              differ += bf16[i * n + j] != f32[i * n + j];
              worst_here = std::max(worst_here, error / (0x1p-8 * s));
            }
          CHECK(over == 0);
          // The operands really were rounded: nearly every element moved (a
          // sum of k rounding errors is rarely exactly 0), by a visible part
          // of the bound (0.13 to 0.17 of it on these operands).
          CHECK(differ > m * n * 9 / 10);
          CHECK(worst_here > 0.05);
          worst = std::max(worst, worst_here);
        }
    MESSAGE("worst element: ", worst, " * 2^-8 (|A||B|)_ij, bound ", kC);
  });
}

TEST_CASE("bf16: a parameter is rounded once per autocast scope when nothing records gradients") {
  Tensor w = random_matrix({8, 8}, 9).set_requires_grad();
  Tensor x = random_matrix({2, 8}, 10);
  {
    NoGradGuard no_grad;
    AutocastGuard autocast(DType::BF16);
    Tensor first = autocast_operand(w), second = autocast_operand(w);
    // bf16 storage where bf16 products are faster, else w itself (the product rounds it).
    CHECK(first.dtype() == (cpu().multiplies_bf16_faster() ? DType::BF16 : DType::F32));
    CHECK(first.same_storage(second));  // decoding's weights: rounded once
    if (cpu().multiplies_bf16_faster())
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
  CHECK(autocast_operand(w).same_storage(autocast_operand(w)) == !cpu().multiplies_bf16_faster());
  sum(matmul(x, w)).backward();
  CHECK(w.grad().defined());
}

TEST_CASE("bf16: matmul of a float32 and a bf16 operand outside autocast is an error") {
  Tensor a = random_matrix({2, 3}, 11), b = to_dtype(random_matrix({3, 2}, 12), DType::BF16);
  CHECK_THROWS_WITH_AS(matmul(a, b), doctest::Contains("both float32 or both bfloat16"), InternalError);
  CHECK(matmul(to_dtype(a, DType::BF16), b).dtype() == DType::F32);
  CHECK_THROWS_AS(AutocastGuard{DType::I32}, InternalError);
}
