// GEMM after Goto & van de Geijn ("Anatomy of High-Performance Matrix
// Multiplication") with the BLIS loop structure, except that A is never packed.
// For one product:
//
//   for jc over N in steps of NC:            B block [KC x NC] lives in L2
//     for pc over K in steps of KC:
//       pack op(B)[pc:+KC, jc:+NC] into NR-wide column panels (or read it in place)
//       for ir over M in steps of MR:        A panel [MR x KC], read in place
//         for jr over NC in steps of NR:     micro-kernel, C tile in registers
//           C[ir:+MR, jc+jr:+NR] (+)= A panel ir * B panel jr
//
// The micro-kernel holds an MR x NR tile of C in vector registers; per step of k
// it loads NR floats of B, broadcasts MR floats of A and does MR*NR/W FMAs (W =
// floats per vector). A broadcast reads one float, so the kernel takes A where
// it lies, each of its rows (op(A) = A) or columns (op(A) = A^T) a fixed stride
// apart: packing A into panels measured slower at every size of the bench (1024^3
// NN at 79% of the FMA peak instead of 88%, 64^3 NN at 0.72x OpenBLAS instead of 0.85x).
// (On x86. The NEON kernel takes A's floats as lanes of vectors and packs A:
// kPackRowsOfA.)
// A transposed A (backward's weight gradients, X^T dY) is the exception: its
// panel's k steps lie a row of A apart, and it is packed (pack_a_columns).
// B's NR floats per step are a contiguous row of op(B) only when B is not
// transposed, so a transposed B is always packed into panels laid out in the
// kernel's reading order; an untransposed one is read in place by products of
// few rows, where a packed copy would be reused too few times to pay for itself
// (kPackBRows). Each B block is reused from L2 by all M/MR A panels.
// Products of at most kFewRows rows (decoding) take gemm_few_rows.cpp instead.
//
// gemm_rounded_bf16 is this GEMM with every operand element rounded to bf16
// where it is copied: B always packed (each panel rounded in L2 once packed),
// a transposed A packed as above and rounded likewise, and an untransposed A,
// otherwise read in place, copied MC rows at a time (row-major, no reordering)
// and rounded there. Each copy is reused by the columns of its B block (up to
// NC). Measured 1-thread on an Emerald Rapids Xeon against gemm: 3-7% more time
// on a Transformer's products, 13% where A is large and streamed from memory
// (2048 x 256 x 8000, the logits' gradient times W: the copy is not hidden
// under the FMAs as reading in place is), 20-25% on small attention products;
// about what separate rounding passes cost the step, without their copies
// (docs/13-bf16.md).
#include "gemm.h"
#include "kernels.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <new>
#include <utility>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>

#include "neon_tile.h"
#endif

#include "gemm_few_rows.h"
#include "gemm_tasks.h"
#include "simd.h"

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
constexpr bool kPackRowsOfA = false;  // the top of this file says why
#elif defined(__AVX2__) && defined(__FMA__)
// 16 ymm registers: a 6 x 16 tile is 12 accumulators + 2 B vectors + 1 broadcast.
constexpr int kMR = 6;
constexpr int kNR = 16;
constexpr bool kPackRowsOfA = false;
#elif defined(__aarch64__)
// 32 NEON registers of 4 floats. An 8 x 12 tile is 24 accumulators; per step
// of k it loads 3 vectors of B and multiplies them by each row's element of A
// as a lane of a register (FMLA by element: no broadcasts), 24 FMAs. The 24
// cover the 4-cycle FMA latency of 4 FMA pipes (16 in flight), and 8 registers
// are left for B and A. A is always packed into panels (pack_a_rows, as
// pack_a_columns for a transposed A), so that a step's 8 elements of A are 2
// vector loads. Read in place, they are 8 loads of a float each, 11 loads to
// 24 FMAs, and GCC, issuing the 8 first, runs out of registers and keeps 2
// accumulators on the stack (a store and a reload every step).
constexpr int kMR = 8;
constexpr int kNR = neon_tile::kColumns;
constexpr bool kPackRowsOfA = true;
#else
// Portable C++: a small tile the compiler can keep in (SSE) registers.
constexpr int kMR = 4;
constexpr int kNR = 16;
constexpr bool kPackRowsOfA = false;
#endif

