// Backend conformance (in the spirit of ggml's test-backend-ops): every entry
// of the OpenCL kernel table against the scalar reference table, on random
// inputs with fixed seeds and awkward sizes. Inputs are uploaded with
// Device::write, the entry runs on the device, and its results, read back, must
// match the reference within 1e-4 relative (|got - want| <= 1e-4 max(1, |want|);
// GEMM's bound grows with sqrt(k)); dropout and the embedding gradient must
// match bit for bit. Without an OpenCL device every test reports itself skipped.
#ifdef SF_OPENCL
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/kernels/kernels.h"
#include "autograd/opencl/opencl.h"
#include "autograd/ops_common.h"
#include "base/error.h"
#include "kernel_checks.h"
#include "opencl_helpers.h"

using namespace sf;
using namespace sf::kernels;
using sf::testing::DeviceArray;
using sf::testing::opencl_device;

namespace {

// Kernels get Rows views as the ops prepare them (rows_view, with the
// operands' strides as ops_common.h's broadcast_strides gives them).
using sf::detail::broadcast_strides;

// ---- the device ---------------------------------------------------------------

const HostTable& S = scalar_table();

// ---- inputs -------------------------------------------------------------------

std::vector<float> random_floats(int64_t n, uint32_t seed, float low = -2.0f, float high = 2.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// `v` with NaN, +inf and -inf in a few places: kernels must treat them as the
// reference does (NaN propagates, as in PyTorch).
std::vector<float> with_edge_values(std::vector<float> v) {
  const float edges[] = {NAN, INFINITY, -INFINITY};
  for (size_t i = 3; i < v.size(); i += 11) v[i] = edges[(i / 11) % 3];
  return v;
}

// Small integers, so comparisons see equal values and maxima see ties.
std::vector<float> random_small_ints(int64_t n, uint32_t seed, int high = 3) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-high, high);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(dist(gen));
  return v;
}

std::vector<int32_t> random_ints(int64_t n, uint32_t seed, int low, int high) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(low, high);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(gen);
  return v;
}

// sum_to's view, as ops_reduce.cpp prepares it: x (contiguous) operand 0, out
// (of a shape x broadcasts from) operand 1.
Rows sum_to_rows(const Shape& x_shape, const Shape& out_shape) {
  return rows_view(x_shape, {contiguous_strides(x_shape), broadcast_strides(out_shape, x_shape)});
}

// ---- comparisons ----------------------------------------------------------------

// |got - want| <= tol max(1, |want|) everywhere (NaN where want is NaN);
// reports the first mismatch. Returns the largest error seen.
double check_close(const std::vector<float>& got, const std::vector<float>& want, double tol = 1e-4) {
  REQUIRE(got.size() == want.size());
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    if ((std::isnan(want[i]) && std::isnan(got[i])) || got[i] == want[i]) continue;  // NaN, or the same infinity
    double error = std::fabs(double(got[i]) - want[i]) / std::max(1.0, std::fabs(double(want[i])));
    if (!(error <= tol)) {
      FAIL_CHECK("element ", i, ": opencl ", got[i], " vs scalar ", want[i]);
      return error;
    }
    worst = std::max(worst, error);
  }
  return worst;
}

// Bit for bit, for results that involve no rounding differences (any NaN
// matches any NaN: their payloads are not specified).
template <class T>
void check_equal(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0 && !(std::isnan(double(got[i])) && std::isnan(double(want[i])))) {
      FAIL_CHECK("element ", i, ": opencl ", got[i], " vs scalar ", want[i]);
      return;
    }
}

const int64_t kSizes[] = {1, 7, 17, 63, 65, 129};

// Rows wider than what one work item takes of a row in the elementwise
// kernels (launch.h: kPiece, 256 columns) and than a row kernel's group in GPU
// shapes (128 items), so that every row loop goes round more than once, and
// multiples of neither (nor of 16, a CPU-shaped item's vector).
const int64_t kWideCols[] = {257, 1000, 4099};

// `narrow` then kWideCols: the widths a row or column kernel is checked on.
std::vector<int64_t> and_wide(std::initializer_list<int64_t> narrow) {
  std::vector<int64_t> widths(narrow);
  widths.insert(widths.end(), std::begin(kWideCols), std::end(kWideCols));
  return widths;
}

}  // namespace

