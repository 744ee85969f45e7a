// The AVX512-BF16 level of the bf16 GEMM (gemm.h: Bf16Gemm::kAvx512Bf16;
// docs/13-bf16.md), compiled on x86-64 only: the choice among the levels is
// gemm_bf16_levels.cpp, the AMX level gemm_amx.cpp.
//
// It is gemm.cpp's loop structure with one change of
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
// That needs B in pairs (bf16_pairs.h, packed by bf16_pairs_avx512.h). A row-major A already has its pairs
// side by side, so it is read in place; a transposed A, or any A when k is
// odd, is packed into the same pair layout.
#if defined(__x86_64__)
#include <array>
#include <cstring>
#include <utility>

#include "bf16_pairs_avx512.h"
#include "gemm.h"

namespace sf::kernels {
namespace {

using bf16_pairs::Operand;
using bf16_pairs::first_lanes;
using bf16_pairs::pack_pairs;

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

// ---------------------------------------------------------------------------
// The AVX512-BF16 micro-kernel: C[0:R, 0:cols] = alpha * A panel * B panel +
// beta * C over `pairs` pairs of k. Row r's pair q of A is the word at
// a + r * a_row + q * a_pair (bf16 elements: in place, a_row = lda and
// a_pair = 2; packed, a_row = 2 and a_pair = 2 * kMR). The B panel is packed,
// kNR words per pair. beta == 0 never reads C.
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
// [r - 1] computes a tile of r rows.
constexpr auto kKernels = gemm_tasks::kernels_by_rows<MicroKernel, kMR>([](auto r) { return &micro_kernel<r>; });

thread_local gemm_tasks::AlignedBuffer<uint32_t> t_pack_a;

// One product on the calling thread, k > 0: gemm.cpp's gemm_serial, with B
// always packed (into pairs) and A packed when its pairs are not in place.
void gemm_serial(const Operand& a, const Operand& b, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                 float* c, int64_t ldc) {
  const bool pack_a = a.trans || k % 2 != 0;
  uint32_t* a_panel = pack_a ? t_pack_a.get((kKC / 2 + 1) * kMR) : nullptr;
  bf16_pairs::blocked_product(
      b, m, n, k, kMR, kNR, kKC, kNC, beta, pack_pairs<kNR>,
      [&](int64_t ir, int rows, int64_t pc, int64_t kc, int64_t jc, int64_t nc, float beta_block,
          const uint32_t* b_block) {
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
        const int64_t pairs = (kc + 1) / 2;
        for (int64_t jr = 0; jr < nc; jr += kNR)
          kKernels[rows - 1](pairs, a_words, a_row, a_pair, b_block + jr * pairs, c + ir * ldc + jc + jr, ldc,
                             static_cast<int>(std::min<int64_t>(kNR, nc - jr)), alpha, beta_block);
      });
}

}  // namespace

bool avx512_bf16_usable() {
  __builtin_cpu_init();  // may run before the library's constructors
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

void gemm_avx512_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                      int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta,
                      float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  bf16_pairs::run_threaded(gemm_serial, kMR, kNR, kParallelWork, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a,
                           b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}

}  // namespace sf::kernels
#endif  // __x86_64__
