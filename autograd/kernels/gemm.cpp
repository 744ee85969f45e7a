// GEMM after Goto & van de Geijn ("Anatomy of High-Performance Matrix
// Multiplication") with the BLIS loop structure. For one product:
//
//   for jc over N in steps of NC:            packed B block [KC x NC] lives in L2
//     for pc over K in steps of KC:
//       pack op(B)[pc:+KC, jc:+NC] into NR-wide column panels
//       for ic over M in steps of MC:
//         pack op(A)[ic:+MC, pc:+KC] into MR-high row panels
//         for ir over MC in steps of MR:     one A panel [MR x KC] lives in L1
//           for jr over NC in steps of NR:   micro-kernel, C tile in registers
//             C[ic+ir:+MR, jc+jr:+NR] (+)= A panel ir * B panel jr
//
// The micro-kernel holds an MR x NR tile of C in vector registers; per step of k
// it loads NR floats of B, broadcasts MR floats of A and does MR*NR/W FMAs (W =
// floats per vector). Packing lays both panels out contiguously in exactly that
// reading order, so the four transpose layouts differ only in the packing
// routines, and zero-pads edge panels so the kernel's k loop never branches.
// Each A panel is reused from L1 for all NC/NR B panels; each packed B block is
// reused from L2 for all M/MR A panels.
#include "gemm.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <new>
#include <utility>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include "thread_pool.h"

namespace sf::kernels {

namespace {

// ---------------------------------------------------------------------------
// Blocking parameters.

#if defined(__AVX512F__)
// 32 zmm registers. Per k step an 8 x 32 tile does 16 FMAs against 2 loads + 8
// broadcasts, so the load ports are never the bottleneck, and its 16
// accumulators cover the 4-cycle FMA latency of two FMA pipes (8 in flight).
// Measured on Zen 5: with hot caches every tile from 6x32 to 14x32 reaches the
// FMA peak, and in the full GEMM they are within noise of each other; 8 rows
// divide the usual power-of-two M into whole tiles (14 would leave a padded one).
constexpr int kMR = 8;
constexpr int kNR = 32;
#elif defined(__AVX2__) && defined(__FMA__)
// 16 ymm registers: a 6 x 16 tile is 12 accumulators + 2 B vectors + 1 broadcast.
constexpr int kMR = 6;
constexpr int kNR = 16;
#else
// Portable C++: a small tile the compiler can keep in (SSE) registers.
constexpr int kMR = 4;
constexpr int kNR = 16;
#endif

// KC: an A panel (MR x KC floats, 8 KB for AVX-512) stays in the 32-48 KB L1
// while B panels stream past it. NC: the packed B block (KC x NC floats, 512 KB)
// stays in the 1 MB L2 while every A panel of the product sweeps over it. MC only
// sets how many A rows are packed in one go (128 KB for AVX-512): packing a block reads
// whole cache lines and long runs of A, where packing one panel at a time just
// before its use ran ~2x slower and cost 10-25% of the total time.
constexpr int64_t kKC = 256;
constexpr int64_t kNC = 512;
constexpr int64_t kMC = 16 * kMR;
static_assert(kNC % kNR == 0);

// Below this many multiply-adds (summed over the batch, ~40 us on one core) a
// product runs on the calling thread: waking a sleeping worker takes 5-15 us,
// and measured 2-thread runs only win from about this size on.
constexpr int64_t kParallelWork = int64_t{1} << 22;

// ---------------------------------------------------------------------------
// Operands.

// A matrix read through op(): element (i, j) of op(X).
struct Operand {
  const float* data;
  int64_t ld;
  bool trans;