TEST_SUITE("opencl") {
namespace {

TEST_CASE("opencl: the device moves bytes: write, read, copy and fill with offsets") {
  SF_NEED_OPENCL();
  Device* dev = opencl_device();
  CHECK(std::string(dev->name()) == "opencl");
  CHECK(dev->description().rfind("opencl: ", 0) == 0);
  CHECK_FALSE(dev->host_addressable());
  MESSAGE(dev->description());

  std::vector<float> host = random_floats(65, 1);
  DeviceArray<float> a(host), b(std::vector<float>(65, 0.0f));
  dev->copy(a.mem() + 5, b.mem() + 7, 50 * sizeof(float));
  dev->fill(b.mem() + 60, 0x3f800000u, 5);  // 1.0f
  dev->synchronize();
  std::vector<float> want(65, 0.0f);
  std::copy(host.begin() + 5, host.begin() + 55, want.begin() + 7);
  std::fill(want.begin() + 60, want.end(), 1.0f);
  check_equal(b.read(), want);
  check_equal(a.read(), host);
}

// The shapes come from the device's type unless SCRATCHFORMER_OPENCL_SHAPES
// forces them (make test runs this suite with each); the description says
// which are in use.
TEST_CASE("opencl: the device description names the launch shapes in use") {
  SF_NEED_OPENCL();
  std::string description = opencl_device()->description();
  const char* forced = std::getenv("SCRATCHFORMER_OPENCL_SHAPES");
  if (forced && *forced)
    CHECK(description.ends_with(std::string(", ") + forced + " shapes"));
  else
    CHECK((description.ends_with(", cpu shapes") || description.ends_with(", gpu shapes")));
}

// gemm, every layout, odd sizes, alpha/beta, broadcast and strided batches.
void check_gemm() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  double worst = 0.0;
  int cases = 0;
  auto run = [&](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, float beta, int64_t batch,
                 bool share_b, int64_t pad) {
    CAPTURE(ta);
    CAPTURE(tb);
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    CAPTURE(alpha);
    CAPTURE(beta);
    CAPTURE(batch);
    // Leading dimensions `pad` wider than the matrices, as for a slice.
    int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    int64_t stride_a = (ta ? k : m) * lda, stride_b = share_b ? 0 : (tb ? n : k) * ldb, stride_c = m * ldc;
    auto seed = static_cast<uint32_t>(m * 10007 + n * 101 + k);
    std::vector<float> a = random_floats(stride_a * batch, seed, -1, 1);
    std::vector<float> b = random_floats((tb ? n : k) * ldb * (share_b ? 1 : batch), seed + 1, -1, 1);
    std::vector<float> c = random_floats(stride_c * batch, seed + 2, -1, 1);
    if (beta == 0.0f) std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
    DeviceArray<float> da(a), db(b), dc(c);
    K.gemm(ta, tb, m, n, k, alpha, da.mem(), lda, stride_a, db.mem(), ldb, stride_b, beta, dc.mem(), ldc,
           stride_c, batch);
    S.gemm(ta, tb, m, n, k, alpha, a.data(), lda, stride_a, b.data(), ldb, stride_b, beta, c.data(), ldc,
           stride_c, batch);
    // Padding columns of C stay as they were (NaN with beta 0): compared as NaN == NaN.
    worst = std::max(worst, check_close(dc.read(), c, 1e-4 * std::sqrt(double(std::max<int64_t>(k, 1)))));
    ++cases;
  };
  for (int layout = 0; layout < 4; ++layout) {
    bool ta = layout & 1, tb = layout & 2;
    for (int64_t m : kSizes)
      for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{65}, int64_t{129}})
        for (int64_t k : {int64_t{1}, int64_t{5}, int64_t{63}, int64_t{129}}) run(ta, tb, m, n, k, 1.0f, 0.0f, 1, false, 0);
    run(ta, tb, 7, 17, 5, 0.5f, 1.5f, 3, false, 0);    // a per-head product, batched
    run(ta, tb, 1, 1, 1, -2.0f, 0.25f, 2, true, 0);
    run(ta, tb, 65, 63, 17, 1.0f, 1.0f, 4, true, 3);   // a weight shared by the batch (stride 0)
    run(ta, tb, 64, 64, 64, 0.125f, 0.0f, 5, false, 0);
    run(ta, tb, 65, 129, 17, 1.0f, 1.0f, 3, true, 3);  // blocked kernel, shared (copied) B, both edges
    run(ta, tb, 129, 130, 67, 1.0f, -1.0f, 1, false, 5);
    run(ta, tb, 17, 9, 0, 1.0f, 0.5f, 2, false, 0);    // k = 0: C = beta C
    // Each blocking of the CPU devices' kernel (autograd/opencl/gemm.h): n a
    // multiple of 32 (attention's per-head products), and n > 256 not a
    // multiple of 64 (op(B) padded to whole blocks).
    run(ta, tb, 32, 32, 32, 1.0f, 0.0f, 6, false, 0);
    run(ta, tb, 33, 96, 31, 1.0f, 0.5f, 2, false, 2);
    run(ta, tb, 13, 300, 40, 1.0f, 0.0f, 1, false, 0);
  }
  MESSAGE("gemm: ", cases, " cases, largest relative error ", worst);
}