// KC x NC: the B block. A 1 MB block (KC 512 x NC 512 floats, Zen 4's whole
// L2) measured 3-7% faster than 512 KB ones (512 x 256, 256 x 512) at 1024^3
// and 2048 x 1024 x 256: a larger KC means fewer passes over C (each reads and
// writes all of it), a larger NC fewer re-reads of A from L3.
constexpr int64_t kKC = 512;
constexpr int64_t kNC = 512;
// A transposed A is packed MC rows at a time (pack_a_columns): 16 panels, so
// each step of k reads 16 * MR contiguous floats of a row of A (whole cache
// lines, in the order the prefetcher follows) into a block of 16 KC x MR
// panels that stays in L2 beside the B block (256 KB at MR 8, KC 512).
constexpr int64_t kMC = 16 * kMR;

// An untransposed op(B) = B is packed only for products of more than this many
// rows. Read in place, each step of k reads a row of B at stride ldb, often
// across cache lines; packed, the copy (0.4 cycles per float) is repaid once B
// is reused by enough A panels. Measured 1-thread NN: in place is 5-20% faster
// up to M = 128 (batched 32 x 32 x 32: 85 against 70 GFLOP/s), equal at 256,
// slower from 512 on and for 2048 x 8000 x 256 (93 against 100 GFLOP/s).
// Whatever the rows, B is packed where its rows lie a page or more apart
// (ldb >= kPageFloats) and more than one panel of A reuses it: read in place
// each step of k would then touch a page of its own, and a product of k steps
// needs k TLB entries. Measured on an Emerald Rapids Xeon, 2 threads (whose
// split gives each task 128 rows or fewer): backward's TN 256 x 1024 x 2048
// (the second feed-forward weight's gradient) from 78-101 to 181-185 GFLOP/s,
// NN 128 x 1024 x 2048 from 117-120 to 240-246; 1 thread, NN 128 x 1024 x 2048
// from 55-57 to 119-122. With one panel of rows (8 x 1024 x 1024) in place
// stays faster: 40-52 against 33-35.
constexpr int64_t kPackBRows = 128;
constexpr int64_t kPageFloats = 1024;

// Below this many multiply-adds (summed over the batch, ~3 us on one core) a
// product runs on the calling thread. The pool's workers spin between jobs, so
// a hand-off costs about a microsecond: measured at 2 threads on Zen 4, 64^3
// (2^18) runs at 156 GFLOP/s split against 106 on one thread, 128^3 at 205
// against 108; with the old threshold of 2^22 both ran on one thread.
constexpr int64_t kParallelWork = int64_t{1} << 18;

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

