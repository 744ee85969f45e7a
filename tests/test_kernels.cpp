// Every fast kernel against the scalar reference, on awkward sizes (not
// multiples of the vector width or the GEMM blocks), with 1 and 2 threads.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/kernels/kernels.h"
#include "autograd/kernels/thread_pool.h"
#include "autograd/random.h"

using namespace sf;
using namespace sf::kernels;

namespace {

const int64_t kSizes[] = {1, 7, 17, 63, 65, 129};

std::vector<float> random_vector(int64_t n, uint64_t seed, float low = -2.0f, float high = 2.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(low, high);
  return v;
}

// Elementwise |fast - ref| <= atol + rtol |ref|; reports the first mismatch.
void check_same(const std::vector<float>& fast, const std::vector<float>& ref, float rtol = 1e-5f,
                float atol = 1e-6f) {
  REQUIRE(fast.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    if (!(std::fabs(fast[i] - ref[i]) <= atol + rtol * std::fabs(ref[i]))) {
      FAIL_CHECK("element ", i, ": fast ", double(fast[i]), " vs reference ", double(ref[i]), " (", fast[i] - ref[i], ")");
      return;
    }
}

// Runs `body` once with 1 thread and once with 2.
template <class F>
void with_threads(F body) {
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    set_num_threads(threads);
    body();
  }
  set_num_threads(0);
}

const HostTable& F = fast_table();
const HostTable& S = scalar_table();

}  // namespace

namespace {

// One batched product through the fast and the scalar table, compared. Every
// operand sits `pad` columns into a wider matrix, as a slice of a cache would,
// and B may be shared by the batch (stride 0), as a weight is. The whole of C
// is compared, so the padding columns must come back untouched.
struct GemmCheck {
  int64_t m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
  int64_t batch = 2, pad = 0;
  bool shared_b = false;
};

void check_gemm(const GemmCheck& g) {
  CAPTURE(g.m);
  CAPTURE(g.n);
  CAPTURE(g.k);
  CAPTURE(g.trans_a);
  CAPTURE(g.trans_b);
  int64_t lda = (g.trans_a ? g.m : g.k) + g.pad, ldb = (g.trans_b ? g.k : g.n) + g.pad, ldc = g.n + g.pad;
  int64_t size_a = (g.trans_a ? g.k : g.m) * lda, size_b = (g.trans_b ? g.n : g.k) * ldb, size_c = g.m * ldc;
  int64_t stride_b = g.shared_b ? 0 : size_b;
  std::vector<float> a = random_vector(size_a * g.batch, g.m + g.n),
                     b = random_vector(g.shared_b ? size_b : size_b * g.batch, g.k + 3);
  std::vector<float> cf = random_vector(size_c * g.batch, 7), cs = cf;
  for (const HostTable* table : {&F, &S})
    table->gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a.data(), lda, size_a, b.data(), ldb, stride_b,
                g.beta, (table == &F ? cf : cs).data(), ldc, size_c, g.batch);
  check_same(cf, cs, 1e-4f, 1e-4f);
}

}  // namespace

TEST_CASE("kernels: gemm, every layout, awkward sizes, alpha/beta, strided batches") {
  with_threads([] {
    for (int64_t m : kSizes)
      for (int64_t n : kSizes)
        for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{65}, int64_t{129}})
          for (int layout = 0; layout < 4; ++layout)
            check_gemm({m, n, k, bool(layout & 1), bool(layout & 2), 0.5f, layout == 3 ? 0.0f : 1.5f,
                        /*batch=*/2, /*pad=*/0, /*shared_b=*/true});
  });
}

TEST_CASE("kernels: gemm with few rows (decoding's path), padded leading dimensions") {
  with_threads([] {
    for (int64_t m : {1, 2, 3, 4, 5})
      for (int64_t n : {1, 63, 64, 130, 4000})
        for (int64_t k : {1, 17, 128})
          for (int layout = 0; layout < 4; ++layout)
            check_gemm({m, n, k, bool(layout & 1), bool(layout & 2), 1.0f, layout == 1 ? 0.0f : 0.5f,
                        /*batch=*/3, /*pad=*/3});
  });
}

TEST_CASE("kernels: gemm with beta 0 ignores NaN in C") {
  std::vector<float> a = random_vector(65 * 17, 1), b = random_vector(17 * 63, 2);
  std::vector<float> c(65 * 63, NAN);
  F.gemm(false, false, 65, 63, 17, 1.0f, a.data(), 17, 0, b.data(), 63, 0, 0.0f, c.data(), 63, 0, 1);
  for (float v : c) REQUIRE(std::isfinite(v));
}

