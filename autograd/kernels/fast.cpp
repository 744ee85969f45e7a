// The fast kernels: SIMD (simd.h) and threads (thread_pool.h). Each one computes
// what its scalar reference in scalar.cpp computes; shapes the fast path does not
// cover fall back to the reference. Tested against scalar.cpp in
// tests/test_kernels.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gemm.h"
#include "kernels.h"
#include "simd.h"
#include "thread_pool.h"

namespace sf::kernels::fast {
namespace {

using simd::Vec;
constexpr int W = Vec::width;

// Work per parallel chunk: large enough that waking a thread pays off.
constexpr int64_t kGrainElements = 1 << 14;

int64_t grain_rows(int64_t cols) { return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(cols, 1)); }

// parallel_for over [0, n) in chunks of whole vectors: only the range's last
// elements are left to a scalar tail, so each element is computed the same way
// whatever the number of threads.
template <class F>
void parallel_for_vectors(int64_t n, const F& f) {
  parallel_for(0, (n + W - 1) / W, kGrainElements / W,
               [&](int64_t b, int64_t e) { f(b * W, std::min(e * W, n)); });
}

// --- elementwise with broadcasting -------------------------------------------------

// Runs f(offset_a, offset_b, n, step_a, step_b, offset_out) over the rows of
// `rows` (kernels.h: dims already merged), whose operands step by 0 or 1 along
// a row, in parallel; a single long row is split. Returns false when an operand
// has another step along the row (the caller falls back).
template <class F>
bool for_each_row(const Rows& rows, F f) {
  const int64_t n = rows.cols, step_a = rows.col_strides[0], step_b = rows.col_strides[1];
  if (step_a > 1 || step_b > 1) return false;
  if (rows.count == 1) {
    parallel_for(0, n, kGrainElements,
                 [&](int64_t b, int64_t e) { f(b * step_a, b * step_b, e - b, step_a, step_b, b); });
    return true;
  }
  parallel_for(0, rows.count, grain_rows(n), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) f(rows.offset(0, r), rows.offset(1, r), n, step_a, step_b, r * n);
  });
  return true;
}

// `op` is generic: it runs on Vec for the body and on float for the tail.
template <class Op>
void binary_row(const float* a, int64_t step_a, const float* b, int64_t step_b, float* out,
                int64_t n, Op op) {
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    Vec va = step_a ? Vec::load(a + i) : Vec::set1(*a);
    Vec vb = step_b ? Vec::load(b + i) : Vec::set1(*b);
    op(va, vb).store(out + i);
  }
  for (; i < n; ++i) out[i] = op(a[i * step_a], b[i * step_b]);
}

void binary(Binary op, const float* a, const float* b, float* out, const Rows& rows) {
  bool done = for_each_row(rows, [&](int64_t oa, int64_t ob, int64_t n, int64_t sa, int64_t sb, int64_t o) {
    const float *pa = a + oa, *pb = b + ob;
    float* po = out + o;
    switch (op) {
      case Binary::Add: binary_row(pa, sa, pb, sb, po, n, [](auto x, auto y) { return x + y; }); break;
      case Binary::Sub: binary_row(pa, sa, pb, sb, po, n, [](auto x, auto y) { return x - y; }); break;
      case Binary::Mul: binary_row(pa, sa, pb, sb, po, n, [](auto x, auto y) { return x * y; }); break;
      case Binary::Div: binary_row(pa, sa, pb, sb, po, n, [](auto x, auto y) { return x / y; }); break;
    }
  });
  if (!done) scalar_table().binary(op, a, b, out, rows);
}

void fill_where(const float* x, const int32_t* where, float value, float* out, const Rows& rows) {
  bool done = for_each_row(rows, [&](int64_t ox, int64_t ow, int64_t n, int64_t sx, int64_t sw, int64_t o) {
    // Locals, not the closure's references, so the stores cannot alias them.
    const int32_t* w = where + ow;
    const float* xs = x + ox;
    float* dst = out + o;
    const float fill = value;
    for (int64_t i = 0; i < n; ++i) dst[i] = w[i * sw] != 0 ? fill : xs[i * sx];
  });
  if (!done) scalar_table().fill_where(x, where, value, out, rows);
}

