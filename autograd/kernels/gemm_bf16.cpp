// GEMM on bf16 operands with float32 accumulation: gemm.h's contract, the
// matrix products of mixed-precision training (docs/13-bf16.md).
//
// The AVX512-BF16 level is gemm.cpp's loop structure with one change of
// arithmetic. VDPBF16PS takes two vectors of 32 bf16 and, in each of its 16
// float32 lanes, adds the products of one PAIR of bf16 elements:
//
//   acc[i] += a[2i] * b[2i] + a[2i+1] * b[2i+1]        (i = 0..15)
//
// So the micro-kernel steps through k two at a time. Per pair of k it loads
// 32 columns of B as two vectors of 16 pairs (column c's pair is the 32-bit
// word c), broadcasts row r's pair of A as one 32-bit word, and does
// 2 * MR instructions: twice the multiply-adds of the float32 kernel's 2 * MR
// FMAs per step of k, at the same instruction count.
//
// That needs B in pairs: the packed panel holds, for each pair q of k and
// column c, the word (op(B)[2q, c], op(B)[2q+1, c]). A row-major A already
// has its pairs side by side, so it is read in place; a transposed A, or any
// A when k is odd, is packed into the same pair layout (an odd k's last pair
// ends in a zero, as B's does, so no element past the matrix is ever read).
//
// Packing is also where operands change layout only, never value: a bf16 is
// moved as its 16 bits.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "gemm.h"
#include "gemm_tasks.h"
#include "kernels.h"

#include <immintrin.h>

// GCC 12's AVX-512 intrinsics read an "undefined" register as a pass-through
// value and then warn about it (GCC bug 105593, fixed in GCC 13), as simd.h says.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace sf::kernels {
namespace {

// The tile and blocks. An 8 x 32 tile as the float32 kernel's (16
// accumulators cover VDPBF16PS's latency on two pipes). The B block is KC x NC
// bf16: 1024 x 512 is 1 MB, the float32 kernel's block in bytes, with the
// same number of pairs per pass as its KC of 512 has steps.
constexpr int kMR = 8;
constexpr int kNR = 32;
constexpr int64_t kKC = 1024;
constexpr int64_t kNC = 512;
// Below this many multiply-adds a product runs on the calling thread
// (gemm.cpp's kParallelWork, doubled: the bf16 kernel does twice the work per
// microsecond).
constexpr int64_t kParallelWork = int64_t{1} << 19;

uint32_t load_pair(const bf16* p) {
  uint32_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
}

// A matrix read through op(), as gemm.cpp's Operand.
struct Operand {
  const bf16* data;
  int64_t ld;
  bool trans;

  const bf16* at(int64_t i, int64_t j) const { return trans ? data + j * ld + i : data + i * ld + j; }
  bf16 get(int64_t i, int64_t j) const { return *at(i, j); }
  Operand sub(int64_t i, int64_t j) const { return {at(i, j), ld, trans}; }
};

// ---------------------------------------------------------------------------
// The AVX512-BF16 micro-kernel: C[0:R, 0:cols] = alpha * A panel * B panel +
// beta * C over `pairs` pairs of k. Row r's pair q of A is the word at
// a + r * a_row + q * a_pair (bf16 elements: in place, a_row = lda and
// a_pair = 2; packed, a_row = 2 and a_pair = 2 * kMR). The B panel is packed,
// kNR words per pair. beta == 0 never reads C.
// Compiled for AVX512-BF16 whatever the build's -march (GCC and Clang both
// take the attribute), and called only where CPUID says the CPU has it.
#define SF_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))


SF_AVX512_BF16 __mmask16 first_lanes(int count) {
  if (count >= 16) return 0xFFFF;
  return count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1);
}

// Packing into pairs, 16 words (or, for A's 8-row panels, 8) per vector.
// words[q * width + c] = (x[2q, c], x[2q+1, c]) for the pairs q of kc rows and
// the columns c < width of op(X), with a zero bf16 standing in for row kc when
// kc is odd and for the columns from `cols` on.

