// Every fast kernel against the scalar reference, on awkward sizes (not
// multiples of the vector width or the GEMM blocks), with 1 and 2 threads, and
// on edge values: NaN, infinities, e^x overflowing and underflowing, very
// negative logits, empty inputs. Where the fast table has no code of its own
// (its entry, or the case at hand, runs the reference's code), both tables are
// checked against values computed here instead, so that no case compares the
// reference with itself.
//
// The vector width is fixed at compile time (simd.h), so this file is also
// built with the kernel sources once per SIMD level, AVX-512, AVX2 + FMA and
// portable, into test binaries of their own (the Makefile's "CPU kernels at
// every SIMD level"); it uses nothing else of the library.
#include <doctest/doctest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "autograd/kernels/gemm.h"
#include "autograd/kernels/kernels.h"
#include "base/error.h"
#include "kernel_checks.h"
#include "skip.h"
#include "autograd/kernels/simd.h"
#include "autograd/kernels/thread_pool.h"

using namespace sf;
using namespace sf::kernels;

namespace {

const int64_t kSizes[] = {1, 7, 17, 63, 65, 129};

// Uniform floats in [low, high) from a fixed seed (splitmix64).
std::vector<float> random_vector(int64_t n, uint64_t seed, float low = -2.0f, float high = 2.0f) {
  std::vector<float> v(n);
  for (float& x : v) {
    uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x = low + (high - low) * static_cast<float>(z >> 40) * 0x1.0p-24f;
  }
  return v;
}

// Elementwise |got - want| <= atol + rtol |want|, or both the same infinity,
// or both NaN; reports the first mismatch. `want` is the reference table's
// result, or values computed in the test.
void check_same(const std::vector<float>& got, const std::vector<float>& want, float rtol = 1e-5f,
                float atol = 1e-6f) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
    if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      FAIL_CHECK("element ", i, ": got ", double(got[i]), ", want ", double(want[i]), " (", got[i] - want[i], ")");
      return;
    }
  }
}

// The values that trip vectorised code: NaN, infinities, arguments where e^x
// overflows (> 88.72) or underflows to subnormals and to 0 (< -87.3, -103.97),
// huge and subnormal magnitudes, signed zeros.
const float kEdges[] = {NAN,    INFINITY, -INFINITY, 88.5f, 89.0f, -87.5f, -95.0f, -104.0f,
                        200.0f, -200.0f,  1e30f,     -1e30f, 0.0f, -0.0f, 1e-40f};
constexpr int kNumEdges = sizeof(kEdges) / sizeof(kEdges[0]);

// A random vector with the edge values spread through it: at size 129 each
// lands both in whole vectors and in scalar tails, at every vector width.
std::vector<float> with_edges(int64_t n, uint64_t seed, float low = -2.0f, float high = 2.0f) {
  std::vector<float> v = random_vector(n, seed, low, high);
  for (int64_t i = 0; i < n; i += 5) v[i] = kEdges[(i / 5 + seed) % kNumEdges];
  return v;
}

// A [rows, cols] matrix of random values where row r holds the edge value
// r % (kNumEdges + 1) at column (3 r) % cols (the last of each cycle stays
// clean): one per row, so that sums never mix two huge values, and a NaN or
// infinity shows whether it leaks into other rows. Column 0 is also covered,
// where a reference loop starts its maximum.
std::vector<float> edge_rows(int64_t rows, int64_t cols, uint64_t seed) {
  std::vector<float> x = random_vector(rows * cols, seed);
  for (int64_t r = 0; r < rows; ++r)
    if (r % (kNumEdges + 1) < kNumEdges) x[r * cols + (3 * r) % cols] = kEdges[r % (kNumEdges + 1)];
  return x;
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
  // Infinities and NaN sprinkled sparsely through A and B, so that some rows
  // and columns of C are inf or NaN and the others stay finite.
  bool edges = false;
  // Through gemm_bf16: A and B are rounded to bf16 first, so the reference is
  // the float64 product of the same bf16 values.
  bool bf16 = false;
};

std::vector<bf16> rounded_to_bf16(const std::vector<float>& x) {
  std::vector<bf16> out(x.size());
  S.float_to_bf16(x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

// The operands of a GemmCheck, and C before the product.
struct GemmOperands {
  int64_t lda, ldb, ldc, size_a, size_c, stride_b;
  std::vector<float> a, b, c;
  std::vector<bf16> a16, b16;
};

GemmOperands gemm_operands(const GemmCheck& g) {
  GemmOperands o;
  o.lda = (g.trans_a ? g.m : g.k) + g.pad;
  o.ldb = (g.trans_b ? g.k : g.n) + g.pad;
  o.ldc = g.n + g.pad;
  o.size_a = (g.trans_a ? g.k : g.m) * o.lda;
  o.size_c = g.m * o.ldc;
  const int64_t size_b = (g.trans_b ? g.n : g.k) * o.ldb;
  o.stride_b = g.shared_b ? 0 : size_b;
  o.a = random_vector(o.size_a * g.batch, g.m + g.n);
  o.b = random_vector(g.shared_b ? size_b : size_b * g.batch, g.k + 3);
  if (g.edges) {
    const float specials[] = {INFINITY, -INFINITY, NAN};
    for (size_t i = 5; i < o.a.size(); i += 331) o.a[i] = specials[i % 3];
    for (size_t i = 7; i < o.b.size(); i += 313) o.b[i] = specials[i % 3];
  }
  o.c = random_vector(o.size_c * g.batch, 7);
  if (g.bf16) {
    o.a16 = rounded_to_bf16(o.a);
    o.b16 = rounded_to_bf16(o.b);
  }
  return o;
}

// C after the product through `table`.
std::vector<float> gemm_result(const HostTable& table, const GemmCheck& g, const GemmOperands& o) {
  std::vector<float> c = o.c;
  if (g.bf16)
    table.gemm_bf16(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, o.a16.data(), o.lda, o.size_a, o.b16.data(),
                    o.ldb, o.stride_b, g.beta, c.data(), o.ldc, o.size_c, g.batch);
  else
    table.gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, o.a.data(), o.lda, o.size_a, o.b.data(), o.ldb,
               o.stride_b, g.beta, c.data(), o.ldc, o.size_c, g.batch);
  return c;
}

// Float32 sums of up to k products of magnitude <= 4: the bound grows with k.
float gemm_atol(int64_t k) { return 1e-4f * std::max(1.0f, std::sqrt(k / 64.0f)); }

// For a failure's report.
std::string gemm_shape(const GemmCheck& g) {
  return "m " + std::to_string(g.m) + ", n " + std::to_string(g.n) + ", k " + std::to_string(g.k) + ", trans_a " +
         std::to_string(g.trans_a) + ", trans_b " + std::to_string(g.trans_b) + ", batch " + std::to_string(g.batch);
}

void check_gemm(const GemmCheck& g) {
  INFO(gemm_shape(g));
  const GemmOperands o = gemm_operands(g);
  check_same(gemm_result(F, g, o), gemm_result(S, g, o), 1e-4f, gemm_atol(g.k));
}

}  // namespace

namespace {

// gemm, every layout, awkward sizes, alpha/beta, strided batches.
void check_gemm() {
  with_threads([] {
    for (int64_t m : kSizes)
      for (int64_t n : kSizes)
        for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{65}, int64_t{129}})
          for (int layout = 0; layout < 4; ++layout)
            check_gemm({m, n, k, bool(layout & 1), bool(layout & 2), 0.5f, layout == 3 ? 0.0f : 1.5f,
                        /*batch=*/2, /*pad=*/0, /*shared_b=*/true});
  });
}

// Runs `body` at each implementation of the bf16 GEMM this CPU supports (a
// level it lacks is reported, not run), then restores the default.
template <class F>
void at_each_bf16_gemm(F body) {
  const Bf16Gemm original = bf16_gemm();
  for (Bf16Gemm level : kBf16Gemms) {
    if (!set_bf16_gemm(level)) {
      MESSAGE("bf16 gemm level ", to_string(level), ": not supported by this CPU, not run");
      continue;
    }
    const std::string name = to_string(level);
    CAPTURE(name);
    body();
  }
  set_bf16_gemm(original);
}

