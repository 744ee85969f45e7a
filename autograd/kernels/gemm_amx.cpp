// The AMX-BF16 level of the bf16 GEMM (gemm.h: Bf16Gemm::kAmxBf16), for
// Intel CPUs with Advanced Matrix Extensions (Sapphire Rapids and later).
//
// AMX adds eight tile registers, each up to 16 rows of 64 bytes, and a matrix
// unit. One TDPBF16PS multiplies a 16 x 32 bf16 tile of A by a 32 x 16 tile of
// B held in pairs (bf16_pairs.h: row q of the tile is pair q of k, 16 words)
// and adds the result into a 16 x 16 float32 tile of C:
//
//   C[i, j] += sum over q < 16 of  A[i, 2q] B[2q, j] + A[i, 2q+1] B[2q+1, j]
//
// 8,192 multiply-adds in one instruction, where VDPBF16PS does 32: the reason
// bf16 pays on Intel only with AMX (docs/13-bf16.md).
//
// The micro-kernel computes a 32 x 32 block of C in four C tiles (0-3), from
// two A tiles (4, 5: rows 0-15 and 16-31) and two B tiles (6, 7: columns 0-15
// and 16-31), 32 values of k per step: each loaded tile is used twice. The
// loop structure around it is the AVX512-BF16 level's (gemm_bf16.cpp): B packed
// into pairs per KC x NC block, here with k padded with zero pairs to whole
// steps of 32. A tile's rows must be contiguous along k, so each 32-row panel
// of op(A) is packed row-major, zero-padded to 32 rows and to the padded KC,
// once per B block. Always: reading a row-major A in place measured 25% slower
// at 1024^3 (its rows, 2 KB apart, fall on the same cache sets).
//
// The tiles are read back through memory: C tiles are stored to a 32 x 32
// float buffer, and alpha, beta and the edges are applied there, so the tile
// configuration never changes (every tile 16 rows x 64 bytes).
//
// Linux gives a process the tile registers' 8 KB of state only on request
// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux 5.16 on):
// without it the first tile instruction kills the process, so the level counts
// as supported only once the request succeeded.
//
// x86-64 only: elsewhere this file compiles to nothing (gemm.h lists the
// levels each architecture has).
#if defined(__x86_64__)
#include <cpuid.h>

#include <cstring>

#include "base/platform.h"
#include "bf16_pairs_avx512.h"
#include "gemm.h"

namespace sf::kernels {
namespace {

using bf16_pairs::Operand;

#define SF_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

constexpr int kMR = 32, kNR = 32;
constexpr int kStep = 32;  // k per tile step: 16 pairs
// The B block, KC x NC bf16: 512 x 512 is 512 KB, a quarter of the L2 of the
// first AMX cores (2 MB), where it stays while every row panel of A passes
// over it. (KC 256 and 1024 measured slower at 1024^3 and 2048^3.)
constexpr int64_t kKC = 512;
constexpr int64_t kNC = 512;
// Below this many multiply-adds a product runs on the calling thread: 2^21
// takes the AMX kernel about as long as 2^19 takes the AVX512-BF16 one.
constexpr int64_t kParallelWork = int64_t{1} << 21;

// The LDTILECFG operand (Intel SDM, "Tile configuration"): palette 1, then
// each tile's bytes per row and rows.
struct TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Every tile 16 rows of 64 bytes: 16 floats, or 32 bf16 (16 pairs).
SF_AMX void configure_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

// out[0:32, 0:32] = A panel * B panel over `steps` steps of 32 k. Row r of the
// A panel starts at a + r * a_ld (bf16 elements); the B panel holds kNR words
// per pair.
SF_AMX void tile_block(int64_t steps, const bf16* a, int64_t a_ld, const uint32_t* b, float* out) {
  const int64_t a_stride = a_ld * static_cast<int64_t>(sizeof(bf16));
  constexpr int64_t b_stride = kNR * sizeof(uint32_t), out_stride = kNR * sizeof(float);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t s = 0; s < steps; ++s) {
    const bf16* a_s = a + s * kStep;
    const uint32_t* b_s = b + s * (kStep / 2) * kNR;
    _tile_loadd(4, a_s, a_stride);
    _tile_loadd(5, a_s + 16 * a_ld, a_stride);
    _tile_loadd(6, b_s, b_stride);
    _tile_loadd(7, b_s + 16, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, out_stride);
  _tile_stored(1, out + 16, out_stride);
  _tile_stored(2, out + 16 * kNR, out_stride);
  _tile_stored(3, out + 16 * kNR + 16, out_stride);
}

// C[0:rows, 0:cols] = alpha * block + beta * C; beta == 0 never reads C.
SF_AMX void store_block(const float* block, int rows, int cols, float alpha, float beta, float* c, int64_t ldc) {
  const __mmask16 lo = bf16_pairs::first_lanes(cols), hi = bf16_pairs::first_lanes(cols - 16);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    __m512 out_lo = _mm512_mul_ps(va, _mm512_load_ps(block + r * kNR));
    __m512 out_hi = _mm512_mul_ps(va, _mm512_load_ps(block + r * kNR + 16));
    if (beta != 0.0f) {
      out_lo = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(lo, row), out_lo);
      out_hi = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(hi, row + 16), out_hi);
    }
    _mm512_mask_storeu_ps(row, lo, out_lo);
    _mm512_mask_storeu_ps(row + 16, hi, out_hi);
  }
}