  const float* at(int64_t i, int64_t j) const {
    return trans ? data + j * ld + i : data + i * ld + j;
  }
  // op(X) starting at row i, column j.
  Operand sub(int64_t i, int64_t j) const { return {at(i, j), ld, trans}; }
};

// Packs op(A)[0:mc, 0:kc] into row panels of kMR: panel i (starting at row i) is
// at dst + i * kc, element (r, p) at [p * kMR + r], zero-padded to kMR rows.
void pack_a(const Operand& a, int64_t mc, int64_t kc, float* dst) {
  for (int64_t i = 0; i < mc; i += kMR) {
    const int rows = static_cast<int>(std::min<int64_t>(kMR, mc - i));
    float* d = dst + i * kc;
    if (a.trans) {  // column p of op(A) is a contiguous row of A
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = a.at(i, p);
        for (int r = 0; r < rows; ++r) d[p * kMR + r] = src[r];
        for (int r = rows; r < kMR; ++r) d[p * kMR + r] = 0.0f;
      }
    } else {  // row r of op(A) is contiguous
      for (int r = 0; r < rows; ++r) {
        const float* src = a.at(i + r, 0);
        for (int64_t p = 0; p < kc; ++p) d[p * kMR + r] = src[p];
      }
      for (int r = rows; r < kMR; ++r)
        for (int64_t p = 0; p < kc; ++p) d[p * kMR + r] = 0.0f;
    }
  }
}

// Packs op(B)[0:kc, 0:nc] into column panels of kNR: panel j (starting at column
// j) is at dst + j * kc, element (p, c) at [p * kNR + c], zero-padded to kNR.
void pack_b(const Operand& b, int64_t kc, int64_t nc, float* dst) {
  for (int64_t j = 0; j < nc; j += kNR) {
    const int cols = static_cast<int>(std::min<int64_t>(kNR, nc - j));
    float* d = dst + j * kc;
    if (!b.trans) {  // row p of op(B) is contiguous
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = b.at(p, j);
        for (int c = 0; c < cols; ++c) d[p * kNR + c] = src[c];
        for (int c = cols; c < kNR; ++c) d[p * kNR + c] = 0.0f;
      }
    } else {  // column c of op(B) is a contiguous row of B
      for (int c = 0; c < cols; ++c) {
        const float* src = b.at(0, j + c);
        for (int64_t p = 0; p < kc; ++p) d[p * kNR + c] = src[p];
      }
      for (int c = cols; c < kNR; ++c)
        for (int64_t p = 0; p < kc; ++p) d[p * kNR + c] = 0.0f;
    }
  }
}

// ---------------------------------------------------------------------------
// Micro-kernels: C[0:R, 0:cols] = alpha * (A panel * B panel) + beta * C, for a
// packed A panel (stride kMR per k, first R rows used) and B panel (kNR per k).
// R is a template parameter so edge tiles with fewer rows do only the work they
// need; beta == 0 never reads C.

#if defined(__AVX512F__)

// Mask selecting the first `count` of 16 lanes (all for count >= 16, none for <= 0).
__mmask16 first_lanes(int count) {
  if (count >= 16) return 0xFFFF;
  return count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1);
}

template <int R>
void micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int cols,
                  float alpha, float beta) {
  // Every loop over r is fully unrolled so that lo/hi live in registers.
  __m512 lo[R], hi[R];  // columns 0-15 and 16-31 of each row
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
  // Start fetching the C tile now: it is needed only after the k loop, and
  // otherwise its cache misses would stall the stores below.
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b_lo = _mm512_load_ps(b);
    const __m512 b_hi = _mm512_load_ps(b + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r]);
      lo[r] = _mm512_fmadd_ps(ar, b_lo, lo[r]);
      hi[r] = _mm512_fmadd_ps(ar, b_hi, hi[r]);
    }
    a += kMR;
    b += kNR;
  }
  // Masked loads/stores handle a partial tile; masked-off lanes never fault.
  const __mmask16 mask_lo = first_lanes(cols), mask_hi = first_lanes(cols - 16);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    __m512 out_lo = _mm512_mul_ps(va, lo[r]), out_hi = _mm512_mul_ps(va, hi[r]);
    if (beta != 0.0f) {
      out_lo = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask_lo, cr), out_lo);
      out_hi = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask_hi, cr + 16), out_hi);
    }
    _mm512_mask_storeu_ps(cr, mask_lo, out_lo);
    _mm512_mask_storeu_ps(cr + 16, mask_hi, out_hi);
  }
}

#elif defined(__AVX2__) && defined(__FMA__)