// binary, predicate, predicate_int and fill_where broadcast.
void check_broadcasting() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {
      {{7, 17}, {7, 17}, {7, 17}},
      {{2, 3, 4, 5}, {3, 1, 5}, {2, 3, 4, 5}},
      {{3, 1, 5}, {2, 3, 4, 5}, {2, 3, 4, 5}},
      {{65, 129}, {}, {65, 129}},          // a scalar operand
      {{5, 4099}, {4099}, {5, 4099}},      // rows of several pieces (kWideCols)
      {{2, 3, 1, 257}, {3, 5, 1}, {2, 3, 5, 257}},
      {{}, {63}, {63}},
      {{1}, {1}, {1}},
      {{0, 5}, {5}, {0, 5}},               // empty
      {{5, 1, 7}, {1, 3, 1}, {5, 3, 7}},   // both broadcast
      {{2, 1, 3, 1, 2, 1, 2, 3}, {1, 2, 3, 2, 1, 2, 1, 3}, {2, 2, 3, 2, 2, 2, 2, 3}},  // 8 dims
      // 9 dims, none merged: 8 outer dims, Rows::kMaxDims
      {{2, 1, 2, 1, 2, 1, 2, 1, 2}, {1, 2, 1, 2, 1, 2, 1, 2, 1}, Shape(9, 2)},
  };
  for (const Case& cs : cases) {
    CAPTURE(cs.out.size());
    Rows rows = rows_view(cs.out, {broadcast_strides(cs.a, cs.out), broadcast_strides(cs.b, cs.out)});
    int64_t n = numel(cs.out);
    std::vector<float> a = random_small_ints(numel(cs.a), 11), b = random_small_ints(numel(cs.b), 12);
    for (float& x : b) x = x == 0.0f ? 0.5f : x;  // no division by zero
    DeviceArray<float> da(a), db(b), dout{std::vector<float>(n)};
    DeviceArray<int32_t> dmask{std::vector<int32_t>(n)};
    for (Binary op : kBinaryCodes) {
      std::vector<float> want(n);
      S.binary(op, a.data(), b.data(), want.data(), rows);
      K.binary(op, da.mem(), db.mem(), dout.mem(), rows);
      check_close(dout.read(), want);
    }
    for (Predicate op : kPredicateCodes) {
      CAPTURE(static_cast<int>(op));
      std::vector<int32_t> want(n);
      S.predicate(op, a.data(), b.data(), want.data(), rows);
      K.predicate(op, da.mem(), db.mem(), dmask.mem(), rows);
      check_equal(dmask.read(), want);

      std::vector<int32_t> ia = random_ints(numel(cs.a), 13, -2, 2), ib = random_ints(numel(cs.b), 14, -2, 2);
      DeviceArray<int32_t> dia(ia), dib(ib);
      S.predicate_int(op, ia.data(), ib.data(), want.data(), rows);
      K.predicate_int(op, dia.mem(), dib.mem(), dmask.mem(), rows);
      check_equal(dmask.read(), want);
    }
    // fill_where with a as x and b's shape as the mask's.
    std::vector<int32_t> mask = random_ints(numel(cs.b), 15, 0, 1);
    DeviceArray<int32_t> dm(mask);
    std::vector<float> want(n);
    S.fill_where(a.data(), mask.data(), -1e9f, want.data(), rows);
    K.fill_where(da.mem(), dm.mem(), -1e9f, dout.mem(), rows);
    check_equal(dout.read(), want);
  }
  // A view beyond the kernels' int32 indexing is a clear error, not a launch.
  Rows huge;
  huge.cols = int64_t{1} << 31;
  DeviceArray<float> one(std::vector<float>(1));
  CHECK_THROWS_WITH_AS(K.binary(Binary::Add, one.mem(), one.mem(), one.mem(), huge),
                       doctest::Contains("exceeds the kernels' int32 indexing"), Error);
}

// unary, every op.
void check_unary() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  for (int64_t n : kSizes) {
    // Positive inputs for log, sqrt and pow.
    std::vector<float> x = random_floats(n, 21, 0.1f, 3.0f), y(n);
    std::vector<float> signed_x = with_edge_values(random_floats(n, 22));
    for (Unary op : kUnaryCodes) {
      CAPTURE(static_cast<int>(op));
      bool positive = op == Unary::Log || op == Unary::Sqrt || op == Unary::PowScalar || op == Unary::RDivScalar;
      const std::vector<float>& in = positive ? x : signed_x;
      DeviceArray<float> dx(in), dy(y);
      S.unary(op, in.data(), y.data(), n, 1.7f);
      K.unary(op, dx.mem(), dy.mem(), n, 1.7f);
      check_close(dy.read(), y);
    }
  }
}