// op(X) = X: two rows of bf16 become one row of 32-bit pairs, each bf16
// zero-extended and the odd row's shifted into the high half.
template <int width>
SF_AVX512_BF16 void pack_row_pairs(const Operand& x, int64_t kc, int cols, uint32_t* words) {
  for (int64_t q = 0; 2 * q < kc; ++q) {
    const bf16* even = x.at(2 * q, 0);
    const bf16* odd = 2 * q + 1 < kc ? x.at(2 * q + 1, 0) : nullptr;
    uint32_t* out = words + q * width;
    if constexpr (width % 16 == 0) {
      for (int c = 0; c < width; c += 16) {
        const __mmask16 mask = first_lanes(cols - c);
        __m512i pairs = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, even + c));
        if (odd)
          pairs = _mm512_or_si512(pairs, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, odd + c)), 16));
        _mm512_storeu_si512(out + c, pairs);
      }
    } else {
      static_assert(width == 8);
      const __mmask8 mask = static_cast<__mmask8>(first_lanes(cols));
      __m256i pairs = _mm256_cvtepu16_epi32(_mm_maskz_loadu_epi16(mask, even));
      if (odd) pairs = _mm256_or_si256(pairs, _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_maskz_loadu_epi16(mask, odd)), 16));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), pairs);
    }
  }
}

// Transposes 16 rows of 16 32-bit words in registers (r[i] lane j becomes
// r[j] lane i): pairs of rows interleaved at 32 bits, then at 64, then 128-bit
// lanes exchanged twice.
SF_AVX512_BF16 void transpose_16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xDD);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xDD);
  }
}

// op(X) = X^T: column c of op(X) is row c of X, so its pair q is the 32-bit
// word at 2q in that row. Sixteen columns' next 16 pairs are 16 row loads,
// transposed in registers (B panels; a gather across the rows measured twice
// as slow); an 8-row A panel gathers. An odd kc's last pair is read as one
// bf16: a word would read past the row.
template <int width>
SF_AVX512_BF16 void pack_column_pairs(const Operand& x, int64_t kc, int cols, uint32_t* words) {
  const int64_t whole_pairs = kc / 2, row_bytes = x.ld * static_cast<int64_t>(sizeof(bf16));
  constexpr int lanes = width % 16 == 0 ? 16 : 8;
  for (int c = 0; c < width; c += lanes) {
    const char* rows = reinterpret_cast<const char*>(x.data + c * x.ld);
    if constexpr (lanes == 16) {
      for (int64_t q0 = 0; q0 < whole_pairs; q0 += 16) {
        const __mmask16 pairs = first_lanes(static_cast<int>(std::min<int64_t>(16, whole_pairs - q0)));
        __m512i r[16];
        for (int i = 0; i < 16; ++i)
          r[i] = i < cols - c ? _mm512_maskz_loadu_epi32(pairs, rows + i * row_bytes + 4 * q0) : _mm512_setzero_si512();
        transpose_16x16(r);
        for (int64_t i = 0; i < 16 && q0 + i < whole_pairs; ++i) _mm512_storeu_si512(words + (q0 + i) * width + c, r[i]);
      }
    } else {
      const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                                 _mm256_set1_epi32(static_cast<int>(row_bytes)));
      const __mmask8 mask = static_cast<__mmask8>(first_lanes(cols - c));
      for (int64_t q = 0; q < whole_pairs; ++q)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + q * width + c),
                            _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), mask, offsets, rows + 4 * q, 1));
    }
  }
  if (kc % 2 != 0)
    for (int c = 0; c < width; ++c) words[whole_pairs * width + c] = c < cols ? x.get(kc - 1, c).bits : 0u;
}

// op(X)[0:kc, 0:cols] as pairs, `width` words per pair of k.
template <int width>
SF_AVX512_BF16 void pack_pairs(const Operand& x, int64_t kc, int cols, uint32_t* words) {
  if (x.trans)
    pack_column_pairs<width>(x, kc, cols, words);
  else
    pack_row_pairs<width>(x, kc, cols, words);
}