void unary(Unary op, const float* x, float* y, int64_t n, float s) {
  auto vec_map = [&](auto f) {
    parallel_for_vectors(n, [&](int64_t b, int64_t e) {
      int64_t i = b;
      for (; i + W <= e; i += W) f(Vec::load(x + i)).store(y + i);
      if (i < e) scalar_table().unary(op, x + i, y + i, e - i, s);
    });
  };
  Vec vs = Vec::set1(s), zero = Vec::set1(0.0f), one = Vec::set1(1.0f);
  switch (op) {
    // -0 - x, not 0 - x: negating +0 gives -0, as -x does (and PyTorch).
    case Unary::Neg: return vec_map([&](Vec v) { return Vec::set1(-0.0f) - v; });
    case Unary::Exp: return vec_map([&](Vec v) { return simd::exp(v); });
    case Unary::Relu: return vec_map([&](Vec v) { return max(v, zero); });
    case Unary::Sigmoid: return vec_map([&](Vec v) { return one / (one + simd::exp(zero - v)); });
    case Unary::AddScalar: return vec_map([&](Vec v) { return v + vs; });
    case Unary::MulScalar: return vec_map([&](Vec v) { return v * vs; });
    case Unary::RSubScalar: return vec_map([&](Vec v) { return vs - v; });
    case Unary::RDivScalar: return vec_map([&](Vec v) { return vs / v; });
    case Unary::RoundBf16: return vec_map([&](Vec v) { return round_to_bf16(v); });
#define SF_FORMULA_CASE(code, function) case Unary::code:
      SF_FORMULA_CODES(SF_FORMULA_CASE)  // shared.h's formulas, through the reference's loop
#undef SF_FORMULA_CASE
    case Unary::Log:  // not on a hot path; the library functions are exact
    case Unary::Sqrt:
    case Unary::Tanh:
    case Unary::PowScalar:
      parallel_for(0, n, kGrainElements, [&](int64_t b, int64_t e) {
        scalar_table().unary(op, x + b, y + b, e - b, s);
      });
  }
}

// --- reductions ---------------------------------------------------------------------

// Folds term(j), the Vec of elements [j, j + W), over the whole vectors of a
// row with `combine`, into four independent accumulators: a single one would
// make every add wait for the previous one's latency. Sets `i` to the first
// element left for the scalar tail.
template <class Term, class Combine>
Vec reduce(int64_t n, Vec init, Term term, Combine combine, int64_t& i) {
  Vec a0 = init, a1 = init, a2 = init, a3 = init;
  for (i = 0; i + 4 * W <= n; i += 4 * W) {
    a0 = combine(a0, term(i));
    a1 = combine(a1, term(i + W));
    a2 = combine(a2, term(i + 2 * W));
    a3 = combine(a3, term(i + 3 * W));
  }
  for (; i + W <= n; i += W) a0 = combine(a0, term(i));
  return combine(combine(a0, a1), combine(a2, a3));
}

auto plus = [](Vec a, Vec b) { return a + b; };

float row_sum(const float* x, int64_t n) {
  int64_t i;
  float total = reduce(n, Vec::set1(0.0f), [&](int64_t j) { return Vec::load(x + j); }, plus, i).sum();
  for (; i < n; ++i) total += x[i];
  return total;
}

// NaN if the row holds one (simd.h's max lets NaN through), as the reference.
float row_max(const float* x, int64_t n) {
  int64_t i;
  float best = simd::reduce_max(reduce(n, Vec::set1(-INFINITY), [&](int64_t j) { return Vec::load(x + j); },
                                       [](Vec a, Vec b) { return max(a, b); }, i));
  for (; i < n; ++i) best = simd::max(best, x[i]);
  return best;
}

// out[j] += x[j] over a row, vectorised.
void add_row(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + W <= n; i += W) (Vec::load(out + i) + Vec::load(x + i)).store(out + i);
  for (; i < n; ++i) out[i] += x[i];
}

// Column sums ([rows, cols] -> [cols], e.g. a bias gradient) written to out.
// Each block of kRowBlock rows is summed on its own (blocks in parallel, each
// streaming through contiguous rows), then the blocks are added in order: the
// result does not depend on the number of threads.
void column_sums(const float* x, int64_t rows, int64_t cols, float* out) {
  constexpr int64_t kRowBlock = 256;
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<float> partial(blocks * cols, 0.0f);
  float* sums = partial.data();
  parallel_for(0, blocks, kGrainElements / (kRowBlock * std::max<int64_t>(cols, 1)) + 1,
               [=](int64_t b, int64_t e) {
    for (int64_t block = b; block < e; ++block)
      for (int64_t r = block * kRowBlock, end = std::min(rows, r + kRowBlock); r < end; ++r)
        add_row(x + r * cols, sums + block * cols, cols);
  });
  std::fill(out, out + cols, 0.0f);
  for (int64_t block = 0; block < blocks; ++block) add_row(sums + block * cols, out, cols);
}