// gemm_bf16 at every level: every layout, awkward sizes, alpha/beta, strided
// and shared batches, k odd and past the K blocking (1024), on 1 and 2 threads.
void check_gemm_bf16() {
  at_each_bf16_gemm([] {
    with_threads([] {
      for (int64_t m : kSizes)
        for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{65}, int64_t{129}})
          for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{17}, int64_t{64}, int64_t{129}})
            for (int layout = 0; layout < 4; ++layout) {
              GemmCheck g{m, n, k, bool(layout & 1), bool(layout & 2), 0.5f, layout == 3 ? 0.0f : 1.5f,
                          /*batch=*/2, /*pad=*/layout, /*shared_b=*/layout == 1};
              g.bf16 = true;
              check_gemm(g);
            }
      for (int64_t k : {int64_t{1024}, int64_t{1031}, int64_t{2049}})
        for (int layout = 0; layout < 4; ++layout) {
          GemmCheck g{37, 70, k, bool(layout & 1), bool(layout & 2), 1.0f, 0.0f, /*batch=*/3, /*pad=*/1};
          g.bf16 = true;
          check_gemm(g);
        }
    });
  });
}

TEST_CASE("kernels: bf16 gemm with infinities and NaN in A and B, at every level") {
  at_each_bf16_gemm([] {
    with_threads([] {
      for (int64_t m : {3, 17, 65})
        for (int64_t n : {7, 65})
          for (int64_t k : {17, 130})
            for (int layout = 0; layout < 4; ++layout) {
              GemmCheck g{m, n, k, bool(layout & 1), bool(layout & 2), 1.0f, 0.5f};
              g.edges = g.bf16 = true;
              check_gemm(g);
            }
    });
  });
}

// The AMX level on its own: sizes on both sides of its 32 x 32 blocks, its
// 16 x 16 tiles and its steps of 32 along k (k padded with zero pairs), k past
// its K block (512), every layout, on 1 and 2 threads. It is also the default
// wherever the CPU and the kernel allow it.
TEST_CASE("kernels: bf16 gemm at the AMX level, around its tiles and blocks") {
  if (!cpu_supports(Bf16Gemm::kAmxBf16)) SF_SKIP("this CPU has no AMX-BF16 (amx_bf16, amx_tile)");
  CHECK(bf16_gemm() == Bf16Gemm::kAmxBf16);
  const Bf16Gemm original = bf16_gemm();
  REQUIRE(set_bf16_gemm(Bf16Gemm::kAmxBf16));
  with_threads([] {
    for (int64_t m : {1, 16, 31, 33, 64})
      for (int64_t n : {15, 32, 47})
        for (int64_t k : {1, 31, 32, 33, 513})
          for (int layout = 0; layout < 4; ++layout) {
            GemmCheck g{m, n, k, bool(layout & 1), bool(layout & 2), 0.5f, layout == 2 ? 0.0f : 1.5f,
                        /*batch=*/2, /*pad=*/layout, /*shared_b=*/layout == 3};
            g.bf16 = true;
            check_gemm(g);
          }
  });
  set_bf16_gemm(original);
}

