// Products with a handful of rows: decoding.
//
// Greedy or beam decoding runs the decoder on one new token per sentence, so
// every Linear becomes x[m, K] W^T with m = sentences (x beams), often 1, and
// attention over the cache becomes one query row per head. Each element of B
// is then used m times only, and such a product is bound by reading B once.
// The blocked path (gemm.cpp) would pack B first, reading and writing it once
// more, and run an 8-row micro-kernel that is mostly padding. Here B is read
// in place, once:
//   op(B) = B^T (a Linear's weight [N, K]): out(i, j) is the dot product of
//     row i of op(A) with row j of B, both contiguous;
//   op(B) = B: out(i, :) accumulates a(i, p) * row p of B, rows contiguous.
// Rounding to bf16 (gemm_rounded_bf16) costs no pass either: A is rounded
// where it is copied into rows, and B in registers as it is loaded, a few
// integer instructions beside a load that waits on memory anyway.
#include "gemm_few_rows.h"

#include <algorithm>
#include <vector>

#include "simd.h"
#include "thread_pool.h"

namespace sf::kernels {

namespace {

using simd::Vec;
constexpr int W = Vec::width;

// An element, or a vector of elements, of B as the product reads it.
template <bool kRound>
float read(float x) {
  return kRound ? round_to_bf16(x) : x;
}
template <bool kRound>
Vec load(const float* p) {
  return kRound ? round_to_bf16(Vec::load(p)) : Vec::load(p);
}

// C = alpha * acc + beta * C, where beta == 0 never reads C.
inline float blend(float acc, float alpha, float beta, const float& c) {
  return beta == 0.0f ? alpha * acc : alpha * acc + beta * c;
}

// Columns [j0, j1) of C = op(A) B^T, op(A) given as m contiguous rows of k.
template <bool kRound>
void rows_times_bt(const float* a, int64_t m, int64_t k, const float* b, int64_t ldb, int64_t j0,
                   int64_t j1, float alpha, float beta, float* c, int64_t ldc) {
  for (int64_t j = j0; j < j1; ++j) {
    const float* bj = b + j * ldb;
    for (int64_t i = 0; i < m; ++i) {
      const float* ai = a + i * k;
      Vec acc = Vec::set1(0.0f);
      int64_t p = 0;
      for (; p + W <= k; p += W) acc = fma(Vec::load(ai + p), load<kRound>(bj + p), acc);
      float sum = acc.sum();
      for (; p < k; ++p) sum += ai[p] * read<kRound>(bj[p]);
      c[i * ldc + j] = blend(sum, alpha, beta, c[i * ldc + j]);
    }
  }
}

// Columns [j0, j1) of C = op(A) B, op(A) given as m <= kFewRows contiguous rows
// of k. Four vectors of columns at a time: m x 4 accumulators stay in registers
// while the rows of B stream past.
template <bool kRound>
void rows_times_b(const float* a, int64_t m, int64_t k, const float* b, int64_t ldb, int64_t j0,
                  int64_t j1, float alpha, float beta, float* c, int64_t ldc) {
  constexpr int kVecs = 4;
  int64_t j = j0;
  for (; j + kVecs * W <= j1; j += kVecs * W) {
    Vec acc[kFewRows][kVecs];
    for (int64_t i = 0; i < m; ++i)
      for (int v = 0; v < kVecs; ++v) acc[i][v] = Vec::set1(0.0f);
    for (int64_t p = 0; p < k; ++p) {
      const float* bp = b + p * ldb + j;
      Vec row[kVecs];
      for (int v = 0; v < kVecs; ++v) row[v] = load<kRound>(bp + v * W);
      for (int64_t i = 0; i < m; ++i) {
        const Vec ai = Vec::set1(a[i * k + p]);
        for (int v = 0; v < kVecs; ++v) acc[i][v] = fma(ai, row[v], acc[i][v]);
      }
    }
    for (int64_t i = 0; i < m; ++i)
      for (int v = 0; v < kVecs; ++v) {
        float* out = c + i * ldc + j + v * W;
        Vec result = Vec::set1(alpha) * acc[i][v];
        if (beta != 0.0f) result = fma(Vec::set1(beta), Vec::load(out), result);
        result.store(out);
      }
  }
  for (; j < j1; ++j)  // the last columns, fewer than a block
    for (int64_t i = 0; i < m; ++i) {
      float sum = 0.0f;
      for (int64_t p = 0; p < k; ++p) sum += a[i * k + p] * read<kRound>(b[p * ldb + j]);
      c[i * ldc + j] = blend(sum, alpha, beta, c[i * ldc + j]);
    }
}

// Columns per task when the work is split across threads: a multiple of the
// column block above, and enough multiply-adds (~20 us) to pay for a hand-off.
constexpr int64_t kTaskWork = int64_t{1} << 19;

}  // namespace

void gemm_few_rows(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                   int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c,
                   int64_t batch, bool round) {
  // op(A) copied into m contiguous rows per batch entry: tiny (m <= kFewRows),
  // and it makes both transposes of A one case. The buffer is kept per thread,
  // so decoding token after token allocates nothing here. (Workers reach it
  // through `a_rows`: inside the lambda below, `buffer` would name their own.)
  thread_local std::vector<float> buffer;
  buffer.resize(static_cast<size_t>(batch * m * k));
  float* a_rows = buffer.data();
  for (int64_t e = 0; e < batch; ++e)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) {
        const float x = a[e * stride_a + (trans_a ? p * lda + i : i * lda + p)];
        a_rows[(e * m + i) * k + p] = round ? round_to_bf16(x) : x;
      }

  const int64_t columns = std::max<int64_t>(64, kTaskWork / (m * k)) / 64 * 64;
  const int64_t tasks_per_entry = (n + columns - 1) / columns;
  // Small products (a head's attention over the cache) run several to a task.
  const int64_t grain = std::max<int64_t>(1, kTaskWork / (m * k * std::min(columns, n)));
  parallel_for(0, batch * tasks_per_entry, grain, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      const int64_t e = t / tasks_per_entry, j0 = t % tasks_per_entry * columns;
      const int64_t j1 = std::min(n, j0 + columns);
      const float* ae = a_rows + e * m * k;
      const float* be = b + e * stride_b;
      float* ce = c + e * stride_c;
      const auto product = trans_b ? (round ? rows_times_bt<true> : rows_times_bt<false>)
                                   : (round ? rows_times_b<true> : rows_times_b<false>);
      product(ae, m, k, be, ldb, j0, j1, alpha, beta, ce, ldc);
    }
  });
}

}  // namespace sf::kernels