// [outer, n, inner] -> [outer, inner]: each output block is one thread's.
void sum_middle_axis(const float* x, int64_t outer, int64_t n, int64_t inner, float* out) {
  parallel_for(0, outer, grain_rows(n * inner), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      float* dst = out + o * inner;
      std::fill(dst, dst + inner, 0.0f);
      for (int64_t i = 0; i < n; ++i) add_row(x + (o * n + i) * inner, dst, inner);
    }
  });
}

// The common cases, as the merged dims show them (x operand 0, out operand 1):
// a sum over the last axis (each row into one element of out, in order), a bias
// gradient [rows, cols] -> [cols], and a sum over a middle axis.
void sum_to(const float* x, float* out, const Rows& rows) {
  const int64_t n = rows.cols;
  const int64_t* out_strides = rows.strides[1];
  if (rows.col_strides[1] == 0 && (rows.ndim == 0 || (rows.ndim == 1 && out_strides[0] == 1))) {
    return parallel_for(0, rows.count, grain_rows(n), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) out[r] = row_sum(x + r * n, n);
    });
  }
  if (rows.col_strides[1] == 1 && rows.ndim == 1 && out_strides[0] == 0) return column_sums(x, rows.count, n, out);
  if (rows.col_strides[1] == 1 && rows.ndim == 2 && out_strides[0] == n && out_strides[1] == 0)
    return sum_middle_axis(x, rows.shape[0], rows.shape[1], n, out);
  scalar_table().sum_to(x, out, rows);
}

void max_axis(const float* x, int64_t outer, int64_t n, int64_t inner, float* out, int32_t* arg) {
  if (inner != 1 || arg) return scalar_table().max_axis(x, outer, n, inner, out, arg);
  parallel_for(0, outer, grain_rows(n), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) out[o] = row_max(x + o * n, n);
  });
}

// --- softmax family ------------------------------------------------------------------

// y = exp(x - shift) over a row; returns the sum of y.
float exp_row(const float* x, float shift, float* y, int64_t n) {
  Vec vs = Vec::set1(shift);
  auto term = [&](int64_t j) {
    Vec e = simd::exp(Vec::load(x + j) - vs);
    e.store(y + j);
    return e;
  };
  int64_t i;
  float total = reduce(n, Vec::set1(0.0f), term, plus, i).sum();
  for (; i < n; ++i) total += (y[i] = std::exp(x[i] - shift));
  return total;
}

void scale_row(float* y, float s, int64_t n) {
  Vec vs = Vec::set1(s);
  int64_t i = 0;
  for (; i + W <= n; i += W) (Vec::load(y + i) * vs).store(y + i);
  for (; i < n; ++i) y[i] *= s;
}

void softmax_row(const float* x, float* y, int64_t n) {
  float total = exp_row(x, row_max(x, n), y, n);
  scale_row(y, 1.0f / total, n);
}

// log_softmax(x) = x - (max + log sum exp(x - max)); y doubles as scratch.
void log_softmax_row(const float* x, float* y, int64_t n) {
  float mx = row_max(x, n);
  float shift = mx + std::log(exp_row(x, mx, y, n));
  Vec vs = Vec::set1(shift);
  int64_t i = 0;
  for (; i + W <= n; i += W) (Vec::load(x + i) - vs).store(y + i);
  for (; i < n; ++i) y[i] = x[i] - shift;
}

template <class F>
void for_rows(int64_t rows, int64_t cols, F f) {
  parallel_for(0, rows, grain_rows(cols), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) f(r);
  });
}

void log_softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  for_rows(rows, cols, [&](int64_t r) { log_softmax_row(x + r * cols, y + r * cols, cols); });
}