// Subnormal bf16 operands (below 2^-126): the portable level multiplies them
// exactly, while VDPBF16PS reads them as zero (its definition: denormal inputs
// are zero, whatever MXCSR says). Either way a subnormal's products are below
// 2^-126 times the other operand, so C matches the reference to within that.
TEST_CASE("kernels: bf16 gemm with subnormal operands, at every level") {
  at_each_bf16_gemm([] {
    const int64_t m = 9, n = 33, k = 19;
    std::vector<float> a = random_vector(m * k, 5), b = random_vector(k * n, 6);
    for (size_t i = 0; i < a.size(); i += 3) a[i] = (i % 2 ? 1 : -1) * 0x1.8p-130f;
    for (size_t i = 1; i < b.size(); i += 4) b[i] = 0x1p-133f;
    const std::vector<bf16> a16 = rounded_to_bf16(a), b16 = rounded_to_bf16(b);
    CHECK(std::fabs(to_float(a16[0])) == 0x1.8p-130f);  // a subnormal bf16, exactly
    std::vector<float> got(m * n), want(m * n);
    F.gemm_bf16(false, false, m, n, k, 1.0f, a16.data(), k, 0, b16.data(), n, 0, 0.0f, got.data(), n, 0, 1);
    S.gemm_bf16(false, false, m, n, k, 1.0f, a16.data(), k, 0, b16.data(), n, 0, 0.0f, want.data(), n, 0, 1);
    check_same(got, want, 1e-5f, 1e-36f);
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

TEST_CASE("kernels: gemm with infinities and NaN in A and B") {
  with_threads([] {
    for (int64_t m : {3, 17, 65})
      for (int64_t n : {7, 65, 129})
        for (int64_t k : {17, 129})
          for (int layout = 0; layout < 4; ++layout) {
            GemmCheck g{m, n, k, bool(layout & 1), bool(layout & 2), 1.0f, 0.5f};
            g.edges = true;
            check_gemm(g);
          }
  });
}

// rows_view, worked out by hand: what it merges, what it keeps apart.
TEST_CASE("kernels: rows_view merges the dims every operand walks as one") {
  // [2, 3, 4] + [2, 3, 4]: one row of 24.
  Rows same = rows_view({2, 3, 4}, {{12, 4, 1}, {12, 4, 1}});
  CHECK(same.count == 1);
  CHECK(same.cols == 24);
  CHECK(same.ndim == 0);
  // [2, 3, 4] + [4] (a bias): 6 rows of 4, the bias re-read from 0 each row.
  Rows bias = rows_view({2, 3, 4}, {{12, 4, 1}, {0, 0, 1}});
  CHECK(bias.count == 6);
  CHECK(bias.cols == 4);
  CHECK(bias.ndim == 1);
  CHECK(bias.offset(0, 5) == 20);
  CHECK(bias.offset(1, 5) == 0);
  // A size-1 dim goes; a transposed operand keeps its dims apart.
  Rows transposed = rows_view({3, 1, 4}, {{1, 0, 3}});
  CHECK(transposed.count == 3);
  CHECK(transposed.cols == 4);
  CHECK(transposed.col_strides[0] == 3);
  CHECK(transposed.offset(0, 2) == 2);
  // whole_rows keeps the last dim as the row, even where it could merge.
  Rows scores = rows_view({2, 3, 4}, {{0, 0, 0}}, true);
  CHECK(scores.count == 6);
  CHECK(scores.cols == 4);
  // Ten dims that cannot merge leave nine outer ones: more than kernels take.
  std::vector<int64_t> ten(10, 2), alternate(10);
  for (int d = 0; d < 10; ++d) alternate[d] = d % 2 ? 0 : int64_t{1} << (9 - d);
  CHECK_THROWS_AS(rows_view(ten, {alternate}), InternalError);
}

TEST_CASE("kernels: gemm with beta 0 ignores NaN in C") {
  std::vector<float> a = random_vector(65 * 17, 1), b = random_vector(17 * 63, 2);
  std::vector<float> c(65 * 63, NAN);
  F.gemm(false, false, 65, 63, 17, 1.0f, a.data(), 17, 0, b.data(), 63, 0, 0.0f, c.data(), 63, 0, 1);
  for (float v : c) REQUIRE(std::isfinite(v));
}

// Two operands of [rows, cols] as binary ops broadcast them: full and full,
// full and a row (a bias), a column and full, full and a scalar.
std::vector<Rows> broadcast_views(int64_t rows, int64_t cols) {
  return {rows_view({rows, cols}, {{cols, 1}, {cols, 1}}), rows_view({rows, cols}, {{cols, 1}, {0, 1}}),
          rows_view({rows, cols}, {{1, 0}, {cols, 1}}), rows_view({rows, cols}, {{cols, 1}, {0, 0}})};
}

// binary ops and fill_where with broadcasting.
void check_broadcasting() {
  with_threads([] {
    for (int64_t rows : kSizes)
      for (int64_t cols : kSizes) {
        CAPTURE(rows);
        CAPTURE(cols);
        std::vector<float> a = random_vector(rows * cols, 1), b = random_vector(rows * cols, 2, 0.5f, 2);
        const std::vector<float> ea = edge_rows(rows, cols, 1), eb = with_edges(rows * cols, 2);
        for (const Rows& view : broadcast_views(rows, cols)) {
          for (Binary op : kBinaryCodes)
            for (bool edges : {false, true}) {
              CAPTURE(edges);
              const float* pa = edges ? ea.data() : a.data();
              const float* pb = edges ? eb.data() : b.data();
              std::vector<float> of(rows * cols), os(rows * cols);
              F.binary(op, pa, pb, of.data(), view);
              S.binary(op, pa, pb, os.data(), view);
              check_same(of, os, 0, 0);
            }
          // Comparisons, of the edge values and of small ints.
          std::vector<int32_t> ia(rows * cols), ib(rows * cols);
          for (int64_t i = 0; i < rows * cols; ++i) {
            ia[i] = static_cast<int32_t>(i % 5) - 2;
            ib[i] = static_cast<int32_t>(i % 3) - 1;
          }
          for (Predicate op : kPredicateCodes) {
            std::vector<int32_t> pf(rows * cols), ps(rows * cols);
            F.predicate(op, ea.data(), eb.data(), pf.data(), view);
            S.predicate(op, ea.data(), eb.data(), ps.data(), view);
            CHECK(pf == ps);
            F.predicate_int(op, ia.data(), ib.data(), pf.data(), view);
            S.predicate_int(op, ia.data(), ib.data(), ps.data(), view);
            CHECK(pf == ps);
          }
        }
        std::vector<int32_t> mask(cols);
        for (int64_t c = 0; c < cols; ++c) mask[c] = c % 3 == 0;
        const Rows view = rows_view({rows, cols}, {{cols, 1}, {0, 1}});
        std::vector<float> of(rows * cols), os(rows * cols);
        F.fill_where(a.data(), mask.data(), -1e9f, of.data(), view);
        S.fill_where(a.data(), mask.data(), -1e9f, os.data(), view);
        check_same(of, os, 0, 0);
      }
  });
}

// unary ops, every code (those the fast table does not vectorise run the
// reference's loop in parallel pieces).
void check_unary() {
  with_threads([] {
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{129}, int64_t{40000}}) {
      CAPTURE(n);
      // Results below FLT_MIN are subnormal, with fewer significant bits: they
      // may differ by a unit in their last place.
      for (const std::vector<float>& x : {random_vector(n, 3, 0.1f, 4.0f), with_edges(n, 3)})
        for (Unary op : kUnaryCodes) {
          CAPTURE(static_cast<int>(op));
          std::vector<float> yf(n), ys(n);
          F.unary(op, x.data(), yf.data(), n, 1.5f);
          S.unary(op, x.data(), ys.data(), n, 1.5f);
          check_same(yf, ys, 2e-6f, FLT_MIN);
        }
    }
  });
}

// log, sqrt, tanh and pow run the reference's loop in both tables (the fast one
// in parallel pieces): both against the C library's functions, bit for bit.
TEST_CASE("kernels: unary ops by library function, both tables") {
  with_threads([] {
    const int64_t n = 40000;
    std::vector<float> x = with_edges(n, 4, -4.0f, 4.0f);
    struct Case {
      Unary op;
      float (*f)(float);
    };
    for (Case c : {Case{Unary::Log, [](float v) { return std::log(v); }},
                   Case{Unary::Sqrt, [](float v) { return std::sqrt(v); }},
                   Case{Unary::Tanh, [](float v) { return std::tanh(v); }},
                   Case{Unary::PowScalar, [](float v) { return std::pow(v, 1.5f); }}}) {
      CAPTURE(static_cast<int>(c.op));
      std::vector<float> want(n);
      for (int64_t i = 0; i < n; ++i) want[i] = c.f(x[i]);
      for (const HostTable* table : {&F, &S}) {
        INFO("table: ", std::string(table->name));
        std::vector<float> y(n);
        table->unary(c.op, x.data(), y.data(), n, 1.5f);
        check_same(y, want, 0, 0);
      }
    }
  });
}

// reductions: a sum over a middle axis ([outer, n, inner] -> [outer, 1, inner]), max_axis.
void check_axis_reductions() {
  with_threads([] {
    for (int64_t outer : kSizes)
      for (int64_t n : kSizes)
        for (int64_t inner : {int64_t{1}, int64_t{7}, int64_t{65}}) {
          CAPTURE(outer);
          CAPTURE(n);
          CAPTURE(inner);
          for (const std::vector<float>& x :
               {random_vector(outer * n * inner, 4), edge_rows(outer * inner, n, 4)}) {
            std::vector<float> of(outer * inner), os(outer * inner);
            const Rows view = rows_view({outer, n, inner}, {{n * inner, inner, 1}, {inner, 0, 1}});
            F.sum_to(x.data(), of.data(), view);
            S.sum_to(x.data(), os.data(), view);
            check_same(of, os, 1e-5f, 1e-5f);
            // The fast max_axis has code of its own only for inner == 1 and no
            // argmax (the other cases: "max_axis, hand-computed").
            if (inner != 1) continue;
            F.max_axis(x.data(), outer, n, inner, of.data(), nullptr);
            S.max_axis(x.data(), outer, n, inner, os.data(), nullptr);
            check_same(of, os, 0, 0);
          }
        }
  });
}

// Shapes with a dimension of 1 collapse to one the fast sum_to hands to the
// reference, so both tables are checked against sums computed here.
// sum_to, both tables against direct sums.
void check_sum_to() {
  with_threads([] {
    for (int64_t rows : kSizes)
      for (int64_t cols : kSizes) {
        CAPTURE(rows);
        CAPTURE(cols);
        for (const std::vector<float>& x : {random_vector(rows * cols, 5), edge_rows(rows, cols, 5)}) {
          std::vector<float> want_cols(cols, 0.0f), want_rows(rows, 0.0f);
          for (int64_t c = 0; c < cols; ++c) {
            double total = 0.0;
            for (int64_t r = 0; r < rows; ++r) total += x[r * cols + c];
            want_cols[c] = static_cast<float>(total);
          }
          for (int64_t r = 0; r < rows; ++r) {
            double total = 0.0;
            for (int64_t c = 0; c < cols; ++c) total += x[r * cols + c];
            want_rows[r] = static_cast<float>(total);
          }
          for (const HostTable* table : {&F, &S}) {
            INFO("table: ", std::string(table->name));
            // Outputs are overwritten (kernels.h): what they held does not count.
            std::vector<float> out_cols(cols, NAN), out_rows(rows, 42.0f);
            table->sum_to(x.data(), out_cols.data(), rows_view({rows, cols}, {{cols, 1}, {0, 1}}));
            table->sum_to(x.data(), out_rows.data(), rows_view({rows, cols}, {{cols, 1}, {1, 0}}));
            check_same(out_cols, want_cols, 1e-5f, 1e-5f);
            check_same(out_rows, want_rows, 1e-5f, 1e-5f);
          }
        }
      }
  });
}

// The fast table's max_axis runs the reference's code for an argmax or an
// inner dimension: both tables against values worked out by hand. x is
// [outer 2, n 4, inner 2]; the first maximum wins a tie, a NaN wins over all.
TEST_CASE("kernels: max_axis with argmax and inner dims, hand-computed") {
  const float inf = INFINITY;
  const std::vector<float> x = {
      1, -inf,  5, 2,  5, 2,   -3, 2,   // outer 0: columns {1, 5, 5, -3} and {-inf, 2, 2, 2}
      0, NAN,   NAN, 7,  2, NAN, 9, -1,  // outer 1: columns {0, NAN, 2, 9} and {NAN, 7, NAN, -1}
  };
  const std::vector<float> want_max = {5, 2, NAN, NAN};
  const std::vector<int32_t> want_arg = {1, 1, 1, 0};
  for (const HostTable* table : {&F, &S}) {
    INFO("table: ", std::string(table->name));
    std::vector<float> out(4);
    std::vector<int32_t> arg(4, -1);
    table->max_axis(x.data(), 2, 4, 2, out.data(), arg.data());
    check_same(out, want_max, 0, 0);
    CHECK(arg == want_arg);
    // inner == 1 with an argmax: the rows {1, -inf}, {5, 2}, ..., {9, -1}.
    std::vector<float> row_max(8);
    std::vector<int32_t> row_arg(8);
    table->max_axis(x.data(), 8, 2, 1, row_max.data(), row_arg.data());
    check_same(row_max, {1, 5, 5, 2, NAN, NAN, NAN, 9}, 0, 0);
    CHECK(row_arg == std::vector<int32_t>{0, 0, 0, 1, 1, 0, 1, 0});
  }
}

// softmax family, masked softmax and cross-entropy.
void check_rows() {
  with_threads([] {
    for (int64_t rows : kSizes)
      for (int64_t cols : kSizes) {
        CAPTURE(rows);
        CAPTURE(cols);
        int64_t size = rows * cols;
        // Plain logits, the edge values, and very negative logits: near -1e4,
        // where e^x underflows unless the row's max is subtracted first, and
        // near -1e30, where x - max is still huge (one-hot rows). log_softmax's
        // x - (max + log sum) rounds at the logits' magnitude: a few units in
        // the last place of 1e4 for those near -1e4.
        struct Logits {
          std::vector<float> x;
          float log_atol;
        };
        const Logits inputs[] = {{random_vector(size, 6, -8, 8), 1e-5f},
                                 {edge_rows(rows, cols, 6), 1e-5f},
                                 {random_vector(size, 6, -1e4f - 8, -1e4f + 8), 4e-3f},
                                 {random_vector(size, 6, -3e30f, -1e30f), 1e-5f}};
        for (int input = 0; input < 4; ++input) {
          CAPTURE(input);
          const auto& [x, log_atol] = inputs[input];
          std::vector<float> dy = random_vector(size, 7);
          std::vector<float> yf(size), ys(size), df(size), ds(size);
          // Plain softmax: the masked one without a mask, at scale 1.
          const Rows plain = rows_view({rows, cols}, {{0, 0}}, true);
          F.masked_softmax(x.data(), nullptr, plain, 1.0f, yf.data());
          S.masked_softmax(x.data(), nullptr, plain, 1.0f, ys.data());
          check_same(yf, ys, 1e-5f, 1e-7f);
          F.masked_softmax_backward(ys.data(), dy.data(), nullptr, plain, 1.0f, df.data());
          S.masked_softmax_backward(ys.data(), dy.data(), nullptr, plain, 1.0f, ds.data());
          check_same(df, ds, 1e-4f, 1e-6f);
          F.log_softmax(x.data(), yf.data(), rows, cols);
          S.log_softmax(x.data(), ys.data(), rows, cols);
          check_same(yf, ys, 1e-5f, log_atol);
          F.log_softmax_backward(ys.data(), dy.data(), df.data(), rows, cols);
          S.log_softmax_backward(ys.data(), dy.data(), ds.data(), rows, cols);
          check_same(df, ds, 1e-4f, 1e-5f);

          // Scores [2, rows, cols] (x, then x reversed) with a key-padding mask [2, 1, cols].
          const Rows scores = rows_view({2, rows, cols}, {{cols, 0, 1}}, true);
          std::vector<float> s2 = x, g2 = random_vector(2 * size, 9);
          s2.insert(s2.end(), x.rbegin(), x.rend());
          std::vector<int32_t> mask(2 * cols);
          for (int64_t i = 0; i < 2 * cols; ++i) mask[i] = i % 5 != 2;
          std::vector<float> mf(2 * size), ms(2 * size), gf(2 * size), gs(2 * size);
          F.masked_softmax(s2.data(), mask.data(), scores, 0.3f, mf.data());
          S.masked_softmax(s2.data(), mask.data(), scores, 0.3f, ms.data());
          check_same(mf, ms, 1e-5f, 1e-7f);
          F.masked_softmax_backward(ms.data(), g2.data(), mask.data(), scores, 0.3f, gf.data());
          S.masked_softmax_backward(ms.data(), g2.data(), mask.data(), scores, 0.3f, gs.data());
          check_same(gf, gs, 1e-4f, 1e-6f);

          std::vector<int32_t> targets(rows);
          for (int64_t r = 0; r < rows; ++r) targets[r] = r % 4 == 1 ? 1 : static_cast<int32_t>((r * 7) % cols);
          std::vector<float> lf(rows), ls(rows), cf(rows), cs(rows), pf(size), ps(size);
          F.cross_entropy(x.data(), targets.data(), rows, cols, 1, 0.1f, lf.data(), cf.data(), pf.data());
          S.cross_entropy(x.data(), targets.data(), rows, cols, 1, 0.1f, ls.data(), cs.data(), ps.data());
          check_same(pf, ps, 1e-5f, log_atol);
          check_same(lf, ls, 1e-5f, log_atol);
          CHECK(cf == cs);
          const float scale = 0.25f;
          F.cross_entropy_backward(ps.data(), targets.data(), rows, cols, 1, 0.1f, &scale, df.data());
          S.cross_entropy_backward(ps.data(), targets.data(), rows, cols, 1, 0.1f, &scale, ds.data());
          check_same(df, ds, 1e-5f, 1e-7f);
        }
      }
  });
}

// layer norm, bias+relu, relu backward, dropout, dropout_add.
void check_layer_norm_relu_dropout() {
  with_threads([] {
    for (int64_t rows : kSizes)
      for (int64_t cols : {int64_t{2}, int64_t{7}, int64_t{17}, int64_t{63}, int64_t{65}, int64_t{129}}) {
        CAPTURE(rows);
        CAPTURE(cols);
        int64_t size = rows * cols;
        for (const std::vector<float>& x : {random_vector(size, 10, -3, 3), edge_rows(rows, cols, 10)}) {
        std::vector<float> dy = random_vector(size, 11);
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
        // dx is a difference of terms of size |dy alpha| / std, which cancel
        // almost entirely in a row of two close values: each row at its scale.
        for (int64_t r = 0; r < rows; ++r) {
          CAPTURE(r);
          auto row = [&](const std::vector<float>& v) {
            return std::vector<float>(v.begin() + r * cols, v.begin() + (r + 1) * cols);
          };
          check_same(row(dxf), row(dxs), 1e-4f, 1e-5f / (ss[r] + 1e-6f));
        }
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
        F.dropout_add(dy.data(), x.data(), yf.data(), size, 1.25f, 99, 858993459u);
        S.dropout_add(dy.data(), x.data(), ys.data(), size, 1.25f, 99, 858993459u);
        check_same(yf, ys, 0, 0);
        }
      }
  });
}

// dot products and Adam.
void check_dot_and_adam() {
  with_threads([] {
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{1025}, int64_t{70001}}) {
      CAPTURE(n);
      std::vector<float> a = random_vector(n, 16), b = random_vector(n, 17);
      float fast = 0.0f, ref = 0.0f;
      F.dot(a.data(), b.data(), n, &fast);
      S.dot(a.data(), b.data(), n, &ref);
      CHECK(fast == doctest::Approx(ref).epsilon(1e-5));
      // One infinity, then also a NaN: the sum is infinite, then NaN.
      for (float edge : {-INFINITY, NAN}) {
        a[n / 2] = edge;
        F.dot(a.data(), b.data(), n, &fast);
        S.dot(a.data(), b.data(), n, &ref);
        CHECK((fast == ref || (std::isnan(fast) && std::isnan(ref))));
      }
      for (const std::vector<float>& g : {random_vector(n, 18), with_edges(n, 18)}) {
        std::vector<float> pf = b, ps = b, mf(n, 0.1f), ms = mf, vf(n, 0.2f), vs = vf;
        F.adam_step(pf.data(), g.data(), mf.data(), vf.data(), n, 0.01f, 0.9f, 0.999f, 1e-8f, 0.05f, 0.01f, 0.001f);
        S.adam_step(ps.data(), g.data(), ms.data(), vs.data(), n, 0.01f, 0.9f, 0.999f, 1e-8f, 0.05f, 0.01f, 0.001f);
        check_same(pf, ps, 1e-5f, 1e-6f);
        check_same(mf, ms, 1e-5f, 1e-7f);  // m can cancel to near 0
        check_same(vf, vs, 1e-5f, 1e-7f);
      }
    }
  });
}