// dst[p * kNR + c] = src[c * ld + p] for p < kc, c < cols: the transpose of a
// cols x kc block into a B panel. 8 x 8 tiles are transposed in registers:
// element by element it took 1.5 cycles per float instead of 0.5.
void transpose_into_panel(const float* src, int64_t ld, int64_t kc, int cols, float* dst) {
  int c = 0;
#if defined(__AVX2__)
  for (; c + 8 <= cols; c += 8) {
    int64_t p = 0;
    for (; p + 8 <= kc; p += 8) {
      // The textbook 8 x 8 transpose: interleave pairs of rows at 32 bits, then
      // at 64 bits, then swap 128-bit halves.
      __m256 row[8], t[8];
      for (int i = 0; i < 8; ++i) row[i] = _mm256_loadu_ps(src + (c + i) * ld + p);
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(row[i], row[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(row[i], row[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {
        row[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        row[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        row[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        row[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
      }
      for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(dst + (p + i) * kNR + c, _mm256_permute2f128_ps(row[i], row[i + 4], 0x20));
        _mm256_storeu_ps(dst + (p + i + 4) * kNR + c,
                         _mm256_permute2f128_ps(row[i], row[i + 4], 0x31));
      }
    }
    for (; p < kc; ++p)
      for (int i = 0; i < 8; ++i) dst[p * kNR + c + i] = src[(c + i) * ld + p];
  }
#endif
  for (; c < cols; ++c)
    for (int64_t p = 0; p < kc; ++p) dst[p * kNR + c] = src[c * ld + p];
}

// Rounds x[r * ld + c], r < rows and c < cols, to bf16 where it lies.
void round_block(float* x, int64_t rows, int64_t cols, int64_t ld) {
  using simd::Vec;
  if (cols == ld) {  // one contiguous run
    cols *= rows;
    rows = 1;
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * ld;
    int64_t c = 0;
    for (; c + Vec::width <= cols; c += Vec::width) round_to_bf16(Vec::load(row + c)).store(row + c);
    for (; c < cols; ++c) row[c] = round_to_bf16(row[c]);
  }
}

// dst[0:n] = src[0:n], with `round` each rounded to bf16 on the way (one pass).
void copy_run(const float* src, int64_t n, float* dst, bool round) {
  using simd::Vec;
  if (!round) return void(std::copy_n(src, n, dst));
  int64_t i = 0;
  for (; i + Vec::width <= n; i += Vec::width) round_to_bf16(Vec::load(src + i)).store(dst + i);
  for (; i < n; ++i) dst[i] = round_to_bf16(src[i]);
}

// Packs op(B)[0:kc, 0:nc] into column panels of kNR: panel j (starting at column
// j) is at dst + j * kc, element (p, c) at [p * kNR + c], with `round` each
// rounded to bf16. An edge panel's columns past nc are left unset: the
// micro-kernel never reads them.
void pack_b(const Operand& b, int64_t kc, int64_t nc, float* dst, bool round) {
  for (int64_t j = 0; j < nc; j += kNR) {
    const int cols = static_cast<int>(std::min<int64_t>(kNR, nc - j));
    float* panel = dst + j * kc;
    if (b.trans) {  // column c of op(B) is a contiguous row of B
      transpose_into_panel(b.at(0, j), b.ld, kc, cols, panel);
      if (round) round_block(panel, kc, cols, kNR);  // while the panel is in L1
    } else {
      for (int64_t p = 0; p < kc; ++p) copy_run(b.at(p, j), cols, panel + p * kNR, round);
    }
  }
}

// ---------------------------------------------------------------------------
// Micro-kernels: C[0:R, 0:cols] = alpha * (A panel * B panel) + beta * C.
// Element (p, c) of the B panel is b[p * b_step + c]: a packed panel (b_step
// kNR) or op(B) = B read in place (b_step ldb); only its first `cols` columns
// are read. Element (r, p) of the A panel, op(A) read in place, is found as
// APanel says. R is a template parameter so edge tiles with fewer rows do only
// the work they need; beta == 0 never reads C.

enum class APanel {
  kColumns,  // op(A) = A^T: element (r, p) at a[p * lda + r]
  kRows,     // op(A) = A: element (r, p) at a[r * lda + p]
};

template <APanel L>
float a_element(const float* a, int64_t lda, int r, int64_t p) {
  return L == APanel::kColumns ? a[p * lda + r] : a[r * lda + p];
}

#if defined(__AVX512F__)

// Mask selecting the first `count` of 16 lanes (all for count >= 16, none for <= 0).
__mmask16 first_lanes(int count) {
  if (count >= 16) return 0xFFFF;
  return count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1);
}

template <int R, APanel L>
void micro_kernel(int64_t kc, const float* a, int64_t lda, const float* b, int64_t b_step,
                  float* c, int64_t ldc, int cols, float alpha, float beta) {
  // Masked loads and stores handle a partial tile: masked-off lanes never fault,
  // so a B read in place may end at its last column.
  const __mmask16 mask_lo = first_lanes(cols), mask_hi = first_lanes(cols - 16);
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
    const __m512 b_lo = _mm512_maskz_loadu_ps(mask_lo, b + p * b_step);
    const __m512 b_hi = _mm512_maskz_loadu_ps(mask_hi, b + p * b_step + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 ar = _mm512_set1_ps(a_element<L>(a, lda, r, p));
      lo[r] = _mm512_fmadd_ps(ar, b_lo, lo[r]);
      hi[r] = _mm512_fmadd_ps(ar, b_hi, hi[r]);
    }
  }
  if (alpha != 1.0f) {
    const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      lo[r] = _mm512_mul_ps(va, lo[r]);
      hi[r] = _mm512_mul_ps(va, hi[r]);
    }
  }
  if (beta != 0.0f) {
    const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      lo[r] = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask_lo, c + r * ldc), lo[r]);
      hi[r] = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask_hi, c + r * ldc + 16), hi[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, mask_lo, lo[r]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, mask_hi, hi[r]);
  }
}

#elif defined(__AVX2__) && defined(__FMA__)

template <int R, APanel L>
void micro_kernel(int64_t kc, const float* a, int64_t lda, const float* b, int64_t b_step,
                  float* c, int64_t ldc, int cols, float alpha, float beta) {
  // AVX2 masked moves never fault on masked-off lanes, so a B read in place may
  // end at its last column.
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask_lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lane);
  const __m256i mask_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8), lane);
  // Every loop over r is fully unrolled so that lo/hi live in registers.
  __m256 lo[R], hi[R];  // columns 0-7 and 8-15 of each row
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b_lo = _mm256_maskload_ps(b + p * b_step, mask_lo);
    const __m256 b_hi = _mm256_maskload_ps(b + p * b_step + 8, mask_hi);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 ar = _mm256_set1_ps(a_element<L>(a, lda, r, p));
      lo[r] = _mm256_fmadd_ps(ar, b_lo, lo[r]);
      hi[r] = _mm256_fmadd_ps(ar, b_hi, hi[r]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    __m256 out_lo = _mm256_mul_ps(va, lo[r]), out_hi = _mm256_mul_ps(va, hi[r]);
    // Masked stores are slow on some CPUs, so a full tile uses plain ones.
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

#elif defined(__aarch64__)

// Calls body(std::integral_constant<int, r>{}) for r = 0 .. R-1: each row's
// code with r a constant, as FMLA by element needs its lane to be.
template <int R, class Body>
void for_each_row(Body body) {
  [&]<int... r>(std::integer_sequence<int, r...>) {
    (body(std::integral_constant<int, r>{}), ...);
  }(std::make_integer_sequence<int, R>{});
}

template <int R, APanel L>
void micro_kernel(int64_t kc, const float* a, int64_t lda, const float* b, int64_t b_step,
                  float* c, int64_t ldc, int cols, float alpha, float beta) {
  static_assert(L == APanel::kColumns, "A comes packed into panels (kPackRowsOfA)");
  // NEON has no masked loads: a partial tile first copies its columns of B
  // into a full-width panel (a B read in place may end at its last column).
  float edge[kKC * kNR];
  if (cols < kNR) {
    for (int64_t p = 0; p < kc; ++p) std::copy_n(b + p * b_step, cols, edge + p * kNR);
    b = edge;
    b_step = kNR;
  }
  // Every loop over r and j is fully unrolled so that acc lives in registers.
  float32x4_t acc[R][3];  // columns 0-3, 4-7 and 8-11 of each row
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = acc[r][2] = vdupq_n_f32(0.0f);
  // Step p's elements of A lie together (kMR floats of a packed panel): two
  // vectors, row r in lane r % 4 of the (r / 4)th.
  for (int64_t p = 0; p < kc; ++p) {
    const float* bp = b + p * b_step;
    const float32x4_t b0 = vld1q_f32(bp), b1 = vld1q_f32(bp + 4), b2 = vld1q_f32(bp + 8);
    const float32x4_t a_lo = vld1q_f32(a + p * lda), a_hi = R > 4 ? vld1q_f32(a + p * lda + 4) : a_lo;
    for_each_row<R>([&](auto r) {
      constexpr int lane = decltype(r)::value % 4;
      const float32x4_t ar = r < 4 ? a_lo : a_hi;
      acc[r][0] = vfmaq_laneq_f32(acc[r][0], b0, ar, lane);
      acc[r][1] = vfmaq_laneq_f32(acc[r][1], b1, ar, lane);
      acc[r][2] = vfmaq_laneq_f32(acc[r][2], b2, ar, lane);
    });
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) neon_tile::store_row(acc[r], c + r * ldc, cols, alpha, beta);
}

#else

template <int R, APanel L>
void micro_kernel(int64_t kc, const float* a, int64_t lda, const float* b, int64_t b_step,
                  float* c, int64_t ldc, int cols, float alpha, float beta) {
  float acc[R][kNR] = {};
  for (int64_t p = 0; p < kc; ++p)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < cols; ++j) acc[r][j] += a_element<L>(a, lda, r, p) * b[p * b_step + j];
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    for (int j = 0; j < cols; ++j)
      cr[j] = beta == 0.0f ? alpha * acc[r][j] : alpha * acc[r][j] + beta * cr[j];
  }
}