// sum_to (over broadcast dims, and over an axis kept as size 1) and max_axis.
void check_reductions() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  struct SumCase {
    Shape x, out;
  };
  const SumCase sums[] = {
      {{2, 3, 4, 5}, {3, 1, 5}}, {{2, 3, 4, 5}, {}}, {{2, 3, 4, 5}, {2, 1, 4, 1}}, {{2, 3, 4, 5}, {2, 3, 4, 5}},
      {{2, 3, 4, 5}, {5}},
      // Wide rows (kWideCols), summed down their columns and along them.
      {{3, 4099}, {4099}}, {{7, 1000}, {7, 1}}, {{2, 5, 257}, {2, 1, 257}}};
  for (const auto& [x_shape, out_shape] : sums) {
    CAPTURE(x_shape.back());
    CAPTURE(out_shape.size());
    // sum_to overwrites its output (kernels.h): each side starts from different values.
    std::vector<float> x = random_floats(numel(x_shape), 31), out(numel(out_shape), NAN);
    DeviceArray<float> dx(x), dout(random_floats(numel(out_shape), 32));
    S.sum_to(x.data(), out.data(), sum_to_rows(x_shape, out_shape));
    K.sum_to(dx.mem(), dout.mem(), sum_to_rows(x_shape, out_shape));
    check_close(dout.read(), out);
  }
  for (int64_t outer : {1, 7})
    for (int64_t n : and_wide({1, 17, 129}))
      for (int64_t inner : {1, 65}) {
        CAPTURE(outer);
        CAPTURE(n);
        CAPTURE(inner);
        std::vector<float> x = with_edge_values(random_small_ints(outer * n * inner, 33)), out(outer * inner);
        std::vector<int32_t> arg(outer * inner);
        DeviceArray<float> dx(x), dout(out);
        DeviceArray<int32_t> darg(arg);
        Rows rows = sum_to_rows({outer, n, inner}, {outer, 1, inner});
        S.sum_to(x.data(), out.data(), rows);
        K.sum_to(dx.mem(), dout.mem(), rows);
        check_close(dout.read(), out);
        S.max_axis(x.data(), outer, n, inner, out.data(), arg.data());
        K.max_axis(dx.mem(), outer, n, inner, dout.mem(), darg.mem());
        check_equal(dout.read(), out);
        check_equal(darg.read(), arg);  // ties: the first maximum
        K.max_axis(dx.mem(), outer, n, inner, dout.mem(), {});
        check_equal(dout.read(), out);
      }
}

// log_softmax and its backward pass, and masked_softmax without a mask.
void check_softmax() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  for (int64_t rows : {1, 7, 65})
    for (int64_t cols : and_wide({1, 17, 129})) {
      CAPTURE(rows);
      CAPTURE(cols);
      int64_t n = rows * cols;
      std::vector<float> x = random_floats(n, 41, -10, 10), dy = random_floats(n, 42), y(n), dx(n);
      DeviceArray<float> dx_in(x), ddy(dy), dout(y), dgrad(dx);
      Rows view = rows_view({rows, cols}, {Shape(2, 0)}, true);
      S.masked_softmax(x.data(), nullptr, view, 1.0f, y.data());
      K.masked_softmax(dx_in.mem(), {}, view, 1.0f, dout.mem());
      check_close(dout.read(), y);
      S.masked_softmax_backward(y.data(), dy.data(), nullptr, view, 1.0f, dx.data());
      K.masked_softmax_backward(dout.mem(), ddy.mem(), {}, view, 1.0f, dgrad.mem());
      check_close(dgrad.read(), dx);

      S.log_softmax(x.data(), y.data(), rows, cols);
      K.log_softmax(dx_in.mem(), dout.mem(), rows, cols);
      check_close(dout.read(), y);
      S.log_softmax_backward(y.data(), dy.data(), dx.data(), rows, cols);
      K.log_softmax_backward(dout.mem(), ddy.mem(), dgrad.mem(), rows, cols);
      check_close(dgrad.read(), dx);
    }
}