template <int R>
void micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int cols,
                  float alpha, float beta) {
  // Every loop over r is fully unrolled so that lo/hi live in registers.
  __m256 lo[R], hi[R];  // columns 0-7 and 8-15 of each row
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b_lo = _mm256_load_ps(b);
    const __m256 b_hi = _mm256_load_ps(b + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r);
      lo[r] = _mm256_fmadd_ps(ar, b_lo, lo[r]);
      hi[r] = _mm256_fmadd_ps(ar, b_hi, hi[r]);
    }
    a += kMR;
    b += kNR;
  }
  // AVX2 masked moves never fault on masked-off lanes, but they are slow on some
  // CPUs, so a full tile uses plain loads and stores.
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask_lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lane);
  const __m256i mask_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8), lane);
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    __m256 out_lo = _mm256_mul_ps(va, lo[r]), out_hi = _mm256_mul_ps(va, hi[r]);
    if (cols == kNR) {
      if (beta != 0.0f) {
        out_lo = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr), out_lo);
        out_hi = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr + 8), out_hi);
      }
      _mm256_storeu_ps(cr, out_lo);
      _mm256_storeu_ps(cr + 8, out_hi);
    } else {
      if (beta != 0.0f) {
        out_lo = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr, mask_lo), out_lo);
        out_hi = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr + 8, mask_hi), out_hi);
      }
      _mm256_maskstore_ps(cr, mask_lo, out_lo);
      _mm256_maskstore_ps(cr + 8, mask_hi, out_hi);
    }
  }
}

#else

template <int R>
void micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int cols,
                  float alpha, float beta) {
  float acc[R][kNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < kNR; ++j) acc[r][j] += a[r] * b[j];
    a += kMR;
    b += kNR;
  }
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    for (int j = 0; j < cols; ++j)
      cr[j] = beta == 0.0f ? alpha * acc[r][j] : alpha * acc[r][j] + beta * cr[j];
  }
}

#endif

using MicroKernel = void (*)(int64_t, const float*, const float*, float*, int64_t, int, float,
                             float);

template <std::size_t... I>
constexpr std::array<MicroKernel, kMR> make_kernels(std::index_sequence<I...>) {
  return {&micro_kernel<static_cast<int>(I) + 1>...};
}
// kernel_for_rows[r - 1] computes a tile of r rows.
constexpr std::array<MicroKernel, kMR> kernel_for_rows =
    make_kernels(std::make_index_sequence<kMR>{});

// ---------------------------------------------------------------------------
// The single-threaded driver.

// A grow-only 64-byte-aligned buffer, one pair per thread, so steady-state calls
// never allocate.
class AlignedBuffer {
 public:
  ~AlignedBuffer() { release(); }
  float* get(std::size_t count) {
    if (count > size_) {
      release();
      data_ = static_cast<float*>(::operator new(count * sizeof(float), std::align_val_t(64)));
      size_ = count;
    }
    return data_;
  }

 private:
  void release() {
    if (data_) ::operator delete(data_, std::align_val_t(64));
    data_ = nullptr;
    size_ = 0;
  }
  float* data_ = nullptr;
  std::size_t size_ = 0;
};

thread_local AlignedBuffer t_pack_a, t_pack_b;

// Splits `total` into equal blocks of at most `max_block` (so a remainder block is
// never tiny), rounded up to a multiple of `multiple`.
int64_t block_size(int64_t total, int64_t max_block, int64_t multiple) {
  const int64_t blocks = (total + max_block - 1) / max_block;
  const int64_t size = (total + blocks - 1) / blocks;
  return (size + multiple - 1) / multiple * multiple;
}

