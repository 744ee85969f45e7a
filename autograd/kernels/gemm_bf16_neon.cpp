// The AArch64 level of the bf16 GEMM (gemm.h: Bf16Gemm::kNeonBf16), for ARM
// CPUs with the BF16 extension (Armv8.6-A; Apple M2 on, Neoverse V1 on),
// compiled on AArch64 only: the choice among the levels is
// gemm_bf16_levels.cpp.
//
// It is gemm.cpp's NEON kernel with one change of arithmetic. BFDOT by
// element takes a vector of 4 bf16 pairs and one pair of another vector (its
// lane l), and adds into each of 4 float32 lanes the pair's dot product:
//
//   acc[i] += b[2i] * a[2l] + b[2i+1] * a[2l+1]        (i = 0..3)
//
// as VDPBF16PS does on x86 (gemm_bf16.cpp), so the micro-kernel steps through
// k two at a time over B in pairs (bf16_pairs.h), 4 columns a vector. The
// tile is the float32 kernel's 8 x 12: per pair of k it loads 3 vectors of B
// (12 columns) and 2 of A (8 rows' pairs, row r in lane r % 4), and does 24
// BFDOTs: 192 multiply-adds where 24 FMLAs do 96.
//
// BFDOT's own arithmetic (the Arm ARM's BFDotAdd): products of bf16 are exact
// in float32, each sum is rounded to odd, and values below float32's normal
// range count as zero, so a result may differ from float32's sum in its last
// bit: gemm_bf16's contract allows what the x86 levels already do.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "base/platform.h"
#include "bf16_pairs.h"
#include "gemm.h"
#include "neon_tile.h"

// Code compiled for the BF16 extension whatever the build's -march, and called
// only where the CPU has it (neon_bf16_usable). GCC's arm_neon.h declares the
// BF16 intrinsics for Armv8.2-A + BF16 (every CPU with BF16 is at least
// that), and a function may call them only with at least those features.
// (Clang declares them for such functions from Clang 16, Apple clang 15.)
#if defined(__clang__)
#define SF_ARM_BF16 __attribute__((target("bf16")))
#else
#define SF_ARM_BF16 __attribute__((target("arch=armv8.2-a+bf16")))
#endif