template <int R>
SF_AVX512_BF16 void micro_kernel(int64_t pairs, const bf16* a, int64_t a_row, int64_t a_pair, const uint32_t* b, float* c,
                  int64_t ldc, int cols, float alpha, float beta) {
  __m512 lo[R], hi[R];  // columns 0-15 and 16-31 of each row
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q) {
    const __m512bh b_lo = (__m512bh)_mm512_load_si512(b + q * kNR);
    const __m512bh b_hi = (__m512bh)_mm512_load_si512(b + q * kNR + 16);
    const bf16* a_q = a + q * a_pair;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(load_pair(a_q + r * a_row)));
      lo[r] = _mm512_dpbf16_ps(lo[r], ar, b_lo);
      hi[r] = _mm512_dpbf16_ps(hi[r], ar, b_hi);
    }
  }
  const __mmask16 mask_lo = first_lanes(cols), mask_hi = first_lanes(cols - 16);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* row = c + r * ldc;
    __m512 out_lo = _mm512_mul_ps(va, lo[r]), out_hi = _mm512_mul_ps(va, hi[r]);
    if (beta != 0.0f) {
      out_lo = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask_lo, row), out_lo);
      out_hi = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask_hi, row + 16), out_hi);
    }
    _mm512_mask_storeu_ps(row, mask_lo, out_lo);
    _mm512_mask_storeu_ps(row + 16, mask_hi, out_hi);
  }
}

using MicroKernel = void (*)(int64_t, const bf16*, int64_t, int64_t, const uint32_t*, float*, int64_t, int, float,
                             float);
template <std::size_t... I>
constexpr std::array<MicroKernel, kMR> make_kernels(std::index_sequence<I...>) {
  return {&micro_kernel<static_cast<int>(I) + 1>...};
}
// [r - 1] computes a tile of r rows.
constexpr std::array<MicroKernel, kMR> kKernels = make_kernels(std::make_index_sequence<kMR>{});

#undef SF_AVX512_BF16

thread_local gemm_tasks::AlignedBuffer<uint32_t> t_pack_a, t_pack_b;

// One product on the calling thread, k > 0: gemm.cpp's gemm_serial, with B
// always packed (into pairs) and A packed when its pairs are not in place.
void gemm_serial(const Operand& a, const Operand& b, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                 float* c, int64_t ldc) {
  const int64_t nc_max = gemm_tasks::block_size(n, kNC, kNR);
  const int64_t kc_max = gemm_tasks::block_size(k, kKC, 2);
  const bool pack_a = a.trans || k % 2 != 0;
  uint32_t* b_block = t_pack_b.get((kc_max / 2 + 1) * nc_max);
  uint32_t* a_panel = pack_a ? t_pack_a.get((kc_max / 2 + 1) * kMR) : nullptr;
  for (int64_t jc = 0; jc < n; jc += nc_max) {
    const int64_t nc = std::min(nc_max, n - jc);
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, k - pc), pairs = (kc + 1) / 2;
      const float beta_block = pc == 0 ? beta : 1.0f;  // later K blocks accumulate
      for (int64_t jr = 0; jr < nc; jr += kNR)
        pack_pairs<kNR>(b.sub(pc, jc + jr), kc, static_cast<int>(std::min<int64_t>(kNR, nc - jr)),
                        b_block + jr * pairs);
      for (int64_t ir = 0; ir < m; ir += kMR) {
        const int rows = static_cast<int>(std::min<int64_t>(kMR, m - ir));
        const bf16* a_words = a.at(ir, pc);
        int64_t a_row = a.ld, a_pair = 2;
        if (pack_a) {
          // op(A) seen transposed, so that its pairs along k are rows, kMR wide.
          const Operand a_by_k{a.at(ir, pc), a.ld, !a.trans};
          pack_pairs<kMR>(a_by_k, kc, rows, a_panel);
          a_words = reinterpret_cast<const bf16*>(a_panel);
          a_row = 2;
          a_pair = 2 * kMR;
        }
        for (int64_t jr = 0; jr < nc; jr += kNR)
          kKernels[rows - 1](pairs, a_words, a_row, a_pair, b_block + jr * pairs, c + ir * ldc + jc + jr, ldc,
                             static_cast<int>(std::min<int64_t>(kNR, nc - jr)), alpha, beta_block);
      }
    }
  }
}