float dot_row(const float* a, const float* b, int64_t n) {
  int64_t i;
  float total = reduce(n, Vec::set1(0.0f), [&](int64_t j) { return Vec::load(a + j) * Vec::load(b + j); },
                       plus, i).sum();
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

// dx = scale * y * (dy - dot)
void softmax_backward_row(const float* y, const float* dy, float* dx, int64_t n, float scale) {
  float dot = dot_row(y, dy, n);
  Vec vd = Vec::set1(dot), vs = Vec::set1(scale);
  int64_t i = 0;
  for (; i + W <= n; i += W)
    (vs * Vec::load(y + i) * (Vec::load(dy + i) - vd)).store(dx + i);
  for (; i < n; ++i) dx[i] = scale * y[i] * (dy[i] - dot);
}

void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols) {
  for_rows(rows, cols, [&](int64_t r) {
    const float *yr = y + r * cols, *gr = dy + r * cols;
    float* dr = dx + r * cols;
    float total = row_sum(gr, cols);
    Vec vt = Vec::set1(total);
    int64_t i = 0;
    for (; i + W <= cols; i += W)
      (Vec::load(gr + i) - simd::exp(Vec::load(yr + i)) * vt).store(dr + i);
    for (; i < cols; ++i) dr[i] = gr[i] - std::exp(yr[i]) * total;
  });
}

void masked_softmax(const float* x, const int32_t* keep, const Rows& rows, float scale, float* y) {
  const int64_t cols = rows.cols, step = rows.col_strides[0];
  for_rows(rows.count, cols, [&](int64_t r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    if (!keep && scale == 1.0f) return softmax_row(xr, yr, cols);  // plain softmax
    // Scaled, hidden scores into y, then softmax in place.
    const int32_t* k = keep ? keep + rows.offset(0, r) : nullptr;
    for (int64_t c = 0; c < cols; ++c) yr[c] = !k || k[c * step] ? scale * xr[c] : kHiddenScore;
    softmax_row(yr, yr, cols);
  });
}

void masked_softmax_backward(const float* y, const float* dy, const int32_t* keep, const Rows& rows, float scale,
                             float* dx) {
  const int64_t cols = rows.cols, step = rows.col_strides[0];
  for_rows(rows.count, cols, [&](int64_t r) {
    float* dr = dx + r * cols;
    softmax_backward_row(y + r * cols, dy + r * cols, dr, cols, scale);
    if (!keep) return;
    const int32_t* k = keep + rows.offset(0, r);
    for (int64_t c = 0; c < cols; ++c)
      if (!k[c * step]) dr[c] = 0.0f;
  });
}

// --- layer norm and friends ----------------------------------------------------------

void layer_norm(const float* x, const float* alpha, const float* bias, int64_t rows, int64_t cols,
                float eps, float* y, float* mean, float* std) {
  for_rows(rows, cols, [&](int64_t r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float mu = row_sum(xr, cols) / static_cast<float>(cols);
    Vec vmu = Vec::set1(mu);
    auto squared_deviation = [&](int64_t j) {
      Vec d = Vec::load(xr + j) - vmu;
      return d * d;
    };
    int64_t i;
    float ss = reduce(cols, Vec::set1(0.0f), squared_deviation, plus, i).sum();
    for (; i < cols; ++i) ss += (xr[i] - mu) * (xr[i] - mu);
    float s = std::sqrt(ss / static_cast<float>(cols - 1)), inv = 1.0f / (s + eps);
    Vec vinv = Vec::set1(inv);
    for (i = 0; i + W <= cols; i += W)
      fma(Vec::load(alpha + i), (Vec::load(xr + i) - vmu) * vinv, Vec::load(bias + i)).store(yr + i);
    for (; i < cols; ++i) yr[i] = alpha[i] * ((xr[i] - mu) * inv) + bias[i];
    mean[r] = mu;
    std[r] = s;
  });
}