// The fast sgd_step runs the reference's loop in parallel pieces: both tables
// against torch.optim.SGD's update written out here (Nesterov momentum).
// sgd_step, both tables against the update written out.
void check_sgd_step() {
  with_threads([] {
    const int64_t n = 70001;
    const float lr = 0.1f, momentum = 0.9f, l2 = 0.01f;
    std::vector<float> p0 = random_vector(n, 16), g = with_edges(n, 18), want_p(n), want_buf(n);
    for (int64_t i = 0; i < n; ++i) {
      float grad = g[i] + l2 * p0[i];
      want_buf[i] = momentum * 0.3f + grad;
      want_p[i] = p0[i] - lr * (grad + momentum * want_buf[i]);
    }
    for (const HostTable* table : {&F, &S}) {
      INFO("table: ", std::string(table->name));
      std::vector<float> p = p0, buf(n, 0.3f);
      table->sgd_step(p.data(), g.data(), buf.data(), n, lr, momentum, l2, /*nesterov=*/true, /*first=*/false);
      // (The compiler may fuse a multiply and an add here or there: 1 ulp.)
      check_same(p, want_p, 1e-6f, 1e-7f);
      check_same(buf, want_buf, 1e-6f, 1e-7f);
    }
  });
}

// copy_strided with a permutation that moves the last dim and copy_rows
// (parallel pieces of the reference's memcpy) run the reference's code in the
// fast table too: every permutation and copy is checked against indices worked
// out here.
// data movement (copy_strided as a permutation, copy_rows, gather, scatter-add).
void check_copies() {
  with_threads([] {
    for (int64_t a : {int64_t{1}, int64_t{7}, int64_t{17}})
      for (int64_t d : {int64_t{1}, int64_t{63}, int64_t{65}}) {
        CAPTURE(a);
        CAPTURE(d);
        const int64_t shape[] = {2, a, 3, d};
        const int64_t size = 2 * a * 3 * d;
        std::vector<float> x = random_vector(size, 14);
        for (std::vector<int> perm : {std::vector<int>{0, 2, 1, 3}, std::vector<int>{3, 1, 0, 2}}) {
          CAPTURE(perm[0]);
          // y[i0, i1, i2, i3] = x at index j with j[perm[k]] = i[k].
          std::vector<float> want;
          int64_t i[4], j[4];
          for (i[0] = 0; i[0] < shape[perm[0]]; ++i[0])
            for (i[1] = 0; i[1] < shape[perm[1]]; ++i[1])
              for (i[2] = 0; i[2] < shape[perm[2]]; ++i[2])
                for (i[3] = 0; i[3] < shape[perm[3]]; ++i[3]) {
                  for (int k = 0; k < 4; ++k) j[perm[k]] = i[k];
                  want.push_back(x[((j[0] * a + j[1]) * 3 + j[2]) * d + j[3]]);
                }
          // y is x read through x's strides permuted to y's dims.
          const int64_t x_strides[] = {a * 3 * d, 3 * d, d, 1};
          std::vector<int64_t> y_shape(4), read(4);
          for (int k = 0; k < 4; ++k) {
            y_shape[k] = shape[perm[k]];
            read[k] = x_strides[perm[k]];
          }
          for (const HostTable* table : {&F, &S}) {
            INFO("table: ", std::string(table->name));
            std::vector<float> y(size);
            table->copy_strided(x.data(), y.data(), rows_view(y_shape, {read}));
            check_same(y, want, 0, 0);
          }
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
        // The first two of every three blocks of d floats (a slice [.., 0:2, :]).
        std::vector<float> want(size, 0.0f);
        for (int64_t r = 0; r < 2 * a; ++r)
          for (int64_t c = 0; c < 2 * d; ++c) want[r * 3 * d + c] = x[r * 3 * d + c];
        for (const HostTable* t : {&F, &S}) {
          INFO("table: ", std::string(t->name));
          std::vector<float> copy(size, 0.0f);
          t->copy_rows(x.data(), d * 4 * 3, copy.data(), d * 4 * 3, 2 * a, d * 4 * 2);
          check_same(copy, want, 0, 0);
        }
      }
  });
}

// topk (the fast table's is the reference's today; a fast one would be checked here).
void check_topk() {
  for (int64_t cols : kSizes) {
    CAPTURE(cols);
    const int64_t rows = 3, k = std::min<int64_t>(cols, 5);
    std::vector<float> x = edge_rows(rows, cols, 19), vf(rows * k), vs(rows * k);
    std::vector<int32_t> idf(rows * k), ids(rows * k);
    F.topk(x.data(), rows, cols, k, vf.data(), idf.data());
    S.topk(x.data(), rows, cols, k, vs.data(), ids.data());
    check_same(vf, vs, 0, 0);
    CHECK(idf == ids);
  }
}

void check_reductions() {
  check_axis_reductions();
  check_sum_to();
}

void check_dot_and_optimizers() {
  check_dot_and_adam();
  check_sgd_step();
}

}  // namespace