#endif

using MicroKernel = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*,
                             int64_t, int, float, float);
using KernelsByRows = std::array<MicroKernel, kMR>;  // [r - 1] computes a tile of r rows

template <APanel L, std::size_t... I>
constexpr KernelsByRows make_kernels(std::index_sequence<I...>) {
  return {&micro_kernel<static_cast<int>(I) + 1, L>...};
}
constexpr KernelsByRows kColumnKernels =
    make_kernels<APanel::kColumns>(std::make_index_sequence<kMR>{});
// Where A is always packed (kPackRowsOfA), no kernel reads it in place.
constexpr KernelsByRows kRowKernels = [] {
  if constexpr (kPackRowsOfA)
    return KernelsByRows{};
  else
    return make_kernels<APanel::kRows>(std::make_index_sequence<kMR>{});
}();

// ---------------------------------------------------------------------------
// The single-threaded driver.

thread_local gemm_tasks::AlignedBuffer<float> t_pack_b, t_pack_a;

// Packed A panels lie this many floats apart: kc * kMR would put the panels
// of a usual kc (512 * 8 floats: 16 KB) a multiple of 4 KB apart, and then
// each step of pack_a_columns stores to 16 addresses that agree in their low
// 12 bits with one another and with the next step's loads from A. The CPU
// compares only those bits to decide whether a load must wait for an earlier
// store ("4K aliasing"), so the loads stalled. 16 floats more per panel
// (one cache line) part them. Measured 1-thread on an Emerald Rapids Xeon,
// best of 5 runs each: TN 256 x 256 x 1024 from 125 to 134 GFLOP/s,
// 256 x 1024 x 1024 from 127 to 131, 1024 x 256 x 1024 from 131 to 136.
int64_t a_panel_stride(int64_t kc) { return kc * kMR + 16; }