// op(A)[0:rows, 0:kc] into panel[r * kc_pad + p], zeros past rows and kc. A
// transposed A's rows are its columns: pairs of its rows interleaved into
// words (bf16_pairs::pack_pairs, 16 columns at a time), then each 16 x 16
// block of words transposed so that a row of the panel holds one row of op(A).
SF_AMX void pack_a(const Operand& a, int rows, int64_t kc, int64_t kc_pad, bf16* panel) {
  if (!a.trans) {
    for (int r = 0; r < kMR; ++r) {
      bf16* out = panel + r * kc_pad;
      const int64_t copied = r < rows ? kc : 0;
      if (copied) std::memcpy(out, a.at(r, 0), copied * sizeof(bf16));
      std::memset(out + copied, 0, (kc_pad - copied) * sizeof(bf16));
    }
    return;
  }
  alignas(64) uint32_t words[kStep / 2 * 16];
  const Operand by_k{a.data, a.ld, false};  // row p of memory is column p of op(A)
  for (int r0 = 0; r0 < kMR; r0 += 16) {
    const int cols = std::max(0, std::min(16, rows - r0));
    for (int64_t p0 = 0; p0 < kc_pad; p0 += kStep) {
      const int64_t depth = std::max<int64_t>(0, std::min<int64_t>(kStep, kc - p0));
      __m512i v[16];
      if (depth > 0 && cols > 0) {
        bf16_pairs::pack_pairs<16>(by_k.sub(p0, r0), depth, cols, words);
        const int64_t pairs = (depth + 1) / 2;
        for (int q = 0; q < 16; ++q) v[q] = q < pairs ? _mm512_load_si512(words + q * 16) : _mm512_setzero_si512();
        bf16_pairs::transpose_16x16(v);
      } else {
        for (int q = 0; q < 16; ++q) v[q] = _mm512_setzero_si512();
      }
      for (int i = 0; i < 16; ++i) _mm512_storeu_si512(panel + (r0 + i) * kc_pad + p0, v[i]);
    }
  }
}

struct Buffers {
  gemm_tasks::AlignedBuffer<uint32_t> b_block;
  gemm_tasks::AlignedBuffer<bf16> a_panel;
  gemm_tasks::AlignedBuffer<float> c_block;
};
thread_local Buffers t_buffers;

// One product on the calling thread, k > 0: the loops of gemm_bf16.cpp's
// gemm_serial around 32 x 32 tile blocks.
SF_AMX void gemm_serial(const Operand& a, const Operand& b, int64_t m, int64_t n, int64_t k, float alpha,
                        float beta, float* c, int64_t ldc) {
  const int64_t nc_max = gemm_tasks::block_size(n, kNC, kNR);
  const int64_t kc_max = gemm_tasks::block_size(k, kKC, kStep);
  uint32_t* b_block = t_buffers.b_block.get(kc_max / 2 * nc_max);
  bf16* a_panel = t_buffers.a_panel.get(kMR * kc_max);
  float* block = t_buffers.c_block.get(kMR * kNR);
  configure_tiles();
  for (int64_t jc = 0; jc < n; jc += nc_max) {
    const int64_t nc = std::min(nc_max, n - jc);
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, k - pc);
      const int64_t kc_pad = (kc + kStep - 1) / kStep * kStep, pairs = kc_pad / 2, filled = (kc + 1) / 2;
      const float beta_block = pc == 0 ? beta : 1.0f;  // later K blocks accumulate
      for (int64_t jr = 0; jr < nc; jr += kNR) {
        uint32_t* panel = b_block + jr * pairs;
        bf16_pairs::pack_pairs<kNR>(b.sub(pc, jc + jr), kc, static_cast<int>(std::min<int64_t>(kNR, nc - jr)),
                                    panel);
        std::memset(panel + filled * kNR, 0, (pairs - filled) * kNR * sizeof(uint32_t));
      }
      for (int64_t ir = 0; ir < m; ir += kMR) {
        const int rows = static_cast<int>(std::min<int64_t>(kMR, m - ir));
        pack_a(a.sub(ir, pc), rows, kc, kc_pad, a_panel);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          tile_block(kc_pad / kStep, a_panel, kc_pad, b_block + jr * pairs, block);
          store_block(block, rows, static_cast<int>(std::min<int64_t>(kNR, nc - jr)), alpha, beta_block,
                      c + ir * ldc + jc + jr, ldc);
        }
      }
    }
  }
  _tile_release();
}

#undef SF_AMX

}  // namespace

bool amx_bf16_usable() {
  static const bool usable = [] {
    __builtin_cpu_init();  // may run before the library's constructors
    // CPUID leaf 7: EDX bit 22 is AMX-BF16, bit 24 AMX-TILE (Intel SDM; read
    // directly, as Clang's __builtin_cpu_supports does not know them).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool amx = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx >> 22 & 1) && (edx >> 24 & 1);
    if (!amx || !__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl"))
      return false;
    return platform::request_amx_tiles();
  }();
  return usable;
}

void gemm_amx_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                   int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                   int64_t ldc, int64_t stride_c, int64_t batch) {
  bf16_pairs::run_threaded(gemm_serial, kMR, kNR, kParallelWork, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a,
                           b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}

}  // namespace sf::kernels
#endif  // __x86_64__