TEST_CASE("kernels: binary ops and masked_fill with broadcasting") {
  with_threads([] {
    for (int64_t rows : kSizes)
      for (int64_t cols : kSizes) {
        CAPTURE(rows);
        CAPTURE(cols);
        int64_t shape[] = {rows, cols};
        std::vector<float> a = random_vector(rows * cols, 1), b = random_vector(rows * cols, 2, 0.5f, 2);
        // full-full, full-row (bias), column-full, full-scalar
        std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
            {{cols, 1}, {cols, 1}}, {{cols, 1}, {0, 1}}, {{1, 0}, {cols, 1}}, {{cols, 1}, {0, 0}}};
        for (auto& [sa, sb] : cases)
          for (Binary op : {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div}) {
            std::vector<float> of(rows * cols), os(rows * cols);
            F.binary(op, {a.data(), sa.data()}, {b.data(), sb.data()}, of.data(), shape, 2);
            S.binary(op, {a.data(), sa.data()}, {b.data(), sb.data()}, os.data(), shape, 2);
            check_same(of, os, 0, 0);
          }
        std::vector<int32_t> mask(cols);
        for (int64_t c = 0; c < cols; ++c) mask[c] = c % 3 == 0;
        int64_t sx[] = {cols, 1}, sm[] = {0, 1};
        std::vector<float> of(rows * cols), os(rows * cols);
        F.masked_fill({a.data(), sx}, {mask.data(), sm}, -1e9f, of.data(), shape, 2);
        S.masked_fill({a.data(), sx}, {mask.data(), sm}, -1e9f, os.data(), shape, 2);
        check_same(of, os, 0, 0);
      }
  });
}

TEST_CASE("kernels: unary ops") {
  with_threads([] {
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{129}, int64_t{40000}}) {
      std::vector<float> x = random_vector(n, 3, 0.1f, 4.0f);
      for (Unary op : {Unary::Neg, Unary::Exp, Unary::Log, Unary::Sqrt, Unary::Relu, Unary::Tanh,
                       Unary::Sigmoid, Unary::AddScalar, Unary::MulScalar, Unary::PowScalar,
                       Unary::RSubScalar, Unary::RDivScalar}) {
        CAPTURE(static_cast<int>(op));
        std::vector<float> yf(n), ys(n);
        F.unary(op, x.data(), yf.data(), n, 1.5f);
        S.unary(op, x.data(), ys.data(), n, 1.5f);
        check_same(yf, ys, 2e-6f, 0);
      }
    }
  });
}

TEST_CASE("kernels: reductions (sum_axis, max_axis, sum_to)") {
  with_threads([] {
    for (int64_t outer : kSizes)
      for (int64_t n : kSizes)
        for (int64_t inner : {int64_t{1}, int64_t{7}, int64_t{65}}) {
          CAPTURE(outer);
          CAPTURE(n);
          CAPTURE(inner);
          std::vector<float> x = random_vector(outer * n * inner, 4);
          std::vector<float> of(outer * inner), os(outer * inner);
          F.sum_axis(x.data(), outer, n, inner, of.data());
          S.sum_axis(x.data(), outer, n, inner, os.data());
          check_same(of, os, 1e-5f, 1e-5f);
          F.max_axis(x.data(), outer, n, inner, of.data(), nullptr);
          S.max_axis(x.data(), outer, n, inner, os.data(), nullptr);
          check_same(of, os, 0, 0);
        }
    for (int64_t rows : kSizes)
      for (int64_t cols : kSizes) {
        std::vector<float> x = random_vector(rows * cols, 5);
        int64_t shape[] = {rows, cols}, to_cols[] = {0, 1}, to_rows[] = {1, 0};
        for (const int64_t* strides : {to_cols, to_rows}) {
          int64_t size = strides == to_cols ? cols : rows;
          std::vector<float> of(size, 0.0f), os(size, 0.0f);
          F.sum_to(x.data(), shape, 2, of.data(), strides);
          S.sum_to(x.data(), shape, 2, os.data(), strides);
          check_same(of, os, 1e-5f, 1e-5f);
        }
      }
  });
}