// masked_softmax and its backward pass, broadcast masks.
void check_masked_softmax() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  for (int64_t keys : and_wide({7})) {
    const Shape shape = {2, 3, 5, keys};  // batch, heads, queries, keys
    // An empty mask shape: no mask.
    for (const Shape& mask_shape : {Shape{2, 1, 1, keys}, Shape{2, 1, 5, keys}, Shape{1, 1, 5, keys},
                                    Shape{2, 3, 5, keys}, Shape{2, 1, 5, 1}, Shape{}}) {
      CAPTURE(keys);
      CAPTURE(mask_shape.size());
      int64_t n = numel(shape);
      bool has_mask = !mask_shape.empty();
      Shape ms = has_mask ? broadcast_strides(mask_shape, shape) : Shape(4, 0);
      std::vector<int32_t> mask = random_ints(has_mask ? numel(mask_shape) : 1, 51, 0, 1);
      // A fully hidden row.
      if (has_mask) std::fill(mask.begin(), mask.begin() + std::min(keys, numel(mask_shape)), 0);
      std::vector<float> x = random_floats(n, 52, -5, 5), dy = random_floats(n, 53), y(n), dx(n);
      DeviceArray<float> dxin(x), ddy(dy), dout(y), dgrad(dx);
      DeviceArray<int32_t> dmask(mask);
      Rows rows = rows_view(shape, {ms}, true);
      const int32_t* host_mask = has_mask ? mask.data() : nullptr;
      Mem<const int32_t> device_mask = has_mask ? Mem<const int32_t>(dmask.mem()) : Mem<const int32_t>();
      S.masked_softmax(x.data(), host_mask, rows, 0.35f, y.data());
      K.masked_softmax(dxin.mem(), device_mask, rows, 0.35f, dout.mem());
      check_close(dout.read(), y);
      S.masked_softmax_backward(y.data(), dy.data(), host_mask, rows, 0.35f, dx.data());
      K.masked_softmax_backward(dout.mem(), ddy.mem(), device_mask, rows, 0.35f, dgrad.mem());
      check_close(dgrad.read(), dx);
    }
  }
}

// layer_norm and its backward pass.
void check_layer_norm() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  for (int64_t rows : {1, 7, 65})
    for (int64_t cols : and_wide({2, 17, 129})) {
      CAPTURE(rows);
      CAPTURE(cols);
      int64_t n = rows * cols;
      std::vector<float> x = random_floats(n, 61), alpha = random_floats(cols, 62), bias = random_floats(cols, 63);
      // A constant row: std 0. Its dx is (g - mean(g)) / eps, which magnifies
      // the rounding of mean(g) a million times: over a wide row's sum (in
      // another order than the reference's) that exceeds the tolerance.
      if (cols < kWideCols[0]) std::fill(x.begin(), x.begin() + cols, 0.75f);
      std::vector<float> dy = random_floats(n, 64), y(n), mean(rows), std(rows), dx(n), dalpha(cols), dbias(cols);
      DeviceArray<float> dxin(x), dal(alpha), dbi(bias), ddy(dy), dout(y), dmean(mean), dstd(std), dgrad(dx),
          dga(dalpha), dgb(dbias);
      S.layer_norm(x.data(), alpha.data(), bias.data(), rows, cols, 1e-6f, y.data(), mean.data(), std.data());
      K.layer_norm(dxin.mem(), dal.mem(), dbi.mem(), rows, cols, 1e-6f, dout.mem(), dmean.mem(), dstd.mem());
      check_close(dout.read(), y);
      check_close(dmean.read(), mean);
      check_close(dstd.read(), std);
      S.layer_norm_backward(x.data(), alpha.data(), mean.data(), std.data(), dy.data(), rows, cols, 1e-6f,
                            dx.data(), dalpha.data(), dbias.data());
      K.layer_norm_backward(dxin.mem(), dal.mem(), dmean.mem(), dstd.mem(), ddy.mem(), rows, cols, 1e-6f,
                            dgrad.mem(), dga.mem(), dgb.mem());
      check_close(dgrad.read(), dx);
      check_close(dga.read(), dalpha);
      check_close(dgb.read(), dbias);
    }
}

// bias_relu, relu_backward, dropout and dropout_add (bit-exact masks).
void check_relu_and_dropout() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  for (int64_t rows : {1, 7, 65})
    for (int64_t cols : and_wide({1, 17, 129})) {
      CAPTURE(rows);
      CAPTURE(cols);
      int64_t n = rows * cols;
      std::vector<float> x = with_edge_values(random_floats(n, 71)), bias = random_floats(cols, 72),
                         dy = random_floats(n, 73), y(n),
                         dx(n);
      DeviceArray<float> dxin(x), db(bias), ddy(dy), dout(y), dgrad(dx);
      S.bias_relu(x.data(), bias.data(), rows, cols, y.data());
      K.bias_relu(dxin.mem(), db.mem(), rows, cols, dout.mem());
      check_equal(dout.read(), y);
      S.relu_backward(y.data(), dy.data(), dx.data(), n);
      K.relu_backward(dout.mem(), ddy.mem(), dgrad.mem(), n);
      check_equal(dgrad.read(), dx);
      for (uint32_t seed : {0u, 1u, 0xdeadbeefu})
        for (uint32_t threshold : {0u, 0x40000000u, 0xF0000000u}) {
          float scale = 1.0f / (1.0f - threshold / 4294967296.0f);
          S.dropout(x.data(), y.data(), n, scale, seed, threshold);
          K.dropout(dxin.mem(), dout.mem(), n, scale, seed, threshold);
          check_equal(dout.read(), y);
          S.dropout_add(dy.data(), x.data(), y.data(), n, scale, seed, threshold);
          K.dropout_add(ddy.mem(), dxin.mem(), dout.mem(), n, scale, seed, threshold);
          check_equal(dout.read(), y);
        }
    }
}