// float_to_bf16 and bf16_to_float: the fast table against the reference bit
// for bit on every bf16 value and on floats with edges and exact ties; the
// round trip bf16 -> float32 -> bf16 exact for every bf16 value (NaNs stay
// NaN, quieted); and hand-computed roundings.
void check_bf16_conversions() {
  with_threads([] {
    std::vector<bf16> every(1 << 16);
    for (size_t i = 0; i < every.size(); ++i) every[i].bits = static_cast<uint16_t>(i);
    std::vector<float> wide(every.size()), wide_ref(every.size());
    F.bf16_to_float(every.data(), wide.data(), static_cast<int64_t>(every.size()));
    S.bf16_to_float(every.data(), wide_ref.data(), static_cast<int64_t>(every.size()));
    CHECK(std::memcmp(wide.data(), wide_ref.data(), wide.size() * sizeof(float)) == 0);
    std::vector<bf16> back(every.size());
    F.float_to_bf16(wide.data(), back.data(), static_cast<int64_t>(wide.size()));
    int64_t mismatches = 0;
    for (size_t i = 0; i < every.size(); ++i) {
      const bool nan = std::isnan(to_float(every[i]));
      const uint16_t want = nan ? static_cast<uint16_t>(every[i].bits | 0x40) : every[i].bits;
      mismatches += back[i].bits != want;
    }
    CHECK(mismatches == 0);

    // Random floats, the edge values, and ties (low 16 bits exactly 0x8000).
    std::vector<float> x = with_edges(4099, 11, -1e3f, 1e3f);
    for (size_t i = 2; i < x.size(); i += 7)
      x[i] = std::bit_cast<float>((std::bit_cast<uint32_t>(x[i]) & 0xFFFF0000u) | 0x8000u);
    std::vector<bf16> got(x.size()), want(x.size());
    F.float_to_bf16(x.data(), got.data(), static_cast<int64_t>(x.size()));
    S.float_to_bf16(x.data(), want.data(), static_cast<int64_t>(x.size()));
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(bf16)) == 0);
  });
  // By hand: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and goes to the even
  // mantissa (1); 1 + 3 * 2^-8 goes up to the even 1 + 2^-6; just above a tie
  // rounds up; the largest float rounds to infinity; a NaN whose payload is all
  // in the dropped bits stays a NaN.
  const float in[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, FLT_MAX, -0.0f,
                      std::bit_cast<float>(0x7F800001u), 0x1p-140f};
  const uint16_t expect[] = {0x3F80, 0x3F82, 0x3F81, 0x7F80, 0x8000, 0x7FC0, 0x0000};
  bf16 out[7];
  for (const HostTable* table : {&F, &S}) {
    table->float_to_bf16(in, out, 7);
    for (int i = 0; i < 7; ++i) CHECK(out[i].bits == expect[i]);
  }
}