// Copies `rows` rows of op(A) = A^T over kc steps of k (step p's floats lie
// together in row p of A, the steps a stride lda apart) into panels of kMR
// rows: panel q at dst + q * a_panel_stride(kc), element (r, p) at
// [p * kMR + r]. The micro-kernel then reads a dense panel in L1 for every B
// panel of the block instead of kc lines each a page apart (lda is the
// product's M), and each row of A is read once, MC floats in a run, not once
// per panel. Measured 1-thread on a Sapphire Rapids Xeon against packing one
// panel at a time (itself from 72 to ~110 GFLOP/s at TN 1024^3 against no
// packing): TN 1024 x 256 x 2048 from 126-130 to 163-164 GFLOP/s, 8000 x 256 x
// 1500 from 136-141 to 169-170, 256 batched 64 x 32 x 64 from 87 to 121-127
// (OpenBLAS: 163-171, 160-164, 121-124); bits unchanged (the same kernel on
// the same values).
void pack_a_columns(const float* a, int64_t lda, int64_t kc, int64_t rows, float* dst) {
  for (int64_t p = 0; p < kc; ++p) {
    const float* step = a + p * lda;
    float* out = dst + p * kMR;
    int64_t r = 0;
    for (; r + kMR <= rows; r += kMR, out += a_panel_stride(kc))
      for (int i = 0; i < kMR; ++i) out[i] = step[r + i];  // a fixed count: one vector move
    for (int i = 0; r + i < rows; ++i) out[i] = step[r + i];
  }
}