// dot: the device's partial sums against the reference's double sum.
void check_dot() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{65}, int64_t{4097}, int64_t{1000003}}) {
    CAPTURE(n);
    std::vector<float> a = random_floats(n, 81), b = random_floats(n, 82);
    DeviceArray<float> da(a), db(b);
    float want = 0.0f;
    S.dot(a.data(), b.data(), n, &want);
    DeviceArray<float> out(std::vector<float>(1, NAN));
    K.dot(da.mem(), db.mem(), n, out.mem());
    float got = out.read()[0];
    // Relative to the sum of |a b|: the scale a float sum's rounding is measured on.
    double scale = 0.0;
    for (int64_t i = 0; i < n; ++i) scale += std::fabs(double(a[i]) * b[i]);
    CHECK(std::fabs(got - want) <= 1e-6 * scale);
  }
}

// adam_step and sgd_step.
void check_optimizer_steps() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  for (int64_t n : kSizes) {
    CAPTURE(n);
    std::vector<float> g = random_floats(n, 92);
    DeviceArray<float> dg(g);
    for (float l2 : {0.0f, 0.01f})
      for (float decay : {0.0f, 1e-3f}) {
        std::vector<float> p = random_floats(n, 91), m = random_floats(n, 93), v = random_floats(n, 94, 0, 1);
        DeviceArray<float> dp(p), dm(m), dv(v);
        S.adam_step(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.98f, 1e-9f, 0.2f, l2, decay);
        K.adam_step(dp.mem(), dg.mem(), dm.mem(), dv.mem(), n, 1e-3f, 0.9f, 0.98f, 1e-9f, 0.2f, l2, decay);
        check_close(dp.read(), p);
        check_close(dm.read(), m);
        check_close(dv.read(), v);
      }
    for (int variant = 0; variant < 4; ++variant) {
      bool momentum = variant > 0, nesterov = variant == 3, first = variant == 1;
      CAPTURE(variant);
      std::vector<float> p = random_floats(n, 95), buf = random_floats(n, 96);
      DeviceArray<float> dp(p), dbuf(buf);
      S.sgd_step(p.data(), g.data(), momentum ? buf.data() : nullptr, n, 0.1f, 0.9f, 0.01f, nesterov, first);
      K.sgd_step(dp.mem(), dg.mem(), momentum ? dbuf.mem() : Mem<float>(), n, 0.1f, 0.9f, 0.01f, nesterov, first);
      check_close(dp.read(), p);
      check_close(dbuf.read(), buf);
    }
  }
}

// topk, ties to the lower index.
void check_topk() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  for (int64_t rows : {1, 7, 65})
    for (int64_t cols : and_wide({1, 7, 129}))
      for (int64_t k : {1, 4})
        if (k <= cols) {
          CAPTURE(rows);
          CAPTURE(cols);
          CAPTURE(k);
          std::vector<float> x = random_small_ints(rows * cols, 101), values(rows * k);
          std::vector<int32_t> indices(rows * k);
          DeviceArray<float> dx(x), dv(values);
          DeviceArray<int32_t> di(indices);
          S.topk(x.data(), rows, cols, k, values.data(), indices.data());
          K.topk(dx.mem(), rows, cols, k, dv.mem(), di.mem());
          check_equal(dv.read(), values);
          check_equal(di.read(), indices);
        }
}

