// The fast kernels: SIMD (simd.h) and threads (thread_pool.h). Each one computes
// what its scalar reference in scalar.cpp computes; shapes the fast path does not
// cover fall back to the reference. Tested against scalar.cpp in
// tests/test_kernels.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "fast.h"
#include "gemm.h"

namespace sf::kernels::fast {
namespace {

// --- elementwise with broadcasting -------------------------------------------------

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

void log_softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  for_rows(rows, cols, [&](int64_t r) { log_softmax_row(x + r * cols, y + r * cols, cols); });
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

}  // namespace

// The entries without a fast version run the reference: scalar's names are
// found only where fast has none of its own.
using namespace scalar;
constexpr HostTable table{.name = "fast", SF_TABLE_ENTRIES};

}  // namespace sf::kernels::fast

namespace sf::kernels {

const HostTable& fast_table() { return fast::table; }

}  // namespace sf::kernels