// dx per row in parallel; dalpha and dbias summed over rows per column block.
void layer_norm_backward(const float* x, const float* alpha, const float* mean, const float* std,
                         const float* dy, int64_t rows, int64_t cols, float eps, float* dx,
                         float* dalpha, float* dbias) {
  for_rows(rows, cols, [&](int64_t r) {
    const float *xr = x + r * cols, *gr = dy + r * cols;
    float* dr = dx + r * cols;
    float inv = 1.0f / (std[r] + eps), mu = mean[r];
    Vec vmu = Vec::set1(mu), vinv = Vec::set1(inv), sum_g = Vec::set1(0.0f), dot = sum_g;
    int64_t i = 0;
    for (; i + W <= cols; i += W) {
      Vec g = Vec::load(gr + i) * Vec::load(alpha + i);
      sum_g = sum_g + g;
      dot = fma(g, (Vec::load(xr + i) - vmu) * vinv, dot);
    }
    float sg = sum_g.sum(), sd = dot.sum();
    for (; i < cols; ++i) {
      float g = gr[i] * alpha[i];
      sg += g;
      sd += g * (xr[i] - mu) * inv;
    }
    float mean_g = sg / static_cast<float>(cols);
    float k = std[r] > 0.0f ? sd / (static_cast<float>(cols - 1) * std[r]) : 0.0f;
    Vec vmg = Vec::set1(mean_g), vk = Vec::set1(k);
    for (i = 0; i + W <= cols; i += W) {
      Vec xhat = (Vec::load(xr + i) - vmu) * vinv;
      ((Vec::load(gr + i) * Vec::load(alpha + i) - vmg) * vinv - xhat * vk).store(dr + i);
    }
    for (; i < cols; ++i) dr[i] = (gr[i] * alpha[i] - mean_g) * inv - (xr[i] - mu) * inv * k;
  });
  // dalpha and dbias: column sums of dy * xhat and dy, by blocks of rows as in
  // column_sums (contiguous streaming, independent of the thread count).
  constexpr int64_t kRowBlock = 256;
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<float> partial(2 * blocks * cols, 0.0f);
  float* sums = partial.data();
  parallel_for(0, blocks, kGrainElements / (kRowBlock * std::max<int64_t>(cols, 1)) + 1,
               [=](int64_t b, int64_t e) {
    for (int64_t block = b; block < e; ++block) {
      float* da = sums + 2 * block * cols;
      float* db = da + cols;
      for (int64_t r = block * kRowBlock, end = std::min(rows, r + kRowBlock); r < end; ++r) {
        const float *xr = x + r * cols, *gr = dy + r * cols;
        const float inv = 1.0f / (std[r] + eps), mu = mean[r];
        const Vec vmu = Vec::set1(mu), vinv = Vec::set1(inv);
        int64_t i = 0;
        for (; i + W <= cols; i += W) {
          Vec g = Vec::load(gr + i);
          fma(g, (Vec::load(xr + i) - vmu) * vinv, Vec::load(da + i)).store(da + i);
          (Vec::load(db + i) + g).store(db + i);
        }
        for (; i < cols; ++i) {
          da[i] += gr[i] * (xr[i] - mu) * inv;
          db[i] += gr[i];
        }
      }
    }
  });
  std::fill(dalpha, dalpha + cols, 0.0f);
  std::fill(dbias, dbias + cols, 0.0f);
  for (int64_t block = 0; block < blocks; ++block) {
    add_row(sums + 2 * block * cols, dalpha, cols);
    add_row(sums + (2 * block + 1) * cols, dbias, cols);
  }
}

