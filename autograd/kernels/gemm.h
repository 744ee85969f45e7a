// Single-precision matrix multiply, the contract of `Table::gemm` (kernels.h):
//
//   C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C        (row-major)
//
// op(A) is A ([m,k], leading dimension lda) or, with trans_a, A^T where A is
// stored [k,m]; likewise op(B) is B ([k,n]) or, with trans_b, B^T with B stored
// [n,k]. `batch` independent products, operand i at base + i * stride; a stride
// may be 0 (e.g. a weight shared by the batch). beta == 0 never reads C, so C
// may hold NaN or uninitialised memory. k == 0 or alpha == 0 gives C = beta * C.
#pragma once
#include <cstdint>

#include "bf16.h"

namespace sf::kernels {

// Cache-blocked, packed, SIMD, multi-threaded (uses the kernels thread pool).
// The reference, scalar::gemm (kernels.h), is the plain triple loop.
namespace fast {
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc,
          int64_t stride_c, int64_t batch);

// The same contract with every element of A and B rounded to bf16 as it is
// read (kernels.h: gemm_rounded_bf16): the packing that copies them for the
// micro-kernel rounds them on the way, so the rounding costs no pass of its
// own over memory.
void gemm_rounded_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                       int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta,
                       float* c, int64_t ldc, int64_t stride_c, int64_t batch);

// The same contract on bf16 operands (kernels.h: gemm_bf16), float32 C, with
// the implementation below that fits the CPU (gemm_bf16_levels.cpp).
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
               int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta, float* c,
               int64_t ldc, int64_t stride_c, int64_t batch);
}  // namespace fast

// The implementations of fast::gemm_bf16, one per instruction set. Unlike the
// float32 kernels' SIMD width, fixed when the library is compiled, this one is
// chosen when the program runs, by what the CPU reports (CPUID on x86, the
// operating system's hardware capabilities on ARM): each architecture's levels
// are compiled into every build for it and run only on a CPU that has the
// instructions. Only these instruction sets' levels multiply faster than
// float32 does; other architectures have the portable level alone.
enum class Bf16Gemm {
  kPortable,    // widened to float32 (exactly) and multiplied by fast::gemm
  kAvx512Bf16,  // x86: VDPBF16PS, 32 bf16 multiply-adds per instruction
  kAmxBf16,     // x86: AMX tiles, TDPBF16PS: 8,192 per instruction (Intel, Sapphire Rapids on)
  kNeonBf16,    // AArch64: BFDOT, 8 per instruction, twice FMLA's 4 (Armv8.6-A, Apple M2 on)
};
// The levels this build has, slowest first.
#if defined(__x86_64__)
inline constexpr Bf16Gemm kBf16Gemms[] = {Bf16Gemm::kPortable, Bf16Gemm::kAvx512Bf16, Bf16Gemm::kAmxBf16};
#elif defined(__aarch64__)
inline constexpr Bf16Gemm kBf16Gemms[] = {Bf16Gemm::kPortable, Bf16Gemm::kNeonBf16};
#else
inline constexpr Bf16Gemm kBf16Gemms[] = {Bf16Gemm::kPortable};
#endif
const char* to_string(Bf16Gemm level);
bool cpu_supports(Bf16Gemm level);
// The implementation fast::gemm_bf16 runs: the fastest this CPU supports,
// unless SCRATCHFORMER_BF16_GEMM names another or it is set (tests and
// benchmarks run each). Setting one the CPU lacks returns false and changes
// nothing.
Bf16Gemm bf16_gemm();
bool set_bf16_gemm(Bf16Gemm level);
// Why a CPU of this architecture may have only the portable level, in a few
// words for the log ("no AMX; ...").
const char* why_no_faster_bf16_gemm();

#if defined(__x86_64__)
// The x86 levels (gemm_bf16.cpp: AVX512-BF16, gemm_amx.cpp: AMX): whether
// this CPU and this operating system let the process run the level, and its
// product (gemm.h's contract, k > 0).
bool avx512_bf16_usable();
void gemm_avx512_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                      int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta,
                      float* c, int64_t ldc, int64_t stride_c, int64_t batch);
bool amx_bf16_usable();
void gemm_amx_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                   int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                   int64_t ldc, int64_t stride_c, int64_t batch);
#elif defined(__aarch64__)
// The AArch64 level (gemm_bf16_neon.cpp: BFDOT), as the x86 ones above.
bool neon_bf16_usable();
void gemm_neon_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                    int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta,
                    float* c, int64_t ldc, int64_t stride_c, int64_t batch);
#endif

}  // namespace sf::kernels
