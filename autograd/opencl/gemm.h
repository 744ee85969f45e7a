// The OpenCL GEMM: the tilings of its kernels (shared by their programs, as -D
// options, and the launcher) and the table entry.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "../kernels/kernels.h"

namespace sf::opencl_backend {

using kernels::Mem;

// A tiling of the tiled kernel (kernels/gemm_tiled.cl), for GPU shapes: a
// work-group of lx x ly items computes a tm x tn tile of C, each item a
// wm x wn block of it, stepping through k tk at a time with both panels
// double-buffered in local memory. The kernel moves panels in float4s, so
// wm, wn and tk are multiples of 4 and each panel splits evenly into float4s
// over the items.
struct Tiling {
  int lx, ly, wm, wn, tk;
  constexpr int tm() const { return ly * wm; }
  constexpr int tn() const { return lx * wn; }
  constexpr int items() const { return lx * ly; }
  // Its two double-buffered panels, each row padded by 4 floats.
  constexpr size_t local_bytes() const { return 2 * size_t(tk) * (tm() + 4 + tn() + 4) * sizeof(float); }
};

// The candidates the tuner (gemm_tuning.h) times on a device: 64 to 128 wide
// tiles, 4x4 to 8x8 per item, k steps of 8 or 16. The first is the old
// fixed tiling, the fallback where none has been chosen.
inline constexpr Tiling kTilings[] = {
    {16, 16, 4, 4, 16},  // 64x64x16, 4x4 per item
    {8, 8, 8, 8, 8},     // 64x64x8, 8x8
    {8, 8, 8, 8, 16},    // 64x64x16, 8x8
    {16, 16, 8, 4, 16},  // 128x64x16, 8x4
    {16, 8, 8, 8, 16},   // 64x128x16, 8x8
    {16, 16, 8, 8, 8},   // 128x128x8, 8x8
    {16, 16, 8, 8, 16},  // 128x128x16, 8x8
};
inline constexpr size_t kTilingCount = sizeof kTilings / sizeof kTilings[0];

// "128x128x16-8x8": tm x tn x tk, then wm x wn (what
// SCRATCHFORMER_OPENCL_GEMM_TILING names and the tuning cache records).
std::string tiling_name(const Tiling& tiling);

// Split k. A product whose C has few tiles leaves most of a GPU idle while
// each work-group walks all of k: a weight gradient of 256 x 256 summed over
// 2048 tokens is 16 groups of 64 x 64 on an H200's 132 compute units. Such a
// product (one matrix, fewer tiles than 2 per compute unit) runs as `slices`
// products over slices of k, as many as bring it to about 8 groups per compute
// unit, each slice a multiple of 4 (aligned float4 loads) and at least
// kMinSliceK deep, and a sum of their results (gemm_launch.cpp). 1: not split.
inline constexpr int64_t kMinSliceK = 64;
int64_t k_slices(int64_t tiles, int64_t k, int64_t batch, int64_t compute_units);

// The blocked kernel (kernels/gemm_blocked.cl), for CPU shapes: one work-item per
// RM x BN block of C, kept in RM x NV vectors of VW floats (VW = 16: one
// AVX-512 register). The accumulators, NV vectors of op(B) and one broadcast
// value of op(A) must fit the 32 vector registers: RM NV + NV + 1 <= 32.
struct Blocked {
  static constexpr int VW = 16;
  int rm, nv;
  constexpr int bn() const { return nv * VW; }
};

// The blockings the launcher chooses from, by n: wide for most products,
// medium and narrow for C's of at most a few vectors per row (attention's
// per-head products), where a wide block would mostly compute padding.
enum BlockingIndex { kWide, kMedium, kNarrow };
inline constexpr Blocked kBlockings[] = {{6, 4}, {8, 2}, {16, 1}};

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, Mem<const float> a,
          int64_t lda, int64_t stride_a, Mem<const float> b, int64_t ldb, int64_t stride_b, float beta,
          Mem<float> c, int64_t ldc, int64_t stride_c, int64_t batch);

// gemm's product by the tiled kernel in kTilings[tiling] (k split as
// k_slices says), whatever the shapes (for the tests and the tuner).
void tiled_gemm(size_t tiling, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                Mem<const float> a, int64_t lda, int64_t stride_a, Mem<const float> b, int64_t ldb,
                int64_t stride_b, float beta, Mem<float> c, int64_t ldc, int64_t stride_c, int64_t batch);

}  // namespace sf::opencl_backend
