// What the NEON micro-kernels of the float32 GEMM (gemm.cpp) and of the bf16
// one (gemm_bf16_neon.cpp) share: their tile's rows are 12 floats, three
// vectors, and leaving one in C. AArch64 only.
#pragma once
#include <arm_neon.h>

#include <algorithm>

namespace sf::kernels::neon_tile {

inline constexpr int kColumns = 12;

// C's row (cr) = alpha * acc + beta * C over its first `cols` of 12 columns;
// beta == 0 never reads C. NEON has no masked loads or stores: a partial
// row goes through a full-width copy.
inline void store_row(const float32x4_t (&acc)[3], float* cr, int cols, float alpha, float beta) {
  float row[kColumns] = {};
  float* out = cols == kColumns ? cr : row;
  if (beta != 0.0f && cols < kColumns) std::copy_n(cr, cols, row);
  const float32x4_t va = vdupq_n_f32(alpha), vb = vdupq_n_f32(beta);
#pragma GCC unroll 3
  for (int j = 0; j < 3; ++j) {
    float32x4_t o = vmulq_f32(va, acc[j]);
    if (beta != 0.0f) o = vfmaq_f32(o, vb, vld1q_f32(out + 4 * j));
    vst1q_f32(out + 4 * j, o);
  }
  if (cols < kColumns) std::copy_n(row, cols, cr);
}

}  // namespace sf::kernels::neon_tile