// copy_rows and copy_strided (permutes).
void check_strided_copies() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  // Rows of 5 ints out of rows of 17, into rows of 9 (a slice then a concat).
  for (int64_t rows : {1, 7, 65}) {
    std::vector<int32_t> src = random_ints(rows * 17, 111, -100, 100), dst = random_ints(rows * 9, 112, -5, 5);
    DeviceArray<int32_t> ds(src), dd(dst);
    S.copy_rows(src.data() + 3, 17 * 4, dst.data() + 2, 9 * 4, rows, 5 * 4);
    K.copy_rows(ds.mem() + 3, 17 * 4, dd.mem() + 2, 9 * 4, rows, 5 * 4);
    check_equal(dd.read(), dst);
  }
  struct Case {
    Shape shape;
    std::vector<int> perm;
  };
  const Case cases[] = {{{7, 17}, {1, 0}},
                        {{65, 129}, {1, 0}},
                        {{2, 3, 4}, {0, 2, 1}},
                        {{2, 7, 3, 5}, {0, 2, 1, 3}},  // [batch, seq, heads, d] -> [batch, heads, seq, d]
                        {{2, 3, 4, 5}, {3, 2, 1, 0}},
                        {{1, 7, 1, 5}, {2, 3, 0, 1}},
                        {{3, 0, 2}, {2, 0, 1}}};  // empty
  for (const Case& cs : cases) {
    // y is x permuted: x read through its strides permuted to y's dims (ops_shape.cpp).
    Shape x_strides = contiguous_strides(cs.shape), y_shape, read;
    for (int d : cs.perm) {
      y_shape.push_back(cs.shape[d]);
      read.push_back(x_strides[d]);
    }
    Rows rows = rows_view(y_shape, {read});
    std::vector<float> x = random_floats(numel(cs.shape), 113), y(x.size());
    DeviceArray<float> dx(x), dy(y);
    S.copy_strided(x.data(), y.data(), rows);
    K.copy_strided(dx.mem(), dy.mem(), rows);
    check_equal(dy.read(), y);
  }
}

// gather_rows and scatter_add_rows (deterministic with repeated ids).
void check_embedding_rows() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  for (int64_t vocab : {1, 17, 129})
    for (int64_t n : {1, 7, 65})
      for (int64_t dim : and_wide({1, 17, 64})) {
        CAPTURE(vocab);
        CAPTURE(n);
        CAPTURE(dim);
        std::vector<float> table = random_floats(vocab * dim, 121), out(n * dim);
        std::vector<int32_t> ids = random_ints(n, 122, 0, static_cast<int>(vocab) - 1);
        DeviceArray<float> dt(table), dout(out);
        DeviceArray<int32_t> di(ids);
        S.gather_rows(table.data(), ids.data(), n, dim, out.data());
        K.gather_rows(dt.mem(), di.mem(), n, dim, dout.mem());
        check_equal(dout.read(), out);

        std::vector<float> grad_out = random_floats(n * dim, 123), grad_table = random_floats(vocab * dim, 124);
        DeviceArray<float> dgo(grad_out), dgt(grad_table);
        S.scatter_add_rows(grad_out.data(), ids.data(), n, dim, grad_table.data());
        K.scatter_add_rows(dgo.mem(), di.mem(), n, dim, dgt.mem());
        check_equal(dgt.read(), grad_table);
      }
  // An id outside the table writes a zero row and reads nothing.
  std::vector<float> table = random_floats(4 * 8, 125);
  DeviceArray<float> dt(table), dout(std::vector<float>(3 * 8, 7.0f));
  DeviceArray<int32_t> di(std::vector<int32_t>{2, 1000000, -5});
  K.gather_rows(dt.mem(), di.mem(), 3, 8, dout.mem());
  std::vector<float> want(3 * 8, 0.0f);
  std::copy(table.begin() + 16, table.begin() + 24, want.begin());
  check_equal(dout.read(), want);
}

// cross_entropy and its backward pass, ignored rows, label smoothing.
void check_cross_entropy() {
  Device* dev = opencl_device();
  const Table& K = dev->kernels();
  const int32_t ignore = 0;
  for (int64_t rows : {1, 7, 65})
    for (int64_t cols : and_wide({2, 17}))
      for (float eps : {0.0f, 0.1f}) {
        CAPTURE(rows);
        CAPTURE(cols);
        CAPTURE(eps);
        int64_t n = rows * cols;
        std::vector<float> logits = random_floats(n, 131, -8, 8), loss(rows), counted(rows), lp(n), dl(n);
        std::vector<int32_t> targets = random_ints(rows, 132, 0, static_cast<int>(cols) - 1);
        if (rows > 1) targets[1] = static_cast<int32_t>(cols);  // out of range: a NaN loss
        std::vector<float> scale = {0.37f};
        DeviceArray<float> dlog(logits), dloss(loss), dcount(counted), dlp(lp), ddl(dl), dscale(scale);
        DeviceArray<int32_t> dt(targets);
        S.cross_entropy(logits.data(), targets.data(), rows, cols, ignore, eps, loss.data(), counted.data(), lp.data());
        K.cross_entropy(dlog.mem(), dt.mem(), rows, cols, ignore, eps, dloss.mem(), dcount.mem(), dlp.mem());
        check_close(dloss.read(), loss);
        check_equal(dcount.read(), counted);
        check_close(dlp.read(), lp);
        if (rows > 1) CHECK(std::isnan(dloss.read()[1]));
        S.cross_entropy_backward(lp.data(), targets.data(), rows, cols, ignore, eps, scale.data(), dl.data());
        K.cross_entropy_backward(dlp.mem(), dt.mem(), rows, cols, ignore, eps, dscale.mem(), ddl.mem());
        check_close(ddl.read(), dl);
      }
}

}  // namespace