TEST_CASE("kernels: softmax family, masked softmax and cross-entropy") {
  with_threads([] {
    for (int64_t rows : kSizes)
      for (int64_t cols : kSizes) {
        CAPTURE(rows);
        CAPTURE(cols);
        int64_t size = rows * cols;
        std::vector<float> x = random_vector(size, 6, -8, 8), dy = random_vector(size, 7);
        std::vector<float> yf(size), ys(size), df(size), ds(size);
        F.softmax(x.data(), yf.data(), rows, cols);
        S.softmax(x.data(), ys.data(), rows, cols);
        check_same(yf, ys, 1e-5f, 1e-7f);
        F.softmax_backward(ys.data(), dy.data(), df.data(), rows, cols);
        S.softmax_backward(ys.data(), dy.data(), ds.data(), rows, cols);
        check_same(df, ds, 1e-4f, 1e-6f);
        F.log_softmax(x.data(), yf.data(), rows, cols);
        S.log_softmax(x.data(), ys.data(), rows, cols);
        check_same(yf, ys, 1e-5f, 1e-5f);
        F.log_softmax_backward(ys.data(), dy.data(), df.data(), rows, cols);
        S.log_softmax_backward(ys.data(), dy.data(), ds.data(), rows, cols);
        check_same(df, ds, 1e-4f, 1e-5f);

        // Scores [2, rows, cols] with a key-padding mask [2, 1, cols].
        int64_t shape[] = {2, rows, cols}, mstrides[] = {cols, 0, 1};
        std::vector<float> s2 = random_vector(2 * size, 8, -4, 4), g2 = random_vector(2 * size, 9);
        std::vector<int32_t> mask(2 * cols);
        for (int64_t i = 0; i < 2 * cols; ++i) mask[i] = i % 5 != 2;
        std::vector<float> mf(2 * size), ms(2 * size), gf(2 * size), gs(2 * size);
        F.masked_softmax(s2.data(), {mask.data(), mstrides}, shape, 3, 0.3f, mf.data());
        S.masked_softmax(s2.data(), {mask.data(), mstrides}, shape, 3, 0.3f, ms.data());
        check_same(mf, ms, 1e-5f, 1e-7f);
        F.masked_softmax_backward(ms.data(), g2.data(), {mask.data(), mstrides}, shape, 3, 0.3f, gf.data());
        S.masked_softmax_backward(ms.data(), g2.data(), {mask.data(), mstrides}, shape, 3, 0.3f, gs.data());
        check_same(gf, gs, 1e-4f, 1e-6f);

        std::vector<int32_t> targets(rows);
        for (int64_t r = 0; r < rows; ++r) targets[r] = r % 4 == 1 ? 1 : static_cast<int32_t>((r * 7) % cols);
        std::vector<float> lf(rows), ls(rows), cf(rows), cs(rows), pf(size), ps(size);
        F.cross_entropy(x.data(), targets.data(), rows, cols, 1, 0.1f, lf.data(), cf.data(), pf.data());
        S.cross_entropy(x.data(), targets.data(), rows, cols, 1, 0.1f, ls.data(), cs.data(), ps.data());
        check_same(lf, ls, 1e-5f, 1e-5f);
        CHECK(cf == cs);
        const float scale = 0.25f;
        F.cross_entropy_backward(ps.data(), targets.data(), rows, cols, 1, 0.1f, &scale, df.data());
        S.cross_entropy_backward(ps.data(), targets.data(), rows, cols, 1, 0.1f, &scale, ds.data());
        check_same(df, ds, 1e-5f, 1e-7f);
      }
  });
}

TEST_CASE("kernels: layer norm, bias+relu, relu backward, dropout") {
  with_threads([] {
    for (int64_t rows : kSizes)
      for (int64_t cols : {int64_t{2}, int64_t{7}, int64_t{17}, int64_t{63}, int64_t{65}, int64_t{129}}) {
        CAPTURE(rows);
        CAPTURE(cols);
        int64_t size = rows * cols;
        std::vector<float> x = random_vector(size, 10, -3, 3), dy = random_vector(size, 11);
        std::vector<float> alpha = random_vector(cols, 12, 0.5f, 1.5f), bias = random_vector(cols, 13);
        std::vector<float> yf(size), ys(size), mf(rows), ms(rows), sf_(rows), ss(rows);
        F.layer_norm(x.data(), alpha.data(), bias.data(), rows, cols, 1e-6f, yf.data(), mf.data(), sf_.data());
        S.layer_norm(x.data(), alpha.data(), bias.data(), rows, cols, 1e-6f, ys.data(), ms.data(), ss.data());
        check_same(yf, ys, 1e-5f, 1e-5f);
        check_same(sf_, ss, 1e-5f, 1e-6f);
        std::vector<float> dxf(size), dxs(size), daf(cols), das(cols), dbf(cols), dbs(cols);
        F.layer_norm_backward(x.data(), alpha.data(), ms.data(), ss.data(), dy.data(), rows, cols, 1e-6f,
                              dxf.data(), daf.data(), dbf.data());
        S.layer_norm_backward(x.data(), alpha.data(), ms.data(), ss.data(), dy.data(), rows, cols, 1e-6f,
                              dxs.data(), das.data(), dbs.data());
        check_same(dxf, dxs, 1e-4f, 1e-5f);
        check_same(daf, das, 1e-4f, 1e-4f);
        check_same(dbf, dbs, 1e-4f, 1e-4f);

        F.bias_relu(x.data(), bias.data(), rows, cols, yf.data());
        S.bias_relu(x.data(), bias.data(), rows, cols, ys.data());
        check_same(yf, ys, 0, 0);
        F.relu_backward(ys.data(), dy.data(), dxf.data(), size);
        S.relu_backward(ys.data(), dy.data(), dxs.data(), size);
        check_same(dxf, dxs, 0, 0);
        F.dropout(x.data(), yf.data(), size, 1.25f, 99, 858993459u);
        S.dropout(x.data(), ys.data(), size, 1.25f, 99, 858993459u);
        check_same(yf, ys, 0, 0);
      }
  });
}