void bias_relu(const float* x, const float* bias, int64_t rows, int64_t cols, float* y) {
  for_rows(rows, cols, [&](int64_t r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    Vec zero = Vec::set1(0.0f);
    int64_t i = 0;
    for (; i + W <= cols; i += W) max(Vec::load(xr + i) + Vec::load(bias + i), zero).store(yr + i);
    for (; i < cols; ++i) yr[i] = std::max(xr[i] + bias[i], 0.0f);
  });
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t n) {
  parallel_for(0, n, kGrainElements, [&](int64_t b, int64_t e) {
    int64_t i = b;
    for (; i + W <= e; i += W) select_positive(Vec::load(y + i), Vec::load(dy + i)).store(dx + i);
    for (; i < e; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  });
}

// The hash is 32-bit integer arithmetic, which the compiler vectorises once the
// loop is branch-free, its index is 32-bit (dropout_keeps uses the low 32 bits
// of i), and everything it reads is a local: read through the closure, the
// values could alias out, which defeats vectorisation on the pool's threads.
// out = dropout(y), plus x with kAdd (dropout_add) in the same pass.
template <bool kAdd>
void dropout_pass(const float* x, const float* y, float* out, int64_t n, float scale, uint32_t seed,
                  uint32_t threshold) {
  parallel_for(0, n, kGrainElements, [=](int64_t b, int64_t e) {
    const uint32_t first = static_cast<uint32_t>(b), count = static_cast<uint32_t>(e - b);
    const uint32_t s = seed, t = threshold;
    const float k = scale;
    const float *xb = kAdd ? x + b : nullptr, *yb = y + b;
    float* ob = out + b;
    for (uint32_t j = 0; j < count; ++j) {
      const float dropped = dropout_keeps(s, first + j, t) ? yb[j] * k : yb[j] - yb[j];
      ob[j] = kAdd ? xb[j] + dropped : dropped;
    }
  });
}

void dropout(const float* x, float* y, int64_t n, float scale, uint32_t seed, uint32_t threshold) {
  dropout_pass<false>(nullptr, x, y, n, scale, seed, threshold);
}

void dropout_add(const float* x, const float* y, float* out, int64_t n, float scale, uint32_t seed,
                 uint32_t threshold) {
  dropout_pass<true>(x, y, out, n, scale, seed, threshold);
}

// Float partial sums per block of 1024, summed in double: fast, and accurate
// enough for a norm. Blocks are fixed, so the result does not depend on threads.
void dot(const float* a, const float* b, int64_t n, float* out) {
  constexpr int64_t kBlock = 1024;
  int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks);
  parallel_for(0, blocks, kGrainElements / kBlock, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      partial[i] = dot_row(a + i * kBlock, b + i * kBlock, std::min(kBlock, n - i * kBlock));
  });
  double total = 0.0;
  for (double p : partial) total += p;
  out[0] = static_cast<float>(total);
}

// --- optimizer updates -------------------------------------------------------------------

void adam_step(float* p, const float* g, float g_scale, float* m, float* v, int64_t n, float step_size,
               float b1, float b2, float eps, float sqrt_bc2, float l2, float decay) {
  parallel_for_vectors(n, [=](int64_t b, int64_t e) {
    Vec vb1 = Vec::set1(b1), vb2 = Vec::set1(b2), c1 = Vec::set1(1.0f - b1),
        c2 = Vec::set1(1.0f - b2), keep = Vec::set1(1.0f - decay), vl2 = Vec::set1(l2),
        veps = Vec::set1(eps), vbc = Vec::set1(1.0f / sqrt_bc2), vstep = Vec::set1(step_size),
        vscale = Vec::set1(g_scale);
    int64_t i = b;
    for (; i + W <= e; i += W) {
      Vec pi = Vec::load(p + i) * keep;
      Vec grad = fma(vl2, pi, Vec::load(g + i) * vscale);
      Vec mi = vb1 * Vec::load(m + i) + c1 * grad;
      Vec vi = vb2 * Vec::load(v + i) + c2 * grad * grad;
      mi.store(m + i);
      vi.store(v + i);
      (pi - vstep * mi / (sqrt(vi) * vbc + veps)).store(p + i);
    }
    if (i < e)
      scalar_table().adam_step(p + i, g + i, g_scale, m + i, v + i, e - i, step_size, b1, b2, eps,
                               sqrt_bc2, l2, decay);
  });
}

void sgd_step(float* p, const float* g, float g_scale, float* buf, int64_t n, float lr, float momentum,
              float l2, bool nesterov, bool first) {
  parallel_for(0, n, kGrainElements, [=](int64_t b, int64_t e) {
    scalar_table().sgd_step(p + b, g + b, g_scale, buf ? buf + b : nullptr, e - b, lr, momentum, l2,
                            nesterov, first);
  });
}

// --- cross-entropy ---------------------------------------------------------------------

void cross_entropy(const float* logits, const int32_t* targets, int64_t rows, int64_t cols,
                   int32_t ignore_index, float eps, float* row_loss, float* row_counted,
                   float* log_probs) {
  for_rows(rows, cols, [&](int64_t r) {
    float* lp = log_probs + r * cols;
    log_softmax_row(logits + r * cols, lp, cols);
    row_counted[r] = targets[r] == ignore_index ? 0.0f : 1.0f;
    if (targets[r] == ignore_index) {
      row_loss[r] = 0.0f;
      return;
    }
    if (targets[r] < 0 || targets[r] >= cols) {
      row_loss[r] = NAN;
      return;
    }
    float mean_nll = -row_sum(lp, cols) / static_cast<float>(cols);
    row_loss[r] = (1.0f - eps) * -lp[targets[r]] + eps * mean_nll;
  });
}