// The check of each entry of the kernel table (tests/kernel_checks.h).
// The groups the conformance table (tests/kernel_checks.h) names.
void check_layer_norm_relu_dropout() {
  check_layer_norm();
  check_relu_and_dropout();
}

void check_dot_and_optimizers() {
  check_dot();
  check_optimizer_steps();
}

void check_rows() {
  check_softmax();
  check_masked_softmax();
  check_cross_entropy();
}

// gemm_bf16: bf16 operands (random values rounded), every layout, odd k,
// broadcast and strided batches, against the float64 reference of the same
// bf16 values.
void check_gemm_bf16() {
  const Table& K = opencl_device()->kernels();
  auto to_bf16s = [](const std::vector<float>& x) {
    std::vector<bf16> out(x.size());
    S.float_to_bf16(x.data(), out.data(), static_cast<int64_t>(x.size()));
    return out;
  };
  for (int layout = 0; layout < 4; ++layout)
    for (auto [m, n, k, batch, share_b] : {std::tuple{1, 1, 1, 1, false}, {17, 65, 31, 2, true},
                                            {65, 33, 130, 3, false}, {8, 300, 64, 1, false}}) {
      const bool ta = layout & 1, tb = layout & 2;
      CAPTURE(layout);
      CAPTURE(m);
      const int64_t stride_a = int64_t{m} * k, stride_b = share_b ? 0 : int64_t{k} * n, stride_c = int64_t{m} * n;
      const std::vector<bf16> a = to_bf16s(random_floats(stride_a * batch, m + 1)),
                              b = to_bf16s(random_floats(int64_t{k} * n * (share_b ? 1 : batch), n + 2));
      std::vector<float> c(stride_c * batch, 0.0f);
      DeviceArray<bf16> da(a), db(b);
      DeviceArray<float> dc(c);
      const int64_t lda = ta ? m : k, ldb = tb ? k : n;
      K.gemm_bf16(ta, tb, m, n, k, 1.0f, da.mem(), lda, stride_a, db.mem(), ldb, stride_b, 0.0f, dc.mem(), n,
                  stride_c, batch);
      S.gemm_bf16(ta, tb, m, n, k, 1.0f, a.data(), lda, stride_a, b.data(), ldb, stride_b, 0.0f, c.data(), n,
                  stride_c, batch);
      check_close(dc.read(), c, 1e-4 * std::sqrt(double(k)));
    }
}

// A conversion on the device against the reference's, bit for bit.
template <class From, class To, class Kernel, class Reference>
void check_converts_as_reference(const std::vector<From>& x, Kernel kernel, Reference reference) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<To> want(x.size());
  reference(x.data(), want.data(), n);
  DeviceArray<From> dx(x);
  DeviceArray<To> dy(std::vector<To>(x.size()));
  kernel(dx.mem(), dy.mem(), n);
  std::vector<To> got = dy.read();
  CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(To)) == 0);
}

// float_to_bf16 and bf16_to_float: every bf16 value widened, and floats with
// NaN, infinities and exact ties rounded.
void check_bf16_conversions() {
  const Table& K = opencl_device()->kernels();
  std::vector<bf16> every(1 << 16);
  for (size_t i = 0; i < every.size(); ++i) every[i].bits = static_cast<uint16_t>(i);
  check_converts_as_reference<bf16, float>(every, K.bf16_to_float, S.bf16_to_float);
  std::vector<float> x = with_edge_values(random_floats(1031, 9, -1e3f, 1e3f));
  for (size_t i = 2; i < x.size(); i += 7)
    x[i] = std::bit_cast<float>((std::bit_cast<uint32_t>(x[i]) & 0xFFFF0000u) | 0x8000u);  // a tie
  check_converts_as_reference<float, bf16>(x, K.float_to_bf16, S.float_to_bf16);
}

void check_copies() {
  check_strided_copies();
  check_embedding_rows();
}


TEST_CASE("opencl: every kernel entry against the scalar reference") {
  SF_NEED_OPENCL();
  sf::testing::run_kernel_checks(SF_KERNEL_CHECK_TABLE);
}

}  // TEST_SUITE("opencl")

#endif  // SF_OPENCL