// The same panels from op(A) = A (kPackRowsOfA), whose rows lie lda apart:
// element (r, p) of panel q from a[(q * kMR + r) * lda + p].
void pack_a_rows(const float* a, int64_t lda, int64_t kc, int64_t rows, float* dst) {
  for (int64_t q = 0; q < rows; q += kMR, dst += a_panel_stride(kc))
    for (int64_t r = q; r < std::min(q + kMR, rows); ++r)
      for (int64_t p = 0; p < kc; ++p) dst[p * kMR + r - q] = a[r * lda + p];
}

bool packs_b(bool trans_b, int64_t m, int64_t ldb, bool round) {
  return round || trans_b || m > kPackBRows || (ldb >= kPageFloats && m > kMR);
}

// One product on the calling thread: C[m,n] = alpha op(A) op(B) + beta C, k > 0;
// with `round`, of A and B rounded to bf16.
void gemm_serial(const Operand& a, const Operand& b, int64_t m, int64_t n, int64_t k, float alpha,
                 float beta, float* c, int64_t ldc, bool round) {
  const int64_t nc_max = gemm_tasks::block_size(n, kNC, kNR);
  const int64_t kc_max = gemm_tasks::block_size(k, kKC, 1);
  const bool pack = packs_b(b.trans, m, b.ld, round);
  float* b_block = pack ? t_pack_b.get(kc_max * nc_max) : nullptr;
  // A is copied into panels when transposed (or always: kPackRowsOfA), else
  // when rounded (rows as they lie).
  const bool a_panels = a.trans || kPackRowsOfA;
  const bool copies_a = a_panels || round;
  const int64_t mc_max = copies_a ? std::min(kMC, (m + kMR - 1) / kMR * kMR) : m;
  float* a_packed = !copies_a ? nullptr
                    : a_panels ? t_pack_a.get(a_panel_stride(kc_max) * (mc_max / kMR))
                               : t_pack_a.get(mc_max * kc_max);
  const KernelsByRows& kernels = a_panels ? kColumnKernels : kRowKernels;
  for (int64_t jc = 0; jc < n; jc += nc_max) {
    const int64_t nc = std::min(nc_max, n - jc);
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, k - pc);
      const float beta_block = pc == 0 ? beta : 1.0f;  // later K blocks accumulate
      // B panel jr starts at b_panels + jr * b_stride; the kernel steps through it by b_step.
      const float* b_panels = b.at(pc, jc);
      int64_t b_stride = 1, b_step = b.ld;
      if (pack) {
        pack_b(b.sub(pc, jc), kc, nc, b_block, round);
        b_panels = b_block;
        b_stride = kc;
        b_step = kNR;
      }
      for (int64_t ic = 0; ic < m; ic += mc_max) {
        const int64_t mc = std::min(mc_max, m - ic);
        if (a_panels) {
          (a.trans ? pack_a_columns : pack_a_rows)(a.at(ic, pc), a.ld, kc, mc, a_packed);
          if (round)
            for (int64_t q = 0; q < mc; q += kMR)
              round_block(a_packed + q / kMR * a_panel_stride(kc), kc, std::min<int64_t>(kMR, mc - q), kMR);
        } else if (round) {
          for (int64_t r = 0; r < mc; ++r) copy_run(a.at(ic + r, pc), kc, a_packed + r * kc, true);
        }
        for (int64_t ir = ic; ir < ic + mc; ir += kMR) {
          const int rows = static_cast<int>(std::min<int64_t>(kMR, ic + mc - ir));
          const MicroKernel kernel = kernels[rows - 1];
          // Panel ir of A, and the step between its elements (r, p) and (r, p + 1) or (r + 1, p).
          const float* a_panel = !a_packed ? a.at(ir, pc)
                                 : a_panels ? a_packed + (ir - ic) / kMR * a_panel_stride(kc)
                                            : a_packed + (ir - ic) * kc;
          const int64_t a_step = !a_packed ? a.ld : a_panels ? kMR : kc;
          for (int64_t jr = 0; jr < nc; jr += kNR) {
            const int cols = static_cast<int>(std::min<int64_t>(kNR, nc - jr));
            kernel(kc, a_panel, a_step, b_panels + jr * b_stride, b_step, c + ir * ldc + jc + jr, ldc,
                   cols, alpha, beta_block);
          }
        }
      }
    }
  }
}