void cross_entropy_backward(const float* log_probs, const int32_t* targets, int64_t rows,
                            int64_t cols, int32_t ignore_index, float eps,
                            const float* scale_of_loss, float* dlogits) {
  const float scale = *scale_of_loss;
  for_rows(rows, cols, [&](int64_t r) {
    float* d = dlogits + r * cols;
    if (targets[r] == ignore_index) {
      std::fill(d, d + cols, 0.0f);
      return;
    }
    const float* lp = log_probs + r * cols;
    Vec vs = Vec::set1(scale), off = Vec::set1(scale * eps / static_cast<float>(cols));
    int64_t i = 0;
    for (; i + W <= cols; i += W) (vs * simd::exp(Vec::load(lp + i)) - off).store(d + i);
    for (; i < cols; ++i) d[i] = scale * (std::exp(lp[i]) - eps / static_cast<float>(cols));
    if (targets[r] >= 0 && targets[r] < cols) d[targets[r]] -= scale * (1.0f - eps);
  });
}

// --- data movement -------------------------------------------------------------------

void copy_rows(const void* src, int64_t src_stride, void* dst, int64_t dst_stride, int64_t rows,
               int64_t row_bytes) {
  parallel_for(0, rows, std::max<int64_t>(1, 4 * kGrainElements / std::max<int64_t>(row_bytes, 1)),
               [&](int64_t b, int64_t e) {
    scalar_table().copy_rows(static_cast<const char*>(src) + b * src_stride, src_stride,
                             static_cast<char*>(dst) + b * dst_stride, dst_stride, e - b, row_bytes);
  });
}

// Copies whole rows where x walks them contiguously (attention's head split and
// merge keep the last dim); others use the reference.
void copy_strided(const float* x, float* y, const Rows& rows) {
  bool done = rows.col_strides[0] == 1 &&
              for_each_row(rows, [&](int64_t ox, int64_t, int64_t n, int64_t, int64_t, int64_t o) {
                std::memcpy(y + o, x + ox, n * sizeof(float));
              });
  if (!done) scalar_table().copy_strided(x, y, rows);
}

void gather_rows(const float* table, const int32_t* ids, int64_t n, int64_t dim, float* out) {
  for_rows(n, dim, [&](int64_t i) { std::memcpy(out + i * dim, table + ids[i] * dim, dim * sizeof(float)); });
}

// Serial over ids (two ids may name the same row), vectorised over the row.
void scatter_add_rows(const float* grad_out, const int32_t* ids, int64_t n, int64_t dim,
                      float* grad_table) {
  for (int64_t i = 0; i < n; ++i) add_row(grad_out + i * dim, grad_table + ids[i] * dim, dim);
}

// --- bfloat16 conversions ------------------------------------------------------------
// bf16.h's rounding, 16 lanes at a time in integer arithmetic (the conversion
// instruction of AVX512-BF16 would read subnormals as zero), and its exact
// widening: a shift of each 16-bit pattern into the top of a float.

void float_to_bf16(const float* x, bf16* y, int64_t n) {
  parallel_for(0, n, kGrainElements, [&](int64_t i, int64_t end) {
#if defined(__AVX512F__)
    const __m512i half = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
    for (; i + 16 <= end; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      const __m512i u = _mm512_castps_si512(v), top = _mm512_srli_epi32(u, 16);
      __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(top, one))), 16);
      rounded = _mm512_mask_or_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), top, quiet);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtepi32_epi16(rounded));
    }
#endif
    for (; i < end; ++i) y[i] = to_bf16(x[i]);
  });
}

void bf16_to_float(const bf16* x, float* y, int64_t n) {
  parallel_for(0, n, kGrainElements, [&](int64_t i, int64_t end) {
#if defined(__AVX512F__)
    for (; i + 16 <= end; i += 16) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
      _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16)));
    }
#endif
    for (; i < end; ++i) y[i] = to_float(x[i]);
  });
}

}  // namespace

// The entries without a fast version run the reference: scalar's names are
// found only where fast has none of its own.
using namespace scalar;
constexpr HostTable table{.name = "fast", SF_TABLE_ENTRIES};

}  // namespace sf::kernels::fast

namespace sf::kernels {

const HostTable& fast_table() { return fast::table; }

}  // namespace sf::kernels
