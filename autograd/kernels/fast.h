// The fast kernels' shared parts (fast.cpp, fast_update.cpp, fast_copy.cpp):
// how work is split over the thread pool, and the vectorised row primitives
// (sums, maxima, exponentials, softmax) the kernels are built from.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels.h"
#include "simd.h"
#include "thread_pool.h"

namespace sf::kernels::fast {

using simd::Vec;
inline constexpr int W = Vec::width;

// Work per parallel chunk: large enough that waking a thread pays off.
inline constexpr int64_t kGrainElements = 1 << 14;

inline int64_t grain_rows(int64_t cols) { return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(cols, 1)); }

// parallel_for over [0, n) in chunks of whole vectors: only the range's last
// elements are left to a scalar tail, so each element is computed the same way
// whatever the number of threads.
template <class F>
void parallel_for_vectors(int64_t n, const F& f) {
  parallel_for(0, (n + W - 1) / W, kGrainElements / W,
               [&](int64_t b, int64_t e) { f(b * W, std::min(e * W, n)); });
}

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

// --- row primitives -----------------------------------------------------------------

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

inline constexpr auto plus = [](Vec a, Vec b) { return a + b; };

inline float row_sum(const float* x, int64_t n) {
  int64_t i;
  float total = reduce(n, Vec::set1(0.0f), [&](int64_t j) { return Vec::load(x + j); }, plus, i).sum();
  for (; i < n; ++i) total += x[i];
  return total;
}

// NaN if the row holds one (simd.h's max lets NaN through), as the reference.
inline float row_max(const float* x, int64_t n) {
  int64_t i;
  float best = simd::reduce_max(reduce(n, Vec::set1(-INFINITY), [&](int64_t j) { return Vec::load(x + j); },
                                       [](Vec a, Vec b) { return max(a, b); }, i));
  for (; i < n; ++i) best = simd::max(best, x[i]);
  return best;
}

// out[j] += x[j] over a row, vectorised.
inline void add_row(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + W <= n; i += W) (Vec::load(out + i) + Vec::load(x + i)).store(out + i);
  for (; i < n; ++i) out[i] += x[i];
}

// y = exp(x - shift) over a row; returns the sum of y.
inline float exp_row(const float* x, float shift, float* y, int64_t n) {
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

inline void scale_row(float* y, float s, int64_t n) {
  Vec vs = Vec::set1(s);
  int64_t i = 0;
  for (; i + W <= n; i += W) (Vec::load(y + i) * vs).store(y + i);
  for (; i < n; ++i) y[i] *= s;
}

inline void softmax_row(const float* x, float* y, int64_t n) {
  float total = exp_row(x, row_max(x, n), y, n);
  scale_row(y, 1.0f / total, n);
}

// log_softmax(x) = x - (max + log sum exp(x - max)); y doubles as scratch.
inline void log_softmax_row(const float* x, float* y, int64_t n) {
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

inline float dot_row(const float* a, const float* b, int64_t n) {
  int64_t i;
  float total = reduce(n, Vec::set1(0.0f), [&](int64_t j) { return Vec::load(a + j) * Vec::load(b + j); },
                       plus, i).sum();
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

// The entries of fast_update.cpp and fast_copy.cpp, for fast.cpp's table.
void dot(const float* a, const float* b, int64_t n, float* out);
void adam_step(float* p, const float* g, float g_scale, float* m, float* v, int64_t n, float step_size,
               float b1, float b2, float eps, float sqrt_bc2, float l2, float decay);
void sgd_step(float* p, const float* g, float g_scale, float* buf, int64_t n, float lr, float momentum,
              float l2, bool nesterov, bool first);
void cross_entropy(const float* logits, const int32_t* targets, int64_t rows, int64_t cols,
                   int32_t ignore_index, float eps, float* row_loss, float* row_counted,
                   float* log_probs);
void cross_entropy_backward(const float* log_probs, const int32_t* targets, int64_t rows,
                            int64_t cols, int32_t ignore_index, float eps,
                            const float* scale_of_loss, float* dlogits);
void copy_rows(const void* src, int64_t src_stride, void* dst, int64_t dst_stride, int64_t rows,
               int64_t row_bytes);
void copy_strided(const float* x, float* y, const Rows& rows);
void gather_rows(const float* table, const int32_t* ids, int64_t n, int64_t dim, float* out);
void scatter_add_rows(const float* grad_out, const int32_t* ids, int64_t n, int64_t dim,
                      float* grad_table);
void float_to_bf16(const float* x, bf16* y, int64_t n);
void bf16_to_float(const bf16* x, float* y, int64_t n);

}  // namespace sf::kernels::fast