// --- the same results at 1, 2 and 3 threads --------------------------------------------
//
// The checks above run most sizes below the grain at which a fast kernel
// splits its work, and none asks whether it was split. These run each entry
// at 1, 2 and 3 threads on shapes of a few grains (fast.cpp's 2^14 elements,
// or rows holding as many; gemm.cpp's 2^18 multiply-adds), and ask the pool
// whether the work really was cut into as many chunks as threads: a grain
// grown past a shape fails here instead of leaving the split untested.
// docs/adding-an-op.md asks a fast kernel to compute each element the same way
// whatever the number of threads, so results must be bit-identical (the
// exceptions are named below, with the reason), and at 1 thread they must
// match the reference.
namespace {

const int kThreadCounts[] = {1, 2, 3};

// Three grains and a bit, cut at 2 and 3 threads after elements 24595 and
// 16397: in the middle of a vector at every width but 1.
constexpr int64_t kSplitElements = 3 * (1 << 14) + 37;
// A grain is 127 rows of 129 floats; 600 rows are also three of the blocks of
// 256 rows that column sums are added in (column_sums, layer_norm_backward).
constexpr int64_t kSplitRows = 600, kSplitCols = 129;

// Runs `kernel`, which returns its outputs, at each of kThreadCounts and
// returns what it returned at each. From 2 threads on, at least `passes` of
// its parallel_for calls must have been cut up, into as many chunks as
// threads each.
template <class Kernel>
auto outputs_at_thread_counts(Kernel kernel, int64_t passes = 1) {
  std::vector<decltype(kernel())> outputs;
  for (int threads : kThreadCounts) {
    CAPTURE(threads);
    set_num_threads(threads);
    const ThreadPool::SplitCount before = pool().split_count();
    outputs.push_back(kernel());
    const ThreadPool::SplitCount after = pool().split_count();
    if (threads > 1) {
      CHECK(after.calls - before.calls >= passes);
      CHECK(after.chunks - before.chunks >= threads * passes);
    }
  }
  set_num_threads(0);
  return outputs;
}

// The outputs at every thread count bit for bit those at 1 thread, NaN
// payloads and signed zeros included; reports the first element that differs.
template <class T>
void check_bit_identical(const std::vector<std::vector<T>>& outputs) {
  for (size_t t = 1; t < outputs.size(); ++t) {
    const std::vector<T>& got = outputs[t];
    const std::vector<T>& want = outputs[0];
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i)
      if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
        FAIL_CHECK("element ", i, " at ", kThreadCounts[t], " threads differs from the one at 1 thread");
        break;
      }
  }
}

// n floats as `write` leaves them.
template <class Write>
std::vector<float> written(int64_t n, Write write) {
  std::vector<float> out(n);
  write(out.data());
  return out;
}

// `fast()` returns the fast table's outputs: bit-identical at every thread
// count, and at 1 thread `want` within check_same's tolerance.
template <class Fast>
void check_split_against(Fast fast, const std::vector<float>& want, float rtol, float atol, int64_t passes = 1) {
  const std::vector<std::vector<float>> outputs = outputs_at_thread_counts(fast, passes);
  check_bit_identical(outputs);
  check_same(outputs[0], want, rtol, atol);
}

// `run(table)` returns the outputs of a kernel through `table`: the fast
// table's as check_split_against wants, the reference's the yardstick.
template <class Run>
void check_split(Run run, float rtol, float atol, int64_t passes = 1) {
  check_split_against([&] { return run(F); }, run(S), rtol, atol, passes);
}

// The common case: one output of n floats, which write(table, out) fills.
template <class Write>
void check_split_output(int64_t n, Write write, float rtol, float atol) {
  check_split([&](const HostTable& t) { return written(n, [&](float* out) { write(t, out); }); }, rtol, atol);
}

// Several outputs as one, compared together.
std::vector<float> joined(std::initializer_list<std::vector<float>> parts) {
  std::vector<float> all;
  for (const std::vector<float>& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

// The products of gemm's and gemm_bf16's checks, k past their K blocking (gemm
// 512, gemm_bf16 1024), so that the second K block must add into C. A tall
// product is cut across its rows, so that one thread packs B (m > 128,
// gemm.cpp's kPackBRows) where each of 2 or 3 reads it in place; a wide one
// across its columns; one of 3 rows (gemm_few_rows) into blocks of 2^19 / 3k
// columns rounded down to a multiple of 64 (320 at k 521, 128 at 1031), of
// which `few_rows_n` makes five or more: at 3 threads the pool cuts four tasks
// into two chunks. An entry of batch 1 is cut into parts, of batch
// 3 too at 2 threads (at 3, each thread takes a whole entry). Each product is
// four times kParallelWork or more.
void check_gemm_products(bool bf16, int64_t k, int64_t few_rows_n) {
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{136, 17}, {17, 136}, {3, few_rows_n}})
    for (int64_t batch : {1, 3})
      for (int layout = 0; layout < 4; ++layout) {
        GemmCheck g{m, n, k, bool(layout & 1), bool(layout & 2), 0.5f, layout == 3 ? 0.0f : 1.5f, batch, /*pad=*/1};
        g.bf16 = bf16;
        INFO(gemm_shape(g));
        const GemmOperands o = gemm_operands(g);
        const std::vector<float> want = gemm_result(S, g, o);
        auto check = [&] { check_split_against([&] { return gemm_result(F, g, o); }, want, 1e-4f, gemm_atol(k)); };
        if (bf16)
          at_each_bf16_gemm(check);
        else
          check();
      }
}

void check_gemm_split() { check_gemm_products(/*bf16=*/false, 521, /*few_rows_n=*/1700); }
void check_gemm_bf16_split() { check_gemm_products(/*bf16=*/true, 1031, /*few_rows_n=*/700); }

void check_unary_split() {
  const std::vector<float> x = with_edges(kSplitElements, 3);
  for (Unary op : kUnaryCodes) {
    CAPTURE(static_cast<int>(op));
    auto run = [&](const HostTable& t) {
      return written(kSplitElements, [&](float* y) { t.unary(op, x.data(), y, kSplitElements, 1.5f); });
    };
    check_split(run, 2e-6f, FLT_MIN);
  }
}

void check_broadcasting_split() {
  const int64_t size = kSplitRows * kSplitCols;
  const std::vector<float> a = edge_rows(kSplitRows, kSplitCols, 1), b = with_edges(size, 2);
  for (const Rows& view : broadcast_views(kSplitRows, kSplitCols))
    for (Binary op : kBinaryCodes) {
      CAPTURE(static_cast<int>(op));
      check_split_output(
          size, [&](const HostTable& t, float* out) { t.binary(op, a.data(), b.data(), out, view); }, 0, 0);
    }
  std::vector<int32_t> mask(kSplitCols);
  for (int64_t c = 0; c < kSplitCols; ++c) mask[c] = c % 3 == 0;
  const Rows view = rows_view({kSplitRows, kSplitCols}, {{kSplitCols, 1}, {0, 1}});
  check_split_output(
      size, [&](const HostTable& t, float* out) { t.fill_where(a.data(), mask.data(), -1e9f, out, view); }, 0, 0);
}

// Sums of each row, of each column (three blocks of rows), over a middle axis
// ([48, 33, 31]: a grain is 16 of the outer); the maximum of each row.
void check_reductions_split() {
  const int64_t rows = kSplitRows, cols = kSplitCols;
  const std::vector<float> x = random_vector(rows * cols, 4);
  for (const auto& [view, out_size] :
       {std::pair{rows_view({rows, cols}, {{cols, 1}, {1, 0}}), rows},
        std::pair{rows_view({rows, cols}, {{cols, 1}, {0, 1}}), cols},
        std::pair{rows_view({48, 33, 31}, {{33 * 31, 31, 1}, {31, 0, 1}}), int64_t{48 * 31}}}) {
    CAPTURE(out_size);
    check_split_output(
        out_size, [&](const HostTable& t, float* out) { t.sum_to(x.data(), out, view); }, 1e-5f, 1e-5f);
  }
  check_split_output(
      rows, [&](const HostTable& t, float* out) { t.max_axis(x.data(), rows, cols, 1, out, nullptr); }, 0, 0);
}