// Threading (gemm_tasks.h): the largest task's cost, counted per step of k, is
// its MR x NR tiles (padding included) plus packing its columns of B if it
// must, weighted 8x per float because packing moves ~2 floats/cycle while the
// kernel does 16 multiply-adds/cycle.
gemm_tasks::Split choose_split(bool trans_b, int64_t ldb, int64_t m, int64_t n, int64_t batch, int threads,
                               bool round) {
  return gemm_tasks::choose_split(batch, threads, [&](int64_t pm, int64_t pn) {
    const int64_t rows = ((m + kMR - 1) / kMR + pm - 1) / pm * kMR;
    const int64_t cols = ((n + kNR - 1) / kNR + pn - 1) / pn * kNR;
    return rows * cols + (packs_b(trans_b, rows, ldb, round) ? 8 * cols : 0);
  });
}

// fast::gemm, or with `round` fast::gemm_rounded_bf16.
void gemm_threaded(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta,
                   float* c, int64_t ldc, int64_t stride_c, int64_t batch, bool round) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  if (k <= 0) return gemm_tasks::scale_c(m, n, beta, c, ldc, stride_c, batch);
  if (m <= kFewRows)
    return gemm_few_rows(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                         stride_c, batch, round);
  const int threads = num_threads();
  const bool serial = threads == 1 || batch * m * n * k < kParallelWork;
  const gemm_tasks::Split split =
      serial ? gemm_tasks::Split{} : choose_split(trans_b, ldb, m, n, batch, threads, round);
  gemm_tasks::run_tasks(m, n, batch, kMR, kNR, serial, split,
                        [&](int64_t e, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const Operand op_a{a + e * stride_a, lda, trans_a}, op_b{b + e * stride_b, ldb, trans_b};
    gemm_serial(op_a.sub(i0, 0), op_b.sub(0, j0), i1 - i0, j1 - j0, k, alpha, beta,
                c + e * stride_c + i0 * ldc + j0, ldc, round);
  });
}

}  // namespace

void fast::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta,
                float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  gemm_threaded(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch,
                /*round=*/false);
}

void fast::gemm_rounded_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                             const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                             int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  gemm_threaded(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch,
                /*round=*/true);
}

}  // namespace sf::kernels
