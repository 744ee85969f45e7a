// The fast CPU kernels against the scalar reference: every case of the
// kernel table (kernel_cases.h) through the device interface at 1, 2 and 3
// threads, and the bf16 products at every bf16 GEMM level this CPU has; then
// what the table cannot say: edge values worked out by hand, the C library's
// functions bit for bit, max_axis's argmax by hand, rows_view's merging.
//
// The vector width is fixed at compile time (simd.h), so this file and the
// table are also built with the kernel sources once per SIMD level, AVX-512,
// AVX2 + FMA and portable, into test binaries of their own (the Makefile's
// "CPU kernels at every SIMD level").
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "autograd/kernels/gemm.h"
#include "autograd/kernels/kernels.h"
#include "autograd/kernels/simd.h"
#include "autograd/kernels/thread_pool.h"
#include "base/address_sanitizer.h"
#include "base/error.h"
#include "kernel_cases.h"
#include "bf16_levels.h"
#include "kernel_conformance.h"
#include "skip.h"

using namespace sf;
using namespace sf::kernels;
using namespace sf::testing;

namespace {

const HostTable& F = fast_table();
const HostTable& S = scalar_table();

const int kThreadCounts[] = {1, 2, 3};

// Every case on the fast table, at each thread count (the outer loop, so the
// pool is resized three times, not three times per case): at 1 thread within
// the case's tolerance of the reference, at 2 and 3 bit for bit what it gave
// at 1. A split-sized case must really have been cut into as
// many chunks as threads: a grain grown past its shape fails here instead of
// leaving the split untested.
void check_fast_table(const char* entry, const Cases& cases) {
  INFO("entry: ", std::string(entry));
  std::vector<Outputs> want, at_one_thread;
  for (const KernelCase& c : cases) want.push_back(reference_outputs(c));
  for (int threads : kThreadCounts) {
    CAPTURE(threads);
    set_num_threads(threads);
    for (size_t i = 0; i < cases.size(); ++i) {
      const KernelCase& c = cases[i];
      INFO("case: ", c.name);
      const ThreadPool::SplitCount before = pool().split_count();
      Outputs got = run_case(c, host_device(), 0);
      const ThreadPool::SplitCount after = pool().split_count();
      if (threads > 1) {
        CHECK(after.calls - before.calls >= c.split_passes);
        CHECK(after.chunks - before.chunks >= threads * c.split_passes);
      }
      if (threads == 1) {
        check_matches(c, got, want[i]);
        at_one_thread.push_back(std::move(got));
      } else {
        check_bit_identical(c, got, at_one_thread[i]);
      }
    }
  }
  set_num_threads(0);
}

// The entries that are matrix products (products = true) or every other one:
// the table's two test cases, below. Not gemm_bf16: its own case runs it at
// every bf16 GEMM level, the table's current one among them. Each must check
// some: a split that leaves one of them empty leaves those entries unchecked.
void check_fast_table_entries(bool products) {
  int checked = 0;
  for (const EntryCases& entry : every_entry_cases()) {
    const std::string name = entry.entry;
    if (name.starts_with("gemm") != products || name == "gemm_bf16") continue;
    check_fast_table(entry.entry, entry.make());
    ++checked;
  }
  CHECK(checked > 0);
}

// relu_backward's reference, made to write one element more: after its
// output's end, or before its start.
void relu_backward_past_end(const float* y, const float* dy, float* dx, int64_t n) {
  scalar_table().relu_backward(y, dy, dx, n);
  dx[n] = 0.0f;
}
void relu_backward_before_start(const float* y, const float* dy, float* dx, int64_t n) {
  scalar_table().relu_backward(y, dy, dx, n);
  dx[-1] = 0.0f;
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

}  // namespace

// The table runs as two test cases, the matrix products and every other
// entry, so that a suite run in chunks side by side can run them at once:
// under ThreadSanitizer the whole table takes minutes.
TEST_CASE("kernels: the kernel table's matrix products, fast against the reference at 1, 2 and 3 threads") {
  check_fast_table_entries(true);
}

TEST_CASE("kernels: every other case of the kernel table, fast against the reference at 1, 2 and 3 threads") {
  check_fast_table_entries(false);
}

// The guards of run_case (kernel_conformance.h) see a kernel that writes one
// element outside its output, on either side, and only that: the check that
// every case of every backend passes through must be able to fail.
TEST_CASE("kernels: the guards around each array catch a write outside it") {
  if (address_sanitizer::kOn) SF_SKIP("AddressSanitizer stops a write outside an array itself (SANITIZE=1)");
  const int64_t n = 17;
  KernelCase c("n 17");
  const Arg<float> y = c.input(random_vector(n, 1)), dy = c.input(random_vector(n, 2)), dx = c.result(n, kExact);
  c.call = [=](const Table& t, const Placed& p) { t.relu_backward(p[y], p[dy], p[dx], n); };
  struct Broken {
    decltype(HostTable::relu_backward) entry;
    int64_t first_byte;
  };
  const HostTable& before = active();
  for (const Broken& broken : {Broken{relu_backward_past_end, 4 * n}, Broken{relu_backward_before_start, -4}}) {
    HostTable table = S;
    table.relu_backward = broken.entry;
    set_active(table);
    const Run run = run_guarded(c, host_device(), 1);
    set_active(before);
    REQUIRE(run.clobbered.size() == 1);
    CHECK(run.clobbered[0].array == dx.index);
    CHECK(run.clobbered[0].byte == broken.first_byte);
  }
  CHECK(run_guarded(c, host_device(), 1).clobbered.empty());
}

TEST_CASE("kernels: gemm_bf16's cases at every bf16 GEMM level") {
  int checked = 0;
  for (const EntryCases& entry : every_entry_cases())
    if (std::string(entry.entry) == "gemm_bf16") {
      const Cases cases = entry.make();
      at_each_bf16_gemm([&](Bf16Gemm) { check_fast_table(entry.entry, cases); });
      ++checked;
    }
  CHECK(checked == 1);
}

namespace {

// gemm_bf16's cases of every layout at each size of ms x ns x ks, on the
// level the table runs now.
void check_bf16_sizes(const char* name, std::initializer_list<int64_t> ms, std::initializer_list<int64_t> ns,
                      std::initializer_list<int64_t> ks) {
  Cases cases;
  for (int64_t m : ms)
    for (int64_t n : ns)
      for (int64_t k : ks)
        for (int layout = 0; layout < 4; ++layout)
          cases.push_back(gemm_case({m, n, k, bool(layout & 1), bool(layout & 2), 0.5f, layout == 2 ? 0.0f : 1.5f,
                                     /*batch=*/2, /*pad=*/layout, /*shared_b=*/layout == 3},
                                    GemmEntry::kBf16));
  check_fast_table(name, cases);
}

}  // namespace

// The AMX level on its own: sizes on both sides of its 32 x 32 blocks, its
// 16 x 16 tiles and its steps of 32 along k (k padded with zero pairs), k past
// its K block (512), every layout. It is also the default wherever the CPU and
// the kernel allow it. Only x86-64 builds have the level (gemm.h).
#if defined(__x86_64__)
TEST_CASE("kernels: bf16 gemm at the AMX level, around its tiles and blocks") {
  if (!cpu_supports(Bf16Gemm::kAmxBf16)) SF_SKIP("this CPU has no AMX-BF16 (amx_bf16, amx_tile)");
  CHECK(bf16_gemm() == Bf16Gemm::kAmxBf16);
  check_bf16_sizes("gemm_bf16 (AMX)", {1, 16, 31, 33, 64}, {15, 32, 47}, {1, 31, 32, 33, 513});
}
#endif

// On ARM the bf16 level follows the CPU: BFDOT where the operating system
// reports BF16, else the portable level. `make test` runs this binary under
// qemu as a CPU of each kind and names the level each must choose
// (SF_EXPECT_BF16_GEMM), so a detection wrong either way fails. Then the
// BFDOT level around its 8 x 12 tiles, its pairs of k (odd k ends in a zero
// bf16) and its K block (1024), every layout; on a CPU without BF16 it is
// shown not to run.
#if defined(__aarch64__)
TEST_CASE("kernels: the bf16 GEMM level on ARM is BFDOT exactly where the CPU has BF16") {
  const bool bfdot = cpu_supports(Bf16Gemm::kNeonBf16);
  CHECK(bf16_gemm() == (bfdot ? Bf16Gemm::kNeonBf16 : Bf16Gemm::kPortable));
  if (const char* expected = std::getenv("SF_EXPECT_BF16_GEMM")) CHECK(std::string(to_string(bf16_gemm())) == expected);
  if (!bfdot) {
    CHECK_FALSE(set_bf16_gemm(Bf16Gemm::kNeonBf16));
    CHECK(bf16_gemm() == Bf16Gemm::kPortable);
    return;
  }
  check_bf16_sizes("gemm_bf16 (BFDOT)", {1, 7, 8, 9, 17}, {1, 11, 12, 13, 25}, {1, 2, 3, 8, 1025});
}
#endif

// log, sqrt, tanh and pow run the reference's loop in both tables (the fast one
// in parallel pieces): both against the C library's functions, bit for bit.
TEST_CASE("kernels: unary ops by library function, both tables") {
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    set_num_threads(threads);
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
  }
  set_num_threads(0);
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

#ifdef SF_SIMD_WIDTH  // set by the per-level builds (Makefile)
TEST_CASE("kernels: built for the expected SIMD level") { CHECK(simd::Vec::width == SF_SIMD_WIDTH); }
#endif