void check_rows_split() {
  const int64_t rows = kSplitRows, cols = kSplitCols, size = rows * cols;
  const std::vector<float> x = random_vector(size, 6, -8, 8), dy = random_vector(size, 7);
  const Rows plain = rows_view({rows, cols}, {{0, 0}}, true);
  // Scores [2, rows / 2, cols] with a key-padding mask [2, 1, cols].
  const Rows scores = rows_view({2, rows / 2, cols}, {{cols, 0, 1}}, true);
  std::vector<int32_t> mask(2 * cols), targets(rows);
  for (int64_t i = 0; i < 2 * cols; ++i) mask[i] = i % 5 != 2;
  for (int64_t r = 0; r < rows; ++r) targets[r] = r % 4 == 1 ? 1 : static_cast<int32_t>((r * 7) % cols);
  const std::vector<float> probs =
      written(size, [&](float* y) { S.masked_softmax(x.data(), mask.data(), scores, 0.3f, y); });
  const std::vector<float> log_probs = written(size, [&](float* y) { S.log_softmax(x.data(), y, rows, cols); });
  const float scale = 0.25f;

  check_split_output(
      size, [&](const HostTable& t, float* y) { t.masked_softmax(x.data(), nullptr, plain, 1.0f, y); }, 1e-5f, 1e-7f);
  check_split_output(
      size, [&](const HostTable& t, float* y) { t.masked_softmax(x.data(), mask.data(), scores, 0.3f, y); }, 1e-5f,
      1e-7f);
  check_split_output(
      size,
      [&](const HostTable& t, float* dx) {
        t.masked_softmax_backward(probs.data(), dy.data(), mask.data(), scores, 0.3f, dx);
      },
      1e-4f, 1e-6f);
  check_split_output(
      size, [&](const HostTable& t, float* y) { t.log_softmax(x.data(), y, rows, cols); }, 1e-5f, 1e-5f);
  check_split_output(
      size, [&](const HostTable& t, float* dx) { t.log_softmax_backward(log_probs.data(), dy.data(), dx, rows, cols); },
      1e-4f, 1e-5f);
  check_split(
      [&](const HostTable& t) {
        std::vector<float> loss(rows), counted(rows), lp(size);
        t.cross_entropy(x.data(), targets.data(), rows, cols, 1, 0.1f, loss.data(), counted.data(), lp.data());
        return joined({loss, counted, lp});
      },
      1e-5f, 1e-5f);
  check_split_output(
      size,
      [&](const HostTable& t, float* d) {
        t.cross_entropy_backward(log_probs.data(), targets.data(), rows, cols, 1, 0.1f, &scale, d);
      },
      1e-5f, 1e-7f);
}

// layer_norm_backward makes two passes, dx by rows and then dalpha and dbias
// by blocks of rows: both must split.
void check_layer_norm_relu_dropout_split() {
  const int64_t rows = kSplitRows, cols = kSplitCols, size = rows * cols;
  const std::vector<float> x = random_vector(size, 10, -3, 3), dy = random_vector(size, 11);
  const std::vector<float> alpha = random_vector(cols, 12, 0.5f, 1.5f), bias = random_vector(cols, 13);
  std::vector<float> y(size), mean(rows), stdev(rows);
  S.layer_norm(x.data(), alpha.data(), bias.data(), rows, cols, 1e-6f, y.data(), mean.data(), stdev.data());

  check_split(
      [&](const HostTable& t) {
        std::vector<float> out(size), mu(rows), sigma(rows);
        t.layer_norm(x.data(), alpha.data(), bias.data(), rows, cols, 1e-6f, out.data(), mu.data(), sigma.data());
        return joined({out, mu, sigma});
      },
      1e-5f, 1e-5f);
  check_split(
      [&](const HostTable& t) {
        std::vector<float> dx(size), dalpha(cols), dbias(cols);
        t.layer_norm_backward(x.data(), alpha.data(), mean.data(), stdev.data(), dy.data(), rows, cols, 1e-6f,
                              dx.data(), dalpha.data(), dbias.data());
        return joined({dx, dalpha, dbias});
      },
      1e-4f, 1e-4f, /*passes=*/2);
  check_split_output(
      size, [&](const HostTable& t, float* out) { t.bias_relu(x.data(), bias.data(), rows, cols, out); }, 0, 0);
  check_split_output(
      size, [&](const HostTable& t, float* dx) { t.relu_backward(x.data(), dy.data(), dx, size); }, 0, 0);
  check_split_output(
      size, [&](const HostTable& t, float* out) { t.dropout(x.data(), out, size, 1.25f, 99, 858993459u); }, 0, 0);
  check_split_output(
      size,
      [&](const HostTable& t, float* out) { t.dropout_add(dy.data(), x.data(), out, size, 1.25f, 99, 858993459u); }, 0,
      0);
}

// adam_step is not the same at every thread count: a chunk that ends
// mid-vector leaves its last elements to the reference's loop, which rounds
// differently (the vectors fuse l2 * p + g into one rounding, and multiply by
// 1 / sqrt_bc2 where the reference divides).
void check_dot_and_optimizers_split() {
  const int64_t n = kSplitElements;
  const std::vector<float> a = random_vector(n, 16), b = random_vector(n, 17), g = with_edges(n, 18);
  check_split_output(
      1, [&](const HostTable& t, float* out) { t.dot(a.data(), b.data(), n, out); }, 1e-5f, 0);
  check_split(
      [&](const HostTable& t) {
        std::vector<float> p = b, m(n, 0.1f), v(n, 0.2f);
        t.adam_step(p.data(), g.data(), m.data(), v.data(), n, 0.01f, 0.9f, 0.999f, 1e-8f, 0.05f, 0.01f, 0.001f);
        return joined({p, m, v});
      },
      1e-5f, 1e-7f);
  check_split(
      [&](const HostTable& t) {
        std::vector<float> p = b, buf(n, 0.3f);
        t.sgd_step(p.data(), g.data(), buf.data(), n, 0.1f, 0.9f, 0.01f, /*nesterov=*/true, /*first=*/false);
        return joined({p, buf});
      },
      0, 0);
}

// copy_rows from a wider matrix, copy_strided as attention's head split
// ([2, 100, 3, 129] -> [2, 3, 100, 129]), and gather_rows.
void check_copies_split() {
  const int64_t rows = kSplitRows, cols = kSplitCols, wide = cols + 7;
  const std::vector<float> x = random_vector(rows * wide, 14);
  const int64_t row_bytes = cols * sizeof(float);
  check_split_output(
      rows * cols,
      [&](const HostTable& t, float* y) { t.copy_rows(x.data(), wide * sizeof(float), y, row_bytes, rows, row_bytes); },
      0, 0);
  const Rows heads = rows_view({2, 3, 100, cols}, {{100 * 3 * cols, cols, 3 * cols, 1}});
  check_split_output(
      rows * cols, [&](const HostTable& t, float* y) { t.copy_strided(x.data(), y, heads); }, 0, 0);
  std::vector<int32_t> ids(rows);
  for (int64_t i = 0; i < rows; ++i) ids[i] = static_cast<int32_t>(i * 7 % 50);
  check_split_output(
      rows * cols, [&](const HostTable& t, float* y) { t.gather_rows(x.data(), ids.data(), rows, cols, y); }, 0, 0);
}

void check_bf16_conversions_split() {
  const int64_t n = kSplitElements;
  const std::vector<float> x = with_edges(n, 11, -1e3f, 1e3f);
  auto to_bf16 = [&](const HostTable& t) {
    std::vector<bf16> y(n);
    t.float_to_bf16(x.data(), y.data(), n);
    return y;
  };
  const std::vector<std::vector<bf16>> rounded = outputs_at_thread_counts([&] { return to_bf16(F); });
  check_bit_identical(rounded);
  CHECK(std::memcmp(rounded[0].data(), to_bf16(S).data(), n * sizeof(bf16)) == 0);
  check_split_output(
      n, [&](const HostTable& t, float* y) { t.bf16_to_float(rounded[0].data(), y, n); }, 0, 0);
}

// predicate, predicate_int, topk and scatter_add_rows run on one thread in the
// fast table (the reference's code; scatter_add_rows because two ids may name
// the same row), so the thread count cannot change them. Checked on shapes the
// others split: a version that splits fails here until it has a check above.
void check_serial_kernels() {
  const int64_t rows = kSplitRows, cols = kSplitCols, size = rows * cols;
  const std::vector<float> x = random_vector(size, 20), y = random_vector(size, 21);
  const Rows view = rows_view({rows, cols}, {{cols, 1}, {cols, 1}});
  std::vector<int32_t> ints(size), out(size), ids(rows);
  std::vector<float> values(rows * 5), table(50 * cols);
  for (int64_t i = 0; i < rows; ++i) ids[i] = static_cast<int32_t>(i * 7 % 50);
  set_num_threads(2);
  const ThreadPool::SplitCount before = pool().split_count();
  F.predicate(Predicate::Lt, x.data(), y.data(), out.data(), view);
  F.predicate_int(Predicate::Eq, ints.data(), ints.data(), out.data(), view);
  F.topk(x.data(), rows, cols, 5, values.data(), out.data());
  F.scatter_add_rows(x.data(), ids.data(), rows, cols, table.data());
  CHECK(pool().split_count().calls == before.calls);
  set_num_threads(0);
}

}  // namespace

TEST_CASE("kernels: every entry at 1 to 3 threads on shapes its fast version splits") {
  sf::testing::run_kernel_checks(SF_KERNEL_SPLIT_CHECK_TABLE);
}