void gemm_avx512_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                      int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta,
                      float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  const int threads = num_threads();
  const bool serial = threads == 1 || batch * m * n * k < kParallelWork;
  // Each task packs its own columns of B: their cost is counted 4x per word
  // beside the tile's multiply-adds, as gemm.cpp weighs its packing.
  const gemm_tasks::Split split =
      serial ? gemm_tasks::Split{} : gemm_tasks::choose_split(batch, threads, [&](int64_t pm, int64_t pn) {
        const int64_t rows = ((m + kMR - 1) / kMR + pm - 1) / pm * kMR;
        const int64_t cols = ((n + kNR - 1) / kNR + pn - 1) / pn * kNR;
        return rows * cols + 4 * cols;
      });
  gemm_tasks::run_tasks(m, n, batch, kMR, kNR, serial, split,
                        [&](int64_t e, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const Operand op_a{a + e * stride_a, lda, trans_a}, op_b{b + e * stride_b, ldb, trans_b};
    gemm_serial(op_a.sub(i0, 0), op_b.sub(0, j0), i1 - i0, j1 - j0, k, alpha, beta,
                c + e * stride_c + i0 * ldc + j0, ldc);
  });
}

// Portable: both operands widened to float32 (exact), then the float32 GEMM,
// whose products of these values are the same exact products.
thread_local gemm_tasks::AlignedBuffer<float> t_wide_a, t_wide_b;

void gemm_portable(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                   int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta,
                   float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  const int64_t extent_a = gemm_operand_extent(trans_a, m, k, lda, stride_a, batch);
  const int64_t extent_b = gemm_operand_extent(trans_b, k, n, ldb, stride_b, batch);
  float* wide_a = t_wide_a.get(extent_a);
  float* wide_b = t_wide_b.get(extent_b);
  fast_table().bf16_to_float(a, wide_a, extent_a);
  fast_table().bf16_to_float(b, wide_b, extent_b);
  fast::gemm(trans_a, trans_b, m, n, k, alpha, wide_a, lda, stride_a, wide_b, ldb, stride_b, beta, c, ldc, stride_c,
             batch);
}

Bf16Gemm best_supported() {
  return cpu_supports(Bf16Gemm::kAvx512Bf16) ? Bf16Gemm::kAvx512Bf16 : Bf16Gemm::kPortable;
}

Bf16Gemm& current_level() {
  static Bf16Gemm level = best_supported();
  return level;
}

}  // namespace

const char* to_string(Bf16Gemm level) {
  return level == Bf16Gemm::kAvx512Bf16 ? "avx512_bf16" : "portable";
}

bool cpu_supports(Bf16Gemm level) {
  switch (level) {
    case Bf16Gemm::kAvx512Bf16:
      __builtin_cpu_init();  // may run before the library's constructors
      return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
    case Bf16Gemm::kPortable: return true;
  }
  return false;
}

Bf16Gemm bf16_gemm() { return current_level(); }

bool set_bf16_gemm(Bf16Gemm level) {
  if (!cpu_supports(level)) return false;
  current_level() = level;
  return true;
}

void fast::gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                     int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta,
                     float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  if (k <= 0) return gemm_tasks::scale_c(m, n, beta, c, ldc, stride_c, batch);
  auto run = current_level() == Bf16Gemm::kAvx512Bf16 ? gemm_avx512_bf16 : gemm_portable;
  run(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}

}  // namespace sf::kernels