namespace sf::kernels {
namespace {

using bf16_pairs::Operand;

constexpr int kMR = 8;
constexpr int kNR = neon_tile::kColumns;
// The B block, KC x NC bf16: 1024 x 480 is 960 KB, the float32 kernel's
// 512 x 512 floats in bytes (about 1 MB, an L2's share on the cores that
// have BF16), with as many pairs per pass as that kernel has steps of k.
constexpr int64_t kKC = 1024;
constexpr int64_t kNC = 480;  // whole tiles of 12 columns
// Below this many multiply-adds a product runs on the calling thread (the
// AVX512-BF16 level's threshold).
constexpr int64_t kParallelWork = int64_t{1} << 19;

// ---------------------------------------------------------------------------
// Packing into pairs: words[q * width + c] = (x[2q, c], x[2q+1, c]) for the
// pairs q of kc rows and the columns c < width of op(X), with a zero bf16 for
// row kc when kc is odd and for the columns from `cols` on. B's panels are 12
// words a pair of k; an A panel is op(A) seen transposed (its rows become
// columns), 8 words a pair.

// op(X) = X: rows 2q and 2q+1 interleaved, element by element, which is what
// ZIP1/ZIP2 do to two vectors of 8 bf16.
void pack_row_pairs(const Operand& x, int64_t kc, int cols, int width, uint32_t* words) {
  const uint16x8_t zero = vdupq_n_u16(0);
  for (int64_t q = 0; 2 * q < kc; ++q) {
    const uint16_t* even = reinterpret_cast<const uint16_t*>(x.at(2 * q, 0));
    const uint16_t* odd = 2 * q + 1 < kc ? reinterpret_cast<const uint16_t*>(x.at(2 * q + 1, 0)) : nullptr;
    uint32_t* out = words + q * width;
    int c = 0;
    for (; c + 8 <= cols; c += 8) {
      const uint16x8_t e = vld1q_u16(even + c), o = odd ? vld1q_u16(odd + c) : zero;
      vst1q_u16(reinterpret_cast<uint16_t*>(out + c), vzip1q_u16(e, o));
      vst1q_u16(reinterpret_cast<uint16_t*>(out + c + 4), vzip2q_u16(e, o));
    }
    for (; c < cols; ++c) out[c] = even[c] | (odd ? uint32_t{odd[c]} << 16 : 0u);
    std::fill(out + cols, out + width, 0u);
  }
}

// op(X) = X^T: column c of op(X) is row c of X, so its pair q is already the
// 32-bit word at 2q of that row; an odd kc's last pair is read as one bf16
// (a word would read past the row).
void pack_column_pairs(const Operand& x, int64_t kc, int cols, int width, uint32_t* words) {
  const int64_t whole_pairs = kc / 2, pairs = (kc + 1) / 2;
  for (int c = 0; c < width; ++c) {
    if (c >= cols) {
      for (int64_t q = 0; q < pairs; ++q) words[q * width + c] = 0;
      continue;
    }
    const bf16* row = x.data + c * x.ld;
    for (int64_t q = 0; q < whole_pairs; ++q) std::memcpy(&words[q * width + c], row + 2 * q, sizeof(uint32_t));
    if (kc % 2 != 0) words[whole_pairs * width + c] = row[kc - 1].bits;
  }
}

void pack_pairs(const Operand& x, int64_t kc, int cols, int width, uint32_t* words) {
  if (x.trans)
    pack_column_pairs(x, kc, cols, width, words);
  else
    pack_row_pairs(x, kc, cols, width, words);
}

// ---------------------------------------------------------------------------
// The micro-kernel: C[0:R, 0:cols] = alpha * A panel * B panel + beta * C over
// `pairs` pairs of k, both panels packed (kMR and kNR words per pair). beta
// == 0 never reads C.

// One pair of k for row r of the tile: its pair of A is lane r % 4 of a_lo
// (rows 0-3) or a_hi (rows 4-7), a constant, as BFDOT by element needs it.
template <int r, int R>
SF_ARM_BF16 inline void row_step(float32x4_t (&acc)[R][3], bfloat16x8_t b0, bfloat16x8_t b1, bfloat16x8_t b2,
                                 bfloat16x8_t a_lo, bfloat16x8_t a_hi) {
  const bfloat16x8_t ar = r < 4 ? a_lo : a_hi;
  acc[r][0] = vbfdotq_laneq_f32(acc[r][0], b0, ar, r % 4);
  acc[r][1] = vbfdotq_laneq_f32(acc[r][1], b1, ar, r % 4);
  acc[r][2] = vbfdotq_laneq_f32(acc[r][2], b2, ar, r % 4);
}

// row_step for each row r... of the tile.
template <int R, int... r>
SF_ARM_BF16 inline void pair_step(float32x4_t (&acc)[R][3], bfloat16x8_t b0, bfloat16x8_t b1, bfloat16x8_t b2,
                                  bfloat16x8_t a_lo, bfloat16x8_t a_hi, std::integer_sequence<int, r...>) {
  (row_step<r>(acc, b0, b1, b2, a_lo, a_hi), ...);
}

template <int R>
SF_ARM_BF16 void micro_kernel(int64_t pairs, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int cols,
                              float alpha, float beta) {
  float32x4_t acc[R][3];  // columns 0-3, 4-7 and 8-11 of each row
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = acc[r][2] = vdupq_n_f32(0.0f);
  for (int64_t q = 0; q < pairs; ++q) {
    const uint32_t* bq = b + q * kNR;
    const bfloat16x8_t b0 = vreinterpretq_bf16_u32(vld1q_u32(bq)), b1 = vreinterpretq_bf16_u32(vld1q_u32(bq + 4)),
                       b2 = vreinterpretq_bf16_u32(vld1q_u32(bq + 8));
    const bfloat16x8_t a_lo = vreinterpretq_bf16_u32(vld1q_u32(a + q * kMR));
    const bfloat16x8_t a_hi = R > 4 ? vreinterpretq_bf16_u32(vld1q_u32(a + q * kMR + 4)) : a_lo;
    pair_step(acc, b0, b1, b2, a_lo, a_hi, std::make_integer_sequence<int, R>{});
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) neon_tile::store_row(acc[r], c + r * ldc, cols, alpha, beta);
}

using MicroKernel = void (*)(int64_t, const uint32_t*, const uint32_t*, float*, int64_t, int, float, float);
// [r - 1] computes a tile of r rows.
constexpr auto kKernels = gemm_tasks::kernels_by_rows<MicroKernel, kMR>([](auto r) { return &micro_kernel<r>; });

thread_local gemm_tasks::AlignedBuffer<uint32_t> t_pack_a;

// One product on the calling thread, k > 0: B packed into pairs per KC x NC
// block (bf16_pairs::blocked_product), and each 8-row panel of A into pairs
// once per block.
void gemm_serial(const Operand& a, const Operand& b, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                 float* c, int64_t ldc) {
  uint32_t* a_panel = t_pack_a.get((kKC / 2 + 1) * kMR);
  const auto pack_b = [](const Operand& x, int64_t kc, int cols, uint32_t* words) {
    pack_pairs(x, kc, cols, kNR, words);
  };
  bf16_pairs::blocked_product(
      b, m, n, k, kMR, kNR, kKC, kNC, beta, pack_b,
      [&](int64_t ir, int rows, int64_t pc, int64_t kc, int64_t jc, int64_t nc, float beta_block,
          const uint32_t* b_block) {
        pack_pairs(Operand{a.at(ir, pc), a.ld, !a.trans}, kc, rows, kMR, a_panel);
        const int64_t pairs = (kc + 1) / 2;
        for (int64_t jr = 0; jr < nc; jr += kNR)
          kKernels[rows - 1](pairs, a_panel, b_block + jr * pairs, c + ir * ldc + jc + jr, ldc,
                             static_cast<int>(std::min<int64_t>(kNR, nc - jr)), alpha, beta_block);
      });
}

}  // namespace

bool neon_bf16_usable() { return platform::arm_bf16_instructions(); }

void gemm_neon_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                    int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta,
                    float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  bf16_pairs::run_threaded(gemm_serial, kMR, kNR, kParallelWork, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a,
                           b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}

}  // namespace sf::kernels
#endif  // __aarch64__