// One product on the calling thread: C[m,n] = alpha op(A) op(B) + beta C, k > 0.
void gemm_serial(const Operand& a, const Operand& b, int64_t m, int64_t n, int64_t k, float alpha,
                 float beta, float* c, int64_t ldc) {
  float* a_block = t_pack_a.get(kMC * kKC);
  float* b_block = t_pack_b.get(kKC * kNC);
  const int64_t nc_max = block_size(n, kNC, kNR);
  const int64_t kc_max = block_size(k, kKC, 1);
  const int64_t mc_max = block_size(m, kMC, kMR);
  for (int64_t jc = 0; jc < n; jc += nc_max) {
    const int64_t nc = std::min(nc_max, n - jc);
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, k - pc);
      const float beta_block = pc == 0 ? beta : 1.0f;  // later K blocks accumulate
      pack_b(b.sub(pc, jc), kc, nc, b_block);
      for (int64_t ic = 0; ic < m; ic += mc_max) {
        const int64_t mc = std::min(mc_max, m - ic);
        pack_a(a.sub(ic, pc), mc, kc, a_block);
        for (int64_t ir = 0; ir < mc; ir += kMR) {
          const MicroKernel kernel = kernel_for_rows[std::min<int64_t>(kMR, mc - ir) - 1];
          for (int64_t jr = 0; jr < nc; jr += kNR) {
            const int cols = static_cast<int>(std::min<int64_t>(kNR, nc - jr));
            kernel(kc, a_block + ir * kc, b_block + jr * kc, c + (ic + ir) * ldc + jc + jr, ldc,
                   cols, alpha, beta_block);
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Threading: the batch x M x N iteration space is cut into tasks, each a
// sub-product run by gemm_serial with its own packing. Tasks are whole batch
// entries when there are enough of them; otherwise each entry is cut into
// parts_m x parts_n = threads rectangles along MR/NR tile boundaries.

struct Split {
  int64_t parts_m = 1, parts_n = 1;
};

// [begin, end) of part `i` of `parts` when `total` is cut on multiples of `tile`.
std::pair<int64_t, int64_t> part_range(int64_t total, int64_t tile, int64_t parts, int64_t i) {
  const int64_t tiles = (total + tile - 1) / tile;
  const int64_t begin = tiles * i / parts * tile, end = tiles * (i + 1) / parts * tile;
  return {std::min(begin, total), std::min(end, total)};
}

Split choose_split(int64_t m, int64_t n, int64_t batch, int threads) {
  if (batch % threads == 0 || batch >= 4 * threads) return {};
  // Pick the factorisation minimising the largest task's cost, counted per step
  // of k: its MR x NR tiles (padding included) plus packing, weighted 16x per
  // element because it moves ~1 float/cycle while the kernel does 16-32
  // multiply-adds/cycle. A is repacked once per NC columns, B once per task.
  auto cost = [&](int64_t pm, int64_t pn) {
    const int64_t rows = ((m + kMR - 1) / kMR + pm - 1) / pm * kMR;
    const int64_t cols = ((n + kNR - 1) / kNR + pn - 1) / pn * kNR;
    return rows * cols + 16 * (rows * ((cols + kNC - 1) / kNC) + cols);
  };
  Split best{threads, 1};
  for (int64_t pm = threads - 1; pm >= 1; --pm)
    if (threads % pm == 0 && cost(pm, threads / pm) < cost(best.parts_m, best.parts_n))
      best = {pm, threads / pm};
  return best;
}

}  // namespace

void gemm_fast(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
               int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c,
               int64_t batch) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  if (k <= 0) {  // empty sum: C = beta * C
    for (int64_t e = 0; e < batch; ++e)
      for (int64_t i = 0; i < m; ++i) {
        float* row = c + e * stride_c + i * ldc;
        for (int64_t j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
      }
    return;
  }
  const int threads = num_threads();
  const bool serial = threads == 1 || batch * m * n * k < kParallelWork;
  const Split split = serial ? Split{} : choose_split(m, n, batch, threads);
  const int64_t parts = split.parts_m * split.parts_n;
  auto run_tasks = [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      const int64_t e = t / parts, part = t % parts;
      const auto [i0, i1] = part_range(m, kMR, split.parts_m, part / split.parts_n);
      const auto [j0, j1] = part_range(n, kNR, split.parts_n, part % split.parts_n);
      if (i0 == i1 || j0 == j1) continue;
      const Operand op_a{a + e * stride_a, lda, trans_a}, op_b{b + e * stride_b, ldb, trans_b};
      gemm_serial(op_a.sub(i0, 0), op_b.sub(0, j0), i1 - i0, j1 - j0, k, alpha, beta,
                  c + e * stride_c + i0 * ldc + j0, ldc);
    }
  };
  if (serial)
    run_tasks(0, batch);
  else
    parallel_for(0, batch * parts, 1, run_tasks);
}

void gemm_reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                    int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c,
                    int64_t batch) {
  for (int64_t e = 0; e < batch; ++e) {
    const float* ae = a + e * stride_a;
    const float* be = b + e * stride_b;
    float* ce = c + e * stride_c;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        // Accumulate in double so the reference is a trustworthy yardstick.
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const float x = trans_a ? ae[p * lda + i] : ae[i * lda + p];
          const float y = trans_b ? be[j * ldb + p] : be[p * ldb + j];
          sum += static_cast<double>(x) * y;
        }
        float& out = ce[i * ldc + j];
        out = beta == 0.0f ? alpha * static_cast<float>(sum)
                           : alpha * static_cast<float>(sum) + beta * out;
      }
  }
}

}  // namespace sf::kernels