TEST_CASE("kernels: dot products and optimizer updates") {
  with_threads([] {
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{1025}, int64_t{70001}}) {
      CAPTURE(n);
      std::vector<float> a = random_vector(n, 16), b = random_vector(n, 17);
      CHECK(F.dot(a.data(), b.data(), n) == doctest::Approx(S.dot(a.data(), b.data(), n)).epsilon(1e-5));
      std::vector<float> g = random_vector(n, 18), pf = a, ps = a, mf(n, 0.1f), ms = mf, vf(n, 0.2f), vs = vf;
      F.adam_step(pf.data(), g.data(), mf.data(), vf.data(), n, 0.01f, 0.9f, 0.999f, 1e-8f, 0.05f, 0.01f, 0.001f);
      S.adam_step(ps.data(), g.data(), ms.data(), vs.data(), n, 0.01f, 0.9f, 0.999f, 1e-8f, 0.05f, 0.01f, 0.001f);
      check_same(pf, ps, 1e-5f, 1e-6f);
      check_same(mf, ms, 1e-5f, 1e-7f);  // m can cancel to near 0
      check_same(vf, vs, 1e-5f, 1e-7f);
      std::vector<float> bf(n, 0.3f), bs = bf;
      pf = ps = a;
      F.sgd_step(pf.data(), g.data(), bf.data(), n, 0.1f, 0.9f, 0.01f, true, false);
      S.sgd_step(ps.data(), g.data(), bs.data(), n, 0.1f, 0.9f, 0.01f, true, false);
      check_same(pf, ps, 0, 0);
      check_same(bf, bs, 0, 0);
    }
  });
}

TEST_CASE("kernels: data movement (permute, copy_rows, gather, scatter-add)") {
  with_threads([] {
    for (int64_t a : {int64_t{1}, int64_t{7}, int64_t{17}})
      for (int64_t d : {int64_t{1}, int64_t{63}, int64_t{65}}) {
        int64_t shape[] = {2, a, 3, d};
        int64_t size = 2 * a * 3 * d;
        std::vector<float> x = random_vector(size, 14);
        for (std::vector<int> perm : {std::vector<int>{0, 2, 1, 3}, std::vector<int>{3, 1, 0, 2}}) {
          std::vector<float> yf(size), ys(size);
          F.permute(x.data(), shape, perm.data(), 4, yf.data());
          S.permute(x.data(), shape, perm.data(), 4, ys.data());
          check_same(yf, ys, 0, 0);
        }
        std::vector<int32_t> ids = {2, 0, 2, 5, 1, 2, 0};
        int64_t n = static_cast<int64_t>(ids.size());
        std::vector<float> table = random_vector(6 * d, 15), of(n * d), os(n * d);
        F.gather_rows(table.data(), ids.data(), n, d, of.data());
        S.gather_rows(table.data(), ids.data(), n, d, os.data());
        check_same(of, os, 0, 0);
        std::vector<float> tf(6 * d, 0.0f), ts(6 * d, 0.0f);
        F.scatter_add_rows(of.data(), ids.data(), n, d, tf.data());
        S.scatter_add_rows(of.data(), ids.data(), n, d, ts.data());
        check_same(tf, ts, 1e-6f, 0);
        std::vector<float> cf(size, 0.0f), cs(size, 0.0f);
        F.copy_rows(x.data(), d * 4 * 3, cf.data(), d * 4 * 3, 2 * a, d * 4 * 2);
        S.copy_rows(x.data(), d * 4 * 3, cs.data(), d * 4 * 3, 2 * a, d * 4 * 2);
        check_same(cf, cs, 0, 0);
      }
  });
}