TEST_CASE("kernels: every entry of the fast table against the scalar reference") {
  sf::testing::run_kernel_checks(SF_KERNEL_CHECK_TABLE);
}

TEST_CASE("kernels: edge values, hand-computed") {
  const float inf = INFINITY;
  for (const HostTable* t : {&F, &S}) {
    INFO("table: ", std::string(t->name));
    // 17 elements: a whole vector at widths 1, 8 and 16, then a tail.
    std::vector<float> x = {NAN, inf, -inf, 89.0f, -104.0f, -95.0f, 0.0f, 1.0f, -1.0f,
                            NAN, inf, -inf, 89.0f, -104.0f, -95.0f, 0.0f, 1.0f};
    std::vector<float> y(17);
    t->unary(Unary::Exp, x.data(), y.data(), 17, 0.0f);
    const float e95 = std::exp(-95.0f);  // subnormal, about 5.5e-42
    CHECK(e95 > 0.0f);
    check_same(y, {NAN, inf, 0, inf, 0, e95, 1, std::exp(1.0f), std::exp(-1.0f),
                   NAN, inf, 0, inf, 0, e95, 1, std::exp(1.0f)}, 1e-6f, 1e-44f);
    t->unary(Unary::Relu, x.data(), y.data(), 17, 0.0f);
    check_same(y, {NAN, inf, 0, 89, 0, 0, 0, 1, 0, NAN, inf, 0, 89, 0, 0, 0, 1}, 0, 0);
    // -0 at 0, as -x and PyTorch give (0 - x would be +0).
    t->unary(Unary::Neg, x.data(), y.data(), 17, 0.0f);
    CHECK(std::signbit(y[6]));
    CHECK(std::signbit(y[15]));
    t->unary(Unary::Sigmoid, x.data(), y.data(), 17, 0.0f);
    CHECK(std::isnan(y[0]));
    CHECK(y[1] == 1.0f);
    CHECK(y[2] == 0.0f);

    // softmax: -inf is a probability of 0; a NaN or +inf anywhere makes the
    // row NaN; logits near -1e4 as the same logits near 0.
    std::vector<float> rows = {-inf, 0, -inf, 1, NAN, 1, inf, 1, -1e4f, -1e4f + std::log(3.0f)};
    std::vector<float> p(10);
    t->masked_softmax(rows.data(), nullptr, rows_view({5, 2}, {{0, 0}}, true), 1.0f, p.data());
    check_same(p, {0, 1, 0, 1, NAN, NAN, NAN, NAN, 0.25f, 0.75f}, 2e-3f, 0);
    t->log_softmax(rows.data(), p.data(), 5, 2);
    check_same(p, {-inf, 0, -inf, 0, NAN, NAN, NAN, NAN, -std::log(4.0f), std::log(0.75f)}, 0, 2e-3f);

    // Cross-entropy of a very negative logit: -log p = 1e4, finite.
    std::vector<float> logits = {0, -1e4f}, loss(1), counted(1), log_probs(2);
    int32_t target = 1;
    t->cross_entropy(logits.data(), &target, 1, 2, -100, 0.0f, loss.data(), counted.data(), log_probs.data());
    CHECK(loss[0] == doctest::Approx(1e4));

    // A dropped NaN or infinity is NaN, as PyTorch's x * mask (threshold
    // 2^32 - 1 drops everything).
    std::vector<float> kept(3), ones = {NAN, inf, 1.0f};
    t->dropout(ones.data(), kept.data(), 3, 2.0f, 1, 0xFFFFFFFFu);
    check_same(kept, {NAN, NAN, 0}, 0, 0);
  }
}

// Every size may be 0: nothing is read (inputs are zero-length allocations, so
// under the sanitizers a read is an error) and nothing is written (outputs hold
// 42 where a kernel must not write).
TEST_CASE("kernels: empty inputs (n = 0, zero rows, zero columns)") {
  with_threads([] {
    for (const HostTable* t : {&F, &S}) {
      INFO("table: ", std::string(t->name));
      std::vector<float> out(8, 42.0f);
      const std::vector<float> untouched(8, 42.0f);
      const std::unique_ptr<float[]> no_floats(new float[0]);
      const std::unique_ptr<int32_t[]> no_ints(new int32_t[0]);
      const float* none = no_floats.get();
      const int32_t* no_ids = no_ints.get();
      float* o = out.data();
      for (const Rows& view : {rows_view({0, 5}, {{5, 1}, {0, 1}}), rows_view({3, 0}, {{0, 1}, {0, 1}})}) {
        t->binary(Binary::Add, none, none, o, view);
        t->fill_where(none, no_ids, 1.0f, o, view);
        t->copy_strided(none, o, view);
      }
      for (Unary op : kUnaryCodes) t->unary(op, none, o, 0, 1.0f);
      t->gemm(false, false, 0, 5, 3, 1.0f, none, 3, 0, none, 5, 0, 0.0f, o, 5, 0, 1);
      t->gemm(false, true, 4, 0, 3, 1.0f, none, 3, 0, none, 3, 0, 0.0f, o, 1, 0, 1);
      t->gemm(true, false, 4, 5, 3, 1.0f, none, 4, 0, none, 5, 0, 0.0f, o, 5, 0, 0);
      t->log_softmax(none, o, 0, 5);
      t->log_softmax(none, o, 3, 0);
      t->log_softmax_backward(none, none, o, 0, 5);
      for (const Rows& scores : {rows_view({2, 3, 0}, {{0, 0, 1}}, true), rows_view({2, 0, 4}, {{0, 0, 1}}, true)}) {
        t->masked_softmax(none, no_ids, scores, 1.0f, o);
        t->masked_softmax_backward(none, none, no_ids, scores, 1.0f, o);
      }
      t->layer_norm(none, none, none, 0, 4, 1e-6f, o, o, o);
      t->bias_relu(none, none, 0, 4, o);
      t->bias_relu(none, none, 3, 0, o);
      t->relu_backward(none, none, o, 0);
      t->dropout(none, o, 0, 2.0f, 1, 1u << 31);
      t->dropout_add(none, none, o, 0, 2.0f, 1, 1u << 31);
      float sum = 1.0f;
      t->dot(none, none, 0, &sum);
      CHECK(sum == 0.0f);
      t->adam_step(o, none, o, o, 0, 0.1f, 0.9f, 0.999f, 1e-8f, 1.0f, 0.0f, 0.0f);
      t->sgd_step(o, none, o, 0, 0.1f, 0.9f, 0.0f, true, false);
      t->copy_rows(none, 0, o, 0, 0, 16);
      t->copy_rows(none, 0, o, 0, 3, 0);
      t->gather_rows(none, no_ids, 0, 4, o);
      t->scatter_add_rows(none, no_ids, 0, 4, o);
      t->cross_entropy(none, no_ids, 0, 5, -100, 0.1f, o, o, o);
      t->cross_entropy_backward(none, no_ids, 0, 5, -100, 0.1f, o, o);
      t->max_axis(none, 0, 3, 1, o, nullptr);
      CHECK(out == untouched);

      // Outputs that do exist: layer norm over zero rows leaves its
      // parameters' gradients 0. (Sums over nothing never reach sum_to: the op
      // returns zeros.)
      std::vector<float> dalpha(4, 42.0f), dbias(4, 42.0f);
      t->layer_norm_backward(none, none, none, none, none, 0, 4, 1e-6f, o, dalpha.data(), dbias.data());
      check_same(dalpha, {0, 0, 0, 0}, 0, 0);
      check_same(dbias, {0, 0, 0, 0}, 0, 0);
      // Rows of zero classes: an ignored row counts 0, another has no target.
      const int32_t targets[] = {-100, 0};
      std::vector<float> loss(2), counted(2);
      t->cross_entropy(none, targets, 2, 0, -100, 0.1f, loss.data(), counted.data(), o);
      CHECK(loss[0] == 0.0f);
      CHECK(std::isnan(loss[1]));
      check_same(counted, {0, 1}, 0, 0);
    }
  });
}

#ifdef SF_SIMD_WIDTH  // set by the per-level builds (Makefile)
TEST_CASE("kernels: built for the expected SIMD level") { CHECK(simd::Vec::width == SF_SIMD_WIDTH); }
#endif
